//! `ferrolock.RWMutex`: makes read and write handles, which are `Lock`s.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::rwmutex::RwMutex;

use super::args;
use super::client::PyClient;
use super::coro::{coroutine, Cancel, Operation};
use super::lock::PyLock;
use super::options::HandleOptions;
use super::runtime::wait;

#[pyclass(name = "RWMutex", module = "ferrolock", frozen, weakref)]
pub struct PyRwMutex {
    core: RwMutex,
    client: Py<PyClient>,
    /// Handle options given to the mutex, the defaults of every handle.
    defaults: Py<PyDict>,
}

impl PyRwMutex {
    fn handle(&self, py: Python<'_>, write: bool, overrides: Option<&Bound<'_, PyDict>>) -> PyResult<PyLock> {
        refuse_fair(overrides)?;
        let o = HandleOptions::from_kwargs(self.defaults.bind(py), overrides)?;
        let core = if write { self.core.write(o.lock, o.token)? } else { self.core.read(o.lock, o.token)? };
        Ok(PyLock::from_core(core, self.client.bind(py), o.blocking_timeout))
    }

    fn attempt(
        &self,
        py: Python<'_>,
        write: bool,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<PyLock>> {
        let handle = self.handle(py, write, overrides)?;
        Ok(handle.take_now(py)?.then_some(handle))
    }
}

/// Fairness belongs to the mutex: a handle that ignored the queue would barge.
fn refuse_fair(options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    if let Some(o) = options {
        if o.contains("fair")? {
            return Err(PyTypeError::new_err(
                "fair is a property of the whole RWMutex: pass it to RWMutex(...), not to a handle",
            ));
        }
    }
    Ok(())
}

#[pymethods]
impl PyRwMutex {
    #[new]
    #[pyo3(signature = (client, name, *, writer_preference=None, fair=false, **options))]
    fn new(
        client: &Bound<'_, PyClient>,
        name: &Bound<'_, PyAny>,
        writer_preference: Option<bool>,
        fair: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let py = client.py();
        let defaults = match options {
            Some(o) => o.copy()?,
            None => PyDict::new(py),
        };
        if defaults.contains("token")? {
            return Err(PyTypeError::new_err("token restores one handle: pass it to read() or write()"));
        }
        let parsed = HandleOptions::from_kwargs(&defaults, None)?;
        let (core, name) = (client.get().core.clone(), args::name(name)?);
        let core = match (fair, writer_preference) {
            (false, preference) => RwMutex::new(core, name, preference.unwrap_or(true))?,
            (true, None | Some(true)) => RwMutex::new_fair(core, name)?,
            (true, Some(false)) => {
                return Err(PyValueError::new_err(
                    "fair=True serves readers and writers in arrival order, so readers never pass a \
                     waiting writer: it cannot be combined with writer_preference=False",
                ))
            }
        };
        // Range checks now, not at the first read() / write() (makes no I/O).
        core.read(parsed.lock, None)?;
        Ok(PyRwMutex { core, client: client.clone().unbind(), defaults: defaults.unbind() })
    }

    /// A read handle (shared with other readers); options override the mutex's.
    #[pyo3(signature = (**options))]
    fn read(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLock> {
        self.handle(py, false, options)
    }

    /// A write handle (exclusive against readers and writers).
    #[pyo3(signature = (**options))]
    fn write(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLock> {
        self.handle(py, true, options)
    }

    /// A read handle already holding, or None if it cannot read right now.
    #[pyo3(signature = (**options))]
    fn try_read(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Option<PyLock>> {
        self.attempt(py, false, options)
    }

    /// A write handle already holding, or None if it cannot write right now.
    #[pyo3(signature = (**options))]
    fn try_write(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Option<PyLock>> {
        self.attempt(py, true, options)
    }

    /// Live readers now.
    fn readers(&self, py: Python<'_>) -> PyResult<u64> {
        let core = self.core.clone();
        wait(py, async move { core.readers().await })
    }

    fn areaders(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "RWMutex.areaders", Cancel::Drop, async move { core.readers().await })
    }

    /// Held by a writer or by any reader.
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        wait(py, async move { core.locked().await })
    }

    fn alocked(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "RWMutex.alocked", Cancel::Drop, async move { core.locked().await })
    }

    #[getter]
    fn name(&self) -> &str {
        self.core.name()
    }

    #[getter]
    fn writer_preference(&self) -> bool {
        self.core.writer_preference()
    }

    #[getter]
    fn fair(&self) -> bool {
        self.core.fair()
    }

    fn __repr__(&self) -> String {
        let py_bool = |b: bool| if b { "True" } else { "False" };
        format!(
            "<ferrolock.RWMutex {:?} writer_preference={} fair={}>",
            self.core.name(),
            py_bool(self.core.writer_preference()),
            py_bool(self.core.fair())
        )
    }
}
