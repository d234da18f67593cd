//! PyO3 bindings: the only code that knows about Python.

pub(crate) mod args;
pub(crate) mod client;
mod compat;
pub(crate) mod coro;
pub(crate) mod election;
pub(crate) mod errors;
pub(crate) mod events;
pub(crate) mod exit;
mod green;
pub(crate) mod lock;
pub(crate) mod logging;
pub(crate) mod options;
pub(crate) mod retry;
pub(crate) mod runtime;
pub(crate) mod rwmutex;
pub(crate) mod semaphore;
mod state;
mod task;

use pyo3::prelude::*;

/// The native core of ferrolock: import these names from :mod:`ferrolock`,
/// which re-exports them (its ``Client`` adds ``synchronized``, ``lock``,
/// ``multi_lock`` and ``rwmutex``).
///
/// Conventions that hold throughout:
///
/// * Durations are seconds, as ``int`` or ``float`` (``bool`` is refused with
///   ``TypeError``, NaN with ``ValueError``).
/// * Lock names are ``str`` (non-empty, at most 4096 UTF-8 bytes).
/// * Every method that talks to Redis releases the GIL while it waits, so other
///   Python threads run meanwhile. Blocking ``Lock.acquire`` and ``with lock:``
///   also wake every 50 ms to check for signals: Ctrl-C raises
///   ``KeyboardInterrupt`` there and leaves no lock behind. Other synchronous
///   calls are not interruptible but are bounded by the client's
///   ``connect_timeout`` and ``command_timeout``.
/// * Once gevent or eventlet has monkey-patched the process, every blocking
///   call waits in the hub instead, so other greenlets keep running; killing
///   the waiting greenlet (``kill()``, a ``Timeout``) undoes what an acquire
///   did in Redis, as Ctrl-C does.
/// * The ``a``-prefixed methods (and ``wait_lost``, ``async with``) are the
///   asyncio versions. Each returns a coroutine (``asyncio.iscoroutine`` is
///   true) that does nothing until awaited, or run by a task; one never
///   awaited sends nothing. Its first step sends the first command from the
///   event loop's thread; ferrolock's own threads carry on from there without
///   the GIL, so the event loop is never blocked. Cancelling it (a timeout,
///   ``Task.cancel``) leaves nothing behind: an acquire granted meanwhile is
///   released, a restored hold stays its owner's, and a release completes.
///   They work the same under trio and anyio (either backend); trio's
///   cancellation (``move_on_after``, a cancelled nursery) is a cancellation
///   as above. Under another library, one that must wait raises
///   ``RuntimeError``.
#[pymodule]
pub mod _ferrolock {
    use pyo3::prelude::*;

    #[pymodule_export]
    use super::client::PyClient;
    #[pymodule_export]
    use super::election::{PyElection, PyLeader, PyObserver};
    #[pymodule_export]
    use super::events::{_dropped_events, add_listener, flush_events, remove_listener, LockEvent};
    #[pymodule_export]
    use super::lock::PyLock;
    #[pymodule_export]
    use super::retry::PyRetry;
    #[pymodule_export]
    use super::rwmutex::PyRwMutex;
    #[pymodule_export]
    use super::state::{LockInfo, LockState};

    #[pymodule_export]
    use super::compat::{_plain_force_release, _plain_inspect, _plain_lock};
    #[pymodule_export]
    use super::coro::Operation;
    #[pymodule_export]
    use super::exit::_at_exit;
    #[pymodule_export]
    use super::options::_handle_options;
    #[pymodule_export]
    use super::semaphore::_semaphore;

    /// Diagnostics of this process: ``watchdogs`` (live watchdog tasks), ``waiters`` (waiting acquires),
    /// ``handed_over`` (holds taken straight from a fair release's wake-up), ``renewals`` (renewals made)
    /// and ``log_records`` (core log records handed to Python's ``logging``).
    #[pyfunction]
    fn _debug_stats(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
        let stats = pyo3::types::PyDict::new(py);
        stats.set_item("watchdogs", crate::live_watchdogs())?;
        stats.set_item("handed_over", crate::handle::lock::handed_over())?;
        stats.set_item("waiters", crate::waiters())?;
        stats.set_item("renewals", crate::renewals())?;
        stats.set_item("log_records", super::logging::queued())?;
        Ok(stats)
    }

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        let py = m.py();
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        super::coro::register(py)?;
        // Core log records go to Python's `logging`, under the `ferrolock` logger.
        super::logging::install(py)?;
        Ok(())
    }
}
