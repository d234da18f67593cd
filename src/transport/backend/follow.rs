//! Following the master: Sentinel rechecks while a client is in use, a
//! waiter waits or a hold renews, and the wake-up subscription a waiter
//! joins.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::{Backend, Local, Target};
use crate::error::{Error, Result};
use crate::transport::sentinel::RECHECK;
use crate::transport::wakeups::{Feed, Registration, Waits};

/// The holds renewing on one process's Sentinel client, and whether the
/// task that follows the master for them runs (one for them all).
#[derive(Default)]
pub(super) struct Holders {
    count: AtomicUsize,
    following: AtomicBool,
}

/// A hold renewing on a Sentinel client (see `Backend::holding`); dropped
/// when its renewal ends.
pub(crate) struct Holding {
    local: Arc<Local>,
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.local.holders.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Backend {
    /// In Sentinel mode, at most once every `sentinel::RECHECK` while the
    /// client is in use: asks the Sentinels in the background whether the
    /// master moved, and if so drops the connection and the wake-up
    /// subscription, so the next command goes to the new master. A closed
    /// client asks nothing.
    pub(super) fn recheck_sentinels(&self) {
        let Target::Sentinel(sentinel) = &self.inner.target else { return };
        if self.inner.ready.is_closed() || !sentinel.recheck_due() {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let Target::Sentinel(sentinel) = &client.inner.target else { return };
            let closed = || client.inner.ready.is_closed();
            // Closed meanwhile: neither asked, nor its new state made again by `local`.
            if !closed() && sentinel.moved(client.inner.opts.connect_timeout).await && !closed() {
                log::info!("the Sentinels of {} name another master: reconnecting", client.inner.display);
                client.forget_connection();
                client.local().wakeups.clone().drop_subscription().await;
            }
        });
    }

    /// While a waiter waits on its subscription, sending no command: in
    /// Sentinel mode asks the Sentinels
    /// every `sentinel::RECHECK` whether the master moved, as `conn` does
    /// for a client in use, so the subscription follows a failover and the
    /// waiter's next attempt goes to the new master. Never returns.
    pub(crate) async fn follow_master(&self) {
        if matches!(self.inner.target, Target::Sentinel(_)) {
            loop {
                tokio::time::sleep(RECHECK).await;
                self.recheck_sentinels();
            }
        }
        std::future::pending::<()>().await;
    }

    /// While a hold renews, in Sentinel mode: asks the Sentinels every
    /// `sentinel::RECHECK` whether the master moved, as for a waiter, in one
    /// task for all the holds of this process's client. A holder's client
    /// sends nothing but its renewals (every ttl/3), and a master demoted by
    /// `SENTINEL FAILOVER` serves them until its Sentinel reconfigures it:
    /// asked only when a renewal is sent, the client would learn of the new
    /// master after that renewal, and the next one (a ttl after the last
    /// renewal the new master got, when the promotion came just after it)
    /// could come too late for the hold. The task ends when the client is
    /// closed: its holds are renewed no more. `None` outside Sentinel mode.
    pub(crate) fn holding(&self) -> Option<Holding> {
        if !matches!(self.inner.target, Target::Sentinel(_)) {
            return None;
        }
        let local = self.local();
        local.holders.count.fetch_add(1, Ordering::SeqCst);
        if !local.holders.following.swap(true, Ordering::SeqCst) {
            let (client, holders) = (self.clone(), local.clone());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(RECHECK) => {}
                        () = client.inner.ready.closed() => return,
                    }
                    let h = &holders.holders;
                    if h.count.load(Ordering::SeqCst) == 0 {
                        h.following.store(false, Ordering::SeqCst);
                        // A hold that came meanwhile saw this task still
                        // following: it goes on for it, unless one started.
                        if h.count.load(Ordering::SeqCst) == 0 || h.following.swap(true, Ordering::SeqCst) {
                            return;
                        }
                    }
                    client.recheck_sentinels();
                }
            });
        }
        Some(Holding { local })
    }

    /// After a dropped connection: in Sentinel mode the next command asks
    /// where the master is now; with a client name, it goes out on a fresh,
    /// named connection (the manager would reconnect by itself, unnamed).
    pub(super) fn forget_connection(&self) {
        if matches!(self.inner.target, Target::Sentinel(_)) || self.inner.opts.client_name.is_some() {
            self.local().conn.store(None);
        }
    }

    /// A command got no answer in time. On a Redis Cluster its slot's master
    /// may be cut off from the rest (a partition) while its replica is
    /// promoted: nothing tells a client whose commands only time out, and
    /// the connection would keep sending that slot's commands to the old
    /// master. The connection is forgotten, so the next command connects
    /// anew and reads the slot map from the nodes that answer. (A Sentinel
    /// client asks the Sentinels once a second while in use: `conn`.)
    pub(super) fn unanswered(&self) {
        if matches!(self.inner.target, Target::Cluster(_)) {
            log::info!(
                "a command to {} got no answer in time: reading the slot map anew",
                self.inner.display
            );
            self.local().conn.store(None);
        }
    }

    /// Joins the waiters on `channels`, subscribed before it returns.
    pub(crate) async fn register_waiter(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Waits> {
        Ok(Waits::new(vec![self.register_one(channels, reader, token).await?]))
    }

    /// See `Wakeups::yield_to_woken`.
    pub(crate) async fn yield_to_woken(
        &self,
        channels: impl FnOnce() -> Vec<String>,
        until: tokio::time::Instant,
    ) {
        self.local().wakeups.yield_to_woken(channels, until).await;
    }

    pub(crate) async fn register_one(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Registration> {
        self.ready().await?;
        let (timeout, command_timeout) = (self.inner.opts.connect_timeout, self.inner.opts.command_timeout);
        let connect = async {
            let subscribe = async {
                let redis = match &self.inner.target {
                    Target::Direct(redis) => redis.clone(),
                    Target::Sentinel(sentinel) => sentinel.master(timeout).await?,
                    Target::Cluster(cluster) => {
                        let (conn, pushes) = cluster.subscriber(timeout, command_timeout).await?;
                        return Ok(Feed::sharded(conn, pushes));
                    }
                };
                Ok::<_, Error>(Feed::plain(redis.get_async_pubsub().await?))
            };
            tokio::time::timeout(timeout, subscribe)
                .await
                .map_err(|_| Error::Connection("no answer from Redis for the wake-up subscription".into()))?
        };
        self.local().wakeups.clone().register(connect, channels, reader, token, command_timeout).await
    }
}
