//! The call path: what a command runs on (the multiplexed connection, or
//! an inline one on the calling thread), and its one retry after a dropped
//! connection.
//!
//! A `Backend` says which by its `Io`: a client is multiplexed, and
//! `client.via(Io::Inline)` is a view of it (the same connections, pools and
//! state) whose calls run inline. Views are for the caller's own awaits:
//! what is spawned (renewal, clean-ups, wake-up listeners) holds the
//! multiplexed client it was made from, never a view.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Backend, Target};
use crate::error::{Error, Result};
use crate::support::retry::Retry;
use crate::transport::conn::{Conn, Io, SentAt, Timed};

impl Backend {
    /// This client with its calls' commands sent as `io` says.
    #[must_use]
    pub fn via(&self, io: Io) -> Backend {
        Backend { inner: self.inner.clone(), io }
    }

    /// How this view's calls send their commands.
    pub fn io(&self) -> Io {
        self.io
    }

    /// Runs one operation on the connection. When the connection turns out to
    /// be dropped (a server restart, `CLIENT KILL`, a failover) it runs once
    /// more on a fresh one: every script is safe to repeat with the same token.
    /// In Sentinel mode a dropped connection is forgotten, so the next one goes
    /// to whichever node the Sentinels name master now.
    pub(crate) async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.call_noting_retry(op).await.map(|(v, _)| v)
    }

    /// `call`, and when the operation that answered was sent: its last
    /// command handed to a connection already open (see `SentAt`). What a
    /// hold's validity is measured from.
    pub(crate) async fn call_timed<T, F, Fut>(&self, op: F) -> Result<(T, Instant)>
    where
        F: Fn(Timed) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let sent = Arc::new(SentAt::default());
        let value = self.call(|conn| op(conn.timed(sent.clone()))).await?;
        // Every answer follows a command sent; `now` would only be later.
        Ok((value, sent.get().unwrap_or_else(Instant::now)))
    }

    /// `call`, and whether the operation was sent a second time (after a
    /// dropped connection, its first sending may or may not have run).
    pub(crate) async fn call_noting_retry<T, F, Fut>(&self, op: F) -> Result<(T, bool)>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let err = match op(self.call_conn().await?).await {
            Ok(v) => return Ok((v, false)),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading) => {
                return self.when_loaded(&op).await.map(|v| (v, false));
            }
            Err(e) => e,
        };
        if err.is_timeout() {
            self.unanswered();
            return Err(err.into());
        }
        let dropped = err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
            || matches!(err.code(), Some("READONLY" | "MASTERDOWN"));
        if self.inner.opts.client_name.is_some() && err.is_io_error() && !err.is_timeout() {
            // A broken connection the manager would reopen by itself, unnamed (see `forget_connection`).
            self.forget_connection();
        }
        if !dropped {
            return Err(err.into());
        }
        self.forget_connection();
        log::info!("connection to {} dropped ({err}); retrying once", self.inner.display);
        op(self.call_conn().await?).await.map(|v| (v, true)).map_err(|e| {
            self.forget_connection();
            if e.is_timeout() {
                self.unanswered();
            }
            e.into()
        })
    }

    /// A server that restarted answers LOADING while it reads its data back:
    /// nothing ran, so try again until it is done, within the command timeout.
    async fn when_loaded<T, F, Fut>(&self, op: &F) -> Result<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.inner.opts.command_timeout;
        let mut pauses = Retry::doubling(Duration::from_millis(5), Duration::from_millis(100)).pauses();
        let mut pause = pauses.pause();
        loop {
            tokio::time::sleep(pause).await;
            pause = pauses.pause();
            match op(self.conn().await?).await {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
                        && tokio::time::Instant::now() + pause < deadline => {}
                other => return other.map_err(Error::from),
            }
        }
    }

    /// What an operation runs on: the multiplexed connection, or, for an
    /// `Io::Inline` view of a plain (not TLS) single-node target, a pooled
    /// connection used on the calling thread.
    async fn call_conn(&self) -> Result<Conn> {
        self.ready().await?;
        if let Target::Direct(redis) = &self.inner.target {
            if self.io == Io::Inline && !self.inner.tls {
                if let Some(conn) = self.inline_conn(redis)? {
                    return Ok(conn);
                }
            }
        }
        self.conn().await
    }

    /// An idle inline connection, or a new one while the pool has room;
    /// `None` when all are in use, or the server answers but no connection
    /// can be had from it (the multiplexed connection then carries the
    /// call, with its own reconnecting and its own errors). An error when
    /// the server cannot be reached within the command timeout: the
    /// multiplexed connection cannot do better, and trying it too would
    /// spend the call's time twice.
    fn inline_conn(&self, redis: &redis::Client) -> Result<Option<Conn>> {
        let opts = &self.inner.opts;
        let mut unreachable = None;
        let open = || {
            let limit = opts.connect_timeout.min(opts.command_timeout);
            let mut conn = match redis.get_connection_with_timeout(limit) {
                Ok(conn) => conn,
                Err(e) => {
                    if e.is_timeout() || e.is_io_error() || e.is_connection_refusal() {
                        unreachable = Some(e);
                    }
                    return None;
                }
            };
            conn.set_read_timeout(Some(opts.command_timeout)).ok()?;
            conn.set_write_timeout(Some(opts.command_timeout)).ok()?;
            if let Some(name) = &opts.client_name {
                set_name(name).query::<()>(&mut conn).ok()?;
            }
            Some(conn)
        };
        let inline = self.local().inline.take(open);
        if let Some(e) = unreachable {
            return Err(e.into());
        }
        Ok(inline.map(|inline| Conn::Inline(Arc::new(inline))))
    }

    /// The multiplexed, self-reconnecting connection of this process.
    pub(crate) async fn conn(&self) -> Result<Conn> {
        let local = self.local();
        if let Some(conn) = &*local.conn.load() {
            self.recheck_sentinels();
            return Ok(Conn::clone(conn));
        }
        let _one_at_a_time = local.connecting.lock().await;
        if let Some(conn) = &*local.conn.load() {
            return Ok(Conn::clone(conn));
        }
        let (timeout, command_timeout) = (self.inner.opts.connect_timeout, self.inner.opts.command_timeout);
        // No retries inside the manager: a failed command triggers the next
        // reconnect, and callers (the watchdog, acquire loops) retry on their own
        // schedule, so a dead server is reported at once.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(command_timeout))
            .set_number_of_retries(0);
        let connect = async {
            let redis = match &self.inner.target {
                Target::Direct(redis) => redis.clone(),
                Target::Sentinel(sentinel) => sentinel.master(timeout).await?,
                Target::Cluster(cluster) => {
                    let cluster = cluster.connect(timeout, command_timeout).await;
                    return cluster.map(Conn::Cluster).map_err(|e| self.connect_error(e));
                }
            };
            let manager = ConnectionManager::new_with_config(redis, config).await;
            let mut manager = manager.map_err(|e| self.connect_error(e))?;
            if let Some(name) = &self.inner.opts.client_name {
                set_name(name).query_async::<()>(&mut manager).await.map_err(|e| self.connect_error(e))?;
            }
            Ok(Conn::Node(manager))
        };
        let conn = tokio::time::timeout(timeout, connect).await.map_err(|_| {
            Error::Connection(format!(
                "cannot reach Redis at {}: no answer within {:.3} s",
                self.inner.display,
                timeout.as_secs_f64()
            ))
        })??;
        local.conn.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }
}

/// `CLIENT SETNAME name`: what every command connection is named, when the
/// URL gives `?client_name=` (the wake-up subscription is not: a subscribed
/// connection takes no other command).
fn set_name(name: &str) -> redis::Cmd {
    redis::cmd("CLIENT").arg("SETNAME").arg(name).take()
}
