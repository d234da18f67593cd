//! This process's id, without a system call each time: per-process state
//! (connections, holds, the runtime) checks it on every operation, and
//! `getpid` is not cached by the C library. A fork's child forgets the cached
//! value (a `pthread_atfork` handler) and reads its own on first use.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

static PID: AtomicU32 = AtomicU32::new(0);
static AT_FORK: Once = Once::new();

extern "C" fn forget_in_child() {
    PID.store(0, Ordering::Relaxed);
}

/// The id of the calling process (`std::process::id()`).
pub(crate) fn current() -> u32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    let mut registered = 0;
    AT_FORK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic, which is
        // async-signal-safe and so allowed in a forked child.
        registered = unsafe { libc::pthread_atfork(None, None, Some(forget_in_child)) };
    });
    if registered != 0 {
        // Outside `call_once`: the logger asks for the process id too.
        log::warn!("pthread_atfork failed ({registered}): the process id is read each time");
    }
    let pid = std::process::id();
    if PID.load(Ordering::Relaxed) == 0 && AT_FORK.is_completed() {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_the_process_id() {
        assert_eq!(super::current(), std::process::id());
        assert_eq!(super::current(), std::process::id());
    }
}
