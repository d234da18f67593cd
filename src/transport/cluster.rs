//! Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port…]`
//! (`rediss+cluster://` for TLS). Commands go to the node owning their
//! keys' slot; wake-ups use sharded pub/sub (SSUBSCRIBE, and SPUBLISH inside
//! the release scripts), so a release is announced on its own shard only,
//! not broadcast to every node.

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, TlsCertificates};
use tokio::sync::mpsc::UnboundedReceiver;

/// The shortest and longest pause (ms) before the connection retries a
/// command inside itself (after CLUSTERDOWN, TRYAGAIN, a slot not found).
const RETRY_WAIT_MS: (u64, u64) = (10, 100);

/// The share of the connect timeout one node's connection may take.
const NODE_CONNECT_SHARE: u32 = 3;

/// Where a Cluster is (its seed nodes) and how to reach it.
pub(crate) struct ClusterTarget {
    /// One URL per seed node, credentials included.
    nodes: Vec<String>,
    certs: Option<TlsCertificates>,
}

impl ClusterTarget {
    /// Parses what follows the scheme; returns the target and the URL to show
    /// (without credentials).
    pub(crate) fn parse(rest: &str, tls: bool) -> Result<(ClusterTarget, String), String> {
        let (auth, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !matches!(path, "" | "0") {
            return Err(format!("a Redis Cluster has database 0 only, not {path:?}"));
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let credentials = auth.map_or(String::new(), |a| format!("{a}@"));
        let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
        if hosts.is_empty() {
            return Err("no node address given".into());
        }
        let mut nodes = Vec::with_capacity(hosts.len());
        for host in &hosts {
            let url = format!("{scheme}://{credentials}{host}");
            redis::Client::open(url.as_str()).map_err(|e| format!("bad node address {host:?}: {e}"))?;
            nodes.push(url);
        }
        let display = format!("{scheme}+cluster://{}", hosts.join(","));
        Ok((ClusterTarget { nodes, certs: None }, display))
    }

    /// Trust these certificate authorities (PEM) for `rediss+cluster://`.
    pub(crate) fn with_ca(mut self, pem: Vec<u8>) -> ClusterTarget {
        self.certs = Some(TlsCertificates { client_tls: None, root_cert: Some(pem) });
        self
    }

    fn builder(&self, connect_timeout: Duration, command_timeout: Duration) -> ClusterClientBuilder {
        // Few retries inside the connection, and short pauses between them
        // (redis-rs waits 1.28 s at least by default): callers (the watchdog,
        // acquire loops) retry on their own schedule, so a dead node is
        // reported soon, and a promoted replica is found within a pause.
        // Connecting opens a connection to every seed node, then to every
        // node of the slot map, each set waited for whole: a node that does
        // not answer (cut off by a partition) gets a third of the budget
        // each time, so the client still connects through the others within
        // `connect_timeout`.
        let builder = ClusterClientBuilder::new(self.nodes.clone())
            .connection_timeout(connect_timeout / NODE_CONNECT_SHARE)
            .response_timeout(command_timeout)
            .retries(2)
            .min_retry_wait(RETRY_WAIT_MS.0)
            .max_retry_wait(RETRY_WAIT_MS.1);
        match &self.certs {
            Some(certs) => builder.certs(certs.clone()),
            None => builder,
        }
    }

    /// The connection commands run on: multiplexed, one per node, following
    /// slot moves and reconnecting by itself.
    pub(crate) async fn connect(
        &self,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> redis::RedisResult<ClusterConnection> {
        let client: ClusterClient = self.builder(connect_timeout, command_timeout).build()?;
        client.get_async_connection().await
    }

    /// A connection for sharded subscriptions (RESP3): its pushes (messages,
    /// and a disconnection notice) arrive on the receiver.
    pub(crate) async fn subscriber(
        &self,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> redis::RedisResult<(ClusterConnection, UnboundedReceiver<PushInfo>)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = self
            .builder(connect_timeout, command_timeout)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx)
            .build()?;
        Ok((client.get_async_connection().await?, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls() {
        let (t, shown) = ClusterTarget::parse("u:pw@10.0.0.1:7000,10.0.0.2:7001/", false).unwrap();
        assert_eq!(t.nodes, ["redis://u:pw@10.0.0.1:7000", "redis://u:pw@10.0.0.2:7001"]);
        assert_eq!(shown, "redis+cluster://10.0.0.1:7000,10.0.0.2:7001");
        let (t, shown) = ClusterTarget::parse("h:7000", true).unwrap();
        assert_eq!((t.nodes[0].as_str(), shown.as_str()), ("rediss://h:7000", "rediss+cluster://h:7000"));
        assert!(ClusterTarget::parse("h:7000/3", false).err().unwrap().contains("database 0"));
        assert!(ClusterTarget::parse("", false).is_err());
    }
}
