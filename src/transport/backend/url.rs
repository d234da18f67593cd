//! A client's URL: which deployment it names (one server, a Sentinel
//! service, a Cluster), checked and shown without its password.

use redis::{ConnectionAddr, IntoConnectionInfo};

use super::{query, ClientOptions, Target};
use crate::error::{Error, Result};
use crate::transport::cluster::ClusterTarget;
use crate::transport::sentinel::SentinelTarget;

/// The schemes a URL may have (redis-rs's `valkey` spellings too).
const SCHEMES: &[&str] = &[
    "redis",
    "rediss",
    "unix",
    "redis+unix",
    "valkey",
    "valkeys",
    "valkey+unix",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
];

/// Where `opts.url` points, how it is shown (without credentials), and the
/// options with what the URL's query sets (see `query`).
pub(super) fn target(mut opts: ClientOptions) -> Result<(Target, String, ClientOptions)> {
    let url = normalize_url(&opts.url)?;
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    if !SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Err(Error::InvalidArgument(format!(
            "unsupported scheme {scheme}:// in the Redis URL {}: use redis://, rediss:// (TLS), unix://, \
             redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://",
            redact(&url)
        )));
    }
    let sentinel = [("redis+sentinel://", false), ("rediss+sentinel://", true)]
        .into_iter()
        .find_map(|(scheme, tls)| url.strip_prefix(scheme).map(|rest| (rest, tls)));
    if let Some((rest, tls)) = sentinel {
        let (rest, client_name) = take_param(rest, "client_name");
        opts = merge_name(opts, client_name)?;
        let ca = match (&opts.ca_file, tls) {
            (Some(_), false) => {
                return Err(Error::InvalidArgument(
                    "ca_file needs a rediss+sentinel:// URL (TLS to the Sentinels and the data nodes)".into(),
                ))
            }
            (Some(path), true) => Some(read_ca_file(path)?),
            (None, _) => None,
        };
        if tls {
            install_crypto_provider();
        }
        let (target, display) = SentinelTarget::parse(&rest, tls, ca).map_err(|e| {
            Error::InvalidArgument(format!("invalid Redis Sentinel URL {}: {e}", redact(&url)))
        })?;
        return Ok((Target::Sentinel(target), display, opts));
    }
    let (base, query, fragment) = query::split(&url);
    let cluster = [("redis+cluster://", false), ("rediss+cluster://", true)]
        .into_iter()
        .find_map(|(scheme, tls)| base.strip_prefix(scheme).map(|rest| (rest, tls)));
    if let Some((rest, tls)) = cluster {
        return cluster_target(rest, tls, (query, fragment), opts, &url);
    }
    let unix = scheme.ends_with("unix");
    let q = query::parse(query, unix)?;
    say_ignored(&q);
    let info = format!("{base}{fragment}").into_connection_info().map_err(|e| {
        Error::InvalidArgument(format!(
            "invalid Redis URL {}: {}",
            redact(&url),
            e.detail().unwrap_or("unparsable")
        ))
    })?;
    let info = apply_query(info, &q, !unix && path_names_db(base))?;
    opts = merge_query(opts, &q)?;
    let display = describe(&info);
    let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
    if !tls && (opts.ca_file.is_some() || q.tls_asked) {
        let what = if q.tls_asked { "ssl_* query parameters need" } else { "ca_file needs" };
        return Err(Error::InvalidArgument(format!("{what} a rediss:// URL")));
    }
    if tls {
        install_crypto_provider();
    }
    let client_tls = match &q.client_cert {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read_pem("ssl_certfile", cert)?,
            client_key: read_pem("ssl_keyfile", key)?,
        }),
        None => None,
    };
    let root_cert = opts.ca_file.as_deref().map(read_ca_file).transpose()?;
    let bad =
        |e: redis::RedisError| Error::InvalidArgument(format!("invalid Redis URL {}: {e}", redact(&url)));
    let mut redis = if root_cert.is_some() || client_tls.is_some() {
        redis::Client::build_with_tls(info, redis::TlsCertificates { client_tls, root_cert })
    } else {
        redis::Client::open(info)
    }
    .map_err(bad)?;
    if q.skip_hostname {
        // Set on the certificates' parameters, which building with them makes anew.
        let mut addr = redis.get_connection_info().addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        redis = redis::Client::open(redis.get_connection_info().clone().set_addr(addr)).map_err(bad)?;
    }
    Ok((Target::Direct(redis), display, opts))
}

/// A `redis+cluster://` or `rediss+cluster://` URL (`rest`: after the
/// scheme, without its query): the query takes the timeouts and the CA only.
fn cluster_target(
    rest: &str,
    tls: bool,
    (query, fragment): (&str, &str),
    mut opts: ClientOptions,
    url: &str,
) -> Result<(Target, String, ClientOptions)> {
    let q = query::parse(query, false)?;
    say_ignored(&q);
    if !fragment.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "a Redis Cluster URL takes no {fragment} fragment: its certificates are always checked"
        )));
    }
    let (mut target, display) = ClusterTarget::parse(rest, tls)
        .map_err(|e| Error::InvalidArgument(format!("invalid Redis Cluster URL {}: {e}", redact(url))))?;
    let taken = query::Query {
        connect_timeout: None,
        command_timeout: None,
        ca_file: None,
        tls_asked: q.tls_asked && q.ca_file.is_some() && q.client_cert.is_none(),
        db: q.db.filter(|db| *db != 0),
        ignored: Vec::new(),
        ..q.clone()
    };
    if taken != query::Query::default() {
        return Err(Error::InvalidArgument(format!(
            "the query of a Redis Cluster URL takes socket_timeout, socket_connect_timeout and \
             ssl_ca_certs only (and db=0): {query:?} asks for more"
        )));
    }
    opts = merge_query(opts, &q)?;
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
    Ok((Target::Cluster(target), display, opts))
}

/// Whether the URL (without its query) names a database in its path.
fn path_names_db(base: &str) -> bool {
    let after = base.split_once("://").map_or(base, |(_, rest)| rest);
    let host = after.rsplit_once('@').map_or(after, |(_, host)| host);
    host.split_once('/').is_some_and(|(_, path)| !path.trim_matches('/').is_empty())
}

/// The query's database, credentials and certificate checks, set on `info`;
/// a query that contradicts the rest of the URL is refused.
fn apply_query(
    info: redis::ConnectionInfo,
    q: &query::Query,
    path_db: bool,
) -> Result<redis::ConnectionInfo> {
    let mut settings = info.redis_settings().clone();
    if let Some(db) = q.db {
        if path_db && settings.db() != db {
            return Err(Error::InvalidArgument(format!(
                "the Redis URL names two databases, {} in its path and {db} in ?db=: give one",
                settings.db()
            )));
        }
        settings = settings.set_db(db);
    }
    for (name, given, had) in
        [("username", &q.username, settings.username()), ("password", &q.password, settings.password())]
    {
        if let (Some(given), Some(had)) = (given, had) {
            if given != had {
                return Err(Error::InvalidArgument(format!(
                    "the Redis URL gives two {name}s, one before the '@' and one in ?{name}=: give one"
                )));
            }
        }
    }
    if let Some(user) = &q.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &q.password {
        settings = settings.set_password(password);
    }
    let mut addr = info.addr().clone();
    if let ConnectionAddr::TcpTls { host, port, tls_params, insecure } = addr {
        addr = ConnectionAddr::TcpTls { host, port, insecure: insecure || q.skip_verify, tls_params };
    }
    let mut info = info.set_addr(addr).set_redis_settings(settings);
    if q.keepalive == Some(true) {
        let keepalive = redis::io::tcp::socket2::TcpKeepalive::new();
        info = info.set_tcp_settings(redis::io::tcp::TcpSettings::default().set_keepalive(keepalive));
    }
    Ok(info)
}

/// The options with the query's timeouts and certificate authorities; a
/// keyword argument that says otherwise is refused.
fn merge_query(mut opts: ClientOptions, q: &query::Query) -> Result<ClientOptions> {
    let defaults = ClientOptions::default();
    for (given, kept, default, keyword, param) in [
        (
            q.connect_timeout,
            &mut opts.connect_timeout,
            defaults.connect_timeout,
            "connect_timeout",
            "socket_connect_timeout",
        ),
        (
            q.command_timeout,
            &mut opts.command_timeout,
            defaults.command_timeout,
            "command_timeout",
            "socket_timeout",
        ),
    ] {
        let Some(given) = given else { continue };
        if *kept != default && *kept != given {
            return Err(conflict(keyword, param));
        }
        *kept = given;
    }
    if let Some(ca) = &q.ca_file {
        if opts.ca_file.as_ref().is_some_and(|had| had != ca) {
            return Err(conflict("ca_file", "ssl_ca_certs"));
        }
        opts.ca_file = Some(ca.clone());
    }
    opts = merge_name(opts, q.client_name.clone())?;
    if q.skip_verify && opts.ca_file.is_some() {
        return Err(Error::InvalidArgument(
            "ssl_cert_reqs=none skips the certificate check that ca_file (or ssl_ca_certs) is for: give one"
                .into(),
        ));
    }
    Ok(opts)
}

/// The options with the URL's `client_name`; one given twice must agree.
fn merge_name(mut opts: ClientOptions, name: Option<String>) -> Result<ClientOptions> {
    if let Some(name) = name {
        if opts.client_name.as_ref().is_some_and(|had| *had != name) {
            return Err(Error::InvalidArgument("the Redis URL gives two client names: give one".into()));
        }
        opts.client_name = Some(name);
    }
    Ok(opts)
}

/// Logs each query parameter accepted and not used, with the reason.
fn say_ignored(q: &query::Query) {
    for (key, why) in &q.ignored {
        log::info!("the Redis URL's ?{key}= is not used: {why}");
    }
}

/// `rest` (a URL after its scheme) without the query parameter `key`, and
/// that parameter's value (percent-decoded).
fn take_param(rest: &str, key: &str) -> (String, Option<String>) {
    let Some((base, query)) = rest.split_once('?') else {
        return (rest.to_string(), None);
    };
    let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
    let mut found = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((k, v)) if k == key => {
                found = crate::support::percent::percent_decode(v).filter(|v| !v.is_empty());
                false
            }
            _ => true,
        })
        .collect();
    let mut out = base.to_string();
    if !kept.is_empty() {
        out = format!("{out}?{}", kept.join("&"));
    }
    if let Some(fragment) = fragment {
        out = format!("{out}#{fragment}");
    }
    (out, found)
}

fn conflict(keyword: &str, param: &str) -> Error {
    Error::InvalidArgument(format!("{keyword}= and the Redis URL's ?{param}= disagree: give one of them"))
}

fn read_pem(what: &str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::InvalidArgument(format!("cannot read {what} {}: {e}", path.display())))
}

fn read_ca_file(path: &std::path::Path) -> Result<Vec<u8>> {
    read_pem("ca_file", path)
}

pub(super) fn install_crypto_provider() {
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
