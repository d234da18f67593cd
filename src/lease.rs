//! What one hold knows about itself: until when it is surely valid (a local
//! monotonic deadline), and whether it has been lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Called once, with the reason, when a hold is lost.
pub type LostHook = Box<dyn FnOnce(&str) + Send>;

/// The safety margin taken off every validity window: clocks of the client
/// and the server may run at slightly different rates.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

pub struct Lease {
    /// When the hold began (its acquire was sent), for the time it was held.
    started: Instant,
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
}

impl Lease {
    /// A hold whose acquire was sent at `sent` (`None`: restored from a token,
    /// its expiry unknown until the next renewal).
    pub(crate) fn new(sent: Option<Instant>, ttl: Duration) -> Lease {
        Lease {
            started: sent.unwrap_or_else(Instant::now),
            ttl_ms: AtomicU64::new(ttl.as_millis() as u64),
            valid_until: Mutex::new(sent.map(|t| t + ttl.saturating_sub(drift(ttl)))),
            renewed_at: Mutex::new(sent.unwrap_or_else(Instant::now)),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            reason: Mutex::new(None),
            unacknowledged: Mutex::new(None),
            hooks: Mutex::new(Vec::new()),
            lost_notify: Notify::new(),
            rescheduled: Notify::new(),
        }
    }

    /// A hold a fair release handed over: valid for `given` from `sent` (an
    /// instant before the release ran), renewed to `ttl` at once.
    pub(crate) fn handed(sent: Instant, ttl: Duration, given: Duration) -> Lease {
        let lease = Lease::new(Some(sent), ttl);
        *lease.valid_until.lock().unwrap() = Some(sent + given.saturating_sub(drift(given)));
        *lease.renewed_at.lock().unwrap() = sent.checked_sub(ttl / 3).unwrap_or(sent);
        lease
    }

    /// How long this hold has lasted so far.
    pub fn held_for(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
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

    /// The holder gave the hold up (its release is being sent): past the
    /// deadline is not "lost" any more, and `wait_ended` returns.
    pub(crate) fn mark_released(&self) {
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
