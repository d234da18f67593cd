//! The exclusive lock: one handle, at most one hold at a time, over one name
//! or (all-or-nothing) several.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::deployment::Deployment;
use crate::error::{Error, Result};
use crate::events::{self, AcquireProbe, Event, LossCause, Outcome, ReplicaStep, Subject, Wakeup};
use crate::keys::one_slot;
use crate::lease::Lease;
use crate::mode::{patience, Mode};
use crate::replication::{self, Policy, Shortfall};
use crate::retry::Retry;
use crate::scripts::{Obtain, Record};
use crate::steps::{Obtaining, Steps};
use crate::token::new_token;
use crate::wakeups::{Handed, Waits};
use crate::watchdog::{Renewal, Watchdog};

/// Longest accepted name, metadata and token, in bytes.
pub const MAX_NAME: usize = 4096;
pub const MAX_METADATA: usize = 65536;
pub use crate::token::MAX_TOKEN;
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
    /// Stored beside the owner token, readable with `inspect`.
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
    client: Deployment,
    names: Vec<String>,
    mode: Mode,
    opts: LockOptions,
    state: Mutex<State>,
    /// What this handle's events are about.
    subject: Arc<Subject>,
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
        State { pid: crate::pid::current(), gate: Arc::new(Semaphore::new(1)), hold: None, last: None }
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
    /// (restored in another process): it can release it, or acquire to adopt it.
    pub fn new(
        client: Deployment,
        names: Vec<String>,
        opts: LockOptions,
        token: Option<String>,
    ) -> Result<Lock> {
        validate(&names, &opts, token.as_deref())?;
        let mode = if opts.fair {
            client.single("a fair Lock")?;
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
        client: Deployment,
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
        let subject =
            Arc::new(Subject { names: names.clone(), kind: mode.kind(), fair: mode.patience().is_some() });
        Lock { client, names, mode, opts, state: Mutex::new(state), subject }
    }

    /// This process's state: after a fork, the child's starts empty.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.pid != crate::pid::current() {
            let inherited = std::mem::replace(&mut *state, State::new());
            // The parent's watchdog task lives in the parent's runtime: leave it be.
            std::mem::forget(inherited);
        }
        state
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn client(&self) -> &Deployment {
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
    /// no lock (and no writer's intent or place in a queue) behind, and never
    /// touches a restored token's hold, which is its owner's.
    pub async fn acquire(&self, wait: Wait) -> Result<bool> {
        if !events::observed() {
            return self.take(wait).await;
        }
        let probe = AcquireProbe::start(&self.subject, wait != Wait::No);
        let taken = self.take(wait).await;
        let outcome = match &taken {
            Ok(true) => Outcome::Acquired,
            Ok(false) if matches!(wait, Wait::Until(_)) && wait.expired() => Outcome::TimedOut,
            Ok(false) => Outcome::NotAcquired,
            Err(_) => Outcome::Error,
        };
        let hold = self.lease().filter(|_| outcome == Outcome::Acquired).map(|l| events::hold_id(&l));
        probe.finish(outcome, hold);
        taken
    }

    async fn take(&self, wait: Wait) -> Result<bool> {
        self.forget_lost_hold();
        let adopted = self.adopted_token();
        let ours = adopted.is_none();
        let permit = match adopted {
            Some(_) => None,
            None => match self.enter(wait).await {
                Some(p) => Some(p),
                None => return Ok(false),
            },
        };
        let token = match adopted {
            Some(t) => t,
            None => new_token()?,
        };
        let metadata = self.opts.metadata.as_deref();
        // While a script may have taken the lock (its answer not in yet), or a
        // waiting writer's intent or a place in a queue stands, a dropped
        // future must undo that.
        let mut undo = Undo {
            client: self.client.clone(),
            mode: self.mode.clone(),
            token: token.clone(),
            ours,
            pending: false,
        };
        let mut attempts = Attempts::default();
        let mut waiting = Waiting { registration: None, subscribe: wait != Wait::No };
        let mut outage = Outage::default();
        loop {
            undo.pending = true;
            let will_wait = wait != Wait::No;
            let number = attempts.next();
            let ask = Obtaining { token: &token, ttl: self.opts.ttl, metadata, will_wait, attempt: number };
            let obtain = self.client.obtain(&self.mode, &ask, ours);
            let (answer, unacknowledged) = replication::noting(obtain).await;
            let answer = match answer {
                Ok(answer) => {
                    outage.over();
                    answer
                }
                Err(e) => {
                    // The attempt may have run (a timeout): the token is
                    // still this acquire's, and the next attempt re-enters
                    // it; the guard undoes it if the acquire gives up.
                    let pause = outage.ride(&e, &self.client, wait).ok_or(e)?;
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            match answer {
                Obtain::Taken { fence } => {
                    let kept = self.client.options().replication.policy == Policy::Warn;
                    if let Some(shortfall) = unacknowledged.filter(|_| !kept) {
                        return Err(self.refuse_unreplicated(&mut undo, &token, ours, &shortfall).await);
                    }
                    let lease = Lease::new(Some(attempts.sent(number)), self.opts.ttl);
                    self.granted(&mut undo, &mut waiting, permit, token, fence, lease);
                    if let Some(shortfall) = unacknowledged {
                        let hold = self.lease().map(|l| events::hold_id(&l));
                        let (subject, label) = (&self.subject, self.label());
                        replication::unacknowledged(
                            self.client.replica_warnings(),
                            subject,
                            &label,
                            ReplicaStep::Acquire,
                            &shortfall,
                            true,
                            hold,
                        );
                    }
                    return Ok(true);
                }
                Obtain::Busy { pttl_ms } => {
                    outage.busy(pttl_ms);
                    undo.pending = will_wait && self.mode.leaves_intent();
                    let delay = match self.opts.retry.delay(attempts.failed()) {
                        Some(d) if !wait.expired() => d,
                        _ => {
                            if undo.pending {
                                // Still pending while the withdrawal is under way: if
                                // it fails, or this future is dropped meanwhile, the
                                // guard's clean-up withdraws again.
                                self.client.withdraw(&self.mode, &token, ours).await?;
                                undo.pending = false;
                            }
                            return Ok(false);
                        }
                    };
                    let woken = self.pause(&mut waiting, &token, delay, pttl_ms, wait).await;
                    if let Some((fence, lease)) = self.handed_over(&waiting, &attempts) {
                        self.granted(&mut undo, &mut waiting, permit, token, fence, lease);
                        HANDED_OVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        self.woken(Some(Wakeup::HandOver));
                        return Ok(true);
                    }
                    self.woken(woken);
                }
            }
        }
    }

    /// A grant fewer replicas than asked acknowledged in time, under policy
    /// "fail": undone before the error is returned (released, and out of any
    /// queue; a restored token's hold stays its owner's). The guard stays
    /// pending meanwhile, so an undo that fails, or this future dropped, is
    /// finished by its clean-up.
    async fn refuse_unreplicated(
        &self,
        undo: &mut Undo,
        token: &str,
        ours: bool,
        shortfall: &Shortfall,
    ) -> Error {
        replication::unacknowledged(
            self.client.replica_warnings(),
            &self.subject,
            &self.label(),
            ReplicaStep::Acquire,
            shortfall,
            false,
            None,
        );
        match self.mode.undo(&self.client, token, ours).await {
            Ok(()) => undo.pending = false,
            Err(e) => {
                log::debug!("undoing an unacknowledged grant of {} failed, retrying: {e}", self.label());
            }
        }
        let undone = if ours { "the grant was undone" } else { "the restored hold stays its owner's" };
        Error::NotReplicated(format!(
            "{} was granted by the master, but {}: {undone} (replica_policy \"fail\")",
            self.label(),
            shortfall.describe()
        ))
    }

    /// The acquire succeeded: nothing to undo, its wake-up used, the handle's
    /// permit kept for the hold.
    fn granted(
        &self,
        undo: &mut Undo,
        waiting: &mut Waiting,
        permit: Option<OwnedSemaphorePermit>,
        token: String,
        fence: i64,
        lease: Lease,
    ) {
        undo.pending = false;
        if let Some(w) = waiting.registration.take() {
            w.done();
        }
        if let Some(p) = permit {
            p.forget();
        }
        self.install(token, self.mode.fenced().then_some(fence), lease);
    }

    fn woken(&self, wakeup: Option<Wakeup>) {
        if let Some(wakeup) = wakeup {
            events::emit(|| Event::Woken { subject: &self.subject, wakeup });
        }
    }

    /// Between two attempts. The first time, subscribes to wake-ups and
    /// returns at once: the attempt right after the subscription catches a
    /// release that came before it. Later, waits for a wake-up or for the
    /// retry's delay (bounded by the holder's ttl and the deadline), and
    /// says which came.
    async fn pause(
        &self,
        waiting: &mut Waiting,
        token: &str,
        delay: Duration,
        holder_pttl_ms: i64,
        wait: Wait,
    ) -> Option<Wakeup> {
        if waiting.registration.as_ref().is_some_and(Waits::stale) {
            // Its subscription dropped (and woke it): subscribe anew.
            waiting.registration = None;
            waiting.subscribe = true;
        }
        if let Some(w) = &waiting.registration {
            w.rearm();
        } else if std::mem::take(&mut waiting.subscribe) {
            let channels = self.mode.channels();
            let register = self.client.register_waiter(&channels, self.mode.is_reader(), token);
            // Subscribing never outlasts the acquire's own deadline.
            let registered = match wait {
                Wait::Until(deadline) => {
                    tokio::time::timeout_at(deadline.into(), register).await.unwrap_or_else(|_| {
                        Err(Error::Connection(
                            "subscribing for wake-ups took longer than the acquire may wait".into(),
                        ))
                    })
                }
                _ => register.await,
            };
            match registered {
                Ok(w) => {
                    waiting.registration = Some(w);
                    return None;
                }
                Err(e) => {
                    // The master unreachable (a failover under way): subscribe at the next pause.
                    waiting.subscribe = matches!(e, Error::Connection(_));
                    log::debug!("no wake-ups for {} ({e}); polling", self.label());
                }
            }
        }
        let mut wake = Instant::now() + self.wait_between(delay, holder_pttl_ms);
        if let Wait::Until(deadline) = wait {
            wake = wake.min(deadline);
        }
        if let Some(w) = &waiting.registration {
            tokio::select! {
                () = w.woken() => return Some(Wakeup::PubSub),
                () = tokio::time::sleep_until(wake.into()) => {}
                () = self.client.follow_master() => {}
            }
        } else {
            tokio::time::sleep_until(wake.into()).await;
        }
        Some(Wakeup::Poll)
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

    /// A hold known to be lost protects nothing: free the handle for a new
    /// one. Its token is released in the background, in case Redis still has
    /// it (the loss was local: validity ran out while Redis was unreachable),
    /// so this process is not left waiting on its own stale hold.
    fn forget_lost_hold(&self) {
        let mut state = self.state();
        if state.hold.as_ref().is_some_and(|h| h.lease.is_marked_lost()) {
            let lost = state.hold.take().expect("checked");
            state.gate.add_permits(1);
            drop(state);
            let (client, mode) = (self.client.clone(), self.mode.clone());
            self.client.spawn_cleanup(async move {
                let _ = client.release(&mode, &lost.token).await;
            });
        }
    }

    fn adopted_token(&self) -> Option<String> {
        match &self.state().hold {
            Some(h) if h.adopted => Some(h.token.clone()),
            _ => None,
        }
    }

    /// Whether a fair release handed the lock to this waiter (its wake-up
    /// names it, with the fence and the attempt it answers), so it holds
    /// without a round trip to claim it: then the fence, and a lease valid for
    /// this waiter's patience from when it sent that attempt (which ran
    /// before the release did, so Redis keeps the grant at least that long),
    /// renewed to the full ttl at once. A grant for an attempt this acquire
    /// no longer knows is stale and ignored. A waiter with metadata to store,
    /// without renewal, or woken too late to be sure claims it with one more
    /// attempt instead.
    fn handed_over(&self, waiting: &Waiting, attempts: &Attempts) -> Option<(i64, Lease)> {
        let Handed { fence, attempt } = waiting.registration.as_ref()?.take_handed()?;
        let sent = attempts.find(attempt)?;
        let patience = self.mode.patience()?;
        let lease = Lease::handed(sent, self.opts.ttl, patience);
        let margin = Duration::from_millis(5);
        let in_time = lease.valid_until().is_some_and(|t| Instant::now() + margin < t);
        // A hand-over is written by the releaser's script, whose replicas this
        // waiter cannot wait for: with replica acknowledgement on, it claims
        // the hold with an attempt of its own, which is waited for.
        let acked = !self.client.options().replication.is_on();
        (self.opts.auto_renew && self.opts.metadata.is_none() && in_time && acked).then_some((fence, lease))
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
            subject: self.subject.clone(),
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
        let valid = lease.valid_until().is_some_and(|t| Instant::now() < t) && !lease.is_marked_lost();
        lease.mark_released();
        let released = self.client.release(&self.mode, &token).await?;
        // Sent twice after a dropped connection, and the second found nothing:
        // while the hold was still surely valid, nobody but this release can
        // have ended it, so the first sending did.
        let first_sending_released = released.retried && valid;
        if !released.held && !first_sending_released {
            self.lose(&lease, "it had expired or been taken over before release");
            return Err(Error::NotOwned(format!(
                "{} was no longer held by this handle: it expired or was taken over",
                self.label()
            )));
        }
        let (subject, held, hold) = (&self.subject, lease.held_for(), events::hold_id(&lease));
        events::emit(|| Event::Release { subject, held, hold });
        Ok(())
    }

    /// Redis no longer had the hold: marked lost (and told, the first time).
    fn lose(&self, lease: &Arc<Lease>, why: &str) {
        events::lost(&self.subject, lease, LossCause::TakenOver, || lease.mark_lost(why));
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
        let (renewed, unacknowledged) =
            replication::noting(self.client.refresh(&self.mode, &token, ttl)).await;
        if renewed? {
            if let Some(shortfall) = unacknowledged {
                let kept = self.client.options().replication.policy == Policy::Warn;
                let hold = Some(events::hold_id(&lease));
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
            self.lose(&lease, "it had expired or been taken over before extend");
            Err(Error::NotOwned(format!("{} is no longer held by this handle", self.label())))
        }
    }

    /// The holder of each key, as Redis sees it now.
    pub async fn inspect(&self) -> Result<Vec<Option<Record>>> {
        self.client.holders(&self.mode).await
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
    registration: Option<Waits>,
    subscribe: bool,
}

/// A waiter riding through a Redis Cluster failover, or a quorum's majority
/// briefly out of reach. An attempt that fails because its slot's master (or
/// a majority of the masters) cannot be reached or cannot serve (killed,
/// being replaced, CLUSTERDOWN) is tried again, after a short pause, instead of
/// ending the acquire, as long as the hold it waits behind could still be
/// valid (its ttl left at the last busy answer), and for at least a connect
/// plus a command timeout from the first failure; never past the acquire's
/// deadline. Only a waiter rides through: an acquire whose first attempt
/// fails reports the error at once, as on a single node.
#[derive(Default)]
struct Outage {
    /// When the last busy answer came, and the holder's ttl left then.
    busy: Option<(Instant, i64)>,
    /// Since the first failing attempt: until when to keep trying, and the next pause.
    riding: Option<(Instant, Duration)>,
}

impl Outage {
    const FIRST_PAUSE: Duration = Duration::from_millis(10);
    const LONGEST_PAUSE: Duration = Duration::from_millis(200);

    fn busy(&mut self, pttl_ms: i64) {
        self.busy = Some((Instant::now(), pttl_ms));
    }

    fn over(&mut self) {
        self.riding = None;
    }

    /// The pause before trying again after `e`, or `None` to give up with it.
    fn ride(&mut self, e: &Error, client: &Deployment, wait: Wait) -> Option<Duration> {
        let rides = client.is_cluster() || client.masters() > 1;
        if !rides || !matches!(e, Error::Connection(_)) {
            return None;
        }
        let now = Instant::now();
        let (until, pause) = if let Some(riding) = self.riding {
            riding
        } else {
            let (at, pttl_ms) = self.busy?;
            let opts = client.options();
            let holder = at + Duration::from_millis(pttl_ms.max(0) as u64);
            let mut until = holder.max(now + opts.connect_timeout + opts.command_timeout);
            if let Wait::Until(deadline) = wait {
                until = until.min(deadline);
            }
            log::info!(
                "{e}; waiting until the lock is served again (a failover or an outage may be under way)"
            );
            (until, Self::FIRST_PAUSE)
        };
        if now >= until {
            return None;
        }
        self.riding = Some((until, (pause * 2).min(Self::LONGEST_PAUSE)));
        Some(pause.min(until - now))
    }
}

/// Undoes, in the background, what a dropped acquire may have left in Redis.
struct Undo {
    client: Deployment,
    mode: Mode,
    token: String,
    /// False for a restored token: its hold belongs to its owner.
    ours: bool,
    pending: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        let (client, mode, token, ours) =
            (self.client.clone(), self.mode.clone(), std::mem::take(&mut self.token), self.ours);
        self.client.spawn_cleanup(async move {
            // A few tries: the undo races the faults that often cut an
            // acquire short (a dropped connection, a restarting server).
            let mut pause = Duration::from_millis(20);
            for _ in 0..UNDO_TRIES {
                match mode.undo(&client, &token, ours).await {
                    Ok(()) => return,
                    Err(e) => log::debug!("undoing an interrupted acquire failed, retrying: {e}"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        });
    }
}

/// How often an interrupted acquire's undo is tried: over about 2.5 s, long
/// enough for a server restart, after which a fair waiter's place has lapsed
/// anyway (its patience is at most 2 s).
const UNDO_TRIES: u32 = 8;

/// The attempts of one acquire: their numbers and when each was sent, so a
/// fair grant is measured from the attempt it answers. Only recent ones are
/// kept: a grant for an older attempt has lapsed anyway.
#[derive(Default)]
struct Attempts {
    count: u64,
    sent: VecDeque<(u64, Instant)>,
}

impl Attempts {
    const KEPT: usize = 32;

    /// Numbers the attempt about to be sent.
    fn next(&mut self) -> u64 {
        self.count += 1;
        if self.sent.len() == Self::KEPT {
            self.sent.pop_front();
        }
        self.sent.push_back((self.count, Instant::now()));
        self.count
    }

    fn failed(&self) -> u32 {
        u32::try_from(self.count).unwrap_or(u32::MAX)
    }

    fn find(&self, number: u64) -> Option<Instant> {
        self.sent.iter().find(|(n, _)| *n == number).map(|(_, t)| *t)
    }

    fn sent(&self, number: u64) -> Instant {
        self.find(number).unwrap_or_else(Instant::now)
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
    token.map_or(Ok(()), crate::token::check_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientOptions;

    fn client(url: &str) -> Deployment {
        let opts = ClientOptions {
            url: url.into(),
            connect_timeout: Duration::from_millis(100),
            command_timeout: Duration::from_millis(100),
            ..ClientOptions::default()
        };
        Deployment::new(opts).unwrap()
    }

    #[test]
    fn a_cluster_waiter_rides_through_a_failover_for_as_long_as_the_hold_it_waits_on() {
        let cluster = client("redis+cluster://127.0.0.1:7000");
        let down = Error::Connection("cannot reach Redis".into());
        let mut outage = Outage::default();
        assert_eq!(
            outage.ride(&down, &cluster, Wait::Forever),
            None,
            "not a waiter yet: the error is reported"
        );
        outage.busy(400);
        let pauses: Vec<_> = (0..6).map(|_| outage.ride(&down, &cluster, Wait::Forever).unwrap()).collect();
        assert_eq!(pauses[0], Outage::FIRST_PAUSE);
        assert!(pauses.windows(2).all(|w| w[1] >= w[0]) && pauses[5] == Outage::LONGEST_PAUSE, "{pauses:?}");
        let other = Error::Redis("WRONGTYPE".into());
        assert_eq!(outage.ride(&other, &cluster, Wait::Forever), None, "not a failover: reported");
        std::thread::sleep(Duration::from_millis(410));
        assert_eq!(outage.ride(&down, &cluster, Wait::Forever), None, "the hold it waited on has expired");

        // At least a connect plus a command timeout, never past the deadline.
        let mut outage = Outage::default();
        outage.busy(0);
        let deadline = Instant::now() + Duration::from_millis(50);
        assert!(outage.ride(&down, &cluster, Wait::Until(deadline)).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(outage.ride(&down, &cluster, Wait::Until(deadline)), None);
        outage.over();
        assert!(outage.ride(&down, &cluster, Wait::Forever).is_some(), "a new outage after an answer");

        let node = client("redis://127.0.0.1:6379/0");
        let mut outage = Outage::default();
        outage.busy(10_000);
        assert_eq!(outage.ride(&down, &node, Wait::Forever), None, "a single node reports it at once");
    }
}
