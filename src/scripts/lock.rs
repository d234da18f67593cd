//! The steps on a Lock's hash: take, renew, release and look at a hold,
//! fair or not, and a quorum master's fence raise; an election's proclaim.

use crate::error::Result;
use crate::keys::{with_fence_records, FairKeys};
use crate::transport::client::Client;

use redis::Value;

use super::argv::{Leave, Whose};
use super::{
    one, parse_record, refreshed, run, run_held, taken, taken_or_busy, Argv, Attempt, Lua, Obtain, Record,
    Refreshed,
};

step! {
    OBTAIN = "obtain.lua",
    struct ObtainArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        set_metadata: bool,
        with_records: bool,
        will_wait: bool,
        waited: bool,
        from: Option<&'a str>,
    }
}

step! {
    RELEASE = "release.lua",
    struct ReleaseArgv<'a> {
        token: &'a str,
        force: Whose,
        channel: &'a str,
    }
}

step! {
    REFRESH = "refresh.lua",
    struct RefreshArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
    }
}

step! {
    INSPECT = "inspect.lua",
    struct InspectArgv {}
}

step! {
    FENCE_RAISE = "fence_raise.lua",
    struct FenceRaiseArgv<'a> {
        token: &'a str,
        fence: i64,
    }
}

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

step! {
    EL_PROCLAIM = "el_proclaim.lua",
    struct ElProclaimArgv<'a> {
        token: &'a str,
        value: &'a str,
        announce: &'a str,
    }
}

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
    let mut invocation = ObtainArgv {
        token,
        ttl_ms,
        metadata: metadata.unwrap_or(""),
        set_metadata: metadata.is_some(),
        with_records: quorum,
        will_wait: attempt.will_wait,
        waited: attempt.number > 1,
        from,
    }
    .on(client);
    if quorum {
        invocation.key(with_fence_records(keys));
    } else {
        invocation.key(keys);
    }
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Raises the fence of `token`'s hold on `keys` to at least `fence`, and
/// their fence records with it: false when `token` no longer holds them all.
pub async fn fence_raise(client: &Client, keys: &[String], token: &str, fence: i64) -> Result<bool> {
    let raised: i64 =
        run(client, FenceRaiseArgv { token, fence }.on(client).key(with_fence_records(keys))).await?;
    Ok(raised == 1)
}

/// Returns how many keys were released; 0 when `token` did not hold them all.
/// `channel`: where the release is announced ('' = each key's own channel).
pub async fn release(
    client: &Client,
    keys: &[String],
    token: &str,
    force: Whose,
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
    force: Whose,
    channel: &str,
) -> Result<(u64, bool)> {
    let mut invocation = ReleaseArgv { token, force, channel }.on(client);
    invocation.key(keys);
    let invocation = &invocation;
    client.call_noting_retry(|mut c| async move { invocation.invoke_async(&mut c).await }).await
}

/// Whether `token` still held every key (and now holds it for `ttl_ms`).
pub async fn refresh(client: &Client, keys: &[String], token: &str, ttl_ms: u64) -> Result<Refreshed> {
    run_held(client, RefreshArgv { token, ttl_ms }.on(client).key(keys), one).await.map(refreshed)
}

pub async fn inspect(client: &Client, keys: &[String]) -> Result<Vec<Option<Record>>> {
    let entries: Vec<Vec<Value>> = run(client, InspectArgv {}.on(client).key(keys)).await?;
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
    let mut invocation = FairObtainArgv {
        token,
        ttl_ms,
        metadata: metadata.unwrap_or(""),
        set_metadata: metadata.is_some(),
        patience_ms: attempt.patience_ms,
        will_wait: attempt.will_wait,
        attempt: attempt.number,
        channel: &k.channel,
        announce: &k.announce,
    }
    .on(client);
    invocation.key(&[&k.lock, &k.queue, &k.alive, &k.tags]);
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Releases (handing the lock to the head of the queue) when `release` is
/// `Leave::Hold`, and leaves the queue either way.
pub async fn fair_release(client: &Client, k: &FairKeys, token: &str, release: Leave) -> Result<bool> {
    let mut invocation =
        FairReleaseArgv { token, channel: &k.channel, release, announce: &k.announce }.on(client);
    invocation.key(&[&k.lock, &k.queue, &k.alive, &k.tags]);
    let released: i64 = run(client, &invocation).await?;
    Ok(released == 1)
}

/// The leader `token` of an election publishes `value`; false when it no
/// longer leads.
pub async fn el_proclaim(client: &Client, k: &FairKeys, token: &str, value: &str) -> Result<bool> {
    let done: i64 =
        run(client, ElProclaimArgv { token, value, announce: &k.announce }.on(client).key(&k.lock)).await?;
    Ok(done == 1)
}
