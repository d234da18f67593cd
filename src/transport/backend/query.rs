//! The query of a `redis://`, `rediss://` or `unix://` URL, read the way
//! redis-py reads it (`redis.connection.parse_url`): each parameter it
//! documents is honoured (mapped onto ferrolock's own settings), ignored
//! with the reason logged (it shapes only redis-py's connections or
//! replies: a `REDIS_URL` shared with redis-py works as it is), or refused
//! with the reason (ignoring it would change what the connection trusts).
//! A `unix://` URL also takes redis-rs's own `user` and `pass`.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::support::percent::percent_decode;

/// What a URL's query asks for.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Query {
    pub db: Option<i64>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// `socket_connect_timeout`: ferrolock's `connect_timeout`.
    pub connect_timeout: Option<Duration>,
    /// `socket_timeout`: ferrolock's `command_timeout`.
    pub command_timeout: Option<Duration>,
    /// `ssl_cert_reqs=none`: the certificate is not checked (`#insecure`).
    pub skip_verify: bool,
    /// `ssl_check_hostname=false`: the certificate is checked, not its host name.
    pub skip_hostname: bool,
    /// `ssl_ca_certs`: ferrolock's `ca_file`.
    pub ca_file: Option<PathBuf>,
    /// `ssl_certfile` and `ssl_keyfile`: a client certificate (mutual TLS).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Whether any `ssl_*` parameter was given (they need TLS).
    pub tls_asked: bool,
    /// `client_name`: each command connection is named so (`CLIENT SETNAME`).
    pub client_name: Option<String>,
    /// `socket_keepalive`, when given: TCP keepalive probes on the
    /// connections (with the system's timings) or not.
    pub keepalive: Option<bool>,
    /// Parameters accepted and not used, each with the reason.
    pub ignored: Vec<(String, &'static str)>,
}

/// Parameters redis-py takes that ferrolock does not honour, and why: those
/// in `IGNORED` are accepted (and the reason logged), the others refused.
const REFUSED: &[(&str, &str)] = &[
    ("socket_keepalive_options", "ferrolock's connections keep the system's TCP keepalive settings"),
    ("retry_on_timeout", "ferrolock retries by itself (a dropped connection once; acquire by its retry= policy)"),
    ("retry_on_error", "ferrolock retries by itself (a dropped connection once; acquire by its retry= policy)"),
    ("retry", "ferrolock retries by itself (a dropped connection once; acquire by its retry= policy)"),
    ("max_connections", "ferrolock sizes its own connections: per process, one multiplexed, one for wake-ups while anything waits, and a small bounded pool for threads making synchronous calls at once: there is nothing to size (docs: Connections)"),
    ("health_check_interval", "a dropped connection is found and reopened at the next command: there is no health check to schedule"),
    ("lib_name", "ferrolock does not set a library name (CLIENT SETINFO)"),
    ("lib_version", "ferrolock does not set a library name (CLIENT SETINFO)"),
    ("decode_responses", "ferrolock reads its own replies; this shapes redis-py's"),
    ("encoding", "ferrolock reads its own replies; this shapes redis-py's"),
    ("encoding_errors", "ferrolock reads its own replies; this shapes redis-py's"),
    ("single_connection_client", "ferrolock multiplexes its asynchronous and background commands over one connection per process already (docs: Connections)"),
    ("timeout", "ferrolock's waits take their timeout per call (acquire(timeout=...))"),
    ("ssl_password", "an encrypted private key is not supported: give ssl_keyfile unencrypted"),
    ("ssl_ca_path", "give the certificate authorities as one PEM file: ssl_ca_certs= or ca_file="),
    ("ssl_ca_data", "give the certificate authorities as one PEM file: ssl_ca_certs= or ca_file="),
    ("ssl_min_version", "ferrolock uses TLS 1.2 or 1.3, whichever the server offers"),
    ("ssl_ciphers", "ferrolock uses rustls's safe default cipher suites"),
    ("ssl_include_verify_flags", "ferrolock's certificate checks are rustls's, with no OpenSSL flags"),
    ("ssl_exclude_verify_flags", "ferrolock's certificate checks are rustls's, with no OpenSSL flags"),
    ("ssl_validate_ocsp", "ferrolock does not check OCSP"),
    ("ssl_validate_ocsp_stapled", "ferrolock does not check OCSP"),
    ("ssl_ocsp_expected_cert", "ferrolock does not check OCSP"),
    ("socket_read_size", "ferrolock reads its own replies; this shapes redis-py's"),
    ("legacy_responses", "ferrolock reads its own replies; this shapes redis-py's"),
    ("protocol", "ferrolock speaks RESP2 on its own connections, whichever protocol redis-py's use"),
];

/// The parameters of `REFUSED` that only shape redis-py's own connections
/// or replies: accepted, and not used.
const IGNORED: &[&str] = &[
    "socket_keepalive_options",
    "retry_on_timeout",
    "retry_on_error",
    "retry",
    "max_connections",
    "health_check_interval",
    "lib_name",
    "lib_version",
    "decode_responses",
    "encoding",
    "encoding_errors",
    "single_connection_client",
    "timeout",
    "socket_read_size",
    "legacy_responses",
    "protocol",
];

/// The query parameters ferrolock honours, for messages.
const HONOURED: &str = "db, username, password, socket_timeout, socket_connect_timeout, client_name, \
                        socket_keepalive, ssl, ssl_cert_reqs, ssl_ca_certs, ssl_certfile, ssl_keyfile, \
                        ssl_check_hostname";

/// Splits `url` into what precedes its query, the query, and the fragment
/// (with its `#`), each possibly empty.
pub(super) fn split(url: &str) -> (&str, &str, &str) {
    let (rest, fragment) = url.find('#').map_or((url, ""), |at| url.split_at(at));
    let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
    (base, query, fragment)
}

/// Reads `query` (without its `?`). `unix`: a `unix://` URL, which also
/// takes `user` and `pass`.
pub(super) fn parse(query: &str, unix: bool) -> Result<Query> {
    let mut q = Query::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value =
            percent_decode(raw).ok_or_else(|| invalid(key, raw, "it is not valid percent-encoded UTF-8"))?;
        let value = value.as_str();
        if key.starts_with("ssl") {
            q.tls_asked = true;
        }
        match key {
            "db" => {
                let db = value.parse().map_err(|_| invalid(key, value, "a database number is an integer"))?;
                q.db = Some(db);
            }
            "username" => q.username = Some(value.to_string()),
            "user" if unix => q.username = Some(value.to_string()),
            "password" => q.password = Some(value.to_string()),
            "pass" if unix => q.password = Some(value.to_string()),
            "socket_timeout" => q.command_timeout = Some(seconds(key, value)?),
            "socket_connect_timeout" => q.connect_timeout = Some(seconds(key, value)?),
            "ssl" => {
                if to_bool(value) == Some(false) {
                    return Err(refused(key, "TLS is chosen by the scheme: use redis:// for plain TCP"));
                }
            }
            "ssl_cert_reqs" => match value.to_ascii_lowercase().trim_start_matches("cert_") {
                "none" => q.skip_verify = true,
                "required" | "optional" => {}
                _ => return Err(invalid(key, value, "it is none, optional or required")),
            },
            "ssl_check_hostname" => q.skip_hostname = to_bool(value) == Some(false),
            "ssl_ca_certs" => q.ca_file = Some(PathBuf::from(value)),
            "ssl_certfile" => {
                q.client_cert = Some((value.into(), q.client_cert.take().unwrap_or_default().1));
            }
            "ssl_keyfile" => q.client_cert = Some((q.client_cert.take().unwrap_or_default().0, value.into())),
            "client_name" if value.bytes().any(|b| !(b'!'..=b'~').contains(&b)) => {
                return Err(invalid(
                    key,
                    value,
                    "Redis takes a client name of printable ASCII without spaces",
                ));
            }
            "client_name" if !value.is_empty() => q.client_name = Some(value.to_string()),
            "socket_keepalive" => q.keepalive = to_bool(value),
            _ => {
                return Err(match REFUSED.iter().find(|(name, _)| *name == key) {
                    Some((name, why)) if IGNORED.contains(name) => {
                        q.ignored.push((key.to_string(), why));
                        continue;
                    }
                    Some((_, why)) => refused(key, why),
                    None => Error::InvalidArgument(format!(
                        "unknown query parameter {key:?} in the Redis URL: remove it (ferrolock honours \
                         {HONOURED}, and accepts without using {})",
                        IGNORED.join(", ")
                    )),
                })
            }
        }
    }
    if let Some((cert, key)) = &q.client_cert {
        if cert.as_os_str().is_empty() || key.as_os_str().is_empty() {
            return Err(Error::InvalidArgument(
                "ssl_certfile and ssl_keyfile in the Redis URL go together: give both (a client certificate \
                 and its private key, PEM)"
                    .into(),
            ));
        }
    }
    Ok(q)
}

fn refused(key: &str, why: &str) -> Error {
    Error::InvalidArgument(format!(
        "the query parameter {key} in the Redis URL is not supported: {why}; remove it"
    ))
}

fn invalid(key: &str, value: &str, why: &str) -> Error {
    Error::InvalidArgument(format!("invalid {key}={value:?} in the Redis URL: {why}"))
}

/// A positive, finite number of seconds.
fn seconds(key: &str, value: &str) -> Result<Duration> {
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(invalid(key, value, "it is a positive number of seconds")),
    }
}

/// redis-py's `to_bool`: `0`, `F`, `FALSE`, `N`, `NO` are false, empty is
/// unset, anything else true.
fn to_bool(value: &str) -> Option<bool> {
    if value.is_empty() {
        return None;
    }
    Some(!matches!(value.to_ascii_uppercase().as_str(), "0" | "F" | "FALSE" | "N" | "NO"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_py_parameters_are_read() {
        let q =
            parse("db=3&socket_timeout=2.5&socket_connect_timeout=1&ssl_cert_reqs=none&protocol=2", false)
                .unwrap();
        assert_eq!(q.db, Some(3));
        assert_eq!(q.command_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(q.connect_timeout, Some(Duration::from_secs(1)));
        assert!(q.skip_verify && q.tls_asked);
        assert!(parse("ssl_check_hostname=False", false).unwrap().skip_hostname);
        assert!(!parse("ssl_check_hostname=true", false).unwrap().skip_hostname);
        assert_eq!(parse("user=u&pass=p%40", true).unwrap().password.as_deref(), Some("p@"));
    }

    #[test]
    fn what_shapes_only_redis_pys_connections_is_ignored_with_its_reason() {
        let q = parse(
            "max_connections=10&decode_responses=True&protocol=3&client_name=web&socket_keepalive=1",
            false,
        )
        .unwrap();
        let ignored: Vec<&str> = q.ignored.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(ignored, ["max_connections", "decode_responses", "protocol"]);
        assert!(q.ignored.iter().all(|(_, why)| !why.is_empty()));
        assert_eq!(q.client_name.as_deref(), Some("web"));
        assert_eq!(q.keepalive, Some(true));
        for name in IGNORED {
            assert!(REFUSED.iter().any(|(n, _)| n == name), "{name} has no reason");
        }
    }

    #[test]
    fn what_would_change_trust_or_nobody_knows_is_refused() {
        for (query, named) in [
            ("ssl_password=x", "ssl_password"),
            ("ssl_ciphers=HIGH", "ssl_ciphers"),
            ("frobnicate=1", "frobnicate"),
            ("user=u", "user"),
            ("socket_timeout=0", "socket_timeout"),
            ("ssl_certfile=c.pem", "ssl_keyfile"),
            ("ssl_cert_reqs=maybe", "ssl_cert_reqs"),
        ] {
            let e = parse(query, false).unwrap_err().to_string();
            assert!(e.contains(named), "{query}: {e}");
        }
    }

    #[test]
    fn split_keeps_the_fragment() {
        assert_eq!(split("rediss://h:1/0?db=2#insecure"), ("rediss://h:1/0", "db=2", "#insecure"));
        assert_eq!(split("redis://h"), ("redis://h", "", ""));
    }
}
