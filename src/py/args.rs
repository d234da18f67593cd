//! Python arguments checked and turned into core values, with messages that
//! name the argument and what was wrong with it.

use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::handle::lock::Wait;

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
}

/// A real number of seconds (int or float, not bool).
pub(crate) fn number(what: &str, v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>()) {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a number of seconds, got {}",
            type_name(v)
        )));
    }
    let x: f64 = v.extract().map_err(|_| PyValueError::new_err(format!("{what} is out of range")))?;
    if x.is_nan() {
        return Err(PyValueError::new_err(format!("{what} must be a number of seconds, got NaN")));
    }
    Ok(x)
}

/// A positive, finite number of seconds.
pub(crate) fn seconds(what: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let x = number(what, v)?;
    if !x.is_finite() || x <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a positive, finite number of seconds, got {x}"
        )));
    }
    Duration::try_from_secs_f64(x).map_err(|_| PyValueError::new_err(format!("{what} is out of range: {x}")))
}

/// `None` or a positive, finite number of seconds.
pub(crate) fn optional_seconds(what: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => seconds(what, v).map(Some),
    }
}

/// `None` (0) or a count: an int (not bool), 0 or more.
pub(crate) fn count(what: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(0);
    };
    let n = int(what, v)?;
    if n < 0 {
        return Err(PyValueError::new_err(format!("{what} must be 0 (off) or more, got {n}")));
    }
    u32::try_from(n).map_err(|_| PyValueError::new_err(format!("{what} is out of range: {n}")))
}

/// An int (not bool).
pub(crate) fn int(what: &str, v: &Bound<'_, PyAny>) -> PyResult<i128> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(v))));
    }
    v.extract().map_err(|_| PyValueError::new_err(format!("{what} is out of range")))
}

/// A str lock name, valid Unicode.
pub(crate) fn name(v: &Bound<'_, PyAny>) -> PyResult<String> {
    text("lock name", v)
}

pub(crate) fn text(what: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let s = v
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be str, got {}", type_name(v))))?;
    s.to_cow().map(std::borrow::Cow::into_owned).map_err(|_| {
        PyValueError::new_err(format!("{what} must be valid Unicode (it holds a lone surrogate)"))
    })
}

/// `None`, or a str as `text` takes it.
pub(crate) fn optional_text(what: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match v {
        Some(v) if !v.is_none() => text(what, v).map(Some),
        _ => Ok(None),
    }
}

/// `acquire`'s `blocking`: a `bool`, or the int 0 or 1 (as `threading.Lock`
/// takes them); `None` (not given) is `True`.
pub(crate) fn blocking(v: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(true);
    };
    if v.is_instance_of::<PyBool>() {
        return v.is_truthy();
    }
    if v.is_instance_of::<PyInt>() {
        return match v.extract::<i64>() {
            Ok(0) => Ok(false),
            Ok(1) => Ok(true),
            _ => Err(PyValueError::new_err(format!(
                "blocking must be True or False (or 1 / 0), got {}",
                v.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))),
        };
    }
    Err(PyTypeError::new_err(format!("blocking must be a bool (or 1 / 0), got {}", type_name(v))))
}

/// `threading.Lock.acquire(blocking, timeout)` semantics, but a `timeout` of
/// `None` (not given) waits up to the handle's `blocking_timeout`
/// (`default`, forever when it is `None`), as redis-py's `Lock.acquire`
/// does; `-1` always waits forever.
pub(crate) fn wait(
    blocking: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
    default: Option<Duration>,
) -> PyResult<Wait> {
    let blocking = self::blocking(blocking)?;
    let timeout = match timeout {
        None => None,
        Some(t) if t.is_none() => None,
        Some(t) => Some(number("timeout", t)?),
    };
    match (blocking, timeout) {
        (false, Some(t)) if t != -1.0 => {
            Err(PyValueError::new_err("can't specify a timeout for a non-blocking call"))
        }
        (false, _) => Ok(Wait::No),
        (true, None) => default.map_or(Ok(Wait::Forever), |d| deadline(d.as_secs_f64())),
        (true, Some(-1.0)) => Ok(Wait::Forever),
        (true, Some(t)) if t < 0.0 => Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds, or -1 / None to wait forever; got {t}"
        ))),
        (true, Some(t)) if !t.is_finite() => {
            Err(PyValueError::new_err("timeout must be finite; use -1 or None to wait forever"))
        }
        (true, Some(t)) if t > TIMEOUT_MAX => Err(PyOverflowError::new_err(format!(
            "timeout value is too large: {t} (the longest is {TIMEOUT_MAX} s, as `threading.TIMEOUT_MAX`)"
        ))),
        (true, Some(t)) => deadline(t),
    }
}

/// The longest finite timeout, as `threading.TIMEOUT_MAX`: longer ones raise
/// `OverflowError`, as `threading.Lock.acquire` does.
pub(crate) const TIMEOUT_MAX: f64 = 9_223_372_036.0;

pub(crate) fn deadline(t: f64) -> PyResult<Wait> {
    Duration::try_from_secs_f64(t)
        .ok()
        .and_then(|d| Instant::now().checked_add(d))
        .map(Wait::Until)
        .ok_or_else(|| PyOverflowError::new_err(format!("timeout value is too large: {t}")))
}
