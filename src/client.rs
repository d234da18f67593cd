//! A connection to one Redis deployment (one server, a Sentinel service or a
//! Cluster), shared by every lock made from it. A quorum of independent
//! masters is a `Quorum` of these, above them (`deployment.rs`).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo};

use crate::cleanup::Cleanups;
use crate::cluster::ClusterTarget;
use crate::conn::{inline_active, Conn, Inline, InlinePool};
use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::probe::{ping_probe, CREDENTIALS_REFUSED};
use crate::replication::{Replication, Throttle, REPLICA_WARNINGS_EVERY};
use crate::sentinel::SentinelTarget;
use crate::server;
use crate::wakeups::{Feed, Registration, Waits, Wakeups};

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
    /// URL of one server or a Sentinel service. Read by `Deployment`; a
    /// `Client` takes at most one.
    pub urls: Vec<String>,
    /// Replicas that must acknowledge every grant and renewal (off by default).
    pub replication: Replication,
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
        }
    }
}

#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
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
    /// This process's connections and waiters. A forked child makes its own
    /// and never touches (or waits on a lock of) its parent's: the parent's
    /// are swapped out without taking any lock, so a fork while a parent
    /// thread connects or subscribes cannot leave the child stuck.
    local: ArcSwapOption<Local>,
    /// Warnings of steps the replicas did not acknowledge, throttled per client.
    replica_warnings: Throttle,
}

/// What belongs to one process: its connection (opened one at a time), its
/// wake-up subscription and waiters, and its clean-ups.
struct Local {
    pid: u32,
    conn: ArcSwapOption<Conn>,
    connecting: tokio::sync::Mutex<()>,
    /// Idle connections for commands sent inline (see `conn::inline`).
    inline: Arc<InlinePool>,
    cleanups: Arc<Cleanups>,
    wakeups: Arc<Wakeups>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.inner.display)
    }
}

impl Client {
    /// Validates the options and connects (authentication and database
    /// selection included), failing within `connect_timeout`. A server that
    /// answers but does not fit the settings (not Redis, a password or
    /// database it does not have, plain TCP where TLS was asked, a version
    /// too old for the scripts) gives `Error::Configuration`, naming the fix.
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let client = Client::new(opts)?;
        client.verify().await?;
        Ok(client)
    }

    /// Connects and checks the server.
    pub(crate) async fn verify(&self) -> Result<()> {
        let client = self;
        let budget = client.inner.opts.connect_timeout;
        let started = std::time::Instant::now();
        // A connect still under way when only a probe's time is left has its
        // diagnosis probed beside it: connect and diagnosis end within the budget.
        let limit = budget.min(PROBE_LIMIT);
        let connecting = client.conn();
        tokio::pin!(connecting);
        let head_start = budget.saturating_sub(limit);
        let outcome = if let Ok(done) = tokio::time::timeout(head_start, &mut connecting).await {
            done.map_err(|e| (e, None))
        } else {
            let (done, mismatch) = tokio::join!(&mut connecting, client.mode_mismatch(limit));
            done.map_err(|e| (e, mismatch))
        };
        let mut conn = match outcome {
            Ok(conn) => conn,
            Err((Error::Connection(_), Some(mismatch))) => return Err(mismatch),
            Err((e, _)) => {
                let left = budget.saturating_sub(started.elapsed()).min(PROBE_LIMIT);
                return Err(client.explain(e, left).await);
            }
        };
        // One round trip now, so a server that wants a password we lack, or a
        // database it does not have, is reported here rather than at first use.
        let ping: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
        ping.map_err(|e| client.ping_error(e))?;
        server::check(&mut conn, client.is_cluster(), client.describe()).await?;
        server::check_replication(&mut conn, &client.inner.opts.replication, client.describe()).await?;
        Ok(())
    }

    /// Validates the options without connecting; the first command connects.
    pub fn new(opts: ClientOptions) -> Result<Client> {
        if opts.connect_timeout.is_zero() || opts.command_timeout.is_zero() {
            return Err(Error::InvalidArgument("timeouts must be positive".into()));
        }
        opts.replication.validate(opts.command_timeout)?;
        match opts.urls.as_slice() {
            [] => {}
            [one] => return Client::new(ClientOptions { url: one.clone(), urls: Vec::new(), ..opts }),
            _ => {
                return Err(Error::InvalidArgument(
                    "several URLs are a quorum of independent masters: connect a Deployment".into(),
                ))
            }
        }
        let url = normalize_url(&opts.url)?;
        let sentinel = [("redis+sentinel://", false), ("rediss+sentinel://", true)]
            .into_iter()
            .find_map(|(scheme, tls)| url.strip_prefix(scheme).map(|rest| (rest, tls)));
        if let Some((rest, tls)) = sentinel {
            let ca =
                match (&opts.ca_file, tls) {
                    (Some(_), false) => return Err(Error::InvalidArgument(
                        "ca_file needs a rediss+sentinel:// URL (TLS to the Sentinels and the data nodes)"
                            .into(),
                    )),
                    (Some(path), true) => Some(read_ca_file(path)?),
                    (None, _) => None,
                };
            if tls {
                install_crypto_provider();
            }
            let (target, display) = SentinelTarget::parse(rest, tls, ca).map_err(|e| {
                Error::InvalidArgument(format!("invalid Redis Sentinel URL {}: {e}", redact(&url)))
            })?;
            return Ok(Client::from_target(Target::Sentinel(target), display, opts));
        }
        let cluster = [("redis+cluster://", false), ("rediss+cluster://", true)]
            .into_iter()
            .find_map(|(scheme, tls)| url.strip_prefix(scheme).map(|rest| (rest, tls)));
        if let Some((rest, tls)) = cluster {
            let (mut target, display) = ClusterTarget::parse(rest, tls).map_err(|e| {
                Error::InvalidArgument(format!("invalid Redis Cluster URL {}: {e}", redact(&url)))
            })?;
            match (&opts.ca_file, tls) {
                (Some(_), false) => {
                    return Err(Error::InvalidArgument("ca_file needs a rediss+cluster:// URL".into()))
                }
                (Some(path), true) => target = target.with_ca(read_ca_file(path)?),
                (None, _) => {}
            }
            if tls {
                install_crypto_provider();
            }
            return Ok(Client::from_target(Target::Cluster(target), display, opts));
        }
        let info = url.as_str().into_connection_info().map_err(|e| {
            Error::InvalidArgument(format!(
                "invalid Redis URL {}: {}",
                redact(&url),
                e.detail().unwrap_or("unparsable")
            ))
        })?;
        let display = describe(&info);
        let redis = match (&opts.ca_file, info.addr()) {
            (Some(path), ConnectionAddr::TcpTls { .. }) => {
                let pem = read_ca_file(path)?;
                install_crypto_provider();
                let certs = redis::TlsCertificates { client_tls: None, root_cert: Some(pem) };
                redis::Client::build_with_tls(info, certs)
            }
            (Some(_), _) => {
                return Err(Error::InvalidArgument("ca_file needs a rediss:// URL".into()));
            }
            (None, addr) => {
                if matches!(addr, ConnectionAddr::TcpTls { .. }) {
                    install_crypto_provider();
                }
                redis::Client::open(info)
            }
        }
        .map_err(|e| Error::InvalidArgument(format!("invalid Redis URL {}: {e}", redact(&url))))?;
        Ok(Client::from_target(Target::Direct(redis), display, opts))
    }

    fn from_target(target: Target, display: String, opts: ClientOptions) -> Client {
        let tls = match &target {
            Target::Direct(redis) => {
                matches!(redis.get_connection_info().addr(), ConnectionAddr::TcpTls { .. })
            }
            _ => true,
        };
        Client {
            inner: Arc::new(Inner {
                tls,
                target,
                keys: KeySpace::new(&opts.prefix),
                opts,
                display,
                local: ArcSwapOption::empty(),
                replica_warnings: Throttle::new(REPLICA_WARNINGS_EVERY),
            }),
        }
    }

    /// This process's state, made on first use in each process.
    fn local(&self) -> Arc<Local> {
        let pid = crate::pid::current();
        loop {
            let current = self.inner.local.load_full();
            if let Some(local) = current.as_ref().filter(|l| l.pid == pid) {
                return local.clone();
            }
            let cleanups = Cleanups::new();
            let fresh = Some(Arc::new(Local {
                pid,
                conn: ArcSwapOption::empty(),
                connecting: tokio::sync::Mutex::new(()),
                inline: Arc::default(),
                wakeups: Arc::new(Wakeups::new(cleanups.clone())),
                cleanups,
            }));
            let previous = self.inner.local.compare_and_swap(&current, fresh);
            let swapped = match (&*previous, &current) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if swapped {
                if let Some(stale) = current {
                    // The parent's: its connection's driver task lives in the
                    // parent's runtime, so dropping it here could block. Leak it.
                    std::mem::forget(stale);
                }
            }
        }
    }

    /// Runs one operation on the connection. When the connection turns out to
    /// be dropped (a server restart, `CLIENT KILL`, a failover) it runs once
    /// more on a fresh one: every script is safe to repeat with the same token.
    /// In Sentinel mode a dropped connection is forgotten, so the next one goes
    /// to whichever node the Sentinels name master now.
    pub(crate) async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.call_noting_retry(op).await.map(|(v, _)| v)
    }

    /// `call`, and whether the operation was sent a second time (after a
    /// dropped connection, its first sending may or may not have run).
    pub(crate) async fn call_noting_retry<T, F, Fut>(&self, op: F) -> Result<(T, bool)>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let err = match op(self.call_conn().await?).await {
            Ok(v) => return Ok((v, false)),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading) => {
                return self.when_loaded(&op).await.map(|v| (v, false));
            }
            Err(e) => e,
        };
        let dropped = err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
            || matches!(err.code(), Some("READONLY" | "MASTERDOWN"));
        if !dropped || err.is_timeout() {
            return Err(err.into());
        }
        self.forget_connection();
        log::info!("connection to {} dropped ({err}); retrying once", self.inner.display);
        op(self.call_conn().await?).await.map(|v| (v, true)).map_err(|e| {
            self.forget_connection();
            e.into()
        })
    }

    /// A server that restarted answers LOADING while it reads its data back:
    /// nothing ran, so try again until it is done, within the command timeout.
    async fn when_loaded<T, F, Fut>(&self, op: &F) -> Result<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.inner.opts.command_timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
            match op(self.conn().await?).await {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
                        && tokio::time::Instant::now() + pause < deadline => {}
                other => return other.map_err(Error::from),
            }
        }
    }

    /// In Sentinel mode, at most once every `sentinel::RECHECK` while the
    /// client is in use: asks the Sentinels in the background whether the
    /// master moved, and if so drops the connection and the wake-up
    /// subscription, so the next command goes to the new master.
    fn recheck_sentinels(&self) {
        let Target::Sentinel(sentinel) = &self.inner.target else { return };
        if !sentinel.recheck_due() {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let Target::Sentinel(sentinel) = &client.inner.target else { return };
            if sentinel.moved(client.inner.opts.connect_timeout).await {
                log::info!("the Sentinels of {} name another master: reconnecting", client.inner.display);
                client.forget_connection();
                client.local().wakeups.clone().drop_subscription().await;
            }
        });
    }

    /// While a waiter waits on its subscription, sending no command: in
    /// Sentinel mode asks the Sentinels
    /// every `sentinel::RECHECK` whether the master moved, as `conn` does
    /// for a client in use, so the subscription follows a failover and the
    /// waiter's next attempt goes to the new master. Never returns.
    pub(crate) async fn follow_master(&self) {
        if matches!(self.inner.target, Target::Sentinel(_)) {
            loop {
                tokio::time::sleep(crate::sentinel::RECHECK).await;
                self.recheck_sentinels();
            }
        }
        std::future::pending::<()>().await;
    }

    fn forget_connection(&self) {
        if matches!(self.inner.target, Target::Sentinel(_)) {
            self.local().conn.store(None);
        }
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
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

    /// What an operation runs on: the multiplexed connection, or, inside
    /// `conn::inline` and for a plain (not TLS) single-node target, a pooled
    /// connection used on the calling thread.
    async fn call_conn(&self) -> Result<Conn> {
        if let Target::Direct(redis) = &self.inner.target {
            if inline_active() && !self.inner.tls {
                if let Some(conn) = self.inline_conn(redis) {
                    return Ok(conn);
                }
            }
        }
        self.conn().await
    }

    /// An idle inline connection, or a new one; `None` when none can be
    /// opened at once (the multiplexed connection then carries the call,
    /// with its own reconnecting and its own errors).
    fn inline_conn(&self, redis: &redis::Client) -> Option<Conn> {
        let local = self.local();
        let idle = local.inline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = if let Some(conn) = idle {
            conn
        } else {
            let opts = &self.inner.opts;
            let limit = opts.connect_timeout.min(opts.command_timeout);
            let conn = redis.get_connection_with_timeout(limit).ok()?;
            conn.set_read_timeout(Some(opts.command_timeout)).ok()?;
            conn.set_write_timeout(Some(opts.command_timeout)).ok()?;
            conn
        };
        Some(Conn::Inline(Arc::new(Inline::new(conn, local.inline.clone()))))
    }

    /// The multiplexed, self-reconnecting connection of this process.
    pub(crate) async fn conn(&self) -> Result<Conn> {
        let local = self.local();
        if let Some(conn) = &*local.conn.load() {
            self.recheck_sentinels();
            return Ok(Conn::clone(conn));
        }
        let _one_at_a_time = local.connecting.lock().await;
        if let Some(conn) = &*local.conn.load() {
            return Ok(Conn::clone(conn));
        }
        let (timeout, command_timeout) = (self.inner.opts.connect_timeout, self.inner.opts.command_timeout);
        // No retries inside the manager: a failed command triggers the next
        // reconnect, and callers (the watchdog, acquire loops) retry on their own
        // schedule, so a dead server is reported at once.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(command_timeout))
            .set_number_of_retries(0);
        let connect = async {
            let redis = match &self.inner.target {
                Target::Direct(redis) => redis.clone(),
                Target::Sentinel(sentinel) => sentinel.master(timeout).await?,
                Target::Cluster(cluster) => {
                    let cluster = cluster.connect(timeout, command_timeout).await;
                    return cluster.map(Conn::Cluster).map_err(|e| self.connect_error(e));
                }
            };
            let manager = ConnectionManager::new_with_config(redis, config).await;
            manager.map(Conn::Node).map_err(|e| self.connect_error(e))
        };
        let conn = tokio::time::timeout(timeout, connect).await.map_err(|_| {
            Error::Connection(format!(
                "cannot reach Redis at {}: no answer within {:.3} s",
                self.inner.display,
                timeout.as_secs_f64()
            ))
        })??;
        local.conn.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }

    /// Joins the waiters on `channels`, subscribed before it returns.
    pub(crate) async fn register_waiter(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Waits> {
        Ok(Waits::new(vec![self.register_one(channels, reader, token).await?]))
    }

    pub(crate) async fn register_one(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Registration> {
        let (timeout, command_timeout) = (self.inner.opts.connect_timeout, self.inner.opts.command_timeout);
        let connect = async {
            let subscribe = async {
                let redis = match &self.inner.target {
                    Target::Direct(redis) => redis.clone(),
                    Target::Sentinel(sentinel) => sentinel.master(timeout).await?,
                    Target::Cluster(cluster) => {
                        let (conn, pushes) = cluster.subscriber(timeout, command_timeout).await?;
                        return Ok(Feed::sharded(conn, pushes));
                    }
                };
                Ok::<_, Error>(Feed::plain(redis.get_async_pubsub().await?))
            };
            tokio::time::timeout(timeout, subscribe)
                .await
                .map_err(|_| Error::Connection("no answer from Redis for the wake-up subscription".into()))?
        };
        self.local().wakeups.clone().register(connect, channels, reader, token, command_timeout).await
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

/// How long a diagnostic probe after a failed connect may take.
const PROBE_LIMIT: Duration = Duration::from_secs(1);

/// Connect-time diagnosis: what went wrong, said with the fix.
impl Client {
    /// A failed connection attempt as an `Error`, naming the server (never
    /// the password). Failures that retrying cannot cure become `Configuration`.
    fn connect_error(&self, e: redis::RedisError) -> Error {
        let at = &self.inner.display;
        if e.kind() == redis::ErrorKind::Parse {
            return Error::Configuration(format!(
                "the server at {at} does not speak the Redis protocol (its answer to the handshake is not \
                 RESP): check the host and port in the URL; is another service listening there? Redis \
                 listens on port 6379 unless configured otherwise"
            ));
        }
        if e.kind() == redis::ErrorKind::AuthenticationFailed || matches!(e.code(), Some("WRONGPASS")) {
            return Error::Configuration(format!(
                "Redis at {at} {CREDENTIALS_REFUSED}: the user name or password in the URL is wrong, or \
                 the user is disabled; check them (the server's requirepass, or ACL LIST)"
            ));
        }
        if e.to_string().contains("refused to switch database") {
            let detail = e.detail().unwrap_or("no reason given");
            let db = self.db().map_or_else(|| "the one in the URL".to_string(), |db| db.to_string());
            return Error::Configuration(if detail.contains("out of range") {
                format!(
                    "Redis at {at} has no database {db} (DB index is out of range): put a database number \
                     the server has at the end of the URL, such as /0 (a server has 16, numbered 0 to 15, \
                     unless its `databases` setting says otherwise)"
                )
            } else {
                format!(
                    "Redis at {at} refused to select database {db} ({detail}): allow the user SELECT \
                     (ACL +select), or use database 0"
                )
            });
        }
        match Error::from(e) {
            Error::Connection(m) => Error::Connection(format!("{m} (at {at})")),
            other => other,
        }
    }

    /// The first PING failed: a missing password is a setting to fix.
    fn ping_error(&self, e: redis::RedisError) -> Error {
        let at = &self.inner.display;
        if e.code() == Some("NOAUTH") {
            return Error::Configuration(format!(
                "Redis at {at} needs a password (NOAUTH Authentication required), and the URL gives none: \
                 put it in the URL, as redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db \
                 for an ACL user"
            ));
        }
        match Error::from(e) {
            Error::Connection(m) | Error::Redis(m) => Error::Connection(format!("{m} (at {at})")),
            other => other,
        }
    }

    /// A failed first connection, looked at once more: a `rediss://` URL
    /// aimed at a plain port, or a password sent to a server that has none,
    /// is told apart by one short probe, within `limit`. Anything else is
    /// returned as it is.
    async fn explain(&self, e: Error, limit: Duration) -> Error {
        if limit.is_zero() {
            return e;
        }
        if matches!(e, Error::Connection(_)) {
            return self.mode_mismatch(limit).await.unwrap_or(e);
        }
        let Target::Direct(redis) = &self.inner.target else { return e };
        let info = redis.get_connection_info();
        let at = &self.inner.display;
        match &e {
            Error::Configuration(m) if m.contains(CREDENTIALS_REFUSED) => {
                let settings = info.redis_settings();
                if settings.password().is_none() {
                    return e;
                }
                let bare = info
                    .clone()
                    .set_redis_settings(redis::RedisConnectionInfo::default().set_db(settings.db()));
                if !matches!(ping_probe(bare, limit).await, Some(Ok(_))) {
                    return e;
                }
                Error::Configuration(match settings.username() {
                    Some(user) if !user.is_empty() && user != "default" => format!(
                        "Redis at {at} {CREDENTIALS_REFUSED} of user {user:?}, and it needs none: the user does \
                         not exist or has another password; remove the user name and password from the URL, \
                         or create the user on the server (ACL SETUSER)"
                    ),
                    _ => format!(
                        "Redis at {at} {CREDENTIALS_REFUSED}: it has no password configured, but the URL gives \
                         one; remove the password from the URL, or, if it is an ACL user's password, give the \
                         user name too (redis://USER:PASSWORD@host:port/db)"
                    ),
                })
            }
            _ => e,
        }
    }

    /// The address of a direct connection (not a Sentinel service's).
    pub(crate) fn direct_addr(&self) -> Option<ConnectionAddr> {
        match &self.inner.target {
            Target::Direct(redis) => Some(redis.get_connection_info().addr().clone()),
            _ => None,
        }
    }

    /// Whether the server (or a Sentinel) answers, within `limit`, in the
    /// mode the URL did not ask for (plain Redis behind a `rediss://` URL, TLS
    /// behind a plain Sentinel URL): the error naming that setting.
    async fn mode_mismatch(&self, limit: Duration) -> Option<Error> {
        let redis = match &self.inner.target {
            Target::Direct(redis) => redis,
            Target::Sentinel(sentinel) => return sentinel.mode_mismatch(limit).await,
            Target::Cluster(_) => return None,
        };
        let info = redis.get_connection_info();
        let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else { return None };
        let plain = info
            .clone()
            .set_addr(ConnectionAddr::Tcp(host.clone(), *port))
            .set_redis_settings(redis::RedisConnectionInfo::default());
        match ping_probe(plain, limit).await {
            // PONG, or an error only Redis would answer with (NOAUTH, DENIED …).
            Some(Ok(_)) => {}
            Some(Err(p)) if p.code().is_some() => {}
            _ => return None,
        }
        Some(Error::Configuration(format!(
            "the server at {} answers plain Redis, not TLS, so the TLS handshake failed: use redis:// for \
             this port, or the port the server serves TLS on (its tls-port)",
            self.inner.display
        )))
    }

    /// The database number of a direct connection.
    fn db(&self) -> Option<i64> {
        match &self.inner.target {
            Target::Direct(redis) => Some(redis.get_connection_info().redis_settings().db()),
            _ => None,
        }
    }
}

fn read_ca_file(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::InvalidArgument(format!("cannot read ca_file {}: {e}", path.display())))
}

fn install_crypto_provider() {
    // Fails only when a provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Accepts a bare `password@host:port` (no scheme) beside ordinary URLs.
fn normalize_url(raw: &str) -> Result<String> {
    let url = raw.trim();
    if url.is_empty() {
        return Err(Error::InvalidArgument("the Redis URL is empty".into()));
    }
    if url.contains("://") {
        return Ok(url.to_string());
    }
    Ok(match url.rsplit_once('@') {
        Some((password, host)) if !password.contains(':') => {
            format!("redis://:{}@{host}", percent_encode(password))
        }
        _ => format!("redis://{url}"),
    })
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The URL with any password replaced by `***`: the user info's, and that
/// of a query option named `…password` (a Sentinel URL's `sentinel_password`).
pub fn redact(url: &str) -> String {
    let masked;
    let url = match url.find("password=") {
        Some(_) => {
            masked = redact_query(url);
            masked.as_str()
        }
        None => url,
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.split('@').next_back().unwrap_or("").to_string();
    };
    // A password may hold '/', '@' or ':'; a host holds none of '@'.
    match rest.rfind('@') {
        Some(at) => {
            // Everything before the last '@' is credentials. Keep the part before
            // ':' as a user name only if it could be one (no '@', '/' or '%').
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let user = if user.contains(['@', '/', '%']) { "" } else { user };
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_string(),
    }
}

/// Every `…password=VALUE` with its value (up to the next '&' or '#') replaced by `***`.
fn redact_query(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(at) = rest.find("password=") {
        let value = at + "password=".len();
        out.push_str(&rest[..value]);
        out.push_str("***");
        rest = &rest[value..];
        rest = &rest[rest.find(['&', '#']).unwrap_or(rest.len())..];
    }
    out.push_str(rest);
    out
}

fn describe(info: &redis::ConnectionInfo) -> String {
    let db = info.redis_settings().db();
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => format!("redis://{host}:{port}/{db}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("rediss://{host}:{port}/{db}"),
        ConnectionAddr::Unix(path) => format!("unix://{}?db={db}", path.display()),
        _ => "redis".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_addresses() {
        assert_eq!(normalize_url("s3cret@10.0.0.1:6380").unwrap(), "redis://:s3cret@10.0.0.1:6380");
        assert_eq!(normalize_url("localhost:6379").unwrap(), "redis://localhost:6379");
        assert_eq!(normalize_url("p@ss@h:1").unwrap(), "redis://:p%40ss@h:1");
        assert!(normalize_url("  ").is_err());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
        assert!(!redact("redis://:a@b@h").contains("a@b"));
        assert_eq!(redact("redis://:s3cret/pw@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://p@ss/w:rd%@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://user@h:1"), "redis://user:***@h:1");
        assert_eq!(
            redact("rediss+sentinel://app:pw@h:1/m?sentinel_username=w&sentinel_password=s@e&x#y"),
            "rediss+sentinel://app:***@h:1/m?sentinel_username=w&sentinel_password=***&x#y"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel_password=a/b@c"),
            "redis+sentinel://h:1/m?sentinel_password=***"
        );
    }
}
