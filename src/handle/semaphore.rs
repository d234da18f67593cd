//! The semaphore: up to `permits` holders of one name at once, each permit
//! its own lease. A permit handle is an ordinary `Lock` taking a `Permit`
//! mode, so waiting, the watchdog, loss reporting, fencing, restoring from a
//! token and cancellation are the Lock's; only the atomic steps
//! (`lua/sem_*.lua`, and the lease refresh the RWMutex's readers use) differ.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::handle::lock::{validate, Lock, LockOptions};
use crate::primitive::semaphore::{self, SemState};
use crate::primitive::{patience, Mode};

/// The most permits one semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000;

/// A handle on one permit of the semaphore `name` with `permits` permits:
/// it holds at most one at a time. `opts.fair`: permits go to waiters in
/// arrival order across processes, handed over by the release.
pub fn permit(
    client: Client,
    name: String,
    permits: u32,
    opts: LockOptions,
    token: Option<String>,
) -> Result<Lock> {
    let permits = permit_count(permits.into())?;
    client.single("a semaphore")?;
    let names = vec![name];
    validate(&names, &opts, token.as_deref())?;
    let keys = client.keys().semaphore(&names[0]);
    let mode = Mode::permit(names[0].clone(), keys, permits, opts.fair.then(|| patience(opts.ttl)));
    Ok(Lock::with_mode(client, names, mode, opts, token))
}

/// `permits` checked: between 1 and [`MAX_PERMITS`].
pub fn permit_count(permits: i128) -> Result<u32> {
    u32::try_from(permits).ok().filter(|n| (1..=MAX_PERMITS).contains(n)).ok_or_else(|| {
        Error::InvalidArgument(format!("permits must be between 1 and {MAX_PERMITS}, got {permits}"))
    })
}

/// The permits in force, the fair queue's length and the live holders of the
/// semaphore `name`.
pub async fn state(client: &Client, name: &str) -> Result<SemState> {
    crate::handle::lock::check_name(name)?;
    semaphore::inspect(client.single("a semaphore")?, &client.keys().semaphore(name)).await
}
