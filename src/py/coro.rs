//! The asyncio face of the core's futures: every `a*` method returns an
//! [`Operation`], a real coroutine (`asyncio.iscoroutine` is true) that runs
//! nothing until it is first stepped (awaited, or run by a task).
//!
//! The first step polls the core future once on the calling (event loop)
//! thread, inside the tokio runtime's context, so its first command is on the
//! wire at once; a future finished by then is answered in the same step. One
//! that is not hands itself to the runtime, which drives it from there on
//! (a retry, a script load, a wait for a wake-up go on without the event
//! loop), and the coroutine yields an asyncio future of its loop. Completing
//! needs no GIL: the result goes into the operation's cell, which is queued
//! on the loop's [`Port`], and one byte is written to a socket the loop
//! watches (`add_reader`, which uvloop has too). The loop then completes the
//! asyncio futures of every queued operation in one callback, and each task
//! steps again and takes its result.
//!
//! Thrown into (a cancellation), closed or dropped before its result was
//! taken, an operation cancels its future, whose own guards undo what it
//! started in Redis; a result that came in but was never taken is undone by
//! the operation's `undo` (an acquire gives its hold back: never a restored
//! token's hold, which is its owner's). A release is never cancelled: it
//! runs to its end ([`Cancel::Finish`]).
//!
//! With no asyncio loop running, an operation that must wait looks for trio
//! (only then: the asyncio path pays nothing for it) and parks its task with
//! trio's low-level API instead (see `trio`, and `ferrolock._trio`); under
//! any other library it raises, cancelled, naming the supported ones.

mod port;
mod trio;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::{intern, IntoPyObjectExt};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::events::in_caller_context;
use super::runtime::{call_soon, runtime};
use super::task::contained;
use port::{loop_port, Port};
pub(crate) use trio::{trio_helper, unsupported};

type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;
/// A result, and whether it must be undone if nobody takes it.
type Outcome = PyResult<(Convert, bool)>;
type BoxFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
type Undo = Box<dyn FnOnce() + Send>;

/// What an operation cancelled before its result was taken does with its future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// Drop it: it is cancel-safe, its guards undo what it did.
    Drop,
    /// Let it run to its end on the runtime (a release), result unseen.
    Finish,
}

/// A coroutine running `fut`, named `name` (as in `Lock.alocked`).
pub(crate) fn coroutine<F, T>(
    py: Python<'_>,
    name: &'static str,
    cancel: Cancel,
    fut: F,
) -> PyResult<Py<Operation>>
where
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    undoable(py, name, cancel, async move { fut.await.map(|v| (v, false)).map_err(PyErr::from) }, None)
}

/// A coroutine running `fut`, whose value comes with whether it must be
/// undone (by `undo`) if the coroutine is cancelled before taking it.
pub(crate) fn undoable<F, T>(
    py: Python<'_>,
    name: &'static str,
    cancel: Cancel,
    fut: F,
    undo: Option<Undo>,
) -> PyResult<Py<Operation>>
where
    F: Future<Output = PyResult<(T, bool)>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let fut = in_caller_context(py, async move {
        let (value, needs_undo) = contained(fut).await?;
        Ok((Box::new(move |py: Python<'_>| value.into_py_any(py)) as Convert, needs_undo))
    });
    let op = Operation {
        name,
        cancel,
        rt: runtime(),
        stage: Mutex::new(Stage::Fresh(Box::pin(fut))),
        cell: Arc::new(Cell { inner: Mutex::new(CellInner::default()), undo: Mutex::new(undo) }),
    };
    Py::new(py, op)
}

/// A coroutine over one core future (see the module's description).
#[pyclass(name = "Operation", module = "ferrolock", frozen, weakref)]
pub struct Operation {
    name: &'static str,
    cancel: Cancel,
    rt: Arc<Runtime>,
    stage: Mutex<Stage>,
    cell: Arc<Cell>,
}

enum Stage {
    /// Not stepped yet: has done nothing.
    Fresh(BoxFuture),
    /// Driven by the runtime; its result comes through the cell.
    Running(JoinHandle<()>),
    /// The same, its task parked under trio: `wait` is what the task steps
    /// in place of the operation until woken (or cancelled).
    Trio { handle: JoinHandle<()>, wait: Py<PyAny> },
    /// Its result taken, or cancelled.
    Over,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the runtime side hands the coroutine: the result, and how to wake it.
struct Cell {
    inner: Mutex<CellInner>,
    undo: Mutex<Option<Undo>>,
}

#[derive(Default)]
struct CellInner {
    outcome: Option<Outcome>,
    /// The coroutine was cancelled: a result coming in now is undone.
    abandoned: bool,
    /// How to wake the task waiting for the result.
    parked: Option<Parked>,
    /// On its port's queue already.
    queued: bool,
}

/// How a waiting task is woken.
enum Parked {
    /// asyncio: the future the task waits on, and the port of its loop.
    Loop(Py<PyAny>, Arc<Port>),
    /// trio: a callable (any thread) that reschedules the task.
    Trio(Py<PyAny>),
}

impl Cell {
    /// Called by the runtime when the future ends.
    fn complete(self: &Arc<Self>, outcome: Outcome) {
        let mut inner = locked(&self.inner);
        if inner.abandoned {
            drop(inner);
            if matches!(outcome, Ok((_, true))) {
                self.undo();
            }
            return;
        }
        inner.outcome = Some(outcome);
        let port = match &inner.parked {
            Some(Parked::Loop(_, port)) if !inner.queued => port.clone(),
            Some(Parked::Trio(_)) => {
                if let Some(Parked::Trio(wake)) = inner.parked.take() {
                    drop(inner);
                    // Not on a runtime worker: it takes the GIL.
                    call_soon(move |py| {
                        if let Err(e) = wake.call0(py) {
                            e.write_unraisable(py, None);
                        }
                    });
                }
                return;
            }
            _ => return,
        };
        inner.queued = true;
        drop(inner);
        port.push(self.clone());
    }

    /// The operation is cancelled: a result in now or later is undone, and
    /// nobody is woken.
    fn abandon(&self) {
        let left = {
            let mut inner = locked(&self.inner);
            inner.abandoned = true;
            inner.parked = None;
            inner.outcome.take()
        };
        if matches!(left, Some(Ok((_, true)))) {
            self.undo();
        }
    }

    fn undo(&self) {
        if let Some(undo) = locked(&self.undo).take() {
            undo();
        }
    }
}

/// A step's answer: yield this (an asyncio future, or None to step again
/// at once), or stop with the result.
fn finished(py: Python<'_>, outcome: Outcome) -> PyResult<Py<PyAny>> {
    let value = outcome.and_then(|(convert, _)| convert(py))?;
    Err(PyStopIteration::new_err((value,)))
}

impl Operation {
    /// One step (see the module's description): `Ok(future)` to wait on,
    /// or `Err(StopIteration(value))` when done. `sent`: what the caller
    /// sent in (trio sends an outcome to its own wait).
    fn step(&self, py: Python<'_>, sent: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let mut stage = locked(&self.stage);
        match std::mem::replace(&mut *stage, Stage::Over) {
            Stage::Over => Err(PyRuntimeError::new_err("cannot reuse already awaited coroutine")),
            Stage::Fresh(mut fut) => {
                let polled = {
                    let _inside = self.rt.enter();
                    fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
                };
                match polled {
                    Poll::Ready(outcome) => {
                        drop(stage);
                        finished(py, outcome)
                    }
                    Poll::Pending => {
                        let cell = self.cell.clone();
                        *stage = Stage::Running(self.rt.spawn(async move {
                            let outcome = fut.await;
                            cell.complete(outcome);
                        }));
                        drop(stage);
                        self.park(py)
                    }
                }
            }
            running @ Stage::Running(_) => {
                *stage = running;
                drop(stage);
                self.park(py)
            }
            Stage::Trio { handle, wait } => {
                *stage = Stage::Trio { handle, wait: wait.clone_ref(py) };
                drop(stage);
                self.resume_trio(py, wait.bind(py), sent)
            }
        }
    }

    /// Takes the result if it is in, else parks on a new asyncio future.
    fn park(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(outcome) = locked(&self.cell.inner).outcome.take() {
            *locked(&self.stage) = Stage::Over;
            return finished(py, outcome);
        }
        let (event_loop, port) = match loop_port(py) {
            Ok(found) => found,
            Err(e) if e.is_instance_of::<PyRuntimeError>(py) => return self.park_elsewhere(py, e),
            Err(e) => return Err(e),
        };
        let future = event_loop.call_method0(py, intern!(py, "create_future"))?;
        future.setattr(py, intern!(py, "_asyncio_future_blocking"), true)?;
        let mut inner = locked(&self.cell.inner);
        if let Some(outcome) = inner.outcome.take() {
            drop(inner);
            *locked(&self.stage) = Stage::Over;
            return finished(py, outcome);
        }
        inner.parked = Some(Parked::Loop(future.clone_ref(py), port));
        Ok(future)
    }

    /// Parks under trio when no asyncio loop runs (`no_loop` says so), or
    /// cancels the operation and raises: no supported library is running.
    #[cold]
    fn park_elsewhere(&self, py: Python<'_>, no_loop: PyErr) -> PyResult<Py<PyAny>> {
        let abort = match &*locked(&self.stage) {
            Stage::Running(handle) => handle.abort_handle(),
            _ => return Err(no_loop),
        };
        let abandon = trio::Abandon::new(self.cell.clone(), (self.cancel == Cancel::Drop).then_some(abort));
        // Steps trio's wait to the request it makes of trio's runner.
        let parked = trio::park(py, abandon).and_then(|parked| {
            let Some((wait, wake)) = parked else {
                let error = unsupported(py, self.name);
                error.set_cause(py, Some(no_loop));
                return Err(error);
            };
            let request = wait.call_method1(py, intern!(py, "send"), (py.None(),))?;
            Ok((wait, wake, request))
        });
        let (wait, wake, request) = match parked {
            Ok(parked) => parked,
            Err(e) => {
                self.abandon(true);
                return Err(e);
            }
        };
        let mut inner = locked(&self.cell.inner);
        if let Some(outcome) = inner.outcome.take() {
            drop(inner);
            *locked(&self.stage) = Stage::Over;
            wait.call_method0(py, intern!(py, "close"))?;
            return finished(py, outcome);
        }
        inner.parked = Some(Parked::Trio(wake));
        drop(inner);
        let mut stage = locked(&self.stage);
        if let Stage::Running(handle) = std::mem::replace(&mut *stage, Stage::Over) {
            *stage = Stage::Trio { handle, wait };
        }
        Ok(request)
    }

    /// Trio woke the task (or cancelled it: then `wait` raises `Cancelled`,
    /// the operation having been cancelled by the abort function).
    fn resume_trio(
        &self,
        py: Python<'_>,
        wait: &Bound<'_, PyAny>,
        sent: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let sent = sent.map_or_else(|| py.None(), |s| s.clone().unbind());
        match wait.call_method1(intern!(py, "send"), (sent,)) {
            Ok(request) => Ok(request.unbind()),
            Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
                let mut stage = locked(&self.stage);
                if let Stage::Trio { handle, .. } = std::mem::replace(&mut *stage, Stage::Over) {
                    *stage = Stage::Running(handle);
                }
                drop(stage);
                self.park(py)
            }
            Err(e) => {
                *locked(&self.stage) = Stage::Over;
                Err(e)
            }
        }
    }

    /// Cancels the operation before its result was taken (see the module's
    /// description). `start`: a release never stepped runs all the same.
    fn abandon(&self, start: bool) {
        let stage = std::mem::replace(&mut *locked(&self.stage), Stage::Over);
        self.cell.abandon();
        match (stage, self.cancel) {
            (Stage::Fresh(fut), Cancel::Finish) if start => {
                self.rt.spawn(async move {
                    let _ = fut.await;
                });
            }
            (Stage::Fresh(fut), _) => {
                let _inside = self.rt.enter();
                drop(fut);
            }
            (Stage::Running(handle) | Stage::Trio { handle, .. }, Cancel::Drop) => handle.abort(),
            (Stage::Running(_) | Stage::Trio { .. }, Cancel::Finish) | (Stage::Over, _) => {}
        }
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        let never_stepped = matches!(*locked(&self.stage), Stage::Fresh(_));
        self.abandon(false);
        if never_stepped {
            // As Python says of a coroutine function's coroutine: most likely
            // an `await` was forgotten.
            Python::attach(|py| {
                let message = format!("coroutine '{}' was never awaited", self.name);
                let warning = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
                if let Err(e) =
                    PyErr::warn(py, &warning, &std::ffi::CString::new(message).unwrap_or_default(), 1)
                {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

#[pymethods]
impl Operation {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.step(py, None)
    }

    /// Steps the coroutine (`value` must be None, as for a fresh coroutine).
    fn send(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !value.is_none() && matches!(*locked(&self.stage), Stage::Fresh(_)) {
            return Err(PyTypeError::new_err("can't send non-None value to a just-started coroutine"));
        }
        self.step(py, Some(value))
    }

    /// Raises `exc` where the coroutine waits, after cancelling the operation
    /// (a release still completes).
    #[pyo3(signature = (exc, value=None, _tb=None))]
    fn throw(
        &self,
        exc: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.abandon(true);
        if !exc.is_instance_of::<PyType>() {
            return Err(PyErr::from_value(exc.clone()));
        }
        let instance = match value.filter(|v| !v.is_none()) {
            Some(v) if v.is_instance(exc)? => v.clone(),
            Some(v) => exc.call1((v,))?,
            None => exc.call0()?,
        };
        Err(PyErr::from_value(instance))
    }

    /// Cancels the operation (see `throw`); one never stepped did nothing.
    fn close(&self) {
        self.abandon(false);
    }

    #[getter]
    fn __name__(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }

    #[getter]
    fn __qualname__(&self) -> &'static str {
        self.name
    }

    fn __repr__(&self) -> String {
        format!("<ferrolock coroutine {}>", self.name)
    }
}

/// Lets `collections.abc.Coroutine` (and so `asyncio.iscoroutine`) know the type.
pub(crate) fn register(py: Python<'_>) -> PyResult<()> {
    let abc = py.import("collections.abc")?.getattr("Coroutine")?;
    abc.call_method1("register", (py.get_type::<Operation>(),))?;
    Ok(())
}
