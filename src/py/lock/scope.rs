//! `async with lock:`: entering takes the lock and arranges for a loss of
//! the hold to cancel the task running the block; leaving releases it and
//! turns that cancellation into `LockLost`. Under trio the block runs in a
//! cancel scope of its own, which the loss cancels and which, left at the
//! block's end, swallows that cancellation.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;

use super::super::coro::{trio_helper, undoable, unsupported, Cancel, Operation};
use super::super::runtime::call_soon;
use super::hold::{finish, undo_acquire};
use super::PyLock;

/// Cancels the task inside an `async with` block when its hold is lost.
/// Runs on the event loop's thread (scheduled with `call_soon_threadsafe`,
/// or trio's `run_sync_soon`).
#[pyclass(frozen)]
pub(super) struct LossScope {
    /// The asyncio task running the block, or the block's trio cancel scope.
    task: Py<PyAny>,
    trio: bool,
    /// The block is running: from the moment `__aenter__` hands its handle
    /// to the task (never before: a cancel then would land in `__aenter__`
    /// itself, and no `__aexit__` would turn it into `LockLost`).
    inside: AtomicBool,
    /// The loss came while the task was still entering: cancel on entry.
    early: AtomicBool,
    fired: AtomicBool,
}

impl LossScope {
    fn new(task: Py<PyAny>, trio: bool) -> LossScope {
        LossScope {
            task,
            trio,
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
        if self.trio {
            self.task.call_method0(py, "__enter__")?;
        }
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
    // Where the loss is scheduled: (the loop or trio's token, its thread-safe `call_soon`).
    let (task, schedule, trio) = match asyncio.call_method0("get_running_loop") {
        Ok(event_loop) => {
            (asyncio.call_method0("current_task")?, (event_loop.unbind(), "call_soon_threadsafe"), false)
        }
        Err(no_loop) => {
            let found = match trio_helper(py)? {
                Some(helper) => helper.call_method0("loss_scope")?,
                None => py.None().into_bound(py),
            };
            if found.is_none() {
                let error = unsupported(py, "Lock.__aenter__");
                error.set_cause(py, Some(no_loop));
                return Err(error);
            }
            let (cancel_scope, token): (Bound<'_, PyAny>, Py<PyAny>) = found.extract()?;
            (cancel_scope, (token, "run_sync_soon"), true)
        }
    };
    let scope = Py::new(py, LossScope::new(task.unbind(), trio))?;
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
                    let _ = schedule.0.call_method1(py, schedule.1, (hook_scope,));
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
    // Leaving trio's cancel scope failed (it was not the innermost): raised once released.
    let mut scope_error = None;
    if let Some(scope) = me.scope.lock().unwrap().take() {
        let scope = scope.get();
        scope.inside.store(false, Ordering::SeqCst);
        if scope.trio {
            let exc = exc.filter(|e| !e.is_none());
            let tb = match exc {
                Some(e) => e.getattr("__traceback__")?,
                None => py.None().into_bound(py),
            };
            match scope.task.call_method1(py, "__exit__", (exc_type, exc, tb)) {
                // It swallowed its own cancellation: LockLost replaces it.
                Ok(swallowed) if swallowed.is_truthy(py)? => body_raised = None,
                Ok(_) => {}
                Err(e) => scope_error = Some(e),
            }
        } else {
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
    }
    let core = me.core.clone();
    let fut = async move {
        let _handle = handle;
        let released = core.release().await.map_err(PyErr::from);
        let finished = finish(&core, released, body_raised);
        match scope_error {
            Some(e) => Err(e),
            None => finished.map(|v| (v, false)),
        }
    };
    undoable(py, "Lock.__aexit__", Cancel::Finish, fut, None)
}
