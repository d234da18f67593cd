//! How an operation waits under trio: the Python side (`ferrolock._trio`)
//! parks the task with trio's low-level API; this side hands it the
//! operation's cancellation ([`Abandon`], trio's abort function calls it)
//! and finds trio in the first place, without importing it.

use std::sync::Arc;

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio::runtime::Runtime;

use super::Cell;

/// The libraries an `a*` method runs under, as the error names them.
const SUPPORTED: &str = "asyncio (and uvloop), trio, or anyio on either backend";

/// `ferrolock._trio` when trio is imported (so possibly running), else None:
/// trio is no dependency, and code that never imported it runs no trio.
pub(crate) fn trio_helper(py: Python<'_>) -> PyResult<Option<&Bound<'_, PyModule>>> {
    static HELPER: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    if let Some(helper) = HELPER.get(py) {
        return Ok(Some(helper.bind(py)));
    }
    let modules = py.import(intern!(py, "sys"))?.getattr(intern!(py, "modules"))?;
    if !modules.contains(intern!(py, "trio"))? {
        return Ok(None);
    }
    let helper = HELPER.get_or_try_init(py, || py.import("ferrolock._trio").map(Bound::unbind))?;
    Ok(Some(helper.bind(py)))
}

/// What `what` raises when it must wait and no supported library runs here.
pub(crate) fn unsupported(py: Python<'_>, what: &str) -> PyErr {
    // sniffio, where installed, names the library that runs instead.
    let found = py
        .import("sniffio")
        .and_then(|s| s.call_method0("current_async_library"))
        .and_then(|name| name.extract::<String>());
    let why = match found {
        Ok(name) => format!("not under {name}"),
        Err(_) => "and none runs in this thread".to_owned(),
    };
    PyRuntimeError::new_err(format!("ferrolock: {what} runs under {SUPPORTED}, {why}"))
}

/// Cancels a parked operation as `throw` does (its guards undo what it
/// started; a result already in is undone): trio's abort function calls it
/// on trio's thread. True: cancelled, nothing left to undo. None: cancelled,
/// and what it started is being undone; the task is woken (`settled`) once
/// that is over, and only then may `Cancelled` be raised. False for a
/// release, which runs to its end.
#[pyclass(frozen)]
pub(super) struct Abandon {
    cell: Arc<Cell>,
    rt: Arc<Runtime>,
    /// False: it may not be cancelled (a release).
    cancellable: bool,
}

impl Abandon {
    pub(super) fn new(cell: Arc<Cell>, rt: Arc<Runtime>, cancellable: bool) -> Abandon {
        Abandon { cell, rt, cancellable }
    }
}

#[pymethods]
impl Abandon {
    fn __call__(&self) -> Option<bool> {
        if !self.cancellable {
            return Some(false);
        }
        if self.cell.abandon(&self.rt) {
            None
        } else {
            Some(true)
        }
    }
}

/// Parks the current trio task: trio's wait for the operation to step in
/// its place, and the callable (any thread; told whether the operation is
/// settled, else its result is in) that wakes it; None outside trio.
pub(super) fn park(py: Python<'_>, abandon: Abandon) -> PyResult<Option<(Py<PyAny>, Py<PyAny>)>> {
    let Some(helper) = trio_helper(py)? else { return Ok(None) };
    let parked = helper.call_method1(intern!(py, "park"), (abandon,))?;
    if parked.is_none() {
        return Ok(None);
    }
    let (wait, wake): (Py<PyAny>, Py<PyAny>) = parked.extract()?;
    Ok(Some((wait, wake)))
}
