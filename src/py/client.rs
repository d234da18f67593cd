//! `ferrolock.Client`: one Redis deployment, shared by every lock made from it.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::client::{Client, ClientOptions};
use crate::lock::check_name;
use crate::scripts::Record;

use super::args;
use super::coro::{coroutine, Cancel, Operation};
use super::lock::PyLock;
use super::runtime::wait;
use super::rwmutex::PyRwMutex;

#[pyclass(name = "Client", module = "ferrolock", subclass, frozen, weakref)]
pub struct PyClient {
    pub(crate) core: Client,
}

/// Who holds a lock, as `Client.inspect` found it.
#[pyclass(name = "LockInfo", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct LockInfo {
    name: String,
    token: String,
    metadata: Option<String>,
    fence: i64,
    /// Seconds left before the hold expires (None: no expiry set).
    ttl: Option<f64>,
}

impl LockInfo {
    pub(crate) fn new(name: String, r: Record) -> Self {
        let ttl = (r.pttl_ms >= 0).then(|| r.pttl_ms as f64 / 1000.0);
        LockInfo { name, token: r.token, metadata: r.metadata, fence: r.fence, ttl }
    }
}

#[pymethods]
impl LockInfo {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |v: Bound<'_, PyAny>| v.repr().map(|r| r.to_string());
        Ok(format!(
            "LockInfo(name={}, token={}, metadata={}, fence={}, ttl={})",
            r(self.name.clone().into_pyobject(py)?.into_any())?,
            r(self.token.clone().into_pyobject(py)?.into_any())?,
            r(self.metadata.clone().into_pyobject(py)?.into_any())?,
            self.fence,
            r(self.ttl.into_pyobject(py)?.into_any())?,
        ))
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (url=None, *, connect_timeout=None, command_timeout=None, prefix=None, ca_file=None))]
    fn new(
        py: Python<'_>,
        url: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        ca_file: Option<PathBuf>,
    ) -> PyResult<Self> {
        let defaults = ClientOptions::default();
        let opts = ClientOptions {
            url: match url {
                Some(u) if !u.is_none() => args::text("url", u)?,
                _ => defaults.url.clone(),
            },
            connect_timeout: args::optional_seconds("connect_timeout", connect_timeout)?
                .unwrap_or(defaults.connect_timeout),
            command_timeout: args::optional_seconds("command_timeout", command_timeout)?
                .unwrap_or(defaults.command_timeout),
            prefix: match prefix {
                Some(p) if !p.is_none() => args::text("prefix", p)?,
                _ => defaults.prefix,
            },
            ca_file,
        };
        let core = wait(py, Client::connect(opts))?;
        Ok(PyClient { core })
    }

    /// A `Lock` on `name`; keyword arguments as for `Lock`.
    #[pyo3(signature = (name, **options))]
    fn lock<'py>(
        slf: &Bound<'py, Self>,
        name: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyLock>> {
        let py = slf.py();
        py.get_type::<PyLock>()
            .call(PyTuple::new(py, [slf.as_any(), name])?, options)?
            .cast_into::<PyLock>()
            .map_err(Into::into)
    }

    /// An `RWMutex` on `name`; keyword arguments as for `RWMutex`.
    #[pyo3(signature = (name, **options))]
    fn rwmutex<'py>(
        slf: &Bound<'py, Self>,
        name: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyRwMutex>> {
        let py = slf.py();
        py.get_type::<PyRwMutex>()
            .call(PyTuple::new(py, [slf.as_any(), name])?, options)?
            .cast_into::<PyRwMutex>()
            .map_err(Into::into)
    }

    /// One `Lock` over every name in `names`, taken all-or-nothing.
    #[pyo3(signature = (names, **options))]
    fn multi_lock<'py>(
        slf: &Bound<'py, Self>,
        names: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyLock>> {
        if names.is_instance_of::<pyo3::types::PyString>() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "multi_lock takes a list of names, not a str (use client.lock for one name)",
            ));
        }
        let names = PyTuple::new(slf.py(), names.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        Self::lock(slf, names.as_any(), options)
    }

    /// Deletes the lock `name` whoever holds it; True if it was held.
    fn force_release(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (client, name) = (self.core.clone(), checked(name)?);
        wait(py, async move { client.force_release(&name).await })
    }

    fn aforce_release(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<Operation>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        coroutine(py, "Client.aforce_release", Cancel::Drop, async move { client.force_release(&name).await })
    }

    /// Who holds `name` (token, metadata, fence, ttl), or None.
    fn inspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Option<LockInfo>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        wait(py, async move { Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r))) })
    }

    fn ainspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<Operation>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        coroutine(py, "Client.ainspect", Cancel::Drop, async move {
            Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r)))
        })
    }

    #[getter]
    fn prefix(&self) -> String {
        self.core.options().prefix.clone()
    }

    fn __repr__(&self) -> String {
        format!("Client({:?}, prefix={:?})", self.core.describe(), self.core.options().prefix)
    }
}

fn checked(name: &Bound<'_, PyAny>) -> PyResult<String> {
    let name = args::name(name)?;
    check_name(&name)?;
    Ok(name)
}
