//! `ferrolock.RWMutex`: makes read and write handles, which are `Lock`s.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::handle::rwmutex::RwMutex;

use super::args;
use super::client::PyClient;
use super::coro::{coroutine, Cancel, Operation};
use super::lock::PyLock;
use super::options::{args_doc, flag, keywords, HandleOptions, Kind, Kwargs};
use super::runtime::wait;

#[doc = concat!("RWMutex(client, name, *", keywords!(rwmutex), ")\n--\n")]
/// A read/write mutex: any number of readers together, or one writer.
///
/// ``read()`` and ``write()`` return :class:`Lock` handles, which wait, hold,
/// renew, report loss and cancel exactly as an exclusive ``Lock`` does.
/// Readers carry no fence (``fence`` is ``None``); writers get one from the
/// same strictly increasing sequence as a ``Lock``.
///
/// Each reader has its own expiry, measured by the Redis server's clock. A
/// reader whose process dies stops counting after its own ttl, even while
/// other readers keep renewing theirs.
///
/// With ``writer_preference`` (the default), a writer that has to wait for
/// readers leaves an intent. New readers then wait behind it, so a steady
/// stream of readers cannot starve a writer. The intent expires by itself
/// after the writer's ttl if the waiting writer dies, and is taken back when
/// the writer stops waiting (timeout, retry exhausted, cancellation,
/// Ctrl-C). With ``writer_preference=False``, readers join whatever writers
/// wait.
///
/// With ``fair=True``, readers and writers take turns in arrival order,
/// across processes, through a queue in Redis. A writer's release lets in
/// every reader queued before the next writer, or else that writer; the last
/// reader out lets in the next writer. The release script hands the mutex
/// over itself and names the new holders in the wake-up, so nobody can barge
/// in between. A waiter that dies loses its place after
/// ``min(ttl, 2 s)``. Fairness belongs to the whole mutex: every process
/// using the name must construct it with ``fair=True``.
///
/// All keys of one mutex share one Redis Cluster hash tag.
///
/// Make the mutex; the handle options become every handle's defaults.
///
/// Args:
///     client: the :class:`Client` to use.
///     name: the mutex name: a non-empty ``str`` of at most 4096 bytes.
#[doc = args_doc!(rwmutex)]
/// Raises:
///     TypeError: an argument has the wrong type, an unknown keyword was
///         given, or ``token`` was given here rather than to ``read()`` /
///         ``write()``.
///     ValueError: an argument is out of range, or ``fair=True`` is
///         combined with ``writer_preference=False``.
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
        let callee = if write { "RWMutex.write()" } else { "RWMutex.read()" };
        let o = HandleOptions::from_kwargs(callee, Kind::Handle, Some(self.defaults.bind(py)), overrides)?;
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
    #[pyo3(signature = (client, name, **options), text_signature = None)]
    fn new(
        client: &Bound<'_, PyClient>,
        name: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let py = client.py();
        let kw = Kwargs { defaults: None, overrides: options };
        if options.map_or(Ok(false), |o| o.contains("token"))? {
            return Err(PyTypeError::new_err("token restores one handle: pass it to read() or write()"));
        }
        kw.check("RWMutex()", Kind::RwMutex)?;
        let parsed = HandleOptions::parse(&kw)?;
        let fair = flag("fair", kw.get("fair").as_ref())?.unwrap_or(false);
        let writer_preference = flag("writer_preference", kw.get("writer_preference").as_ref())?;
        // What is left are the handles' defaults.
        let defaults = match options {
            Some(o) => o.copy()?,
            None => PyDict::new(py),
        };
        for own in ["fair", "writer_preference"] {
            if defaults.contains(own)? {
                defaults.del_item(own)?;
            }
        }
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

    #[doc = concat!("read($self, *", keywords!(handle), ")\n--\n")]
    /// A read handle, shared with other readers, not holding yet.
    ///
    /// Keyword arguments override the mutex's defaults for this handle.
    #[pyo3(signature = (**options), text_signature = None)]
    fn read(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLock> {
        self.handle(py, false, options)
    }

    #[doc = concat!("write($self, *", keywords!(handle), ")\n--\n")]
    /// A write handle, exclusive against readers and writers, not holding yet.
    ///
    /// Keyword arguments override the mutex's defaults for this handle.
    #[pyo3(signature = (**options), text_signature = None)]
    fn write(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLock> {
        self.handle(py, true, options)
    }

    #[doc = concat!("try_read($self, *", keywords!(handle), ")\n--\n")]
    /// One attempt to read now: a read handle already holding, or ``None``.
    ///
    /// The GIL is released during the single round trip.
    #[pyo3(signature = (**options), text_signature = None)]
    fn try_read(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Option<PyLock>> {
        self.attempt(py, false, options)
    }

    #[doc = concat!("try_write($self, *", keywords!(handle), ")\n--\n")]
    /// One attempt to write now: a write handle already holding, or ``None``.
    ///
    /// Leaves no intent behind when it fails.
    #[pyo3(signature = (**options), text_signature = None)]
    fn try_write(&self, py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Option<PyLock>> {
        self.attempt(py, true, options)
    }

    /// Live readers now (each counts until its own expiry). Releases the GIL.
    fn readers(&self, py: Python<'_>) -> PyResult<u64> {
        let core = self.core.clone();
        wait(py, async move { core.readers().await })
    }

    /// Like :meth:`readers`, awaitable.
    fn areaders(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "RWMutex.areaders", Cancel::Drop, async move { core.readers().await })
    }

    /// Held by a writer or by any live reader. Releases the GIL.
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        wait(py, async move { core.locked().await })
    }

    /// Like :meth:`locked`, awaitable.
    fn alocked(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "RWMutex.alocked", Cancel::Drop, async move { core.locked().await })
    }

    /// Ends every hold (writer and readers) whoever holds it; with
    /// ``token``, only that writer's hold or that reader's lease (checked and
    /// removed in one atomic step). True if a hold was removed; False if
    /// none was (with ``token``: that token holds nothing now).
    #[pyo3(signature = (token=None))]
    fn force_release(&self, py: Python<'_>, token: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let (core, token) = (self.core.clone(), args::optional_text("token", token)?);
        wait(py, async move { Ok(core.force_release(token.as_deref()).await? != (false, 0)) })
    }

    /// Asyncio version of :meth:`force_release`.
    #[pyo3(signature = (token=None))]
    fn aforce_release(&self, py: Python<'_>, token: Option<&Bound<'_, PyAny>>) -> PyResult<Py<Operation>> {
        let (core, token) = (self.core.clone(), args::optional_text("token", token)?);
        coroutine(py, "RWMutex.aforce_release", Cancel::Drop, async move {
            Ok(core.force_release(token.as_deref()).await? != (false, 0))
        })
    }

    /// The mutex name.
    #[getter]
    fn name(&self) -> &str {
        self.core.name()
    }

    /// Whether a waiting writer holds new readers back.
    #[getter]
    fn writer_preference(&self) -> bool {
        self.core.writer_preference()
    }

    /// Whether readers and writers are served in arrival order.
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
