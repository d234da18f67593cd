//! An election's term: a fair Lock of its own under the name's `:el` keys
//! (its steps are `fair`'s), announcing its changes on its watch channel;
//! and the leader's proclaim, which publishes a new value in its term.

use super::fair::FairKeys;
use crate::error::Result;
use crate::keys::{KeySpace, Part};
use crate::scripts::{run, step, Argv, Lua};
use crate::transport::backend::Backend;

step! {
    EL_PROCLAIM = "el_proclaim.lua",
    struct ElProclaimArgv<'a> {
        token: &'a str,
        value: &'a str,
        announce: &'a str,
    }
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 1] = [&EL_PROCLAIM];

impl KeySpace {
    /// An election's term is a fair Lock of its own under the name's tag,
    /// announcing its changes on its watch channel.
    pub fn election(&self, name: &str) -> FairKeys {
        let part = |p| self.part(name, p);
        FairKeys {
            lock: part(Part::ElTerm),
            queue: part(Part::ElQueue),
            alive: part(Part::ElAlive),
            tags: part(Part::ElTags),
            channel: part(Part::ElWake),
            announce: part(Part::ElWatch),
        }
    }
}

/// The leader `token` of an election publishes `value`; false when it no
/// longer leads.
pub(crate) async fn proclaim(client: &Backend, k: &FairKeys, token: &str, value: &str) -> Result<bool> {
    let done: i64 =
        run(client, ElProclaimArgv { token, value, announce: &k.announce }.on(client).key(&k.lock)).await?;
    Ok(done == 1)
}
