//! What a client does to a lock by name, whoever holds it (outside
//! `client.rs`, which the scripts build on).

use crate::client::Client;
use crate::error::Result;
use crate::mode::Mode;
use crate::scripts::{self, Record};

impl Client {
    /// Deletes the lock `name` whoever holds it.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        let keys = &[self.keys().lock(name)];
        let release = |c| async move { Ok(scripts::release(c, keys, "", true, "").await? > 0) };
        match self.quorum() {
            // Every master's copy goes, a minority's leftover too.
            Some(q) => q.any("force_release", release).await,
            None => release(self).await,
        }
    }

    /// Who holds `name`, or `None` when it is free (on a quorum: the token a
    /// majority of masters name).
    pub async fn inspect(&self, name: &str) -> Result<Option<Record>> {
        let keys: std::sync::Arc<[String]> = std::sync::Arc::from([self.keys().lock(name)]);
        Ok(Mode::Exclusive(keys).inspect(self).await?.pop().flatten())
    }
}
