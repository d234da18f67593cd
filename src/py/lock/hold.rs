//! A `Lock` handle's plumbing shared by its methods, `with` and `async with`:
//! making one, its names read from Python, the blocking acquire, the undo of
//! an acquire nobody received, and the end of a block.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyResourceWarning;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::handle::lock::{Lock, Wait};

use super::super::args;
use super::super::client::PyClient;
use super::super::coro::Undo;
use super::super::errors::LockLost;
use super::super::errors::LockNotAcquired;
use super::super::events::in_caller_context;
use super::super::exit::exiting;
use super::super::runtime::{blocking_io, wait, wait_interruptible};
use super::PyLock;

/// A lock name, or a list or tuple of names (a multi-lock).
pub(super) fn names_of(name: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if name.is_instance_of::<PyString>() {
        return Ok(vec![args::name(name)?]);
    }
    if name.is_instance_of::<pyo3::types::PyList>() || name.is_instance_of::<PyTuple>() {
        return name.try_iter()?.map(|n| args::name(&n?)).collect();
    }
    args::name(name).map(|n| vec![n])
}

/// A blocking acquire that Ctrl-C interrupts, leaving no lock behind. One
/// attempt without waiting is bounded by the command timeout, as any other
/// call: it runs inline (`Io::Inline`, see `wait`); a waiting one goes
/// through the runtime (`wait_interruptible`: once it waits, as a task of
/// the runtime, which keeps a fair waiter's place whatever this thread
/// waits for), and a hold it took just as Ctrl-C came is given back. Its
/// events carry the caller's context.
pub(super) fn acquire_blocking(py: Python<'_>, core: &Arc<Lock>, wait_for: Wait) -> PyResult<bool> {
    if wait_for == Wait::No {
        return wait(py, in_caller_context(py, core.via(blocking_io(py)).acquire(wait_for)));
    }
    let (taker, undo) = (core.clone(), core.clone());
    let take = in_caller_context(py, async move { taker.acquire(wait_for).await });
    wait_interruptible(py, core.client(), take, |taken| async move {
        if taken {
            let _ = undo.release().await;
        }
    })
}

/// Gives back a hold whose acquire nobody received (its awaiter was
/// cancelled): the operation awaits it before reporting the cancellation.
pub(super) fn undo_acquire(core: &Arc<Lock>) -> Undo {
    let core = core.clone();
    Box::new(move || {
        Box::pin(async move {
            let _ = core.release().await;
        })
    })
}

/// The end of a `with` block. A lost hold raises `LockLost`, unless the body
/// raised an exception of its own: that one propagates (Ctrl-C stays Ctrl-C),
/// with a note saying the lock was lost too.
pub(super) fn finish(core: &Lock, released: PyResult<()>, body_raised: Option<Py<PyAny>>) -> PyResult<bool> {
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
            warn_unreleased: true,
        }
    }

    /// This handle, dropped while it holds without a warning.
    pub(crate) fn quietly_dropped(mut self) -> PyLock {
        self.warn_unreleased = false;
        self
    }

    /// The core handle (an election's term is one).
    pub(crate) fn core(&self) -> &Arc<Lock> {
        &self.core
    }

    /// One attempt, no waiting (`try_read` / `try_write`).
    pub(crate) fn take_now(&self, py: Python<'_>) -> PyResult<bool> {
        acquire_blocking(py, &self.core, Wait::No)
    }

    fn label(&self) -> String {
        format!("lock {:?}", self.core.names().join(", "))
    }

    /// How long `with` / `async with` wait: the handle's `blocking_timeout`.
    pub(super) fn entry_wait(&self) -> PyResult<Wait> {
        args::wait(None, None, self.blocking_timeout)
    }

    /// How long `acquire(blocking, timeout)` waits (`timeout=None`: the
    /// handle's `blocking_timeout`).
    pub(super) fn call_wait(
        &self,
        blocking: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Wait> {
        args::wait(blocking, timeout, self.blocking_timeout)
    }

    /// What a `with` that did not take the lock says.
    pub(super) fn not_acquired(&self) -> NotAcquired {
        NotAcquired {
            label: self.label(),
            within: self.blocking_timeout,
            attempts: self.core.options().retry.attempts,
        }
    }
}

/// The `LockNotAcquired` of a `with` / `async with` that did not take the
/// lock: the wait ran out, or else the retry strategy's attempts did.
pub(super) struct NotAcquired {
    label: String,
    within: Option<Duration>,
    attempts: Option<u32>,
}

impl NotAcquired {
    /// The error, for an acquire that waited with `waited` and returned
    /// `False` now.
    pub(super) fn error(&self, waited: Wait) -> PyErr {
        let why = match (self.attempts, !waited.expired()) {
            (Some(n), true) => {
                let tries = if n == 1 { "its only attempt".to_string() } else { format!("all {n} attempts") };
                let before = self.within.map_or(String::new(), |d| {
                    format!(", before blocking_timeout ({} s) passed", d.as_secs_f64())
                });
                format!(": the retry strategy gave up after {tries}{before} (see Retry's attempts)")
            }
            _ => self.within.map_or(String::new(), |d| format!(" within {} s", d.as_secs_f64())),
        };
        LockNotAcquired::new_err(format!("{} was not acquired{why}", self.label))
    }
}

/// A handle dropped while it holds: a `ResourceWarning` naming the lock, as
/// an unclosed file or socket gives. Dropping the handle drops the core's,
/// which stops the renewal; the hold stays in Redis until its ttl runs out.
/// (A restored hold not yet adopted is its owner's: no warning; nor at
/// interpreter exit, where every handle goes.)
impl Drop for PyLock {
    fn drop(&mut self) {
        if !self.warn_unreleased || !self.core.is_held() || self.core.is_restored() || exiting() {
            return;
        }
        let message = format!(
            "unreleased ferrolock.Lock {:?} was garbage-collected while holding it: its renewal stops \
             and the name stays held in Redis until its ttl runs out ({} s); release it, or hold it \
             in a `with` block",
            self.core.names().join(", "),
            self.core.options().ttl.as_secs_f64()
        );
        Python::attach(|py| {
            let Ok(message) = std::ffi::CString::new(message) else { return };
            let category = py.get_type::<PyResourceWarning>();
            if let Err(e) = PyErr::warn(py, &category, &message, 1) {
                e.write_unraisable(py, None);
            }
        });
    }
}
