//! A plain hold: one string key whose value is the owner's token, the layout
//! redis-py's `Lock` (the key is the name itself) and python-redis-lock
//! (`lock:<name>`, with its signal list) keep their holds in. A handle on
//! one excludes the processes of those libraries and is excluded by them,
//! key for key. The hold stores no fence: a new hold's fence is the
//! server's clock when the transaction that took it ran.

use std::time::Duration;

use crate::error::Result;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Obtain, PlainKeys, Reach, Reached, Record, Refreshed, Whose};
use crate::transport::client::Client;

#[derive(Debug, Clone)]
pub struct Plain {
    pub(crate) keys: PlainKeys,
    /// Taken with an expiry (the handle's ttl); `false`: taken without one,
    /// as redis-py's `timeout=None` and python-redis-lock's `expire=None`
    /// take it, and never renewed.
    pub(crate) expires: bool,
}

impl Steps for Plain {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let ttl_ms = self.expires.then_some(ask.ttl.as_millis() as u64);
        scripts::plain_obtain(c, &self.keys, ask.token, ttl_ms).await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        let reach = if self.expires { Reach::Set } else { Reach::Keep };
        Ok(match scripts::plain_refresh(c, &self.keys.hold, token, ttl.as_millis() as u64, reach).await? {
            Reached::Held { shortfall, .. } => Refreshed { held: true, shortfall },
            // Held, made persistent behind its back: it lasts the longer.
            Reached::NoExpiry => Refreshed { held: true, shortfall: None },
            Reached::NotHeld => Refreshed { held: false, shortfall: None },
        })
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let (held, retried) = scripts::plain_release(c, &self.keys, token, Whose::Own).await?;
        Ok(Released { held, retried })
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        Ok(vec![scripts::plain_inspect(c, &self.keys.hold).await?])
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        self.keys.channel.iter().cloned().collect()
    }

    fn wakes(&self) -> bool {
        self.keys.channel.is_some()
    }
}
