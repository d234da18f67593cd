//! A `Lock` handle's pieces shared by `with` and `async with`: its names
//! read from Python, the blocking acquire, the undo of an acquire nobody
//! received, and the end of a block.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::lock::{Lock, Wait};

use super::super::args;
use super::super::errors::LockLost;
use super::super::runtime::{runtime, wait, wait_interruptible};

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
/// call: it runs inline (see `wait`).
pub(super) fn acquire_blocking(py: Python<'_>, core: &Arc<Lock>, wait_for: Wait) -> PyResult<bool> {
    if wait_for == Wait::No {
        return wait(py, core.acquire(wait_for));
    }
    wait_interruptible(py, core.client(), core.acquire(wait_for))
}

/// Gives back a hold whose acquire nobody received (its awaiter was cancelled).
pub(super) fn undo_acquire(core: &Arc<Lock>) -> Box<dyn FnOnce() + Send> {
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
