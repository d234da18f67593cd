//! ferrolock: distributed locks on Redis. The core (everything outside `py`)
//! knows nothing of Python; `py` holds the PyO3 bindings.

mod admin;
pub mod deployment;
pub mod election;
pub mod error;
pub mod keys;
pub mod lease;
pub mod listing;
pub mod lock;
pub mod mode;
mod quorum;
mod quorum_members;
pub mod rwmutex;
pub mod scripts;
pub mod semaphore;
mod steps;
mod support;
mod transport;
mod watchdog;

pub use support::stats::{live_watchdogs, waiters};

#[cfg(feature = "python")]
mod py;

pub use deployment::Deployment;
pub use error::{Error, Result};
pub use lease::Lease;
pub use listing::{Reader, State};
pub use lock::{Lock, LockOptions, Wait};
pub use rwmutex::RwMutex;
pub use scripts::Record;
pub use support::retry::{Backoff, Retry};
pub use support::{events, retry, token};
pub use transport::client::{Client, ClientOptions};
pub use transport::conn::Io;
pub use transport::replication::{Policy, Replication};
pub use transport::{client, replication};
