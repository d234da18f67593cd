//! What a Sentinel's or its master's refusal means, and what to change.

use std::time::Duration;

use redis::ConnectionAddr;

use super::SentinelTarget;
use crate::error::Error;

impl SentinelTarget {
    /// What a Sentinel's refusal means, and what to change.
    pub(super) fn sentinel_error(&self, addr: &str, e: redis::RedisError) -> Error {
        let given = if self.sentinel_auth { "the URL gives" } else { "the URL gives none" };
        if e.kind() == redis::ErrorKind::AuthenticationFailed || matches!(e.code(), Some("WRONGPASS")) {
            return Error::Configuration(format!(
                "the Sentinel at {addr} refused the credentials ({given}): check sentinel_username and \
                 sentinel_password in the URL's query (the Sentinel's requirepass, or its `user` lines); \
                 the user name and password before the '@' are the data nodes', not the Sentinels'"
            ));
        }
        if e.code() == Some("NOAUTH") {
            return Error::Configuration(format!(
                "the Sentinel at {addr} needs a password (NOAUTH Authentication required), and {given}: add \
                 ?sentinel_password=PASSWORD to the URL (&sentinel_username=USER too for an ACL user); the \
                 credentials before the '@' are the data nodes', not the Sentinels'"
            ));
        }
        if e.code() == Some("NOPERM") {
            return Error::Configuration(format!(
                "the Sentinel at {addr} does not let this user ask for the master ({}): allow it \
                 SENTINEL GET-MASTER-ADDR-BY-NAME (+sentinel|get-master-addr-by-name)",
                e.detail().unwrap_or("NOPERM")
            ));
        }
        let who = format!("the Sentinel at {addr}");
        if let Some(refused) = crate::transport::tls::certificate_error(&e, &who, self.ca.is_some()) {
            return refused;
        }
        match Error::from(e) {
            Error::Connection(m) | Error::Redis(m) => {
                Error::Connection(format!("{m} (the Sentinel at {addr})"))
            }
            other => other,
        }
    }

    /// Whether a Sentinel answers in the other mode (TLS where the URL says
    /// plain, or plain where it says TLS): the error naming that setting.
    /// Every Sentinel is probed at once, all within `limit`.
    pub(crate) async fn mode_mismatch(&self, limit: Duration) -> Option<Error> {
        let probes = self.sentinels.iter().map(|(addr, sentinel)| async move {
            let (ConnectionAddr::TcpTls { host, port, .. } | ConnectionAddr::Tcp(host, port)) =
                sentinel.get_connection_info().addr()
            else {
                return None;
            };
            let other = if self.tls {
                ConnectionAddr::Tcp(host.clone(), *port)
            } else {
                ConnectionAddr::TcpTls { host: host.clone(), port: *port, insecure: true, tls_params: None }
            };
            let probe = sentinel.get_connection_info().clone().set_addr(other);
            match crate::transport::probe::ping_probe(probe, limit).await {
                Some(Ok(_)) => Some(addr),
                Some(Err(p)) if p.code().is_some() => Some(addr),
                _ => None,
            }
        });
        let answered = futures_util::future::join_all(probes).await;
        let addr = answered.into_iter().flatten().next()?;
        Some(Error::Configuration(if self.tls {
            format!(
                "the Sentinel at {addr} answers plain Redis, not TLS, so the TLS handshake failed: use \
                 redis+sentinel:// for these Sentinels, or the port they serve TLS on (their tls-port)"
            )
        } else {
            format!(
                "the Sentinel at {addr} answers TLS only: use rediss+sentinel:// (with ca_file if its \
                 certificate is signed by your own authority), or the Sentinel's plain port"
            )
        }))
    }
}

/// The master refused or failed: its credentials are the URL's user info.
/// `ca_given`: the URL came with a `ca_file`.
pub(super) fn master_error(at: &str, e: redis::RedisError, ca_given: bool) -> Error {
    if e.kind() == redis::ErrorKind::AuthenticationFailed || matches!(e.code(), Some("WRONGPASS")) {
        return Error::Configuration(format!(
            "the master {at} the Sentinels named {} the data nodes' credentials: the user name or password \
             before the '@' in the URL is wrong, or the user is disabled; check them (the node's requirepass, \
             or ACL LIST)",
            crate::transport::probe::CREDENTIALS_REFUSED
        ));
    }
    if e.code() == Some("NOAUTH") {
        return Error::Configuration(format!(
            "the master {at} the Sentinels named needs a password (NOAUTH), and the URL gives none: put the \
             data nodes' credentials before the '@', as redis+sentinel://USER:PASSWORD@host:port/service"
        ));
    }
    let who = format!("the master {at} the Sentinels named");
    if let Some(refused) = crate::transport::tls::certificate_error(&e, &who, ca_given) {
        return refused;
    }
    match Error::from(e) {
        Error::Connection(m) | Error::Redis(m) => Error::Connection(format!("{m} (the master {at})")),
        other => other,
    }
}
