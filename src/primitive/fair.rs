//! A lock on one name taken in arrival order: a release hands it to the
//! next waiter.

use std::time::Duration;

use super::attempt;
use crate::error::Result;
use crate::keys::FairKeys;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Leave, Obtain, Record, Refreshed};
use crate::transport::client::Client;

/// `patience`: how long a waiter that stops re-asserting itself keeps its place.
#[derive(Debug, Clone)]
pub struct Fair {
    pub(crate) keys: FairKeys,
    pub(crate) patience: Duration,
}

impl Steps for Fair {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        scripts::fair_obtain(c, &self.keys, ask.token, ttl_ms, ask.metadata, attempt(ask, self.patience))
            .await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        scripts::refresh(c, std::slice::from_ref(&self.keys.lock), token, ttl.as_millis() as u64).await
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let held = scripts::fair_release(c, &self.keys, token, Leave::Hold).await?;
        Ok(Released { held, retried: false })
    }

    async fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> Result<()> {
        scripts::fair_release(c, &self.keys, token, Leave::ours(ours)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        scripts::inspect(c, std::slice::from_ref(&self.keys.lock)).await
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        Some(self.patience)
    }
}
