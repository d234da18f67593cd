//! The exclusive lock: one handle, at most one hold at a time, over one name
//! or (all-or-nothing) several.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::one_slot;
use crate::lease::Lease;
use crate::mode::{patience, Mode};
use crate::retry::Retry;
use crate::scripts::{Obtain, Record};
use crate::token::new_token;
use crate::wakeups::Registration;
use crate::watchdog::{Renewal, Watchdog};

/// Longest accepted name, metadata and token, in bytes.
pub const MAX_NAME: usize = 4096;
pub const MAX_METADATA: usize = 65536;
pub const MAX_TOKEN: usize = 512;
/// Shortest and longest accepted ttl.
pub const MIN_TTL: Duration = Duration::from_millis(1);
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

pub type LostCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// Holds this process took straight from a fair release's wake-up, without
/// a round trip to claim them.
static HANDED_OVER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub fn handed_over() -> usize {
    HANDED_OVER.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Clone)]
pub struct LockOptions {
    pub ttl: Duration,
    pub auto_renew: bool,
    pub retry: Retry,
    /// Take the lock in arrival order across processes (one name only).
    pub fair: bool,
    /// Stored beside the owner token (seed 002), readable with `inspect`.
    pub metadata: Option<String>,
    pub on_lost: Option<LostCallback>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: Duration::from_secs(30),
            auto_renew: true,
            retry: Retry::default(),
            fair: false,
            metadata: None,
            on_lost: None,
        }
    }
}

/// How long `acquire` may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    No,
    Forever,
    Until(Instant),
}

impl Wait {
    fn expired(self) -> bool {
        match self {
            Wait::No => true,
            Wait::Forever => false,
            Wait::Until(t) => Instant::now() >= t,
        }
    }
}

pub struct Lock {
    client: Client,
    names: Vec<String>,
    mode: Mode,
    opts: LockOptions,
    state: Mutex<State>,
}

struct State {
    /// The process this state belongs to: a forked child starts afresh,
    /// holding nothing (its parent's hold stays the parent's).
    pid: u32,
    /// One permit: held while this handle holds, so two tasks sharing a handle
    /// never share a hold (the second waits, as with `threading.Lock`).
    gate: Arc<Semaphore>,
    hold: Option<Hold>,
    /// The lease of the latest hold, kept after release to answer `lost`.
    last: Option<Arc<Lease>>,
}

impl State {
    fn new() -> State {
        State { pid: std::process::id(), gate: Arc::new(Semaphore::new(1)), hold: None, last: None }
    }
}

struct Hold {
    token: String,
    fence: Option<i64>,
    lease: Arc<Lease>,
    /// Restored from a token, not yet re-acquired: the next acquire adopts it.
    adopted: bool,
    watchdog: Option<Watchdog>,
}

impl Lock {
    /// A handle on the lock `names` (one name, or several taken all-or-nothing).
    /// With `token`, the handle starts out holding the lock that token owns
    /// (seed 004's restore): it can release it, or acquire to adopt it.
    pub fn new(client: Client, names: Vec<String>, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        validate(&names, &opts, token.as_deref())?;
        let mode = if opts.fair {
            if names.len() != 1 {
                return Err(Error::InvalidArgument("fair mode takes one name, not a multi-lock".into()));
            }
            Mode::Fair { keys: client.keys().fair(&names[0]), patience: patience(opts.ttl) }
        } else {
            let keys: Arc<[String]> = names.iter().map(|n| client.keys().lock(n)).collect();
            if client.is_cluster() && !one_slot(&keys) {
                return Err(Error::InvalidArgument(
                    "a multi-lock takes all its names in one atomic step, which Redis Cluster allows \
                     only within one hash slot, and these names fall in different slots"
                        .into(),
                ));
            }
            Mode::Exclusive(keys)
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
        let mut state = State::new();
        if let Some(token) = token {
            state.gate.try_acquire().expect("a new gate has its permit").forget();
            let lease = Arc::new(Lease::new(None, opts.ttl));
            state.last = Some(lease.clone());
            state.hold = Some(Hold { token, fence: None, lease, adopted: true, watchdog: None });
        }
        Lock { client, names, mode, opts, state: Mutex::new(state) }
    }

    /// This process's state: after a fork, the child's starts empty.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.pid != std::process::id() {
            let inherited = std::mem::replace(&mut *state, State::new());
            // The parent's watchdog task lives in the parent's runtime: leave it be.
            std::mem::forget(inherited);
        }
        state
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
        format!("lock {:?}", self.names.join(", "))
    }

    /// Takes the lock, waiting as `wait` allows. `Ok(false)`: not taken in time,
    /// or the retry strategy gave up. Cancel-safe: dropping the future leaves
    /// no lock (and no writer's intent) behind.
    pub async fn acquire(&self, wait: Wait) -> Result<bool> {
        self.forget_lost_hold();
        let adopted = self.adopted_token();
        let permit = match adopted {
            Some(_) => None,
            None => match self.enter(wait).await {
                Some(p) => Some(p),
                None => return Ok(false),
            },
        };
        let token = match adopted.clone() {
            Some(t) => t,
            None => new_token()?,
        };
        let metadata = self.opts.metadata.as_deref().unwrap_or("");
        // While a script may have taken the lock (its answer not in yet), or a
        // waiting writer's intent stands, a dropped future must undo that. A
        // restored token's hold is its owner's: never released here.
        let mut undo = Undo {
            client: self.client.clone(),
            mode: self.mode.clone(),
            token: token.clone(),
            release: adopted.is_none(),
            pending: false,
        };
        let mut failed = 0u32;
        let mut waiting = Waiting { registration: None, subscribe: wait != Wait::No };
        loop {
            let sent = Instant::now();
            undo.pending = true;
            let will_wait = wait != Wait::No;
            let answer = self.mode.obtain(&self.client, &token, self.opts.ttl, metadata, will_wait).await?;
            match answer {
                Obtain::Taken { fence } => {
                    undo.pending = false;
                    if let Some(w) = waiting.registration.take() {
                        w.done();
                    }
                    if let Some(p) = permit {
                        p.forget();
                    }
                    let lease = Lease::new(Some(sent), self.opts.ttl);
                    self.install(token, self.mode.fenced().then_some(fence), lease);
                    return Ok(true);
                }
                Obtain::Busy { pttl_ms } => {
                    undo.pending = will_wait && self.mode.leaves_intent();
                    failed += 1;
                    let delay = match self.opts.retry.delay(failed) {
                        Some(d) if !wait.expired() => d,
                        _ => {
                            if undo.pending {
                                undo.pending = false;
                                self.mode.withdraw(&self.client, &token).await?;
                            }
                            return Ok(false);
                        }
                    };
                    self.pause(&mut waiting, &token, delay, pttl_ms, wait).await;
                    if let Some((fence, lease)) = self.handed_over(&waiting, sent) {
                        undo.pending = false;
                        if let Some(w) = waiting.registration.take() {
                            w.done();
                        }
                        if let Some(p) = permit {
                            p.forget();
                        }
                        self.install(token, self.mode.fenced().then_some(fence), lease);
                        HANDED_OVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return Ok(true);
                    }
                }
            }
        }
    }

    /// Between two attempts. The first time, subscribes to wake-ups and
    /// returns at once: the attempt right after the subscription catches a
    /// release that came before it. Later, waits for a wake-up or for the
    /// retry's delay (bounded by the holder's ttl and the deadline).
    async fn pause(
        &self,
        waiting: &mut Waiting,
        token: &str,
        delay: Duration,
        holder_pttl_ms: i64,
        wait: Wait,
    ) {
        if waiting.registration.as_ref().is_some_and(Registration::stale) {
            // Its subscription dropped (and woke it): subscribe anew.
            waiting.registration = None;
            waiting.subscribe = true;
        }
        if let Some(w) = &waiting.registration {
            w.rearm();
        } else if std::mem::take(&mut waiting.subscribe) {
            let channels = self.mode.channels();
            match self.client.register_waiter(&channels, self.mode.is_reader(), token).await {
                Ok(w) => {
                    waiting.registration = Some(w);
                    return;
                }
                Err(e) => log::debug!("no wake-ups for {} ({e}); polling", self.label()),
            }
        }
        let mut wake = Instant::now() + self.wait_between(delay, holder_pttl_ms);
        if let Wait::Until(deadline) = wait {
            wake = wake.min(deadline);
        }
        match &waiting.registration {
            Some(w) => {
                tokio::select! {
                    () = w.woken() => {}
                    () = tokio::time::sleep_until(wake.into()) => {}
                }
            }
            None => tokio::time::sleep_until(wake.into()).await,
        }
    }

    /// The longest pause before the next attempt: the retry's delay, no longer
    /// than the holder has left, and short enough to keep a writer's intent or
    /// a fair waiter's place alive.
    fn wait_between(&self, delay: Duration, holder_pttl_ms: i64) -> Duration {
        let mut delay = delay;
        // -1: no expiry known. 0 (under a millisecond left) and -2 (just gone)
        // mean "any moment now": an expiry publishes no wake-up, so look again.
        if holder_pttl_ms != -1 {
            delay = delay.min(Duration::from_millis(holder_pttl_ms.max(1) as u64));
        }
        if let Some(keep_alive) = self.mode.keep_alive(self.opts.ttl) {
            delay = delay.min(keep_alive);
        }
        delay
    }

    /// Waits for this handle's own permit.
    async fn enter(&self, wait: Wait) -> Option<OwnedSemaphorePermit> {
        let gate = self.state().gate.clone();
        match wait {
            Wait::No => gate.try_acquire_owned().ok(),
            Wait::Forever => gate.acquire_owned().await.ok(),
            Wait::Until(t) => tokio::time::timeout_at(t.into(), gate.acquire_owned()).await.ok()?.ok(),
        }
    }

    /// A hold known to be lost protects nothing: free the handle for a new one.
    fn forget_lost_hold(&self) {
        let mut state = self.state();
        if state.hold.as_ref().is_some_and(|h| h.lease.is_marked_lost()) {
            state.hold = None;
            state.gate.add_permits(1);
        }
    }

    fn adopted_token(&self) -> Option<String> {
        match &self.state().hold {
            Some(h) if h.adopted => Some(h.token.clone()),
            _ => None,
        }
    }

    /// Whether a fair release handed the lock to this waiter (its wake-up
    /// names it, with the fence), so it holds without a round trip to claim
    /// it: then the fence, and a lease valid for the hand-over's patience
    /// from `sent`, the last attempt (sent before that release ran), renewed
    /// to the full ttl at once. A waiter with metadata to store, without
    /// renewal, or woken too late to be sure claims it with one more attempt.
    fn handed_over(&self, waiting: &Waiting, sent: Instant) -> Option<(i64, Lease)> {
        let fence = waiting.registration.as_ref()?.take_handed()?;
        let patience = self.mode.patience()?;
        let metadata = self.opts.metadata.as_deref().unwrap_or("");
        let lease = Lease::handed(sent, self.opts.ttl, patience);
        let margin = Duration::from_millis(5);
        let in_time = lease.valid_until().is_some_and(|t| Instant::now() + margin < t);
        (self.opts.auto_renew && metadata.is_empty() && in_time).then_some((fence, lease))
    }

    fn install(&self, token: String, fence: Option<i64>, lease: Lease) {
        let lease = Arc::new(lease);
        if let Some(cb) = &self.opts.on_lost {
            let cb = cb.clone();
            lease.on_lost(Box::new(move |why| cb(why)));
        }
        let renewal = Renewal {
            client: self.client.clone(),
            mode: self.mode.clone(),
            token: token.clone(),
            lease: lease.clone(),
            label: self.label(),
        };
        let watchdog = Watchdog::start(renewal, self.opts.auto_renew);
        let mut state = self.state();
        state.last = Some(lease.clone());
        state.hold = Some(Hold { token, fence, lease, adopted: false, watchdog: Some(watchdog) });
    }

    /// Gives the lock up. `NotOwned` when this handle holds nothing, or Redis
    /// says its hold had already ended (then nobody else's hold is touched).
    pub async fn release(&self) -> Result<()> {
        let hold = {
            let mut state = self.state();
            let hold = state.hold.take().ok_or_else(|| self.not_owned())?;
            // This handle no longer holds, whatever Redis answers; renewal
            // stops (the watchdog drops) before the release is sent.
            state.gate.add_permits(1);
            hold
        };
        let Hold { token, lease, watchdog, .. } = hold;
        drop(watchdog);
        lease.mark_released();
        if !self.mode.release(&self.client, &token).await? {
            lease.mark_lost("it had expired or been taken over before release");
            return Err(Error::NotOwned(format!(
                "{} was no longer held by this handle: it expired or was taken over",
                self.label()
            )));
        }
        Ok(())
    }

    /// Pushes the expiry to `ttl` (default: the handle's ttl) from now; later
    /// renewals keep that ttl.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let ttl = ttl.unwrap_or(self.opts.ttl);
        check_ttl(ttl)?;
        let (token, lease) = self.current().ok_or_else(|| self.not_owned())?;
        if lease.is_lost() {
            return Err(Error::NotOwned(format!(
                "{} was lost: {}",
                self.label(),
                lease.lost_reason().unwrap_or_default()
            )));
        }
        let sent = Instant::now();
        if self.mode.refresh(&self.client, &token, ttl).await? {
            lease.extended(sent, ttl);
            Ok(())
        } else {
            lease.mark_lost("it had expired or been taken over before extend");
            Err(Error::NotOwned(format!("{} is no longer held by this handle", self.label())))
        }
    }

    /// The holder of each key, as Redis sees it now.
    pub async fn inspect(&self) -> Result<Vec<Option<Record>>> {
        self.mode.inspect(&self.client).await
    }

    /// Held by anyone (any of the names, for a multi-lock).
    pub async fn locked(&self) -> Result<bool> {
        self.mode.locked(&self.client).await
    }

    /// Held by this handle, as Redis sees it now.
    pub async fn owned(&self) -> Result<bool> {
        Ok(self.remaining().await?.is_some())
    }

    /// Time left on this handle's hold, or `None` when it holds nothing.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        match self.current() {
            Some((token, _)) => self.mode.remaining(&self.client, &token).await,
            None => Ok(None),
        }
    }

    fn current(&self) -> Option<(String, Arc<Lease>)> {
        self.state().hold.as_ref().map(|h| (h.token.clone(), h.lease.clone()))
    }

    /// Whether this handle holds the lock, by its own account (no round trip).
    pub fn is_held(&self) -> bool {
        self.state().hold.is_some()
    }

    /// `"lock"`, `"read"` or `"write"`.
    pub fn kind(&self) -> &'static str {
        match self.mode {
            Mode::Exclusive(_) | Mode::Fair { .. } => "lock",
            Mode::Read { .. } => "read",
            Mode::Write { .. } => "write",
        }
    }

    /// Restored from a token and not re-acquired since.
    pub fn is_restored(&self) -> bool {
        self.adopted_token().is_some()
    }

    pub fn token(&self) -> Option<String> {
        self.current().map(|(t, _)| t)
    }

    /// The fence of the current hold: greater than every earlier one for these names.
    pub fn fence(&self) -> Option<i64> {
        self.state().hold.as_ref().and_then(|h| h.fence)
    }

    /// The lease of the current (or latest) hold.
    pub fn lease(&self) -> Option<Arc<Lease>> {
        self.state().last.clone()
    }

    /// Whether the current (or latest) hold was lost.
    pub fn lost(&self) -> bool {
        self.lease().is_some_and(|l| l.is_lost())
    }

    fn not_owned(&self) -> Error {
        Error::NotOwned(format!("{} is not held by this handle", self.label()))
    }
}

/// A waiter's wake-up subscription: none until its first failed attempt, and
/// none for good if subscribing failed (it then polls).
struct Waiting {
    registration: Option<Registration>,
    subscribe: bool,
}

/// Undoes, in the background, what a dropped acquire may have left in Redis.
struct Undo {
    client: Client,
    mode: Mode,
    token: String,
    /// False for a restored token: its hold belongs to its owner.
    release: bool,
    pending: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        let (client, mode, token, release) =
            (self.client.clone(), self.mode.clone(), std::mem::take(&mut self.token), self.release);
        self.client.spawn_cleanup(async move {
            let _ = mode.undo(&client, &token, release).await;
        });
    }
}

pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::InvalidArgument(format!(
            "ttl must be between {} and {} seconds, got {}",
            MIN_TTL.as_secs_f64(),
            MAX_TTL.as_secs_f64(),
            ttl.as_secs_f64()
        )));
    }
    Ok(())
}

pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("lock name must not be empty".into()));
    }
    if name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "lock name is {} bytes long; the limit is {MAX_NAME}",
            name.len()
        )));
    }
    Ok(())
}

pub(crate) fn validate(names: &[String], opts: &LockOptions, token: Option<&str>) -> Result<()> {
    if names.is_empty() {
        return Err(Error::InvalidArgument("a lock needs at least one name".into()));
    }
    for (i, name) in names.iter().enumerate() {
        check_name(name)?;
        if names[..i].contains(name) {
            return Err(Error::InvalidArgument(format!("lock name {name:?} is given twice")));
        }
    }
    check_ttl(opts.ttl)?;
    if opts.metadata.as_ref().is_some_and(|m| m.len() > MAX_METADATA) {
        return Err(Error::InvalidArgument(format!("metadata is longer than {MAX_METADATA} bytes")));
    }
    if let Some(t) = token {
        if t.is_empty() || t.len() > MAX_TOKEN {
            return Err(Error::InvalidArgument(format!("token must be 1 to {MAX_TOKEN} bytes long")));
        }
    }
    Ok(())
}
