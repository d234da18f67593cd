//! `ferrolock.Lock`: a thin shell over the core `Lock`, with sync and asyncio
//! context managers.

mod docs;
mod hold;
mod scope;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use crate::handle::lock::{Lock, PlainExtended};

use super::args;
use super::client::PyClient;
use super::coro::{coroutine, undoable, Cancel, Operation};
use super::events::in_caller_context;
use super::options::{args_doc, keywords, HandleOptions, Kind};
use super::runtime::{blocking_io, wait};
use super::state::LockInfo;
use docs::{
    acquire_doc, aenter_doc, aexit_doc, asyncio_twin, awaited_raises, enter_doc, exit_doc, redis_raises,
};
use hold::{acquire_blocking, finish, names_of, undo_acquire};
use scope::LossScope;

#[doc = concat!("Lock(client, name, *", keywords!(lock), ")\n--\n")]
/// A handle on an exclusive lock over one name, or over several names taken
/// all-or-nothing.
///
/// Ownership belongs to the handle, not to a thread or task: any thread may
/// release a hold that another thread acquired through the same handle, and
/// a handle holds at most one hold at a time, so a second ``acquire`` on a
/// handle that holds (from any thread or task) waits until it is released,
/// like :class:`threading.Lock` (the lock is not re-entrant). Use one handle
/// per holder to exclude each other, e.g. one per thread or per call.
///
/// While held, a background watchdog renews the hold every ``ttl / 3`` (with
/// ``auto_renew``) and reports it lost when it ends behind the holder's back:
/// :attr:`lost` turns ``True``, ``on_lost`` is called, and the enclosing
/// ``with`` / ``async with`` block ends in :class:`LockLost`.
///
/// Use as ``with lock:`` or ``async with lock:``: entering waits up to
/// ``blocking_timeout`` (forever by default) and raises
/// :class:`LockNotAcquired` when the lock was not taken; leaving releases it
/// and raises :class:`LockLost` if the hold was lost meanwhile.
///
/// Make a handle on the lock ``name``; nothing is sent to Redis yet.
///
/// Args:
///     client: the Redis connection to use.
///     name: the lock name; or a list or tuple of distinct names for a
///         multi-lock, taken all-or-nothing (a list of one name is a plain
///         lock).
#[doc = args_doc!(lock)]
/// Raises:
///     TypeError: an argument has the wrong type (for example a ``bool``
///         ttl, or an ``on_lost`` that is not callable).
///     ValueError: a name is empty, too long or repeated, an option is
///         out of range, or ``fair`` is asked of a multi-lock.
#[pyclass(name = "Lock", module = "ferrolock", frozen, weakref)]
pub struct PyLock {
    core: Arc<Lock>,
    client: Py<PyClient>,
    blocking_timeout: Option<Duration>,
    /// The `async with` block currently holding, to cancel if the hold is lost.
    scope: Arc<Mutex<Option<Py<LossScope>>>>,
    /// Whether dropping it while it holds warns (`ResourceWarning`): not for
    /// a `ferrolock.compat` hold, which the library it stands in for lets
    /// its holder drop (the hold runs out in Redis).
    warn_unreleased: bool,
}

#[pymethods]
impl PyLock {
    #[new]
    #[pyo3(signature = (client, name, **options), text_signature = None)]
    fn new(
        client: &Bound<'_, PyClient>,
        name: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let o = HandleOptions::from_kwargs("Lock()", Kind::Lock, None, options)?;
        let core = Lock::new(client.get().core.clone(), names_of(name)?, o.lock, o.token)?;
        Ok(PyLock::from_core(core, client, o.blocking_timeout))
    }

    #[doc = acquire_doc!()]
    #[pyo3(signature = (blocking=None, timeout=None), text_signature = "($self, blocking=True, timeout=None)")]
    fn acquire(
        &self,
        py: Python<'_>,
        blocking: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        acquire_blocking(py, &self.core, self.call_wait(blocking, timeout)?)
    }

    /// Asyncio version of :meth:`acquire`.
    ///
    /// Cancelling the future (or the task awaiting it) leaves no lock behind,
    /// even when Redis had already granted it.
    ///
    /// Args:
    ///     blocking: when ``False`` (or ``0``), make one attempt only.
    ///     timeout: as for :meth:`acquire` (``None``: the handle's
    ///         ``blocking_timeout``).
    ///
    /// Returns:
    ///     A future of ``True`` once the lock is taken, or ``False`` (as for
    ///     :meth:`acquire`).
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     ValueError: invalid ``timeout``, raised at the call (before any await).
    ///     TypeError: an argument has the wrong type, raised at the call (before any await).
    #[doc = awaited_raises!()]
    #[pyo3(signature = (blocking=None, timeout=None), text_signature = "($self, blocking=True, timeout=None)")]
    fn aacquire(
        &self,
        py: Python<'_>,
        blocking: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let wait_for = self.call_wait(blocking, timeout)?;
        let core = self.core.clone();
        let fut = async move {
            // Adopting a restored hold takes nothing new: if nobody receives
            // the answer, the hold stays its owner's.
            let adopting = core.is_restored();
            let acquired = core.acquire(wait_for).await?;
            Ok((acquired, acquired && !adopting))
        };
        undoable(py, "Lock.aacquire", Cancel::Drop, fut, Some(undo_acquire(&self.core)))
    }

    /// Take the lock in one attempt, taking over the hold of ``token`` if
    /// that token holds it.
    ///
    /// As ``acquire(blocking=False)``, and where ``token`` (another handle's,
    /// process's or machine's) holds the lock, that hold becomes this
    /// handle's in the same atomic step: under a token of this handle's own
    /// (:attr:`token` afterwards), with its fence kept (on a quorum, whose
    /// masters may disagree, the highest of theirs; a newer one when the
    /// hold's fence is not in Redis yet, before its first renewal) and its metadata set to
    /// this handle's (kept when the handle has none). Whoever else knows
    /// ``token`` can then no longer adopt, extend or release it, where
    /// ``Lock(client, name, token=token).acquire()`` would share it. The
    /// handle renews it from then on, as after :meth:`acquire`. On a quorum
    /// it is taken over where ``token`` holds it on a majority of masters.
    ///
    /// Args:
    ///     token: the owner token of the hold to take over, 1 to 512
    ///         printable ASCII characters with no space.
    ///
    /// Returns:
    ///     ``True`` once the lock is this handle's (taken over, or taken
    ///     because it was free); ``False`` when another token holds it.
    ///
    /// Raises:
    ///     ValueError: ``token`` is empty or too long; the handle is a fair
    ///         Lock's, an RWMutex's or a semaphore's, or was restored from a
    ///         token (its ``acquire`` adopts that hold).
    ///     TypeError: ``token`` is not a ``str``.
    #[doc = redis_raises!()]
    fn take_over(&self, py: Python<'_>, token: &str) -> PyResult<bool> {
        let (core, token, io) = (self.core.clone(), token.to_owned(), blocking_io(py));
        wait(py, in_caller_context(py, async move { core.via(io).take_over(&token).await }))
    }

    /// Asyncio version of :meth:`take_over`.
    ///
    /// Cancelling the future (or the task awaiting it) leaves no lock behind,
    /// even when Redis had already granted it: the hold it took over is
    /// then released.
    ///
    /// Args:
    ///     token: as for :meth:`take_over`.
    ///
    /// Returns:
    ///     A future of ``True`` once the lock is this handle's, or ``False``
    ///     (as for :meth:`take_over`).
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     ValueError: as for :meth:`take_over` (when awaited).
    ///     TypeError: ``token`` is not a ``str``, raised at the call (before any await).
    #[doc = awaited_raises!()]
    fn atake_over(&self, py: Python<'_>, token: &str) -> PyResult<Py<Operation>> {
        let (core, token) = (self.core.clone(), token.to_owned());
        let fut = async move {
            let taken = core.take_over(&token).await?;
            Ok((taken, taken))
        };
        undoable(py, "Lock.atake_over", Cancel::Drop, fut, Some(undo_acquire(&self.core)))
    }

    /// Give the lock up and stop renewing it.
    ///
    /// May be called from any thread, not only the one that acquired. The
    /// handle no longer holds afterwards, whatever the outcome (if Redis
    /// cannot be reached, the key expires after its ttl, no longer renewed).
    /// The GIL is released while waiting for Redis.
    ///
    /// Raises:
    ///     LockNotOwned: this handle holds nothing, or its hold had already
    ///         expired or been taken over (the other holder is left alone;
    ///         the hold is then reported lost).
    #[doc = redis_raises!()]
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core.clone();
        let io = blocking_io(py);
        wait(py, async move { core.via(io).release().await })
    }

    /// Asyncio version of :meth:`release`.
    ///
    /// The release goes through even when the awaiting task is cancelled.
    ///
    /// Returns:
    ///     A future that resolves once the lock is released.
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     LockNotOwned: as for :meth:`release` (when awaited).
    #[doc = awaited_raises!()]
    fn arelease(slf: &Bound<'_, Self>) -> PyResult<Py<Operation>> {
        let (core, handle) = (slf.get().core.clone(), slf.clone().unbind());
        coroutine(slf.py(), "Lock.arelease", Cancel::Finish, async move {
            let _handle = handle; // alive until released (see `Drop for PyLock`)
            core.release().await
        })
    }

    /// Set the hold's expiry to ``ttl`` seconds from now: it does not add to the time left.
    ///
    /// ``extend(5)`` on a hold with 10 s left leaves 5 s (redis-py's
    /// ``Lock.extend(5)`` adds, leaving 15 s; its ``replace_ttl=True`` is
    /// this one; ``ferrolock.compat.redis_py.Lock.extend`` adds, as
    /// redis-py's). The ttl is a time to live from now everywhere in
    /// ferrolock: the option, each renewal, and this. Later renewals keep
    /// this ttl, and the watchdog re-plans its next renewal for it. The GIL
    /// is released while waiting for Redis.
    ///
    /// Args:
    ///     ttl: the new time to live, in seconds, between 0.001 and 366 days;
    ///         ``None`` (the default) means the handle's ``ttl``.
    ///
    /// Raises:
    ///     LockNotOwned: this handle holds nothing, its hold was lost, or
    ///         Redis shows it expired or was taken over (the hold is then
    ///         reported lost; it is not brought back).
    ///     ValueError: ``ttl`` is out of range.
    ///     TypeError: ``ttl`` is not a number or ``None``.
    #[doc = redis_raises!()]
    #[pyo3(signature = (ttl=None))]
    fn extend(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let (core, ttl) = (self.core.clone(), args::optional_seconds("ttl", ttl)?);
        let io = blocking_io(py);
        wait(py, async move { core.via(io).extend(ttl).await })
    }

    /// Asyncio version of :meth:`extend`: the expiry set to ``ttl`` seconds from now, not added to.
    ///
    /// Args:
    ///     ttl: as for :meth:`extend`.
    ///
    /// Returns:
    ///     A future that resolves once the expiry is pushed.
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     ValueError: ``ttl`` is out of range, raised at the call (before any await).
    ///     TypeError: ``ttl`` is not a number or ``None``, raised at the call (before any await).
    ///     LockNotOwned: as for :meth:`extend` (when awaited).
    #[doc = awaited_raises!()]
    #[pyo3(signature = (ttl=None))]
    fn aextend(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Py<Operation>> {
        let (core, ttl) = (self.core.clone(), args::optional_seconds("ttl", ttl)?);
        coroutine(py, "Lock.aextend", Cancel::Drop, async move { core.extend(ttl).await })
    }

    /// A plain hold's extend (``ferrolock.compat``): its expiry set to
    /// ``seconds`` from now, or with ``add`` those seconds added to the time
    /// left. Returns 1 when extended, 0 when the hold is no longer this
    /// handle's (it is reported lost), 2 when it was taken without expiry
    /// (nothing changed).
    #[pyo3(signature = (seconds, add))]
    fn _extend_plain(&self, py: Python<'_>, seconds: &Bound<'_, PyAny>, add: bool) -> PyResult<u8> {
        let (core, by) = (self.core.clone(), args::seconds("seconds", seconds)?);
        let io = blocking_io(py);
        wait(py, async move { core.extend_plain(by, add, io).await.map(extended_code) })
    }

    /// Asyncio version of :meth:`_extend_plain`.
    #[pyo3(signature = (seconds, add))]
    fn _aextend_plain(
        &self,
        py: Python<'_>,
        seconds: &Bound<'_, PyAny>,
        add: bool,
    ) -> PyResult<Py<Operation>> {
        let (core, by) = (self.core.clone(), args::seconds("seconds", seconds)?);
        coroutine(py, "Lock._aextend_plain", Cancel::Drop, async move {
            core.extend_plain(by, add, crate::transport::conn::Io::Multiplexed).await.map(extended_code)
        })
    }

    /// Whether anyone holds the lock now (any of its names, for a multi-lock).
    ///
    /// Asks Redis; the GIL is released while waiting.
    ///
    /// Returns:
    ///     ``True`` when some holder, this handle or another, holds a name.
    ///
    /// Raises:
    #[doc = redis_raises!()]
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        let io = blocking_io(py);
        wait(py, async move { core.via(io).locked().await })
    }

    #[doc = asyncio_twin!("locked", "A future of whether anyone holds the lock now.")]
    fn alocked(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.alocked", Cancel::Drop, async move { core.locked().await })
    }

    /// Whether this handle holds the lock now, as Redis sees it.
    ///
    /// Asks Redis; the GIL is released while waiting.
    ///
    /// Returns:
    ///     ``True`` when this handle's token holds every name of the lock.
    ///
    /// Raises:
    #[doc = redis_raises!()]
    fn owned(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.core.clone();
        let io = blocking_io(py);
        wait(py, async move { core.via(io).owned().await })
    }

    #[doc = asyncio_twin!("owned", "A future of whether this handle holds the lock now.")]
    fn aowned(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.aowned", Cancel::Drop, async move { core.owned().await })
    }

    /// Seconds left before this handle's hold expires, as Redis sees it now.
    ///
    /// Asks Redis; the GIL is released while waiting.
    ///
    /// Returns:
    ///     The remaining time in seconds (the least over the names of a
    ///     multi-lock, millisecond precision), or ``None`` when this handle
    ///     does not hold the lock.
    ///
    /// Raises:
    #[doc = redis_raises!()]
    fn ttl(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let core = self.core.clone();
        let io = blocking_io(py);
        wait(py, async move { Ok(core.via(io).remaining().await?.map(|d| d.as_secs_f64())) })
    }

    #[doc = asyncio_twin!("ttl", "A future of the seconds left on this handle's hold, or ``None``.")]
    fn attl(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.attl", Cancel::Drop, async move {
            Ok(core.remaining().await?.map(|d| d.as_secs_f64()))
        })
    }

    /// Resolve when the current hold ends, whether it was lost or released.
    ///
    /// A holder can await it beside its work (for example in
    /// :func:`asyncio.wait` with ``FIRST_COMPLETED``) to stop as soon as the
    /// lock is no longer its own.
    ///
    /// Returns:
    ///     ``True`` when the hold was lost (renewal failed, the ttl ran out, or
    ///     it was taken over), ``False`` when it was released. Resolves at
    ///     once with ``False`` when the handle holds nothing. Waiting costs no
    ///     round trip.
    fn wait_lost(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let core = self.core.clone();
        coroutine(py, "Lock.wait_lost", Cancel::Drop, async move {
            Ok(match core.is_held().then(|| core.lease()).flatten() {
                Some(lease) => lease.wait_ended().await,
                None => false,
            })
        })
    }

    /// Who holds each name of this lock, as Redis sees it now.
    ///
    /// Asks Redis; the GIL is released while waiting.
    ///
    /// Returns:
    ///     One entry per name, in the order of :attr:`names`: the holder's
    ///     :class:`LockInfo`, or ``None`` for a free name.
    ///
    /// Raises:
    #[doc = redis_raises!()]
    fn inspect(&self, py: Python<'_>) -> PyResult<Vec<Option<LockInfo>>> {
        let (core, io) = (self.core.clone(), blocking_io(py));
        wait(py, async move {
            // One record a name; a semaphore's permit handle: one a holder.
            let records = core.via(io).inspect().await?;
            let names = core.names();
            Ok(records
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.map(|r| LockInfo::new(names.get(i).unwrap_or(&names[0]).clone(), r)))
                .collect())
        })
    }

    /// The lock name: a ``str`` for a single lock, a ``tuple`` of the
    /// names for a multi-lock (one with two names or more).
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let names = self.core.names();
        if names.len() == 1 {
            Ok(PyString::new(py, &names[0]).into_any().unbind())
        } else {
            Ok(PyTuple::new(py, names)?.into_any().unbind())
        }
    }

    /// Every name of the lock, always as a tuple (one item for a single lock).
    #[getter]
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.core.names())
    }

    /// The owner token of this handle's current hold (32 hex digits when
    /// ferrolock made it), or ``None`` when it holds nothing.
    ///
    /// Pass it as ``Lock(client, name, token=...)`` to release or adopt the
    /// hold from another handle, process or machine.
    #[getter]
    fn token(&self) -> Option<String> {
        self.core.token()
    }

    /// The fencing token of the current hold, or ``None`` when this handle
    /// holds nothing or holds a restored hold not yet adopted.
    ///
    /// Strictly increasing per name: every hold gets a fence greater than
    /// every earlier one for that name (the Redis server's time in
    /// microseconds when taken, kept above the last fence on record). A
    /// multi-lock's hold has one fence for all of its names. Hand it to the
    /// resource you protect so that it can refuse writes from a stale holder.
    #[getter]
    fn fence(&self) -> Option<i64> {
        self.core.fence()
    }

    /// Whether the current, or else the latest, hold of this handle was lost.
    ///
    /// Turns ``True`` as soon as the hold's validity has run out without a
    /// renewal, before the watchdog reports it; stays ``True`` after the
    /// release, until the handle acquires again. ``False`` after a hold that
    /// ended by a successful release.
    #[getter]
    fn lost(&self) -> bool {
        self.core.lost()
    }

    /// `"lock"`, `"read"`, `"write"` (an RWMutex's handles) or `"permit"` (a semaphore's).
    #[getter]
    fn kind(&self) -> &'static str {
        self.core.kind()
    }

    /// Whether it takes its turn in arrival order (a fair Lock or RWMutex).
    #[getter]
    fn fair(&self) -> bool {
        self.core.is_fair()
    }

    /// The client this lock was made from.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }

    #[doc = enter_doc!()]
    fn __enter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let (me, waited) = (slf.get(), slf.get().entry_wait()?);
        if acquire_blocking(slf.py(), &me.core, waited)? {
            Ok(slf.clone())
        } else {
            Err(me.not_acquired().error(waited))
        }
    }

    #[doc = exit_doc!()]
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let core = self.core.clone();
        let io = blocking_io(py);
        let released = wait(py, async move { core.via(io).release().await });
        let body_raised = exc.get_item(1).ok().filter(|e| !e.is_none()).map(Bound::unbind);
        finish(&self.core, released, body_raised)
    }

    #[doc = aenter_doc!()]
    fn __aenter__(slf: &Bound<'_, Self>) -> PyResult<Py<Operation>> {
        scope::enter(slf)
    }

    #[doc = aexit_doc!()]
    #[pyo3(signature = (exc_type, exc=None, _tb=None))]
    fn __aexit__(
        slf: &Bound<'_, Self>,
        exc_type: &Bound<'_, PyAny>,
        exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        scope::exit(slf, exc_type, exc)
    }

    /// ``Lock[str]`` in an annotation: the type of a lock on one name.
    #[classmethod]
    fn __class_getitem__(cls: &Bound<'_, PyType>, item: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Ok(cls.py().import("types")?.getattr("GenericAlias")?.call1((cls, item))?.unbind())
    }

    fn __repr__(&self) -> String {
        let kind = match self.core.kind() {
            "lock" => String::new(),
            k => format!(" {k}"),
        };
        let state = match (self.core.is_held(), self.core.is_restored(), self.core.fence()) {
            (false, _, _) => String::new(),
            (true, true, _) => " restored".into(),
            (true, false, Some(f)) => format!(" held fence={f}"),
            (true, false, None) => " held".into(),
        };
        format!("<ferrolock.Lock {:?}{kind}{state}>", self.core.names().join(", "))
    }
}

/// `_extend_plain`'s answer as a number.
fn extended_code(e: PlainExtended) -> u8 {
    match e {
        PlainExtended::To(_) => 1,
        PlainExtended::NotHeld => 0,
        PlainExtended::NoExpiry => 2,
    }
}
