//! Clean-ups that outlive their caller: the undo of an interrupted acquire,
//! the unsubscribe of a waiter that left. They are counted, so a caller that
//! must not return before Redis is clean (an acquire cut short by Ctrl-C) can
//! wait for them, and so can an operation cancelled from Python for the
//! clean-ups its own future started when dropped ([`Tracked`]).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::Notify;

tokio::task_local! {
    /// Where the clean-ups started inside [`Tracked::around`] are counted too.
    static TRACKED: Arc<Tracked>;
}

/// A count of clean-ups running, and a wake-up when it falls to none: a
/// process's ([`Cleanups`]), or those one piece of code started (dropping a
/// cancelled operation's future: the undo of its acquire, its waiter's
/// unsubscribe), counted apart from the rest of the process's.
#[derive(Default)]
pub(crate) struct Tracked {
    running: AtomicUsize,
    done: Notify,
}

impl Tracked {
    /// Runs `f`, counting here the clean-ups it starts.
    // Used by the Python bindings' coroutines (`py::coro`).
    #[cfg_attr(not(feature = "python"), expect(dead_code))]
    pub(crate) fn around<R>(f: impl FnOnce() -> R) -> (R, Arc<Tracked>) {
        let tracked = Arc::new(Tracked::default());
        let result = TRACKED.sync_scope(tracked.clone(), f);
        (result, tracked)
    }

    /// Resolves once every clean-up counted here has ended.
    pub(crate) async fn settle(&self) {
        loop {
            let done = self.done.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }

    fn started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    fn ended(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.done.notify_waiters();
        }
    }
}

pub(crate) struct Cleanups {
    all: Tracked,
    /// The runtime this process's connections live on, for a clean-up
    /// started from a thread outside it (a future dropped by Python).
    runtime: Option<Handle>,
}

impl Cleanups {
    pub(crate) fn new() -> Arc<Cleanups> {
        Arc::new(Cleanups { all: Tracked::default(), runtime: Handle::try_current().ok() })
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
        self.all.started();
        let tracked = TRACKED.try_with(Arc::clone).ok();
        if let Some(t) = &tracked {
            t.started();
        }
        let me = self.clone();
        rt.spawn(async move {
            fut.await;
            me.all.ended();
            if let Some(t) = tracked {
                t.ended();
            }
        });
    }

    /// Resolves once no clean-up is running.
    pub(crate) async fn settle(&self) {
        self.all.settle().await;
    }
}
