//! ferrolock: distributed locks on Redis. The core (everything outside `py`)
//! knows nothing of Python; `py` holds the PyO3 bindings.

mod admin;
pub mod client;
mod cluster;
mod conn;
pub mod deployment;
pub mod election;
pub mod error;
mod handover;
pub mod keys;
pub mod lease;
pub mod listing;
pub mod lock;
pub mod mode;
mod probe;
mod quorum;
mod quorum_members;
pub mod replication;
pub mod rwmutex;
pub mod scripts;
pub mod semaphore;
mod sentinel;
mod server;
mod steps;
mod support;
mod tls;
mod wakeups;
mod watchdog;

pub use support::stats::{live_watchdogs, waiters};

#[cfg(feature = "python")]
mod py;

pub use client::{Client, ClientOptions};
pub use conn::Io;
pub use deployment::Deployment;
pub use error::{Error, Result};
pub use lease::Lease;
pub use listing::{Reader, State};
pub use lock::{Lock, LockOptions, Wait};
pub use replication::{Policy, Replication};
pub use rwmutex::RwMutex;
pub use scripts::Record;
pub use support::retry::{Backoff, Retry};
pub use support::{events, retry, token};
