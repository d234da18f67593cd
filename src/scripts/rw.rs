//! The steps on an RWMutex: read and write sides, fair or not, a reader's
//! lease renewal (shared with a semaphore's permits), inspect and force release.

use crate::error::Result;
use crate::keys::{fence_record, RwKeys};
use crate::transport::client::Client;

use super::argv::Leave;
use super::{one, refreshed, run, run_held, taken, taken_or_busy, Argv, Attempt, Lua, Obtain, Refreshed};

step! {
    RW_READ = "rw_read.lua",
    struct RwReadArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        writer_preference: bool,
        will_wait: bool,
    }
}

step! {
    RW_WRITE = "rw_write.lua",
    struct RwWriteArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
        metadata: &'a str,
        writer_preference: bool,
        set_metadata: bool,
        will_wait: bool,
        waited: bool,
    }
}

step! {
    LEASE_REFRESH = "lease_refresh.lua",
    struct LeaseRefreshArgv<'a> {
        token: &'a str,
        ttl_ms: u64,
    }
}

step! {
    RW_READ_RELEASE = "rw_read_release.lua",
    struct RwReadReleaseArgv<'a> {
        token: &'a str,
        channel: &'a str,
    }
}

step! {
    RW_WITHDRAW = "rw_withdraw.lua",
    struct RwWithdrawArgv<'a> {
        token: &'a str,
        channel: &'a str,
    }
}

step! {
    RW_INSPECT = "rw_inspect.lua",
    struct RwInspectArgv<'a> {
        reader: &'a str,
    }
}

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

step! {
    RW_FORCE_RELEASE = "rw_force_release.lua",
    struct RwForceReleaseArgv<'a> {
        channel: &'a str,
        token: &'a str,
    }
}

wire! {
    /// A side of an RWMutex.
    enum Side {
        Read = "r",
        Write = "w",
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 10] = [
    &RW_READ,
    &RW_WRITE,
    &LEASE_REFRESH,
    &RW_READ_RELEASE,
    &RW_WITHDRAW,
    &RW_INSPECT,
    &RW_FAIR_READ,
    &RW_FAIR_WRITE,
    &RW_FAIR_RELEASE,
    &RW_FORCE_RELEASE,
];

/// `will_wait`: a writer's hold found busy is marked waited on, so that its
/// release wakes this reader (a release nobody waits for publishes nothing).
pub async fn rw_read(
    client: &Client,
    k: &RwKeys,
    token: &str,
    ttl_ms: u64,
    writer_preference: bool,
    will_wait: bool,
) -> Result<Obtain> {
    let mut invocation = RwReadArgv { token, ttl_ms, writer_preference, will_wait }.on(client);
    invocation.key(&[&k.writer, &k.readers, &k.intent]);
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

#[expect(clippy::too_many_arguments)]
pub async fn rw_write(
    client: &Client,
    k: &RwKeys,
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    writer_preference: bool,
    quorum: bool,
    attempt: Attempt,
) -> Result<Obtain> {
    let mut invocation = RwWriteArgv {
        token,
        ttl_ms,
        metadata: metadata.unwrap_or(""),
        writer_preference,
        set_metadata: metadata.is_some(),
        will_wait: attempt.will_wait,
        waited: attempt.number > 1,
    }
    .on(client);
    invocation.key(&[&k.writer, &k.readers, &k.intent]);
    if quorum {
        invocation.key(fence_record(&k.writer));
    }
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Pushes the expiry of `token`'s lease in the zset `keys[0]` (the other
/// keys live as long as its latest lease).
pub async fn lease_refresh(client: &Client, keys: &[&String], token: &str, ttl_ms: u64) -> Result<Refreshed> {
    run_held(client, LeaseRefreshArgv { token, ttl_ms }.on(client).key(keys), one).await.map(refreshed)
}

pub async fn rw_read_release(client: &Client, k: &RwKeys, token: &str) -> Result<bool> {
    let mut invocation = RwReadReleaseArgv { token, channel: &k.channel }.on(client);
    let released: i64 = run(client, invocation.key(&[&k.readers, &k.writer])).await?;
    Ok(released == 1)
}

pub async fn rw_withdraw(client: &Client, k: &RwKeys, token: &str) -> Result<()> {
    let mut invocation = RwWithdrawArgv { token, channel: &k.channel }.on(client);
    run::<i64>(client, invocation.key(&k.intent)).await.map(drop)
}

fn rw_fair_keys(k: &RwKeys) -> [&String; 6] {
    [&k.writer, &k.readers, &k.queued_readers, &k.queued_writers, &k.alive, &k.tags]
}

/// One attempt of a fair reader (`writer: None`) or writer (with its metadata).
pub async fn rw_fair_obtain(
    client: &Client,
    k: &RwKeys,
    token: &str,
    ttl_ms: u64,
    writer: Option<Option<&str>>,
    attempt: Attempt,
) -> Result<Obtain> {
    let (patience_ms, will_wait, channel) = (attempt.patience_ms, attempt.will_wait, &k.channel);
    let mut invocation = match writer {
        None => RwFairReadArgv { token, ttl_ms, patience_ms, will_wait, attempt: attempt.number, channel }
            .on(client),
        Some(metadata) => RwFairWriteArgv {
            token,
            ttl_ms,
            metadata: metadata.unwrap_or(""),
            set_metadata: metadata.is_some(),
            patience_ms,
            will_wait,
            attempt: attempt.number,
            channel,
        }
        .on(client),
    };
    invocation.key(&rw_fair_keys(k));
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Releases one side of a fair RWMutex (handing it on) when `release` is
/// `Leave::Hold`, and leaves its queue either way.
pub async fn rw_fair_release(
    client: &Client,
    k: &RwKeys,
    token: &str,
    side: Side,
    release: Leave,
) -> Result<bool> {
    let mut invocation = RwFairReleaseArgv { token, side, channel: &k.channel, release }.on(client);
    invocation.key(&rw_fair_keys(k));
    let released: i64 = run(client, &invocation).await?;
    Ok(released == 1)
}

/// The state of an RWMutex as `rw_inspect.lua` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwState {
    pub readers: i64,
    /// Milliseconds left for the reader asked about; negative when it is not reading.
    pub reader_pttl_ms: i64,
    /// Milliseconds left on a waiting writer's intent; negative when none.
    pub intent_pttl_ms: i64,
    /// A writer holds.
    pub writer: bool,
}

pub async fn rw_inspect(client: &Client, k: &RwKeys, reader: &str) -> Result<RwState> {
    let keys = [&k.writer, &k.readers, &k.intent];
    let (readers, reader_pttl_ms, intent_pttl_ms, writer): (i64, i64, i64, i64) =
        run(client, RwInspectArgv { reader }.on(client).key(&keys)).await?;
    Ok(RwState { readers, reader_pttl_ms, intent_pttl_ms, writer: writer == 1 })
}

/// Ends every hold of an RWMutex whoever holds it, or only `token`'s when
/// not empty: whether a writer held, and how many live readers were removed.
pub async fn rw_force_release(client: &Client, k: &RwKeys, token: &str) -> Result<(bool, u64)> {
    let keys = [&k.writer, &k.readers, &k.intent];
    let (wrote, read): (i64, i64) =
        run(client, RwForceReleaseArgv { channel: &k.channel, token }.on(client).key(&keys)).await?;
    Ok((wrote == 1, read.max(0) as u64))
}
