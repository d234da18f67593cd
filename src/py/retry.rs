//! `ferrolock.Retry`: how long to wait between attempts on a busy lock.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::retry::{Backoff, Retry};

use super::args::seconds;

#[pyclass(name = "Retry", module = "ferrolock", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyRetry {
    pub(crate) inner: Retry,
}

fn attempts(n: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    let n = match n {
        Some(v) if v.is_instance_of::<pyo3::types::PyBool>() => {
            return Err(pyo3::exceptions::PyTypeError::new_err("attempts must be an int or None, got bool"));
        }
        Some(v) if !v.is_none() => Some(
            v.extract::<i64>()
                .map_err(|_| pyo3::exceptions::PyTypeError::new_err("attempts must be an int or None"))?,
        ),
        _ => None,
    };
    match n {
        None => Ok(None),
        Some(n) if n >= 1 && n <= i64::from(u32::MAX) => Ok(Some(n as u32)),
        Some(n) => {
            Err(PyValueError::new_err(format!("attempts must be a positive whole number or None, got {n}")))
        }
    }
}

#[pymethods]
impl PyRetry {
    /// One attempt, no waiting.
    #[staticmethod]
    fn none() -> Self {
        PyRetry { inner: Retry::none() }
    }

    #[staticmethod]
    #[pyo3(signature = (interval, attempts=None))]
    fn fixed(interval: &Bound<'_, PyAny>, attempts: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let backoff = Backoff::Fixed(seconds("interval", interval)?);
        Ok(PyRetry { inner: Retry { backoff, attempts: self::attempts(attempts)? } })
    }

    #[staticmethod]
    #[pyo3(signature = (step, max_interval, attempts=None))]
    fn linear(
        step: &Bound<'_, PyAny>,
        max_interval: &Bound<'_, PyAny>,
        attempts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (step, max) = (seconds("step", step)?, seconds("max_interval", max_interval)?);
        Ok(PyRetry {
            inner: Retry { backoff: Backoff::Linear { step, max }, attempts: self::attempts(attempts)? },
        })
    }

    #[staticmethod]
    #[pyo3(signature = (min, max, attempts=None, jitter=true))]
    fn exponential(
        min: &Bound<'_, PyAny>,
        max: &Bound<'_, PyAny>,
        attempts: Option<&Bound<'_, PyAny>>,
        jitter: bool,
    ) -> PyResult<Self> {
        let (min, max) = (seconds("min", min)?, seconds("max", max)?);
        if max < min {
            return Err(PyValueError::new_err("max must not be less than min"));
        }
        let backoff = Backoff::Exponential { min, max, jitter };
        Ok(PyRetry { inner: Retry { backoff, attempts: self::attempts(attempts)? } })
    }

    /// The wait after `failed` attempts, in seconds, or None to give up.
    fn delay(&self, failed: u32) -> Option<f64> {
        self.inner.delay(failed).map(|d| d.as_secs_f64())
    }

    fn __repr__(&self) -> String {
        let n = self.inner.attempts.map_or("None".to_string(), |n| n.to_string());
        match &self.inner.backoff {
            Backoff::None => "Retry.none()".into(),
            Backoff::Fixed(d) => format!("Retry.fixed({}, attempts={n})", d.as_secs_f64()),
            Backoff::Linear { step, max } => {
                format!("Retry.linear({}, {}, attempts={n})", step.as_secs_f64(), max.as_secs_f64())
            }
            Backoff::Exponential { min, max, jitter } => format!(
                "Retry.exponential({}, {}, attempts={n}, jitter={})",
                min.as_secs_f64(),
                max.as_secs_f64(),
                if *jitter { "True" } else { "False" }
            ),
        }
    }
}
