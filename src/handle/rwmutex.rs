//! The read/write mutex: any number of readers together, or one writer.
//! Its handles are ordinary `Lock`s taking a read or write `Mode`, so
//! waiting, the watchdog, loss reporting and cancellation are the Lock's.

use crate::client::Client;
use crate::error::Result;
use crate::handle::lock::{check_name, validate, Lock, LockOptions};
use crate::primitive::rw::{self, RwKeys};
use crate::primitive::{patience, Mode, RwOrder};

#[derive(Debug, Clone)]
pub struct RwMutex {
    client: Client,
    name: String,
    keys: RwKeys,
    writer_preference: bool,
    fair: bool,
}

impl RwMutex {
    /// With `writer_preference`, a waiting writer holds new readers back, so
    /// a stream of readers cannot starve it; without, readers always join.
    pub fn new(client: Client, name: String, writer_preference: bool) -> Result<RwMutex> {
        Self::build(client, name, writer_preference, false)
    }

    /// Readers and writers take turns in arrival order, across processes: a
    /// release lets in the next writer, or every reader queued before it.
    pub fn new_fair(client: Client, name: String) -> Result<RwMutex> {
        Self::build(client, name, true, true)
    }

    fn build(client: Client, name: String, writer_preference: bool, fair: bool) -> Result<RwMutex> {
        check_name(&name)?;
        if fair {
            client.single("a fair RWMutex")?;
        }
        let keys = client.keys().rw(&name);
        Ok(RwMutex { client, name, keys, writer_preference, fair })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn writer_preference(&self) -> bool {
        self.writer_preference
    }

    pub fn fair(&self) -> bool {
        self.fair
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn keys(&self) -> &RwKeys {
        &self.keys
    }

    /// A handle that shares the mutex with other readers.
    pub fn read(&self, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        self.handle(false, opts, token)
    }

    /// A handle that excludes readers and other writers.
    pub fn write(&self, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        self.handle(true, opts, token)
    }

    fn handle(&self, write: bool, opts: LockOptions, token: Option<String>) -> Result<Lock> {
        let names = vec![self.name.clone()];
        validate(&names, &opts, token.as_deref())?;
        let order = if self.fair {
            RwOrder::Fair { patience: patience(opts.ttl) }
        } else {
            RwOrder::Preference(self.writer_preference)
        };
        let keys = self.keys.clone();
        let mode = Mode::rw(keys, order, write);
        Ok(Lock::with_mode(self.client.clone(), names, mode, opts, token))
    }

    /// Live readers now (each reader counts until its own expiry).
    pub async fn readers(&self) -> Result<u64> {
        let count = |c| async move { Ok(rw::inspect(c, &self.keys, "").await?.readers) };
        let readers = self.client.majority_value("counting readers", count).await?;
        Ok(readers.max(0) as u64)
    }

    /// Held by a writer or by any live reader.
    pub async fn locked(&self) -> Result<bool> {
        Mode::rw(self.keys.clone(), RwOrder::Preference(self.writer_preference), false)
            .locked(&self.client)
            .await
    }
}
