//! The steps on a Lock's hash: take, renew, release and look at a hold,
//! fair or not, and a quorum master's fence raise; an election's proclaim.

use crate::client::Client;
use crate::error::Result;
use crate::keys::{with_fence_records, FairKeys};

use redis::Value;

use super::{
    flag, one, parse_record, refreshed, run, run_held, taken, taken_or_busy, Attempt, Lua, Obtain, Record,
    Refreshed,
};

lua!(OBTAIN, "obtain.lua");
lua!(RELEASE, "release.lua");
lua!(REFRESH, "refresh.lua");
lua!(INSPECT, "inspect.lua");
lua!(FENCE_RAISE, "fence_raise.lua");
lua!(FAIR_OBTAIN, "fair_obtain.lua");
lua!(FAIR_RELEASE, "fair_release.lua");
lua!(EL_PROCLAIM, "el_proclaim.lua");

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 8] =
    [&OBTAIN, &RELEASE, &REFRESH, &INSPECT, &FENCE_RAISE, &FAIR_OBTAIN, &FAIR_RELEASE, &EL_PROCLAIM];

/// `metadata`: stored with a new hold; on re-entry (the token holds already)
/// `None` keeps what is stored. `quorum`: on a quorum's master, where a new
/// hold's fence is also above the keys' fence records. `attempt`: whether a
/// busy answer marks the holds waited on (`will_wait`), and whether this
/// owner waited before (`number` > 1: its new hold is marked, for those
/// behind it), so that a release nobody waits for publishes nothing.
/// `from`: another token whose hold this attempt takes over (re-keyed to
/// `token`, its fence kept).
#[expect(clippy::too_many_arguments)]
pub async fn obtain(
    client: &Client,
    keys: &[String],
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    quorum: bool,
    attempt: Attempt,
    from: Option<&str>,
) -> Result<Obtain> {
    let mut invocation =
        if quorum { OBTAIN.on(client).key(with_fence_records(keys)) } else { OBTAIN.on(client).key(keys) };
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(metadata.is_some()));
    invocation.arg(flag(quorum)).arg(flag(attempt.will_wait)).arg(flag(attempt.number > 1));
    if let Some(from) = from {
        invocation.arg(from);
    }
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Raises the fence of `token`'s hold on `keys` to at least `fence`, and
/// their fence records with it: false when `token` no longer holds them all.
pub async fn fence_raise(client: &Client, keys: &[String], token: &str, fence: i64) -> Result<bool> {
    let raised: i64 =
        run(client, FENCE_RAISE.on(client).key(with_fence_records(keys)).arg(token).arg(fence)).await?;
    Ok(raised == 1)
}

/// Returns how many keys were released; 0 when `token` did not hold them all.
/// `channel`: where the release is announced ('' = each key's own channel).
pub async fn release(
    client: &Client,
    keys: &[String],
    token: &str,
    force: bool,
    channel: &str,
) -> Result<u64> {
    release_noting_retry(client, keys, token, force, channel).await.map(|(n, _)| n)
}

/// `release`, and whether it was sent twice (the connection dropped): a
/// second answer of 0 may then mean the first one released it.
pub async fn release_noting_retry(
    client: &Client,
    keys: &[String],
    token: &str,
    force: bool,
    channel: &str,
) -> Result<(u64, bool)> {
    let mut invocation = RELEASE.on(client).key(keys);
    invocation.arg(token).arg(flag(force)).arg(channel);
    let invocation = &invocation;
    client.call_noting_retry(|mut c| async move { invocation.invoke_async(&mut c).await }).await
}

/// Whether `token` still held every key (and now holds it for `ttl_ms`).
pub async fn refresh(client: &Client, keys: &[String], token: &str, ttl_ms: u64) -> Result<Refreshed> {
    run_held(client, REFRESH.on(client).key(keys).arg(token).arg(ttl_ms), one).await.map(refreshed)
}

pub async fn inspect(client: &Client, keys: &[String]) -> Result<Vec<Option<Record>>> {
    let entries: Vec<Vec<Value>> = run(client, &INSPECT.on(client).key(keys)).await?;
    entries.into_iter().map(parse_record).collect()
}

pub async fn fair_obtain(
    client: &Client,
    k: &FairKeys,
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    attempt: Attempt,
) -> Result<Obtain> {
    let keys = [&k.lock, &k.queue, &k.alive, &k.tags];
    let mut invocation = FAIR_OBTAIN.on(client).key(&keys);
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(metadata.is_some()));
    invocation.arg(attempt.patience_ms).arg(flag(attempt.will_wait)).arg(attempt.number).arg(&k.channel);
    invocation.arg(&k.announce);
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Releases (handing the lock to the head of the queue) when `release`, and
/// leaves the queue either way.
pub async fn fair_release(client: &Client, k: &FairKeys, token: &str, release: bool) -> Result<bool> {
    let keys = [&k.lock, &k.queue, &k.alive, &k.tags];
    let mut invocation = FAIR_RELEASE.on(client).key(&keys);
    invocation.arg(token).arg(&k.channel).arg(flag(release)).arg(&k.announce);
    let released: i64 = run(client, &invocation).await?;
    Ok(released == 1)
}

/// The leader `token` of an election publishes `value`; false when it no
/// longer leads.
pub async fn el_proclaim(client: &Client, k: &FairKeys, token: &str, value: &str) -> Result<bool> {
    let mut invocation = EL_PROCLAIM.on(client).key(&k.lock);
    invocation.arg(token).arg(value).arg(&k.announce);
    let done: i64 = run(client, &invocation).await?;
    Ok(done == 1)
}
