//! Waiting under gevent or eventlet. Once either has monkey-patched the
//! process, a blocking call must not block the OS thread: the hub (the loop
//! that runs every greenlet) runs on that thread too, so the greenlet holding
//! a lock would never run to release it. There, a call's future is polled on
//! the calling thread, as `runtime::wait` does, but between two polls the
//! greenlet waits in the hub for a file descriptor that the future's waker
//! makes readable (`python/ferrolock/_green.py` picks the hub's wait: gevent's
//! `wait_read`, eventlet's `trampoline`). No OS thread is kept per waiter.
//!
//! The future lives on the heap, never on the greenlet's stack: while the
//! greenlet is switched out its stack is copied away and the memory reused by
//! other greenlets, and tokio's threads keep pointers into a pending future
//! (timer entries, waiter nodes of its intrusive lists).
//!
//! What the hub raises into the wait (`greenlet.kill()`, `gevent.Timeout`,
//! Ctrl-C reaching the waiting greenlet) is handled as Ctrl-C is by
//! `runtime::wait_interruptible`: an interruptible wait drops its future inside
//! the runtime, waits (cooperatively) for the clean-ups that starts, then
//! raises; any other call completes first (it is bounded by the command
//! timeout) and raises then.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tokio::runtime::Runtime;

use crate::client::Client;
use crate::error::Result;

use super::errors::internal_error;
use super::task::{abandon, contained};

/// The hub's wait for a readable file descriptor, when gevent or eventlet has
/// patched this process and the caller is a greenlet other than the hub;
/// `None` otherwise (the call then blocks its thread, as without them). A
/// look-up in `sys.modules` when neither is imported.
pub(super) fn hub_wait(py: Python<'_>) -> PyResult<Option<Bound<'_, PyAny>>> {
    static MODULES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    static WAITER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let modules = MODULES.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("sys")?.getattr("modules")?.cast_into::<PyDict>()?.unbind())
    })?;
    let modules = modules.bind(py);
    if !modules.contains("gevent.monkey")? && !modules.contains("eventlet.patcher")? {
        return Ok(None);
    }
    let waiter = WAITER
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("ferrolock._green")?.getattr("waiter")?.unbind()))?;
    let wait = waiter.bind(py).call0()?;
    Ok((!wait.is_none()).then_some(wait))
}

/// `runtime::wait` for a greenlet: `fut` runs to its end whatever the hub
/// raises meanwhile (still cooperatively after a first exception; after a
/// second, blocking the thread: it is bounded by the command timeout), and
/// the first exception is raised then.
pub(super) fn wait<F, T>(py: Python<'_>, hub: &Bound<'_, PyAny>, rt: &Runtime, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let mut fut = Box::pin(contained(fut));
    let mut raised = None;
    let outcome = loop {
        match drive(py, hub, rt, fut.as_mut()) {
            Ok(outcome) => break outcome,
            Err(e) if raised.is_none() => raised = Some(e),
            Err(_) => break super::exit::detach(py, || rt.block_on(fut.as_mut())),
        }
    };
    raised.map_or(outcome, Err)
}

/// `runtime::wait_interruptible` for a greenlet: the call runs as `task` on
/// the runtime (so a greenlet that keeps the hub busy never stops a fair
/// waiter's re-asserts), and the greenlet waits in the hub for its end. What
/// the hub raises into the wait aborts the task (its guards start undoing
/// what it did in Redis; a result it had reached already goes to `undo`),
/// and is raised once those clean-ups are done (at most the command timeout,
/// waited for cooperatively too).
pub(super) fn wait_interruptible<T, U, UF>(
    py: Python<'_>,
    hub: &Bound<'_, PyAny>,
    rt: &Runtime,
    client: &Client,
    task: tokio::task::JoinHandle<PyResult<T>>,
    undo: U,
) -> PyResult<T>
where
    T: Send + 'static,
    U: FnOnce(T) -> UF + Send,
    UF: Future<Output = ()> + Send,
{
    let mut task = task;
    let raised = match drive(py, hub, rt, Pin::new(&mut task)) {
        Ok(joined) => return joined.unwrap_or_else(|e| Err(internal_error(&e))),
        Err(raised) => raised,
    };
    let mut abandoned = Box::pin(abandon(task, client, undo));
    // A second exception stops this wait only: the clean-ups go on in the runtime.
    let _ = drive(py, hub, rt, abandoned.as_mut());
    Err(raised)
}

/// Polls `fut` (on the heap: see above; the GIL released) until it is
/// ready, letting the hub run other greenlets between polls until the
/// future's waker rings. `Err`: what the hub raised into the wait, with `fut`
/// still pending.
fn drive<F>(py: Python<'_>, hub: &Bound<'_, PyAny>, rt: &Runtime, mut fut: Pin<&mut F>) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let (bell, rx) = Bell::new()?;
    let waker = Waker::from(bell.clone());
    loop {
        // Cleared before the poll: a wake-up during it rings again.
        bell.rung.store(false, Ordering::SeqCst);
        let polled = super::exit::detach(py, || {
            let _inside = rt.enter();
            fut.as_mut().poll(&mut Context::from_waker(&waker))
        });
        if let Poll::Ready(out) = polled {
            return Ok(out);
        }
        hub.call1((rx.as_raw_fd(),))?;
        drain(&rx);
    }
}

/// A waker that makes a socket readable, for the hub to watch.
struct Bell {
    rung: AtomicBool,
    tx: UnixStream,
}

impl Bell {
    /// The bell and the end the hub watches.
    fn new() -> PyResult<(Arc<Bell>, UnixStream)> {
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok((Arc::new(Bell { rung: AtomicBool::new(false), tx }), rx))
    }
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.rung.swap(true, Ordering::SeqCst) {
            // Full only if unread bytes are there already: the hub wakes all the same.
            let _ = (&self.tx).write(&[1]);
        }
    }
}

/// Empties the watched end, so the next wait in the hub waits for a new ring.
fn drain(mut rx: &UnixStream) {
    let mut buf = [0u8; 64];
    while matches!(rx.read(&mut buf), Ok(n) if n == buf.len()) {}
}
