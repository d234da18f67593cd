//! What a handle takes: an exclusive hold on one or more names, or one side
//! of an RWMutex. `Lock` (waiting, holding, the watchdog, cancellation) is the
//! same for all three; only these atomic steps differ.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::deployment::Deployment;
use crate::error::Result;
use crate::keys::{wake_channel, FairKeys, RwKeys, SemKeys};
use crate::scripts::{self, Attempt, Obtain, Record};
use crate::steps::{Obtaining, Released, Steps};

#[derive(Debug, Clone)]
pub enum Mode {
    /// One hash per name, all taken or none.
    Exclusive(Arc<[String]>),
    /// One name, taken in arrival order; a release hands it to the next waiter.
    /// `patience`: how long a waiter that stops re-asserting itself keeps its place.
    Fair { keys: FairKeys, patience: Duration },
    /// A shared hold among the readers, each with its own expiry.
    Read { keys: RwKeys, order: RwOrder },
    /// The exclusive side of an RWMutex.
    Write { keys: RwKeys, order: RwOrder },
    /// One of a semaphore's `permits`, each its own lease (a Lock is a
    /// semaphore of one, with its own specialised steps); in arrival order
    /// when it has a `patience`.
    Permit { keys: SemKeys, permits: u32, patience: Option<Duration> },
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

impl Mode {
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
        if let Mode::Permit { keys, .. } = self {
            let state = scripts::sem_inspect(d.single("a semaphore")?, keys).await?;
            let mine = state.holders.iter().find(|r| r.token == token);
            return Ok(mine.map(|r| Duration::from_millis(r.pttl_ms.max(0) as u64)));
        }
        if let Mode::Read { keys, .. } = self {
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
            Mode::Exclusive(_) | Mode::Fair { .. } | Mode::Permit { .. } => {
                Ok(d.holders(self).await?.iter().any(Option::is_some))
            }
            Mode::Read { keys, .. } | Mode::Write { keys, .. } => {
                let held = |c| async move {
                    let state = scripts::rw_inspect(c, keys, "").await?;
                    Ok(i64::from(state.writer || state.readers > 0))
                };
                Ok(d.majority_value("inspecting the RWMutex", held).await? > 0)
            }
        }
    }

    /// The longest pause between a waiter's attempts that keeps its intent or
    /// its place in the queue alive.
    pub(crate) fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        match self {
            Mode::Write { order: RwOrder::Preference(true), .. } => Some(ttl / 3),
            _ => self.patience().map(|p| p / 3),
        }
    }

    /// Fair modes: how long a lock handed to a waiter stays its own unclaimed.
    pub(crate) fn patience(&self) -> Option<Duration> {
        match self {
            Mode::Fair { patience, .. }
            | Mode::Read { order: RwOrder::Fair { patience }, .. }
            | Mode::Write { order: RwOrder::Fair { patience }, .. }
            | Mode::Permit { patience: Some(patience), .. } => Some(*patience),
            _ => None,
        }
    }

    /// The channels on which a release that may let this handle in is announced.
    pub(crate) fn channels(&self) -> Vec<String> {
        match self {
            Mode::Exclusive(keys) => keys.iter().map(|k| wake_channel(k)).collect(),
            Mode::Fair { keys, .. } => vec![keys.channel.clone()],
            Mode::Read { keys, .. } | Mode::Write { keys, .. } => vec![keys.channel.clone()],
            Mode::Permit { keys, .. } => vec![keys.channel.clone()],
        }
    }

    /// `"lock"`, `"read"` or `"write"`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Mode::Exclusive(_) | Mode::Fair { .. } => "lock",
            Mode::Read { .. } => "read",
            Mode::Write { .. } => "write",
            Mode::Permit { .. } => "permit",
        }
    }

    pub(crate) fn is_reader(&self) -> bool {
        matches!(self, Mode::Read { .. })
    }
}

impl Steps for Mode {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        let Obtaining { token, ttl, metadata, will_wait, attempt } = *ask;
        let ttl_ms = ttl.as_millis() as u64;
        let tagged = |patience: &Duration| Attempt {
            number: attempt,
            patience_ms: patience.as_millis() as u64,
            will_wait,
        };
        match self {
            Mode::Exclusive(keys) => scripts::obtain(c, keys, token, ttl_ms, metadata, quorum).await,
            Mode::Fair { keys, patience } => {
                scripts::fair_obtain(c, keys, token, ttl_ms, metadata, tagged(patience)).await
            }
            Mode::Read { keys, order: RwOrder::Preference(writer_preference) } => {
                scripts::rw_read(c, keys, token, ttl_ms, *writer_preference).await
            }
            Mode::Write { keys, order: RwOrder::Preference(writer_preference) } => {
                let writer_preference = *writer_preference && will_wait;
                scripts::rw_write(c, keys, token, ttl_ms, metadata, writer_preference, quorum).await
            }
            Mode::Read { keys, order: RwOrder::Fair { patience } } => {
                scripts::rw_fair_obtain(c, keys, token, ttl_ms, None, tagged(patience)).await
            }
            Mode::Write { keys, order: RwOrder::Fair { patience } } => {
                scripts::rw_fair_obtain(c, keys, token, ttl_ms, Some(metadata), tagged(patience)).await
            }
            Mode::Permit { keys, permits, patience } => {
                let attempt = tagged(&patience.unwrap_or_default());
                scripts::sem_obtain(c, keys, token, ttl_ms, metadata, *permits, patience.is_some(), attempt)
                    .await
            }
        }
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<bool> {
        let ttl_ms = ttl.as_millis() as u64;
        match self {
            Mode::Exclusive(keys) => scripts::refresh(c, keys, token, ttl_ms).await,
            Mode::Fair { keys, .. } => {
                scripts::refresh(c, std::slice::from_ref(&keys.lock), token, ttl_ms).await
            }
            Mode::Read { keys, .. } => scripts::lease_refresh(c, &[&keys.readers], token, ttl_ms).await,
            Mode::Permit { keys, .. } => {
                scripts::lease_refresh(c, &[&keys.holders, &keys.data], token, ttl_ms).await
            }
            Mode::Write { keys, .. } => {
                scripts::refresh(c, std::slice::from_ref(&keys.writer), token, ttl_ms).await
            }
        }
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let once = |held: bool| Released { held, retried: false };
        Ok(match self {
            Mode::Exclusive(keys) => {
                let (n, retried) = scripts::release_noting_retry(c, keys, token, false, "").await?;
                Released { held: n > 0, retried }
            }
            Mode::Write { keys, order: RwOrder::Preference(_) } => {
                let writer = std::slice::from_ref(&keys.writer);
                let (n, retried) =
                    scripts::release_noting_retry(c, writer, token, false, &keys.channel).await?;
                Released { held: n > 0, retried }
            }
            Mode::Read { keys, order: RwOrder::Preference(_) } => {
                once(scripts::rw_read_release(c, keys, token).await?)
            }
            Mode::Fair { keys, .. } => once(scripts::fair_release(c, keys, token, true).await?),
            Mode::Permit { keys, .. } => once(scripts::sem_release(c, keys, token, true).await?),
            Mode::Read { keys, .. } | Mode::Write { keys, .. } => {
                once(scripts::rw_fair_release(c, keys, token, !self.is_reader(), true).await?)
            }
        })
    }

    async fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> Result<()> {
        match self {
            Mode::Fair { keys, .. } => scripts::fair_release(c, keys, token, ours).await.map(drop),
            Mode::Read { keys, order: RwOrder::Fair { .. } }
            | Mode::Write { keys, order: RwOrder::Fair { .. } } => {
                scripts::rw_fair_release(c, keys, token, !self.is_reader(), ours).await.map(drop)
            }
            Mode::Write { keys, order: RwOrder::Preference(true) } => {
                scripts::rw_withdraw(c, keys, token).await
            }
            Mode::Permit { keys, patience: Some(_), .. } => {
                scripts::sem_release(c, keys, token, ours).await.map(drop)
            }
            _ => Ok(()),
        }
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        match self {
            Mode::Exclusive(keys) => scripts::inspect(c, keys).await,
            Mode::Fair { keys, .. } => scripts::inspect(c, std::slice::from_ref(&keys.lock)).await,
            Mode::Read { keys, .. } | Mode::Write { keys, .. } => {
                scripts::inspect(c, std::slice::from_ref(&keys.writer)).await
            }
            Mode::Permit { keys, .. } => {
                Ok(scripts::sem_inspect(c, keys).await?.holders.into_iter().map(Some).collect())
            }
        }
    }

    async fn fence_raise_on(&self, c: &Client, token: &str, fence: i64) -> Result<bool> {
        match self {
            Mode::Exclusive(keys) => scripts::fence_raise(c, keys, token, fence).await,
            Mode::Write { keys, .. } => {
                scripts::fence_raise(c, std::slice::from_ref(&keys.writer), token, fence).await
            }
            _ => Ok(true),
        }
    }

    /// Readers get no fence: they exclude nobody but writers.
    fn fenced(&self) -> bool {
        !matches!(self, Mode::Read { .. })
    }

    /// A writer's intent, a place in a fair queue.
    fn leaves_intent(&self) -> bool {
        self.keep_alive(Duration::MAX).is_some()
    }
}
