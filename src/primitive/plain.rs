//! A plain hold: one string key whose value is the owner's token, the layout
//! redis-py's `Lock` (the key is the name itself) and python-redis-lock
//! (`lock:<name>`, with its signal list) keep their holds in. A handle on
//! one excludes the processes of those libraries and is excluded by them,
//! key for key. The hold stores no fence: a new hold's fence is the
//! server's clock when the transaction that took it ran.
//!
//! Taking one is a transaction, not a script: `MULTI / SET key token NX [PX
//! ttl] / GET key / PTTL key / TIME / EXEC` takes the hold and reads the
//! server's clock (its fence) in one atomic step. Giving it up and renewing
//! it are owner-checked scripts (`lua/plain_release.lua`,
//! `lua/plain_refresh.lua`).

use std::time::Duration;

use redis::Value;

use super::steps::{Holder, Obtaining, Released, Steps};
use super::transaction::{exchange, micros, Sent};
use crate::error::{Error, Result};
use crate::scripts::{run_held, step, taken, wire, Argv, Held, Lua, Obtain, Record, Refreshed, Whose};
use crate::transport::backend::Backend;
use crate::transport::replication::Shortfall;

step! {
    PLAIN_RELEASE = "plain_release.lua",
    struct PlainReleaseArgv<'a> {
        token: &'a str,
        force: Whose,
        channel: &'a str,
        signal_expire_ms: u64,
    }
}

step! {
    PLAIN_REFRESH = "plain_refresh.lua",
    struct PlainRefreshArgv<'a> {
        token: &'a str,
        ms: u64,
        how: Reach,
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 2] = [&PLAIN_RELEASE, &PLAIN_REFRESH];

/// Where a plain hold lives and who is told of its release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainKeys {
    /// The string key holding the owner's token.
    pub hold: String,
    /// python-redis-lock's signal list (`lock-signal:<name>`): a release
    /// pushes one element on it, expiring after `expire_ms`, for the
    /// waiters blocked on it (BLPOP).
    pub signal: Option<(String, u64)>,
    /// Where ferrolock's own waiters are woken (PUBLISH); `None`: they poll.
    pub channel: Option<String>,
}

wire! {
    /// How `refresh` moves a hold's expiry.
    pub(crate) enum Reach {
        /// To `ms` from now.
        Set = "set",
        /// `ms` past what is left (redis-py's `extend`).
        Add = "add",
        /// Not at all: a hold without expiry is only checked.
        Keep = "keep",
    }
}

/// What `refresh` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reached {
    /// The token holds it, now for `pttl_ms` (-1: no expiry).
    Held { pttl_ms: i64, shortfall: Option<Shortfall> },
    /// The token does not hold it (expired, released, taken by another).
    NotHeld,
    /// The token holds it, but the key has no expiry to move.
    NoExpiry,
}

#[derive(Debug, Clone)]
pub(crate) struct Plain {
    pub(crate) keys: PlainKeys,
    /// Taken with an expiry (the handle's ttl); `false`: taken without one,
    /// as redis-py's `timeout=None` and python-redis-lock's `expire=None`
    /// take it, and never renewed.
    pub(crate) expires: bool,
}

impl Steps for Plain {
    /// One attempt at `keys.hold` for `token`: taken (its fence the server's
    /// clock in microseconds), or busy with the holder's time left. Taken
    /// without expiry unless it `expires`. A key `token` holds already is
    /// re-entered (an attempt sent again after a timeout, or a restored
    /// token adopted): renewed to the ttl, its fence the clock's now.
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let (hold, token) = (&self.keys.hold, ask.token);
        let ttl_ms = self.expires.then_some(ask.ttl.as_millis() as u64);
        let mut set = redis::cmd("SET");
        set.arg(hold).arg(token).arg("NX");
        if let Some(ms) = ttl_ms {
            set.arg("PX").arg(ms);
        }
        let (get, pttl) = (redis::cmd("GET").arg(hold).take(), redis::cmd("PTTL").arg(hold).take());
        let done = exchange(
            c,
            "the plain hold's transaction",
            Sent::Atomically,
            vec![set, get, pttl, redis::cmd("TIME")],
        )
        .await?;
        let (taken, sent) = (Taken::parse(&done.replies)?, done.sent);
        if taken.set {
            return Ok(Obtain::Taken { fence: taken.now_us, shortfall: done.shortfall, sent, written: None });
        }
        if taken.holder.as_deref() == Some(token) {
            let reach = if ttl_ms.is_some() { Reach::Set } else { Reach::Keep };
            // Validity from the transaction's sending: earlier than the renewal's, so never longer.
            return Ok(match refresh(c, hold, token, ttl_ms.unwrap_or(0), reach).await? {
                Reached::Held { shortfall, .. } => {
                    Obtain::Taken { fence: taken.now_us, shortfall, sent, written: None }
                }
                Reached::NoExpiry => {
                    Obtain::Taken { fence: taken.now_us, shortfall: None, sent, written: None }
                }
                Reached::NotHeld => Obtain::Busy { pttl_ms: -2, sent },
            });
        }
        Ok(Obtain::Busy { pttl_ms: taken.pttl_ms, sent })
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        let token = holder.token;
        let reach = if self.expires { Reach::Set } else { Reach::Keep };
        Ok(match refresh(c, &self.keys.hold, token, ttl.as_millis() as u64, reach).await? {
            Reached::Held { shortfall, .. } => Refreshed { held: true, shortfall, written: None },
            // Held, made persistent behind its back: it lasts the longer.
            Reached::NoExpiry => Refreshed { held: true, shortfall: None, written: None },
            Reached::NotHeld => Refreshed { held: false, shortfall: None, written: None },
        })
    }

    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        let token = holder.token;
        let (held, retried) = release(c, &self.keys, token, Whose::Own).await?;
        Ok(Released { held, retried })
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        Ok(vec![inspect(c, &self.keys.hold).await?])
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        self.keys.channel.iter().cloned().collect()
    }

    fn wakes(&self) -> bool {
        self.keys.channel.is_some()
    }
}

/// The transaction's answer: `[set, get, pttl, time]`.
struct Taken {
    set: bool,
    holder: Option<String>,
    pttl_ms: i64,
    now_us: i64,
}

impl Taken {
    fn parse(exec: &[Value]) -> Result<Taken> {
        let what = "the plain hold's transaction";
        let bad = |e: &dyn std::fmt::Display| Error::Redis(format!("unexpected reply to {what}: {e}"));
        let [set, get, pttl, time] = exec else {
            return Err(bad(&format!("{exec:?}")));
        };
        let set = !matches!(set.clone().extract_error()?, Value::Nil);
        let holder: Option<Vec<u8>> =
            redis::from_redis_value(get.clone().extract_error()?).map_err(|e| bad(&e))?;
        let pttl_ms: i64 = redis::from_redis_value(pttl.clone()).map_err(|e| bad(&e))?;
        let holder = holder.map(|h| String::from_utf8_lossy(&h).into_owned());
        Ok(Taken { set, holder, pttl_ms, now_us: micros(time, what)? })
    }
}

/// Moves the expiry of `token`'s hold on `hold` as `reach` says, by `ms`.
pub(crate) async fn refresh(
    client: &Backend,
    hold: &str,
    token: &str,
    ms: u64,
    reach: Reach,
) -> Result<Reached> {
    let mut invocation = PlainRefreshArgv { token, ms, how: reach }.on(client);
    invocation.key(hold);
    // `taken`: `{1, pttl}` renewed it (the replicas are waited for then).
    let Held { answer: (code, pttl_ms), shortfall, .. } = run_held(client, &invocation, taken).await?;
    Ok(match code {
        1 => Reached::Held { pttl_ms, shortfall },
        2 => Reached::NoExpiry,
        _ => Reached::NotHeld,
    })
}

/// Gives up `token`'s hold on `keys.hold` (whoever's with `Whose::Anyone`), pushing
/// the signal and publishing on the channel when a hold was released.
/// Returns whether one was, and whether the script was sent twice (the
/// connection dropped: a second answer of 0 may mean the first released it).
pub(crate) async fn release(
    client: &Backend,
    keys: &PlainKeys,
    token: &str,
    force: Whose,
) -> Result<(bool, bool)> {
    let channel = keys.channel.as_deref().unwrap_or("");
    let signal_expire_ms = keys.signal.as_ref().map_or(0, |(_, expire_ms)| *expire_ms);
    let mut invocation = PlainReleaseArgv { token, force, channel, signal_expire_ms }.on(client);
    invocation.key(&keys.hold);
    if let Some((list, _)) = &keys.signal {
        invocation.key(list);
    }
    let invocation = &invocation;
    let (released, retried): (i64, bool) =
        client.call_noting_retry(|mut c| async move { invocation.invoke_async(&mut c).await }).await?;
    Ok((released == 1, retried))
}

/// Who holds `hold` now, as a Lock's record: the key's value (read as
/// text), no metadata, no fence (a plain hold stores none), its time left.
/// `None` when the key is free.
pub(crate) async fn inspect(client: &Backend, hold: &str) -> Result<Option<Record>> {
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("GET").arg(hold).cmd("PTTL").arg(hold);
    let pipe = &pipe;
    let (value, pttl_ms): (Option<Vec<u8>>, i64) =
        client.call(|mut c| async move { pipe.query_async(&mut c).await }).await?;
    Ok(value.map(|v| Record {
        token: String::from_utf8_lossy(&v).into_owned(),
        metadata: None,
        fence: 0,
        pttl_ms,
    }))
}
