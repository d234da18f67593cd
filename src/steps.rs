//! The atomic steps of a primitive on one server. A primitive says what each
//! step sends to one server; `Deployment` runs it there, or on every master
//! of a quorum and decides by a majority (`quorum.rs`).

use std::future::Future;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::scripts::{Obtain, Record};

/// One attempt to take a hold, number `attempt` of its acquire. A writer
/// that `will_wait` leaves its intent when readers hold (writer preference);
/// a one-shot attempt (try_write) never does; a fair waiter that will wait
/// queues. `metadata`: `None` keeps what a re-entered hold has stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Obtaining<'a> {
    pub token: &'a str,
    pub ttl: Duration,
    pub metadata: Option<&'a str>,
    pub will_wait: bool,
    pub attempt: u64,
}

/// What a release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    /// The token still held (and holds no more).
    pub held: bool,
    /// It was sent twice (the connection dropped): if the second found
    /// nothing, the first may have released it.
    pub retried: bool,
}

/// A primitive's steps on one server.
pub(crate) trait Steps: Sync {
    /// One attempt; `quorum`: that server is a quorum's master (a new
    /// hold's fence is also above the fence records a raise left).
    fn obtain_on(
        &self,
        c: &Client,
        ask: &Obtaining<'_>,
        quorum: bool,
    ) -> impl Future<Output = Result<Obtain>> + Send;

    /// Whether `token` still held, and now holds for `ttl` more.
    fn refresh_on(&self, c: &Client, token: &str, ttl: Duration)
        -> impl Future<Output = Result<bool>> + Send;

    /// Releases `token`'s hold (a fair one goes to the next in line).
    fn release_on(&self, c: &Client, token: &str) -> impl Future<Output = Result<Released>> + Send;

    /// Takes back what waiting left: a writer's intent, a place in a fair
    /// queue (and, when `ours`, a grant that reached it meanwhile).
    fn withdraw_on(&self, c: &Client, token: &str, ours: bool) -> impl Future<Output = Result<()>> + Send;

    /// The exclusive holder of each key (for either side of an RWMutex: its writer).
    fn inspect_on(&self, c: &Client) -> impl Future<Output = Result<Vec<Option<Record>>>> + Send;

    /// A quorum's hold settles its fence: on this master, `token`'s hold
    /// gets at least `fence`. False when it no longer holds here.
    fn fence_raise_on(
        &self,
        c: &Client,
        token: &str,
        fence: i64,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Whether a hold gets a fence (readers exclude nobody but writers: none).
    fn fenced(&self) -> bool;

    /// Whether an acquire that had to wait left something to undo.
    fn leaves_intent(&self) -> bool;
}
