//! The options every lock handle takes (`Lock(...)`, `RWMutex.read(...)`,
//! `RWMutex.write(...)`), checked in one place.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::lock::{LockOptions, LostCallback};

use super::args;
use super::retry::PyRetry;
use super::runtime::call_soon;

/// The keyword arguments a handle accepts.
pub const NAMES: [&str; 8] =
    ["ttl", "auto_renew", "blocking_timeout", "retry", "metadata", "token", "on_lost", "fair"];

pub struct HandleOptions {
    pub lock: LockOptions,
    /// How long `with` / `async with` wait (None: forever).
    pub blocking_timeout: Option<Duration>,
    /// Restore a hold taken elsewhere.
    pub token: Option<String>,
}

impl HandleOptions {
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        ttl: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        fair: bool,
        blocking_timeout: Option<&Bound<'_, PyAny>>,
        retry: Option<&Bound<'_, PyRetry>>,
        metadata: Option<&Bound<'_, PyAny>>,
        token: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<HandleOptions> {
        let defaults = LockOptions::default();
        let lock = LockOptions {
            ttl: args::optional_seconds("ttl", ttl)?.unwrap_or(defaults.ttl),
            auto_renew,
            fair,
            retry: retry.map_or(defaults.retry, |r| r.get().inner.clone()),
            metadata: args::optional_text("metadata", metadata)?,
            on_lost: on_lost_callback(on_lost)?,
        };
        Ok(HandleOptions {
            lock,
            blocking_timeout: wait_limit(blocking_timeout)?,
            token: args::optional_text("token", token)?,
        })
    }

    /// From keyword arguments: `defaults` overridden by `overrides`.
    pub fn from_kwargs(
        defaults: &Bound<'_, PyDict>,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<HandleOptions> {
        let merged = defaults.copy()?;
        if let Some(o) = overrides {
            merged.update(o.as_mapping())?;
        }
        for key in merged.keys() {
            let key: String = key.extract()?;
            if !NAMES.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!("unexpected keyword argument {key:?}")));
            }
        }
        let get = |k: &str| merged.get_item(k).ok().flatten().filter(|v| !v.is_none());
        let flag = |name: &str, default: bool| match get(name) {
            None => Ok(default),
            Some(v) if v.is_instance_of::<PyBool>() => v.is_truthy(),
            Some(_) => Err(PyTypeError::new_err(format!("{name} must be bool"))),
        };
        let (auto_renew, fair) = (flag("auto_renew", true)?, flag("fair", false)?);
        let retry = match get("retry") {
            None => None,
            Some(v) => Some(
                v.cast_into::<PyRetry>()
                    .map_err(|_| PyTypeError::new_err("retry must be a ferrolock.Retry"))?,
            ),
        };
        Self::parse(
            get("ttl").as_ref(),
            auto_renew,
            fair,
            get("blocking_timeout").as_ref(),
            retry.as_ref(),
            get("metadata").as_ref(),
            get("token").as_ref(),
            get("on_lost").as_ref(),
        )
    }
}

fn wait_limit(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let t = args::number("blocking_timeout", v)?;
    if !(t.is_finite() && t >= 0.0) {
        return Err(PyValueError::new_err(format!(
            "blocking_timeout must be a non-negative, finite number of seconds or None, got {t}"
        )));
    }
    Duration::try_from_secs_f64(t)
        .map(Some)
        .map_err(|_| PyValueError::new_err(format!("blocking_timeout is out of range: {t}")))
}

/// `on_lost` is called once, with no arguments, on a thread of its own.
fn on_lost_callback(f: Option<&Bound<'_, PyAny>>) -> PyResult<Option<LostCallback>> {
    let Some(f) = f.filter(|f| !f.is_none()) else {
        return Ok(None);
    };
    if !f.is_callable() {
        return Err(PyTypeError::new_err("on_lost must be callable"));
    }
    let f = Arc::new(f.clone().unbind());
    Ok(Some(Arc::new(move |_why: &str| {
        let f = f.clone();
        call_soon(move |py| {
            if let Err(e) = f.call0(py) {
                e.write_unraisable(py, Some(f.bind(py)));
            }
        });
    })))
}
