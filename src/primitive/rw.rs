//! The two sides of an RWMutex whose readers join whenever no writer holds
//! (with writer preference, a waiting writer holds new readers back).

use std::time::Duration;

use super::attempt;
use crate::error::Result;
use crate::keys::RwKeys;
use crate::scripts::steps::{Obtaining, Released, Steps};
use crate::scripts::{self, Obtain, Record, Refreshed, Whose};
use crate::transport::client::Client;

/// A shared hold among the readers, each with its own expiry.
#[derive(Debug, Clone)]
pub struct Read {
    pub(crate) keys: RwKeys,
    pub(crate) writer_preference: bool,
}

/// The exclusive side.
#[derive(Debug, Clone)]
pub struct Write {
    pub(crate) keys: RwKeys,
    pub(crate) writer_preference: bool,
}

impl Steps for Read {
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, _quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        scripts::rw_read(c, &self.keys, ask.token, ttl_ms, self.writer_preference, ask.will_wait).await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        scripts::lease_refresh(c, &[&self.keys.readers], token, ttl.as_millis() as u64).await
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let held = scripts::rw_read_release(c, &self.keys, token).await?;
        Ok(Released { held, retried: false })
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        scripts::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    fn kind(&self) -> &'static str {
        "read"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    fn is_reader(&self) -> bool {
        true
    }

    /// Readers get no fence: they exclude nobody but writers.
    fn fenced(&self) -> bool {
        false
    }
}

impl Steps for Write {
    /// A writer that will wait leaves its intent when readers hold (writer
    /// preference); a one-shot attempt (try_write) never does.
    async fn obtain_on(&self, c: &Client, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        let ttl_ms = ask.ttl.as_millis() as u64;
        let writer_preference = self.writer_preference && ask.will_wait;
        let attempt = attempt(ask, Duration::ZERO);
        scripts::rw_write(c, &self.keys, ask.token, ttl_ms, ask.metadata, writer_preference, quorum, attempt)
            .await
    }

    async fn refresh_on(&self, c: &Client, token: &str, ttl: Duration) -> Result<Refreshed> {
        scripts::refresh(c, std::slice::from_ref(&self.keys.writer), token, ttl.as_millis() as u64).await
    }

    async fn release_on(&self, c: &Client, token: &str) -> Result<Released> {
        let writer = std::slice::from_ref(&self.keys.writer);
        let (n, retried) =
            scripts::release_noting_retry(c, writer, token, Whose::Own, &self.keys.channel).await?;
        Ok(Released { held: n > 0, retried })
    }

    async fn withdraw_on(&self, c: &Client, token: &str, _ours: bool) -> Result<()> {
        if !self.writer_preference {
            return Ok(());
        }
        scripts::rw_withdraw(c, &self.keys, token).await
    }

    async fn inspect_on(&self, c: &Client) -> Result<Vec<Option<Record>>> {
        scripts::inspect(c, std::slice::from_ref(&self.keys.writer)).await
    }

    async fn fence_raise_on(&self, c: &Client, token: &str, fence: i64) -> Result<bool> {
        scripts::fence_raise(c, std::slice::from_ref(&self.keys.writer), token, fence).await
    }

    fn kind(&self) -> &'static str {
        "write"
    }

    fn channels(&self) -> Vec<String> {
        vec![self.keys.channel.clone()]
    }

    /// A writer's intent lives for its ttl: renewed by each attempt.
    fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        self.writer_preference.then(|| ttl / 3)
    }
}
