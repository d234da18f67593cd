//! `ferrolock.Client`: one Redis deployment, shared by every lock made from it.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::client::Client;
use crate::handle::lock::check_name;
use crate::transport::backend::ClientOptions;
use crate::transport::replication::{Policy, Replication};

use super::args;
use super::coro::{coroutine, Cancel, Operation};
use super::runtime::{blocking_io, wait};
use super::state::{LockInfo, LockState};

/// A connection to one Redis deployment, shared by every lock made from it.
///
/// The connection is multiplexed and reconnects by itself; a forked child
/// process opens its own. Thread-safe: share one client between threads,
/// tasks and locks. :class:`ferrolock.Client` subclasses this class and adds
/// ``synchronized``.
///
/// Check the options; no network I/O.
///
/// Making a client never connects, so one can be built at import (a Django
/// settings module, a Celery app) while Redis is down. The first use
/// connects and checks the server, and raises what that found (the errors
/// below); :meth:`connect` does that now. :meth:`close` (or the end of a
/// ``with`` / ``async with`` block) closes its connections.
///
/// Args:
///     url: where Redis is: ``redis://[user:password@]host[:port][/db]``,
///         ``rediss://...`` (TLS; ``#insecure`` at the end skips certificate
///         checks), ``unix:///path/to/redis.sock?db=N``,
///         ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
///         (the master is asked of the Sentinels at every reconnect and every
///         second in use, so a failover is followed; the credentials are the
///         data nodes'), ``rediss+sentinel://...`` (TLS to the Sentinels and
///         the data nodes); either takes the Sentinels' own ACL user as
///         ``?sentinel_username=USER&sentinel_password=PASSWORD``
///         (percent-encoded),
///         ``redis+cluster://[user:password@]host:port[,host:port...]``
///         (a Redis Cluster, seeded by any of its nodes;
///         ``rediss+cluster://`` for TLS; wake-ups use sharded pub/sub), or
///         ``[password@]host[:port]``. A ``redis://``, ``rediss://`` or
///         ``unix://`` URL's query takes redis-py's parameters (``db``,
///         ``socket_timeout``, ``client_name``, ``ssl_cert_reqs``, ...):
///         each is honoured, not used (it shapes only redis-py's own
///         connections: the reason is logged) or refused by name, see "URL
///         query parameters" in the API reference.
///         ``None`` (the default) means
///         ``"redis://127.0.0.1:6379/0"``. A list of URLs of independent
///         masters (three or five, each a server or a Sentinel service)
///         makes a quorum: a lock is held while a majority of them hold it
///         (Redlock); Lock (not fair), multi_lock and RWMutex (not fair)
///         are supported on it, and the other primitives raise
///         ``ValueError`` naming that.
///     connect_timeout: seconds allowed to connect (and later to
///         reconnect); positive and finite. ``None`` means 5 seconds.
///     command_timeout: seconds allowed for Redis to answer one command;
///         positive and finite. ``None`` means 5 seconds.
///     prefix: prepended to every key, to keep the locks of one
///         application apart from others. ``None`` means ``"ferrolock:"``.
///     ca_file: path of a PEM file of the certificate authorities to trust
///         for a ``rediss://``, ``rediss+cluster://`` or ``rediss+sentinel://``
///         URL (Sentinels and data nodes alike); ``None`` (the default) uses the
///         system's trusted roots.
///     replicas: how many replicas must acknowledge every grant (a lock,
///         a read or write hold, a permit, a term) and every renewal or
///         extend before it counts: ``WAIT replicas replica_timeout`` is sent
///         right behind each such script on the same connection. ``None``
///         (the default) or ``0`` turns it off. See ``docs/reliability.md``
///         for what it guarantees, and what it does not.
///     replica_timeout: seconds the server waits for those replicas;
///         at least 0.001, and shorter than ``command_timeout``. ``None``
///         means 0.1 seconds.
///     replica_policy: what happens when fewer replicas acknowledge in time.
///         ``"fail"`` (``None``, the default): a grant is undone (nothing is
///         left in Redis) and the acquire raises :class:`LockNotReplicated`;
///         a renewal does not count (the hold keeps its last acknowledged
///         validity, the watchdog retries, and the hold is lost if none is
///         acknowledged in time); ``extend`` raises :class:`LockNotReplicated`.
///         ``"warn"``: the step counts, a warning is logged (at most one per
///         10 s) and an ``unreplicated`` :class:`LockEvent` is told.
///     replica_fsync: wait until the replicas have also written each step
///         to their append-only file (``WAITAOF 0 replicas replica_timeout``),
///         not only received it. Needs Redis 7.2 or newer and ``replicas``
///         of 1 or more.
///
/// Raises:
///     ValueError: the URL or an option is invalid, ``ca_file`` cannot be
///         read, or ``ca_file`` is given without a ``rediss://`` URL;
///         ``replicas`` is negative, ``replica_timeout`` is under 0.001 s or
///         not shorter than ``command_timeout``, ``replica_policy`` is neither
///         ``"fail"`` nor ``"warn"``, or ``replica_fsync`` is set without
///         ``replicas``.
///     TypeError: an argument has the wrong type.
#[pyclass(name = "Client", module = "ferrolock", subclass, frozen, weakref)]
pub struct PyClient {
    pub(crate) core: Client,
}

/// `url` as given: one URL, or a list or tuple of them (independent masters
/// for a quorum; a list of one is that one URL).
fn urls_of(url: &Bound<'_, PyAny>) -> PyResult<(String, Vec<String>)> {
    if url.is_instance_of::<pyo3::types::PyString>() {
        return Ok((args::text("url", url)?, Vec::new()));
    }
    let Ok(seq) = url.cast::<pyo3::types::PySequence>() else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "url must be str, or a list of str (the masters of a quorum), got {}",
            url.get_type().name()?
        )));
    };
    let mut urls = Vec::new();
    for (i, item) in seq.try_iter()?.enumerate() {
        urls.push(args::text(&format!("url[{i}]"), &item?)?);
    }
    match urls.len() {
        0 => Err(pyo3::exceptions::PyValueError::new_err(
            "the list of URLs is empty: give one URL, or the URLs of the masters of a quorum (three or five)",
        )),
        1 => Ok((urls.remove(0), Vec::new())),
        _ => Ok((String::new(), urls)),
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (
        url=None, *, connect_timeout=None, command_timeout=None, prefix=None, ca_file=None,
        replicas=None, replica_timeout=None, replica_policy=None, replica_fsync=false,
    ))]
    #[expect(clippy::too_many_arguments)]
    fn new(
        url: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        ca_file: Option<PathBuf>,
        replicas: Option<&Bound<'_, PyAny>>,
        replica_timeout: Option<&Bound<'_, PyAny>>,
        replica_policy: Option<&Bound<'_, PyAny>>,
        replica_fsync: bool,
    ) -> PyResult<Self> {
        let defaults = ClientOptions::default();
        let (url, urls) = match url {
            Some(u) if !u.is_none() => urls_of(u)?,
            _ => (defaults.url.clone(), Vec::new()),
        };
        let opts = ClientOptions {
            url,
            urls,
            connect_timeout: args::optional_seconds("connect_timeout", connect_timeout)?
                .unwrap_or(defaults.connect_timeout),
            command_timeout: args::optional_seconds("command_timeout", command_timeout)?
                .unwrap_or(defaults.command_timeout),
            prefix: match prefix {
                Some(p) if !p.is_none() => args::text("prefix", p)?,
                _ => defaults.prefix,
            },
            ca_file,
            replication: Replication {
                replicas: args::count("replicas", replicas)?,
                timeout: args::optional_seconds("replica_timeout", replica_timeout)?
                    .unwrap_or(crate::transport::replication::DEFAULT_TIMEOUT),
                policy: match replica_policy {
                    Some(p) if !p.is_none() => Policy::parse(&args::text("replica_policy", p)?)?,
                    _ => Policy::Fail,
                },
                fsync: replica_fsync,
            },
            client_name: None,
        };
        Ok(PyClient { core: Client::new(opts)? })
    }

    /// Connect to Redis and check the server now, rather than at the first
    /// use; nothing is done when this process has connected already.
    ///
    /// The GIL is released while connecting, which takes at most
    /// ``connect_timeout`` (a quorum: until a majority of its masters are
    /// connected).
    ///
    /// Raises:
    ///     LockConnectionError: Redis cannot be reached within
    ///         ``connect_timeout``, or it refused the credentials.
    ///     LockConfigurationError: the server answered but does not fit the
    ///         settings (see its documentation), including
    ///         ``replica_fsync=True`` on a server older than Redis 7.2, or two
    ///         URLs of one server in a quorum.
    ///     ValueError: the client is closed.
    fn connect(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.core.clone();
        wait(py, async move { client.ready().await })
    }

    /// Asyncio version of :meth:`connect`.
    ///
    /// Returns:
    ///     A future of ``None``, done once connected.
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     LockConnectionError: as :meth:`connect` (when awaited).
    ///     LockConfigurationError: as :meth:`connect` (when awaited).
    ///     ValueError: the client is closed (when awaited).
    fn aconnect(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let client = self.core.clone();
        coroutine(py, "Client.aconnect", Cancel::Drop, async move { client.ready().await.map(|()| NONE) })
    }

    /// Close this client's connections (commands, wake-ups) now, rather
    /// than when it is garbage-collected; every later use raises
    /// ``ValueError``. Closing twice does nothing more.
    ///
    /// Holds taken through this client are not released: their renewals
    /// fail from then on, so they end at their ttl.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.core.clone();
        wait(py, async move {
            client.close().await;
            Ok(())
        })
    }

    /// Asyncio version of :meth:`close`.
    ///
    /// Returns:
    ///     A future of ``None``, done once closed.
    fn aclose(&self, py: Python<'_>) -> PyResult<Py<Operation>> {
        let client = self.core.clone();
        coroutine(py, "Client.aclose", Cancel::Finish, async move {
            client.close().await;
            Ok(NONE)
        })
    }

    /// Returns the client; the end of the ``with`` block closes it (:meth:`close`).
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the client (:meth:`close`); an exception of the block propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// Returns the client; the end of the ``async with`` block closes it (:meth:`aclose`).
    fn __aenter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Operation>> {
        coroutine(py, "Client.__aenter__", Cancel::Drop, async move { Ok(slf) })
    }

    /// Closes the client (:meth:`aclose`); an exception of the block propagates.
    #[pyo3(signature = (*_exc))]
    fn __aexit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<Py<Operation>> {
        let client = self.core.clone();
        coroutine(py, "Client.__aexit__", Cancel::Finish, async move {
            client.close().await;
            Ok(false)
        })
    }

    /// How many independent masters this client locks on: 1, or the length
    /// of the list of URLs it was given (a quorum).
    #[getter]
    fn masters(&self) -> usize {
        self.core.masters()
    }

    /// End the holds of ``name`` whoever holds them; with ``token``, only
    /// the hold of that token.
    ///
    /// For recovery by an operator: the holder is not told until its next
    /// renewal finds its hold gone (then its hold is lost). Every kind of
    /// primitive stored under the name is covered: a Lock (plain or fair),
    /// an RWMutex's writer and readers, a semaphore's permit holders, an
    /// election's term (its leader is deposed). With ``token`` (the
    /// holder's, as :meth:`inspect` or :meth:`describe` showed it) the check
    /// and the delete are one atomic step in Redis, so a hold taken since by
    /// someone else is never removed. Waiters are woken (the next in line
    /// proceeds) and an election's watchers are told, as by a release. On a
    /// quorum (Locks only), every master's copy of the hold goes (of that
    /// token's hold only, when given). The GIL is released while waiting
    /// for Redis.
    ///
    /// Args:
    ///     name: the lock name.
    ///     token: remove only this holder's hold (``None``: whoever holds).
    ///
    /// Returns:
    ///     ``True`` if a hold was removed; ``False`` if nothing was held, or
    ///     (with ``token``) no hold of that token was.
    ///
    /// Raises:
    ///     LockConnectionError: Redis could not be reached in time.
    ///     LockError: Redis answered with an error.
    ///     TypeError: ``name`` or ``token`` is not a ``str``.
    ///     ValueError: ``name`` is empty or too long; ``token`` is empty or too long.
    #[pyo3(signature = (name, token=None))]
    fn force_release(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        token: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let (client, name, token) =
            (self.core.via(blocking_io(py)), checked(name)?, args::optional_text("token", token)?);
        wait(py, async move { client.force_release(&name, token.as_deref()).await })
    }

    /// Asyncio version of :meth:`force_release`.
    ///
    /// Args:
    ///     name: the lock name.
    ///     token: remove only this holder's hold (``None``: whoever holds).
    ///
    /// Returns:
    ///     A future of ``True`` if a hold was removed, ``False`` if the lock
    ///     was free or (with ``token``) held by another token.
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     TypeError: ``name`` or ``token`` is not a ``str``, raised at the call (before any await).
    ///     ValueError: ``name`` is empty or too long, raised at the call (before any await);
    ///         ``token`` is empty or too long (when awaited).
    ///     LockConnectionError: Redis could not be reached in time (when
    ///         awaited).
    ///     LockError: Redis answered with an error (when awaited).
    #[pyo3(signature = (name, token=None))]
    fn aforce_release(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        token: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Operation>> {
        let (client, name, token) = (self.core.clone(), checked(name)?, args::optional_text("token", token)?);
        coroutine(py, "Client.aforce_release", Cancel::Drop, async move {
            client.force_release(&name, token.as_deref()).await
        })
    }

    /// Who holds the lock ``name``, as Redis sees it now.
    ///
    /// On one server, a name not held as a Lock gives its first hold as
    /// another kind: an RWMutex's writer (else its first reader), a
    /// semaphore's permit holder (the earliest to expire), an election's
    /// leader (its value as ``metadata``, its term as ``fence``);
    /// :meth:`describe` shows every hold. The GIL is released while waiting
    /// for Redis.
    ///
    /// Args:
    ///     name: the lock name.
    ///
    /// Returns:
    ///     The holder's token, metadata, fence and remaining ttl, or ``None``
    ///     when the lock is free.
    ///
    /// Raises:
    ///     LockConnectionError: Redis could not be reached in time.
    ///     LockError: Redis answered with an error.
    ///     TypeError: ``name`` is not a ``str``.
    ///     ValueError: ``name`` is empty or too long.
    fn inspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Option<LockInfo>> {
        let (client, name) = (self.core.via(blocking_io(py)), checked(name)?);
        wait(py, async move { Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r))) })
    }

    /// Asyncio version of :meth:`inspect`.
    ///
    /// Args:
    ///     name: the lock name.
    ///
    /// Returns:
    ///     A future of the holder's :class:`LockInfo`, or of ``None`` when the
    ///     lock is free.
    ///
    /// Raises:
    ///     RuntimeError: awaited with no event loop running.
    ///     TypeError: ``name`` is not a ``str``, raised at the call (before any await).
    ///     ValueError: ``name`` is empty or too long, raised at the call (before any await).
    ///     LockConnectionError: Redis could not be reached in time (when
    ///         awaited).
    ///     LockError: Redis answered with an error (when awaited).
    fn ainspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<Operation>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        coroutine(py, "Client.ainspect", Cancel::Drop, async move {
            Ok(client.inspect(&name).await?.map(|r| LockInfo::new(name, r)))
        })
    }

    /// Every name whose name matches the glob ``pattern``, held or waited
    /// for as any kind of primitive (Lock, RWMutex, semaphore, election):
    /// one :class:`LockState` per name and kind. With ``all_prefixes=True``,
    /// under every key prefix, not only this client's (each state says its
    /// :attr:`~LockState.prefix`); a key of another application shaped as
    /// ferrolock's (``<prefix>{<name>}``) that Redis cannot read as a
    /// primitive is left out.
    #[pyo3(signature = (pattern=None, *, all_prefixes=false))]
    fn scan(
        &self,
        py: Python<'_>,
        pattern: Option<&Bound<'_, PyAny>>,
        all_prefixes: bool,
    ) -> PyResult<Vec<LockState>> {
        let (client, pattern) = (self.core.via(blocking_io(py)), glob(pattern)?);
        wait(py, async move { Ok(LockState::all(listed(&client, &pattern, all_prefixes).await?)) })
    }

    /// Asyncio version of :meth:`scan`.
    #[pyo3(signature = (pattern=None, *, all_prefixes=false))]
    fn ascan<'py>(
        &self,
        py: Python<'py>,
        pattern: Option<&Bound<'py, PyAny>>,
        all_prefixes: bool,
    ) -> PyResult<Py<Operation>> {
        let (client, pattern) = (self.core.clone(), glob(pattern)?);
        coroutine(py, "Client.ascan", Cancel::Drop, async move {
            Ok(LockState::all(listed(&client, &pattern, all_prefixes).await?))
        })
    }

    /// Everything stored under ``name``: one :class:`LockState` per kind of
    /// primitive held or waited for (Lock, RWMutex, semaphore, election).
    fn describe(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Vec<LockState>> {
        let (client, name) = (self.core.via(blocking_io(py)), checked(name)?);
        wait(py, async move { Ok(LockState::all(client.state_of(&name).await?)) })
    }

    /// Asyncio version of :meth:`describe`.
    fn adescribe<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Py<Operation>> {
        let (client, name) = (self.core.clone(), checked(name)?);
        coroutine(py, "Client.adescribe", Cancel::Drop, async move {
            Ok(LockState::all(client.state_of(&name).await?))
        })
    }

    /// The prefix of every key this client uses (as given, unescaped).
    #[getter]
    fn prefix(&self) -> String {
        self.core.options().prefix.clone()
    }

    fn __repr__(&self) -> String {
        format!("Client({:?}, prefix={:?})", self.core.describe(), self.core.options().prefix)
    }
}

/// What a coroutine of no result gives: Python's `None` (a Rust `()` would be an empty tuple).
const NONE: Option<bool> = None;

/// `scan`'s listing, under this client's prefix or every one.
async fn listed(
    client: &crate::client::Client,
    pattern: &str,
    all_prefixes: bool,
) -> crate::error::Result<Vec<crate::ops::listing::State>> {
    if all_prefixes {
        client.scan_every_prefix(pattern).await
    } else {
        client.scan(pattern).await
    }
}

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
