//! What a client does to a lock by name, whoever holds it (outside
//! `client.rs`, which the scripts build on).

use crate::client::Client;
use crate::error::Result;
use crate::scripts::{self, Record};

impl Client {
    /// Deletes the lock `name` whoever holds it.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        let keys = [self.keys().lock(name)];
        Ok(scripts::release(self, &keys, "", true, "").await? > 0)
    }

    /// Who holds `name`, or `None` when it is free.
    pub async fn inspect(&self, name: &str) -> Result<Option<Record>> {
        let keys = [self.keys().lock(name)];
        Ok(scripts::inspect(self, &keys).await?.pop().flatten())
    }
}
