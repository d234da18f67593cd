//! ferrolock: distributed locks on Redis. The core (everything outside `py`)
//! knows nothing of Python; `py` holds the PyO3 bindings.
//!
//! The modules form layers, each naming only those before it (see "Layers" in
//! `docs/design.md`): `error`, `support`, `keys`, `transport`, `scripts`,
//! `primitive`, `quorum`, `client`, `handle`, `ops`, and `py` on top.

mod client;
pub mod error;
mod handle;
pub mod keys;
mod ops;
mod primitive;
mod quorum;
mod scripts;
mod support;
mod transport;

pub use support::stats::{live_watchdogs, renewals, waiters};

#[cfg(feature = "python")]
mod py;

pub use client::Client;
pub use error::{Error, Result};
pub use handle::lease::Lease;
pub use handle::lock::{Lock, LockOptions, Wait};
pub use handle::rwmutex::RwMutex;
pub use handle::Via;
pub use handle::{election, lease, lock, rwmutex, semaphore};
pub use ops::listing;
pub use ops::listing::{Reader, State};
pub use scripts::Record;
pub use support::retry::{Backoff, Retry};
pub use support::{events, retry, token};
pub use transport::backend::{Backend, ClientOptions};
pub use transport::conn::Io;
pub use transport::replication::{Policy, Replication};
pub use transport::{backend, replication};
