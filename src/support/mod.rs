//! What every layer above leans on and that knows nothing of Redis: values
//! kept per process and rebuilt after a fork, the process id, counters,
//! counted background clean-ups, tokens, retry strategies, the observers of
//! events, and percent-decoding.

pub(crate) mod cleanup;
pub mod events;
pub(crate) mod per_process;
pub(crate) mod percent;
pub(crate) mod pid;
pub mod retry;
pub(crate) mod stats;
pub mod token;
