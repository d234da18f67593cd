//! The native side of `ferrolock.compat`: a `ferrolock.Lock` handle on a
//! plain hold (one string key, its value the owner's token), the key
//! redis-py's `Lock` or python-redis-lock uses, and the operator's steps on
//! such a key. The classes with those libraries' shapes are Python
//! (`python/ferrolock/compat/`).

use pyo3::prelude::*;

use crate::handle::lock::{Lock, LockOptions, PlainHold};

use super::args;
use super::client::PyClient;
use super::lock::PyLock;
use super::options::on_lost_callback;
use super::retry::PyRetry;
use super::runtime::{blocking_io, wait};
use super::state::LockInfo;

/// The hold at `key` as `hold_of` reads it from Python.
fn hold_of(
    key: &Bound<'_, PyAny>,
    signal: Option<(String, f64)>,
    wake: bool,
    expires: bool,
) -> PyResult<PlainHold> {
    let key = args::text("key", key)?;
    crate::handle::lock::check_name(&key)?;
    let signal = match signal {
        Some((list, expire)) if expire.is_finite() && expire >= 0.001 => {
            Some((list, (expire * 1000.0) as u64))
        }
        Some((_, expire)) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "signal_expire must be at least 0.001 seconds, got {expire}"
            )))
        }
        None => None,
    };
    Ok(PlainHold { key, signal, wake, expires })
}

/// _plain_lock(client, key, *, ttl=None, token=None, adopt=False, auto_renew=False, on_lost=None, retry=None, signal=None, wake=True)
/// --
///
/// A ``Lock`` handle on the plain hold at ``key``: the string key itself,
/// no prefix, its value the owner's token. ``ttl``: seconds (``None``:
/// taken without expiry, never renewed). ``token``: the token every hold
/// of the handle takes (``None``: a fresh one each); with ``adopt``, the
/// handle starts out holding it. ``signal``: ``(list, expire_seconds)``,
/// python-redis-lock's signal list, pushed by each release. ``wake``:
/// ferrolock's waiters are woken on a channel of the key's (else they poll
/// on ``retry``).
#[pyfunction]
#[pyo3(signature = (
    client, key, *, ttl=None, token=None, adopt=false, auto_renew=false, on_lost=None, retry=None,
    signal=None, wake=true,
))]
#[expect(clippy::too_many_arguments)]
pub(super) fn _plain_lock(
    client: &Bound<'_, PyClient>,
    key: &Bound<'_, PyAny>,
    ttl: Option<&Bound<'_, PyAny>>,
    token: Option<&Bound<'_, PyAny>>,
    adopt: bool,
    auto_renew: bool,
    on_lost: Option<&Bound<'_, PyAny>>,
    retry: Option<&Bound<'_, PyRetry>>,
    signal: Option<(String, f64)>,
    wake: bool,
) -> PyResult<PyLock> {
    let ttl = args::optional_seconds("ttl", ttl)?;
    let defaults = LockOptions::default();
    let opts = LockOptions {
        ttl: ttl.unwrap_or(defaults.ttl),
        auto_renew,
        retry: retry.map_or(defaults.retry, |r| r.get().inner.clone()),
        on_lost: on_lost_callback(on_lost)?,
        ..defaults
    };
    let hold = hold_of(key, signal, wake, ttl.is_some())?;
    let token = args::optional_text("token", token)?;
    let core = Lock::plain(client.get().core.clone(), hold, opts, token, adopt)?;
    // redis-py and python-redis-lock let a holder drop its lock object: the hold runs out in Redis.
    Ok(PyLock::from_core(core, client, None).quietly_dropped())
}

/// _plain_force_release(client, key, *, signal=None)
/// --
///
/// Ends the plain hold at ``key`` whoever holds it (python-redis-lock's
/// ``reset``), pushing the signal list as a release does. Returns whether
/// a hold was there.
#[pyfunction]
#[pyo3(signature = (client, key, *, signal=None))]
pub(super) fn _plain_force_release(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    key: &Bound<'_, PyAny>,
    signal: Option<(String, f64)>,
) -> PyResult<bool> {
    let (hold, deployment) = (hold_of(key, signal, true, true)?, client.get().core.via(blocking_io(py)));
    wait(py, async move { hold.force_release(&deployment).await })
}

/// _plain_inspect(client, key)
/// --
///
/// Who holds the plain hold at ``key``: a ``LockInfo`` named ``key`` (the
/// key's value as its token, ``fence`` 0: none is stored), or ``None``.
#[pyfunction]
pub(super) fn _plain_inspect(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    key: &Bound<'_, PyAny>,
) -> PyResult<Option<LockInfo>> {
    let (hold, deployment) = (hold_of(key, None, false, true)?, client.get().core.via(blocking_io(py)));
    wait(py, async move {
        let found = hold.holder(&deployment).await?;
        Ok(found.map(|r| LockInfo::new(hold.key, r)))
    })
}
