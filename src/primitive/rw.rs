//! The two sides of an RWMutex whose readers join whenever no writer holds
//! (with writer preference, a waiting writer holds new readers back); the
//! keys of every RWMutex, fair or not, and the steps both orders share: a
//! reader's lease renewal (also a semaphore permit's), the look at its
//! state and the operator's force release. The writer's hold is a Lock's
//! hash (renewed, released and looked at by `exclusive`'s steps).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::Value;

use super::steps::{Holder, Obtaining, Released, Steps};
use super::{attempt, exclusive};
use crate::error::{Error, Result};
use crate::keys::{fence_record, KeySpace, Part};
use crate::scripts::{
    one, refreshed, run, run_batch, run_held, step, taken, taken_or_busy, Argv, BatchHold, Lua, Obtain,
    Record, Refreshed, Whose,
};
use crate::transport::backend::{Answers, Backend, Batch, Renewal};

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
    LEASE_REFRESH_BATCH = "lease_refresh_batch.lua",
    struct LeaseRefreshBatchArgv<'a> {
        leases: &'a [BatchHold<'a>],
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
    RW_FORCE_RELEASE = "rw_force_release.lua",
    struct RwForceReleaseArgv<'a> {
        channel: &'a str,
        token: &'a str,
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 8] = [
    &RW_READ,
    &RW_WRITE,
    &LEASE_REFRESH,
    &LEASE_REFRESH_BATCH,
    &RW_READ_RELEASE,
    &RW_WITHDRAW,
    &RW_INSPECT,
    &RW_FORCE_RELEASE,
];

/// An RWMutex: the writer's hold (shaped like a Lock's), the readers (a sorted
/// set of token -> expiry in server milliseconds), a waiting writer's intent,
/// and in fair mode the waiting readers and writers (token -> arrival), until
/// when each waiter counts as alive, and each waiter's tag (its latest attempt
/// and its patience: what a hand-over to it is valid for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwKeys {
    pub writer: String,
    pub readers: String,
    pub intent: String,
    pub queued_readers: String,
    pub queued_writers: String,
    pub alive: String,
    pub tags: String,
    /// Where releases that may let a waiter in are published.
    pub channel: String,
}

impl RwKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 8] {
        [
            &self.writer,
            &self.readers,
            &self.intent,
            &self.queued_readers,
            &self.queued_writers,
            &self.alive,
            &self.tags,
            &self.channel,
        ]
    }

    /// The keys the steps of writer preference take, in their `KEYS` order.
    fn of_preference(&self) -> [&String; 3] {
        [&self.writer, &self.readers, &self.intent]
    }
}

impl KeySpace {
    /// The keys of the read/write mutex `name`, all under its hash tag.
    pub fn rw(&self, name: &str) -> RwKeys {
        let part = |p| self.part(name, p);
        RwKeys {
            writer: part(Part::RwWriter),
            readers: part(Part::RwReaders),
            intent: part(Part::RwIntent),
            queued_readers: part(Part::RwQueuedReaders),
            queued_writers: part(Part::RwQueuedWriters),
            alive: part(Part::RwAlive),
            tags: part(Part::RwTags),
            channel: part(Part::RwWake),
        }
    }
}

/// A shared hold among the readers, each with its own expiry.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    pub(crate) keys: RwKeys,
    pub(crate) writer_preference: bool,
}

/// The exclusive side.
#[derive(Debug, Clone)]
pub(crate) struct Write {
    pub(crate) keys: RwKeys,
    pub(crate) writer_preference: bool,
}

impl Steps for Read {
    /// `will_wait`: a writer's hold found busy is marked waited on, so that
    /// its release wakes this reader (a release nobody waits for publishes
    /// nothing).
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let mut invocation = RwReadArgv {
            token: ask.token,
            ttl_ms: ask.ttl.as_millis() as u64,
            writer_preference: self.writer_preference,
            will_wait: ask.will_wait,
        }
        .on(c);
        invocation.key(&self.keys.of_preference());
        run_held(c, &invocation, taken).await.map(taken_or_busy)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        let token = holder.token;
        lease_refresh(c, &[&self.keys.readers], token, ttl).await
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        lease_renew(c, Arc::from([self.keys.readers.clone()]), holder.token, ttl).await
    }

    /// A transaction, no script: the reader leaves, and the writer hash says
    /// whether a writer waits. Only then does `rw_read_release.lua` run, to
    /// wake it if this was the last live reader.
    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let token = holder.token;
        let k = &self.keys;
        let (left, retried) = leave_readers(c, k, token).await?;
        if left.writer_waits {
            let mut invocation = RwReadReleaseArgv { token, channel: &k.channel }.on(c);
            run::<i64>(c, invocation.key(&[&k.readers, &k.writer])).await?;
        }
        Ok(Released { held: left.held, retried })
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        exclusive::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    fn kind(&self) -> &'static str {
        "read"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn is_reader(&self) -> bool {
        true
    }

    /// Readers get no fence: they exclude nobody but writers.
    fn fenced(&self) -> bool {
        false
    }
}

impl Steps for Write {
    /// A writer that will wait leaves its intent when readers hold (writer
    /// preference); a one-shot attempt (try_write) never does.
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        let attempt = attempt(ask, Duration::ZERO);
        let mut invocation = RwWriteArgv {
            token: ask.token,
            ttl_ms: ask.ttl.as_millis() as u64,
            metadata: ask.metadata.unwrap_or(""),
            writer_preference: self.writer_preference && ask.will_wait,
            set_metadata: ask.metadata.is_some(),
            will_wait: attempt.will_wait,
            waited: attempt.number > 1,
        }
        .on(c);
        invocation.key(&self.keys.of_preference());
        if quorum {
            invocation.key(fence_record(&self.keys.writer));
        }
        run_held(c, &invocation, taken).await.map(taken_or_busy)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        exclusive::refresh(c, std::slice::from_ref(&self.keys.writer), holder, ttl).await
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        exclusive::renew(c, Arc::from([self.keys.writer.clone()]), holder, ttl).await
    }

    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let token = holder.token;
        let writer = std::slice::from_ref(&self.keys.writer);
        let (n, retried) = exclusive::release(c, writer, token, Whose::Own, &self.keys.channel).await?;
        Ok(Released { held: n > 0, retried })
    }

    async fn withdraw_on(&self, c: &Backend, token: &str, _ours: bool) -> Result<()> {
        if !self.writer_preference {
            return Ok(());
        }
        let mut invocation = RwWithdrawArgv { token, channel: &self.keys.channel }.on(c);
        run::<i64>(c, invocation.key(&self.keys.intent)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        exclusive::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    async fn fence_raise_on(&self, c: &Backend, token: &str, fence: i64) -> Result<bool> {
        exclusive::fence_raise(c, std::slice::from_ref(&self.keys.writer), token, fence).await
    }

    fn kind(&self) -> &'static str {
        "write"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    /// A writer's intent lives for its ttl: renewed by each attempt.
    fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        self.writer_preference.then(|| ttl / 3)
    }
}

/// What a reader's leaving found.
struct Left {
    /// Its lease had not run out.
    held: bool,
    /// A writer waits (its mark `w`, alone in the writer's key: no writer holds).
    writer_waits: bool,
}

/// `MULTI / ZSCORE readers token / ZREM readers token / TIME / GET writer /
/// EXEC`: the reader leaves, its lease live if it ran out after the
/// server's clock in the same transaction (as `rw_read_release.lua` judges
/// it); and whether the writer's key holds a waiting writer's mark.
/// Whether it was sent twice (`Released::retried`).
async fn leave_readers(c: &Backend, k: &RwKeys, token: &str) -> Result<(Left, bool)> {
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI")
        .cmd("ZSCORE")
        .arg(&k.readers)
        .arg(token)
        .cmd("ZREM")
        .arg(&k.readers)
        .arg(token)
        .cmd("TIME")
        .cmd("GET")
        .arg(&k.writer)
        .cmd("EXEC");
    let pipe = &*pipe.ignore_errors();
    let (replies, retried): (Vec<Value>, bool) =
        c.call_noting_retry(|mut con| async move { pipe.query_async(&mut con).await }).await?;
    let bad = |what: String| Error::Redis(format!("{UNEXPECTED}: {what}"));
    for reply in replies.iter().take(5) {
        reply.clone().extract_error()?;
    }
    let Some(Value::Array(exec)) = replies.get(5) else {
        return Err(bad(format!("{:?}", replies.get(5))));
    };
    let [score, _, time, writer] = exec.as_slice() else {
        return Err(bad(format!("{exec:?}")));
    };
    let expiry: Option<f64> = read(score)?;
    let (secs, micros): (i64, i64) = read(time)?;
    // A key of another type (an RWMutex of ferrolock 0.1, met during a
    // rolling upgrade) is refused: it shows no mark of this layout.
    let writer: Option<Vec<u8>> = match writer {
        Value::ServerError(_) => None,
        value => read(value)?,
    };
    let now_ms = (secs * 1_000_000 + micros) / 1000;
    #[expect(clippy::cast_precision_loss, reason = "server milliseconds, far below 2^53")]
    let held = expiry.is_some_and(|expiry| expiry > now_ms as f64);
    Ok((Left { held, writer_waits: writer.as_deref().is_some_and(only_a_waiters_mark) }, retried))
}

/// Whether a writer's key holds no hold but a waiting writer's mark: its
/// value (`<token> <fence> <flags>[ <meta>]`, lib/hold.lua) has no token and
/// the flag `w`.
fn only_a_waiters_mark(value: &[u8]) -> bool {
    let mut parts = value.splitn(4, |b| *b == b' ');
    parts.next() == Some(b"") && parts.nth(1).is_some_and(|flags| flags.contains(&b'w'))
}

const UNEXPECTED: &str = "unexpected reply to a reader's release";

/// One reply of the reader's release transaction, read as `T`.
fn read<T: redis::FromRedisValue>(v: &Value) -> Result<T> {
    redis::from_redis_value(v.clone().extract_error()?)
        .map_err(|e| Error::Redis(format!("{UNEXPECTED}: {e}")))
}

/// Pushes the expiry of `token`'s lease in the zset `keys[0]` (the other
/// keys live as long as its latest lease): a reader's, or a semaphore
/// permit's.
pub(crate) async fn lease_refresh(
    client: &Backend,
    keys: &[&String],
    token: &str,
    ttl: Duration,
) -> Result<Refreshed> {
    let ttl_ms = ttl.as_millis() as u64;
    run_held(client, LeaseRefreshArgv { token, ttl_ms }.on(client).key(keys), one).await.map(refreshed)
}

/// `lease_refresh`, as the watchdog sends it: in one call with the other
/// leases' renewals that fall due with it (`Backend::renew`).
pub(crate) async fn lease_renew(
    client: &Backend,
    keys: Arc<[String]>,
    token: &Arc<str>,
    ttl: Duration,
) -> Result<Refreshed> {
    let renewal =
        Renewal { keys, token: token.clone(), fence: None, written: None, ttl_ms: ttl.as_millis() as u64 };
    client.renew(&LEASE_RENEWALS, renewal).await.map(Refreshed::from)
}

/// How the renewals of leases go together: `lease_refresh_batch.lua`; one
/// alone, `lease_refresh.lua`.
static LEASE_RENEWALS: Batch = Batch { send: send_lease_renewals };

fn send_lease_renewals(client: Backend, renewals: Arc<[Renewal]>) -> BoxFuture<'static, Result<Answers>> {
    Box::pin(async move {
        if let [one] = &*renewals {
            let keys: Vec<&String> = one.keys.iter().collect();
            let ttl = Duration::from_millis(one.ttl_ms);
            return lease_refresh(&client, &keys, &one.token, ttl).await.map(Answers::from);
        }
        run_batch(&client, &renewals, false, |leases| LeaseRefreshBatchArgv { leases }.on(&client)).await
    })
}

/// The state of an RWMutex as `rw_inspect.lua` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RwState {
    pub readers: i64,
    /// Milliseconds left for the reader asked about; negative when it is not reading.
    pub reader_pttl_ms: i64,
    /// Milliseconds left on a waiting writer's intent; negative when none.
    pub intent_pttl_ms: i64,
    /// A writer holds.
    pub writer: bool,
}

/// The state of the RWMutex of `k`, asking about the reader `reader`.
pub(crate) async fn inspect(client: &Backend, k: &RwKeys, reader: &str) -> Result<RwState> {
    let (readers, reader_pttl_ms, intent_pttl_ms, writer): (i64, i64, i64, i64) =
        run(client, RwInspectArgv { reader }.on(client).key(&k.of_preference())).await?;
    Ok(RwState { readers, reader_pttl_ms, intent_pttl_ms, writer: writer == 1 })
}

/// Ends every hold of an RWMutex whoever holds it, or only `token`'s when
/// not empty: whether a writer held, and how many live readers were removed.
pub(crate) async fn force_release(client: &Backend, k: &RwKeys, token: &str) -> Result<(bool, u64)> {
    let mut invocation = RwForceReleaseArgv { channel: &k.channel, token }.on(client);
    let (wrote, read): (i64, i64) = run(client, invocation.key(&k.of_preference())).await?;
    Ok((wrote == 1, read.max(0) as u64))
}
