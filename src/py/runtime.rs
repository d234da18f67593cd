//! The tokio runtime behind every call, and the two ways Python waits on it.
//! One runtime per process: after `os.fork()` the child builds its own (the
//! parent's worker threads do not exist there).

use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3_async_runtimes::{generic, TaskLocals};
use tokio::runtime::Runtime;

use crate::client::Client;
use crate::error::Result;

use super::errors::internal_error;

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// How often a blocked `acquire` looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

pub fn runtime() -> Arc<Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((owner, rt)) = &*slot {
        if *owner == pid {
            return rt.clone();
        }
    }
    if let Some(stale) = slot.take() {
        // The parent's runtime: its threads are gone, and shutting it down would wait for them.
        std::mem::forget(stale);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ferrolock")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime"),
    );
    *slot = Some((pid, rt.clone()));
    rt
}

/// Runs `fut` with the GIL released until it ends (use for steps bounded by
/// the command timeout). The future is polled on the calling thread, so a
/// reply wakes this thread directly rather than through another task.
pub fn wait<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let rt = runtime();
    py.detach(|| rt.block_on(contained(fut)))
}

/// Like `wait`, for waits of any length: looks for signals every 50 ms. On
/// one (Ctrl-C) it drops `fut` inside the runtime, so the future's own guards
/// start undoing what it did in Redis (a hold granted in flight, a writer's
/// intent, a place in a queue, the wake-up subscription), and waits for those
/// clean-ups (at most the command timeout) before the exception is raised.
pub fn wait_interruptible<F, T>(py: Python<'_>, client: &Client, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let rt = runtime();
    let mut fut = Box::pin(contained(fut));
    let interrupted = loop {
        // A timeout polls the future first: when it elapses, `fut` has not finished.
        let polled = py.detach(|| rt.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut fut).await }));
        if let Ok(result) = polled {
            return result;
        }
        if let Err(signal) = py.check_signals() {
            break signal;
        }
    };
    {
        let _inside = rt.enter();
        drop(fut);
    }
    let limit = client.options().command_timeout;
    py.detach(|| rt.block_on(async { tokio::time::timeout(limit, client.settle()).await })).unwrap_or(());
    Err(interrupted)
}

/// `fut`'s result as a Python one; a panic inside becomes a `LockError`
/// rather than unwinding into Python.
async fn contained<F, T>(fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T>>,
{
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result.map_err(PyErr::from),
        Err(panic) => Err(internal_error(&panic_message(&*panic))),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<&str>().map(|s| (*s).to_string());
    text.or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}

/// Hands our runtime to pyo3-async-runtimes.
pub struct Rt;

tokio::task_local! {
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

impl generic::Runtime for Rt {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = tokio::task::JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        runtime().spawn(fut)
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        runtime().spawn_blocking(f)
    }
}

impl generic::ContextExt for Rt {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS.try_with(|c| c.get().cloned()).unwrap_or_default()
    }
}

/// An asyncio awaitable running `fut` on our runtime. Cancelling it drops `fut`.
pub fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    generic::future_into_py::<Rt, F, T>(py, fut)
}

/// Like `awaitable`, for a step whose success must not go unseen (an
/// acquire): `fut` yields its value and whether it needs undoing if nobody
/// receives it. The value is handed over on the event loop's own thread; if
/// the awaiting future was cancelled by then, `undo` runs instead, so a
/// cancellation landing just after Redis granted the lock leaves nothing.
pub fn awaitable_or_undo<'py, F, T, U>(py: Python<'py>, fut: F, undo: U) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<(T, bool)>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    U: FnOnce() + Send + 'static,
{
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let target = event_loop.call_method0("create_future")?;
    let cancelled = Arc::new(tokio::sync::Notify::new());
    target.call_method1("add_done_callback", (OnCancel { cancelled: cancelled.clone() },))?;
    let (event_loop, handoff) = (event_loop.unbind(), target.clone().unbind());
    runtime().spawn(async move {
        let outcome = tokio::select! {
            biased;
            () = cancelled.notified() => return, // drops `fut`, which is cancel-safe
            outcome = fut => outcome,
        };
        call_soon(move |py| {
            let needs_undo = matches!(outcome, Ok((_, true)));
            let undo: Option<Box<dyn FnOnce() + Send>> = needs_undo.then(|| Box::new(undo) as Box<_>);
            let outcome = outcome.and_then(|(value, _)| value.into_py_any(py));
            let delivery =
                Delivery { target: handoff, outcome: Mutex::new(Some(outcome)), undo: Mutex::new(undo) };
            let Ok(delivery) = Py::new(py, delivery) else {
                return;
            };
            if event_loop.call_method1(py, "call_soon_threadsafe", (delivery.clone_ref(py),)).is_err() {
                // The loop is closed: nobody will ever receive the value.
                delivery.get().undo();
            }
        });
    });
    Ok(target)
}

#[pyclass(frozen)]
struct OnCancel {
    cancelled: Arc<tokio::sync::Notify>,
}

#[pymethods]
impl OnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0("cancelled")?.is_truthy()? {
            self.cancelled.notify_one();
        }
        Ok(())
    }
}

/// Sets the awaited future's outcome, on the loop's thread; undoes it instead
/// when that future was cancelled.
#[pyclass(frozen)]
struct Delivery {
    target: Py<PyAny>,
    outcome: Mutex<Option<PyResult<Py<PyAny>>>>,
    undo: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Delivery {
    fn undo(&self) {
        if let Some(undo) = self.undo.lock().unwrap().take() {
            undo();
        }
    }
}

#[pymethods]
impl Delivery {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some(outcome) = self.outcome.lock().unwrap().take() else {
            return Ok(());
        };
        let target = self.target.bind(py);
        if target.call_method0("done")?.is_truthy()? {
            self.undo();
            return Ok(());
        }
        match outcome {
            Ok(value) => target.call_method1("set_result", (value,))?,
            Err(e) => target.call_method1("set_exception", (e.into_value(py),))?,
        };
        Ok(())
    }
}

/// Set once the interpreter is exiting: no callback into Python after that.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Registered with `atexit`: from now on, losses and log records are not
/// reported into an interpreter that is finalizing (holds simply expire).
#[pyfunction]
pub fn _at_exit() {
    EXITING.store(true, Ordering::SeqCst);
    log::set_max_level(log::LevelFilter::Off);
}

/// Whether the interpreter is exiting (nothing may call into it any more).
pub fn exiting() -> bool {
    EXITING.load(Ordering::SeqCst)
}

/// Runs a Python callable on a blocking thread (never on a runtime worker).
pub fn call_soon<F>(f: F)
where
    F: FnOnce(Python<'_>) + Send + 'static,
{
    if EXITING.load(Ordering::SeqCst) {
        return;
    }
    runtime().spawn_blocking(move || {
        if !EXITING.load(Ordering::SeqCst) {
            Python::attach(f);
        }
    });
}
