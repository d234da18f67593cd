//! The options every lock handle takes (`Lock(...)`, `RWMutex(...)` and its
//! `read` / `write` handles, `Client.semaphore`, an election's candidates):
//! written once, in [`handle_options!`], and checked in one place.
//!
//! From that one table come the text signatures (`help()`,
//! `inspect.signature`), the `Args:` entries of the docstrings, the runtime
//! check of the keywords ([`HandleOptions::from_kwargs`]) and, through
//! `_handle_options()`, the stubs' `TypedDict`s and the table in
//! `docs/api.md` (`make options` runs `scripts/gen_options.py`, which
//! rewrites them; `tests/docs/test_options.py` fails when they drift apart).

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::handle::lock::{LockOptions, LostCallback};

use super::args;
use super::retry::PyRetry;
use super::runtime::call_soon;

/// The table of handle options, handed to `render!` in the form `mode`
/// asks for. Each entry: name, Python type (as the stubs write it), default
/// (as Python writes it), the kinds of handle that take it, and its doc
/// (continuation lines indented for a docstring's `Args:` section).
///
/// Kinds: `lock` (`Lock`, `Client.lock` / `multi_lock` / `semaphore`, an
/// election's candidates), `rwmutex` (the `RWMutex` constructor: defaults of
/// its handles, and the mutex's own settings) and `handle` (`RWMutex.read`,
/// `write`, `try_read`, `try_write`).
macro_rules! handle_options {
    ($($mode:tt)*) => { $crate::py::options::render! { [$($mode)*]
        (ttl, "_Seconds | None", "None", [lock rwmutex handle],
            "seconds a hold lasts without renewal, between 0.001 and\n        \
             366 days; ``None`` means 30 seconds.")
        (auto_renew, "bool", "True", [lock rwmutex handle],
            "when ``True`` (the default) the hold is renewed every\n        \
             ``ttl / 3`` for as long as it is held; when ``False`` it\n        \
             expires after ``ttl`` and is then reported lost.")
        (blocking_timeout, "_Seconds | None", "None", [lock rwmutex handle],
            "the most seconds that ``with`` / ``async with``, and\n        \
             :meth:`Lock.acquire` / :meth:`Lock.aacquire` called without a\n        \
             ``timeout``, wait to take the lock (non-negative and finite; 0\n        \
             means a single attempt); ``None`` (the default) waits forever.")
        (retry, "Retry | None", "None", [lock rwmutex handle],
            "how long to wait between attempts while the lock is busy;\n        \
             ``None`` means ``Retry.exponential(0.002, 0.1)``.")
        (metadata, "str | None", "None", [lock rwmutex handle],
            "text stored beside the owner token (at most 65536 bytes),\n        \
             readable by anyone with :meth:`Lock.inspect`; ``None`` for none\n        \
             (an RWMutex stores it with writers only).")
        (token, "str | None", "None", [lock handle],
            "the owner token of a hold taken elsewhere (another handle,\n        \
             process or machine), 1 to 512 printable ASCII characters with no\n        \
             space. The new handle then\n        \
             starts out holding it without any call to Redis: it can\n        \
             :meth:`Lock.release` or :meth:`Lock.extend` it, and\n        \
             :meth:`Lock.acquire` adopts the hold (keeping its fence once Redis\n        \
             has it: a hold's first renewal or :meth:`Lock.extend` records it;\n        \
             adopted before, the hold gets a newer fence) and starts\n        \
             renewing it. A restored hold is not renewed, and ``on_lost`` is not\n        \
             called for it, until it is adopted. ``None`` (the default) for a\n        \
             handle that holds nothing.")
        (on_lost, "Callable[[], object] | None", "None", [lock rwmutex handle],
            "called once, with no arguments, when a hold of this\n        \
             handle is lost. It runs on a background thread (neither the\n        \
             caller's thread nor the event loop's), with the GIL; an\n        \
             exception it raises goes to :func:`sys.unraisablehook`.")
        (max_hold, "_Seconds | None", "None", [lock rwmutex handle],
            "the most seconds a hold may last, however long its holder\n        \
             keeps it (a stuck job): renewal stops this long after the hold\n        \
             was taken, so it ends by then in Redis and is reported lost\n        \
             like any loss (``on_lost``, :attr:`Lock.lost`); :meth:`Lock.extend`\n        \
             cannot pass it. At least ``ttl``; ``None`` (the default): no limit.")
        (fair, "bool", "False", [lock rwmutex],
            "take turns in arrival order, across processes. Waiters\n        \
             queue in Redis. A release hands over straight to the oldest\n        \
             live waiter (an RWMutex's: every reader queued before the next\n        \
             writer), so no newcomer can barge in. A waiter keeps its place\n        \
             while its process runs, whatever its threads do; one that gives\n        \
             up loses it at once, one whose process dies or is stopped\n        \
             (SIGSTOP) after at most min(ttl, 2 s). Use it with one name, on\n        \
             every handle of that name\n        \
             (an RWMutex takes it as a whole, not per handle).")
        (writer_preference, "bool | None", "None", [rwmutex],
            "hold new readers back while a writer waits;\n        \
             ``None`` means ``True`` (``False`` cannot be combined with ``fair``).")
    } };
}
pub(crate) use handle_options;

/// `handle_options!`'s table in one of its forms:
/// `keywords KIND`: `", ttl=None, ..."` for a text signature;
/// `args KIND`: the docstring's `Args:` entries;
/// `table`: the [`HandleOption`]s.
macro_rules! render {
    ([keywords $kind:ident] $(($name:ident, $ty:literal, $default:literal, [$($k:ident)*], $doc:literal))*) => {
        concat!($($crate::py::options::pick!($kind [$($k)*] (", ", stringify!($name), "=", $default))),*)
    };
    ([args $kind:ident] $(($name:ident, $ty:literal, $default:literal, [$($k:ident)*], $doc:literal))*) => {
        concat!($($crate::py::options::pick!($kind [$($k)*] ("    ", stringify!($name), ": ", $doc, "\n"))),*)
    };
    ([table] $(($name:ident, $ty:literal, $default:literal, [$($k:ident)*], $doc:literal))*) => {
        &[$($crate::py::options::HandleOption {
            name: stringify!($name),
            ty: $ty,
            default: $default,
            kinds: &[$(stringify!($k)),*],
            doc: $doc,
        }),*]
    };
}
pub(crate) use render;

/// `concat!` of `parts` when `kind` is among the kinds listed, else `""`.
macro_rules! pick {
    (lock [lock $($rest:ident)*] $parts:tt) => { concat! $parts };
    (rwmutex [rwmutex $($rest:ident)*] $parts:tt) => { concat! $parts };
    (handle [handle $($rest:ident)*] $parts:tt) => { concat! $parts };
    ($kind:ident [$first:ident $($rest:ident)*] $parts:tt) => {
        $crate::py::options::pick!($kind [$($rest)*] $parts)
    };
    ($kind:ident [] $parts:tt) => { "" };
}
pub(crate) use pick;

/// The keyword-only part of a text signature: `", ttl=None, ..."`.
macro_rules! keywords {
    ($kind:ident) => {
        $crate::py::options::handle_options!(keywords $kind)
    };
}
pub(crate) use keywords;

/// The `Args:` entries of the options of `kind`, one per line.
macro_rules! args_doc {
    ($kind:ident) => {
        $crate::py::options::handle_options!(args $kind)
    };
}
pub(crate) use args_doc;

/// One handle option, as `handle_options!` lists it.
pub(crate) struct HandleOption {
    pub name: &'static str,
    /// The type as the stubs write it.
    pub ty: &'static str,
    /// The default as Python writes it.
    pub default: &'static str,
    /// Which handles take it: `lock`, `rwmutex`, `handle`.
    pub kinds: &'static [&'static str],
    pub doc: &'static str,
}

/// Every handle option, in the order of the signatures.
pub(crate) const OPTIONS: &[HandleOption] = handle_options!(table);

/// Which handle options a call takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    RwMutex,
    Handle,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::RwMutex => "rwmutex",
            Kind::Handle => "handle",
        }
    }

    fn names(self) -> impl Iterator<Item = &'static str> {
        OPTIONS.iter().filter(move |o| o.kinds.contains(&self.key())).map(|o| o.name)
    }
}

/// The table, for the stub generator and the tests: one
/// `(name, type, default, kinds, doc)` per option, in signature order.
#[pyfunction]
pub(crate) fn _handle_options(
) -> Vec<(&'static str, &'static str, &'static str, Vec<&'static str>, &'static str)> {
    OPTIONS.iter().map(|o| (o.name, o.ty, o.default, o.kinds.to_vec(), o.doc)).collect()
}

/// Keywords of the locks people come from that mean another one here, with
/// what they mean there.
const OTHER_WORDS: &[(&str, &str, &str)] = &[
    (
        "timeout",
        "ttl",
        "redis-py's timeout= is the hold's time to live, ttl= here (how long to wait is blocking_timeout=)",
    ),
    ("expire", "ttl", "python-redis-lock's expire= is the hold's time to live, ttl= here"),
    ("auto_renewal", "auto_renew", "python-redis-lock's auto_renewal= is auto_renew= here (on by default)"),
    (
        "sleep",
        "retry",
        "redis-py's sleep= is the pause between attempts: retry=ferrolock.Retry.fixed(sleep) here",
    ),
];

/// `TypeError` for a keyword `callee` does not take, naming the one it
/// means here when it is another library's word for it, else the closest
/// one it does take (as `difflib.get_close_matches` finds it).
fn unexpected(py: Python<'_>, callee: &str, key: &str, kind: Kind) -> PyErr {
    let known: Vec<&str> = kind.names().collect();
    if let Some((_, meant, why)) =
        OTHER_WORDS.iter().find(|(word, meant, _)| *word == key && known.contains(meant))
    {
        return PyTypeError::new_err(format!(
            "{callee} got an unexpected keyword argument {key:?}; did you mean {meant:?}? {why}"
        ));
    }
    let close = py
        .import("difflib")
        .and_then(|d| d.call_method1("get_close_matches", (key, known, 1)))
        .and_then(|m| m.get_item(0))
        .and_then(|m| m.extract::<String>())
        .ok();
    let hint = close.map_or(String::new(), |c| format!("; did you mean {c:?}?"));
    PyTypeError::new_err(format!("{callee} got an unexpected keyword argument {key:?}{hint}"))
}

/// A `bool` option, or `None` for its default.
pub(crate) fn flag(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) if v.is_instance_of::<PyBool>() => v.is_truthy().map(Some),
        Some(v) => Err(PyTypeError::new_err(format!(
            "{name} must be bool, got {}",
            v.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
        ))),
    }
}

/// Keyword arguments as a call site got them: `overrides` over `defaults`.
pub(crate) struct Kwargs<'a, 'py> {
    pub defaults: Option<&'a Bound<'py, PyDict>>,
    pub overrides: Option<&'a Bound<'py, PyDict>>,
}

impl<'py> Kwargs<'_, 'py> {
    /// The value of `name` (`None` is the same as not given).
    pub(crate) fn get(&self, name: &str) -> Option<Bound<'py, PyAny>> {
        [self.overrides, self.defaults]
            .into_iter()
            .flatten()
            .find_map(|d| d.get_item(name).ok().flatten())
            .filter(|v| !v.is_none())
    }

    /// Refuses a keyword that `kind` does not take.
    pub(crate) fn check(&self, callee: &str, kind: Kind) -> PyResult<()> {
        for d in [self.defaults, self.overrides].into_iter().flatten() {
            for key in d.keys() {
                let key: String = key.extract()?;
                if !kind.names().any(|n| n == key) {
                    return Err(unexpected(d.py(), callee, &key, kind));
                }
            }
        }
        Ok(())
    }
}

pub(crate) struct HandleOptions {
    pub lock: LockOptions,
    /// How long `with` / `async with` and `acquire()` without a timeout wait (None: forever).
    pub blocking_timeout: Option<Duration>,
    /// Restore a hold taken elsewhere.
    pub token: Option<String>,
}

impl HandleOptions {
    /// From keyword arguments (`defaults` overridden by `overrides`) that
    /// `callee`, taking the options of `kind`, was given.
    pub(crate) fn from_kwargs(
        callee: &str,
        kind: Kind,
        defaults: Option<&Bound<'_, PyDict>>,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<HandleOptions> {
        let kw = Kwargs { defaults, overrides };
        kw.check(callee, kind)?;
        Self::parse(&kw)
    }

    /// The handle options among `kw` (which the caller checked).
    pub(crate) fn parse(kw: &Kwargs<'_, '_>) -> PyResult<HandleOptions> {
        let defaults = LockOptions::default();
        let retry = match kw.get("retry") {
            None => defaults.retry,
            Some(v) => v
                .cast_into::<PyRetry>()
                .map_err(|_| PyTypeError::new_err("retry must be a ferrolock.Retry"))?
                .get()
                .inner
                .clone(),
        };
        let lock = LockOptions {
            ttl: args::optional_seconds("ttl", kw.get("ttl").as_ref())?.unwrap_or(defaults.ttl),
            auto_renew: flag("auto_renew", kw.get("auto_renew").as_ref())?.unwrap_or(defaults.auto_renew),
            fair: flag("fair", kw.get("fair").as_ref())?.unwrap_or(defaults.fair),
            retry,
            metadata: args::optional_text("metadata", kw.get("metadata").as_ref())?,
            on_lost: on_lost_callback(kw.get("on_lost").as_ref())?,
            max_hold: args::optional_seconds("max_hold", kw.get("max_hold").as_ref())?,
        };
        Ok(HandleOptions {
            lock,
            blocking_timeout: wait_limit(kw.get("blocking_timeout").as_ref())?,
            token: args::optional_text("token", kw.get("token").as_ref())?,
        })
    }
}

fn wait_limit(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let t = args::number("blocking_timeout", v)?;
    if !(t.is_finite() && t >= 0.0) {
        return Err(PyValueError::new_err(format!(
            "blocking_timeout must be a non-negative, finite number of seconds or None, got {t}"
        )));
    }
    Duration::try_from_secs_f64(t)
        .map(Some)
        .map_err(|_| PyValueError::new_err(format!("blocking_timeout is out of range: {t}")))
}

/// `on_lost` is called once, with no arguments, on a thread of its own.
pub(crate) fn on_lost_callback(f: Option<&Bound<'_, PyAny>>) -> PyResult<Option<LostCallback>> {
    let Some(f) = f.filter(|f| !f.is_none()) else {
        return Ok(None);
    };
    if !f.is_callable() {
        return Err(PyTypeError::new_err("on_lost must be callable"));
    }
    let f = Arc::new(f.clone().unbind());
    Ok(Some(Arc::new(move |_why: &str| {
        let f = f.clone();
        call_soon(move |py| {
            if let Err(e) = f.call0(py) {
                e.write_unraisable(py, Some(f.bind(py)));
            }
        });
    })))
}
