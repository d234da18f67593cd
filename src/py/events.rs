//! The core's events, handed to Python listeners (`ferrolock.add_listener`)
//! on a thread of their own: the core never waits for Python. The core is
//! observed only while at least one listener is registered.
//!
//! A future run for a Python call (an acquire, sync or async) carries the
//! caller's `contextvars.Context` while anyone observes (`in_caller_context`),
//! and the events it emits hand it on (`LockEvent.context`): a listener such
//! as `ferrolock.otel` reads the caller's span there.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tokio::task::futures::TaskLocalFuture;

use crate::support::events::{self, Event, Observer, Outcome};
use crate::support::per_process::PerProcess;

use super::exit::{exiting, InFlight};

/// Events waiting for the listeners' thread; beyond this many, new ones are
/// dropped (and counted) rather than slowing the locks down.
const QUEUE: usize = 65536;

/// How long the listeners' thread gathers events after the first of a batch,
/// and the most it delivers at once.
const BATCH: Duration = Duration::from_millis(2);
const MAX_BATCH: usize = 4096;

/// A Python `contextvars.Context`, shared by the events of one call.
type CallerContext = Option<Arc<Py<PyAny>>>;

tokio::task_local! {
    /// The context of the Python call the running future serves.
    static CALLER: CallerContext;
}

/// `fut`, carrying the calling thread's (or task's) `contextvars.Context`
/// to the events it emits; nothing is captured while nobody observes.
pub(crate) fn in_caller_context<F: Future>(py: Python<'_>, fut: F) -> TaskLocalFuture<CallerContext, F> {
    let context = if events::observed() {
        py.import("contextvars")
            .and_then(|m| m.call_method0("copy_context"))
            .ok()
            .map(|c| Arc::new(c.unbind()))
    } else {
        None
    };
    CALLER.scope(context, fut)
}

/// One thing that happened to a lock of this process, as given to the
/// listeners of :func:`add_listener`.
///
/// ``kind`` says what happened, and ``seconds`` and ``detail`` what it
/// measured:
///
/// ==================  ============================  =========================================
/// ``kind``            ``seconds``                   ``detail``
/// ==================  ============================  =========================================
/// ``acquired``        how long the acquire waited   ``"acquired"``
/// ``acquire_failed``  how long the acquire waited   ``"timed_out"``, ``"not_acquired"``
///                                                   (busy, or the retry gave up),
///                                                   ``"error"`` or ``"cancelled"``
/// ``released``        how long the hold lasted      ``None``
/// ``lost``            how long the hold lasted      ``"expired"`` (ttl ran out, no renewal),
///                                                   ``"taken_over"`` (gone from Redis),
///                                                   ``"unreachable"`` or ``"unreplicated"``
///                                                   (renewals not acknowledged by the
///                                                   replicas, ``replica_policy="fail"``)
/// ``renewed``         the renewal's round trip      ``None``
/// ``woken``           ``None``                      ``"pubsub"`` (a release's message),
///                                                   ``"handover"`` (a fair release named
///                                                   this waiter) or ``"poll"`` (no message:
///                                                   its retry delay ran out, or its
///                                                   subscription dropped)
/// ``unreplicated``    ``None``                      the step fewer replicas than the client's
///                                                   ``replicas`` acknowledged in time:
///                                                   ``"acquire"``, ``"renewal"`` or
///                                                   ``"extend"`` (whatever ``replica_policy``
///                                                   then did with it)
/// ==================  ============================  =========================================
#[pyclass(name = "LockEvent", module = "ferrolock", frozen)]
pub struct LockEvent {
    /// What happened (see the table above).
    #[pyo3(get)]
    kind: &'static str,
    /// A :class:`Lock`, or an RWMutex's read or write handle.
    #[pyo3(get)]
    lock_kind: &'static str,
    /// Whether the lock takes turns in arrival order.
    #[pyo3(get)]
    fair: bool,
    /// The duration measured (see the table above).
    #[pyo3(get)]
    seconds: Option<f64>,
    /// The outcome, cause or kind of wake-up (see the table above).
    #[pyo3(get)]
    detail: Option<&'static str>,
    /// For an acquire: whether it could wait (``False`` for one attempt,
    /// and for every other kind of event).
    #[pyo3(get)]
    blocking: bool,
    /// Tells apart the holds alive at one time in this process: the same
    /// number in a hold's ``acquired``, ``renewed``, ``released``, ``lost``
    /// and ``unreplicated`` events. ``None`` for an acquire that took nothing,
    /// for ``woken``, and for an ``unreplicated`` grant that was undone.
    #[pyo3(get)]
    hold: Option<u64>,
    /// When it happened, in seconds since the epoch (as :func:`time.time`).
    #[pyo3(get)]
    time: f64,
    names: Vec<String>,
    context: CallerContext,
}

#[pymethods]
impl LockEvent {
    /// Every name of the lock (one, unless it is a multi-lock).
    #[getter]
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.names)
    }

    /// The :class:`contextvars.Context` of the call the event came from (an
    /// acquire's, sync or async, as it was when the call was made), or
    /// ``None`` (a renewal, a loss found by the watchdog).
    #[getter]
    fn context(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.context.as_deref().map(|c| c.clone_ref(py))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |v: Bound<'_, PyAny>| v.repr().map(|r| r.to_string());
        Ok(format!(
            "LockEvent(kind={}, names={}, lock_kind={}, seconds={}, detail={})",
            r(self.kind.into_pyobject(py)?.into_any())?,
            r(self.names(py)?.into_any())?,
            r(self.lock_kind.into_pyobject(py)?.into_any())?,
            r(self.seconds.into_pyobject(py)?.into_any())?,
            r(self.detail.into_pyobject(py)?.into_any())?,
        ))
    }
}

impl LockEvent {
    fn new(event: &Event<'_>) -> LockEvent {
        let subject = event.subject();
        let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let mut e = LockEvent {
            kind: "",
            lock_kind: subject.kind,
            fair: subject.fair,
            seconds: None,
            detail: None,
            blocking: false,
            hold: None,
            time,
            names: subject.names.clone(),
            context: CALLER.try_with(Clone::clone).ok().flatten(),
        };
        match *event {
            Event::Acquire { outcome, wait, blocking, hold, .. } => {
                e.kind = if outcome == Outcome::Acquired { "acquired" } else { "acquire_failed" };
                (e.seconds, e.detail, e.blocking, e.hold) =
                    (Some(wait.as_secs_f64()), Some(outcome.as_str()), blocking, hold);
            }
            Event::Release { held, hold, .. } => {
                (e.kind, e.seconds, e.hold) = ("released", Some(held.as_secs_f64()), Some(hold));
            }
            Event::Lost { cause, held, hold, .. } => {
                (e.kind, e.seconds, e.detail, e.hold) =
                    ("lost", Some(held.as_secs_f64()), Some(cause.as_str()), Some(hold));
            }
            Event::Renewed { latency, hold, .. } => {
                (e.kind, e.seconds, e.hold) = ("renewed", Some(latency.as_secs_f64()), Some(hold));
            }
            Event::Woken { wakeup, .. } => (e.kind, e.detail) = ("woken", Some(wakeup.as_str())),
            Event::Unreplicated { step, hold, .. } => {
                (e.kind, e.detail, e.hold) = ("unreplicated", Some(step.as_str()), hold);
            }
        }
        e
    }
}

/// What the listeners' thread is given: an event, or a flush to answer
/// once every event before it went out.
enum Message {
    Event(LockEvent),
    Flush(SyncSender<()>),
}

const THREAD: &str = "ferrolock-events";

/// Queues each event for the listeners' thread (started in each process
/// on its first event).
struct Forwarder {
    /// This process's queue (its forwarding thread's: a forked child starts its own).
    queue: PerProcess<SyncSender<Message>>,
    dropped: AtomicU64,
}

impl Observer for Forwarder {
    fn notify(&self, event: &Event<'_>) {
        let event = LockEvent::new(event);
        let queue = self.queue.try_get(|| {
            let (tx, rx) = sync_channel(QUEUE);
            std::thread::Builder::new().name(THREAD.into()).spawn(move || deliver(&rx)).map(|_| tx)
        });
        let Ok(tx) = queue else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(Message::Event(event)) {
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                log::warn!("event listeners fall behind: events are being dropped");
            }
        }
    }
}

static LISTENERS: Mutex<Vec<Py<PyAny>>> = Mutex::new(Vec::new());
static FORWARDER: LazyLock<Arc<Forwarder>> =
    LazyLock::new(|| Arc::new(Forwarder { queue: PerProcess::new(), dropped: AtomicU64::new(0) }));

fn forwarder() -> Arc<dyn Observer> {
    FORWARDER.clone()
}

/// The listeners' thread: calls each listener with each event, in order.
/// Events are taken in batches (what comes within `BATCH` of the first),
/// each delivered under one hold of the GIL: the threads that take locks
/// then rarely wait for the GIL while listeners run.
fn deliver(messages: &Receiver<Message>) {
    while let Ok(first) = messages.recv() {
        let _in_flight = InFlight::enter();
        if exiting() {
            return;
        }
        let mut batch = vec![first];
        let until = Instant::now() + BATCH;
        while batch.len() < MAX_BATCH && !matches!(batch.last(), Some(Message::Flush(_))) {
            match messages.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(message) => batch.push(message),
                Err(_) => break,
            }
        }
        Python::attach(|py| {
            let listeners: Vec<Py<PyAny>> =
                LISTENERS.lock().unwrap().iter().map(|l| l.clone_ref(py)).collect();
            for message in batch {
                let event = match message {
                    Message::Event(event) => event,
                    Message::Flush(done) => {
                        let _ = done.try_send(());
                        continue;
                    }
                };
                let Ok(event) = Py::new(py, event) else { continue };
                for listener in &listeners {
                    if let Err(e) = listener.call1(py, (event.clone_ref(py),)) {
                        e.write_unraisable(py, Some(listener.bind(py)));
                    }
                }
            }
        });
    }
}

/// Wait until the listeners have been called with every event so far.
///
/// The GIL is released while waiting.
///
/// Args:
///     timeout: the most seconds to wait; ``None`` (the default) waits for as
///         long as it takes.
///
/// Returns:
///     ``True`` when they have been, ``False`` when ``timeout`` passed first.
///
/// Raises:
///     RuntimeError: called by a listener (it would wait for itself).
///     TypeError, ValueError: ``timeout`` is not a positive number of seconds.
#[pyfunction]
#[pyo3(signature = (timeout=None))]
pub(crate) fn flush_events(py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let limit = super::args::optional_seconds("timeout", timeout)?;
    if std::thread::current().name() == Some(THREAD) {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "flush_events was called by a listener: it would wait for itself",
        ));
    }
    let Some(tx) = FORWARDER.queue.built() else {
        return Ok(true); // no event yet in this process
    };
    let (done_tx, done_rx) = sync_channel(1);
    Ok(py.detach(move || {
        if tx.send(Message::Flush(done_tx)).is_err() {
            return true;
        }
        match limit {
            Some(limit) => done_rx.recv_timeout(limit).is_ok(),
            None => done_rx.recv().is_ok(),
        }
    }))
}

/// Call ``listener(event)`` for every :class:`LockEvent` of this process.
///
/// Listeners are called one event at a time, in order, on a thread of
/// ferrolock's (never on a thread that takes or renews locks, so a slow
/// listener never delays a lock; past 65536 events behind, new ones are
/// dropped and a warning is logged). An exception a listener raises goes to
/// :func:`sys.unraisablehook`; the next listener is called all the same.
/// While no listener is registered, events cost nothing.
///
/// Raises:
///     TypeError: ``listener`` is not callable.
#[pyfunction]
pub(crate) fn add_listener(listener: &Bound<'_, PyAny>) -> PyResult<()> {
    if !listener.is_callable() {
        return Err(PyTypeError::new_err("a listener must be callable: it is called with each LockEvent"));
    }
    let mut all = LISTENERS.lock().unwrap();
    all.push(listener.clone().unbind());
    if all.len() == 1 {
        events::observe(forwarder());
    }
    Ok(())
}

/// Stop calling ``listener`` (the very object given to :func:`add_listener`).
///
/// Raises:
///     ValueError: it is not registered.
#[pyfunction]
pub(crate) fn remove_listener(listener: &Bound<'_, PyAny>) -> PyResult<()> {
    let mut all = LISTENERS.lock().unwrap();
    let Some(i) = all.iter().position(|l| l.bind(listener.py()).is(listener)) else {
        return Err(PyValueError::new_err(
            "this listener was not added (or was removed already): pass the object given to add_listener",
        ));
    };
    all.remove(i);
    if all.is_empty() {
        events::unobserve(&forwarder());
    }
    Ok(())
}

/// Events dropped because the listeners fell more than 65536 behind.
#[pyfunction]
pub(crate) fn _dropped_events() -> u64 {
    FORWARDER.dropped.load(Ordering::Relaxed)
}
