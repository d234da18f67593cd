//! What a command runs on: one node's self-reconnecting connection, a Redis
//! Cluster connection that routes each command to the node owning its first
//! key's slot (every script's keys share one hash tag), or a connection used
//! inline on the calling thread.
//!
//! Which one a call takes is said by the `Backend` it is made on (`Io`, see
//! `backend::call`): `Io::Multiplexed` (every client, and everything spawned:
//! renewals, clean-ups, wake-up listeners) or `Io::Inline`, a view for a
//! caller that blocks its own thread on the call until it ends (the Python
//! bindings' synchronous calls): `client.via(Io::Inline)`,
//! `Client::via(Io::Inline)`, and a handle's `Lock::via` / `Election::via` view.
//! A quorum's masters stay multiplexed under any view: a step goes to all
//! of them at once, which a blocking connection per call would turn into one
//! after another.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

#[derive(Clone)]
pub(crate) enum Conn {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
    /// Commands written and replies read on the calling thread.
    Inline(Arc<Inline>),
}

/// How a call's commands go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Io {
    /// On the multiplexed connection, driven by the runtime: for async
    /// callers and for everything spawned.
    #[default]
    Multiplexed,
    /// Written, and their replies read, on the calling thread, on a blocking
    /// connection from a per-process pool of at most `INLINE_MAX`: for a
    /// caller blocked on the call (`Runtime::block_on`), whose round trips
    /// then wake no runtime thread. Only a single plain (not TLS) server is
    /// reached so; other targets, a call made while the pool's connections
    /// are all in use, and one for which no connection opens at once, go
    /// multiplexed.
    Inline,
}

/// The most inline connections one process keeps to a server: as many
/// threads as this make synchronous calls at once each on its own
/// connection; more share the multiplexed one meanwhile. So a process never
/// holds more than this plus two (the multiplexed connection and the
/// wake-up subscription) whatever its number of threads (docs/design.md,
/// "Connections").
pub(crate) const INLINE_MAX: usize = 8;

/// The inline connections of one process: the idle ones, for any thread to
/// take, and how many are open (idle or in use), never over `INLINE_MAX`.
#[derive(Default)]
pub(crate) struct InlinePool {
    idle: Mutex<Vec<redis::Connection>>,
    open: Mutex<usize>,
}

impl InlinePool {
    /// An idle connection, or `open()`'s new one while fewer than
    /// `INLINE_MAX` are open; `None` when all are in use or none opens.
    pub(crate) fn take(self: &Arc<Self>, open: impl FnOnce() -> Option<redis::Connection>) -> Option<Inline> {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let conn = if let Some(conn) = idle {
            conn
        } else {
            {
                let mut count = self.open.lock().unwrap_or_else(PoisonError::into_inner);
                if *count >= INLINE_MAX {
                    return None;
                }
                *count += 1;
            }
            let Some(conn) = open() else {
                self.closed();
                return None;
            };
            conn
        };
        Some(Inline { conn: Mutex::new(Some(conn)), pool: self.clone() })
    }

    /// Closes the idle connections (those in use go when given back, with
    /// the pool, which the closed client's state no longer holds).
    pub(crate) fn clear(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        let mut count = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_sub(idle.len());
    }

    fn closed(&self) {
        let mut count = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_sub(1);
    }
}

/// A blocking connection taken from its pool for one operation; it goes back
/// when the operation is done, unless it failed (a connection that timed out
/// or broke may be out of step with the server: it is closed instead).
pub(crate) struct Inline {
    conn: Mutex<Option<redis::Connection>>,
    pool: Arc<InlinePool>,
}

impl Inline {
    fn run<T>(&self, f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>) -> RedisResult<T> {
        let mut slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(conn) = slot.as_mut() else {
            let closed =
                std::io::Error::new(std::io::ErrorKind::NotConnected, "the connection failed earlier");
            return Err(closed.into());
        };
        let result = f(conn);
        if let Err(e) = &result {
            if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                *slot = None;
            }
        }
        result
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        match self.conn.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            Some(conn) => self.pool.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn),
            None => self.pool.closed(),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Node(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Inline(c) => {
                let reply = c.run(|conn| redis::ConnectionLike::req_command(conn, cmd));
                Box::pin(std::future::ready(reply))
            }
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
            Conn::Inline(c) => {
                let packed = pipeline.get_packed_pipeline();
                let replies =
                    c.run(|conn| redis::ConnectionLike::req_packed_commands(conn, &packed, offset, count));
                Box::pin(std::future::ready(replies))
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Node(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Inline(c) => c.run(|conn| Ok(redis::ConnectionLike::get_db(conn))).unwrap_or(0),
        }
    }
}

/// When a step was sent: the moment its last command was handed to the
/// connection, after connecting (a first use, a reconnect before the call)
/// and after a script the server did not have was loaded. A hold's validity
/// runs from there.
#[derive(Default)]
pub(crate) struct SentAt(Mutex<Option<Instant>>);

impl SentAt {
    fn now(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    /// When the last command went out; `None` if none did.
    pub(crate) fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection that notes in its `SentAt` when it hands each command over.
pub(crate) struct Timed {
    conn: Conn,
    sent: Arc<SentAt>,
}

impl Conn {
    pub(crate) fn timed(self, sent: Arc<SentAt>) -> Timed {
        Timed { conn: self, sent }
    }
}

/// What a step runs on: a connection, or one noting when it sends
/// (`Timed`), with the connection under it for a command routed to a key's
/// node (loading a script is not the step's sending).
pub(crate) trait StepConn: ConnectionLike + Send {
    fn untimed(&mut self) -> &mut Conn;
}

impl StepConn for Conn {
    fn untimed(&mut self) -> &mut Conn {
        self
    }
}

impl StepConn for Timed {
    fn untimed(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

impl ConnectionLike for Timed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.sent.now();
        self.conn.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.sent.now();
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

impl Conn {
    /// Runs `cmd` where a command on `key` goes: on a Cluster, the master of
    /// the key's slot (for a command Redis does not route by a key, such as
    /// SCRIPT LOAD, which redis-rs would send to every node); elsewhere, here.
    pub(crate) async fn on_node_of(&mut self, key: &[u8], cmd: Cmd) -> RedisResult<Value> {
        match self {
            Conn::Cluster(c) => {
                let at = SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master));
                c.route_command(cmd, RoutingInfo::SingleNode(at)).await
            }
            _ => cmd.query_async(self).await,
        }
    }

    /// `cmd` on every node the client knows of, replicas too (one node: on
    /// it): on a Cluster whose slot map is behind a failover, the newly
    /// promoted master is among them as a replica. Nodes that fail it (a
    /// dead one) are left out: the answer is whether any took it.
    pub(crate) async fn on_every_node(&mut self, cmd: Cmd) -> RedisResult<()> {
        match self {
            Conn::Cluster(c) => {
                let every = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(redis::cluster_routing::ResponsePolicy::OneSucceeded),
                ));
                c.route_command(cmd, every).await.map(drop)
            }
            _ => cmd.query_async::<Value>(self).await.map(drop),
        }
    }

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
            Conn::Inline(c) => {
                let c = c.clone();
                scan_node(pattern, |cmd| {
                    let c = c.clone();
                    async move { c.run(|conn| cmd.query(conn)) }
                })
                .await
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
