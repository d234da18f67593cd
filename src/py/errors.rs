//! The one place core errors become Python exceptions. The exception
//! classes are Python's (`python/ferrolock/exceptions.py`, where the tree
//! and each one's docstring are written); they are imported from there.

use pyo3::exceptions::PyValueError;
use pyo3::import_exception;
use pyo3::prelude::*;

use crate::error::Error;

import_exception!(ferrolock.exceptions, LockError);
import_exception!(ferrolock.exceptions, LockNotAcquired);
import_exception!(ferrolock.exceptions, LockNotOwned);
import_exception!(ferrolock.exceptions, LockLost);
import_exception!(ferrolock.exceptions, LockNotReplicated);
import_exception!(ferrolock.exceptions, LockConnectionError);
import_exception!(ferrolock.exceptions, LockConfigurationError);

/// A `LockNotOwned` error.
pub(crate) fn not_owned(message: String) -> PyErr {
    LockNotOwned::new_err(message)
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::NotOwned(m) => not_owned(m),
            Error::InvalidArgument(m) => PyValueError::new_err(m),
            Error::Redis(m) => LockError::new_err(m),
            Error::NotReplicated(m) => LockNotReplicated::new_err(m),
            Error::Connection(m) | Error::Unanswered(m) => LockConnectionError::new_err(m),
            Error::Configuration(m) => LockConfigurationError::new_err(m),
        }
    }
}

/// A task that panicked or was cancelled under us: reported, never unwound into Python.
pub(crate) fn internal_error(what: &dyn std::fmt::Display) -> PyErr {
    LockError::new_err(format!("ferrolock internal error: {what}"))
}
