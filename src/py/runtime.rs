//! The tokio runtime behind every call, and how a blocking call waits on it
//! (an asyncio call is a coroutine: see `coro`; under gevent or eventlet, a
//! greenlet waits in the hub: see `green`).
//! One runtime per process (`PerProcess`): after `os.fork()` the child
//! builds its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::client::Client;
use crate::error::Result;
use crate::support::per_process::PerProcess;
use crate::transport::conn::Io;

use super::errors::internal_error;
use super::exit::{detach, exiting, InFlight};
use super::task::{abandon, contained};

static RUNTIME: PerProcess<Arc<Runtime>> = PerProcess::new();

/// How often a blocked `acquire` looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// This process's runtime (a forked child builds its own: its parent's
/// worker threads do not exist there, and shutting that one down would wait
/// for them).
pub(crate) fn runtime() -> Arc<Runtime> {
    RUNTIME.get(|| {
        Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ferrolock")
                .enable_all()
                .build()
                .expect("cannot start the tokio runtime"),
        )
    })
}

/// The I/O of a blocking call made now: inline on the calling thread
/// (`Io::Inline`, see `wait`), except where gevent or eventlet patched the
/// process: a greenlet's commands go through the runtime, so the hub keeps
/// running while they are answered (`green`).
pub(crate) fn blocking_io(py: Python<'_>) -> Io {
    match super::green::hub_wait(py) {
        Ok(Some(_)) => Io::Multiplexed,
        _ => Io::Inline,
    }
}

/// Runs `fut` with the GIL released until it ends (use for steps bounded by
/// the command timeout). The future is polled on the calling thread, which
/// blocks on it: made on an `Io::Inline` view (`Lock::via`, `Election::via`,
/// `Client::via`), its commands go out and their replies come in on this
/// thread too, a round trip costing one write and one read here, with no
/// runtime thread woken in between. What it spawns runs on the runtime.
pub(crate) fn wait<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let rt = runtime();
    if let Some(hub) = super::green::hub_wait(py)? {
        return super::green::wait(py, &hub, &rt, fut);
    }
    detach(py, || rt.block_on(contained(fut)))
}

/// Like `wait`, for waits of any length (give it a multiplexed future: its
/// commands then go through the runtime, so a reply held up never delays
/// that). The first 50 ms are polled on the calling thread, as `wait` does,
/// so a call that ends at once (a free lock) wakes no runtime thread; a call
/// still pending then goes on as a task of the runtime, so its attempts, a
/// fair waiter's re-asserts of its place and a hand-over's claim go on
/// whatever this thread waits for meanwhile (the GIL, which another thread
/// or a garbage collection may keep for seconds). This thread looks for
/// signals every 50 ms. On one (Ctrl-C) the task is aborted (dropped inside
/// the runtime, so the future's own guards start undoing what it did in
/// Redis: a hold granted in flight, a writer's intent, a place in a queue,
/// the wake-up subscription); a result it reached before it could be
/// stopped is given to `undo` (an acquire gives its hold back); and those
/// clean-ups are waited for (at most the command timeout) before the
/// exception is raised.
pub(crate) fn wait_interruptible<F, T, U, UF>(py: Python<'_>, client: &Client, fut: F, undo: U) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
    U: FnOnce(T) -> UF + Send,
    UF: Future<Output = ()> + Send,
{
    let rt = runtime();
    let fut = contained(fut);
    if let Some(hub) = super::green::hub_wait(py)? {
        return super::green::wait_interruptible(py, &hub, &rt, client, rt.spawn(fut), undo);
    }
    let mut fut = Box::pin(fut);
    let first =
        detach(py, || match rt.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut fut).await }) {
            Ok(result) => Ok(result),
            // Handed to the runtime before this thread asks for the GIL again.
            Err(_) => Err(rt.spawn(fut)),
        });
    let mut task = match first {
        Ok(result) => return result,
        Err(task) => task,
    };
    let interrupted = loop {
        if let Err(signal) = py.check_signals() {
            break signal;
        }
        let polled = detach(py, || rt.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut task).await }));
        if let Ok(joined) = polled {
            return joined.unwrap_or_else(|e| Err(internal_error(&e)));
        }
    };
    detach(py, || rt.block_on(abandon(task, client, undo)));
    Err(interrupted)
}

/// Runs a Python callable on a blocking thread (never on a runtime worker).
pub(crate) fn call_soon<F>(f: F)
where
    F: FnOnce(Python<'_>) + Send + 'static,
{
    if exiting() {
        return;
    }
    let in_flight = InFlight::enter();
    runtime().spawn_blocking(move || {
        let _in_flight = in_flight;
        if !exiting() {
            Python::attach(f);
        }
    });
}
