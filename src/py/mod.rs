//! PyO3 bindings: the only code that knows about Python.

pub mod args;
pub mod client;
pub mod coro;
pub mod errors;
pub mod lock;
pub mod options;
pub mod retry;
pub mod runtime;
pub mod rwmutex;

use pyo3::prelude::*;

#[pymodule]
pub mod _ferrolock {
    use pyo3::prelude::*;

    #[pymodule_export]
    use super::client::{LockInfo, PyClient};
    #[pymodule_export]
    use super::lock::PyLock;
    #[pymodule_export]
    use super::retry::PyRetry;
    #[pymodule_export]
    use super::rwmutex::PyRwMutex;

    #[pymodule_export]
    use super::coro::Operation;
    #[pymodule_export]
    use super::runtime::_at_exit;

    /// Counters for tests and diagnostics: live watchdog tasks, waiting
    /// acquires and holds taken straight from a hand-over, in this process.
    #[pyfunction]
    fn _debug_stats(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
        let stats = pyo3::types::PyDict::new(py);
        stats.set_item("watchdogs", crate::live_watchdogs())?;
        stats.set_item("handed_over", crate::lock::handed_over())?;
        stats.set_item("waiters", crate::waiters())?;
        Ok(stats)
    }

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        let py = m.py();
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("LockError", py.get_type::<super::errors::LockError>())?;
        m.add("LockNotAcquired", py.get_type::<super::errors::LockNotAcquired>())?;
        m.add("LockNotOwned", super::errors::not_owned_error(py)?)?;
        m.add("LockLost", py.get_type::<super::errors::LockLost>())?;
        m.add("LockConnectionError", super::errors::connection_error(py)?)?;
        super::coro::register(py)?;
        // Core log records go to Python's `logging`, under the `ferrolock` logger.
        let _ = pyo3_log::try_init();
        Ok(())
    }
}
