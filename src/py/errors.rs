//! The exception tree and the one place core errors become Python exceptions.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::Error;

create_exception!(ferrolock, LockError, PyException, "Base class of every ferrolock error.");
create_exception!(ferrolock, LockNotAcquired, LockError, "The lock could not be taken in the time allowed.");
create_exception!(ferrolock, LockNotOwned, LockError, "This handle does not hold the lock (any more).");
create_exception!(
    ferrolock,
    LockLost,
    LockError,
    "The lock was lost while held: mutual exclusion no longer covered the holder."
);

static CONNECTION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `LockConnectionError`: both a `LockError` and a builtin `ConnectionError`.
pub fn connection_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CONNECTION_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [py.get_type::<LockError>(), py.get_type::<pyo3::exceptions::PyConnectionError>()],
            )?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "ferrolock")?;
            ns.set_item(
                "__doc__",
                "Redis could not be reached, refused the credentials, or did not answer in time.",
            )?;
            let ty = py.get_type::<PyType>().call1(("LockConnectionError", bases, ns))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

static CONFIGURATION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `LockConfigurationError`: a `LockConnectionError` that retrying cannot cure.
pub fn configuration_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CONFIGURATION_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(py, [connection_error(py)?])?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "ferrolock")?;
            ns.set_item(
                "__doc__",
                "Redis (or something else) answered, but the client's settings do not fit it: the message \
                 names the server, the cause and what to change.",
            )?;
            let ty = py.get_type::<PyType>().call1(("LockConfigurationError", bases, ns))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::NotAcquired(m) => LockNotAcquired::new_err(m),
            Error::NotOwned(m) => LockNotOwned::new_err(m),
            Error::Lost(m) => LockLost::new_err(m),
            Error::InvalidArgument(m) => PyValueError::new_err(m),
            Error::Redis(m) => LockError::new_err(m),
            Error::Connection(m) => Python::attach(|py| match connection_error(py) {
                Ok(ty) => PyErr::from_type(ty.clone(), m),
                Err(e) => e,
            }),
            Error::Configuration(m) => Python::attach(|py| match configuration_error(py) {
                Ok(ty) => PyErr::from_type(ty.clone(), m),
                Err(e) => e,
            }),
        }
    }
}

/// A task that panicked or was cancelled under us: reported, never unwound into Python.
pub fn internal_error(what: &dyn std::fmt::Display) -> PyErr {
    LockError::new_err(format!("ferrolock internal error: {what}"))
}
