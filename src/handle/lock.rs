//! The exclusive lock: one handle, at most one hold at a time, over one name
//! or (all-or-nothing) several.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::handle::lease::{Lease, Terms};
use crate::handle::watchdog;
use crate::handle::Via;
use crate::keys::one_slot;
use crate::primitive::steps::Steps;
use crate::primitive::{patience, Mode};
use crate::scripts::Record;
use crate::support::events::{self, Event, LossCause, ReplicaStep, Subject};
use crate::support::per_process::PerProcess;
use crate::transport::conn::Io;
use crate::transport::replication::{self, Policy};

mod acquire;
mod options;
mod outage;
mod plain;
mod undo;

pub use crate::support::token::MAX_TOKEN;
pub use acquire::handed_over;
pub(crate) use options::validate;
pub use options::{
    check_name, check_ttl, LockOptions, LostCallback, Wait, MAX_METADATA, MAX_NAME, MAX_TTL, MIN_TTL,
};
pub use plain::{PlainExtended, PlainHold};

pub struct Lock {
    client: Client,
    names: Vec<String>,
    mode: Mode,
    opts: LockOptions,
    /// This process's: a forked child starts afresh, holding nothing (its
    /// parent's hold stays the parent's).
    state: PerProcess<Mutex<State>>,
    /// What this handle's events are about.
    subject: Arc<Subject>,
    /// The token each hold of this handle takes (a plain hold's owner id,
    /// chosen by the caller); `None`: a fresh one per acquire.
    named: Option<String>,
}

struct State {
    /// One permit: held while this handle holds, so two tasks sharing a handle
    /// never share a hold (the second waits, as with `threading.Lock`).
    gate: Arc<Semaphore>,
    /// The lease this handle holds now.
    hold: Option<Arc<Lease>>,
    /// The lease of the latest hold, kept after release to answer `lost`.
    last: Option<Arc<Lease>>,
}

impl State {
    fn new() -> State {
        State { gate: Arc::new(Semaphore::new(1)), hold: None, last: None }
    }
}

impl Drop for State {
    /// A handle dropped while it holds: renewal stops with it, and the hold
    /// runs out in Redis.
    fn drop(&mut self) {
        if let Some(lease) = &self.hold {
            lease.stop_renewal();
        }
    }
}

impl Lock {
    /// This handle, its commands sent as `io` says (see `transport::conn`):
    /// how a blocking caller sends them on its own thread (`Io::Inline`).
    pub fn via(&self, io: Io) -> Via<'_, Lock> {
        Via::new(self, io)
    }

    /// A handle on the lock `names` (one name, or several taken all-or-nothing).
    /// With `token`, the handle starts out holding the lock that token owns
    /// (restored in another process): it can release it, or acquire to adopt it.
    pub fn new(client: Client, names: Vec<String>, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        validate(&names, &opts, token.as_deref())?;
        let mode = if opts.fair {
            client.single("a fair Lock")?;
            if names.len() != 1 {
                return Err(Error::InvalidArgument("fair mode takes one name, not a multi-lock".into()));
            }
            Mode::fair(client.keys().fair(&names[0]), patience(opts.ttl))
        } else {
            let keys: Arc<[String]> = names.iter().map(|n| client.keys().lock(n)).collect();
            if client.is_cluster() && !one_slot(&keys) {
                return Err(Error::InvalidArgument(
                    "a multi-lock takes all its names in one atomic step, which Redis Cluster allows \
                     only within one hash slot, and these names fall in different slots"
                        .into(),
                ));
            }
            Mode::exclusive(keys)
        };
        Ok(Lock::with_mode(client, names, mode, opts, token))
    }

    /// A handle taking `mode` (already validated) under the label `names`.
    pub(crate) fn with_mode(
        client: Client,
        names: Vec<String>,
        mode: Mode,
        opts: LockOptions,
        token: Option<String>,
    ) -> Lock {
        // Its renewal and clean-ups run on the runtime: never on a view's inline connections.
        let client = client.into_multiplexed();
        let mut state = State::new();
        let subject =
            Arc::new(Subject { names: names.clone(), kind: mode.kind(), fair: mode.patience().is_some() });
        if let Some(token) = token {
            state.gate.try_acquire().expect("a new gate has its permit").forget();
            let terms = Terms {
                token,
                fence: None,
                written: None,
                subject: subject.clone(),
                sent: None,
                ttl: opts.ttl,
                max_hold: None,
            };
            let lease = Arc::new(Lease::new(terms));
            state.last = Some(lease.clone());
            state.hold = Some(lease);
        }
        Lock {
            client,
            names,
            mode,
            opts,
            state: PerProcess::holding(Mutex::new(state)),
            subject,
            named: None,
        }
    }

    /// Calls `f` with this process's state (after a fork, the child's starts empty).
    fn state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.state.with(
            || Mutex::new(State::new()),
            |state| f(&mut state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)),
        )
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn options(&self) -> &LockOptions {
        &self.opts
    }

    fn label(&self) -> String {
        self.subject.label()
    }

    /// What a lease taken by this handle is made of: `sent` is when its
    /// acquire's attempt went out; `written`, the hold's value when the
    /// attempt wrote it whole.
    fn terms(&self, token: String, fence: i64, sent: Instant, written: Option<Arc<str>>) -> Terms {
        Terms {
            token,
            fence: self.mode.fenced().then_some(fence),
            written,
            subject: self.subject.clone(),
            sent: Some(sent),
            ttl: self.opts.ttl,
            max_hold: self.opts.max_hold,
        }
    }

    /// This handle holds `lease` now, kept by its watchdog.
    fn install(&self, lease: Lease) {
        let lease = Arc::new(lease);
        if let Some(cb) = &self.opts.on_lost {
            let cb = cb.clone();
            lease.on_lost(Box::new(move |why| cb(why)));
        }
        watchdog::start(&lease, &self.client, &self.mode, self.opts.auto_renew);
        self.state(|state| {
            state.last = Some(lease.clone());
            state.hold = Some(lease);
        });
    }

    /// Gives the lock up. `NotOwned` when this handle holds nothing, or Redis
    /// says its hold had already ended (then nobody else's hold is touched).
    pub async fn release(&self) -> Result<()> {
        self.via(Io::Multiplexed).release().await
    }

    /// Redis no longer had the hold: marked lost (and told, the first time).
    fn lose(lease: &Arc<Lease>, why: &str) {
        lease.lose(LossCause::TakenOver, why);
    }

    /// Pushes the expiry to `ttl` (default: the handle's ttl) from now; later
    /// renewals keep that ttl.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        self.via(Io::Multiplexed).extend(ttl).await
    }

    /// The holder of each key, as Redis sees it now.
    pub async fn inspect(&self) -> Result<Vec<Option<Record>>> {
        self.via(Io::Multiplexed).inspect().await
    }

    /// Held by anyone (any of the names, for a multi-lock).
    pub async fn locked(&self) -> Result<bool> {
        self.via(Io::Multiplexed).locked().await
    }

    /// Held by this handle, as Redis sees it now.
    pub async fn owned(&self) -> Result<bool> {
        self.via(Io::Multiplexed).owned().await
    }

    /// Time left on this handle's hold, or `None` when it holds nothing.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        self.via(Io::Multiplexed).remaining().await
    }

    /// The lease this handle holds now.
    fn current(&self) -> Option<Arc<Lease>> {
        self.state(|s| s.hold.clone())
    }

    /// Whether this handle holds the lock, by its own account (no round trip).
    pub fn is_held(&self) -> bool {
        self.state(|s| s.hold.is_some())
    }

    /// `"lock"`, `"read"`, `"write"` or `"permit"`.
    pub fn kind(&self) -> &'static str {
        self.mode.kind()
    }

    /// Takes its turn in arrival order (a fair Lock, or a fair RWMutex's handle).
    pub fn is_fair(&self) -> bool {
        self.subject.fair
    }

    /// Restored from a token and not re-acquired since.
    pub fn is_restored(&self) -> bool {
        self.adopted_token().is_some()
    }

    pub fn token(&self) -> Option<String> {
        self.current().map(|l| l.token().to_string())
    }

    /// The fence of the current hold: greater than every earlier one for these names.
    pub fn fence(&self) -> Option<i64> {
        self.state(|s| s.hold.as_ref().and_then(|l| l.fence()))
    }

    /// The lease of the current (or latest) hold.
    pub fn lease(&self) -> Option<Arc<Lease>> {
        self.state(|s| s.last.clone())
    }

    /// Whether the current (or latest) hold was lost.
    pub fn lost(&self) -> bool {
        self.lease().is_some_and(|l| l.is_lost())
    }

    fn not_owned(&self) -> Error {
        Error::NotOwned(format!("{} is not held by this handle", self.label()))
    }
}

impl Via<'_, Lock> {
    /// As [`Lock::release`], its commands sent as the view's `Io` says.
    pub async fn release(&self) -> Result<()> {
        let lease = self.state(|state| {
            let lease = state.hold.take().ok_or_else(|| self.not_owned())?;
            // This handle no longer holds, whatever Redis answers.
            state.gate.add_permits(1);
            Ok::<_, Error>(lease)
        })?;
        let valid = lease.valid_until().is_some_and(|t| Instant::now() < t) && !lease.is_marked_lost();
        // Renewal stops before the release is sent.
        lease.mark_released();
        let written = lease.written();
        let holder = lease.holder(written.as_ref());
        let released = self.client.via(self.io).release(&self.mode, &holder).await?;
        // Sent twice after a dropped connection, and the second found nothing:
        // while the hold was still surely valid, nobody but this release can
        // have ended it, so the first sending did.
        let first_sending_released = released.retried && valid;
        if !released.held && !first_sending_released {
            Lock::lose(&lease, "it had expired or been taken over before release");
            return Err(Error::NotOwned(format!(
                "{} was no longer held by this handle: it expired or was taken over",
                self.label()
            )));
        }
        let (subject, held, hold) = (&self.subject, lease.held_for(), lease.id());
        events::emit(|| Event::Release { subject, held, hold });
        Ok(())
    }

    /// As [`Lock::extend`], its commands sent as the view's `Io` says.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let ttl = ttl.unwrap_or(self.opts.ttl);
        check_ttl(ttl)?;
        if self.never_expires() {
            return Err(Error::InvalidArgument(format!(
                "{} was taken without expiry: there is no expiry to extend",
                self.label()
            )));
        }
        let lease = self.current().ok_or_else(|| self.not_owned())?;
        if lease.is_lost() {
            return Err(Error::NotOwned(format!(
                "{} was lost: {}",
                self.label(),
                lease.lost_reason().unwrap_or_default()
            )));
        }
        let Some(ttl) = lease.renewable(ttl) else {
            return Err(Error::NotOwned(format!(
                "{} is at its max_hold: it cannot be extended",
                self.label()
            )));
        };
        let written = lease.written();
        let sent = Instant::now();
        let refreshed =
            self.client.via(self.io).refresh(&self.mode, &lease.holder(written.as_ref()), ttl).await;
        let (renewed, unacknowledged) = lease.answered(refreshed);
        if renewed? {
            if let Some(shortfall) = unacknowledged {
                let kept = self.client.options().replication.policy == Policy::Warn;
                let hold = Some(lease.id());
                replication::unacknowledged(
                    self.client.replica_warnings(),
                    &self.subject,
                    &self.label(),
                    ReplicaStep::Extend,
                    &shortfall,
                    kept,
                    hold,
                );
                if !kept {
                    return Err(Error::NotReplicated(format!(
                        "the extend of {} reached the master, but {}: it does not count, and the hold keeps its \
                         previous validity (replica_policy \"fail\")",
                        self.label(),
                        shortfall.describe()
                    )));
                }
            }
            lease.extended(sent, ttl);
            Ok(())
        } else {
            Lock::lose(&lease, "it had expired or been taken over before extend");
            Err(Error::NotOwned(format!("{} is no longer held by this handle", self.label())))
        }
    }

    /// As [`Lock::inspect`], its commands sent as the view's `Io` says.
    pub async fn inspect(&self) -> Result<Vec<Option<Record>>> {
        self.client.via(self.io).holders(&self.mode).await
    }

    /// As [`Lock::locked`], its commands sent as the view's `Io` says.
    pub async fn locked(&self) -> Result<bool> {
        self.mode.locked(&self.client.via(self.io)).await
    }

    /// As [`Lock::owned`], its commands sent as the view's `Io` says.
    pub async fn owned(&self) -> Result<bool> {
        Ok(self.remaining().await?.is_some())
    }

    /// As [`Lock::remaining`], its commands sent as the view's `Io` says.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        match self.current() {
            Some(lease) => self.mode.remaining(&self.client.via(self.io), lease.token()).await,
            None => Ok(None),
        }
    }
}
