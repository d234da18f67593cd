//! One of a semaphore's permits, each its own lease (a Lock is a semaphore
//! of one, with its own specialised steps); in arrival order when it has a
//! `patience`.

use std::time::Duration;

use super::attempt;
use crate::error::{Error, Result};
use crate::keys::SemKeys;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Leave, Obtain, Record, Refreshed};
use crate::transport::client::Client;

#[derive(Debug, Clone)]
pub struct Permit {
    /// The semaphore's name, for the errors its steps raise.
    pub(crate) name: String,
    pub(crate) keys: SemKeys,
    pub(crate) permits: u32,
    pub(crate) patience: Option<Duration>,
}

impl Steps for Permit {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        let (fair, attempt) = (self.patience.is_some(), attempt(ask, self.patience.unwrap_or_default()));
        scripts::sem_obtain(c, &self.keys, ask.token, ttl_ms, ask.metadata, self.permits, fair, attempt)
            .await
            .map_err(|e| match e {
                Error::InvalidArgument(why) => {
                    Error::InvalidArgument(format!("semaphore {:?}: {why}", self.name))
                }
                e => e,
            })
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        let keys = [&self.keys.holders, &self.keys.data];
        scripts::lease_refresh(c, &keys, token, ttl.as_millis() as u64).await
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let held = scripts::sem_release(c, &self.keys, token, Leave::Hold).await?;
        Ok(Released { held, retried: false })
    }

    async fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> Result<()> {
        if self.patience.is_none() {
            return Ok(());
        }
        scripts::sem_release(c, &self.keys, token, Leave::ours(ours)).await.map(drop)
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        Ok(scripts::sem_inspect(c, &self.keys).await?.holders.into_iter().map(Some).collect())
    }

    fn kind(&self) -> &'static str {
        "permit"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn patience(&self) -> Option<Duration> {
        self.patience
    }
}
