//! A handle on a plain hold (`mode::Plain`): one string key, its value the
//! owner's token, shared key for key with redis-py's `Lock` and
//! python-redis-lock, so processes of either library and ferrolock's exclude
//! each other during a rolling deploy. What such a handle adds: the
//! watchdog (renewal when asked; the loss told either way), a fence from the
//! server's clock, cancellation safety, and an extend that adds to the time
//! left (redis-py's) beside the native one that sets it.

use std::time::{Duration, Instant};

use super::{validate, Lock, LockOptions, MAX_TTL};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::one_slot;
use crate::primitive::plain::{self, PlainKeys, Reach, Reached};
use crate::primitive::{Mode, Plain};
use crate::scripts::{Record, Whose};
use crate::transport::conn::Io;
use crate::transport::replication::Policy;

/// Where a plain hold lives and how it is taken.
#[derive(Debug, Clone)]
pub struct PlainHold {
    /// The string key, used as given (no prefix, no hash tag).
    pub key: String,
    /// python-redis-lock's signal list and how long (ms) a pushed element
    /// stays: a release pushes one, as its own release does.
    pub signal: Option<(String, u64)>,
    /// Whether ferrolock's waiters are woken by a channel of the key's (a
    /// release publishes there; the libraries' own releases do not, so a
    /// waiter polls on its retry delay too).
    pub wake: bool,
    /// Taken with an expiry (the handle's ttl); `false`: without one, never
    /// renewed, as redis-py's `timeout=None` and python-redis-lock's
    /// `expire=None` take it.
    pub expires: bool,
}

impl PlainHold {
    /// Its keys and wake-up channel on `client`; on a Cluster the signal
    /// list must share the hold's slot (one script releases both).
    fn keys(self, cluster: bool) -> Result<PlainKeys> {
        if let Some((signal, _)) = &self.signal {
            if cluster && !one_slot(&[self.key.clone(), signal.clone()]) {
                return Err(Error::InvalidArgument(format!(
                    "{:?} and its signal list {signal:?} fall in different hash slots of the Redis Cluster, \
                     and one script releases both (python-redis-lock does not run on a Cluster either)",
                    self.key
                )));
            }
        }
        let channel = if self.wake { wake_channel(&self.key, cluster) } else { None };
        Ok(PlainKeys { hold: self.key, signal: self.signal, channel })
    }

    /// Ends the hold whoever holds it (python-redis-lock's `reset`), waking
    /// the waiters as a release does. Returns whether there was one.
    pub async fn force_release(self, client: &Client) -> Result<bool> {
        let one = client.single("a plain (redis-py or python-redis-lock) hold")?;
        let keys = self.keys(one.is_cluster())?;
        Ok(plain::release(one, &keys, "", Whose::Anyone).await?.0)
    }

    /// Who holds it now: the key's value as the token, its time left (-1:
    /// no expiry); no metadata and no fence (a plain hold stores neither).
    pub async fn holder(&self, client: &Client) -> Result<Option<Record>> {
        let one = client.single("a plain (redis-py or python-redis-lock) hold")?;
        plain::inspect(one, &self.key).await
    }
}

/// What `extend_plain` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainExtended {
    /// Held, and now for this long.
    To(Duration),
    /// Not held by this handle any more (the hold is reported lost).
    NotHeld,
    /// Held, but taken without expiry: nothing was changed.
    NoExpiry,
}

/// The channel ferrolock's waiters on `key` listen on: the key's own name
/// and a suffix, so that on a Redis Cluster it falls in the key's slot when
/// the key has a hash tag; without one there is no such channel on a
/// Cluster, and waiters poll.
fn wake_channel(key: &str, cluster: bool) -> Option<String> {
    let channel = format!("{key}:ferrolock:wake");
    (!cluster || one_slot(&[key.to_string(), channel.clone()])).then_some(channel)
}

impl Lock {
    /// A handle on the plain hold `hold`. With `token`, every hold this
    /// handle takes uses it (python-redis-lock's `id`, a redis-py token
    /// chosen by the caller) instead of a fresh one; with `adopt` too, the
    /// handle starts out holding that token's hold, taken elsewhere (as
    /// `Lock::new` with a token). On one deployment only (not a quorum).
    pub fn plain(
        client: Client,
        hold: PlainHold,
        mut opts: LockOptions,
        token: Option<String>,
        adopt: bool,
    ) -> Result<Lock> {
        let cluster = client.single("a plain (redis-py or python-redis-lock) hold")?.is_cluster();
        if opts.metadata.is_some() || opts.fair {
            return Err(Error::InvalidArgument(
                "a plain hold keeps only its owner's token: it takes no metadata and is not fair".into(),
            ));
        }
        if !hold.expires {
            // Nothing to renew, and nothing that runs out: it lasts until released.
            opts.ttl = MAX_TTL;
            opts.auto_renew = false;
            opts.max_hold = None;
        }
        let names = vec![hold.key.clone()];
        validate(&names, &opts, token.as_deref())?;
        let expires = hold.expires;
        let keys = hold.keys(cluster)?;
        let mode = Mode::Plain(Plain { keys, expires });
        let (restored, named) = if adopt { (token, None) } else { (None, token) };
        let mut lock = Lock::with_mode(client, names, mode, opts, restored);
        lock.named = named;
        Ok(lock)
    }

    /// The plain hold's settings, when this handle is on one.
    fn plain_mode(&self) -> Option<&Plain> {
        match &self.mode {
            Mode::Plain(p) => Some(p),
            _ => None,
        }
    }

    /// Whether this handle is on a plain hold taken without expiry.
    pub(super) fn never_expires(&self) -> bool {
        self.plain_mode().is_some_and(|p| !p.expires)
    }

    /// Extends a plain hold: its expiry set to `by` from now (`add` false),
    /// or `by` added to the time it has left (`add`: redis-py's `extend`).
    /// A hold this handle no longer has is reported lost; one taken without
    /// expiry is left as it is (`NoExpiry`). Later renewals (with
    /// `auto_renew`) keep the new time to live.
    pub async fn extend_plain(&self, by: Duration, add: bool, io: Io) -> Result<PlainExtended> {
        let Some(plain) = self.plain_mode() else {
            return Err(Error::InvalidArgument(format!("{} is not a plain hold", self.label())));
        };
        if by > MAX_TTL {
            return Err(Error::InvalidArgument(format!(
                "cannot extend by {} s: the limit is {} s",
                by.as_secs_f64(),
                MAX_TTL.as_secs_f64()
            )));
        }
        let lease = self.current().ok_or_else(|| self.not_owned())?;
        let reach = if add { Reach::Add } else { Reach::Set };
        let client = self.client.via(io);
        let one = client.single("a plain hold")?;
        let sent = Instant::now();
        match plain::refresh(one, &plain.keys.hold, lease.token(), by.as_millis() as u64, reach).await? {
            Reached::Held { pttl_ms, shortfall } => {
                if let Some(shortfall) =
                    shortfall.filter(|_| self.client.options().replication.policy == Policy::Fail)
                {
                    return Err(Error::NotReplicated(format!(
                        "the extend of {} reached the master, but {}: it does not count (replica_policy \"fail\")",
                        self.label(),
                        shortfall.describe()
                    )));
                }
                let ttl = Duration::from_millis(pttl_ms.max(1) as u64);
                lease.extended(sent, ttl);
                Ok(PlainExtended::To(ttl))
            }
            Reached::NoExpiry => Ok(PlainExtended::NoExpiry),
            Reached::NotHeld => {
                Self::lose(&lease, "it had expired or been taken over before extend");
                Ok(PlainExtended::NotHeld)
            }
        }
    }
}
