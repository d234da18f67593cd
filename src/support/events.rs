//! What happens to this process's locks, for whoever observes it: each
//! acquire's end (outcome, wait), release (time held), loss (cause), renewal
//! (latency) and wake-up of a waiter (pub/sub, hand-over, poll).
//!
//! Nobody observes by default: then every emission point costs one relaxed
//! atomic load, and nothing is measured or allocated. Observers are called
//! on the thread where the event happens (often a runtime worker), so they
//! must return at once: queue the event, never block on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The lock an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub names: Vec<String>,
    /// `"lock"`, `"read"` or `"write"`.
    pub kind: &'static str,
    pub fair: bool,
}

impl Subject {
    /// `lock "a, b"`: how messages and logs name what is held.
    pub fn label(&self) -> String {
        format!("lock {:?}", self.names.join(", "))
    }
}

/// How an acquire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Acquired,
    /// Its deadline passed.
    TimedOut,
    /// A single attempt found it busy, or the retry strategy gave up.
    NotAcquired,
    Error,
    /// Its future was dropped (a cancelled task, Ctrl-C).
    Cancelled,
}

/// Why a hold was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossCause {
    /// Its ttl ran out without renewal (auto_renew off).
    Expired,
    /// Redis no longer had it when renewing, extending or releasing: it
    /// expired there or was taken over (force_release, a failover).
    TakenOver,
    /// Redis could not be reached until its validity ran out.
    Unreachable,
    /// Its renewals were not acknowledged by enough replicas (policy "fail")
    /// until its validity ran out.
    Unreplicated,
}

/// Which step of a hold the replicas did not acknowledge in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaStep {
    Acquire,
    Renewal,
    Extend,
}

impl ReplicaStep {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaStep::Acquire => "acquire",
            ReplicaStep::Renewal => "renewal",
            ReplicaStep::Extend => "extend",
        }
    }
}

/// What woke a waiter for its next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// A release was announced on the lock's channel.
    PubSub,
    /// A fair release handed the lock straight to this waiter.
    HandOver,
    /// No message: its retry delay ran out, or the subscription it waited
    /// on dropped (a failover, a lost connection), so it tries again and
    /// subscribes anew.
    Poll,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::TimedOut => "timed_out",
            Outcome::NotAcquired => "not_acquired",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

impl LossCause {
    pub fn as_str(self) -> &'static str {
        match self {
            LossCause::Expired => "expired",
            LossCause::TakenOver => "taken_over",
            LossCause::Unreachable => "unreachable",
            LossCause::Unreplicated => "unreplicated",
        }
    }
}

impl Wakeup {
    pub fn as_str(self) -> &'static str {
        match self {
            Wakeup::PubSub => "pubsub",
            Wakeup::HandOver => "handover",
            Wakeup::Poll => "poll",
        }
    }
}

/// Tells the holds alive at one time in this process apart (the same hold
/// is named the same in its acquire, renewals, release or loss).
pub type HoldId = u64;

#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    Acquire {
        subject: &'a Arc<Subject>,
        outcome: Outcome,
        wait: Duration,
        blocking: bool,
        hold: Option<HoldId>,
    },
    Release {
        subject: &'a Arc<Subject>,
        held: Duration,
        hold: HoldId,
    },
    Lost {
        subject: &'a Arc<Subject>,
        cause: LossCause,
        held: Duration,
        hold: HoldId,
    },
    Renewed {
        subject: &'a Arc<Subject>,
        latency: Duration,
        hold: HoldId,
    },
    Woken {
        subject: &'a Arc<Subject>,
        wakeup: Wakeup,
    },
    /// Fewer replicas than asked acknowledged a step in time, whatever the
    /// policy then did with it (`kept`: it counted, as "warn" has it).
    Unreplicated {
        subject: &'a Arc<Subject>,
        step: ReplicaStep,
        kept: bool,
        hold: Option<HoldId>,
    },
}

impl Event<'_> {
    pub fn subject(&self) -> &Arc<Subject> {
        match self {
            Event::Acquire { subject, .. }
            | Event::Release { subject, .. }
            | Event::Lost { subject, .. }
            | Event::Renewed { subject, .. }
            | Event::Woken { subject, .. }
            | Event::Unreplicated { subject, .. } => subject,
        }
    }
}

pub trait Observer: Send + Sync {
    fn notify(&self, event: &Event<'_>);
}

static ON: AtomicBool = AtomicBool::new(false);
static OBSERVERS: RwLock<Vec<Arc<dyn Observer>>> = RwLock::new(Vec::new());

/// Starts telling `observer` of every event of this process.
pub fn observe(observer: Arc<dyn Observer>) {
    let mut all = OBSERVERS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.push(observer);
    ON.store(true, Ordering::Relaxed);
}

/// Stops telling `observer` (the same `Arc`); when nobody is left, emitting
/// costs one atomic load again.
pub fn unobserve(observer: &Arc<dyn Observer>) {
    let mut all = OBSERVERS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.retain(|o| !Arc::ptr_eq(o, observer));
    ON.store(!all.is_empty(), Ordering::Relaxed);
}

/// Whether anyone observes: the one load an unobserved emission costs.
#[inline]
pub fn observed() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Tells every observer the event `make` builds, if anyone observes.
#[inline]
pub(crate) fn emit<'a>(make: impl FnOnce() -> Event<'a>) {
    if observed() {
        notify_all(&make());
    }
}

#[cold]
fn notify_all(event: &Event<'_>) {
    let all = OBSERVERS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    for o in all.iter() {
        o.notify(event);
    }
}

/// Measures one acquire: told how it ended, or, dropped unfinished (the
/// acquire's future was dropped), reports it cancelled.
pub(crate) struct AcquireProbe<'a> {
    subject: &'a Arc<Subject>,
    started: Instant,
    blocking: bool,
    finished: bool,
}

impl<'a> AcquireProbe<'a> {
    pub(crate) fn start(subject: &'a Arc<Subject>, blocking: bool) -> Self {
        AcquireProbe { subject, started: Instant::now(), blocking, finished: false }
    }

    pub(crate) fn finish(mut self, outcome: Outcome, hold: Option<HoldId>) {
        self.finished = true;
        self.report(outcome, hold);
    }

    fn report(&self, outcome: Outcome, hold: Option<HoldId>) {
        let (subject, wait, blocking) = (self.subject, self.started.elapsed(), self.blocking);
        emit(|| Event::Acquire { subject, outcome, wait, blocking, hold });
    }
}

impl Drop for AcquireProbe<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.report(Outcome::Cancelled, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Seen(Mutex<Vec<String>>);

    impl Observer for Seen {
        fn notify(&self, event: &Event<'_>) {
            self.0.lock().unwrap().push(format!("{event:?}"));
        }
    }

    #[test]
    fn observers_come_and_go() {
        let subject = Arc::new(Subject { names: vec!["n".into()], kind: "lock", fair: false });
        let wakeup = || Event::Woken { subject: &subject, wakeup: Wakeup::Poll };
        assert!(!observed());
        emit(|| unreachable!("nobody observes: the event is never built"));
        let seen = Arc::new(Seen(Mutex::default()));
        let observer: Arc<dyn Observer> = seen.clone();
        observe(observer.clone());
        emit(wakeup);
        AcquireProbe::start(&subject, true).finish(Outcome::TimedOut, None);
        drop(AcquireProbe::start(&subject, false));
        unobserve(&observer);
        emit(wakeup);
        assert!(!observed());
        let seen = seen.0.lock().unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen[0].contains("Poll"));
        assert!(seen[1].contains("TimedOut") && seen[1].contains("blocking: true"));
        assert!(seen[2].contains("Cancelled"));
    }
}
