//! What a lock handle is made with, and the limits its inputs are checked against.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::support::retry::Retry;

/// Longest accepted name, metadata and token, in bytes.
pub const MAX_NAME: usize = 4096;
pub const MAX_METADATA: usize = 65536;
/// Shortest and longest accepted ttl.
pub const MIN_TTL: Duration = Duration::from_millis(1);
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

pub type LostCallback = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Clone)]
pub struct LockOptions {
    pub ttl: Duration,
    pub auto_renew: bool,
    pub retry: Retry,
    /// Take the lock in arrival order across processes (one name only).
    pub fair: bool,
    /// Stored beside the owner token, readable with `inspect`.
    pub metadata: Option<String>,
    pub on_lost: Option<LostCallback>,
    /// Renewal stops this long after a hold is taken, so the hold ends by
    /// then (and is reported lost) even if its holder never releases it.
    pub max_hold: Option<Duration>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: Duration::from_secs(30),
            auto_renew: true,
            retry: Retry::default(),
            fair: false,
            metadata: None,
            on_lost: None,
            max_hold: None,
        }
    }
}

/// How long `acquire` may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    No,
    Forever,
    Until(Instant),
}

impl Wait {
    pub(crate) fn expired(self) -> bool {
        match self {
            Wait::No => true,
            Wait::Forever => false,
            Wait::Until(t) => Instant::now() >= t,
        }
    }
}

pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::InvalidArgument(format!(
            "ttl must be between {} and {} seconds, got {}",
            MIN_TTL.as_secs_f64(),
            MAX_TTL.as_secs_f64(),
            ttl.as_secs_f64()
        )));
    }
    Ok(())
}

pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("lock name must not be empty".into()));
    }
    if name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "lock name is {} bytes long; the limit is {MAX_NAME}",
            name.len()
        )));
    }
    Ok(())
}

pub(crate) fn validate(names: &[String], opts: &LockOptions, token: Option<&str>) -> Result<()> {
    if names.is_empty() {
        return Err(Error::InvalidArgument("a lock needs at least one name".into()));
    }
    for (i, name) in names.iter().enumerate() {
        check_name(name)?;
        if names[..i].contains(name) {
            return Err(Error::InvalidArgument(format!("lock name {name:?} is given twice")));
        }
    }
    check_ttl(opts.ttl)?;
    if opts.metadata.as_ref().is_some_and(|m| m.len() > MAX_METADATA) {
        return Err(Error::InvalidArgument(format!("metadata is longer than {MAX_METADATA} bytes")));
    }
    if let Some(max_hold) = opts.max_hold {
        if max_hold < opts.ttl || max_hold > MAX_TTL {
            return Err(Error::InvalidArgument(format!(
                "max_hold must be at least the ttl ({} s) and at most {} s, got {}: a hold lasts its ttl \
                 from the start, so a shorter max_hold could not end it",
                opts.ttl.as_secs_f64(),
                MAX_TTL.as_secs_f64(),
                max_hold.as_secs_f64()
            )));
        }
    }
    token.map_or(Ok(()), crate::support::token::check_token)
}
