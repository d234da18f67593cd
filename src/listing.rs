//! What an operator looks at: every name under the client's prefix whose
//! name matches a glob (found with SCAN, on every master of a Cluster), and
//! everything stored under one name, every kind of primitive alike
//! (`describe.lua`, told each key's role by the layout table: a kind added
//! there is listed without a change here).

use std::collections::BTreeSet;

use futures_util::StreamExt;

use crate::deployment::Deployment;
use crate::error::{Error, Result};
use crate::keys::{Glob, Kind, Role};
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
    /// The one-token hold: a Lock's holder, an RWMutex's writer, an
    /// election's leader (its value the metadata, its term the fence).
    pub holder: Option<Record>,
    /// An RWMutex's live readers.
    pub readers: Vec<Reader>,
    /// Every live hold, `holder` first, then readers and a semaphore's
    /// permit holders (earliest expiry first); metadata `None` and fence 0
    /// where the kind keeps none (a reader's).
    pub holders: Vec<Record>,
    /// How many may hold at once, where stored (a semaphore's permits).
    pub limit: Option<u64>,
    /// Live waiters in the fair queues (exclusive ones count as writers: a
    /// Lock's, a semaphore's, an election's campaigners).
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
    /// a fence behind, for a microsecond; a semaphore its count meanwhile).
    fn idle(&self) -> bool {
        self.holders.is_empty() && self.waiters() == 0
    }
}

/// One hold as `describe.lua` reports it: role, token, meta, fence, ms left.
type HoldReply = (String, String, Option<String>, i64, i64);
/// One kind as `describe.lua` reports it.
type KindReply = (String, Vec<HoldReply>, i64, i64, i64, i64);

/// The most names described at once while listing.
const CONCURRENCY: usize = 32;

impl Deployment {
    /// Every name of this client's prefix matching the glob `pattern` (`*`,
    /// `?`, `[a-z]`, a backslash escapes), held or waited for as any kind of
    /// primitive, sorted by name then kind. Found with SCAN, so the server
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

    /// Everything stored under `name`: its state as each kind of primitive,
    /// each only if held or waited for (so an empty list for a free name).
    pub async fn state_of(&self, name: &str) -> Result<Vec<State>> {
        check_name(name)?;
        let client = self.single("describe")?;
        let (keys, roles) = self.parts_of(name);
        let reply: Vec<KindReply> = scripts::by_parts(client, &keys, &roles, None).await?;
        let mut states = reply.into_iter().map(|k| state(name, k)).collect::<Result<Vec<_>>>()?;
        states.retain(|s| !s.idle());
        states.sort_by_key(|s| s.kind);
        Ok(states)
    }

    /// Every part of `name`, of every kind: the keys, and each one's
    /// '<kind> <role>' for `describe.lua` and `force_release.lua`.
    pub(crate) fn parts_of(&self, name: &str) -> (Vec<String>, Vec<String>) {
        self.keys()
            .parts(name)
            .into_iter()
            .map(|(part, key)| (key, format!("{} {}", part.kind().as_str(), part.role().as_str())))
            .unzip()
    }
}

/// The kind named `kind` in a script's reply.
pub(crate) fn kind_named(kind: &str) -> Result<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| Error::Redis(format!("unexpected reply from a script: no kind {kind:?}")))
}

fn state(
    name: &str,
    (kind, holds, queued_writers, queued_readers, limit, intent): KindReply,
) -> Result<State> {
    let mut s = State {
        name: name.to_string(),
        kind: kind_named(&kind)?,
        holder: None,
        readers: Vec::new(),
        holders: Vec::new(),
        limit: u64::try_from(limit).ok(),
        queued_readers: queued_readers.max(0) as u64,
        queued_writers: queued_writers.max(0) as u64,
        intent_pttl_ms: (intent >= 0).then_some(intent),
    };
    for (role, token, meta, fence, pttl_ms) in holds {
        let record = Record { token, metadata: meta, fence, pttl_ms };
        if role == Role::Hold.as_str() {
            s.holder = Some(record.clone());
        } else if role == Role::Readers.as_str() {
            s.readers.push(Reader { token: record.token.clone(), pttl_ms });
        }
        s.holders.push(record);
    }
    Ok(s)
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
