//! What a handle takes: an exclusive hold on one or more names, a fair
//! lock, one side of an RWMutex (plain or fair), a semaphore's permit, or a
//! plain string hold shared with redis-py's and python-redis-lock's locks.
//! `Lock` (waiting, holding, the watchdog, cancellation) is the same for
//! all; each primitive's atomic steps are its own (`Steps`, one file each).

use std::sync::Arc;
use std::time::Duration;

use crate::deployment::Deployment;
use crate::error::Result;
use crate::keys::{FairKeys, RwKeys, SemKeys};
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Attempt, Obtain, Record, Refreshed};
use crate::transport::client::Client;

mod exclusive;
mod fair;
mod permit;
mod plain;
mod rw;
mod rw_fair;

pub use exclusive::Exclusive;
pub use fair::Fair;
pub use permit::Permit;
pub use plain::Plain;
pub use rw::{Read, Write};
pub use rw_fair::FairRw;

#[derive(Debug, Clone)]
pub enum Mode {
    /// One hash per name, all taken or none.
    Exclusive(Exclusive),
    /// One name, taken in arrival order; a release hands it to the next waiter.
    Fair(Fair),
    /// A shared hold among the readers of an RWMutex, each with its own expiry.
    Read(Read),
    /// The exclusive side of an RWMutex.
    Write(Write),
    /// Either side of a fair RWMutex.
    FairRw(FairRw),
    /// One of a semaphore's permits.
    Permit(Permit),
    /// A plain string key holding the owner's token (redis-py's and
    /// python-redis-lock's layout).
    Plain(Plain),
}

/// Who goes first at an RWMutex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwOrder {
    /// Readers join whenever no writer holds; with writer preference, a
    /// waiting writer holds new readers back.
    Preference(bool),
    /// Readers and writers in arrival order, as in `Mode::Fair`: a release
    /// lets in the next writer, or every reader queued before it.
    Fair { patience: Duration },
}

/// How long a fair waiter that stops re-asserting itself keeps its place,
/// and how long a lock handed to it stays its own before it renews: its own
/// ttl, at most 2 s. Each waiter's is stored with it in Redis, so a hand-over
/// lasts as long as the waiter it goes to expects, whoever releases.
pub(crate) fn patience(ttl: Duration) -> Duration {
    ttl.min(Duration::from_secs(2))
}

/// A fair attempt as its script takes it.
fn attempt(ask: &Obtaining<'_>, patience: Duration) -> Attempt {
    Attempt { number: ask.attempt, patience_ms: patience.as_millis() as u64, will_wait: ask.will_wait }
}

impl Mode {
    /// One hold on every name of `keys`.
    pub(crate) fn exclusive(keys: Arc<[String]>) -> Mode {
        Mode::Exclusive(Exclusive { keys })
    }

    pub(crate) fn fair(keys: FairKeys, patience: Duration) -> Mode {
        Mode::Fair(Fair { keys, patience })
    }

    /// One side (`writer`, or a reader) of an RWMutex ordered by `order`.
    pub(crate) fn rw(keys: RwKeys, order: RwOrder, writer: bool) -> Mode {
        match order {
            RwOrder::Preference(writer_preference) if writer => {
                Mode::Write(Write { keys, writer_preference })
            }
            RwOrder::Preference(writer_preference) => Mode::Read(Read { keys, writer_preference }),
            RwOrder::Fair { patience } => Mode::FairRw(FairRw { keys, patience, writer }),
        }
    }

    pub(crate) fn permit(name: String, keys: SemKeys, permits: u32, patience: Option<Duration>) -> Mode {
        Mode::Permit(Permit { name, keys, permits, patience })
    }

    /// Undoes what an interrupted acquire may have left: the hold when `ours`
    /// (never a restored token's: it is its owner's), and a writer's intent
    /// or a place in a queue. A fair withdrawal releases as it leaves the
    /// queue, so nothing is sent twice.
    pub(crate) async fn undo(&self, d: &Deployment, token: &str, ours: bool) -> Result<()> {
        if ours && self.patience().is_none() {
            d.release(self, token).await?;
        }
        d.withdraw(self, token, ours).await
    }

    /// Time left on `token`'s hold, or `None` when it holds nothing.
    pub(crate) async fn remaining(&self, d: &Deployment, token: &str) -> Result<Option<Duration>> {
        if let Mode::Permit(Permit { keys, .. }) = self {
            let state = scripts::sem_inspect(d.single("a semaphore")?, keys).await?;
            let mine = state.holders.iter().find(|r| r.token == token);
            return Ok(mine.map(|r| Duration::from_millis(r.pttl_ms.max(0) as u64)));
        }
        if let Some(keys) = self.reader_keys() {
            let reader = |m| async move { Ok(scripts::rw_inspect(m, keys, token).await?.reader_pttl_ms) };
            let pttl_ms = d.majority_value("inspecting a reader", reader).await?;
            return Ok((pttl_ms >= 0).then(|| Duration::from_millis(pttl_ms as u64)));
        }
        let mut least: Option<i64> = None;
        for r in d.holders(self).await? {
            match r {
                Some(r) if r.token == token => {
                    least = Some(least.map_or(r.pttl_ms, |l| l.min(r.pttl_ms)));
                }
                _ => return Ok(None),
            }
        }
        Ok(least.map(|ms| Duration::from_millis(ms.max(0) as u64)))
    }

    /// Held by anyone: for an RWMutex, a writer or any live reader.
    pub(crate) async fn locked(&self, d: &Deployment) -> Result<bool> {
        match self {
            Mode::Exclusive(_) | Mode::Fair(_) | Mode::Permit(_) | Mode::Plain(_) => {
                Ok(d.holders(self).await?.iter().any(Option::is_some))
            }
            Mode::Read(Read { keys, .. })
            | Mode::Write(Write { keys, .. })
            | Mode::FairRw(FairRw { keys, .. }) => {
                let held = |c| async move {
                    let state = scripts::rw_inspect(c, keys, "").await?;
                    Ok(i64::from(state.writer || state.readers > 0))
                };
                Ok(d.majority_value("inspecting the RWMutex", held).await? > 0)
            }
        }
    }

    /// A reader's keys (of either order).
    fn reader_keys(&self) -> Option<&RwKeys> {
        match self {
            Mode::Read(Read { keys, .. }) | Mode::FairRw(FairRw { keys, writer: false, .. }) => Some(keys),
            _ => None,
        }
    }
}

/// Runs `$call` on the primitive inside a `Mode`.
macro_rules! on_primitive {
    ($mode:expr, $p:ident => $call:expr) => {
        match $mode {
            Mode::Exclusive($p) => $call,
            Mode::Fair($p) => $call,
            Mode::Read($p) => $call,
            Mode::Write($p) => $call,
            Mode::FairRw($p) => $call,
            Mode::Permit($p) => $call,
            Mode::Plain($p) => $call,
        }
    };
}

impl Steps for Mode {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        on_primitive!(self, p => p.obtain_on(c, ask, quorum).await)
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        on_primitive!(self, p => p.refresh_on(c, token, ttl).await)
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        on_primitive!(self, p => p.release_on(c, token).await)
    }

    async fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> Result<()> {
        on_primitive!(self, p => p.withdraw_on(c, token, ours).await)
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        on_primitive!(self, p => p.inspect_on(c).await)
    }

    async fn fence_raise_on(&self, c: &Client, token: &str, fence: i64) -> Result<bool> {
        on_primitive!(self, p => p.fence_raise_on(c, token, fence).await)
    }

    fn kind(&self) -> &'static str {
        on_primitive!(self, p => p.kind())
    }

    fn channels(&self) -> Vec<String> {
        on_primitive!(self, p => p.channels())
    }

    fn wakes(&self) -> bool {
        on_primitive!(self, p => p.wakes())
    }

    fn patience(&self) -> Option<Duration> {
        on_primitive!(self, p => p.patience())
    }

    fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        on_primitive!(self, p => p.keep_alive(ttl))
    }

    fn is_reader(&self) -> bool {
        on_primitive!(self, p => p.is_reader())
    }

    fn fenced(&self) -> bool {
        on_primitive!(self, p => p.fenced())
    }
}
