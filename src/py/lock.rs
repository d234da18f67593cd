//! `ferrolock.Lock`: a thin shell over the core `Lock`, with sync and asyncio
//! context managers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::lock::{Lock, Wait};

use super::args;
use super::client::{LockInfo, PyClient};
use super::coro::{coroutine, undoable, Cancel, Operation};
use super::errors::{LockLost, LockNotAcquired};
use super::options::HandleOptions;
use super::retry::PyRetry;
use super::runtime::runtime;
use super::runtime::{call_soon, wait, wait_interruptible};

#[pyclass(name = "Lock", module = "ferrolock", frozen, weakref)]
pub struct PyLock {
    core: Arc<Lock>,
    client: Py<PyClient>,
    blocking_timeout: Option<Duration>,
    /// The `async with` block currently holding, to cancel if the hold is lost.
    scope: Arc<Mutex<Option<Py<LossScope>>>>,
}

/// Cancels the task inside an `async with` block when its hold is lost.
/// Runs on the event loop's thread (scheduled with `call_soon_threadsafe`).
#[pyclass(frozen)]
struct LossScope {
    task: Py<PyAny>,
    inside: AtomicBool,
    fired: AtomicBool,
}

#[pymethods]
impl LossScope {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        if self.inside.load(Ordering::SeqCst) && !self.fired.swap(true, Ordering::SeqCst) {
            self.task.call_method1(py, "cancel", ("ferrolock: the lock was lost",))?;
        }
        Ok(())
    }
}

fn names_of(name: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if name.is_instance_of::<PyString>() {
        return Ok(vec![args::name(name)?]);
    }
    if name.is_instance_of::<pyo3::types::PyList>() || name.is_instance_of::<PyTuple>() {
        return name.try_iter()?.map(|n| args::name(&n?)).collect();
    }
    args::name(name).map(|n| vec![n])
}

impl PyLock {
    pub(crate) fn from_core(
        core: Lock,
        client: &Bound<'_, PyClient>,
        blocking_timeout: Option<Duration>,
    ) -> PyLock {
        PyLock {
            core: Arc::new(core),
            client: client.clone().unbind(),
            blocking_timeout,
            scope: Arc::new(Mutex::new(None)),
        }
    }

    /// One attempt, no waiting (`try_read` / `try_write`).
    pub(crate) fn take_now(&self, py: Python<'_>) -> PyResult<bool> {
        acquire_blocking(py, &self.core, Wait::No)
    }

    fn label(&self) -> String {
        format!("lock {:?}", self.core.names().join(", "))
    }

    fn entry_wait(&self) -> PyResult<Wait> {
        match self.blocking_timeout {
            None => Ok(Wait::Forever),
            Some(d) => args::deadline(d.as_secs_f64()),
        }
    }

    fn not_acquired(&self) -> PyErr {
        let within =
            self.blocking_timeout.map_or(String::new(), |d| format!(" within {} s", d.as_secs_f64()));
        LockNotAcquired::new_err(format!("{} was not acquired{within}", self.label()))
    }
}

/// A blocking acquire that Ctrl-C interrupts, leaving no lock behind.
fn acquire_blocking(py: Python<'_>, core: &Arc<Lock>, wait_for: Wait) -> PyResult<bool> {
    wait_interruptible(py, core.client(), core.acquire(wait_for))
}

/// Gives back a hold whose acquire nobody received (its awaiter was cancelled).
fn undo_acquire(core: &Arc<Lock>) -> Box<dyn FnOnce() + Send> {
    let core = core.clone();
    Box::new(move || {
        runtime().spawn(async move {
            let _ = core.release().await;
        });
    })
}

/// The end of a `with` block. A lost hold raises `LockLost`, unless the body
/// raised an exception of its own: that one propagates (Ctrl-C stays Ctrl-C),
/// with a note saying the lock was lost too.
fn finish(core: &Lock, released: PyResult<()>, body_raised: Option<Py<PyAny>>) -> PyResult<bool> {
    let label = core.names().join(", ");
    let lost = core.lease().filter(|l| l.is_lost()).map(|lease| {
        let why = lease.lost_reason().unwrap_or_else(|| "its ttl ran out".into());
        format!("lock {label:?} was lost: {why}")
    });
    match (lost, body_raised) {
        (Some(lost), None) => Err(LockLost::new_err(lost)),
        (Some(lost), Some(exc)) => {
            Python::attach(|py| {
                let exc = exc.bind(py);
                if exc.hasattr("add_note").unwrap_or(false) {
                    let _ = exc.call_method1("add_note", (format!("ferrolock: {lost}"),));
                }
            });
            log::warn!("{lost} (while the block raised)");
            Ok(false)
        }
        (None, Some(_)) => {
            if let Err(e) = released {
                log::warn!("releasing lock {label:?} failed while the block raised: {e}");
            }
            Ok(false)
        }
        (None, None) => released.map(|()| false),
    }
}

#[pymethods]
impl PyLock {
    #[new]
    #[pyo3(signature = (client, name, *, ttl=None, auto_renew=true, blocking_timeout=None, retry=None, metadata=None, token=None, on_lost=None, fair=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        client: &Bound<'_, PyClient>,
        name: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        blocking_timeout: Option<&Bound<'_, PyAny>>,
        retry: Option<&Bound<'_, PyRetry>>,
        metadata: Option<&Bound<'_, PyAny>>,
        token: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
        fair: bool,
    ) -> PyResult<Self> {
        let o =
            HandleOptions::parse(ttl, auto_renew, fair, blocking_timeout, retry, metadata, token, on_lost)?;
        let core = Lock::new(client.get().core.clone(), names_of(name)?, o.lock, o.token)?;
        Ok(PyLock::from_core(core, client, o.blocking_timeout))
    }

    /// `threading.Lock.acquire` semantics; the GIL is released while waiting.
    #[pyo3(signature = (blocking=true, timeout=None))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        acquire_blocking(py, &self.core, args::wait(blocking, timeout)?)
    }

    #[pyo3(signature = (blocking=true, timeout=None))]
    fn aacquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let wait_for = args::wait(blocking, timeout)?;
        let core = self.core.clone();
        let fut = async move {
            // Adopting a restored hold takes nothing new: if nobody receives
            // the answer, the hold stays its owner's.
            let adopting = core.is_restored();
            let acquired = core.acquire(wait_for).await?;
            Ok((acquired, acquired && !adopting))
        };
        undoable(py, "Lock.aacquire", Cancel::Drop, fut, Some(undo_acquire(&self.core)))
    }

    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core.clone();
        wait(py, async move { core.release().await })
    }

    /// Releases even when the awaiting task is cancelled.
    fn arelease(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.arelease", Cancel::Finish, async move { core.release().await })
    }

    #[pyo3(signature = (ttl=None))]
    fn extend(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let (core, ttl) = (self.core.clone(), args::optional_seconds("ttl", ttl)?);
        wait(py, async move { core.extend(ttl).await })
    }

    #[pyo3(signature = (ttl=None))]
    fn aextend(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Py<Operation>> {
        let (core, ttl) = (self.core.clone(), args::optional_seconds("ttl", ttl)?);
        coroutine(py, "Lock.aextend", Cancel::Drop, async move { core.extend(ttl).await })
    }

    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        wait(py, async move { core.locked().await })
    }

    fn alocked(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.alocked", Cancel::Drop, async move { core.locked().await })
    }

    fn owned(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        wait(py, async move { core.owned().await })
    }

    fn aowned(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.aowned", Cancel::Drop, async move { core.owned().await })
    }

    /// Seconds left on this handle's hold, or None when it holds nothing.
    fn ttl(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let core = self.core.clone();
        wait(py, async move { Ok(core.remaining().await?.map(|d| d.as_secs_f64())) })
    }

    fn attl(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.attl", Cancel::Drop, async move {
            Ok(core.remaining().await?.map(|d| d.as_secs_f64()))
        })
    }

    /// Resolves when the current hold ends: True if it was lost, False if it
    /// was released. At once when nothing is held.
    fn wait_lost(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.wait_lost", Cancel::Drop, async move {
            Ok(match core.is_held().then(|| core.lease()).flatten() {
                Some(lease) => lease.wait_ended().await,
                None => false,
            })
        })
    }

    /// Who holds each name of this lock (None for a free one).
    fn inspect(&self, py: Python<'_>) -> PyResult<Vec<Option<LockInfo>>> {
        let core = self.core.clone();
        wait(py, async move {
            let records = core.inspect().await?;
            Ok(core
                .names()
                .iter()
                .zip(records)
                .map(|(n, r)| r.map(|r| LockInfo::new(n.clone(), r)))
                .collect())
        })
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let names = self.core.names();
        if names.len() == 1 {
            Ok(PyString::new(py, &names[0]).into_any().unbind())
        } else {
            Ok(PyTuple::new(py, names)?.into_any().unbind())
        }
    }

    #[getter]
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.core.names())
    }

    #[getter]
    fn token(&self) -> Option<String> {
        self.core.token()
    }

    #[getter]
    fn fence(&self) -> Option<i64> {
        self.core.fence()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.core.lost()
    }

    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }

    fn __enter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let me = slf.get();
        if acquire_blocking(slf.py(), &me.core, me.entry_wait()?)? {
            Ok(slf.clone())
        } else {
            Err(me.not_acquired())
        }
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let core = self.core.clone();
        let released = wait(py, async move { core.release().await });
        let body_raised = exc.get_item(1).ok().filter(|e| !e.is_none()).map(Bound::unbind);
        finish(&self.core, released, body_raised)
    }

    fn __aenter__(slf: &Bound<'_, Self>) -> PyResult<Py<Operation>> {
        let py = slf.py();
        let me = slf.get();
        let asyncio = py.import("asyncio")?;
        let task = asyncio.call_method0("current_task")?;
        let event_loop = asyncio.call_method0("get_running_loop")?.unbind();
        let scope = Py::new(
            py,
            LossScope { task: task.unbind(), inside: AtomicBool::new(true), fired: AtomicBool::new(false) },
        )?;
        let hook_scope = scope.clone_ref(py);
        let (core, wait_for, slot) = (me.core.clone(), me.entry_wait()?, me.scope.clone());
        let not_acquired = me.not_acquired();
        let handle = slf.clone().unbind();
        let undo = undo_acquire(&me.core);
        let fut = async move {
            let adopting = core.is_restored();
            if !core.acquire(wait_for).await? {
                return Err(not_acquired);
            }
            *slot.lock().unwrap() = Some(scope);
            if let Some(lease) = core.lease() {
                lease.on_lost(Box::new(move |_| {
                    call_soon(move |py| {
                        let _ = event_loop.call_method1(py, "call_soon_threadsafe", (hook_scope,));
                    });
                }));
            }
            Ok((handle, !adopting))
        };
        undoable(py, "Lock.__aenter__", Cancel::Drop, fut, Some(undo))
    }

    #[pyo3(signature = (exc_type, exc=None, _tb=None))]
    fn __aexit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let mut body_raised = exc.filter(|e| !e.is_none()).map(|e| e.clone().unbind());
        if let Some(scope) = self.scope.lock().unwrap().take() {
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
        let core = self.core.clone();
        let fut = async move {
            let released = core.release().await.map_err(PyErr::from);
            finish(&core, released, body_raised).map(|v| (v, false))
        };
        undoable(py, "Lock.__aexit__", Cancel::Finish, fut, None)
    }

    fn __repr__(&self) -> String {
        let kind = match self.core.kind() {
            "lock" => String::new(),
            k => format!(" {k}"),
        };
        let state = match (self.core.is_held(), self.core.is_restored(), self.core.fence()) {
            (false, _, _) => String::new(),
            (true, true, _) => " restored".into(),
            (true, false, Some(f)) => format!(" held fence={f}"),
            (true, false, None) => " held".into(),
        };
        format!("<ferrolock.Lock {:?}{kind}{state}>", self.core.names().join(", "))
    }
}
