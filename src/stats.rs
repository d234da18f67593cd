//! Counters of this process (for diagnostics and tests): live watchdog
//! tasks, registered waiters. A forked child starts from zero: its
//! parent's tasks and waiters never run there.

use std::sync::Mutex;

pub(crate) struct ProcessCounter(Mutex<(u32, usize)>);

impl ProcessCounter {
    pub(crate) const fn new() -> ProcessCounter {
        ProcessCounter(Mutex::new((0, 0)))
    }

    fn with<R>(&self, f: impl FnOnce(&mut usize) -> R) -> R {
        let mut slot = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let pid = crate::pid::current();
        if slot.0 != pid {
            *slot = (pid, 0);
        }
        f(&mut slot.1)
    }

    pub(crate) fn add(&self) {
        self.with(|n| *n += 1);
    }

    pub(crate) fn sub(&self) {
        self.with(|n| *n = n.saturating_sub(1));
    }

    pub(crate) fn get(&self) -> usize {
        self.with(|n| *n)
    }
}

pub(crate) static WATCHDOGS: ProcessCounter = ProcessCounter::new();
pub(crate) static WAITERS: ProcessCounter = ProcessCounter::new();

/// Watchdog tasks alive in this process.
pub fn live_watchdogs() -> usize {
    WATCHDOGS.get()
}

/// Acquires of this process waiting for a wake-up now.
pub fn waiters() -> usize {
    WAITERS.get()
}
