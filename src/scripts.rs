//! The atomic steps, one Lua file each, embedded at build time behind the
//! shared helpers of `lua/common.lua`. `Script` sends EVALSHA and falls back
//! to loading the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation, Value};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::{fence_record, with_fence_records, FairKeys, RwKeys, SemKeys};
use crate::replication;

/// One atomic step, in two builds: publishing with PUBLISH (one node) or
/// SPUBLISH (a Cluster, where a plain PUBLISH would reach every node).
struct Lua {
    plain: LazyLock<Script>,
    sharded: LazyLock<Script>,
}

impl Lua {
    fn on(&self, client: &Client) -> &Script {
        if client.is_cluster() {
            &self.sharded
        } else {
            &self.plain
        }
    }
}

macro_rules! lua {
    ($name:ident, $file:literal) => {
        static $name: Lua = Lua {
    plain: LazyLock::new(|| Script::new(lua!(@source "PUBLISH", $file))),
    sharded: LazyLock::new(|| Script::new(lua!(@source "SPUBLISH", $file))),
        };
    };
    (@source $publish:literal, $file:literal) => {
        concat!(
            "local PUBLISH = '",
            $publish,
            "'\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/common.lua")),
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))
        )
    };
}

lua!(OBTAIN, "obtain.lua");
lua!(RELEASE, "release.lua");
lua!(REFRESH, "refresh.lua");
lua!(INSPECT, "inspect.lua");
lua!(FAIR_OBTAIN, "fair_obtain.lua");
lua!(FAIR_RELEASE, "fair_release.lua");
lua!(RW_READ, "rw_read.lua");
lua!(RW_WRITE, "rw_write.lua");
lua!(LEASE_REFRESH, "lease_refresh.lua");
lua!(RW_READ_RELEASE, "rw_read_release.lua");
lua!(RW_WITHDRAW, "rw_withdraw.lua");
lua!(RW_INSPECT, "rw_inspect.lua");
lua!(RW_FAIR_READ, "rw_fair_read.lua");
lua!(RW_FAIR_WRITE, "rw_fair_write.lua");
lua!(RW_FAIR_RELEASE, "rw_fair_release.lua");
lua!(SEM_OBTAIN, "sem_obtain.lua");
lua!(SEM_RELEASE, "sem_release.lua");
lua!(SEM_INSPECT, "sem_inspect.lua");
lua!(EL_PROCLAIM, "el_proclaim.lua");
lua!(RW_FORCE_RELEASE, "rw_force_release.lua");
lua!(DESCRIBE, "describe.lua");
lua!(FORCE_RELEASE, "force_release.lua");
lua!(FENCE_RAISE, "fence_raise.lua");

/// What `obtain.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obtain {
    Taken {
        fence: i64,
    },
    /// Held by another owner for `pttl_ms` more (-1: no expiry, -2: just gone).
    Busy {
        pttl_ms: i64,
    },
}

/// The holder of one lock key, as stored in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub token: String,
    pub metadata: Option<String>,
    pub fence: i64,
    pub pttl_ms: i64,
}

/// `metadata`: stored with a new hold; on re-entry (the token holds already)
/// `None` keeps what is stored. `quorum`: on a quorum's master, where a new
/// hold's fence is also above the keys' fence records.
pub async fn obtain(
    client: &Client,
    keys: &[String],
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    quorum: bool,
) -> Result<Obtain> {
    let mut invocation =
        if quorum { OBTAIN.on(client).key(with_fence_records(keys)) } else { OBTAIN.on(client).key(keys) };
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(metadata.is_some()));
    if quorum {
        invocation.arg("1");
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

/// Returns whether `token` still held every key (and now holds it for `ttl_ms`).
pub async fn refresh(client: &Client, keys: &[String], token: &str, ttl_ms: u64) -> Result<bool> {
    let renewed: i64 = run_held(client, REFRESH.on(client).key(keys).arg(token).arg(ttl_ms), one).await?;
    Ok(renewed == 1)
}

pub async fn inspect(client: &Client, keys: &[String]) -> Result<Vec<Option<Record>>> {
    let entries: Vec<Vec<Value>> = run(client, &INSPECT.on(client).key(keys)).await?;
    entries.into_iter().map(parse_record).collect()
}

fn taken_or_busy((taken, n): (i64, i64)) -> Obtain {
    if taken == 1 {
        Obtain::Taken { fence: n }
    } else {
        Obtain::Busy { pttl_ms: n }
    }
}

fn flag(on: bool) -> &'static str {
    if on {
        "1"
    } else {
        "0"
    }
}

pub async fn rw_read(
    client: &Client,
    k: &RwKeys,
    token: &str,
    ttl_ms: u64,
    writer_preference: bool,
) -> Result<Obtain> {
    let keys = [&k.writer, &k.readers, &k.intent];
    run_held(client, RW_READ.on(client).key(&keys).arg(token).arg(ttl_ms).arg(flag(writer_preference)), taken)
        .await
        .map(taken_or_busy)
}

#[allow(clippy::too_many_arguments)]
pub async fn rw_write(
    client: &Client,
    k: &RwKeys,
    token: &str,
    ttl_ms: u64,
    metadata: Option<&str>,
    writer_preference: bool,
    quorum: bool,
) -> Result<Obtain> {
    let mut invocation = RW_WRITE.on(client).key(&[&k.writer, &k.readers, &k.intent]);
    if quorum {
        invocation.key(fence_record(&k.writer));
    }
    invocation.arg(token).arg(ttl_ms).arg(metadata.unwrap_or("")).arg(flag(writer_preference));
    invocation.arg(flag(metadata.is_some()));
    run_held(client, &invocation, taken).await.map(taken_or_busy)
}

/// Pushes the expiry of `token`'s lease in the zset `keys[0]` (the other
/// keys live as long as its latest lease).
pub async fn lease_refresh(client: &Client, keys: &[&String], token: &str, ttl_ms: u64) -> Result<bool> {
    let renewed: i64 =
        run_held(client, LEASE_REFRESH.on(client).key(keys).arg(token).arg(ttl_ms), one).await?;
    Ok(renewed == 1)
}

pub async fn rw_read_release(client: &Client, k: &RwKeys, token: &str) -> Result<bool> {
    let released: i64 =
        run(client, RW_READ_RELEASE.on(client).key(&k.readers).arg(token).arg(&k.channel)).await?;
    Ok(released == 1)
}

pub async fn rw_withdraw(client: &Client, k: &RwKeys, token: &str) -> Result<()> {
    run::<i64>(client, RW_WITHDRAW.on(client).key(&k.intent).arg(token).arg(&k.channel)).await.map(drop)
}

/// What a fair waiter's attempt says about itself: its number (a hand-over
/// names it, so a grant counts only for the attempt it was made for), how
/// long a hand-over to it stays its own, and whether it will wait (queue).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub number: u64,
    pub patience_ms: u64,
    pub will_wait: bool,
}

#[allow(clippy::too_many_arguments)]
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

fn sem_keys(k: &SemKeys) -> [&String; 5] {
    [&k.holders, &k.data, &k.queue, &k.alive, &k.tags]
}

#[allow(clippy::too_many_arguments)]
/// One attempt at a semaphore's permit. A `PERMITS` refusal (another count
/// in force while held) becomes `InvalidArgument`.
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
    match run_held(client, &invocation, taken).await {
        Ok(reply) => Ok(taken_or_busy(reply)),
        Err(Error::Redis(m)) if m.contains("PERMITS") => Err(Error::InvalidArgument(format!(
            "{}: every process must use the same permits for one semaphore while any permit is held \
             (a new count applies once none is)",
            m.split("PERMITS").nth(1).unwrap_or(&m).trim()
        ))),
        Err(e) => Err(e),
    }
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

/// `describe.lua`, or with `token` `force_release.lua` ('' = every hold),
/// over every part of one name: `keys` with `roles` ('<kind> <role>' each,
/// from the layout table). Parsed by `listing.rs`.
pub async fn by_parts<T: redis::FromRedisValue>(
    client: &Client,
    keys: &[String],
    roles: &[String],
    token: Option<&str>,
) -> Result<T> {
    let script = if token.is_some() { &FORCE_RELEASE } else { &DESCRIBE };
    let mut invocation = script.on(client).key(keys);
    invocation.arg(roles);
    if let Some(token) = token {
        invocation.arg(token);
    }
    run(client, &invocation).await
}

async fn run<T: redis::FromRedisValue>(client: &Client, invocation: &ScriptInvocation<'_>) -> Result<T> {
    client.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await
}

/// `run` for a step that makes or re-asserts a hold when `made` says so of
/// its answer. With replica acknowledgement on, the script is followed by
/// WAIT (or WAITAOF) in one pipeline on the same connection, and a hold made
/// that fewer replicas than asked acknowledged is noted for the lock's
/// policy (`replication::noting`).
async fn run_held<T: redis::FromRedisValue>(
    client: &Client,
    invocation: &ScriptInvocation<'_>,
    made: fn(&T) -> bool,
) -> Result<T> {
    let replication = client.options().replication;
    if !replication.is_on() {
        return run(client, invocation).await;
    }
    let replication = &replication;
    let (reply, acked) = client
        .call(|mut c| async move { replication::invoke_acked(&mut c, invocation, replication).await })
        .await?;
    let answer: T = redis::from_redis_value(reply)
        .map_err(|e| Error::Redis(format!("unexpected reply from a lock script: {e}")))?;
    if acked < replication.replicas && made(&answer) {
        replication::note(replication.shortfall(acked));
    }
    Ok(answer)
}

/// A hold was taken (or re-entered): `{1, fence}`.
fn taken(reply: &(i64, i64)) -> bool {
    reply.0 == 1
}

/// A hold was renewed: `1`.
#[allow(clippy::trivially_copy_pass_by_ref)] // the shape of `run_held`'s `made`
fn one(reply: &i64) -> bool {
    *reply == 1
}

fn parse_record(entry: Vec<Value>) -> Result<Option<Record>> {
    if entry.is_empty() {
        return Ok(None);
    }
    let bad = |e: redis::ParsingError| Error::Redis(format!("unexpected reply from inspect.lua: {e}"));
    let mut it = entry.into_iter();
    let mut next = || it.next().unwrap_or(Value::Nil);
    let token: String = redis::from_redis_value(next()).map_err(bad)?;
    let metadata: String = redis::from_redis_value(next()).map_err(bad)?;
    let fence: i64 = redis::from_redis_value(next()).map_err(bad)?;
    let pttl_ms: i64 = redis::from_redis_value(next()).map_err(bad)?;
    Ok(Some(Record { token, metadata: (!metadata.is_empty()).then_some(metadata), fence, pttl_ms }))
}
