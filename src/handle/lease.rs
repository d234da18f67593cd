//! The lease: the one thing every primitive holds (a Lock's hold, an
//! RWMutex's read or write, a semaphore's permit, an election's term). It
//! knows its token and fence, until when it is surely valid (a local
//! monotonic deadline), whether it was lost (and tells of it once), and
//! stops the watchdog task that renews it (`watchdog.rs`) when it ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::error::Result;
use crate::primitive::steps::Holder;
use crate::scripts::Refreshed;
use crate::support::events::{self, Event, HoldId, LossCause, Subject};
use crate::transport::replication::Shortfall;

/// Called once, with the reason, when a hold is lost.
pub type LostHook = Box<dyn FnOnce(&str) + Send>;

/// The safety margin taken off every validity window: clocks of the client
/// and the server may run at slightly different rates.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// What a new lease is made of.
pub(crate) struct Terms {
    pub token: String,
    /// `None` for a primitive whose holds are not fenced (a read, a permit),
    /// and for a lease restored from its token.
    pub fence: Option<i64>,
    /// The hold's value, when the step that took it wrote it whole
    /// (`Holder::written`).
    pub written: Option<Arc<str>>,
    /// What the hold is of, for its events and messages.
    pub subject: Arc<Subject>,
    /// When the acquire that took it was sent; `None`: restored from a
    /// token, its expiry unknown until the next renewal.
    pub sent: Option<Instant>,
    pub ttl: Duration,
    /// Renewal stops this long after `sent` (the handle's `max_hold`).
    pub max_hold: Option<Duration>,
}

pub struct Lease {
    token: Arc<str>,
    fence: Option<i64>,
    /// The hold's value while only this owner has written it, as far as it
    /// knows (`Holder::written`); `None` once it does not know.
    written: Mutex<Option<Arc<str>>>,
    restored: bool,
    subject: Arc<Subject>,
    /// When the hold began (its acquire was sent), for the time it was held.
    started: Instant,
    /// How long renewals may carry the hold from `started`.
    max_hold: Option<Duration>,
    ttl_ms: AtomicU64,
    valid_until: Mutex<Option<Instant>>,
    renewed_at: Mutex<Instant>,
    lost: AtomicBool,
    released: AtomicBool,
    reason: Mutex<Option<String>>,
    /// Why the renewals since the last one that counted did not count (the
    /// replicas did not acknowledge them): said with a loss at the deadline.
    unacknowledged: Mutex<Option<String>>,
    hooks: Mutex<Vec<LostHook>>,
    lost_notify: Notify,
    rescheduled: Notify,
    /// The watchdog task renewing it: stopped when the hold is released, or
    /// its handle drops it.
    renewal: Mutex<Option<AbortHandle>>,
}

impl Lease {
    pub(crate) fn new(terms: Terms) -> Lease {
        let Terms { token, fence, written, subject, sent, ttl, max_hold } = terms;
        let started = sent.unwrap_or_else(Instant::now);
        Lease {
            token: token.into(),
            fence,
            written: Mutex::new(written),
            restored: sent.is_none(),
            subject,
            started,
            max_hold,
            ttl_ms: AtomicU64::new(ttl.as_millis() as u64),
            valid_until: Mutex::new(sent.map(|t| t + ttl.saturating_sub(drift(ttl)))),
            renewed_at: Mutex::new(started),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            reason: Mutex::new(None),
            unacknowledged: Mutex::new(None),
            hooks: Mutex::new(Vec::new()),
            lost_notify: Notify::new(),
            rescheduled: Notify::new(),
            renewal: Mutex::new(None),
        }
    }

    /// A hold a fair release handed over: valid for `given` from `terms.sent`
    /// (an instant before the release ran), renewed to the ttl at once.
    pub(crate) fn handed(terms: Terms, given: Duration) -> Lease {
        let (sent, ttl) = (terms.sent.unwrap_or_else(Instant::now), terms.ttl);
        let lease = Lease::new(terms);
        *lease.valid_until.lock().unwrap() = Some(sent + given.saturating_sub(drift(given)));
        *lease.renewed_at.lock().unwrap() = sent.checked_sub(ttl / 3).unwrap_or(sent);
        lease
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// Greater than every earlier hold's on these names (a fenced primitive).
    pub fn fence(&self) -> Option<i64> {
        self.fence
    }

    /// The hold's value as this owner wrote it, while it knows it.
    pub(crate) fn written(&self) -> Option<Arc<str>> {
        self.written.lock().unwrap().clone()
    }

    /// A renewal (or an extend) answered `refreshed`: whether it held, and
    /// the replicas' shortfall. The hold's value is noted as the renewal
    /// left it: not known after an error, or a renewal that ran a script.
    pub(crate) fn answered(&self, refreshed: Result<Refreshed>) -> (Result<bool>, Option<Shortfall>) {
        let (held, shortfall, written) = Refreshed::split(refreshed);
        *self.written.lock().unwrap() = written;
        (held, shortfall)
    }

    /// Who the hold's renewals and release are for; `written`: its value, as
    /// `written()` gave it.
    pub(crate) fn holder<'a>(&'a self, written: Option<&'a Arc<str>>) -> Holder<'a> {
        Holder { token: &self.token, fence: self.fence, written }
    }

    /// Restored from a token, not taken by this process.
    pub fn is_restored(&self) -> bool {
        self.restored
    }

    pub fn subject(&self) -> &Arc<Subject> {
        &self.subject
    }

    /// How messages and logs name what is held.
    pub fn label(&self) -> String {
        self.subject.label()
    }

    /// Tells the holds alive at one time in this process apart.
    pub fn id(self: &Arc<Self>) -> HoldId {
        Arc::as_ptr(self) as usize as HoldId
    }

    /// How long this hold has lasted so far.
    pub fn held_for(&self) -> Duration {
        self.started.elapsed()
    }

    /// How long renewals may carry the hold from when it was taken.
    pub fn max_hold(&self) -> Option<Duration> {
        self.max_hold
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    /// The longest a renewal or extend sent now may make the hold last: `ttl`,
    /// cut to what `max_hold` leaves; `None` once nothing is left.
    pub(crate) fn renewable(&self, ttl: Duration) -> Option<Duration> {
        match self.max_hold {
            None => Some(ttl),
            Some(max_hold) => {
                let left = (self.started + max_hold).saturating_duration_since(Instant::now());
                // A ttl is whole milliseconds.
                (left >= Duration::from_millis(1)).then(|| ttl.min(left))
            }
        }
    }

    pub fn valid_until(&self) -> Option<Instant> {
        *self.valid_until.lock().unwrap()
    }

    /// When the last successful acquire, renewal or extend was sent.
    pub fn renewed_at(&self) -> Instant {
        *self.renewed_at.lock().unwrap()
    }

    /// A renewal for `ttl`, sent at `sent`, succeeded.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        self.ttl_ms.store(ttl.as_millis() as u64, Ordering::Relaxed);
        *self.renewed_at.lock().unwrap() = sent;
        *self.valid_until.lock().unwrap() = Some(sent + ttl.saturating_sub(drift(ttl)));
        *self.unacknowledged.lock().unwrap() = None;
    }

    /// A renewal reached the master but not enough replicas, so it did not
    /// count: `why` is told if the validity runs out before one does.
    pub(crate) fn renewal_unacknowledged(&self, why: String) {
        *self.unacknowledged.lock().unwrap() = Some(why);
    }

    /// Why renewals lately did not count, if the replicas are the reason.
    pub fn unacknowledged(&self) -> Option<String> {
        self.unacknowledged.lock().unwrap().clone()
    }

    /// An extend succeeded: like a renewal, and the watchdog re-plans its
    /// next renewal for the new ttl.
    pub(crate) fn extended(&self, sent: Instant, ttl: Duration) {
        self.renewed(sent, ttl);
        self.rescheduled.notify_one();
    }

    /// Resolves when an extend changed the renewal plan.
    pub(crate) async fn wait_rescheduled(&self) {
        self.rescheduled.notified().await;
    }

    /// The watchdog task now renewing this hold.
    pub(crate) fn renewed_by(&self, task: AbortHandle) {
        if let Some(earlier) = self.renewal.lock().unwrap().replace(task) {
            earlier.abort();
        }
    }

    /// Stops its watchdog: renewal never outlives the hold's handle.
    pub(crate) fn stop_renewal(&self) {
        if let Some(task) = self.renewal.lock().unwrap().take() {
            task.abort();
        }
    }

    /// The holder gave the hold up (its release is about to be sent): renewal
    /// stops, past the deadline is not "lost" any more, and `wait_ended` returns.
    pub(crate) fn mark_released(&self) {
        self.stop_renewal();
        self.released.store(true, Ordering::SeqCst);
        self.lost_notify.notify_waiters();
    }

    /// Definitely lost: reported by the watchdog or a failed extend/release.
    pub fn is_marked_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Lost: marked so, or still held past the validity deadline with no
    /// renewal to push it. Whoever sees the deadline passed first marks the
    /// loss, so `on_lost` fires even when that is the holder itself, before
    /// the watchdog's timer (and a release right after would stop it).
    pub fn is_lost(&self) -> bool {
        if self.is_marked_lost() {
            return true;
        }
        let expired =
            !self.released.load(Ordering::SeqCst) && self.valid_until().is_some_and(|t| Instant::now() >= t);
        if expired {
            match self.unacknowledged() {
                Some(why) => self.mark_lost(&format!(
                    "its validity ran out before a renewal was acknowledged by enough replicas ({why})"
                )),
                None => self.mark_lost("its validity ran out before a renewal succeeded"),
            }
        }
        expired
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.reason.lock().unwrap().clone()
    }

    /// Marks the hold lost for `why`, and tells of it (`Event::Lost`, for
    /// `cause`) if it was not lost before: a loss the watchdog reported is
    /// not told again by the release after it.
    pub(crate) fn lose(self: &Arc<Self>, cause: LossCause, why: &str) {
        let first = !self.is_marked_lost();
        self.mark_lost(why);
        if first {
            let (subject, held, hold) = (&self.subject, self.held_for(), self.id());
            events::emit(|| Event::Lost { subject, cause, held, hold });
        }
    }

    /// Marks the hold lost; the first call runs the hooks and wakes waiters.
    pub(crate) fn mark_lost(&self, reason: &str) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.reason.lock().unwrap() = Some(reason.to_string());
        let hooks = std::mem::take(&mut *self.hooks.lock().unwrap());
        for hook in hooks {
            hook(reason);
        }
        self.lost_notify.notify_waiters();
    }

    /// Runs `hook` once when the hold is lost (at once if it is already).
    pub fn on_lost(&self, hook: LostHook) {
        let mut hooks = self.hooks.lock().unwrap();
        if self.lost.load(Ordering::SeqCst) {
            drop(hooks);
            hook(&self.lost_reason().unwrap_or_default());
        } else {
            hooks.push(hook);
        }
    }

    /// Resolves when the hold ends, lost or released;
    /// returns whether it was lost.
    pub async fn wait_ended(&self) -> bool {
        loop {
            let notified = self.lost_notify.notified();
            if self.lost.load(Ordering::SeqCst) || self.released.load(Ordering::SeqCst) {
                return self.is_marked_lost();
            }
            notified.await;
        }
    }
}
