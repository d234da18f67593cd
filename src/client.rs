//! A connection to one Redis deployment, shared by every lock made from it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo};
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::scripts::{self, Record};

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://…`, `unix:///path[?db=N]`,
    /// or seed-style `[password@]host[:port]`.
    pub url: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Prepended to every key, to namespace the locks of one application.
    pub prefix: String,
    /// PEM file of the certificate authorities to trust for `rediss://`.
    pub ca_file: Option<PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            url: "redis://127.0.0.1:6379/0".into(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            prefix: "ferrolock:".into(),
            ca_file: None,
        }
    }
}

#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    redis: redis::Client,
    opts: ClientOptions,
    keys: KeySpace,
    display: String,
    /// The live connection and the process that opened it: a forked child
    /// must open its own, never touch its parent's.
    conn: Mutex<Option<(u32, ConnectionManager)>>,
    connecting: tokio::sync::Mutex<()>,
    cleanups: AtomicUsize,
    cleanups_done: Notify,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.inner.display)
    }
}

impl Client {
    /// Validates the options and connects (authentication and database
    /// selection included), failing within `connect_timeout`.
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let client = Client::new(opts)?;
        let mut conn = client.conn().await?;
        // One round trip now, so a server that wants a password we lack, or a
        // database it does not have, is reported here rather than at first use.
        let ping: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
        ping.map_err(|e| match Error::from(e) {
            Error::Connection(m) | Error::Redis(m) => {
                Error::Connection(format!("{m} (at {})", client.describe()))
            }
            other => other,
        })?;
        Ok(client)
    }

    /// Validates the options without connecting; the first command connects.
    pub fn new(opts: ClientOptions) -> Result<Client> {
        if opts.connect_timeout.is_zero() || opts.command_timeout.is_zero() {
            return Err(Error::InvalidArgument("timeouts must be positive".into()));
        }
        let url = normalize_url(&opts.url)?;
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
                let pem = std::fs::read(path).map_err(|e| {
                    Error::InvalidArgument(format!("cannot read ca_file {}: {e}", path.display()))
                })?;
                install_crypto_provider();
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                };
                redis::Client::build_with_tls(info, certs)
            }
            (Some(_), _) => {
                return Err(Error::InvalidArgument(
                    "ca_file needs a rediss:// URL".into(),
                ));
            }
            (None, addr) => {
                if matches!(addr, ConnectionAddr::TcpTls { .. }) {
                    install_crypto_provider();
                }
                redis::Client::open(info)
            }
        }
        .map_err(|e| Error::InvalidArgument(format!("invalid Redis URL {}: {e}", redact(&url))))?;
        Ok(Client {
            inner: Arc::new(Inner {
                redis,
                keys: KeySpace::new(&opts.prefix),
                opts,
                display,
                conn: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
                cleanups: AtomicUsize::new(0),
                cleanups_done: Notify::new(),
            }),
        })
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    pub fn keys(&self) -> &KeySpace {
        &self.inner.keys
    }

    /// The server address without credentials, for messages and repr.
    pub fn describe(&self) -> &str {
        &self.inner.display
    }

    /// The multiplexed, self-reconnecting connection of this process.
    pub(crate) async fn conn(&self) -> Result<ConnectionManager> {
        let pid = std::process::id();
        if let Some(conn) = self.current(pid) {
            return Ok(conn);
        }
        let _one_at_a_time = self.inner.connecting.lock().await;
        if let Some(conn) = self.current(pid) {
            return Ok(conn);
        }
        let timeout = self.inner.opts.connect_timeout;
        // No retries inside the manager: a failed command triggers the next
        // reconnect, and callers (the watchdog, acquire loops) retry on their own
        // schedule, so a dead server is reported at once.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(self.inner.opts.command_timeout))
            .set_number_of_retries(0);
        let conn = tokio::time::timeout(
            timeout,
            ConnectionManager::new_with_config(self.inner.redis.clone(), config),
        )
        .await
        .map_err(|_| {
            Error::Connection(format!(
                "cannot reach Redis at {}: no answer within {:.3} s",
                self.inner.display,
                timeout.as_secs_f64()
            ))
        })?
        .map_err(|e| match Error::from(e) {
            Error::Connection(m) => Error::Connection(format!("{m} (at {})", self.inner.display)),
            other => other,
        })?;
        let mut slot = self.inner.conn.lock().unwrap();
        if let Some(stale) = slot.take() {
            // Opened by the parent before a fork: its driver task lives in the
            // parent's runtime, so dropping it here could block. Leak it.
            std::mem::forget(stale);
        }
        *slot = Some((pid, conn.clone()));
        Ok(conn)
    }

    fn current(&self, pid: u32) -> Option<ConnectionManager> {
        match &*self.inner.conn.lock().unwrap() {
            Some((owner, conn)) if *owner == pid => Some(conn.clone()),
            _ => None,
        }
    }

    /// Deletes the lock `name` whoever holds it (seed 004's `forceRelease`).
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        let keys = [self.keys().lock(name)];
        Ok(scripts::release(&mut self.conn().await?, &keys, "", true).await? > 0)
    }

    /// Who holds `name`, or `None` when it is free.
    pub async fn inspect(&self, name: &str) -> Result<Option<Record>> {
        let keys = [self.keys().lock(name)];
        Ok(scripts::inspect(&mut self.conn().await?, &keys)
            .await?
            .pop()
            .flatten())
    }

    /// Runs a clean-up (a release after a cancelled acquire) detached from
    /// its caller, counted so `settle` can wait for it.
    pub(crate) fn spawn_cleanup<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            log::warn!("no runtime to run a lock clean-up on; the lock expires after its ttl");
            return;
        };
        self.inner.cleanups.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        rt.spawn(async move {
            fut.await;
            if inner.cleanups.fetch_sub(1, Ordering::SeqCst) == 1 {
                inner.cleanups_done.notify_waiters();
            }
        });
    }

    /// Waits until no clean-up is in flight.
    pub async fn settle(&self) {
        loop {
            let done = self.inner.cleanups_done.notified();
            if self.inner.cleanups.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }
}

fn install_crypto_provider() {
    // Fails only when a provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Accepts seed 000's `password@host:port` (no scheme) beside ordinary URLs.
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
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The URL with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.split('@').next_back().unwrap_or("").to_string();
    };
    // A password may hold '/', '@' or ':'; a host holds none of '@'.
    match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_string(),
    }
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
    fn seed_style_addresses() {
        assert_eq!(
            normalize_url("s3cret@10.0.0.1:6380").unwrap(),
            "redis://:s3cret@10.0.0.1:6380"
        );
        assert_eq!(
            normalize_url("localhost:6379").unwrap(),
            "redis://localhost:6379"
        );
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
    }
}
