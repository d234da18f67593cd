//! One tokio task per hold. With renewal on, it pushes the expiry every ttl/3
//! and survives reconnects by retrying until the local validity deadline;
//! without it, it only reports the hold lost when its ttl runs out. Either
//! way nobody is left believing they hold a lock they do not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until};

use crate::client::Client;
use crate::lease::Lease;
use crate::mode::Mode;

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
        let task = tokio::spawn(async move {
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
