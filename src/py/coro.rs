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
//! The cancellation is told to the runtime task driving the future, which
//! looks for it before each poll of the future and then drops the future on
//! the spot, never polling it again: no attempt starts after it, and a
//! command queued and not yet written is not sent (its answer is no longer
//! awaited). What was sent may still take the lock in Redis: the future's
//! guards undo it, after it on the same connection. A cancellation thrown
//! in (asyncio) or delivered by trio is reported only once those clean-ups
//! have ended (within [`SETTLE_LIMIT`]): the coroutine waits for them, as a
//! coroutine that catches its cancellation to clean up would, so an acquire
//! that raised `CancelledError` or `Cancelled` holds nothing and will hold
//! nothing.
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
use tokio::sync::Notify;

use super::events::in_caller_context;
use super::runtime::{call_soon, runtime};
use super::task::contained;
use crate::support::cleanup::Tracked;
use port::{loop_port, Port};
pub(crate) use trio::{trio_helper, unsupported};

type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;
/// A result, and whether it must be undone if nobody takes it.
type Outcome = PyResult<(Convert, bool)>;
type BoxFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
/// Gives back a result nobody took (an acquire's hold), as a future the
/// cancelled operation awaits.
pub(crate) type Undo = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The longest a cancelled operation waits for its clean-ups before the
/// cancellation is reported (the default command timeout): past it, they go
/// on in the background.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

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
        cell: Arc::new(Cell {
            inner: Mutex::new(CellInner::default()),
            undo: Mutex::new(undo),
            cancel: Notify::new(),
        }),
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
    Running,
    /// The same, its task parked under trio: `wait` is what the task steps
    /// in place of the operation until woken (or cancelled).
    Trio { wait: Py<PyAny> },
    /// Cancelled (asyncio): `error` is raised once the cell is settled,
    /// what the future started undone.
    Cancelling { error: PyErr },
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
    /// Told to the runtime task when the operation is cancelled: it then
    /// drops the future without polling it again.
    cancel: Notify,
}

#[derive(Default)]
struct CellInner {
    outcome: Option<Outcome>,
    phase: Phase,
    /// How to wake the task waiting for the result.
    parked: Option<Parked>,
    /// On its port's queue already.
    queued: bool,
}

/// Where an operation stands, as its cell sees it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its future runs.
    #[default]
    Running,
    /// Its future has ended: its outcome came in (taken since, if the cell's
    /// `outcome` is None).
    Ended,
    /// Cancelled, what its future started being undone: a result coming
    /// in now is undone.
    Undoing,
    /// Cancelled, and what its future started undone (or given up on after
    /// `SETTLE_LIMIT`): the cancellation may be reported.
    Settled,
}

impl Phase {
    fn abandoned(self) -> bool {
        matches!(self, Phase::Undoing | Phase::Settled)
    }
}

/// How a waiting task is woken.
enum Parked {
    /// asyncio: the future the task waits on, and the port of its loop.
    Loop(Py<PyAny>, Arc<Port>),
    /// trio: a callable (any thread) that reschedules the task, told
    /// whether the operation is settled (its cancellation may be reported)
    /// or its result is in.
    Trio(Arc<Py<PyAny>>),
}

impl Cell {
    /// Called by the runtime when the future ends. Cancelled meanwhile, a
    /// result to undo is undone before the cell is settled.
    async fn complete(self: &Arc<Self>, outcome: Outcome) {
        if let Some(outcome) = self.deliver(outcome) {
            if matches!(outcome, Ok((_, true))) {
                self.undo().await;
            }
            self.settle();
        }
    }

    /// Puts the result in and wakes its taker; back when the operation was
    /// cancelled (`complete` undoes it).
    fn deliver(self: &Arc<Self>, outcome: Outcome) -> Option<Outcome> {
        let mut inner = locked(&self.inner);
        if inner.phase.abandoned() {
            return Some(outcome);
        }
        inner.phase = Phase::Ended;
        inner.outcome = Some(outcome);
        self.wake(inner, false);
        None
    }

    /// Wakes the task waiting on the cell, if any: `settled`, to report its
    /// cancellation, else to take the result.
    fn wake(self: &Arc<Self>, mut inner: MutexGuard<'_, CellInner>, settled: bool) {
        let port = match &inner.parked {
            Some(Parked::Loop(_, port)) if !inner.queued => port.clone(),
            Some(Parked::Trio(wake)) => {
                let wake = wake.clone();
                drop(inner);
                // Not on a runtime worker: it takes the GIL.
                call_soon(move |py| {
                    if let Err(e) = wake.call1(py, (settled,)) {
                        e.write_unraisable(py, None);
                    }
                });
                return;
            }
            _ => return,
        };
        inner.queued = true;
        drop(inner);
        port.push(self.clone());
    }

    /// The operation is cancelled: a result in now or later is undone, and
    /// the runtime task told to drop the future. True while that is under
    /// way (the waiting task is woken, `settled`, once it is over); false
    /// when nothing is left to wait for.
    fn abandon(self: &Arc<Self>, rt: &Runtime) -> bool {
        let mut inner = locked(&self.inner);
        match inner.phase {
            Phase::Undoing => return true,
            Phase::Settled => return false,
            Phase::Running | Phase::Ended => {}
        }
        let running = inner.phase == Phase::Running;
        inner.phase = Phase::Undoing;
        match inner.outcome.take() {
            // The future still runs: its task drops it, and settles the cell.
            None if running => {
                drop(inner);
                self.cancel.notify_one();
                true
            }
            Some(Ok((_, true))) => {
                drop(inner);
                let cell = self.clone();
                rt.spawn(async move {
                    cell.undo().await;
                    cell.settle();
                });
                true
            }
            _ => {
                inner.phase = Phase::Settled;
                false
            }
        }
    }

    /// The cancelled operation's clean-ups are over: its cancellation may
    /// be reported.
    fn settle(self: &Arc<Self>) {
        let mut inner = locked(&self.inner);
        inner.phase = Phase::Settled;
        self.wake(inner, true);
    }

    fn is_settled(&self) -> bool {
        locked(&self.inner).phase == Phase::Settled
    }

    /// Gives back the result nobody took, waiting (at most `SETTLE_LIMIT`)
    /// for it to be given back.
    async fn undo(&self) {
        let undo = locked(&self.undo).take();
        if let Some(undo) = undo {
            let _ = tokio::time::timeout(SETTLE_LIMIT, undo()).await;
        }
    }
}

/// Drives an operation's future on the runtime, its result into `cell`.
/// Cancelled (see `Cell::abandon`), the future is dropped at once, never
/// polled again, and the clean-ups its guards start then are waited for
/// (at most `SETTLE_LIMIT`) before the cell is settled.
async fn drive(mut fut: BoxFuture, cell: Arc<Cell>) {
    let outcome = tokio::select! {
        // Looked at before each poll of the future: once cancelled, it
        // starts nothing more.
        biased;
        () = cell.cancel.notified() => None,
        outcome = fut.as_mut() => Some(outcome),
    };
    if let Some(outcome) = outcome {
        cell.complete(outcome).await;
    } else {
        let ((), cleanups) = Tracked::around(|| drop(fut));
        let _ = tokio::time::timeout(SETTLE_LIMIT, cleanups.settle()).await;
        cell.settle();
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
                        self.rt.spawn(drive(fut, self.cell.clone()));
                        *stage = Stage::Running;
                        drop(stage);
                        self.park(py)
                    }
                }
            }
            Stage::Running => {
                *stage = Stage::Running;
                drop(stage);
                self.park(py)
            }
            Stage::Trio { wait } => {
                *stage = Stage::Trio { wait: wait.clone_ref(py) };
                drop(stage);
                self.resume_trio(py, wait.bind(py), sent)
            }
            Stage::Cancelling { error } => {
                if self.cell.is_settled() {
                    return Err(error);
                }
                // Woken before its clean-ups were over: wait on.
                *stage = Stage::Cancelling { error };
                drop(stage);
                self.park_cancelled(py)
            }
        }
    }

    /// A cancelled operation waits (asyncio) for its clean-ups: an asyncio
    /// future completed once the cell is settled, or None to step again at
    /// once when it already is.
    fn park_cancelled(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (event_loop, port) = loop_port(py)?;
        let future = event_loop.call_method0(py, intern!(py, "create_future"))?;
        future.setattr(py, intern!(py, "_asyncio_future_blocking"), true)?;
        let mut inner = locked(&self.cell.inner);
        if inner.phase == Phase::Settled {
            return Ok(py.None());
        }
        inner.parked = Some(Parked::Loop(future.clone_ref(py), port));
        Ok(future)
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
        if !matches!(*locked(&self.stage), Stage::Running) {
            return Err(no_loop);
        }
        let abandon = trio::Abandon::new(self.cell.clone(), self.rt.clone(), self.cancel == Cancel::Drop);
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
        inner.parked = Some(Parked::Trio(Arc::new(wake)));
        drop(inner);
        let mut stage = locked(&self.stage);
        if let Stage::Running = std::mem::replace(&mut *stage, Stage::Over) {
            *stage = Stage::Trio { wait };
        }
        Ok(request)
    }

    /// Trio woke the task (or cancelled it: then `wait` raises `Cancelled`,
    /// the operation having been cancelled by the abort function, and its
    /// clean-ups over).
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
                if let Stage::Trio { .. } = std::mem::replace(&mut *stage, Stage::Over) {
                    *stage = Stage::Running;
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
    /// True while what the future started is being undone: the cell is
    /// settled, and its waiting task woken, once that is over.
    fn abandon(&self, start: bool) -> bool {
        let stage = std::mem::replace(&mut *locked(&self.stage), Stage::Over);
        match (stage, self.cancel) {
            (Stage::Fresh(fut), Cancel::Finish) if start => {
                self.rt.spawn(async move {
                    let _ = fut.await;
                });
                false
            }
            (Stage::Fresh(fut), _) => {
                // Never polled: it sent nothing.
                let _inside = self.rt.enter();
                drop(fut);
                false
            }
            (Stage::Running | Stage::Trio { .. }, Cancel::Drop) => self.cell.abandon(&self.rt),
            (Stage::Running | Stage::Trio { .. }, Cancel::Finish) => {
                // Runs to its end, its result unseen.
                let mut inner = locked(&self.cell.inner);
                inner.outcome = None;
                inner.phase = if inner.phase == Phase::Running { Phase::Undoing } else { Phase::Settled };
                false
            }
            (Stage::Cancelling { .. } | Stage::Over, _) => false,
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
    /// (a release still completes). While what the operation started is
    /// being undone, the coroutine first waits for that (yields), and
    /// raises `exc` once it is over.
    #[pyo3(signature = (exc, value=None, _tb=None))]
    fn throw(
        &self,
        py: Python<'_>,
        exc: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let cancelling = matches!(*locked(&self.stage), Stage::Cancelling { .. });
        let undoing = self.abandon(true) || (cancelling && !self.cell.is_settled());
        let error = if exc.is_instance_of::<PyType>() {
            let instance = match value.filter(|v| !v.is_none()) {
                Some(v) if v.is_instance(exc)? => v.clone(),
                Some(v) => exc.call1((v,))?,
                None => exc.call0()?,
            };
            PyErr::from_value(instance)
        } else {
            PyErr::from_value(exc.clone())
        };
        if !undoing {
            return Err(error);
        }
        match self.park_cancelled(py) {
            Ok(waiting) => {
                *locked(&self.stage) = Stage::Cancelling { error };
                Ok(waiting)
            }
            // No asyncio loop to wait in: raised at once, the undo goes on.
            Err(_) => Err(error),
        }
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
