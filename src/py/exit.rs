//! Interpreter exit: from `atexit` on, nothing calls into Python, and a
//! thread that would take the GIL back into a finalizing interpreter parks
//! instead (docs/design.md, "Interpreter exit").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;

use crate::support::per_process::PerProcess;

/// Set once the interpreter is exiting: no callback into Python after that.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether the interpreter is exiting (no more calls into Python).
pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::SeqCst)
}

/// Registered with ``atexit``: stop calling into the exiting interpreter.
///
/// From then on, losses and log records are not reported into an interpreter
/// that is finalizing (holds simply expire). Blocking threads already on
/// their way into Python (a callback) are let finish first, for at most a
/// second: a thread that takes the GIL once finalization has begun is torn
/// down by Python, which aborts the process.
#[pyfunction]
pub(crate) fn _at_exit(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    // Threads that saw no exit yet and are taking the GIL back get it first.
    py.detach(|| {
        let until = std::time::Instant::now() + EXIT_GRACE;
        while RETURNING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    log::set_max_level(log::LevelFilter::Off);
    let in_flight = IN_FLIGHT.get(Arc::default);
    py.detach(|| {
        let count = in_flight.count.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(in_flight.done.wait_timeout_while(count, EXIT_GRACE, |n| *n > 0));
    });
}

/// Threads between finding the interpreter not exiting and holding the GIL
/// again; `_at_exit` waits for them.
static RETURNING: AtomicUsize = AtomicUsize::new(0);

/// `py.detach(f)`, except that a thread that finishes `f` once the
/// interpreter is exiting never takes the GIL back: it parks until the
/// process ends. Only daemon threads are left by then (Python joins the
/// others before `atexit`), and one taking the GIL during finalization is
/// ended by CPython with `pthread_exit`, which unwinds through these Rust
/// frames and crashes the process (SIGSEGV at exit).
pub(crate) fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    let value = py.detach(|| {
        let value = f();
        RETURNING.fetch_add(1, Ordering::SeqCst);
        if EXITING.load(Ordering::SeqCst) {
            RETURNING.fetch_sub(1, Ordering::SeqCst);
            loop {
                std::thread::park();
            }
        }
        value
    });
    RETURNING.fetch_sub(1, Ordering::SeqCst);
    value
}

/// How long interpreter exit waits for blocking threads that call into Python.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Blocking tasks that may call into Python, counted per process (a forked
/// child starts from none: its parent's threads do not exist there).
static IN_FLIGHT: PerProcess<Arc<Counted>> = PerProcess::new();

#[derive(Default)]
struct Counted {
    count: Mutex<usize>,
    done: std::sync::Condvar,
}

/// One such task, from when it is spawned until it has finished: interpreter
/// exit waits for it. A thread of its own that calls into Python (the log
/// forwarder, the listeners' thread) enters one before it checks `exiting()`
/// and holds it while in Python.
pub(crate) struct InFlight(Arc<Counted>);

impl InFlight {
    pub(crate) fn enter() -> InFlight {
        let counted = IN_FLIGHT.get(Arc::default);
        *counted.count.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        InFlight(counted)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut count = self.0.count.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *count -= 1;
        if *count == 0 {
            self.0.done.notify_all();
        }
    }
}
