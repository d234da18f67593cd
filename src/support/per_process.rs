//! A value per process, rebuilt after fork: what one process's threads share
//! (the tokio runtime, a client's connections, counters, the queue of a
//! forwarding thread) and a forked child must not, since the threads, tasks
//! and sockets behind it are its parent's. The Rust side of
//! `python/ferrolock/_per_process.py`.
//!
//! After a fork, the child's first use builds its own value, and the
//! parent's is **forgotten**: never used, and never dropped, in the child.
//! Dropping it there would run the parent's clean-up in a process that has
//! only a copy of its memory: shutting down a tokio runtime waits for worker
//! threads that do not exist in the child; dropping a connection, a channel's
//! last sender or a lease can take a lock a thread of the parent held at the
//! fork (held forever in the child), or act on sockets the child shares with
//! its parent. What the parent's value owns is leaked, once per value and
//! fork (its memory, and descriptors the child inherited anyway).
//!
//! Finding this process's value takes no lock (an atomic load, and
//! `pid::current`), so a fork while a thread of the parent was building or
//! using one cannot leave the child waiting. Each process builds its value
//! once: threads of one process asking together wait for the one building
//! (a cell of that process's own, which a child never shares).

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;

pub(crate) struct PerProcess<T> {
    slot: ArcSwapOption<Slot<T>>,
}

/// One process's value, built once.
struct Slot<T> {
    pid: u32,
    value: OnceLock<T>,
}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        PerProcess::new()
    }
}

impl<T> PerProcess<T> {
    /// None yet: each process's first use builds its own.
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess { slot: ArcSwapOption::const_empty() }
    }

    /// `value` as this process's (a forked child still builds its own).
    pub(crate) fn holding(value: T) -> PerProcess<T> {
        let slot = Slot { pid: crate::support::pid::current(), value: OnceLock::from(value) };
        PerProcess { slot: ArcSwapOption::from_pointee(slot) }
    }

    /// This process's slot, put in place (the parent's forgotten) if missing.
    fn slot(&self) -> Arc<Slot<T>> {
        let pid = crate::support::pid::current();
        loop {
            let current = self.slot.load_full();
            if let Some(slot) = current.as_ref().filter(|s| s.pid == pid) {
                return slot.clone();
            }
            let fresh = Some(Arc::new(Slot { pid, value: OnceLock::new() }));
            let previous = self.slot.compare_and_swap(&current, fresh);
            if same(previous.as_ref(), current.as_ref()) {
                forget_unless_ours(current, pid);
            }
        }
    }

    /// Calls `f` with this process's value, built by `build` if it has none.
    pub(crate) fn with<R>(&self, build: impl FnOnce() -> T, f: impl FnOnce(&T) -> R) -> R {
        f(self.slot().value.get_or_init(build))
    }

    /// This process's value, built by `build` if it has none.
    pub(crate) fn get(&self, build: impl FnOnce() -> T) -> T
    where
        T: Clone,
    {
        self.with(build, T::clone)
    }

    /// Like `get`, for a `build` that may fail: its error leaves none, for
    /// the next call. Two threads of a process building together may both
    /// build; one value is kept, the other dropped (it is this process's).
    #[cfg_attr(all(not(feature = "python"), not(test)), expect(dead_code, reason = "used by the bindings"))]
    pub(crate) fn try_get<E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        T: Clone,
    {
        let slot = self.slot();
        if let Some(value) = slot.value.get() {
            return Ok(value.clone());
        }
        let built = build()?;
        Ok(slot.value.get_or_init(|| built).clone())
    }

    /// This process's value, if it has built one.
    #[cfg_attr(all(not(feature = "python"), not(test)), expect(dead_code, reason = "used by the bindings"))]
    pub(crate) fn built(&self) -> Option<T>
    where
        T: Clone,
    {
        let current = self.slot.load();
        current
            .as_ref()
            .filter(|s| s.pid == crate::support::pid::current())
            .and_then(|s| s.value.get().cloned())
    }

    /// Takes this process's value out (the next use builds a new one).
    pub(crate) fn take(&self) -> Option<T>
    where
        T: Clone,
    {
        let pid = crate::support::pid::current();
        let slot = self.slot.swap(None)?;
        if slot.pid != pid {
            forget_unless_ours(Some(slot), pid);
            return None;
        }
        slot.value.get().cloned()
    }
}

impl<T> Drop for PerProcess<T> {
    /// Drops this process's value; a parent's, never used here, is forgotten.
    fn drop(&mut self) {
        forget_unless_ours(self.slot.swap(None), crate::support::pid::current());
    }
}

fn same<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Drops a slot taken out of its place if it is this process's; forgets a
/// parent's (see the module's comment).
fn forget_unless_ours<T>(slot: Option<Arc<Slot<T>>>, pid: u32) {
    if let Some(slot) = slot {
        if slot.pid != pid {
            std::mem::forget(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn built_once_per_process_and_kept() {
        let builds = AtomicUsize::new(0);
        let values: PerProcess<Arc<u32>> = PerProcess::new();
        assert_eq!(values.built(), None);
        let build = || {
            builds.fetch_add(1, Ordering::SeqCst);
            Arc::new(7)
        };
        let first = values.get(build);
        assert!(Arc::ptr_eq(&first, &values.get(build)));
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert_eq!(values.try_get(|| Err::<Arc<u32>, ()>(())), Ok(first.clone()));
        assert_eq!(values.take(), Some(first));
        assert_eq!(values.built(), None);
        assert_eq!(*values.get(|| Arc::new(8)), 8);
    }

    #[test]
    fn a_failed_build_leaves_none() {
        let values: PerProcess<u32> = PerProcess::new();
        assert_eq!(values.try_get(|| Err("no")), Err("no"));
        assert_eq!(values.built(), None);
        assert_eq!(values.try_get(|| Ok::<_, &str>(3)), Ok(3));
        assert_eq!(PerProcess::holding(5).get(|| 6), 5);
    }

    /// Counts the drops of the values it marks.
    static DROPPED: AtomicUsize = AtomicUsize::new(0);

    struct Marked(u32);

    impl Drop for Marked {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Runs `child` in a forked child (killed if it runs over 10 s) and
    /// returns its exit code.
    fn in_child(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child only runs `child`, then leaves with `_exit`; the
        // alarm ends a child that hangs.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            unsafe { libc::alarm(10) };
            let code = child();
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child did not exit (status {status}): it hung");
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn a_forked_child_builds_its_own_and_forgets_the_parents() {
        let values: PerProcess<Arc<Marked>> = PerProcess::new();
        let parents = values.get(|| Arc::new(Marked(1)));
        let code = in_child(|| {
            let before = DROPPED.load(Ordering::SeqCst);
            let ours = values.get(|| Arc::new(Marked(2)));
            let dropped = DROPPED.load(Ordering::SeqCst) - before;
            i32::from(ours.0 == 2) + 2 * i32::from(dropped == 0) + 4 * i32::from(values.take().is_some())
        });
        assert_eq!(code, 7, "1: the child's own value, 2: the parent's not dropped, 4: taken");
        assert!(Arc::ptr_eq(&parents, &values.get(|| Arc::new(Marked(3)))), "the parent keeps its own");
    }

    #[test]
    fn a_fork_while_a_parents_thread_builds_does_not_hold_up_the_child() {
        let values: Arc<PerProcess<u32>> = Arc::new(PerProcess::new());
        let (building_tx, building) = mpsc::channel();
        let (finish, finish_rx) = mpsc::channel::<()>();
        let builder = std::thread::spawn({
            let values = values.clone();
            move || {
                values.get(|| {
                    building_tx.send(()).unwrap();
                    finish_rx.recv().unwrap();
                    1
                })
            }
        });
        building.recv().unwrap();
        // The parent's cell is being built (and its once-cell held) at the fork.
        let code = in_child(|| i32::from(values.get(|| 2) == 2));
        assert_eq!(code, 1);
        finish.send(()).unwrap();
        assert_eq!(builder.join().unwrap(), 1);
        assert_eq!(values.get(|| 3), 1);
    }
}
