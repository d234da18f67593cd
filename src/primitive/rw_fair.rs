//! Either side of a fair RWMutex: readers and writers in arrival order, a
//! release letting in the next writer, or every reader queued before it.

use std::time::Duration;

use super::attempt;
use crate::error::Result;
use crate::keys::RwKeys;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Leave, Obtain, Record, Refreshed, Side};
use crate::transport::client::Client;

#[derive(Debug, Clone)]
pub struct FairRw {
    pub(crate) keys: RwKeys,
    pub(crate) patience: Duration,
    /// The exclusive side (else a reader).
    pub(crate) writer: bool,
}

impl FairRw {
    fn side(&self) -> Side {
        if self.writer {
            Side::Write
        } else {
            Side::Read
        }
    }
}

impl Steps for FairRw {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        let metadata = self.writer.then_some(ask.metadata);
        scripts::rw_fair_obtain(c, &self.keys, ask.token, ttl_ms, metadata, attempt(ask, self.patience)).await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        let ttl_ms = ttl.as_millis() as u64;
        if self.writer {
            scripts::refresh(c, std::slice::from_ref(&self.keys.writer), token, ttl_ms).await
        } else {
            scripts::lease_refresh(c, &[&self.keys.readers], token, ttl_ms).await
        }
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let held = scripts::rw_fair_release(c, &self.keys, token, self.side(), Leave::Hold).await?;
        Ok(Released { held, retried: false })
    }

    async fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> Result<()> {
        scripts::rw_fair_release(c, &self.keys, token, self.side(), Leave::ours(ours)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        scripts::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    async fn fence_raise_on(&self, c: &Client, token: &str, fence: i64) -> Result<bool> {
        if !self.writer {
            return Ok(true);
        }
        scripts::fence_raise(c, std::slice::from_ref(&self.keys.writer), token, fence).await
    }

    fn kind(&self) -> &'static str {
        if self.writer {
            "write"
        } else {
            "read"
        }
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        Some(self.patience)
    }

    fn is_reader(&self) -> bool {
        !self.writer
    }

    /// Readers get no fence: they exclude nobody but writers.
    fn fenced(&self) -> bool {
        self.writer
    }
}
