//! A waiter's places in line across the servers it waits on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use super::{Handed, Registration, Waiter};

/// A waiter's places in line on each server it waits on: one, or the
/// masters of a quorum, where a release is published on each and the first
/// wake-up to arrive counts. A quorum's waiter starts with a majority's; a
/// master that subscribes later joins (`Joiner`).
pub(crate) struct Waits {
    parts: Arc<Mutex<Vec<Registration>>>,
    /// Told when a part joins, so that `woken` waits on it too.
    joined: Arc<Notify>,
}

/// Where a registration that finished late joins its waiter's `Waits`; when
/// the waiter is gone, it is dropped (and leaves the line).
pub(crate) struct Joiner {
    parts: Weak<Mutex<Vec<Registration>>>,
    joined: Arc<Notify>,
}

impl Joiner {
    pub(crate) fn join(&self, part: Registration) {
        let Some(parts) = self.parts.upgrade() else { return };
        parts.lock().unwrap().push(part);
        self.joined.notify_one();
    }
}

impl Waits {
    pub(crate) fn new(parts: Vec<Registration>) -> Waits {
        Waits { parts: Arc::new(Mutex::new(parts)), joined: Arc::default() }
    }

    pub(crate) fn joiner(&self) -> Joiner {
        Joiner { parts: Arc::downgrade(&self.parts), joined: self.joined.clone() }
    }

    /// Until woken on any server (or forever: callers bound it with their
    /// own timer). Whether a message woke it: false when the subscription
    /// it waited on there dropped (which wakes its waiters to retry and
    /// subscribe anew, and is marked dropped before it does).
    pub(crate) async fn woken(&self) -> bool {
        loop {
            let parts: Vec<(Arc<Waiter>, Arc<AtomicBool>)> =
                self.parts.lock().unwrap().iter().map(|p| (p.waiter.clone(), p.alive.clone())).collect();
            let each = parts.iter().map(|(w, _)| Box::pin(w.notify.notified()));
            tokio::select! {
                ((), i, _) = futures_util::future::select_all(each) => return parts[i].1.load(Ordering::SeqCst),
                () = self.joined.notified() => {}
            }
        }
    }

    pub(crate) fn take_handed(&self) -> Option<Handed> {
        self.parts.lock().unwrap().iter().find_map(Registration::take_handed)
    }

    pub(crate) fn rearm(&self) {
        for p in self.parts.lock().unwrap().iter() {
            p.rearm();
        }
    }

    /// Every subscription it relied on dropped: register again.
    pub(crate) fn stale(&self) -> bool {
        self.parts.lock().unwrap().iter().all(Registration::stale)
    }

    pub(crate) fn done(self) {
        for p in std::mem::take(&mut *self.parts.lock().unwrap()) {
            p.done();
        }
    }
}
