//! The steps on a semaphore: take, give back and look at its permits.

use redis::Value;

use crate::error::Result;
use crate::keys::SemKeys;
use crate::transport::client::Client;

use super::argv::Leave;
use super::{parse_record, run, run_held, taken, taken_or_busy, Argv, Attempt, Lua, Obtain, Record};

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
pub(super) static STEPS: [&Lua; 3] = [&SEM_OBTAIN, &SEM_RELEASE, &SEM_INSPECT];

fn sem_keys(k: &SemKeys) -> [&String; 5] {
    [&k.holders, &k.data, &k.queue, &k.alive, &k.tags]
}

#[expect(clippy::too_many_arguments)]
/// One attempt at a semaphore's permit. Another permit count in force while
/// a permit is held is `InvalidArgument` (`Refusal::Permits`).
pub async fn sem_obtain(
    client: &Client,
    k: &SemKeys,
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    permits: u32,
    fair: bool,
    attempt: Attempt,
) -> Result<Obtain> {
    let mut invocation = SemObtainArgv {
        token,
        ttl_ms,
        metadata: metadata.unwrap_or(""),
        set_metadata: metadata.is_some(),
        permits,
        fair,
        patience_ms: attempt.patience_ms,
        will_wait: attempt.will_wait,
        attempt: attempt.number,
        channel: &k.channel,
    }
    .on(client);
    invocation.key(&sem_keys(k));
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Gives `token`'s permit back when `release` is `Leave::Hold` (passing
/// free permits to the next in line), and leaves the queue either way.
pub async fn sem_release(client: &Client, k: &SemKeys, token: &str, release: Leave) -> Result<bool> {
    let mut invocation = SemReleaseArgv { token, channel: &k.channel, release }.on(client);
    invocation.key(&sem_keys(k));
    let released: i64 = run(client, &invocation).await?;
    Ok(released == 1)
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

pub async fn sem_inspect(client: &Client, k: &SemKeys) -> Result<SemState> {
    let keys = [&k.holders, &k.data, &k.queue];
    let (permits, waiters, holders): (u32, u64, Vec<Vec<Value>>) =
        run(client, SemInspectArgv {}.on(client).key(&keys)).await?;
    let holders = holders.into_iter().map(parse_record).collect::<Result<Vec<_>>>()?;
    Ok(SemState { permits, waiters, holders: holders.into_iter().flatten().collect() })
}
