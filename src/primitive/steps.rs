//! The atomic steps of a primitive on one server. A primitive says what each
//! step sends to one server; `Client` runs it there, or on every master
//! of a quorum and decides by a majority (`crate::quorum`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::scripts::{Obtain, Record, Refreshed};
use crate::transport::backend::Backend;

/// One attempt to take a hold, number `attempt` of its acquire. A writer
/// that `will_wait` leaves its intent when readers hold (writer preference);
/// a one-shot attempt (try_write) never does; a fair waiter that will wait
/// queues. `metadata`: `None` keeps what a re-entered hold has stored.
/// `from`: a token whose hold this attempt takes over, as if it were
/// `token`'s, re-keyed to `token` (`Lock::take_over`: an exclusive hold only,
/// the other primitives never get one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Obtaining<'a> {
    pub token: &'a str,
    pub ttl: Duration,
    pub metadata: Option<&'a str>,
    pub will_wait: bool,
    pub attempt: u64,
    pub from: Option<&'a str>,
}

/// Whose hold a renewal or a release is for: the owner's token; its fence
/// (recorded in a hold taken without one: `exclusive::take_free`); and,
/// while nobody but the owner has written the hold, its value exactly as
/// the owner wrote it (a take by the transaction, renewals that compared
/// it: `Refreshed::written`), for a step that compares it in one command
/// rather than read it in a script. The token is shared, so that a
/// renewal gathered with others (`Backend::renew`) carries it uncopied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holder<'a> {
    pub token: &'a Arc<str>,
    pub fence: Option<i64>,
    pub written: Option<&'a Arc<str>>,
}

impl<'a> Holder<'a> {
    /// `token`'s hold, nothing more known of it (an undo, an operator's step).
    pub(crate) fn of(token: &'a Arc<str>) -> Holder<'a> {
        Holder { token, fence: None, written: None }
    }
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
    /// hold's fence is also above the fence records a raise left). A grant
    /// carries the replicas' shortfall, when too few acknowledged it.
    fn obtain_on(
        &self,
        c: &Backend,
        ask: &Obtaining<'_>,
        quorum: bool,
    ) -> impl Future<Output = Result<Obtain>> + Send;

    /// Whether `holder` still held, and now holds for `ttl` more (with the
    /// replicas' shortfall, when too few acknowledged it).
    fn refresh_on(
        &self,
        c: &Backend,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> impl Future<Output = Result<Refreshed>> + Send;

    /// `refresh_on`, as the watchdog sends it: in one call with the other
    /// renewals of holds of its shape that fall due with it on `c`
    /// (`Backend::renew`). A primitive whose holds are not batched (a plain
    /// string hold) sends its own step.
    fn renew_on(
        &self,
        c: &Backend,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> impl Future<Output = Result<Refreshed>> + Send {
        self.refresh_on(c, holder, ttl)
    }

    /// Releases `holder`'s hold (a fair one goes to the next in line).
    fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> impl Future<Output = Result<Released>> + Send;

    /// Takes back what waiting left: a writer's intent, a place in a fair
    /// queue (and, when `ours`, a grant that reached it meanwhile). A
    /// waiter of a primitive that leaves nothing has nothing to take back.
    fn withdraw_on(&self, c: &Backend, token: &str, ours: bool) -> impl Future<Output = Result<()>> + Send {
        let _ = (c, token, ours);
        std::future::ready(Ok(()))
    }

    /// The exclusive holder of each key (for either side of an RWMutex: its writer).
    fn inspect_on(&self, c: &Backend) -> impl Future<Output = Result<Vec<Option<Record>>>> + Send;

    /// A quorum's hold settles its fence: on this master, `token`'s hold
    /// gets at least `fence`. False when it no longer holds here. Nothing
    /// to raise for a primitive whose holds a quorum does not fence.
    fn fence_raise_on(
        &self,
        c: &Backend,
        token: &str,
        fence: i64,
    ) -> impl Future<Output = Result<bool>> + Send {
        let _ = (c, token, fence);
        std::future::ready(Ok(true))
    }

    /// `"lock"`, `"read"`, `"write"` or `"permit"`.
    fn kind(&self) -> &'static str;

    /// The channels on which a release that may let this handle in is announced.
    fn channels(&self) -> Vec<String>;

    /// Whether a release is announced at all (else a waiter polls).
    fn wakes(&self) -> bool {
        true
    }

    /// Fair primitives: how long a hold handed to a waiter stays its own
    /// unclaimed, and how long a waiter that stops re-asserting itself keeps its place.
    fn patience(&self) -> Option<Duration> {
        None
    }

    /// The longest pause between a waiter's attempts that keeps its intent
    /// or its place in the queue alive.
    fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        let _ = ttl;
        self.patience().map(|p| p / 3)
    }

    /// Whether a hold is shared (a reader's).
    fn is_reader(&self) -> bool {
        false
    }

    /// Whether a hold gets a fence (readers exclude nobody but writers: none).
    fn fenced(&self) -> bool {
        true
    }

    /// Whether an acquire that had to wait left something to undo (a
    /// writer's intent, a place in a fair queue).
    fn leaves_intent(&self) -> bool {
        self.keep_alive(Duration::MAX).is_some()
    }
}
