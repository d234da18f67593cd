//! Counters of this process (for diagnostics and tests): live watchdog
//! tasks, registered waiters, renewals made. A forked child starts from zero: its
//! parent's tasks and waiters never run there.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::per_process::PerProcess;

pub(crate) struct ProcessCounter(PerProcess<AtomicUsize>);

impl ProcessCounter {
    pub(crate) const fn new() -> ProcessCounter {
        ProcessCounter(PerProcess::new())
    }

    fn with<R>(&self, f: impl FnOnce(&AtomicUsize) -> R) -> R {
        self.0.with(AtomicUsize::default, f)
    }

    pub(crate) fn add(&self) {
        self.with(|n| n.fetch_add(1, Ordering::Relaxed));
    }

    pub(crate) fn sub(&self) {
        self.with(|n| {
            let _ = n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(1)));
        });
    }

    pub(crate) fn get(&self) -> usize {
        self.with(|n| n.load(Ordering::Relaxed))
    }
}

pub(crate) static WATCHDOGS: ProcessCounter = ProcessCounter::new();
pub(crate) static WAITERS: ProcessCounter = ProcessCounter::new();
pub(crate) static RENEWALS: ProcessCounter = ProcessCounter::new();

/// Watchdog tasks alive in this process.
pub fn live_watchdogs() -> usize {
    WATCHDOGS.get()
}

/// Renewals the watchdogs of this process made so far (those that counted).
pub fn renewals() -> usize {
    RENEWALS.get()
}

/// Acquires of this process waiting for a wake-up now.
pub fn waiters() -> usize {
    WAITERS.get()
}
