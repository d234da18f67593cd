//! The exception tree and the one place core errors become Python exceptions.

use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::Error;

create_exception!(
    ferrolock,
    LockError,
    PyException,
    "Base class of every ferrolock error.\n\nRaised as itself when Redis answers a command with an error (for example\n``WRONGTYPE`` when a lock's key holds something that is not a lock)."
);
create_exception!(
    ferrolock,
    LockNotAcquired,
    LockError,
    "The lock could not be taken in the time allowed.\n\nRaised by ``with lock:`` and ``async with lock:`` when ``blocking_timeout``\npasses, or the :class:`Retry` strategy runs out of attempts, before the lock\nis taken. ``Lock.acquire`` returns ``False`` instead."
);
create_exception!(
    ferrolock,
    LockLost,
    LockError,
    "The lock was lost while held: mutual exclusion no longer covered the holder.\n\nRaised at the end of a ``with`` / ``async with`` block whose hold was lost\nwhile the block ran (renewal failed, the ttl ran out with ``auto_renew``\noff, or someone else took the lock over), when the block itself raised\nnothing. An exception raised by the block propagates unchanged instead (so\nCtrl-C stays ``KeyboardInterrupt``), with a note (``__notes__``, Python\n3.11+) saying the lock was lost too; the loss is also logged."
);

create_exception!(
    ferrolock,
    LockNotReplicated,
    LockError,
    "Fewer replicas than the client's ``replicas`` acknowledged a step in time.\n\nRaised under ``replica_policy=\"fail\"`` by an acquire whose grant the\nreplicas did not acknowledge within ``replica_timeout`` (the grant is undone\nfirst: nothing is left in Redis), and by ``extend`` (the hold keeps its\nprevious validity). A renewal by the watchdog that is not acknowledged does\nnot count, and is retried; if none is acknowledged before the hold's validity\nruns out, the hold is lost (``LockLost`` says the replicas are why)."
);

/// An exception class deriving from `LockError` and a builtin one, made once.
pub struct Dual {
    name: &'static str,
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
    doc: &'static str,
    made: PyOnceLock<Py<PyType>>,
}

impl Dual {
    pub fn get<'py>(&'static self, py: Python<'py>) -> PyResult<&'py Bound<'py, PyType>> {
        self.made
            .get_or_try_init(py, || {
                let bases = PyTuple::new(py, [py.get_type::<LockError>(), (self.builtin)(py)])?;
                let ns = PyDict::new(py);
                ns.set_item("__module__", "ferrolock")?;
                ns.set_item("__doc__", self.doc)?;
                let ty = py.get_type::<PyType>().call1((self.name, bases, ns))?;
                Ok(ty.cast_into::<PyType>()?.unbind())
            })
            .map(|t| t.bind(py))
    }

    fn err(&'static self, message: String) -> PyErr {
        Python::attach(|py| match self.get(py) {
            Ok(ty) => PyErr::from_type(ty.clone(), message),
            Err(e) => e,
        })
    }
}

/// `LockConnectionError`: both a `LockError` and a builtin `ConnectionError`.
pub static CONNECTION_ERROR: Dual = Dual {
    name: "LockConnectionError",
    builtin: |py| py.get_type::<PyConnectionError>(),
    doc: "Redis could not be reached, refused the credentials, or did not answer in time.\n\nBoth a :class:`LockError` and a builtin :class:`ConnectionError`, so either\n``except`` clause catches it.",
    made: PyOnceLock::new(),
};

/// `LockNotOwned`: both a `LockError` and a builtin `RuntimeError`, as
/// `threading.Lock.release()` raises for a lock it does not hold.
pub static NOT_OWNED: Dual = Dual {
    name: "LockNotOwned",
    builtin: |py| py.get_type::<PyRuntimeError>(),
    doc: "This handle does not hold the lock (any more).\n\nRaised by ``release`` and ``extend`` when the handle holds nothing, or when\nRedis shows that its hold had already expired or been taken over (nobody\nelse's hold is touched then).\n\nBoth a :class:`LockError` and a builtin :class:`RuntimeError` (what\n``threading.Lock.release`` raises for a lock it does not hold), so either\n``except`` clause catches it.",
    made: PyOnceLock::new(),
};

/// A `LockNotOwned` error.
pub fn not_owned(message: String) -> PyErr {
    NOT_OWNED.err(message)
}

static CONFIGURATION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

const CONFIGURATION_ERROR_DOC: &str = "The server answered, but the client's settings do not fit it.

Raised when connecting, with a message that names the server (never the
password), the cause and what to change:

* the URL points at a port where something other than Redis listens;
* a password is given to a server that has none, or the credentials are
  refused, or the server needs a password and the URL gives none;
* the database number is one the server does not have;
* ``rediss://`` (TLS) points at a plain-TCP port;
* the server is older than Redis 6.2 (7.0 for a Cluster), or older than
  7.2 with ``replica_fsync=True`` (``WAITAOF`` came with 7.2).

Retrying does not help. It is a :class:`LockConnectionError` (and so a
:class:`ConnectionError`) too, so code that catches those catches it.";

/// `LockConfigurationError`: a `LockConnectionError` that retrying cannot cure.
pub fn configuration_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CONFIGURATION_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(py, [CONNECTION_ERROR.get(py)?])?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "ferrolock")?;
            ns.set_item("__doc__", CONFIGURATION_ERROR_DOC)?;
            let ty = py.get_type::<PyType>().call1(("LockConfigurationError", bases, ns))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::NotOwned(m) => not_owned(m),
            Error::InvalidArgument(m) => PyValueError::new_err(m),
            Error::Redis(m) => LockError::new_err(m),
            Error::NotReplicated(m) => LockNotReplicated::new_err(m),
            Error::Connection(m) => CONNECTION_ERROR.err(m),
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
