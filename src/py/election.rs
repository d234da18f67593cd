//! `ferrolock._ferrolock.Election`: the core election's thin face; the
//! Python package wraps it (`ferrolock.Election`, `Term`).

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::handle::election::{Election, Leader, Observer};
use crate::handle::lock::MAX_METADATA;

use super::args;
use super::client::PyClient;
use super::coro::{coroutine, Cancel, Operation};
use super::lock::PyLock;
use super::options::{keywords, HandleOptions, Kind};
use super::runtime::{blocking_io, wait, wait_interruptible};
use super::state::py_repr;

/// A leader's value, stored as its hold's metadata: at most as long.
fn leader_value(value: &Bound<'_, PyAny>) -> PyResult<String> {
    let value = args::text("value", value)?;
    if value.len() > MAX_METADATA {
        return Err(PyValueError::new_err(format!(
            "value is {} bytes long, longer than {MAX_METADATA} bytes (a leader's value is stored with its term)",
            value.len()
        )));
    }
    Ok(value)
}

/// The core of :class:`ferrolock.Election` (use ``client.election(name)``).
#[pyclass(name = "Election", module = "ferrolock._ferrolock", frozen)]
pub struct PyElection {
    core: Election,
    client: Py<PyClient>,
}

/// The leader of an election: its value, its term number (strictly
/// increasing across leaders) and the seconds left on its term (None: no
/// expiry).
#[pyclass(name = "Leader", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct PyLeader {
    /// The value the leader campaigned with, or proclaimed since.
    value: String,
    /// The term number: strictly greater than every earlier leader's.
    term: i64,
    /// Seconds left on the term unless renewed (None: no expiry).
    ttl: Option<f64>,
}

impl From<Leader> for PyLeader {
    fn from(l: Leader) -> PyLeader {
        PyLeader { value: l.value, term: l.term, ttl: l.ttl.map(|d| d.as_secs_f64()) }
    }
}

#[pymethods]
impl PyLeader {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Leader(value={}, term={}, ttl={})",
            py_repr(py, &self.value)?,
            self.term,
            py_repr(py, self.ttl)?
        ))
    }
}

/// Follows an election: each ``next`` / ``anext`` returns the leader (or
/// None) once it changed.
#[pyclass(name = "ElectionObserver", module = "ferrolock._ferrolock", frozen)]
pub struct PyObserver {
    inner: Arc<tokio::sync::Mutex<Observer>>,
    client: crate::client::Client,
}

#[pymethods]
impl PyObserver {
    /// Waits for the next change (the current leader the first time).
    fn next(&self, py: Python<'_>) -> PyResult<Option<PyLeader>> {
        let inner = self.inner.clone();
        let next = async move { Ok(inner.lock().await.next().await?.map(PyLeader::from)) };
        // A change seen just as Ctrl-C came is only dropped: watching takes nothing.
        wait_interruptible(py, &self.client, next, |_| async {})
    }

    /// Asyncio version of :meth:`next`.
    fn anext(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let inner = self.inner.clone();
        coroutine(py, "ElectionObserver.anext", Cancel::Drop, async move {
            Ok(inner.lock().await.next().await?.map(PyLeader::from))
        })
    }
}

#[pymethods]
impl PyElection {
    #[new]
    fn new(client: &Bound<'_, PyClient>, name: &Bound<'_, PyAny>) -> PyResult<Self> {
        let core = Election::new(client.get().core.clone(), args::name(name)?)?;
        Ok(PyElection { core, client: client.clone().unbind() })
    }

    #[doc = concat!("candidate($self, value, *", keywords!(lock), ")\n--\n")]
    /// A campaigner for `value`: a fair Lock on the election's term, whose
    /// acquire campaigns and whose fence is the term number.
    #[pyo3(signature = (value, **options), text_signature = None)]
    fn candidate(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<PyLock> {
        let value = leader_value(value)?;
        let o = HandleOptions::from_kwargs("Election.candidate()", Kind::Lock, None, options)?;
        let core = self.core.candidate(value, o.lock, o.token)?;
        Ok(PyLock::from_core(core, self.client.bind(py), o.blocking_timeout))
    }

    /// The leader now, or None.
    fn leader(&self, py: Python<'_>) -> PyResult<Option<PyLeader>> {
        let core = self.core.clone();
        let io = blocking_io(py);
        wait(py, async move { Ok(core.via(io).leader().await?.map(PyLeader::from)) })
    }

    /// Asyncio version of :meth:`leader`.
    fn aleader(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Election.aleader", Cancel::Drop, async move {
            Ok(core.leader().await?.map(PyLeader::from))
        })
    }

    /// The leader holding `term` publishes `value`; LockNotOwned if it no longer leads.
    fn proclaim(&self, py: Python<'_>, term: &Bound<'_, PyLock>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (core, term, value) = (self.core.clone(), term.get().core().clone(), leader_value(value)?);
        let io = blocking_io(py);
        wait(py, async move { core.via(io).proclaim(&term, &value).await })
    }

    /// Asyncio version of :meth:`proclaim`.
    fn aproclaim(
        &self,
        py: Python<'_>,
        term: &Bound<'_, PyLock>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Operation>> {
        let (core, term, value) = (self.core.clone(), term.get().core().clone(), leader_value(value)?);
        coroutine(py, "Election.aproclaim", Cancel::Drop, async move { core.proclaim(&term, &value).await })
    }

    /// A watcher of this election's changes.
    fn observer(&self) -> PyObserver {
        PyObserver {
            inner: Arc::new(tokio::sync::Mutex::new(self.core.observe())),
            client: self.client_core(),
        }
    }

    /// The election's name (without the client's prefix).
    #[getter]
    fn name(&self) -> &str {
        self.core.name()
    }
}

impl PyElection {
    fn client_core(&self) -> crate::client::Client {
        Python::attach(|py| self.client.bind(py).get().core.clone())
    }
}
