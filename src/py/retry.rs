//! `ferrolock.Retry`: how long to wait between attempts on a busy lock.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::support::retry::{Backoff, Retry};

use super::args::seconds;

/// How long to wait between attempts to take a busy lock.
///
/// Immutable. Made only with the static constructors :meth:`none`,
/// :meth:`fixed`, :meth:`linear` and :meth:`exponential` (``Retry()`` raises
/// ``TypeError``). Two ``Retry`` objects are equal when they describe the same
/// strategy, and equal ones hash alike, so a ``Retry`` can be a dict key or
/// a set member.
///
/// Whatever the strategy, a wait never outlasts the remaining ttl of the
/// current holder, nor the deadline of the acquire. A lock made without
/// ``retry=`` uses ``Retry.exponential(0.002, 0.1, attempts=None, jitter=True)``.
///
/// Waiting is woken by the holder's release (pub/sub) and the retry's waits
/// are the safety net: after the first failed attempt the waiter subscribes
/// to the lock's wake-up channel and tries once more at once (a release in
/// between is not missed); later attempts come on a wake-up, or when the
/// safety net runs out (capped by the holder's remaining ttl): 0.5 to 1 s
/// with the default strategy, the strategy's longest wait with one given. A
/// subscribed waiter skips the ramp from the first, short waits, which only
/// a waiter that could not subscribe walks, polling.
///
/// ``attempts`` counts every attempt, the first one included: when that many
/// have failed the acquire gives up (``acquire`` returns ``False``, ``with``
/// raises :class:`LockNotAcquired` saying the retry gave up), even if its
/// timeout has not passed: the attempts and the wait are two limits, and the
/// first one reached ends the acquire. So ``Retry.none()`` (a single attempt)
/// with ``acquire(timeout=2)`` returns ``False`` at once on a busy lock; that
/// is what it asks for (a wait that should try again needs a strategy that
/// waits, such as :meth:`fixed`).
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
    #[new]
    fn py_new() -> PyResult<Self> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "make a Retry with Retry.none(), Retry.fixed(), Retry.linear() or Retry.exponential()",
        ))
    }

    /// One attempt, no waiting.
    ///
    /// Returns:
    ///     A strategy that gives up after the first failed attempt.
    #[staticmethod]
    fn none() -> Self {
        PyRetry { inner: Retry::none() }
    }

    /// The same wait between every two attempts.
    ///
    /// Args:
    ///     interval: seconds to wait after each failed attempt; positive and
    ///         finite.
    ///     attempts: the most attempts in all (the first included), a
    ///         positive whole number; ``None`` (the default) for no limit.
    ///
    /// Returns:
    ///     The strategy.
    ///
    /// Raises:
    ///     TypeError: ``interval`` is not a number, or ``attempts`` is not an
    ///         ``int`` or ``None`` (``bool`` included).
    ///     ValueError: ``interval`` is not positive and finite, or
    ///         ``attempts`` is not between 1 and 2**32 - 1.
    #[staticmethod]
    #[pyo3(signature = (interval, attempts=None))]
    fn fixed(interval: &Bound<'_, PyAny>, attempts: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let backoff = Backoff::Fixed(seconds("interval", interval)?);
        Ok(PyRetry { inner: Retry { backoff, attempts: self::attempts(attempts)? } })
    }

    /// Waits that grow by ``step``: ``step``, ``2*step``, ``3*step``, ...
    ///
    /// Args:
    ///     step: seconds added to the wait after each failed attempt; positive
    ///         and finite.
    ///     max_interval: the longest wait, in seconds; positive and finite.
    ///     attempts: the most attempts in all (the first included), a
    ///         positive whole number; ``None`` (the default) for no limit.
    ///
    /// Returns:
    ///     The strategy.
    ///
    /// Raises:
    ///     TypeError: an argument has the wrong type (see :meth:`fixed`).
    ///     ValueError: ``step`` or ``max_interval`` is not positive and
    ///         finite, or ``attempts`` is out of range.
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

    /// Waits that double: ``min``, ``2*min``, ``4*min``, ... capped at ``max``.
    ///
    /// Args:
    ///     min: the first wait, in seconds; positive and finite.
    ///     max: the longest wait, in seconds; positive, finite and not less
    ///         than ``min``.
    ///     attempts: the most attempts in all (the first included), a
    ///         positive whole number; ``None`` (the default) for no limit.
    ///     jitter: when ``True`` (the default), each wait is drawn at random
    ///         from ``[wait/2, wait)`` so that contending clients spread out.
    ///
    /// Returns:
    ///     The strategy.
    ///
    /// Raises:
    ///     TypeError: an argument has the wrong type (see :meth:`fixed`).
    ///     ValueError: ``min`` or ``max`` is not positive and finite, ``max``
    ///         is less than ``min``, or ``attempts`` is out of range.
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

    /// The wait after ``failed`` failed attempts.
    ///
    /// Args:
    ///     failed: how many attempts have failed so far (1 after the first),
    ///         between 0 and 2**32 - 1.
    ///
    /// Returns:
    ///     The wait in seconds (random with ``jitter``), or ``None`` when the
    ///     strategy gives up.
    ///
    /// Raises:
    ///     OverflowError: ``failed`` is negative or too large.
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
