//! Leader election on the fair Lock's machinery. Campaigners queue for one
//! term hold (a fair Lock under the name's `:el` keys), so leadership passes
//! in arrival order and a resigning leader hands over within one round trip.
//! The term number is the hold's fence (strictly increasing across leaders,
//! usable as a fencing token); the leader's value is the hold's metadata.
//! Every change (a term taken or claimed, a value proclaimed, a term given
//! up) is announced on the election's watch channel; a leader that dies
//! announces nothing, so watchers look again when its hold would expire.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::handle::lock::{check_name, validate, Lock, LockOptions};
use crate::handle::Via;
use crate::primitive::{election, exclusive, patience, FairKeys, Mode};
use crate::transport::backend::Backend;
use crate::transport::conn::Io;
use crate::transport::wakeups::Waits;

#[derive(Clone)]
pub struct Election {
    client: Backend,
    name: String,
    keys: FairKeys,
}

/// The leader of an election, as Redis has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub value: String,
    /// The term number: the hold's fence.
    pub term: i64,
    /// Time left before the term expires unless renewed.
    pub ttl: Option<Duration>,
}

impl Election {
    /// This handle, its commands sent as `io` says (see `transport::conn`):
    /// how a blocking caller sends them on its own thread (`Io::Inline`).
    pub fn via(&self, io: Io) -> Via<'_, Election> {
        Via::new(self, io)
    }

    pub fn new(client: impl Into<Client>, name: String) -> Result<Election> {
        check_name(&name)?;
        // Its watchers and terms run on the runtime: never on a view's inline connections.
        let client = client.into().single("an election")?.via(Io::Multiplexed);
        let keys = client.keys().election(&name);
        Ok(Election { client, name, keys })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A campaigner for `value`: acquiring the handle is campaigning (it
    /// waits in line), holding it is leading, releasing it is resigning.
    /// With `token`, the handle of the term that token holds (restored, as a
    /// Lock's: releasing it ends that term).
    pub fn candidate(&self, value: String, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        let opts = LockOptions { metadata: Some(value), fair: true, ..opts };
        let names = vec![self.name.clone()];
        validate(&names, &opts, token.as_deref())?;
        let mode = Mode::fair(self.keys.clone(), patience(opts.ttl));
        Ok(Lock::with_mode(self.client.clone().into(), names, mode, opts, token))
    }

    /// The current leader, or `None` when nobody leads.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        self.via(Io::Multiplexed).leader().await
    }

    /// The leader holding `term` publishes `value` without giving up its term.
    pub async fn proclaim(&self, term: &Lock, value: &str) -> Result<()> {
        self.via(Io::Multiplexed).proclaim(term, value).await
    }

    /// Every change of leader or value, starting with the current one.
    pub fn observe(&self) -> Observer {
        Observer { election: self.clone(), registration: None, last: Seen::Nothing }
    }
}

impl Via<'_, Election> {
    /// As [`Election::leader`], its commands sent as the view's `Io` says.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let lock = std::slice::from_ref(&self.keys.lock);
        let record = exclusive::inspect(&self.client.via(self.io), lock).await?.pop().flatten();
        Ok(record.map(|r| Leader {
            value: r.metadata.unwrap_or_default(),
            term: r.fence,
            ttl: (r.pttl_ms >= 0).then(|| Duration::from_millis(r.pttl_ms as u64)),
        }))
    }

    /// As [`Election::proclaim`], its commands sent as the view's `Io` says.
    pub async fn proclaim(&self, term: &Lock, value: &str) -> Result<()> {
        let not_leading = || Error::NotOwned(format!("election {:?}: this term no longer leads", self.name));
        let token = term.token().ok_or_else(not_leading)?;
        if election::proclaim(&self.client.via(self.io), &self.keys, &token, value).await? {
            Ok(())
        } else {
            Err(not_leading())
        }
    }
}

/// Watches an election: each `next` returns the leader (or `None`) once it
/// differs from what the last one returned.
pub struct Observer {
    election: Election,
    registration: Option<Waits>,
    last: Seen,
}

/// What a watcher last returned.
#[derive(PartialEq, Eq)]
enum Seen {
    Nothing,
    NoLeader,
    Leader(String, i64),
}

/// How long a watcher sleeps when nobody leads and nothing is announced: a
/// safety net only (every change is announced).
const IDLE_LOOK: Duration = Duration::from_secs(30);

impl Observer {
    pub async fn next(&mut self) -> Result<Option<Leader>> {
        let e = self.election.clone();
        loop {
            if self.registration.as_ref().is_none_or(Waits::stale) {
                // Subscribed before reading, so no change falls in between.
                let channels = [e.keys.announce.clone()];
                self.registration = Some(e.client.register_waiter(&channels, true, "").await?);
            }
            let now = e.leader().await?;
            let seen = now.as_ref().map_or(Seen::NoLeader, |l| Seen::Leader(l.value.clone(), l.term));
            if self.last != seen {
                self.last = seen;
                return Ok(now);
            }
            let look_again = now.and_then(|l| l.ttl).map_or(IDLE_LOOK, |t| t + Duration::from_millis(2));
            let registration = self.registration.as_ref().expect("registered above");
            tokio::select! {
                _ = registration.woken() => {}
                () = tokio::time::sleep(look_again) => {}
            }
            registration.rearm();
        }
    }
}
