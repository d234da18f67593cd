//! What ferrolock asks of the server it connects to: a version its scripts
//! run on (refused otherwise), and a memory policy that never evicts a held
//! lock (warned about otherwise); and what it may use there beyond the
//! scripts (`compare::Commands`).

use crate::error::{Error, Result};
use crate::transport::compare::Commands;
use crate::transport::conn::Conn;
use crate::transport::replication::Replication;

/// The oldest Redis the scripts run on: `ZADD … GT` came with 6.2.
const MIN_REDIS: (u32, u32) = (6, 2);
/// A Cluster's wake-ups use sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`), new in 7.0.
const MIN_REDIS_CLUSTER: (u32, u32) = (7, 0);

/// Checks a server just connected to: its version (too old: an error), and
/// whether it may evict held locks (a warning: that is the operator's call).
/// Returns the compare commands it has.
pub(crate) async fn check(conn: &mut Conn, cluster: bool, display: &str) -> Result<Commands> {
    let commands = check_version(conn, cluster, display).await?;
    if let Some(policy) = evicting_policy(conn).await {
        log::warn!(
            "Redis at {display} has maxmemory set with maxmemory-policy {policy}: when memory fills up it \
             may evict held locks (every lock key has an expiry, so volatile-* policies pick them too), and \
             a second holder could then acquire; set maxmemory-policy noeviction on servers that hold locks"
        );
    }
    Ok(commands)
}

/// Refuses a server older than the scripts need. A version that cannot
/// be read (a proxy, a user without the right to ask) is let through, with
/// no compare command.
async fn check_version(conn: &mut Conn, cluster: bool, display: &str) -> Result<Commands> {
    let (min, why) = if cluster {
        (MIN_REDIS_CLUSTER, "a Cluster's wake-ups use sharded pub/sub, SPUBLISH and SSUBSCRIBE, new in 7.0")
    } else {
        (MIN_REDIS, "its scripts use ZADD with GT, new in 6.2")
    };
    let found = match server_version(conn).await {
        ServerVersion::Reported { server, version } => match parse_version(&version) {
            Some(v) if v < min => format!("version {version}"),
            Some(v) => return Ok(Commands::detect(&server, v)),
            None => return Ok(Commands::default()),
        },
        ServerVersion::Before62 => {
            "older than 6.2 (it refuses HELLO without arguments, as Redis 6.0 does)".to_string()
        }
        ServerVersion::Unknown => {
            log::debug!("could not read the Redis version of {display}");
            return Ok(Commands::default());
        }
    };
    Err(Error::Configuration(format!(
        "Redis at {} is {found}, and ferrolock needs Redis {}.{} or newer ({why}): upgrade the server",
        display, min.0, min.1
    )))
}

/// `WAITAOF`, which `replica_fsync` sends, came with Redis 7.2.
const MIN_REDIS_WAITAOF: (u32, u32) = (7, 2);

/// Checks a server just connected to against the replica acknowledgement
/// asked for: `replica_fsync` on a server without WAITAOF is refused (every
/// grant would fail); fewer connected replicas than `replicas` is warned
/// about (replicas come and go, so that is not refused).
pub(crate) async fn check_replication(
    conn: &mut Conn,
    replication: &Replication,
    display: &str,
) -> Result<()> {
    if !replication.is_on() {
        return Ok(());
    }
    if replication.fsync {
        let found = match server_version(conn).await {
            ServerVersion::Reported { version, .. } => match parse_version(&version) {
                Some(v) if v < MIN_REDIS_WAITAOF => format!("version {version}"),
                _ => String::new(),
            },
            ServerVersion::Before62 => "older than 6.2".to_string(),
            ServerVersion::Unknown => String::new(),
        };
        if !found.is_empty() {
            return Err(Error::Configuration(format!(
                "Redis at {display} is {found}, and replica_fsync=True needs Redis {}.{} or newer (it waits \
                 with WAITAOF, new in 7.2): upgrade the server, or set replica_fsync=False to wait with WAIT \
                 (the replicas received each grant, in memory)",
                MIN_REDIS_WAITAOF.0, MIN_REDIS_WAITAOF.1
            )));
        }
    }
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("replication").query_async(conn).await;
    if let Some(connected) = info.ok().as_deref().and_then(connected_replicas) {
        if connected < u64::from(replication.replicas) {
            log::warn!(
                "Redis at {display} has {connected} connected replica(s), and replicas={} is asked: until \
                 enough replicas connect, no grant is acknowledged (replica_policy {:?})",
                replication.replicas,
                replication.policy.as_str()
            );
        }
    }
    Ok(())
}

/// `connected_slaves` of `INFO replication`.
fn connected_replicas(info: &str) -> Option<u64> {
    info.lines().find_map(|l| l.strip_prefix("connected_slaves:")).and_then(|n| n.trim().parse().ok())
}

/// The eviction policy, when the server has a memory limit and a policy that
/// may evict lock keys; `None` when it cannot (or cannot be asked: no INFO right).
async fn evicting_policy(conn: &mut Conn) -> Option<String> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await.ok()?;
    may_evict(&info)
}

fn may_evict(info: &str) -> Option<String> {
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let limit: u64 = field("maxmemory:")?.parse().ok()?;
    let policy = field("maxmemory_policy:")?;
    (limit > 0 && policy != "noeviction").then(|| policy.to_string())
}

enum ServerVersion {
    /// `server`: `redis` or `valkey` (`HELLO`'s; `INFO` says `redis`).
    Reported {
        server: String,
        version: String,
    },
    /// HELLO without arguments refused for its arity: Redis 6.0 does that.
    Before62,
    Unknown,
}

/// The server's version: `HELLO` without arguments reports it (Redis 6.2 and
/// later, and no ACL permission is needed for it); older servers answer `INFO`.
async fn server_version(conn: &mut Conn) -> ServerVersion {
    let hello = redis::cmd("HELLO").query_async::<redis::Value>(conn).await;
    if let Some(version) = hello.as_ref().ok().and_then(|reply| hello_field(reply, "version")) {
        let server = hello.as_ref().ok().and_then(|reply| hello_field(reply, "server"));
        return ServerVersion::Reported { server: server.unwrap_or_default(), version };
    }
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query_async(conn).await;
    if let Some(version) = info.ok().and_then(|info| {
        info.lines().find_map(|l| l.strip_prefix("redis_version:")).map(|v| v.trim().to_string())
    }) {
        return ServerVersion::Reported { server: "redis".into(), version };
    }
    match hello {
        Err(e) if e.detail().is_some_and(|d| d.contains("wrong number of arguments")) => {
            ServerVersion::Before62
        }
        _ => ServerVersion::Unknown,
    }
}

/// One field of a HELLO reply: a flat array of names and values (RESP2) or a map (RESP3).
fn hello_field(reply: &redis::Value, name: &str) -> Option<String> {
    let pairs: Vec<(&redis::Value, &redis::Value)> = match reply {
        redis::Value::Array(items) => items.chunks_exact(2).map(|p| (&p[0], &p[1])).collect(),
        redis::Value::Map(items) => items.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    pairs.into_iter().find_map(|(k, v)| {
        let key: String = redis::from_redis_value_ref(k).ok()?;
        (key == name).then(|| redis::from_redis_value_ref(v).ok()).flatten()
    })
}

/// `"6.2.14"` → `(6, 2)`.
fn parse_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read() {
        assert_eq!(parse_version("6.0.16"), Some((6, 0)));
        assert_eq!(parse_version("7.2.4\r"), Some((7, 2)));
        assert_eq!(parse_version("8"), Some((8, 0)));
        assert_eq!(parse_version("unstable"), None);
        assert!(parse_version("6.0.9").unwrap() < MIN_REDIS && parse_version("6.2.0").unwrap() >= MIN_REDIS);
        let s = |v: &str| redis::Value::BulkString(v.as_bytes().to_vec());
        let resp2 = redis::Value::Array(vec![s("server"), s("redis"), s("version"), s("6.0.9")]);
        assert_eq!(hello_field(&resp2, "version").as_deref(), Some("6.0.9"));
        let resp3 = redis::Value::Map(vec![(s("proto"), redis::Value::Int(3)), (s("version"), s("7.0.15"))]);
        assert_eq!(hello_field(&resp3, "version").as_deref(), Some("7.0.15"));
        assert_eq!(hello_field(&redis::Value::Okay, "version"), None);
    }

    #[test]
    fn connected_replicas_are_read() {
        assert_eq!(connected_replicas("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"), Some(2));
        assert_eq!(connected_replicas("role:master\r\n"), None);
        assert!(parse_version("7.0.15").unwrap() < MIN_REDIS_WAITAOF);
        assert!(parse_version("7.2.0").unwrap() >= MIN_REDIS_WAITAOF);
    }

    #[test]
    fn evicting_policies() {
        let info = |limit: u64, policy: &str| {
            format!("# Memory\r\nmaxmemory:{limit}\r\nmaxmemory_policy:{policy}\r\n")
        };
        assert_eq!(may_evict(&info(0, "allkeys-lru")), None);
        assert_eq!(may_evict(&info(1 << 20, "noeviction")), None);
        assert_eq!(may_evict(&info(1 << 20, "volatile-ttl")).as_deref(), Some("volatile-ttl"));
        assert_eq!(may_evict(&info(1 << 20, "allkeys-lru")).as_deref(), Some("allkeys-lru"));
        assert_eq!(may_evict("no such fields"), None);
    }
}
