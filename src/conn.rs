//! What a command runs on: one node's self-reconnecting connection, or a
//! Redis Cluster connection that routes each command to the node owning its
//! first key's slot (every script's keys share one hash tag).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, Value};

#[derive(Clone)]
pub(crate) enum Conn {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Node(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Node(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// Every key matching `pattern`, found with SCAN (never KEYS, which
    /// blocks the server): on a Cluster, on each master in turn.
    pub(crate) async fn scan_match(&mut self, pattern: &str) -> redis::RedisResult<Vec<Vec<u8>>> {
        match self {
            Conn::Node(c) => {
                let node = c.clone();
                scan_node(pattern, |cmd| {
                    let mut node = node.clone();
                    async move { cmd.query_async(&mut node).await }
                })
                .await
            }
            Conn::Cluster(c) => {
                let mut found = Vec::new();
                for (host, port) in masters(c).await? {
                    let conn = c.clone();
                    found.extend(
                        scan_node(pattern, |cmd| {
                            let mut conn = conn.clone();
                            let at = SingleNodeRoutingInfo::ByAddress { host: host.clone(), port };
                            async move { conn.route_command(cmd, RoutingInfo::SingleNode(at)).await }
                        })
                        .await?,
                    );
                }
                Ok(found)
            }
        }
    }
}

/// SCAN one node to the end; `send` runs one command there.
async fn scan_node<F, Fut>(pattern: &str, mut send: F) -> redis::RedisResult<Vec<Vec<u8>>>
where
    F: FnMut(Cmd) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<Value>>,
{
    let (mut cursor, mut found) = (0u64, Vec::new());
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000);
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::from_redis_value(send(cmd).await?)?;
        found.extend(keys);
        if next == 0 {
            return Ok(found);
        }
        cursor = next;
    }
}

/// The masters of a Cluster, from CLUSTER SLOTS: (host, port) of each, once.
async fn masters(c: &mut ClusterConnection) -> redis::RedisResult<Vec<(String, u16)>> {
    let reply = c
        .route_command(
            redis::cmd("CLUSTER").arg("SLOTS").clone(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?;
    let ranges: Vec<Vec<Value>> = redis::from_redis_value(reply)?;
    let mut out = Vec::new();
    for range in ranges {
        let Some(master) = range.get(2) else { continue };
        let (host, port): (String, u16) = match redis::from_redis_value_ref::<Vec<Value>>(master)?.as_slice()
        {
            [host, port, ..] => (redis::from_redis_value_ref(host)?, redis::from_redis_value_ref(port)?),
            _ => continue,
        };
        if !out.contains(&(host.clone(), port)) {
            out.push((host, port));
        }
    }
    Ok(out)
}
