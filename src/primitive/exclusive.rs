//! An exclusive hold on one name, or on several taken all or none: one
//! string per name (lua/lib/hold.lua). Its steps on a hold (renew, release,
//! look, a quorum master's fence raise) are also those of every hold shaped
//! like it: a fair Lock's, an RWMutex's writer, an election's term, and an
//! operator's release.
//!
//! A first attempt at one free name on one server is a transaction, not a
//! script (`take_free`); every other attempt, and one the transaction finds
//! the name taken for, runs `obtain.lua`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::Value;

use super::attempt;
use super::compared;
use super::steps::{Holder, Obtaining, Released, Steps};
use super::transaction::{exchange, micros, Sent};
use crate::error::{Error, Result};
use crate::keys::{wake_channel, with_fence_records};
use crate::scripts::{
    one, parse_record, refreshed, run, run_batch, run_held, step, taken, taken_or_busy, Argv, BatchHold, Lua,
    Obtain, Record, Refreshed, Whose,
};
use crate::transport::backend::{Answers, Backend, Batch, Renewal};

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
        fence: i64,
    }
}

step! {
    REFRESH_BATCH = "refresh_batch.lua",
    struct RefreshBatchArgv<'a> {
        holds: &'a [BatchHold<'a>],
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

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 6] = [&OBTAIN, &RELEASE, &REFRESH, &REFRESH_BATCH, &INSPECT, &FENCE_RAISE];

/// One hash per name.
#[derive(Debug, Clone)]
pub(crate) struct Exclusive {
    pub(crate) keys: Arc<[String]>,
}

impl Steps for Exclusive {
    /// `metadata`: stored with a new hold; on re-entry (the token holds
    /// already) `None` keeps what is stored. `quorum`: on a quorum's master,
    /// where a new hold's fence is also above the keys' fence records. A
    /// busy answer marks the holds waited on when the attempt `will_wait`,
    /// and a new hold is marked when this owner waited before (attempt > 1),
    /// for those behind it, so that a release nobody waits for publishes
    /// nothing. `from`: another token whose hold this attempt takes over
    /// (re-keyed to `token`, its fence kept).
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        let attempt = attempt(ask, Duration::ZERO);
        if let ([key], false, None, 1) = (&*self.keys, quorum, ask.from, attempt.number) {
            if let Some(taken) = take_free(c, key, ask).await? {
                return Ok(taken);
            }
        }
        let mut invocation = ObtainArgv {
            token: ask.token,
            ttl_ms: ask.ttl.as_millis() as u64,
            metadata: ask.metadata.unwrap_or(""),
            set_metadata: ask.metadata.is_some(),
            with_records: quorum,
            will_wait: attempt.will_wait,
            waited: attempt.number > 1,
            from: ask.from,
        }
        .on(c);
        if quorum {
            invocation.key(with_fence_records(&self.keys));
        } else {
            invocation.key(&*self.keys);
        }
        run_held(c, &invocation, taken).await.map(taken_or_busy)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        refresh(c, &self.keys, holder, ttl).await
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        renew(c, self.keys.clone(), holder, ttl).await
    }

    /// `DELIFEQ` where the server has it and the owner knows the hold's
    /// value (`compared`); else, or when that finds another value,
    /// `release.lua`.
    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let mut twice = false;
        if let [key] = &*self.keys {
            match Box::pin(compared::release(c, key, holder)).await? {
                compared::Deleted::Released(released) => return Ok(released),
                compared::Deleted::Not { twice: resent } => twice = resent,
            }
        }
        let (n, retried) = release(c, &self.keys, holder.token, Whose::Own, "").await?;
        // A DELIFEQ sent twice that found nothing may have released it the first time.
        Ok(Released { held: n > 0, retried: retried || twice })
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        inspect(c, &self.keys).await
    }

    async fn fence_raise_on(&self, c: &Backend, token: &str, fence: i64) -> Result<bool> {
        fence_raise(c, &self.keys, token, fence).await
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        self.keys.iter().map(|k| wake_channel(k)).collect()
    }
}

/// `MULTI / SET key value NX PX ttl / TIME / EXEC`: `key` taken for
/// `ask.token` if it is free (no hold, no fence kept on record, no key of
/// another layout), with the server's clock as its fence, read in the same
/// atomic step: `None` when it is not free (`obtain.lua` decides then). A
/// `SET` cannot carry what `TIME` answers in the same transaction, so the
/// value has no fence in it: the owner records its fence with its first
/// renewal (`refresh`), and until then `inspect` shows fence 0
/// (docs/design.md, "A take without a script").
async fn take_free(c: &Backend, key: &str, ask: &Obtaining<'_>) -> Result<Option<Obtain>> {
    let what = "a Lock's take";
    let value = compared::unrecorded(ask.token, ask.metadata);
    let set =
        redis::cmd("SET").arg(key).arg(&value).arg("NX").arg("PX").arg(ask.ttl.as_millis() as u64).take();
    let done = exchange(c, what, Sent::Atomically, vec![set, redis::cmd("TIME")]).await?;
    let [set, time] = &done.replies[..] else {
        return Err(Error::Redis(format!("unexpected reply to {what}: {:?}", done.replies)));
    };
    if matches!(set.clone().extract_error()?, Value::Nil) {
        return Ok(None);
    }
    let (fence, shortfall, sent) = (micros(time, what)?, done.shortfall, done.sent);
    Ok(Some(Obtain::Taken { fence, shortfall, sent, written: Some(Arc::from(value)) }))
}

/// Raises the fence of `token`'s hold on `keys` to at least `fence`, and
/// their fence records with it: false when `token` no longer holds them all.
pub(crate) async fn fence_raise(client: &Backend, keys: &[String], token: &str, fence: i64) -> Result<bool> {
    let raised: i64 =
        run(client, FenceRaiseArgv { token, fence }.on(client).key(with_fence_records(keys))).await?;
    Ok(raised == 1)
}

/// Releases `token`'s hold on `keys` (whoever's with `Whose::Anyone`): how
/// many keys were released (0 when `token` did not hold them all), and
/// whether it was sent twice (the connection dropped: a second answer of 0
/// may then mean the first one released it). `channel`: where the release
/// is announced ('' = each key's own channel).
pub(crate) async fn release(
    client: &Backend,
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

/// Whether `holder` still held every key (and now holds it for `ttl`); its
/// fence is written into a hold taken without one (`take_free`). One key
/// whose value the owner knows is renewed by comparing it, where the
/// server can (`compared`); else, or when that finds another value, by
/// `refresh.lua`.
pub(crate) async fn refresh(
    client: &Backend,
    keys: &[String],
    holder: &Holder<'_>,
    ttl: Duration,
) -> Result<Refreshed> {
    let ttl_ms = ttl.as_millis() as u64;
    if let [key] = keys {
        if let Some(refreshed) = compared::refresh(client, key, holder, ttl_ms).await? {
            return Ok(refreshed);
        }
    }
    let (token, fence) = (holder.token, holder.fence.unwrap_or(0));
    run_held(client, RefreshArgv { token, ttl_ms, fence }.on(client).key(keys), one).await.map(refreshed)
}

/// `refresh`, as the watchdog sends it: in one call with the other
/// renewals of holds of this shape (a Lock's, a fair Lock's, an RWMutex
/// writer's) that fall due with it (`Backend::renew`).
pub(crate) async fn renew(
    client: &Backend,
    keys: Arc<[String]>,
    holder: &Holder<'_>,
    ttl: Duration,
) -> Result<Refreshed> {
    let renewal = Renewal {
        keys,
        token: holder.token.clone(),
        fence: holder.fence,
        written: holder.written.cloned(),
        ttl_ms: ttl.as_millis() as u64,
    };
    client.renew(&RENEWALS, renewal).await.map(Refreshed::from)
}

/// How the renewals of holds go together: those whose value their owner
/// knows, by comparing it in one call on any server
/// (`compared::refresh_each`); the others, and those whose value was not
/// the one written, in `refresh_batch.lua` next (one alone: `refresh`).
static RENEWALS: Batch = Batch { send: send_renewals };

fn send_renewals(client: Backend, renewals: Arc<[Renewal]>) -> BoxFuture<'static, Result<Answers>> {
    Box::pin(async move {
        if let [one] = &*renewals {
            let holder = Holder { token: &one.token, fence: one.fence, written: one.written.as_ref() };
            let ttl = Duration::from_millis(one.ttl_ms);
            return refresh(&client, &one.keys, &holder, ttl).await.map(Answers::from);
        }
        let Some((compared, shortfall)) = compared::refresh_each(&client, &renewals).await? else {
            return run_batch(&client, &renewals, true, |holds| RefreshBatchArgv { holds }.on(&client)).await;
        };
        let rest: Vec<Renewal> =
            renewals.iter().zip(&compared).filter(|(_, c)| c.is_none()).map(|(r, _)| r.clone()).collect();
        let scripted = match &rest[..] {
            [] => Answers { held: Vec::new(), written: Vec::new(), shortfall: None },
            _ => run_batch(&client, &rest, true, |holds| RefreshBatchArgv { holds }.on(&client)).await?,
        };
        let mut scripted_held = scripted.held.into_iter();
        let held = compared.iter().map(|c| c.is_some() || scripted_held.next().unwrap_or(false)).collect();
        Ok(Answers { held, written: compared, shortfall: shortfall.or(scripted.shortfall) })
    })
}

/// The holder of each key.
pub(crate) async fn inspect(client: &Backend, keys: &[String]) -> Result<Vec<Option<Record>>> {
    let entries: Vec<Vec<Value>> = run(client, InspectArgv {}.on(client).key(keys)).await?;
    entries.into_iter().map(parse_record).collect()
}
