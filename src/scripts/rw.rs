//! The steps on an RWMutex: read and write sides, fair or not, a reader's
//! lease renewal (shared with a semaphore's permits), inspect and force release.

use crate::client::Client;
use crate::error::Result;
use crate::keys::{fence_record, RwKeys};

use super::{flag, one, refreshed, run, run_held, taken, taken_or_busy, Attempt, Lua, Obtain, Refreshed};

lua!(RW_READ, "rw_read.lua");
lua!(RW_WRITE, "rw_write.lua");
lua!(LEASE_REFRESH, "lease_refresh.lua");
lua!(RW_READ_RELEASE, "rw_read_release.lua");
lua!(RW_WITHDRAW, "rw_withdraw.lua");
lua!(RW_INSPECT, "rw_inspect.lua");
lua!(RW_FAIR_READ, "rw_fair_read.lua");
lua!(RW_FAIR_WRITE, "rw_fair_write.lua");
lua!(RW_FAIR_RELEASE, "rw_fair_release.lua");
lua!(RW_FORCE_RELEASE, "rw_force_release.lua");

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
    let keys = [&k.writer, &k.readers, &k.intent];
    let mut invocation = RW_READ.on(client).key(&keys);
    invocation.arg(token).arg(ttl_ms).arg(flag(writer_preference)).arg(flag(will_wait));
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
    let mut invocation = RW_WRITE.on(client).key(&[&k.writer, &k.readers, &k.intent]);
    if quorum {
        invocation.key(fence_record(&k.writer));
    }
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(writer_preference));
    invocation.arg(flag(metadata.is_some())).arg(flag(attempt.will_wait)).arg(flag(attempt.number > 1));
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Pushes the expiry of `token`'s lease in the zset `keys[0]` (the other
/// keys live as long as its latest lease).
pub async fn lease_refresh(client: &Client, keys: &[&String], token: &str, ttl_ms: u64) -> Result<Refreshed> {
    run_held(client, LEASE_REFRESH.on(client).key(keys).arg(token).arg(ttl_ms), one).await.map(refreshed)
}

pub async fn rw_read_release(client: &Client, k: &RwKeys, token: &str) -> Result<bool> {
    let released: i64 =
        run(client, RW_READ_RELEASE.on(client).key(&[&k.readers, &k.writer]).arg(token).arg(&k.channel))
            .await?;
    Ok(released == 1)
}

pub async fn rw_withdraw(client: &Client, k: &RwKeys, token: &str) -> Result<()> {
    run::<i64>(client, RW_WITHDRAW.on(client).key(&k.intent).arg(token).arg(&k.channel)).await.map(drop)
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
    let keys = rw_fair_keys(k);
    let mut invocation = match writer {
        None => RW_FAIR_READ.on(client).key(&keys),
        Some(_) => RW_FAIR_WRITE.on(client).key(&keys),
    };
    invocation.arg(token).arg(ttl_ms);
    if let Some(metadata) = writer {
        invocation.arg(metadata.unwrap_or("")).arg(flag(metadata.is_some()));
    }
    invocation.arg(attempt.patience_ms).arg(flag(attempt.will_wait)).arg(attempt.number).arg(&k.channel);
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Releases one side of a fair RWMutex (handing it on) when `release`, and
/// leaves its queue either way.
pub async fn rw_fair_release(
    client: &Client,
    k: &RwKeys,
    token: &str,
    writer: bool,
    release: bool,
) -> Result<bool> {
    let mut invocation = RW_FAIR_RELEASE.on(client).key(&rw_fair_keys(k));
    invocation.arg(token).arg(if writer { "w" } else { "r" }).arg(&k.channel).arg(flag(release));
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
        run(client, RW_INSPECT.on(client).key(&keys).arg(reader)).await?;
    Ok(RwState { readers, reader_pttl_ms, intent_pttl_ms, writer: writer == 1 })
}

/// Ends every hold of an RWMutex whoever holds it, or only `token`'s when
/// not empty: whether a writer held, and how many live readers were removed.
pub async fn rw_force_release(client: &Client, k: &RwKeys, token: &str) -> Result<(bool, u64)> {
    let keys = [&k.writer, &k.readers, &k.intent];
    let (wrote, read): (i64, i64) =
        run(client, RW_FORCE_RELEASE.on(client).key(&keys).arg(&k.channel).arg(token)).await?;
    Ok((wrote == 1, read.max(0) as u64))
}
