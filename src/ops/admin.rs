//! What a client does to a name, whoever holds it (outside `client.rs`,
//! which the scripts build on): an operator's look and recovery.

use crate::client::Client;
use crate::error::Result;
use crate::keys::Kind;
use crate::ops::listing::kind_named;
use crate::primitive::{exclusive, Mode};
use crate::scripts::{self, Record, Whose};
use crate::support::token::check_token;

impl Client {
    /// Ends the holds of `name` whoever holds them, as every kind of
    /// primitive (a Lock's hold, an RWMutex's writer and readers, a
    /// semaphore's permits, an election's term, which deposes its leader);
    /// with `token`, only that holder's hold (compare-and-delete: `false`
    /// when another holds it, or nobody). Waiters are woken and an
    /// election's watchers told, as by a release. On a quorum (Locks only),
    /// every master's copy goes (of `token`'s hold only, when given), a
    /// minority's leftover too.
    pub async fn force_release(&self, name: &str, token: Option<&str>) -> Result<bool> {
        Ok(self.force_release_kinds(name, token).await?.iter().any(|(_, n)| *n > 0))
    }

    /// `force_release`, telling how many holds of each kind went.
    pub async fn force_release_kinds(&self, name: &str, token: Option<&str>) -> Result<Vec<(Kind, u64)>> {
        token.map_or(Ok(()), check_token)?;
        crate::handle::lock::check_name(name)?;
        if let Some(client) = self.one() {
            let (keys, roles) = self.parts_of(name);
            let removed: Vec<(String, i64)> =
                scripts::by_parts(client, &keys, &roles, Some(token.unwrap_or(""))).await?;
            return removed.into_iter().map(|(kind, n)| Ok((kind_named(&kind)?, n.max(0) as u64))).collect();
        }
        let keys = &[self.keys().lock(name)];
        let (token, force) = token.map_or(("", Whose::Anyone), |t| (t, Whose::Own));
        let release = |c| async move { Ok(exclusive::release(c, keys, token, force, "").await?.0 > 0) };
        let released = self.any("force_release", release).await?;
        Ok(vec![(Kind::Lock, u64::from(released))])
    }

    /// Who holds `name` as a Lock, or `None` when it is free (on a quorum:
    /// the token a majority of masters name). On one server, a name not
    /// held as a Lock gives its first hold as another kind (an RWMutex's
    /// writer or reader, a semaphore's permit, an election's leader): see
    /// `state_of` for every one. One round trip either way: on one server
    /// `describe.lua` reads every kind at once, the Lock first.
    pub async fn inspect(&self, name: &str) -> Result<Option<Record>> {
        if self.one().is_some() {
            return Ok(self.state_of(name).await?.into_iter().find_map(|s| s.holders.into_iter().next()));
        }
        let keys: std::sync::Arc<[String]> = std::sync::Arc::from([self.keys().lock(name)]);
        Ok(self.holders(&Mode::exclusive(keys)).await?.pop().flatten())
    }
}
