//! Either side of a fair RWMutex: readers and writers in arrival order, a
//! release letting in the next writer, or every reader queued before it.
//! A writer's hold is a Lock's hash (renewed, looked at and fenced by
//! `exclusive`'s steps); a reader's, a lease (`rw::lease_refresh`).

use std::sync::Arc;
use std::time::Duration;

use super::rw::{self, RwKeys};
use super::steps::{Holder, Obtaining, Released, Steps};
use super::{attempt, exclusive};
use crate::error::Result;
use crate::scripts::{
    run, run_held, step, taken, taken_or_busy, wire, Argv, Leave, Lua, Obtain, Record, Refreshed,
};
use crate::transport::backend::Backend;

step! {
    RW_FAIR_READ = "rw_fair_read.lua",
    struct RwFairReadArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        patience_ms: u64,
        will_wait: bool,
        attempt: u64,
        channel: &'a str,
    }
}

step! {
    RW_FAIR_WRITE = "rw_fair_write.lua",
    struct RwFairWriteArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        set_metadata: bool,
        patience_ms: u64,
        will_wait: bool,
        attempt: u64,
        channel: &'a str,
    }
}

step! {
    RW_FAIR_RELEASE = "rw_fair_release.lua",
    struct RwFairReleaseArgv<'a> {
        token: &'a str,
        side: Side,
        channel: &'a str,
        release: Leave,
    }
}

wire! {
    /// A side of an RWMutex.
    pub(crate) enum Side {
        Read = "r",
        Write = "w",
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 3] = [&RW_FAIR_READ, &RW_FAIR_WRITE, &RW_FAIR_RELEASE];

/// The keys of a fair RWMutex's steps, in their `KEYS` order.
fn fair_keys(k: &RwKeys) -> [&String; 6] {
    [&k.writer, &k.readers, &k.queued_readers, &k.queued_writers, &k.alive, &k.tags]
}

#[derive(Debug, Clone)]
pub(crate) struct FairRw {
    pub(crate) keys: RwKeys,
    pub(crate) patience: Duration,
    /// The exclusive side (else a reader).
    pub(crate) writer: bool,
}

impl FairRw {
    fn side(&self) -> Side {
        if self.writer {
            Side::Write
        } else {
            Side::Read
        }
    }

    /// Releases this side (handing it on) when `release` is `Leave::Hold`,
    /// and leaves its queue either way.
    async fn leave(&self, c: &Backend, token: &str, release: Leave) -> Result<bool> {
        let (side, channel) = (self.side(), &self.keys.channel);
        let mut invocation = RwFairReleaseArgv { token, side, channel, release }.on(c);
        invocation.key(&fair_keys(&self.keys));
        let released: i64 = run(c, &invocation).await?;
        Ok(released == 1)
    }
}

impl Steps for FairRw {
    /// One attempt of a fair reader, or writer (with its metadata).
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let (token, ttl_ms) = (ask.token, ask.ttl.as_millis() as u64);
        let attempt = attempt(ask, self.patience);
        let (patience_ms, will_wait, channel) = (attempt.patience_ms, attempt.will_wait, &self.keys.channel);
        let mut invocation = if self.writer {
            RwFairWriteArgv {
                token,
                ttl_ms,
                metadata: ask.metadata.unwrap_or(""),
                set_metadata: ask.metadata.is_some(),
                patience_ms,
                will_wait,
                attempt: attempt.number,
                channel,
            }
            .on(c)
        } else {
            RwFairReadArgv { token, ttl_ms, patience_ms, will_wait, attempt: attempt.number, channel }.on(c)
        };
        invocation.key(&fair_keys(&self.keys));
        run_held(c, &invocation, taken).await.map(taken_or_busy)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        if self.writer {
            exclusive::refresh(c, std::slice::from_ref(&self.keys.writer), holder, ttl).await
        } else {
            rw::lease_refresh(c, &[&self.keys.readers], holder.token, ttl).await
        }
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        if self.writer {
            exclusive::renew(c, Arc::from([self.keys.writer.clone()]), holder, ttl).await
        } else {
            rw::lease_renew(c, Arc::from([self.keys.readers.clone()]), holder.token, ttl).await
        }
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
        exclusive::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    async fn fence_raise_on(&self, c: &Backend, token: &str, fence: i64) -> Result<bool> {
        if !self.writer {
            return Ok(true);
        }
        exclusive::fence_raise(c, std::slice::from_ref(&self.keys.writer), token, fence).await
    }

    fn kind(&self) -> &'static str {
        if self.writer {
            "write"
        } else {
            "read"
        }
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        Some(self.patience)
    }

    fn is_reader(&self) -> bool {
        !self.writer
    }

    /// Readers get no fence: they exclude nobody but writers.
    fn fenced(&self) -> bool {
        self.writer
    }
}
