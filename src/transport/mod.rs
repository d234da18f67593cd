//! Talking to one Redis deployment: the connections of a `Backend` (per
//! process, fork-safe, self-reconnecting) and their URL, the connection
//! kinds and `Io`, Sentinel and Cluster targets, TLS refusals in words, the
//! server probe, replica acknowledgement, and the wake-up subscription with
//! the hand-over message it carries.

pub mod backend;
pub(crate) mod cluster;
pub(crate) mod compare;
pub(crate) mod conn;
pub(crate) mod probe;
pub mod replication;
pub(crate) mod sentinel;
pub(crate) mod server;
pub(crate) mod tls;
pub(crate) mod wakeups;
