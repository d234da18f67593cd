//! What a handle takes: an exclusive hold on one or more names, a fair
//! lock, one side of an RWMutex (plain or fair), a semaphore's permit, or a
//! plain string hold shared with redis-py's and python-redis-lock's locks.
//! `Lock` (waiting, holding, the watchdog, cancellation) is the same for
//! all; each primitive's atomic steps are its own (`Steps`), in one file
//! with its keys, its scripts (`step!`) and their typed arguments:
//! `exclusive` (with the steps on a Lock's hash the others share), `fair`,
//! `election` (a fair Lock's term and its proclaim), `rw` (with what both
//! orders of an RWMutex share), `rw_fair`, `semaphore` and `plain`.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::scripts::{self, Attempt, Lua, Obtain, Record, Refreshed};
use crate::transport::backend::Backend;

pub(crate) mod compared;
pub(crate) mod election;
pub(crate) mod exclusive;
pub(crate) mod fair;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod plain;
pub(crate) mod rw;
pub(crate) mod rw_fair;
pub(crate) mod semaphore;
pub(crate) mod steps;
pub(crate) mod transaction;

pub(crate) use exclusive::Exclusive;
pub(crate) use fair::{Fair, FairKeys};
pub(crate) use plain::Plain;
pub(crate) use rw::{Read, RwKeys, Write};
pub(crate) use rw_fair::FairRw;
pub(crate) use semaphore::{Permit, SemKeys};
use steps::{Holder, Obtaining, Released, Steps};

#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// One hash per name, all taken or none.
    Exclusive(Exclusive),
    /// One name, taken in arrival order; a release hands it to the next waiter.
    Fair(Fair),
    /// A shared hold among the readers of an RWMutex, each with its own expiry.
    Read(Read),
    /// The exclusive side of an RWMutex.
    Write(Write),
    /// Either side of a fair RWMutex.
    FairRw(FairRw),
    /// One of a semaphore's permits.
    Permit(Permit),
    /// A plain string key holding the owner's token (redis-py's and
    /// python-redis-lock's layout).
    Plain(Plain),
    /// Steps answered as a unit test scripts them, on no server.
    #[cfg(test)]
    Fake(fake::Fake),
}

/// Who goes first at an RWMutex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RwOrder {
    /// Readers join whenever no writer holds; with writer preference, a
    /// waiting writer holds new readers back.
    Preference(bool),
    /// Readers and writers in arrival order, as in `Mode::Fair`: a release
    /// lets in the next writer, or every reader queued before it.
    Fair { patience: Duration },
}

/// How long a fair waiter that stops re-asserting itself keeps its place,
/// and how long a lock handed to it stays its own before it renews: its own
/// ttl, at most 2 s. Each waiter's is stored with it in Redis, so a hand-over
/// lasts as long as the waiter it goes to expects, whoever releases.
pub(crate) fn patience(ttl: Duration) -> Duration {
    ttl.min(Duration::from_secs(2))
}

/// A fair attempt as its script takes it.
fn attempt(ask: &Obtaining<'_>, patience: Duration) -> Attempt {
    Attempt { number: ask.attempt, patience_ms: patience.as_millis() as u64, will_wait: ask.will_wait }
}

impl Mode {
    /// One hold on every name of `keys`.
    pub(crate) fn exclusive(keys: Arc<[String]>) -> Mode {
        Mode::Exclusive(Exclusive { keys })
    }

    pub(crate) fn fair(keys: FairKeys, patience: Duration) -> Mode {
        Mode::Fair(Fair { keys, patience })
    }

    /// One side (`writer`, or a reader) of an RWMutex ordered by `order`.
    pub(crate) fn rw(keys: RwKeys, order: RwOrder, writer: bool) -> Mode {
        match order {
            RwOrder::Preference(writer_preference) if writer => {
                Mode::Write(Write { keys, writer_preference })
            }
            RwOrder::Preference(writer_preference) => Mode::Read(Read { keys, writer_preference }),
            RwOrder::Fair { patience } => Mode::FairRw(FairRw { keys, patience, writer }),
        }
    }

    pub(crate) fn permit(name: String, keys: SemKeys, permits: u32, patience: Option<Duration>) -> Mode {
        Mode::Permit(Permit { name, keys, permits, patience })
    }
}

/// Runs `$call` on the primitive inside a `Mode`.
macro_rules! on_primitive {
    ($mode:expr, $p:ident => $call:expr) => {
        match $mode {
            Mode::Exclusive($p) => $call,
            Mode::Fair($p) => $call,
            Mode::Read($p) => $call,
            Mode::Write($p) => $call,
            Mode::FairRw($p) => $call,
            Mode::Permit($p) => $call,
            Mode::Plain($p) => $call,
            #[cfg(test)]
            Mode::Fake($p) => $call,
        }
    };
}

impl Steps for Mode {
    async fn obtain_on(&self, c: &Backend, ask: &Obtaining<'_>, quorum: bool) -> Result<Obtain> {
        on_primitive!(self, p => p.obtain_on(c, ask, quorum).await)
    }

    async fn refresh_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        on_primitive!(self, p => p.refresh_on(c, holder, ttl).await)
    }

    async fn renew_on(&self, c: &Backend, holder: &Holder<'_>, ttl: Duration) -> Result<Refreshed> {
        on_primitive!(self, p => p.renew_on(c, holder, ttl).await)
    }

    async fn release_on(&self, c: &Backend, holder: &Holder<'_>) -> Result<Released> {
        on_primitive!(self, p => p.release_on(c, holder).await)
    }

    async fn withdraw_on(&self, c: &Backend, token: &str, ours: bool) -> Result<()> {
        on_primitive!(self, p => p.withdraw_on(c, token, ours).await)
    }

    async fn inspect_on(&self, c: &Backend) -> Result<Vec<Option<Record>>> {
        on_primitive!(self, p => p.inspect_on(c).await)
    }

    async fn fence_raise_on(&self, c: &Backend, token: &str, fence: i64) -> Result<bool> {
        on_primitive!(self, p => p.fence_raise_on(c, token, fence).await)
    }

    fn kind(&self) -> &'static str {
        on_primitive!(self, p => p.kind())
    }

    fn channels(&self) -> Vec<String> {
        on_primitive!(self, p => p.channels())
    }

    fn wakes(&self) -> bool {
        on_primitive!(self, p => p.wakes())
    }

    fn patience(&self) -> Option<Duration> {
        on_primitive!(self, p => p.patience())
    }

    fn keep_alive(&self, ttl: Duration) -> Option<Duration> {
        on_primitive!(self, p => p.keep_alive(ttl))
    }

    fn is_reader(&self) -> bool {
        on_primitive!(self, p => p.is_reader())
    }

    fn fenced(&self) -> bool {
        on_primitive!(self, p => p.fenced())
    }
}

/// Every step, each primitive's `STEPS` and the operator's (a cargo test
/// checks each file of `lua/` is among them).
pub(crate) fn every_step() -> impl Iterator<Item = &'static Lua> {
    exclusive::STEPS
        .iter()
        .chain(&compared::STEPS)
        .chain(&fair::STEPS)
        .chain(&election::STEPS)
        .chain(&plain::STEPS)
        .chain(&rw::STEPS)
        .chain(&rw_fair::STEPS)
        .chain(&semaphore::STEPS)
        .chain(&scripts::OPERATOR_STEPS)
        .copied()
}

/// Loads every step into the server `client` reaches (SCRIPT LOAD, one
/// pipeline), so that no step's EVALSHA answers NOSCRIPT there until the
/// server loses its scripts (a restart, SCRIPT FLUSH). A quorum loads them
/// on each master it connects: its steps stop waiting for a master a short
/// grace after a majority answered, and a master whose EVALSHA had answered
/// NOSCRIPT by then would get neither the script nor the step
/// (`Quorum::verify`).
pub(crate) async fn load_every_step(client: &Backend) -> Result<()> {
    scripts::load(client, every_step()).await
}

#[cfg(test)]
mod tests {
    use crate::scripts::argv::tests::{check_argv, check_keys};
    use crate::scripts::Lua;

    #[test]
    fn every_file_of_lua_is_a_step_loaded_with_the_others() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let steps: Vec<&str> = super::every_step().map(Lua::source).collect();
        let mut files = 0;
        for entry in std::fs::read_dir(dir).expect("lua/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "lua") {
                files += 1;
                let source = std::fs::read_to_string(&path).expect("a readable Lua file");
                assert!(steps.contains(&source.as_str()), "{} is in no module's STEPS", path.display());
            }
        }
        assert_eq!(files, steps.len(), "a step is listed twice");
    }

    #[test]
    fn every_steps_argv_struct_its_header_and_its_locals_agree() {
        let mut checked = 0;
        for step in super::every_step() {
            check_argv(step);
            checked += 1;
        }
        assert!(checked > 20, "the steps were not found");
    }

    #[test]
    fn every_steps_keys_header_names_what_its_locals_name() {
        super::every_step().for_each(check_keys);
    }
}
