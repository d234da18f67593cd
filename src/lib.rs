//! ferrolock: distributed locks on Redis. The core (everything outside `py`)
//! knows nothing of Python; `py` holds the PyO3 bindings.
//!
//! The modules form layers, each naming only those before it (see "Layers" in
//! `docs/design.md`): `error`, `support`, `keys`, `transport`, `scripts`,
//! `primitive`, `quorum`, `deployment`, `handle`, `ops`, and `py` on top.

mod deployment;
pub mod error;
mod handle;
pub mod keys;
mod ops;
mod primitive;
mod quorum;
mod scripts;
mod support;
mod transport;

pub use support::stats::{live_watchdogs, waiters};

#[cfg(feature = "python")]
mod py;

pub use deployment::Deployment;
pub use error::{Error, Result};
pub use handle::lease::Lease;
pub use handle::lock::{Lock, LockOptions, Wait};
pub use handle::rwmutex::RwMutex;
pub use handle::{election, lease, lock, rwmutex, semaphore};
pub use ops::listing;
pub use ops::listing::{Reader, State};
pub use scripts::Record;
pub use support::retry::{Backoff, Retry};
pub use support::{events, retry, token};
pub use transport::client::{Client, ClientOptions};
pub use transport::conn::Io;
pub use transport::replication::{Policy, Replication};
pub use transport::{client, replication};
