//! What an operator looks at: every lock and RWMutex whose name matches a
//! glob (found with SCAN under the client's prefix, on every master of a
//! Cluster), and everything stored under one name (`describe.lua`).

use std::collections::BTreeSet;

use futures_util::StreamExt;

use crate::deployment::Deployment;
use crate::error::{Error, Result};
use crate::keys::{Glob, Kind};
use crate::lock::check_name;
use crate::rwmutex::RwMutex;
use crate::scripts::{self, Record};

/// One reader of an RWMutex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub token: String,
    /// Milliseconds before this reader expires.
    pub pttl_ms: i64,
}

/// One name used as one kind of primitive, as Redis holds it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub name: String,
    pub kind: Kind,
    /// A Lock's holder, or an RWMutex's writer.
    pub holder: Option<Record>,
    /// An RWMutex's live readers.
    pub readers: Vec<Reader>,
    /// Live waiters in the fair queues (a Lock's are all writers).
    pub queued_readers: u64,
    pub queued_writers: u64,
    /// Milliseconds left on a waiting writer's intent (writer preference).
    pub intent_pttl_ms: Option<i64>,
}

impl State {
    /// Waiters in Redis: fair queues, and a writer's intent.
    pub fn waiters(&self) -> u64 {
        self.queued_readers + self.queued_writers + u64::from(self.intent_pttl_ms.is_some())
    }

    /// Nobody holds it and nobody waits in Redis (a free lock leaves at most
    /// a fence behind, for a microsecond).
    fn idle(&self) -> bool {
        self.holder.is_none() && self.readers.is_empty() && self.waiters() == 0
    }
}

/// The most names described at once while listing.
const CONCURRENCY: usize = 32;

impl Deployment {
    /// Every lock and RWMutex of this client's prefix whose name matches the
    /// glob `pattern` (`*`, `?`, `[a-z]`, a backslash escapes), held or
    /// waited for, sorted by name then kind. Found with SCAN, so the server
    /// never blocks (names created or deleted meanwhile may or may not show).
    pub async fn scan(&self, pattern: &str) -> Result<Vec<State>> {
        let client = self.single("scan (listing locks)")?;
        if pattern.is_empty() {
            return Err(Error::InvalidArgument(
                "the name pattern is empty; use \"*\" to list every name".into(),
            ));
        }
        let glob = Glob::new(pattern);
        let matching = self.keys().scan_pattern(&glob);
        let found = client
            .call(|mut c| {
                let matching = matching.clone();
                async move { c.scan_match(&matching).await }
            })
            .await?;
        let names: BTreeSet<String> = found
            .iter()
            .filter_map(|key| self.keys().parse(std::str::from_utf8(key).ok()?))
            .map(|(name, _)| name)
            .filter(|name| glob.matches(name))
            .collect();
        let describe = |name: String| async move { self.state_of(&name).await };
        let described: Vec<Result<Vec<State>>> =
            futures_util::stream::iter(names.into_iter().map(describe)).buffered(CONCURRENCY).collect().await;
        let mut out = Vec::new();
        for states in described {
            out.extend(states?);
        }
        Ok(out)
    }

    /// Everything stored under `name`: its state as a Lock and as an RWMutex,
    /// each only if held or waited for (so an empty list for a free name).
    pub async fn state_of(&self, name: &str) -> Result<Vec<State>> {
        check_name(name)?;
        let client = self.single("describe")?;
        let (lock, rw) = (self.keys().fair(name), self.keys().rw(name));
        let d = scripts::describe(client, &lock, &rw).await?;
        let lock = State {
            name: name.to_string(),
            kind: Kind::Lock,
            holder: d.holder,
            readers: Vec::new(),
            queued_readers: 0,
            queued_writers: d.waiters,
            intent_pttl_ms: None,
        };
        let rw = State {
            name: name.to_string(),
            kind: Kind::RwMutex,
            holder: d.writer,
            readers: d.readers.into_iter().map(|(token, pttl_ms)| Reader { token, pttl_ms }).collect(),
            queued_readers: d.queued_readers,
            queued_writers: d.queued_writers,
            intent_pttl_ms: (d.intent_pttl_ms >= 0).then_some(d.intent_pttl_ms),
        };
        Ok([lock, rw].into_iter().filter(|s| !s.idle()).collect())
    }
}

impl RwMutex {
    /// Ends every hold of this mutex, whoever holds it (an operator's
    /// recovery: the holders learn at their next renewal that they lost it);
    /// with `token`, only that writer's hold or that reader's lease.
    /// Returns whether a writer held, and how many live readers were removed.
    pub async fn force_release(&self, token: Option<&str>) -> Result<(bool, u64)> {
        let client = self.client().single("RWMutex.force_release")?;
        token.map_or(Ok(()), crate::token::check_token)?;
        scripts::rw_force_release(client, self.keys(), token.unwrap_or("")).await
    }
}
