//! One of a semaphore's permits, each its own lease (a Lock is a semaphore
//! of one, with its own specialised steps); in arrival order when it has a
//! `patience`.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::steps::{Holder, Obtaining, Released, Steps};
use super::{attempt, rw};
use crate::error::{Error, Result};
use crate::keys::{KeySpace, Part};
use crate::scripts::{
    parse_record, run, run_held, step, taken, taken_or_busy, Argv, Held, Leave, Lua, Obtain, Record,
    Refreshed,
};
use crate::transport::backend::Backend;

step! {
    SEM_OBTAIN = "sem_obtain.lua",
    struct SemObtainArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        set_metadata: bool,
        permits: u32,
        fair: bool,
        patience_ms: u64,
        will_wait: bool,
        attempt: u64,
        channel: &'a str,
    }
}

step! {
    SEM_TAKE = "sem_take.lua",
    struct SemTakeArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        set_metadata: bool,
        permits: u32,
        will_wait: bool,
        waited: bool,
    }
}

step! {
    SEM_GIVE = "sem_give.lua",
    struct SemGiveArgv<'a> {
        token: &'a str,
    }
}

step! {
    SEM_RELEASE = "sem_release.lua",
    struct SemReleaseArgv<'a> {
        token: &'a str,
        channel: &'a str,
        release: Leave,
    }
}

step! {
    SEM_INSPECT = "sem_inspect.lua",
    struct SemInspectArgv {}
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 5] = [&SEM_OBTAIN, &SEM_TAKE, &SEM_GIVE, &SEM_RELEASE, &SEM_INSPECT];

/// A semaphore: its holders (token -> expiry in server milliseconds, each
/// permit its own lease), its data (the permit count, the last fence, each
/// holder's fence and metadata), and in fair mode a queue like a fair Lock's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemKeys {
    pub holders: String,
    pub data: String,
    pub queue: String,
    pub alive: String,
    pub tags: String,
    /// Where given-back permits are announced.
    pub channel: String,
}

impl SemKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 6] {
        [&self.holders, &self.data, &self.queue, &self.alive, &self.tags, &self.channel]
    }

    /// The keys its obtain and release take, in their `KEYS` order.
    fn of_steps(&self) -> [&String; 5] {
        [&self.holders, &self.data, &self.queue, &self.alive, &self.tags]
    }

    /// The keys of the steps without a queue (`sem_take.lua`, `sem_give.lua`).
    fn of_leases(&self) -> [&String; 2] {
        [&self.holders, &self.data]
    }
}

impl KeySpace {
    /// The keys of the semaphore `name`, all under its hash tag.
    pub fn semaphore(&self, name: &str) -> SemKeys {
        let part = |p| self.part(name, p);
        SemKeys {
            holders: part(Part::SemHolders),
            data: part(Part::SemData),
            queue: part(Part::SemQueue),
            alive: part(Part::SemAlive),
            tags: part(Part::SemTags),
            channel: part(Part::SemWake),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Permit {
    /// The semaphore's name, for the errors its steps raise.
    pub(crate) name: String,
    pub(crate) keys: SemKeys,
    pub(crate) permits: u32,
    pub(crate) patience: Option<Duration>,
}

impl Permit {
    /// Gives `token`'s permit back when `release` is `Leave::Hold` (passing
    /// free permits to the next in line), and leaves the queue either way.
    async fn leave(&self, c: &Backend, token: &str, release: Leave) -> Result<bool> {
        let mut invocation = SemReleaseArgv { token, channel: &self.keys.channel, release }.on(c);
        invocation.key(&self.keys.of_steps());
        let released: i64 = run(c, &invocation).await?;
        Ok(released == 1)
    }
}

impl Permit {
    /// A take's answer; a refusal names the semaphore.
    fn taken(&self, answer: Result<Held<(i64, i64)>>) -> Result<Obtain> {
        answer.map(taken_or_busy).map_err(|e| match e {
            Error::InvalidArgument(why) => {
                Error::InvalidArgument(format!("semaphore {:?}: {why}", self.name))
            }
            e => e,
        })
    }
}

impl Steps for Permit {
    /// Another permit count in force while a permit is held is
    /// `InvalidArgument` (`Refusal::Permits`). Without a queue (not fair)
    /// the take is `sem_take.lua`, `sem_obtain.lua`'s without the queue's
    /// steps.
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let attempt = attempt(ask, self.patience.unwrap_or_default());
        if self.patience.is_none() {
            let mut invocation = SemTakeArgv {
                token: ask.token,
                ttl_ms: ask.ttl.as_millis() as u64,
                metadata: ask.metadata.unwrap_or(""),
                set_metadata: ask.metadata.is_some(),
                permits: self.permits,
                will_wait: attempt.will_wait,
                waited: attempt.number > 1,
            }
            .on(c);
            invocation.key(&self.keys.of_leases());
            return self.taken(run_held(c, &invocation, taken).await);
        }
        let mut invocation = SemObtainArgv {
            token: ask.token,
            ttl_ms: ask.ttl.as_millis() as u64,
            metadata: ask.metadata.unwrap_or(""),
            set_metadata: ask.metadata.is_some(),
            permits: self.permits,
            fair: self.patience.is_some(),
            patience_ms: attempt.patience_ms,
            will_wait: attempt.will_wait,
            attempt: attempt.number,
            channel: &self.keys.channel,
        }
        .on(c);
        invocation.key(&self.keys.of_steps());
        self.taken(run_held(c, &invocation, taken).await)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        let token = holder.token;
        rw::lease_refresh(c, &[&self.keys.holders, &self.keys.data], token, ttl).await
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        let keys = Arc::from([self.keys.holders.clone(), self.keys.data.clone()]);
        rw::lease_renew(c, keys, holder.token, ttl).await
    }

    /// `sem_give.lua` first: it gives the permit back while nobody waits;
    /// when someone does, it changes nothing, and `sem_release.lua` gives it
    /// back, waking or serving the waiters.
    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let token = holder.token;
        let mut invocation = SemGiveArgv { token }.on(c);
        invocation.key(&self.keys.of_leases());
        let held = match run::<i64>(c, &invocation).await? {
            -1 => self.leave(c, token, Leave::Hold).await?,
            given => given == 1,
        };
        Ok(Released { held, retried: false })
    }

    async fn withdraw_on(&self, c: &Backend, token: &str, ours: bool) -> Result<()> {
        if self.patience.is_none() {
            return Ok(());
        }
        self.leave(c, token, Leave::ours(ours)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        Ok(inspect(c, &self.keys).await?.holders.into_iter().map(Some).collect())
    }

    fn kind(&self) -> &'static str {
        "permit"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        self.patience
    }
}

/// A semaphore as `sem_inspect.lua` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemState {
    /// The permit count in force (0 when unknown: nothing held).
    pub permits: u32,
    /// Waiters in the fair queue.
    pub waiters: u64,
    /// The live holders, earliest expiry first.
    pub holders: Vec<Record>,
}

/// The semaphore of `k` as `sem_inspect.lua` sees it.
pub(crate) async fn inspect(client: &Backend, k: &SemKeys) -> Result<SemState> {
    let keys = [&k.holders, &k.data, &k.queue];
    let (permits, waiters, holders): (u32, u64, Vec<Vec<Value>>) =
        run(client, SemInspectArgv {}.on(client).key(&keys)).await?;
    let holders = holders.into_iter().map(parse_record).collect::<Result<Vec<_>>>()?;
    Ok(SemState { permits, waiters, holders: holders.into_iter().flatten().collect() })
}
