//! One tokio task per hold. With renewal on, it pushes the expiry every ttl/3
//! and survives reconnects by retrying until the local validity deadline;
//! without it, it only reports the hold lost when its ttl runs out. Either
//! way nobody is left believing they hold a lock they do not.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until};

use crate::client::Client;
use crate::lease::Lease;
use crate::mode::Mode;

/// Watchdog tasks alive, and the process they belong to: a forked child
/// starts from zero (its parent's tasks never run there).
static LIVE: Mutex<(u32, usize)> = Mutex::new((0, 0));

fn live() -> std::sync::MutexGuard<'static, (u32, usize)> {
    let mut live = LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let pid = std::process::id();
    if live.0 != pid {
        *live = (pid, 0);
    }
    live
}

/// Watchdog tasks alive in this process (for tests and diagnostics).
pub fn live_watchdogs() -> usize {
    live().1
}

/// Counts a task from its start until its future is dropped (ended or aborted).
struct Alive;

impl Alive {
    fn new() -> Alive {
        live().1 += 1;
        Alive
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        let mut live = live();
        live.1 = live.1.saturating_sub(1);
    }
}

/// Stops the task when dropped: renewal never outlives its hold.
pub(crate) struct Watchdog {
    task: JoinHandle<()>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) struct Renewal {
    pub client: Client,
    pub mode: Mode,
    pub token: String,
    pub lease: Arc<Lease>,
    pub label: String,
}

impl Watchdog {
    pub(crate) fn start(renewal: Renewal, renew: bool) -> Watchdog {
        let alive = Alive::new();
        let task = tokio::spawn(async move {
            let _alive = alive;
            if renew {
                renew_until_lost(renewal).await;
            } else if let Some(until) = renewal.lease.valid_until() {
                sleep_until(until.into()).await;
                renewal.lease.mark_lost("its ttl ran out (auto_renew is off)");
            }
        });
        Watchdog { task }
    }
}

async fn renew_until_lost(r: Renewal) {
    loop {
        let next = r.lease.renewed_at() + r.lease.ttl() / 3;
        tokio::select! {
            () = sleep_until(next.into()) => {}
            () = r.lease.wait_rescheduled() => continue,
        }
        let mut backoff = Duration::from_millis(10);
        loop {
            let Some(deadline) = r.lease.valid_until() else {
                return;
            };
            let ttl = r.lease.ttl();
            let sent = Instant::now();
            let attempt = r.mode.refresh(&r.client, &r.token, ttl);
            let outcome = tokio::select! {
                outcome = attempt => outcome,
                () = sleep_until(deadline.into()) => {
                    return lose(&r, "renewal did not succeed before the hold's validity ran out");
                }
            };
            match outcome {
                Ok(true) => {
                    r.lease.renewed(sent, ttl);
                    log::debug!("renewed {} for {:?}", r.label, ttl);
                    break;
                }
                Ok(false) => return lose(&r, "it expired or was taken over before it could be renewed"),
                Err(e) => {
                    log::warn!("renewing {} failed, retrying: {e}", r.label);
                    tokio::select! {
                        () = sleep(backoff) => {}
                        () = sleep_until(deadline.into()) => {
                            return lose(&r, "Redis was unreachable until the hold's validity ran out");
                        }
                    }
                    backoff = (backoff * 2).min(ttl / 10).max(Duration::from_millis(1));
                }
            }
        }
    }
}

fn lose(r: &Renewal, why: &str) {
    log::warn!("lost {}: {why}", r.label);
    r.lease.mark_lost(why);
}
