//! A Sentinel URL: the Sentinels, the service, the data nodes' credentials
//! and database, and the Sentinels' own credentials in the query.

use std::sync::Mutex;
use std::time::Instant;

use redis::{IntoConnectionInfo, RedisConnectionInfo};

use super::{open, SentinelTarget};
use crate::support::percent::percent_decode;

/// The query keys a Sentinel URL accepts.
const QUERY_KEYS: &str = "sentinel_username, sentinel_password";

impl SentinelTarget {
    /// `[user:password@]host:port[,host:port…]/service[/db][?query]`, after the
    /// scheme. Returns the target and its description (no credentials).
    pub(crate) fn parse(
        rest: &str,
        tls: bool,
        ca: Option<Vec<u8>>,
    ) -> Result<(SentinelTarget, String), String> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (auth, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (hosts, path) =
            rest.split_once('/').ok_or("expected /service_name after the Sentinel addresses")?;
        let mut path = path.split('/');
        let service = path.next().filter(|s| !s.is_empty()).ok_or("the service (master) name is missing")?;
        let db = match path.next() {
            Some(db) if !db.is_empty() => {
                db.parse::<i64>().map_err(|_| format!("bad database number {db:?}"))?
            }
            _ => 0,
        };
        if let Some(extra) = path.next() {
            return Err(format!("unexpected {extra:?} after the database number"));
        }
        // The data nodes' credentials, decoded as redis-rs decodes any URL's.
        let node = format!("redis://{}127.0.0.1/{db}", auth.map_or(String::new(), |a| format!("{a}@")))
            .into_connection_info()
            .map_err(|e| format!("bad credentials before the '@': {}", e.detail().unwrap_or("unparsable")))?
            .redis_settings()
            .clone();
        let mut sentinel = RedisConnectionInfo::default();
        let mut sentinel_auth = false;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value).ok_or_else(|| format!("bad percent-encoding in {key}"))?;
            match key {
                "sentinel_username" => sentinel = sentinel.set_username(value),
                "sentinel_password" => sentinel = sentinel.set_password(value),
                _ => return Err(format!("unknown option {key:?} in the query (known: {QUERY_KEYS})")),
            }
            sentinel_auth = true;
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let sentinels = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| {
                let info = format!("{scheme}://{h}")
                    .into_connection_info()
                    .map_err(|e| format!("bad Sentinel address {h:?}: {e}"))?
                    .set_redis_settings(sentinel.clone());
                let client =
                    open(info, ca.as_deref()).map_err(|e| format!("bad Sentinel address {h:?}: {e}"))?;
                Ok((h.to_string(), client))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if sentinels.is_empty() {
            return Err("no Sentinel address given".into());
        }
        let display = format!("{scheme}+sentinel://{hosts}/{service}/{db}");
        let target = SentinelTarget {
            order: Mutex::new((0..sentinels.len()).collect()),
            sentinels,
            service: service.to_string(),
            tls,
            ca,
            node,
            sentinel_auth,
            current: Mutex::default(),
            next_check: Mutex::new(Instant::now()),
        };
        Ok((target, display))
    }
}
