//! `async with lock:`: entering takes the lock and arranges for a loss of
//! the hold to cancel the task running the block; leaving releases it and
//! turns that cancellation into `LockLost`.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;

use super::super::coro::{undoable, Cancel, Operation};
use super::super::runtime::call_soon;
use super::hold::{finish, undo_acquire};
use super::PyLock;

/// Cancels the task inside an `async with` block when its hold is lost.
/// Runs on the event loop's thread (scheduled with `call_soon_threadsafe`).
#[pyclass(frozen)]
pub(super) struct LossScope {
    task: Py<PyAny>,
    /// The block is running: from the moment `__aenter__` hands its handle
    /// to the task (never before: a cancel then would land in `__aenter__`
    /// itself, and no `__aexit__` would turn it into `LockLost`).
    inside: AtomicBool,
    /// The loss came while the task was still entering: cancel on entry.
    early: AtomicBool,
    fired: AtomicBool,
}

impl LossScope {
    fn new(task: Py<PyAny>) -> LossScope {
        LossScope {
            task,
            inside: AtomicBool::new(false),
            early: AtomicBool::new(false),
            fired: AtomicBool::new(false),
        }
    }

    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        if !self.fired.swap(true, Ordering::SeqCst) {
            self.task.call_method1(py, "cancel", ("ferrolock: the lock was lost",))?;
        }
        Ok(())
    }

    /// The task takes the handle and enters the block (on the loop's thread).
    fn enter(&self, py: Python<'_>) -> PyResult<()> {
        self.inside.store(true, Ordering::SeqCst);
        if self.early.load(Ordering::SeqCst) {
            self.cancel(py)?; // lands at the block's first await
        }
        Ok(())
    }
}

#[pymethods]
impl LossScope {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        if self.inside.load(Ordering::SeqCst) {
            self.cancel(py)?;
        } else {
            self.early.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// `__aenter__`'s answer: the handle, and on its way to the task (on the
/// loop's thread) the moment the block starts.
struct Entered {
    handle: Py<PyLock>,
    scope: Py<LossScope>,
}

impl<'py> IntoPyObject<'py> for Entered {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.scope.get().enter(py)?;
        Ok(self.handle.into_bound(py).into_any())
    }
}

/// `Lock.__aenter__`.
pub(super) fn enter(slf: &Bound<'_, PyLock>) -> PyResult<Py<Operation>> {
    let py = slf.py();
    let me = slf.get();
    let asyncio = py.import("asyncio")?;
    let task = asyncio.call_method0("current_task")?;
    let event_loop = asyncio.call_method0("get_running_loop")?.unbind();
    let scope = Py::new(py, LossScope::new(task.unbind()))?;
    let hook_scope = scope.clone_ref(py);
    let enter_scope = scope.clone_ref(py);
    let (core, wait_for, slot) = (me.core.clone(), me.entry_wait()?, me.scope.clone());
    let not_acquired = me.not_acquired();
    let handle = slf.clone().unbind();
    let undo = undo_acquire(&me.core);
    let fut = async move {
        let adopting = core.is_restored();
        if !core.acquire(wait_for).await? {
            return Err(not_acquired.error(wait_for));
        }
        *slot.lock().unwrap() = Some(scope);
        if let Some(lease) = core.lease() {
            lease.on_lost(Box::new(move |_| {
                call_soon(move |py| {
                    let _ = event_loop.call_method1(py, "call_soon_threadsafe", (hook_scope,));
                });
            }));
        }
        Ok((Entered { handle, scope: enter_scope }, !adopting))
    };
    undoable(py, "Lock.__aenter__", Cancel::Drop, fut, Some(undo))
}

/// `Lock.__aexit__`.
pub(super) fn exit(
    slf: &Bound<'_, PyLock>,
    exc_type: &Bound<'_, PyAny>,
    exc: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<Operation>> {
    let (py, me) = (slf.py(), slf.get());
    // `async with` lets go of the handle before awaiting this: keep it alive
    // until the release is done (see `Drop for PyLock`).
    let handle = slf.clone().unbind();
    let mut body_raised = exc.filter(|e| !e.is_none()).map(|e| e.clone().unbind());
    if let Some(scope) = me.scope.lock().unwrap().take() {
        let scope = scope.get();
        scope.inside.store(false, Ordering::SeqCst);
        let cancelled = py.import("asyncio")?.getattr("CancelledError")?;
        let ours = scope.fired.load(Ordering::SeqCst) && !exc_type.is_none() && exc_type.is(&cancelled);
        if ours {
            // Our own cancellation, not the body's exception: LockLost replaces it.
            body_raised = None;
            if scope.task.bind(py).hasattr("uncancel")? {
                scope.task.call_method0(py, "uncancel")?;
            }
        }
    }
    let core = me.core.clone();
    let fut = async move {
        let _handle = handle;
        let released = core.release().await.map_err(PyErr::from);
        finish(&core, released, body_raised).map(|v| (v, false))
    };
    undoable(py, "Lock.__aexit__", Cancel::Finish, fut, None)
}
