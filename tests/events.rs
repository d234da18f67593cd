//! The events of the core (its own test binary: observers are process-wide),
//! each test watching lock names of its own.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client, lock, quick};
use ferrolock::events::{self, Event, Observer};
use ferrolock::{Backoff, LockOptions, Retry, Wait};
use tokio::sync::Notify;

fn fixed(ms: u64, attempts: Option<u32>) -> Retry {
    Retry { backoff: Backoff::Fixed(Duration::from_millis(ms)), attempts }
}

/// Records the events of locks named `name`, as short strings.
struct Recorder {
    name: String,
    seen: Mutex<Vec<String>>,
    changed: Notify,
}

impl Observer for Recorder {
    fn notify(&self, event: &Event<'_>) {
        if event.subject().names != [self.name.clone()] {
            return;
        }
        let line = match event {
            Event::Acquire { outcome, blocking, hold, .. } => {
                format!("acquire {} blocking={blocking} hold={}", outcome.as_str(), hold.is_some())
            }
            Event::Release { .. } => "release".into(),
            Event::Lost { cause, .. } => format!("lost {}", cause.as_str()),
            Event::Renewed { .. } => "renewed".into(),
            Event::Woken { wakeup, .. } => format!("woken {}", wakeup.as_str()),
            Event::Unreplicated { step, kept, .. } => format!("unreplicated {} kept={kept}", step.as_str()),
        };
        self.seen.lock().unwrap().push(line);
        self.changed.notify_waiters();
    }
}

impl Recorder {
    fn start(name: &str) -> (Arc<Recorder>, Arc<dyn Observer>) {
        let r = Arc::new(Recorder { name: name.into(), seen: Mutex::default(), changed: Notify::new() });
        let o: Arc<dyn Observer> = r.clone();
        events::observe(o.clone());
        (r, o)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Until an event `line` is seen.
    async fn wait_for(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let changed = self.changed.notified();
            if self.seen().iter().any(|l| l == line) {
                return;
            }
            assert!(
                tokio::time::timeout_at(deadline.into(), changed).await.is_ok(),
                "no {line:?} in {:?}",
                self.seen()
            );
        }
    }
}

#[tokio::test]
async fn acquire_outcomes_release_and_renewal() {
    let (rec, o) = Recorder::start("ev:outcomes");
    let c = client().await;
    let a = lock(&c, "ev:outcomes", quick(300));
    assert!(a.acquire(Wait::No).await.unwrap());
    let b = lock(&c, "ev:outcomes", quick(300));
    assert!(!b.acquire(Wait::No).await.unwrap());
    let soon = Instant::now() + Duration::from_millis(30);
    assert!(!b.acquire(Wait::Until(soon)).await.unwrap());
    let gives_up = lock(&c, "ev:outcomes", LockOptions { retry: fixed(1, Some(2)), ..quick(300) });
    assert!(!gives_up.acquire(Wait::Forever).await.unwrap());
    let cancelled = tokio::time::timeout(Duration::from_millis(20), b.acquire(Wait::Forever)).await;
    assert!(cancelled.is_err());
    rec.wait_for("renewed").await;
    a.release().await.unwrap();
    let seen = rec.seen();
    let acquires: Vec<&String> = seen.iter().filter(|l| l.starts_with("acquire")).collect();
    assert_eq!(
        acquires,
        [
            "acquire acquired blocking=false hold=true",
            "acquire not_acquired blocking=false hold=false",
            "acquire timed_out blocking=true hold=false",
            "acquire not_acquired blocking=true hold=false",
            "acquire cancelled blocking=true hold=false",
        ]
    );
    assert_eq!(seen.last().unwrap(), "release");
    events::unobserve(&o);
}

#[tokio::test]
async fn losses_by_cause_and_wakeups_by_kind() {
    let (rec, o) = Recorder::start("ev:losses");
    let c = client().await;
    let expiring = lock(&c, "ev:losses", LockOptions { auto_renew: false, ..quick(50) });
    assert!(expiring.acquire(Wait::No).await.unwrap());
    rec.wait_for("lost expired").await;
    let _ = expiring.release().await;
    assert_eq!(rec.seen().iter().filter(|l| l.starts_with("lost")).count(), 1, "a loss is told once");

    let held = lock(&c, "ev:losses", quick(300));
    assert!(held.acquire(Wait::No).await.unwrap());
    let waiter = lock(&c, "ev:losses", LockOptions { retry: fixed(200, None), ..quick(300) });
    let waiting = tokio::spawn(async move { waiter.acquire(Wait::Forever).await });
    // Once it polled, the waiter is subscribed and waits 200 ms for its next
    // poll: a release now wakes it by pub/sub long before.
    rec.wait_for("woken poll").await;
    assert!(c.force_release("ev:losses", None).await.unwrap());
    assert!(waiting.await.unwrap().unwrap());
    rec.wait_for("lost taken_over").await;
    assert!(rec.seen().contains(&"woken pubsub".to_string()), "{:?}", rec.seen());
    events::unobserve(&o);
}

#[tokio::test]
async fn a_fair_hand_over_is_its_own_kind_of_wakeup() {
    let (rec, o) = Recorder::start("ev:fair");
    let c = client().await;
    let fair = LockOptions { fair: true, ..quick(5000) };
    let head = lock(&c, "ev:fair", fair.clone());
    assert!(head.acquire(Wait::No).await.unwrap());
    let next = Arc::new(lock(&c, "ev:fair", fair));
    let waiting = {
        let next = next.clone();
        tokio::spawn(async move { next.acquire(Wait::Forever).await })
    };
    let keys = c.keys().fair("ev:fair");
    common::wait_for_zcard(&[&keys.queue], 1).await;
    // Released only once the waiter made its second attempt: its first
    // pause subscribes and returns at once, so a release before the second
    // attempt is found by that attempt, not handed over to a pause.
    common::wait_for_attempt(&keys.tags, 2).await;
    head.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert!(rec.seen().contains(&"woken handover".to_string()), "{:?}", rec.seen());
    next.release().await.unwrap();
    events::unobserve(&o);
}
