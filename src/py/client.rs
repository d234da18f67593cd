//! `ferrolock.Client`: one Redis deployment, shared by every lock made from it.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::client::{Client, ClientOptions};
use crate::listing::State;
use crate::lock::check_name;
use crate::scripts::Record;

use super::args;
use super::lock::PyLock;
use super::options::HandleOptions;
use super::runtime::{awaitable, wait};
use super::rwmutex::PyRwMutex;

#[pyclass(name = "Client", module = "ferrolock", subclass, frozen)]
pub struct PyClient {
    pub(crate) core: Client,
}

/// Who holds a lock, as `Client.inspect` found it.
#[pyclass(name = "LockInfo", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq, Clone)]
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

/// One name used as one kind of primitive, as `Client.scan` or
/// `Client.describe` found it.
#[pyclass(name = "LockState", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct LockState {
    name: String,
    /// `"lock"` or `"rwmutex"`.
    kind: &'static str,
    /// A Lock's holder, or an RWMutex's writer.
    holder: Option<LockInfo>,
    /// An RWMutex's live readers: (token, seconds left).
    readers: Vec<(String, f64)>,
    queued_readers: u64,
    queued_writers: u64,
    /// Seconds left on a waiting writer's intent, or None.
    writer_intent: Option<f64>,
    waiters: u64,
}

impl LockState {
    fn new(s: State) -> Self {
        let seconds = |ms: i64| ms as f64 / 1000.0;
        LockState {
            waiters: s.waiters(),
            kind: s.kind.as_str(),
            holder: s.holder.map(|r| LockInfo::new(s.name.clone(), r)),
            readers: s.readers.into_iter().map(|r| (r.token, seconds(r.pttl_ms))).collect(),
            queued_readers: s.queued_readers,
            queued_writers: s.queued_writers,
            writer_intent: s.intent_pttl_ms.map(seconds),
            name: s.name,
        }
    }

    fn all(states: Vec<State>) -> Vec<LockState> {
        states.into_iter().map(LockState::new).collect()
    }
}

#[pymethods]
impl LockState {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let holder = match &self.holder {
            Some(h) => h.__repr__(py)?,
            None => "None".into(),
        };
        let r = |v: Bound<'_, PyAny>| v.repr().map(|r| r.to_string());
        Ok(format!(
            "LockState(name={}, kind={}, holder={holder}, readers={}, waiters={})",
            r(self.name.clone().into_pyobject(py)?.into_any())?,
            r(self.kind.into_pyobject(py)?.into_any())?,
            self.readers.len(),
            self.waiters
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

    /// A handle on one permit of the semaphore `name`: up to `permits`
    /// holders at once, each permit its own lease (renewed by the watchdog,
    /// reported lost like a Lock's). Keyword arguments as for `Lock`;
    /// `fair=True` hands permits out in arrival order across processes.
    #[pyo3(signature = (name, permits, **options))]
    fn semaphore(
        slf: &Bound<'_, Self>,
        name: &Bound<'_, PyAny>,
        permits: u32,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyLock> {
        let o = HandleOptions::from_kwargs(&PyDict::new(slf.py()), options)?;
        let core =
            crate::semaphore::permit(slf.get().core.clone(), args::name(name)?, permits, o.lock, o.token)?;
        Ok(PyLock::from_core(core, slf, o.blocking_timeout))
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

    fn aforce_release<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        awaitable(py, async move { Ok(client.force_release(&name).await?) })
    }

    /// Who holds `name` (token, metadata, fence, ttl), or None.
    fn inspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Option<LockInfo>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        wait(py, async move { Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r))) })
    }

    fn ainspect<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        awaitable(py, async move { Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r))) })
    }

    /// Every lock and RWMutex whose name matches the glob `pattern`.
    #[pyo3(signature = (pattern=None))]
    fn scan(&self, py: Python<'_>, pattern: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<LockState>> {
        let (client, pattern) = (self.core.clone(), glob(pattern)?);
        wait(py, async move { Ok(LockState::all(client.scan(&pattern).await?)) })
    }

    #[pyo3(signature = (pattern=None))]
    fn ascan<'py>(
        &self,
        py: Python<'py>,
        pattern: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (client, pattern) = (self.core.clone(), glob(pattern)?);
        awaitable(py, async move { Ok(LockState::all(client.scan(&pattern).await?)) })
    }

    /// Everything stored under `name`, as a Lock and as an RWMutex.
    fn describe(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Vec<LockState>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        wait(py, async move { Ok(LockState::all(client.state_of(&name).await?)) })
    }

    fn adescribe<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        awaitable(py, async move { Ok(LockState::all(client.state_of(&name).await?)) })
    }

    #[getter]
    fn prefix(&self) -> String {
        self.core.options().prefix.clone()
    }

    fn __repr__(&self) -> String {
        format!("Client({:?}, prefix={:?})", self.core.describe(), self.core.options().prefix)
    }
}

/// A name pattern: `None` for every name.
fn glob(pattern: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    match pattern {
        Some(p) if !p.is_none() => args::text("pattern", p),
        _ => Ok("*".into()),
    }
}

fn checked(name: &Bound<'_, PyAny>) -> PyResult<String> {
    let name = args::name(name)?;
    check_name(&name)?;
    Ok(name)
}
