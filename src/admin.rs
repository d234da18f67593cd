//! What a client does to a lock by name, whoever holds it.

use crate::deployment::Deployment;
use crate::error::Result;
use crate::mode::Mode;
use crate::scripts::{self, Record};
use crate::token::check_token;

impl Deployment {
    /// Deletes the lock `name` whoever holds it; with `token`, only that
    /// holder's hold (compare-and-delete: `false` when another holds it, or
    /// nobody). On a quorum, every master's copy goes (of `token`'s hold
    /// only, when given), a minority's leftover too.
    pub async fn force_release(&self, name: &str, token: Option<&str>) -> Result<bool> {
        token.map_or(Ok(()), check_token)?;
        let keys = &[self.keys().lock(name)];
        let (token, force) = token.map_or(("", true), |t| (t, false));
        let release = |c| async move { Ok(scripts::release(c, keys, token, force, "").await? > 0) };
        self.any("force_release", release).await
    }

    /// Who holds `name`, or `None` when it is free (on a quorum: the token a
    /// majority of masters name).
    pub async fn inspect(&self, name: &str) -> Result<Option<Record>> {
        let keys: std::sync::Arc<[String]> = std::sync::Arc::from([self.keys().lock(name)]);
        Ok(self.holders(&Mode::exclusive(keys)).await?.pop().flatten())
    }
}
