//! The machinery of the atomic steps, one Lua file each in `lua/`, embedded
//! at build time with the libraries of `lua/lib/` each one includes
//! (`assembly`). A step is declared with its ARGV struct by `step!` (`argv`)
//! in the file of the primitive that runs it (`crate::primitive`); it runs
//! as EVALSHA, and after a NOSCRIPT answer its script is loaded on the node
//! the step goes to, and it runs again (`invocation`). The operator's steps
//! over a name as a whole, every kind alike, are here (`describe`). What the
//! scripts say that Rust reads back lives beside the readers: grants on a
//! wake-up channel in `crate::transport::wakeups::handover`, refusals in
//! `crate::error::refusal`.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use redis::Value;

use crate::error::{Error, Result};
use crate::transport::backend::{Answers, Backend, Renewal, Renewed};
use crate::transport::replication::{self, Shortfall};

use invocation::Built;

/// One atomic step, in two builds: publishing with PUBLISH (one node) or
/// SPUBLISH (a Cluster, where a plain PUBLISH would reach every node), each
/// assembled on first use. Declared with its ARGV struct by `step!`.
pub(crate) struct Lua {
    /// The step's file name in `lua/`, and its source.
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the tests"))]
    file: &'static str,
    source: &'static str,
    /// The names of its ARGV, in order: its struct's fields.
    #[cfg_attr(not(test), expect(dead_code, reason = "checked by the tests against the header"))]
    argv: &'static [&'static str],
    plain: OnceLock<Built>,
    sharded: OnceLock<Built>,
}

impl Lua {
    pub(crate) const fn new(file: &'static str, source: &'static str, argv: &'static [&'static str]) -> Lua {
        Lua { file, source, argv, plain: OnceLock::new(), sharded: OnceLock::new() }
    }

    /// Its source, as `lua/` has it.
    #[cfg(test)]
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    fn on(&self, client: &Backend) -> &Built {
        let (built, publish) =
            if client.is_cluster() { (&self.sharded, "SPUBLISH") } else { (&self.plain, "PUBLISH") };
        built.get_or_init(|| Built::new(assembly::assemble(publish, self.source)))
    }
}

pub(crate) mod argv;
mod assembly;
mod describe;
mod invocation;

pub(crate) use argv::{step, wire, Argv};
pub(crate) use argv::{Leave, Whose};
pub(crate) use describe::by_parts;
pub(crate) use describe::STEPS as OPERATOR_STEPS;
pub(crate) use invocation::Invocation;

/// What `obtain.lua` answered, and when the attempt was sent (on a quorum:
/// the earliest sending of the masters that answered so): a grant's
/// validity runs from there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Obtain {
    /// `shortfall`: fewer replicas than asked acknowledged the grant in
    /// time (how many did); `None` when enough did, or none were asked.
    /// `written`: the hold's value, when the step wrote it whole and knows
    /// it (`Holder::written`).
    Taken { fence: i64, shortfall: Option<Shortfall>, sent: Instant, written: Option<Arc<str>> },
    /// Held by another owner for `pttl_ms` more (-1: no expiry, -2: just gone).
    Busy { pttl_ms: i64, sent: Instant },
}

/// The holder of one lock key, as stored in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub token: String,
    pub metadata: Option<String>,
    pub fence: i64,
    pub pttl_ms: i64,
}

/// What a fair waiter's attempt says about itself: its number (a hand-over
/// names it, so a grant counts only for the attempt it was made for), how
/// long a hand-over to it stays its own, and whether it will wait (queue).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    pub number: u64,
    pub patience_ms: u64,
    pub will_wait: bool,
}

impl Obtain {
    /// A grant's shortfall (a refusal has none).
    pub(crate) fn shortfall(&self) -> Option<Shortfall> {
        match self {
            Obtain::Taken { shortfall, .. } => *shortfall,
            Obtain::Busy { .. } => None,
        }
    }

    /// When the attempt that answered was sent.
    pub(crate) fn sent(&self) -> Instant {
        match self {
            Obtain::Taken { sent, .. } | Obtain::Busy { sent, .. } => *sent,
        }
    }
}

/// What a renewal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refreshed {
    /// The token still held (and now holds for the ttl asked).
    pub held: bool,
    /// It held, but fewer replicas than asked acknowledged the renewal in
    /// time (how many did).
    pub shortfall: Option<Shortfall>,
    /// The hold's value now, exactly, when the renewal wrote it by
    /// comparing it (`Holder::written`); `None`: not known.
    pub written: Option<Arc<str>>,
}

impl Refreshed {
    /// Whether it held, and the shortfall apart: what a renewal's caller
    /// reads (an error says neither); and the hold's value as the renewal
    /// left it, when known (not after an error).
    pub(crate) fn split(refreshed: Result<Refreshed>) -> (Result<bool>, Option<Shortfall>, Option<Arc<str>>) {
        match refreshed {
            Ok(r) => (Ok(r.held), r.shortfall, r.written),
            Err(e) => (Err(e), None, None),
        }
    }
}

impl From<Renewed> for Refreshed {
    fn from(r: Renewed) -> Refreshed {
        Refreshed { held: r.held, shortfall: r.shortfall, written: r.written }
    }
}

impl From<Refreshed> for Answers {
    /// One hold's answer, as a batch's.
    fn from(r: Refreshed) -> Answers {
        Answers { held: vec![r.held], written: vec![r.written], shortfall: r.shortfall }
    }
}

/// A step that makes or re-asserts a hold: its answer, the replicas'
/// shortfall when too few acknowledged a hold it made, and when it was sent.
#[derive(Clone, Copy)]
pub(crate) struct Held<T> {
    pub answer: T,
    pub shortfall: Option<Shortfall>,
    pub sent: Instant,
}

pub(crate) fn taken_or_busy(held: Held<(i64, i64)>) -> Obtain {
    let Held { answer: (taken, n), shortfall, sent } = held;
    if taken == 1 {
        Obtain::Taken { fence: n, shortfall, sent, written: None }
    } else {
        Obtain::Busy { pttl_ms: n, sent }
    }
}

/// A renewal's answer: `1` when the token still held.
pub(crate) fn refreshed(held: Held<i64>) -> Refreshed {
    Refreshed { held: held.answer == 1, shortfall: held.shortfall, written: None }
}

/// Loads `steps` into the server `client` reaches (SCRIPT LOAD, one
/// pipeline): see `crate::primitive::load_every_step`.
pub(crate) async fn load(client: &Backend, steps: impl Iterator<Item = &'static Lua>) -> Result<()> {
    let mut pipe = redis::pipe();
    for step in steps {
        pipe.cmd("SCRIPT").arg("LOAD").arg(step.on(client).code()).ignore();
    }
    let pipe = &pipe;
    client.call(|mut c| async move { pipe.query_async::<()>(&mut c).await }).await
}

pub(crate) async fn run<T: redis::FromRedisValue>(
    client: &Backend,
    invocation: &Invocation<'_>,
) -> Result<T> {
    client.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await
}

/// `run` for a step that makes or re-asserts a hold when `made` says so of
/// its answer, noting when it was sent. With replica acknowledgement on, the
/// script is followed by WAIT (or WAITAOF) in one pipeline on the same
/// connection; the answer comes with the shortfall of a hold made that
/// fewer replicas than asked acknowledged, for the lock's policy to judge.
pub(crate) async fn run_held<T: redis::FromRedisValue>(
    client: &Backend,
    invocation: &Invocation<'_>,
    made: fn(&T) -> bool,
) -> Result<Held<T>> {
    let replication = client.options().replication;
    if !replication.is_on() {
        let (answer, sent) =
            client.call_timed(|mut c| async move { invocation.invoke_async(&mut c).await }).await?;
        return Ok(Held { answer, shortfall: None, sent });
    }
    let replication = &replication;
    let ((reply, acked), sent) = client
        .call_timed(|mut c| async move {
            // As `Invocation::invoke_async`: loaded again while the slot moves.
            let mut loads = 0;
            loop {
                if let Some(done) =
                    replication::invoke_acked(&mut c, invocation.evalsha(), replication).await?
                {
                    return Ok(done);
                }
                if loads == invocation::LOADS {
                    let noscript = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
                    return Err((noscript, "NOSCRIPT after SCRIPT LOAD").into());
                }
                invocation.load(&mut c, loads).await?;
                loads += 1;
            }
        })
        .await?;
    let answer: T = redis::from_redis_value(reply)
        .map_err(|e| Error::Redis(format!("unexpected reply from a lock script: {e}")))?;
    let shortfall = (acked < replication.replicas && made(&answer)).then(|| replication.shortfall(acked));
    Ok(Held { answer, shortfall, sent })
}

/// One hold's items in the ARGV of a batch step (`run_batch`): how many
/// keys, its token, its ttl in ms, and its fence (0: none) when the step
/// takes one. Each is written as its own argument, with no text made of it
/// first.
pub(crate) type BatchHold<'a> = (usize, &'a str, u64, Option<i64>);

/// Renews several holds in one run of a batch step (`refresh_batch.lua`,
/// `lease_refresh_batch.lua`), which `batch` makes from its ARGV: a
/// `BatchHold` a hold, with its fence when `fenced`; its KEYS are each
/// hold's keys in turn. With replica acknowledgement on, one WAIT follows
/// the whole run, as `run_held`'s does one step.
pub(crate) async fn run_batch(
    client: &Backend,
    renewals: &[Renewal],
    fenced: bool,
    batch: impl FnOnce(&[BatchHold<'_>]) -> Invocation<'static>,
) -> Result<Answers> {
    let holds: Vec<BatchHold<'_>> = renewals
        .iter()
        .map(|r| (r.keys.len(), &*r.token, r.ttl_ms, fenced.then(|| r.fence.unwrap_or(0))))
        .collect();
    let mut invocation = batch(&holds);
    for r in renewals {
        invocation.key(&r.keys[..]);
    }
    let renewed: fn(&Vec<i64>) -> bool = |answers| answers.contains(&1);
    let held = run_held(client, &invocation, renewed).await?;
    let held_each = held.answer.iter().map(|a| *a == 1).collect();
    Ok(Answers { held: held_each, written: Vec::new(), shortfall: held.shortfall })
}

/// A hold was taken (or re-entered): `{1, fence}`.
pub(crate) fn taken(reply: &(i64, i64)) -> bool {
    reply.0 == 1
}

/// A hold was renewed: `1`.
#[expect(clippy::trivially_copy_pass_by_ref)] // the shape of `run_held`'s `made`
pub(crate) fn one(reply: &i64) -> bool {
    *reply == 1
}

pub(crate) fn parse_record(entry: Vec<Value>) -> Result<Option<Record>> {
    if entry.is_empty() {
        return Ok(None);
    }
    let bad = |e: redis::ParsingError| Error::Redis(format!("unexpected reply from inspect.lua: {e}"));
    let mut it = entry.into_iter();
    let mut next = || it.next().unwrap_or(Value::Nil);
    let token: String = redis::from_redis_value(next()).map_err(bad)?;
    // Nil when the holder gave none; "" when it gave "".
    let metadata: Option<String> = redis::from_redis_value(next()).map_err(bad)?;
    let fence: i64 = redis::from_redis_value(next()).map_err(bad)?;
    let pttl_ms: i64 = redis::from_redis_value(next()).map_err(bad)?;
    Ok(Some(Record { token, metadata, fence, pttl_ms }))
}
