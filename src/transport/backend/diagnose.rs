//! Connecting and checking the server, and what a failed connect is said
//! to be: the setting to fix, when a probe can tell.

use std::time::Duration;

use redis::ConnectionAddr;

use super::{Backend, Target};
use crate::error::{Error, Result};
use crate::transport::probe::{ping_probe, CREDENTIALS_REFUSED};
use crate::transport::server;

/// How long a diagnostic probe after a failed connect may take.
const PROBE_LIMIT: Duration = Duration::from_secs(1);

/// Connect-time diagnosis: what went wrong, said with the fix.
impl Backend {
    /// Connects and checks the server.
    pub(super) async fn verify(&self) -> Result<()> {
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
            let (done, mismatch) = tokio::join!(&mut connecting, client.mode_mismatch(limit, false));
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
        let commands = server::check(&mut conn, client.is_cluster(), client.describe()).await?;
        client.inner.compare.found(commands);
        server::check_replication(&mut conn, &client.inner.opts.replication, client.describe()).await?;
        Ok(())
    }

    /// A failed connection attempt as an `Error`, naming the server (never
    /// the password). Failures that retrying cannot cure become `Configuration`.
    pub(super) fn connect_error(&self, e: redis::RedisError) -> Error {
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
        let who = format!("the server at {at}");
        if let Some(refused) =
            crate::transport::tls::certificate_error(&e, &who, self.inner.opts.ca_file.is_some())
        {
            return refused;
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
        if let Error::Connection(m) = &e {
            // A plain connection the server closed (not refused: something
            // listens there) may have reached a TLS port.
            let closed = !m.contains("Connection refused");
            return self.mode_mismatch(limit, closed).await.unwrap_or(e);
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
    /// behind a plain Sentinel URL, and, when `plain_closed`, TLS behind a
    /// plain `redis://` URL): the error naming that setting.
    async fn mode_mismatch(&self, limit: Duration, plain_closed: bool) -> Option<Error> {
        let redis = match &self.inner.target {
            Target::Direct(redis) => redis,
            Target::Sentinel(sentinel) => return sentinel.mode_mismatch(limit).await,
            Target::Cluster(_) => return None,
        };
        let info = redis.get_connection_info();
        let (other, tls) = match info.addr() {
            ConnectionAddr::TcpTls { host, port, .. } => (ConnectionAddr::Tcp(host.clone(), *port), true),
            ConnectionAddr::Tcp(host, port) if plain_closed => {
                super::url::install_crypto_provider();
                let tls = ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: true,
                    tls_params: None,
                };
                (tls, false)
            }
            _ => return None,
        };
        let probe = info.clone().set_addr(other).set_redis_settings(redis::RedisConnectionInfo::default());
        match ping_probe(probe, limit).await {
            // PONG, or an error only Redis would answer with (NOAUTH, DENIED …).
            Some(Ok(_)) => {}
            Some(Err(p)) if p.code().is_some() => {}
            _ => return None,
        }
        let at = &self.inner.display;
        Some(Error::Configuration(if tls {
            format!(
                "the server at {at} answers plain Redis, not TLS, so the TLS handshake failed: use redis:// for \
                 this port, or the port the server serves TLS on (its tls-port)"
            )
        } else {
            format!(
                "the server at {at} answers TLS only (it closed the plain connection): use rediss:// for this \
                 port (with ca_file=PATH if its certificate is signed by your own authority), or the server's \
                 plain port"
            )
        }))
    }

    /// The database number of a direct connection.
    fn db(&self) -> Option<i64> {
        match &self.inner.target {
            Target::Direct(redis) => Some(redis.get_connection_info().redis_settings().db()),
            _ => None,
        }
    }
}
