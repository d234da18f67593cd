//! An exclusive hold on one name, or on several taken all or none.

use std::sync::Arc;
use std::time::Duration;

use super::attempt;
use crate::error::Result;
use crate::keys::wake_channel;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Obtain, Record, Refreshed, Whose};
use crate::transport::client::Client;

/// One hash per name.
#[derive(Debug, Clone)]
pub struct Exclusive {
    pub(crate) keys: Arc<[String]>,
}

impl Steps for Exclusive {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        let attempt = attempt(ask, Duration::ZERO);
        scripts::obtain(c, &self.keys, ask.token, ttl_ms, ask.metadata, quorum, attempt, ask.from).await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        scripts::refresh(c, &self.keys, token, ttl.as_millis() as u64).await
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let (n, retried) = scripts::release_noting_retry(c, &self.keys, token, Whose::Own, "").await?;
        Ok(Released { held: n > 0, retried })
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        scripts::inspect(c, &self.keys).await
    }

    async fn fence_raise_on(&self, c: &Client, token: &str, fence: i64) -> Result<bool> {
        scripts::fence_raise(c, &self.keys, token, fence).await
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        self.keys.iter().map(|k| wake_channel(k)).collect()
    }
}
