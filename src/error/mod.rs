//! The few ways a lock operation can fail.

use std::fmt;

mod refusal;

/// Every failure of the core, kept small so each maps to one Python exception.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// This handle does not hold the lock (never acquired, released, expired or taken over).
    NotOwned(String),
    /// Redis could not be reached, refused the credentials, or did not answer in time.
    Connection(String),
    /// A quorum's step heard from too few masters within its limit, while
    /// enough were still working on it to have made the majority: slow, not
    /// gone. A waiter tries again (`handle::lock::outage`); Python sees a
    /// `LockConnectionError`, as for `Connection`.
    Unanswered(String),
    /// Something answered, but the client's settings do not fit it: a port that
    /// is not Redis, a password, database or scheme the server does not have,
    /// or a server too old. Retrying does not help; the message says what to change.
    Configuration(String),
    /// A caller passed something unusable (the message names it).
    InvalidArgument(String),
    /// Redis answered with an error (for example WRONGTYPE on a key that is not a lock).
    /// A script's own refusals are mapped by their code (`scripts::refusal`).
    Redis(String),
    /// Fewer replicas than asked acknowledged a grant or an extend in time
    /// (`replica_policy` "fail"): the grant was undone, the extend not counted.
    NotReplicated(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotOwned(m)
            | Error::Connection(m)
            | Error::Unanswered(m)
            | Error::Configuration(m)
            | Error::InvalidArgument(m)
            | Error::Redis(m)
            | Error::NotReplicated(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        // RedisError's text never carries the URL, so no password can leak through it.
        let code = e.code().unwrap_or("");
        if let Some(refusal) = refusal::Refusal::from_code(code) {
            return refusal.error(e.detail().unwrap_or(""));
        }
        if e.kind() == redis::ErrorKind::AuthenticationFailed || code == "NOAUTH" || code == "WRONGPASS" {
            Error::Connection(format!("Redis refused the credentials: {e}"))
        } else if code == "LOADING" {
            Error::Connection(format!("Redis is still loading its data after a restart: {e}"))
        } else if code == "READONLY" || code == "MASTERDOWN" {
            Error::Connection(format!("Redis node cannot take writes (a failover may be under way): {e}"))
        } else if matches!(code, "CLUSTERDOWN" | "TRYAGAIN" | "MOVED" | "ASK") {
            // Still so after the connection's own retries: the slot has no
            // master that answers yet.
            Error::Connection(format!(
                "the Redis Cluster cannot serve this slot now (a failover or a slot move may be under way): {e}"
            ))
        } else if e.is_timeout() {
            Error::Connection(format!("Redis did not answer in time: {e}"))
        } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            Error::Connection(format!("cannot reach Redis: {e}"))
        } else if e.is_unrecoverable_error() {
            Error::Connection(format!("Redis connection failed: {e}"))
        } else {
            Error::Redis(format!("Redis error: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_slot_without_a_serving_master_is_a_connection_error() {
        for code in ["CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "MASTERDOWN", "READONLY", "LOADING"] {
            let parsed = redis::parse_redis_value(format!("-{code} 1 127.0.0.1:7000\r\n").as_bytes())
                .and_then(redis::Value::extract_error)
                .expect_err("an error reply");
            assert_eq!(parsed.code(), Some(code));
            assert!(matches!(Error::from(parsed), Error::Connection(_)), "{code}");
        }
        let wrongtype =
            redis::parse_redis_value(b"-WRONGTYPE not a hash\r\n").and_then(redis::Value::extract_error);
        assert!(matches!(Error::from(wrongtype.unwrap_err()), Error::Redis(_)));
    }
}
