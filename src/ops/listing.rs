//! What an operator looks at: every name under the client's prefix (or
//! under every prefix) whose name matches a glob (found with SCAN, on every
//! master of a Cluster), and everything stored under one name, every kind of
//! primitive alike
//! (`describe.lua`, told each key's role by the layout table: a kind added
//! there is listed without a change here).

use std::collections::BTreeSet;

use futures_util::StreamExt;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::handle::lock::check_name;
use crate::handle::rwmutex::RwMutex;
use crate::keys::{Glob, KeySpace, Kind, Role};
use crate::primitive::rw;
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
    /// The key prefix it lives under (the client's own, unless listed
    /// under every prefix).
    pub prefix: String,
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
    /// Connections subscribed to its wake-ups while it is held: one per
    /// process (and client) with a waiter, however many of its threads or
    /// tasks wait; a waiter that polls is not among them.
    pub subscribed: u64,
}

impl State {
    /// How many wait, as far as Redis can tell: the live waiters of the fair
    /// queues plus a writer's intent, or, where more, the processes
    /// subscribed to the wake-ups (a non-fair primitive keeps no queue).
    pub fn waiters(&self) -> u64 {
        let queued = self.queued_readers + self.queued_writers + u64::from(self.intent_pttl_ms.is_some());
        queued.max(self.subscribed)
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
type KindReply = (String, Vec<HoldReply>, i64, i64, i64, i64, i64);

/// The most names described at once while listing.
const CONCURRENCY: usize = 32;

impl Client {
    /// Every name of this client's prefix matching the glob `pattern` (`*`,
    /// `?`, `[a-z]`, a backslash escapes), held or waited for as any kind of
    /// primitive, sorted by name then kind. Found with SCAN, so the server
    /// never blocks (names created or deleted meanwhile may or may not show).
    pub async fn scan(&self, pattern: &str) -> Result<Vec<State>> {
        let glob = checked_glob(pattern)?;
        let found = self.scan_keys(&self.keys().scan_pattern(&glob)).await?;
        let names: BTreeSet<String> = found
            .iter()
            .filter_map(|key| self.keys().parse(std::str::from_utf8(key).ok()?))
            .map(|(name, _)| name)
            .filter(|name| glob.matches(name))
            .collect();
        self.states(names.into_iter().map(|name| (self.keys().clone(), name)), false).await
    }

    /// `scan` under every prefix: each key shaped as the key layout makes
    /// them (`<prefix>{<name>}<part>`) is read back as its prefix and name;
    /// sorted by prefix, name, then kind. A name whose keys Redis refuses to
    /// read as a primitive's (another application's key of that shape, of
    /// another type, or one this user may not read) is left out.
    pub async fn scan_every_prefix(&self, pattern: &str) -> Result<Vec<State>> {
        let glob = checked_glob(pattern)?;
        let found = self.scan_keys(&KeySpace::scan_pattern_every_prefix(&glob)).await?;
        let names: BTreeSet<(String, String)> = found
            .iter()
            .filter_map(|key| KeySpace::parse_any(std::str::from_utf8(key).ok()?))
            .map(|(prefix, name, _)| (prefix, name))
            .filter(|(_, name)| glob.matches(name))
            .collect();
        self.states(names.into_iter().map(|(prefix, name)| (KeySpace::new(&prefix), name)), true).await
    }

    /// The states of `names`, each under its key space, up to `CONCURRENCY`
    /// described at once, in the order given. `skip_unreadable`: a name
    /// whose keys Redis will not read as a primitive's is left out, not an error.
    async fn states(
        &self,
        names: impl Iterator<Item = (KeySpace, String)>,
        skip_unreadable: bool,
    ) -> Result<Vec<State>> {
        let describe = |(keys, name): (KeySpace, String)| async move {
            match self.state_in(&keys, &name).await {
                Err(Error::Redis(why)) if skip_unreadable => {
                    log::debug!("not listed: {name:?} under prefix {:?} ({why})", keys.prefix());
                    Ok(Vec::new())
                }
                other => other,
            }
        };
        let described: Vec<Result<Vec<State>>> =
            futures_util::stream::iter(names.map(describe)).buffered(CONCURRENCY).collect().await;
        let mut out = Vec::new();
        for states in described {
            out.extend(states?);
        }
        Ok(out)
    }

    /// Every key matching the SCAN pattern `matching`, on one server or on
    /// every master of a Cluster.
    async fn scan_keys(&self, matching: &str) -> Result<Vec<Vec<u8>>> {
        let client = self.single("scan (listing locks)")?;
        client
            .call(|mut c| {
                let matching = matching.to_string();
                async move { c.scan_match(&matching).await }
            })
            .await
    }

    /// Everything stored under `name`: its state as each kind of primitive,
    /// each only if held or waited for (so an empty list for a free name).
    pub async fn state_of(&self, name: &str) -> Result<Vec<State>> {
        self.state_in(self.keys(), name).await
    }

    /// `state_of` for `name` under the prefix of `keys`.
    async fn state_in(&self, keys: &KeySpace, name: &str) -> Result<Vec<State>> {
        check_name(name)?;
        let client = self.single("describe")?;
        let (parts, roles) = parts_in(keys, name);
        let reply: Vec<KindReply> = scripts::by_parts(client, &parts, &roles, None).await?;
        let prefix = keys.prefix();
        let mut states = reply.into_iter().map(|k| state(&prefix, name, k)).collect::<Result<Vec<_>>>()?;
        states.retain(|s| !s.idle());
        states.sort_by_key(|s| s.kind);
        Ok(states)
    }

    /// Every part of `name`, of every kind: the keys, and each one's
    /// '<kind> <role>' for `describe.lua` and `force_release.lua`.
    pub(crate) fn parts_of(&self, name: &str) -> (Vec<String>, Vec<String>) {
        parts_in(self.keys(), name)
    }
}

/// `parts_of` under the prefix of `keys`.
fn parts_in(keys: &KeySpace, name: &str) -> (Vec<String>, Vec<String>) {
    keys.parts(name)
        .into_iter()
        .map(|(part, key)| (key, format!("{} {}", part.kind().as_str(), part.role().as_str())))
        .unzip()
}

/// A listing's name pattern, refused when empty.
fn checked_glob(pattern: &str) -> Result<Glob> {
    if pattern.is_empty() {
        return Err(Error::InvalidArgument("the name pattern is empty; use \"*\" to list every name".into()));
    }
    Ok(Glob::new(pattern))
}

/// The kind named `kind` in a script's reply.
pub(crate) fn kind_named(kind: &str) -> Result<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| Error::Redis(format!("unexpected reply from a script: no kind {kind:?}")))
}

fn state(
    prefix: &str,
    name: &str,
    (kind, holds, queued_writers, queued_readers, limit, intent, subscribed): KindReply,
) -> Result<State> {
    let mut s = State {
        prefix: prefix.to_string(),
        name: name.to_string(),
        kind: kind_named(&kind)?,
        holder: None,
        readers: Vec::new(),
        holders: Vec::new(),
        limit: u64::try_from(limit).ok(),
        queued_readers: queued_readers.max(0) as u64,
        queued_writers: queued_writers.max(0) as u64,
        intent_pttl_ms: (intent >= 0).then_some(intent),
        subscribed: subscribed.max(0) as u64,
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
        token.map_or(Ok(()), crate::support::token::check_token)?;
        rw::force_release(client, self.keys(), token.unwrap_or("")).await
    }
}
