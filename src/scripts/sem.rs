//! The steps on a semaphore: take, give back and look at its permits.

use redis::Value;

use crate::client::Client;
use crate::error::Result;
use crate::keys::SemKeys;

use super::{flag, parse_record, run, run_held, taken, taken_or_busy, Attempt, Lua, Obtain, Record};

lua!(SEM_OBTAIN, "sem_obtain.lua");
lua!(SEM_RELEASE, "sem_release.lua");
lua!(SEM_INSPECT, "sem_inspect.lua");

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
    let mut invocation = SEM_OBTAIN.on(client).key(&sem_keys(k));
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(metadata.is_some()));
    invocation.arg(permits).arg(flag(fair)).arg(attempt.patience_ms).arg(flag(attempt.will_wait));
    invocation.arg(attempt.number).arg(&k.channel);
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Gives `token`'s permit back when `release` (passing free permits to the
/// next in line), and leaves the queue either way.
pub async fn sem_release(client: &Client, k: &SemKeys, token: &str, release: bool) -> Result<bool> {
    let mut invocation = SEM_RELEASE.on(client).key(&sem_keys(k));
    invocation.arg(token).arg(&k.channel).arg(flag(release));
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
        run(client, &SEM_INSPECT.on(client).key(&keys)).await?;
    let holders = holders.into_iter().map(parse_record).collect::<Result<Vec<_>>>()?;
    Ok(SemState { permits, waiters, holders: holders.into_iter().flatten().collect() })
}
