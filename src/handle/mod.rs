//! What a caller holds: a `Lock` (the acquire loop, its options and limits,
//! the outage ride-through, cancel-safe undo) and the handles built on it
//! (`RwMutex`'s two sides, the semaphore's permits, the election's term),
//! the `Lease` each of them holds, and the watchdog task renewing it.

pub mod election;
pub mod lease;
pub mod lock;
mod mode;
pub mod rwmutex;
pub mod semaphore;
mod via;
pub(crate) mod watchdog;

pub use via::Via;
