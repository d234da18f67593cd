//! Clean-ups that outlive their caller: the undo of an interrupted acquire,
//! the unsubscribe of a waiter that left. They are counted, so a caller that
//! must not return before Redis is clean (an acquire cut short by Ctrl-C) can
//! wait for them.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::Notify;

pub(crate) struct Cleanups {
    running: AtomicUsize,
    done: Notify,
    /// The runtime this process's connections live on, for a clean-up
    /// started from a thread outside it (a future dropped by Python).
    runtime: Option<Handle>,
}

impl Cleanups {
    pub(crate) fn new() -> Arc<Cleanups> {
        Arc::new(Cleanups {
            running: AtomicUsize::new(0),
            done: Notify::new(),
            runtime: Handle::try_current().ok(),
        })
    }

    /// Runs `fut` detached from its caller, counted until it ends.
    pub(crate) fn spawn<F>(self: &Arc<Self>, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(rt) = Handle::try_current().ok().or_else(|| self.runtime.clone()) else {
            log::warn!("no runtime to run a lock clean-up on; what it would undo expires after its ttl");
            return;
        };
        self.running.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        rt.spawn(async move {
            fut.await;
            if me.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                me.done.notify_waiters();
            }
        });
    }

    /// Resolves once no clean-up is running.
    pub(crate) async fn settle(&self) {
        loop {
            let done = self.done.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }
}
