//! A quorum's masters must be independent servers: two URLs that reach one
//! server (another database number, another name for the host) would count
//! its vote twice. Checked when the quorum connects: by the addresses the
//! URLs resolve to, then by the `run_id` each server reports.

use redis::ConnectionAddr;

use crate::error::{Error, Result};
use crate::transport::backend::Backend;

/// Refuses two members whose URLs resolve to a shared address (a Sentinel
/// service's master is known only once reached: see `distinct_run_ids`).
pub(crate) async fn distinct_addresses(members: &[Backend]) -> Result<()> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, member) in members.iter().enumerate() {
        for addr in resolve(member.direct_addr()).await {
            if let Some((_, j)) = seen.iter().find(|(a, j)| *a == addr && *j != i) {
                return Err(same_server(&members[*j], member, &addr));
            }
            seen.push((addr, i));
        }
    }
    Ok(())
}

/// Refuses two members that answered with the same `run_id` (`None`: not
/// reached, or not told).
pub(crate) fn distinct_run_ids(members: &[Backend], run_ids: &[Option<String>]) -> Result<()> {
    for (i, id) in run_ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some(j) = run_ids[..i].iter().position(|other| other.as_ref() == Some(id)) {
            return Err(same_server(&members[j], &members[i], &format!("run_id {id}")));
        }
    }
    Ok(())
}

/// The `run_id` of the server `member` reaches, when it tells.
pub(crate) async fn run_id(member: &Backend) -> Result<Option<String>> {
    let mut conn = member.conn().await?;
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query_async(&mut conn).await;
    Ok(info.ok().and_then(|info| {
        info.lines().find_map(|l| l.strip_prefix("run_id:")).map(|id| id.trim().to_string())
    }))
}

/// The socket addresses (or the socket path) `addr` stands for; none when it
/// cannot be resolved now (connecting reports that).
async fn resolve(addr: Option<ConnectionAddr>) -> Vec<String> {
    match addr {
        Some(ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. }) => {
            match tokio::net::lookup_host((host.as_str(), port)).await {
                Ok(found) => found.map(|a| a.to_string()).collect(),
                Err(_) => Vec::new(),
            }
        }
        Some(ConnectionAddr::Unix(path)) => {
            vec![std::fs::canonicalize(&path).unwrap_or(path).display().to_string()]
        }
        _ => Vec::new(),
    }
}

fn same_server(a: &Backend, b: &Backend, what: &str) -> Error {
    Error::Configuration(format!(
        "{} and {} are the same server ({what}): the masters of a quorum must be independent servers, \
         each counted once; give one URL per server",
        a.describe(),
        b.describe()
    ))
}
