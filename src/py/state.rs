//! What the operator's reads return to Python: `LockInfo` (one hold) and
//! `LockState` (everything stored under one name, of one kind).

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::ops::listing::State;
use crate::scripts::Record;

/// `repr(v)` as Python writes it (`'text'`, `None`, `29.999`), for the
/// reprs of the snapshot classes.
pub(crate) fn py_repr<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> PyResult<String> {
    Ok(v.into_bound_py_any(py)?.repr()?.to_string())
}

/// Who holds a lock, as ``Client.inspect`` or ``Lock.inspect`` found it.
///
/// A read-only snapshot taken from Redis at the time of the call; it does not
/// follow later changes. Instances are made by ferrolock only (``LockInfo()``
/// raises ``TypeError``); two snapshots are equal when every field is.
#[pyclass(name = "LockInfo", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq, Clone)]
pub struct LockInfo {
    /// The lock name (without the client's prefix).
    name: String,
    /// The holder's owner token (32 hex digits for tokens ferrolock made).
    token: String,
    /// The ``metadata`` the holder gave its ``Lock`` (``""`` when it gave
    /// ``""``), or ``None`` when it gave none.
    metadata: Option<String>,
    /// The fencing token of the hold (see :attr:`Lock.fence`); 0 when Redis
    /// has none: a plain hold's, or a Lock's before its first renewal (or
    /// :meth:`Lock.extend`) records the fence its take by a transaction gave.
    fence: i64,
    /// Seconds left before the hold expires (millisecond precision), or
    /// ``None`` when the key has no expiry set.
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
    #[new]
    #[pyo3(signature = (name, token, metadata=None, fence=0, ttl=None))]
    fn py_new(name: String, token: String, metadata: Option<String>, fence: i64, ttl: Option<f64>) -> Self {
        LockInfo { name, token, metadata, fence, ttl }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "LockInfo(name={}, token={}, metadata={}, fence={}, ttl={})",
            py_repr(py, &self.name)?,
            py_repr(py, &self.token)?,
            py_repr(py, &self.metadata)?,
            self.fence,
            py_repr(py, self.ttl)?,
        ))
    }
}

/// One name used as one kind of primitive, as :meth:`Client.scan` or
/// :meth:`Client.describe` found it in Redis.
///
/// A read-only snapshot. A name may be used as several kinds of primitive
/// at once (a Lock, an RWMutex, a semaphore, an election: their keys never
/// overlap): then it has one state of each kind.
/// Instances are made by ferrolock only; two snapshots are equal when every
/// field is.
#[pyclass(name = "LockState", module = "ferrolock", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct LockState {
    /// The key prefix it lives under: the client's own, unless listed with
    /// ``scan(all_prefixes=True)``.
    prefix: String,
    /// The name (without the prefix).
    name: String,
    /// ``"lock"`` (a :class:`Lock`, fair or not), ``"rwmutex"``,
    /// ``"semaphore"`` or ``"election"`` (from the key layout table).
    kind: &'static str,
    /// A Lock's holder, an RWMutex's writer, or an election's leader (its
    /// value as ``metadata``, its term number as ``fence``); ``None`` when
    /// there is none (a semaphore's holders are in :attr:`holders`).
    holder: Option<LockInfo>,
    /// An RWMutex's live readers: (token, seconds left) each.
    readers: Vec<(String, f64)>,
    /// Every live hold, whatever the kind: :attr:`holder` first, then an
    /// RWMutex's readers (``metadata`` ``None``, ``fence`` 0) and a
    /// semaphore's permit holders (token, metadata, fence, seconds left),
    /// earliest expiry first. Remove one with
    /// ``Client.force_release(name, token=...)``.
    holders: Vec<LockInfo>,
    /// How many may hold at once where Redis stores it (a semaphore's
    /// permits, while any is held), else ``None``.
    limit: Option<u64>,
    /// Readers waiting in a fair RWMutex's queue (live ones).
    queued_readers: u64,
    /// Writers waiting in a fair queue (a fair Lock's, a fair semaphore's
    /// waiters and an election's campaigners count here).
    queued_writers: u64,
    /// Seconds left on a waiting writer's intent (an RWMutex with writer
    /// preference holding new readers back), or ``None``.
    writer_intent: Option<f64>,
    /// Connections subscribed to its wake-ups while it is held: one per
    /// process (and client) with a waiter, however many of its threads or
    /// tasks wait; a waiter that polls (its subscription failed) is not
    /// counted, nor is any where the Redis user may not run ``PUBSUB``.
    subscribed: u64,
    /// How many wait, as far as Redis can tell: the live waiters of the
    /// fair queues plus one for a writer's intent, or, where more,
    /// :attr:`subscribed`. A non-fair primitive keeps no queue, so its
    /// waiters count by process: three threads of one process waiting for a
    /// Lock count as 1.
    waiters: u64,
}

impl LockState {
    fn new(s: State) -> Self {
        let seconds = |ms: i64| ms as f64 / 1000.0;
        let info = |r| LockInfo::new(s.name.clone(), r);
        LockState {
            waiters: s.waiters(),
            subscribed: s.subscribed,
            kind: s.kind.as_str(),
            holder: s.holder.map(info),
            readers: s.readers.into_iter().map(|r| (r.token, seconds(r.pttl_ms))).collect(),
            holders: s.holders.into_iter().map(info).collect(),
            limit: s.limit,
            queued_readers: s.queued_readers,
            queued_writers: s.queued_writers,
            writer_intent: s.intent_pttl_ms.map(seconds),
            name: s.name,
            prefix: s.prefix,
        }
    }

    pub(crate) fn all(states: Vec<State>) -> Vec<LockState> {
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
        Ok(format!(
            "LockState(name={}, kind={}, holder={holder}, readers={}, holders={}, waiters={})",
            py_repr(py, &self.name)?,
            py_repr(py, self.kind)?,
            self.readers.len(),
            self.holders.len(),
            self.waiters
        ))
    }
}
