//! Redis Sentinel: where the master is, asked of the Sentinels at each
//! (re)connect, the way Redis's Sentinel client guidelines describe: the
//! Sentinels answer `SENTINEL get-master-addr-by-name` (all asked at once,
//! the address most of them name taken), and `ROLE` confirms that the node
//! named is a master indeed.
//!
//! `redis+sentinel://` is plain TCP throughout; `rediss+sentinel://` is TLS
//! to the Sentinels and to the data nodes, both checked against `ca_file`
//! (or the system's roots). The credentials before the `@` are the data
//! nodes'; the Sentinels' own, often another ACL user, are given in the
//! query: `?sentinel_username=USER&sentinel_password=PASSWORD`.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::{AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::Error;

mod diagnose;
mod url;

use diagnose::master_error;

/// Between two rounds of asking while the master named cannot be used yet.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long the Sentinels that have not answered are waited for once the
/// first has: a few hundred milliseconds, as Redis's Sentinel client
/// guidelines advise, so a Sentinel that is up but silent (stopped,
/// partitioned) costs no more than that, while one that lags is outvoted.
const SLICE: Duration = Duration::from_millis(500);

/// How often a client in use asks the Sentinels whether the master moved.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

pub(crate) struct SentinelTarget {
    /// `host:port` of each Sentinel (for messages), and how to reach it.
    sentinels: Vec<(String, redis::Client)>,
    service: String,
    tls: bool,
    /// PEM of the certificate authorities to trust, for TLS.
    ca: Option<Vec<u8>>,
    /// Credentials (of the data nodes) and database, for the master.
    node: RedisConnectionInfo,
    /// Whether the URL gives the Sentinels credentials (for messages).
    sentinel_auth: bool,
    /// The order the Sentinels are asked in: the last one that answered first.
    order: Mutex<Vec<usize>>,
    /// `host:port` of the master last connected to.
    current: Mutex<Option<String>>,
    /// When the Sentinels are next asked whether the master moved.
    next_check: Mutex<Instant>,
}

impl SentinelTarget {
    /// The master, within `timeout`. Every Sentinel is asked at once
    /// (`poll`), and the address most of them name is taken, so one Sentinel
    /// that lags behind a failover (a Sentinel stopped for a while enters
    /// TILT mode and keeps naming the old master for 30 s) is outvoted, and
    /// a silent one costs at most `SLICE`. `ROLE` then confirms that the node
    /// named is a master indeed. While the node named cannot be reached or is
    /// not a master yet (a failover under way), it asks again every 100 ms,
    /// as Redis's Sentinel client guidelines advise; when every Sentinel
    /// refuses the connection it gives up at once. An answer that retrying
    /// cannot cure (credentials refused, an unknown service) is reported
    /// rather than a Sentinel that was merely down.
    pub(crate) async fn master(&self, timeout: Duration) -> Result<redis::Client, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let e = match self.poll(deadline).await {
                Ok((i, at)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(left))
                        .set_response_timeout(Some(left));
                    let addr = &self.sentinels[i].0;
                    match tokio::time::timeout(left, self.confirm(addr, &at, &config)).await {
                        Ok(Ok(master)) => {
                            self.prefer(i);
                            return Ok(master);
                        }
                        Ok(Err(Asked::Refused(e))) => return Err(e),
                        Ok(Err(Asked::SentinelDown(e) | Asked::MasterDown(e))) => e,
                        Err(_) => Error::Connection(format!(
                            "no answer within {:.3} s from the master {at} the Sentinel at {addr} named",
                            left.as_secs_f64()
                        )),
                    }
                }
                Err(Unnamed { refused: Some(e), .. }) => return Err(e),
                Err(Unnamed { last, .. }) => {
                    return Err(last.unwrap_or_else(|| Error::Connection("no Sentinel configured".into())));
                }
            };
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(e);
            }
            log::debug!("no master for {:?} yet ({e}); asking the Sentinels again", self.service);
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// What the Sentinels name as the master, by `deadline`: each is asked at
    /// once, and the asking ends when most of the Sentinels configured name
    /// one address, when all have answered, or when `SLICE` has passed since
    /// the first answer came (twice as long as that answer took, on a machine
    /// so loaded that answers are slow). The address named by most of those
    /// that answered wins; a tie goes to the Sentinel asked first (`order`).
    /// Returns the winning address and the Sentinel that named it first.
    async fn poll(&self, deadline: Instant) -> Result<(usize, String), Unnamed> {
        let start = Instant::now();
        let left = deadline.saturating_duration_since(start);
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(left)).set_response_timeout(Some(left));
        let config = &config;
        let mut asks: FuturesUnordered<_> = self
            .sentinels
            .iter()
            .enumerate()
            .map(|(i, (addr, sentinel))| async move { (i, self.named(addr, sentinel, config).await) })
            .collect();
        let majority = self.sentinels.len() / 2 + 1;
        let mut votes: Vec<(usize, String)> = Vec::new();
        let mut unnamed = Unnamed { refused: None, last: None };
        let mut answered_by = deadline;
        let mut heard = vec![false; self.sentinels.len()];
        while votes.iter().map(|(_, at)| votes.iter().filter(|(_, a)| a == at).count()).max().unwrap_or(0)
            < majority
        {
            let until = if votes.is_empty() { deadline } else { answered_by };
            let next = tokio::time::timeout_at(until.into(), asks.next()).await;
            if let Ok(Some((i, _))) = &next {
                heard[*i] = true;
            }
            match next {
                Ok(Some((i, Ok(at)))) => {
                    if votes.is_empty() {
                        let took = Instant::now().saturating_duration_since(start);
                        answered_by = (start + SLICE.max(2 * took)).min(deadline);
                    }
                    votes.push((i, at));
                }
                Ok(Some((_, Err(Asked::Refused(e))))) => unnamed.refused = unnamed.refused.or(Some(e)),
                Ok(Some((_, Err(Asked::SentinelDown(e) | Asked::MasterDown(e))))) => unnamed.last = Some(e),
                Ok(None) | Err(_) => break,
            }
        }
        if votes.is_empty() {
            if !asks.is_empty() {
                let silent: Vec<&str> = (self.sentinels.iter().zip(&heard))
                    .filter(|(_, &heard)| !heard)
                    .map(|((addr, _), _)| addr.as_str())
                    .collect();
                unnamed.last = unnamed.last.or(Some(Error::Connection(format!(
                    "no answer within {:.3} s from the Sentinel at {}",
                    left.as_secs_f64(),
                    silent.join(", ")
                ))));
            }
            return Err(unnamed);
        }
        let order = self.order();
        let rank = |i: usize| order.iter().position(|&j| j == i).unwrap_or(usize::MAX);
        let count = |at: &str| votes.iter().filter(|(_, a)| a == at).count();
        let best = votes
            .iter()
            .min_by_key(|(i, at)| (std::cmp::Reverse(count(at)), rank(*i)))
            .cloned()
            .expect("votes is not empty");
        if votes.iter().any(|(_, at)| *at != best.1) {
            log::info!(
                "the Sentinels of {:?} disagree on the master ({}): taking {}, named by the most",
                self.service,
                votes
                    .iter()
                    .map(|(i, at)| format!("{} names {at}", self.sentinels[*i].0))
                    .collect::<Vec<_>>()
                    .join(", "),
                best.1
            );
        }
        Ok(best)
    }

    /// The Sentinels' indexes, in the order to ask them.
    fn order(&self) -> Vec<usize> {
        self.order.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sentinel `i` answered: it is asked first from now on.
    fn prefer(&self, i: usize) {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = order.iter().position(|&j| j == i) {
            order[..=at].rotate_right(1);
        }
    }

    /// The `host:port` the Sentinel at `addr` names as the master.
    async fn named(
        &self,
        addr: &str,
        sentinel: &redis::Client,
        config: &AsyncConnectionConfig,
    ) -> Result<String, Asked> {
        let mut conn = sentinel
            .get_multiplexed_async_connection_with_config(config)
            .await
            .map_err(|e| Asked::from_sentinel(self.sentinel_error(addr, e)))?;
        let named: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.service)
            .query_async(&mut conn)
            .await
            .map_err(|e| Asked::from_sentinel(self.sentinel_error(addr, e)))?;
        let Some((host, port)) = named else {
            let known: redis::RedisResult<Vec<std::collections::HashMap<String, String>>> =
                redis::cmd("SENTINEL").arg("MASTERS").query_async(&mut conn).await;
            let known = match known {
                Ok(masters) => {
                    let names: Vec<&str> =
                        masters.iter().filter_map(|m| m.get("name")).map(String::as_str).collect();
                    format!(
                        " (it monitors: {})",
                        if names.is_empty() { "none".into() } else { names.join(", ") }
                    )
                }
                Err(_) => String::new(),
            };
            return Err(Asked::Refused(Error::Configuration(format!(
                "the Sentinel at {addr} monitors no master named {:?}{known}: put the name given to `sentinel \
                 monitor NAME host port quorum` in the Sentinel's configuration after the addresses in the URL",
                self.service
            ))));
        };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        Ok(format!("{host}:{port}"))
    }

    /// A client for the node `at` the Sentinel at `addr` named, once `ROLE`
    /// says it is a master.
    async fn confirm(
        &self,
        addr: &str,
        at: &str,
        config: &AsyncConnectionConfig,
    ) -> Result<redis::Client, Asked> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let info = format!("{scheme}://{at}")
            .into_connection_info()
            .map_err(|e| {
                Asked::MasterDown(Error::Connection(format!(
                    "the Sentinel at {addr} named a bad master address {at}: {e}"
                )))
            })?
            .set_redis_settings(self.node.clone());
        let master = open(info, self.ca.as_deref()).map_err(|e| Asked::from_master(Error::from(e)))?;
        let mut conn = master
            .get_multiplexed_async_connection_with_config(config)
            .await
            .map_err(|e| Asked::from_master(master_error(at, e, self.ca.is_some())))?;
        let role: Vec<redis::Value> = redis::cmd("ROLE")
            .query_async(&mut conn)
            .await
            .map_err(|e| Asked::from_master(master_error(at, e, self.ca.is_some())))?;
        match role.first().map(redis::from_redis_value_ref::<String>) {
            Some(Ok(r)) if r == "master" => {
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(at.to_string());
                Ok(master)
            }
            _ => Err(Asked::MasterDown(Error::Connection(format!(
                "the node {at} the Sentinel at {addr} named is not a master (yet): a failover may be under way"
            )))),
        }
    }

    /// Whether it is time to ask the Sentinels again whether the master
    /// moved (at most once every `RECHECK`); the caller then calls `moved`.
    pub(crate) fn recheck_due(&self) -> bool {
        let mut next = self.next_check.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if now < *next {
            return false;
        }
        *next = now + RECHECK;
        true
    }

    /// Whether the Sentinels, asked as `master` asks them (most of them
    /// win), name another master than the one connected to. A demoted
    /// master keeps serving the connections it has until its Sentinel
    /// reconfigures it, which the Sentinel does on its own timer (its INFO
    /// period, 10 s) after a `SENTINEL FAILOVER`: asking is how a client
    /// leaves it sooner. It runs in the background (`Backend::conn`), so the
    /// slice it may wait for a silent Sentinel delays no command.
    pub(crate) async fn moved(&self, timeout: Duration) -> bool {
        let Some(current) = self.current.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
            return false;
        };
        match self.poll(Instant::now() + timeout).await {
            Ok((_, at)) => at != current,
            Err(_) => false,
        }
    }
}

/// Why one Sentinel gave no usable master.
enum Asked {
    /// A setting to change (credentials, the service name): asking again will not help.
    Refused(Error),
    /// The Sentinel could not be reached.
    SentinelDown(Error),
    /// The Sentinel answered, but the node it named is unreachable or not a master yet.
    MasterDown(Error),
}

/// Why the Sentinels named no master.
struct Unnamed {
    /// A setting to change, from the first Sentinel that refused.
    refused: Option<Error>,
    /// The last other error, or the silence.
    last: Option<Error>,
}

impl Asked {
    fn from_sentinel(e: Error) -> Asked {
        match e {
            Error::Configuration(_) => Asked::Refused(e),
            _ => Asked::SentinelDown(e),
        }
    }

    fn from_master(e: Error) -> Asked {
        match e {
            Error::Configuration(_) => Asked::Refused(e),
            _ => Asked::MasterDown(e),
        }
    }
}

/// A redis-rs client for `info`, trusting `ca` for TLS when given.
fn open(info: redis::ConnectionInfo, ca: Option<&[u8]>) -> redis::RedisResult<redis::Client> {
    match (ca, info.addr()) {
        (Some(pem), ConnectionAddr::TcpTls { .. }) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates { client_tls: None, root_cert: Some(pem.to_vec()) },
        ),
        _ => redis::Client::open(info),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls() {
        let (t, display) = SentinelTarget::parse(
            "app:p%40ss@h1:1,h2:2/mymaster/3?sentinel_username=w&sentinel_password=a%26b",
            true,
            None,
        )
        .unwrap();
        assert_eq!(display, "rediss+sentinel://h1:1,h2:2/mymaster/3");
        assert_eq!(t.sentinels.len(), 2);
        assert_eq!((t.node.username(), t.node.password(), t.node.db()), (Some("app"), Some("p@ss"), 3));
        let s = t.sentinels[0].1.get_connection_info();
        assert!(matches!(s.addr(), ConnectionAddr::TcpTls { .. }));
        assert_eq!((s.redis_settings().username(), s.redis_settings().password()), (Some("w"), Some("a&b")));
        let (t, _) = SentinelTarget::parse("h:1/m", false, None).unwrap();
        assert!(
            t.node.password().is_none()
                && t.sentinels[0].1.get_connection_info().redis_settings().password().is_none()
        );
        assert!(matches!(t.sentinels[0].1.get_connection_info().addr(), ConnectionAddr::Tcp(..)));
        for bad in
            ["h:1", "/m", "h:1/m/x", "h:1/m/0/9", "h:1/m?sentinel_pasword=x", "h:1/m?sentinel_password=%zz"]
        {
            assert!(SentinelTarget::parse(bad, false, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_sentinel_that_answered_is_asked_first() {
        let (t, _) = SentinelTarget::parse("a:1,b:2,c:3/m", false, None).unwrap();
        assert_eq!(t.order(), [0, 1, 2]);
        t.prefer(2);
        assert_eq!(t.order(), [2, 0, 1]);
        t.prefer(1);
        assert_eq!(t.order(), [1, 2, 0]);
        t.prefer(1);
        assert_eq!(t.order(), [1, 2, 0]);
    }
}
