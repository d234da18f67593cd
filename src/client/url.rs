//! A client's URL: which deployment it names (one server, a Sentinel
//! service, a Cluster), checked and shown without its password.

use redis::{ConnectionAddr, IntoConnectionInfo};

use super::{ClientOptions, Target};
use crate::cluster::ClusterTarget;
use crate::error::{Error, Result};
use crate::sentinel::SentinelTarget;

/// Where `opts.url` points, and how it is shown (without credentials).
pub(super) fn target(opts: &ClientOptions) -> Result<(Target, String)> {
    let url = normalize_url(&opts.url)?;
    let sentinel = [("redis+sentinel://", false), ("rediss+sentinel://", true)]
        .into_iter()
        .find_map(|(scheme, tls)| url.strip_prefix(scheme).map(|rest| (rest, tls)));
    if let Some((rest, tls)) = sentinel {
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
        let (target, display) = SentinelTarget::parse(rest, tls, ca).map_err(|e| {
            Error::InvalidArgument(format!("invalid Redis Sentinel URL {}: {e}", redact(&url)))
        })?;
        return Ok((Target::Sentinel(target), display));
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
        return Ok((Target::Cluster(target), display));
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
    Ok((Target::Direct(redis), display))
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
