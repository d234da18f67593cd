//! A lock on one name taken in arrival order: a release hands it to the
//! next waiter. Its hold is a Lock's hash (renewed and looked at by
//! `exclusive`'s steps); its queue is its own.

use std::sync::Arc;
use std::time::Duration;

use super::steps::{Holder, Obtaining, Released, Steps};
use super::{attempt, exclusive};
use crate::error::Result;
use crate::keys::{KeySpace, Part};
use crate::scripts::{
    run, run_held, step, taken, taken_or_busy, Argv, Leave, Lua, Obtain, Record, Refreshed,
};
use crate::transport::backend::Backend;

step! {
    FAIR_OBTAIN = "fair_obtain.lua",
    struct FairObtainArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        set_metadata: bool,
        patience_ms: u64,
        will_wait: bool,
        attempt: u64,
        channel: &'a str,
        announce: &'a str,
    }
}

step! {
    FAIR_RELEASE = "fair_release.lua",
    struct FairReleaseArgv<'a> {
        token: &'a str,
        channel: &'a str,
        release: Leave,
        announce: &'a str,
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 2] = [&FAIR_OBTAIN, &FAIR_RELEASE];

/// A fair lock: its hold (the same hash as a Lock's), the waiters in arrival
/// order, until when each waiter counts as alive, and each waiter's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairKeys {
    pub lock: String,
    pub queue: String,
    pub alive: String,
    pub tags: String,
    pub channel: String,
    /// Told '' whenever the hold is taken, claimed or released (an
    /// election's watchers listen there); empty for a plain fair Lock.
    pub announce: String,
}

impl FairKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 5] {
        [&self.lock, &self.queue, &self.alive, &self.tags, &self.channel]
    }

    /// The keys its steps take, in their `KEYS` order.
    fn of_steps(&self) -> [&String; 4] {
        [&self.lock, &self.queue, &self.alive, &self.tags]
    }
}

impl KeySpace {
    /// The keys of the fair Lock `name`.
    pub fn fair(&self, name: &str) -> FairKeys {
        let part = |p| self.part(name, p);
        FairKeys {
            lock: part(Part::Hold),
            queue: part(Part::FairQueue),
            alive: part(Part::FairAlive),
            tags: part(Part::FairTags),
            channel: part(Part::Wake),
            announce: String::new(),
        }
    }
}

/// `patience`: how long a waiter that stops re-asserting itself keeps its place.
#[derive(Debug, Clone)]
pub(crate) struct Fair {
    pub(crate) keys: FairKeys,
    pub(crate) patience: Duration,
}

impl Fair {
    /// Releases (handing the lock to the head of the queue) when `release`
    /// is `Leave::Hold`, and leaves the queue either way.
    async fn leave(&self, c: &Backend, token: &str, release: Leave) -> Result<bool> {
        let k = &self.keys;
        let mut invocation =
            FairReleaseArgv { token, channel: &k.channel, release, announce: &k.announce }.on(c);
        invocation.key(&k.of_steps());
        let released: i64 = run(c, &invocation).await?;
        Ok(released == 1)
    }
}

impl Steps for Fair {
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let (k, attempt) = (&self.keys, attempt(ask, self.patience));
        let mut invocation = FairObtainArgv {
            token: ask.token,
            ttl_ms: ask.ttl.as_millis() as u64,
            metadata: ask.metadata.unwrap_or(""),
            set_metadata: ask.metadata.is_some(),
            patience_ms: attempt.patience_ms,
            will_wait: attempt.will_wait,
            attempt: attempt.number,
            channel: &k.channel,
            announce: &k.announce,
        }
        .on(c);
        invocation.key(&k.of_steps());
        run_held(c, &invocation, taken).await.map(taken_or_busy)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        exclusive::refresh(c, std::slice::from_ref(&self.keys.lock), holder, ttl).await
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        exclusive::renew(c, Arc::from([self.keys.lock.clone()]), holder, ttl).await
    }

    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let token = holder.token;
        let held = self.leave(c, token, Leave::Hold).await?;
        Ok(Released { held, retried: false })
    }

    async fn withdraw_on(&self, c: &Backend, token: &str, ours: bool) -> Result<()> {
        self.leave(c, token, Leave::ours(ours)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        exclusive::inspect(c, std::slice::from_ref(&self.keys.lock)).await
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        Some(self.patience)
    }
}
