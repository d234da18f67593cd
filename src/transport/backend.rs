//! A connection to one Redis deployment (one server, a Sentinel service or a
//! Cluster), shared by every lock made from it. A quorum of independent
//! masters is a `Quorum` of these, above them (`deployment.rs`).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::ConnectionAddr;

use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::support::cleanup::Cleanups;
use crate::support::per_process::PerProcess;
use crate::transport::cluster::ClusterTarget;
use crate::transport::compare::Compare;
use crate::transport::conn::{Conn, InlinePool, Io};
use crate::transport::replication::{Replication, Throttle, REPLICA_WARNINGS_EVERY};
use crate::transport::sentinel::SentinelTarget;
use crate::transport::wakeups::Wakeups;

mod call;
mod diagnose;
mod follow;
mod query;
mod ready;
mod renew;
mod url;

pub(crate) use follow::Holding;
pub(crate) use ready::Readiness;
pub(crate) use renew::{Answers, Batch, Renewal, Renewed};

pub use url::redact;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://…`, `unix:///path[?db=N]`,
    /// `redis+sentinel://[user:password@]host:port[,host:port…]/service[/db][?sentinel_username=U&sentinel_password=P]`
    /// (or `rediss+sentinel://`, TLS to Sentinels and data nodes),
    /// `redis+cluster://[user:password@]host:port[,host:port…]` (or `rediss+cluster://`),
    /// or a bare `[password@]host[:port]`.
    pub url: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Prepended to every key, to namespace the locks of one application.
    pub prefix: String,
    /// PEM file of the certificate authorities to trust for `rediss://` (and `rediss+cluster://`,
    /// `rediss+sentinel://`).
    pub ca_file: Option<PathBuf>,
    /// Independent masters, when more than one: a lock is held while a
    /// majority of them hold it (Redlock), and `url` is not used. Each is a
    /// URL of one server or a Sentinel service. Read by `Client`; a
    /// `Backend` takes at most one.
    pub urls: Vec<String>,
    /// Replicas that must acknowledge every grant and renewal (off by default).
    pub replication: Replication,
    /// The name each command connection is given (`CLIENT SETNAME`), from
    /// the URL's `?client_name=`.
    pub client_name: Option<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            url: "redis://127.0.0.1:6379/0".into(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            prefix: "ferrolock:".into(),
            ca_file: None,
            urls: Vec::new(),
            replication: Replication::default(),
            client_name: None,
        }
    }
}

/// Clones (and `via` views) share the connections and state.
#[derive(Clone)]
pub struct Backend {
    inner: Arc<Inner>,
    /// How this view's calls send their commands (`backend::call`).
    io: Io,
}

/// Where the master is.
enum Target {
    Direct(redis::Client),
    /// Asked of the Sentinels at each (re)connect, so a failover is followed.
    Sentinel(SentinelTarget),
    /// A Redis Cluster: commands routed by slot, wake-ups by sharded pub/sub.
    Cluster(ClusterTarget),
}

struct Inner {
    target: Target,
    opts: ClientOptions,
    keys: KeySpace,
    display: String,
    /// TLS to the server (such connections are never used inline).
    tls: bool,
    /// This process's connections and waiters: a forked child makes its own
    /// and never touches (or waits on a lock of) its parent's.
    local: PerProcess<Arc<Local>>,
    /// Warnings of steps the replicas did not acknowledge, throttled per client.
    replica_warnings: Throttle,
    /// Whether this process connected and checked the server, and whether
    /// the client was closed.
    ready: Readiness,
    /// The compare commands the server has, that steps may send.
    compare: Compare,
}

/// What belongs to one process: its connection (opened one at a time), its
/// wake-up subscription and waiters, its clean-ups, and its renewals
/// gathered into calls.
struct Local {
    conn: ArcSwapOption<Conn>,
    connecting: tokio::sync::Mutex<()>,
    /// Connections for commands sent inline (`Io::Inline`).
    inline: Arc<InlinePool>,
    cleanups: Arc<Cleanups>,
    wakeups: Arc<Wakeups>,
    renewals: Arc<renew::Renewals>,
    /// The holds renewing on this client, which a Sentinel client follows
    /// through a failover (`Backend::holding`).
    holders: follow::Holders,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.inner.display)
    }
}

impl Backend {
    /// Validates the options and connects (authentication and database
    /// selection included), failing within `connect_timeout`: `new`, then
    /// `ready`. A server that
    /// answers but does not fit the settings (not Redis, a password or
    /// database it does not have, plain TCP where TLS was asked, a version
    /// too old for the scripts) gives `Error::Configuration`, naming the fix.
    pub async fn connect(opts: ClientOptions) -> Result<Backend> {
        let client = Backend::new(opts)?;
        client.ready().await?;
        Ok(client)
    }

    /// Validates the options without any network I/O; the first command
    /// connects and checks the server (`ready`).
    pub fn new(opts: ClientOptions) -> Result<Backend> {
        if opts.connect_timeout.is_zero() || opts.command_timeout.is_zero() {
            return Err(Error::InvalidArgument("timeouts must be positive".into()));
        }
        match opts.urls.as_slice() {
            [] => {}
            [one] => return Backend::new(ClientOptions { url: one.clone(), urls: Vec::new(), ..opts }),
            _ => {
                return Err(Error::InvalidArgument(
                    "several URLs are a quorum of independent masters: connect a Client".into(),
                ))
            }
        }
        let (target, display, opts) = url::target(opts)?;
        opts.replication.validate(opts.command_timeout)?;
        Ok(Backend::from_target(target, display, opts))
    }

    fn from_target(target: Target, display: String, opts: ClientOptions) -> Backend {
        let tls = match &target {
            Target::Direct(redis) => {
                matches!(redis.get_connection_info().addr(), ConnectionAddr::TcpTls { .. })
            }
            _ => true,
        };
        Backend {
            inner: Arc::new(Inner {
                tls,
                target,
                keys: KeySpace::new(&opts.prefix),
                opts,
                display,
                local: PerProcess::new(),
                replica_warnings: Throttle::new(REPLICA_WARNINGS_EVERY),
                ready: Readiness::default(),
                compare: Compare::default(),
            }),
            io: Io::Multiplexed,
        }
    }

    /// This process's state, made on first use in each process.
    fn local(&self) -> Arc<Local> {
        self.inner.local.get(|| {
            let cleanups = Cleanups::new();
            Arc::new(Local {
                conn: ArcSwapOption::empty(),
                connecting: tokio::sync::Mutex::new(()),
                inline: Arc::default(),
                wakeups: Arc::new(Wakeups::new(cleanups.clone())),
                cleanups,
                renewals: Arc::default(),
                holders: follow::Holders::default(),
            })
        })
    }

    /// Connects and checks the server (`verify`) unless this process did
    /// already: every command waits for it, so the first use raises what
    /// connecting found. An error when the client was closed.
    pub async fn ready(&self) -> Result<()> {
        // Boxed: every command's future holds this one, seldom run.
        self.inner.ready.ensure(|| Box::pin(self.verify())).await
    }

    /// Closes this process's connections (commands, inline, wake-ups) and
    /// refuses every later use. Waiters still waiting are woken, and fail;
    /// nothing asks the Sentinels any more (`holding`, `recheck_sentinels`).
    pub async fn close(&self) {
        self.inner.ready.close();
        let Some(local) = self.inner.local.take() else { return };
        local.conn.store(None);
        local.inline.clear();
        local.wakeups.clone().drop_subscription().await;
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    /// The compare commands steps may send to this deployment's server.
    pub(crate) fn compare(&self) -> &Compare {
        &self.inner.compare
    }

    /// At most one warning per 10 s of steps its replicas did not acknowledge.
    pub(crate) fn replica_warnings(&self) -> &Throttle {
        &self.inner.replica_warnings
    }

    pub fn keys(&self) -> &KeySpace {
        &self.inner.keys
    }

    /// Whether this is a Redis Cluster client (sharded pub/sub, one slot per script).
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.target, Target::Cluster(_))
    }

    /// The server address without credentials, for messages and repr.
    pub fn describe(&self) -> &str {
        &self.inner.display
    }

    /// Runs a clean-up (the undo of an interrupted acquire) detached from
    /// its caller, counted so `settle` can wait for it.
    pub(crate) fn spawn_cleanup<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.local().cleanups.spawn(fut);
    }

    /// Waits until no clean-up of this process is in flight (undoing an
    /// interrupted acquire, unsubscribing a waiter that left).
    pub async fn settle(&self) {
        let cleanups = self.local().cleanups.clone();
        cleanups.settle().await;
    }
}
