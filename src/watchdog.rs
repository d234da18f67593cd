//! One tokio task per hold. With renewal on, it pushes the expiry every ttl/3
//! and survives reconnects by retrying until the local validity deadline;
//! without it, it only reports the hold lost when its ttl runs out. Either
//! way nobody is left believing they hold a lock they do not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until};

use crate::deployment::Deployment;
use crate::events::{self, Event, LossCause, ReplicaStep, Subject};
use crate::lease::Lease;
use crate::mode::Mode;
use crate::replication::{self, Policy};
use crate::scripts::Refreshed;

use crate::stats::WATCHDOGS;

/// Counts a task from its start until its future is dropped (ended or aborted).
struct Alive;

impl Alive {
    fn new() -> Alive {
        WATCHDOGS.add();
        Alive
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        WATCHDOGS.sub();
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
    pub client: Deployment,
    pub mode: Mode,
    pub token: String,
    pub lease: Arc<Lease>,
    pub label: String,
    pub subject: Arc<Subject>,
}

impl Watchdog {
    pub(crate) fn start(renewal: Renewal, renew: bool) -> Watchdog {
        let alive = Alive::new();
        let task = tokio::spawn(async move {
            let _alive = alive;
            if renew {
                renew_until_lost(renewal).await;
            } else {
                expire_unless_extended(&renewal).await;
            }
        });
        Watchdog { task }
    }
}

/// When a renewal due at `due` runs: at the next tick of a grid shared by the
/// whole process (ttl/64, between 1 and 50 ms), so that the renewals of many
/// holds fall due together and go out in one wake-up of the runtime and a few
/// socket writes, instead of one each. Late by less than a tick: for the
/// renewal at ttl/3, under 2 % of the ttl.
fn on_tick(due: Instant, ttl: Duration) -> Instant {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    let tick = (ttl / 64).clamp(Duration::from_millis(1), Duration::from_millis(50)).as_nanos();
    let since = due.saturating_duration_since(*EPOCH).as_nanos();
    let late = (tick - since % tick) % tick;
    due + Duration::from_nanos(late as u64)
}

/// Without renewal the hold is lost when its validity runs out; an `extend`
/// moves that point, so the deadline is read again after each one.
async fn expire_unless_extended(r: &Renewal) {
    let lease = &r.lease;
    while let Some(until) = lease.valid_until() {
        tokio::select! {
            () = sleep_until(until.into()) => {
                if lease.valid_until().is_some_and(|t| t <= Instant::now()) {
                    let why = "its ttl ran out (auto_renew is off)";
                    events::lost(&r.subject, lease, LossCause::Expired, || lease.mark_lost(why));
                    return;
                }
            }
            () = lease.wait_rescheduled() => {}
        }
    }
}

/// When the renewal due at `due` is sent: on the shared grid, unless that
/// would spend more than an eighth of the validity left after `due` (short
/// ttls, a hold handed over with only its patience), and at once when it is
/// overdue (a hand-over's first renewal).
fn renewal_time(due: Instant, ttl: Duration, valid_until: Option<Instant>) -> Instant {
    let now = Instant::now();
    if due <= now {
        return now;
    }
    let latest = valid_until.map_or(due, |v| due + v.saturating_duration_since(due) / 8);
    on_tick(due, ttl).min(latest.max(due))
}

async fn renew_until_lost(r: Renewal) {
    loop {
        let due = r.lease.renewed_at() + r.lease.ttl() / 3;
        let next = renewal_time(due, r.lease.ttl(), r.lease.valid_until());
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
            let attempt = r.client.refresh(&r.mode, &r.token, ttl).map(Refreshed::split);
            let (outcome, unacknowledged) = tokio::select! {
                outcome = attempt => outcome,
                () = sleep_until(deadline.into()) => {
                    return lose_at_deadline(&r, "renewal did not succeed before the hold's validity ran out");
                }
            };
            if let (Ok(true), Some(shortfall)) = (&outcome, unacknowledged) {
                let kept = r.client.options().replication.policy == Policy::Warn;
                let hold = Some(events::hold_id(&r.lease));
                replication::unacknowledged(
                    r.client.replica_warnings(),
                    &r.subject,
                    &r.label,
                    ReplicaStep::Renewal,
                    &shortfall,
                    kept,
                    hold,
                );
                if !kept {
                    // It reached the master but does not count: the lease
                    // keeps its last acknowledged validity; retry.
                    r.lease.renewal_unacknowledged(shortfall.describe());
                    tokio::select! {
                        () = sleep(backoff) => {}
                        () = sleep_until(deadline.into()) => {
                            return lose_at_deadline(&r, "renewal did not succeed before the hold's validity ran out");
                        }
                    }
                    backoff = (backoff * 2).min(ttl / 10).max(Duration::from_millis(1));
                    continue;
                }
            }
            match outcome {
                Ok(true) => {
                    r.lease.renewed(sent, ttl);
                    let (subject, latency, hold) = (&r.subject, sent.elapsed(), events::hold_id(&r.lease));
                    events::emit(|| Event::Renewed { subject, latency, hold });
                    log::debug!("renewed {} for {:?}", r.label, ttl);
                    break;
                }
                Ok(false) => {
                    return lose(
                        &r,
                        "it expired or was taken over before it could be renewed",
                        LossCause::TakenOver,
                    )
                }
                Err(e) => {
                    log::warn!("renewing {} failed, retrying: {e}", r.label);
                    tokio::select! {
                        () = sleep(backoff) => {}
                        () = sleep_until(deadline.into()) => {
                            return lose_at_deadline(&r, "Redis was unreachable until the hold's validity ran out");
                        }
                    }
                    backoff = (backoff * 2).min(ttl / 10).max(Duration::from_millis(1));
                }
            }
        }
    }
}

/// The validity ran out before a renewal counted: because the replicas did
/// not acknowledge the renewals, when that is what kept them from counting,
/// else for `why`.
fn lose_at_deadline(r: &Renewal, why: &str) {
    match r.lease.unacknowledged() {
        Some(detail) => {
            let why = format!(
                "its renewals were not acknowledged by enough replicas ({detail}) before the hold's validity \
                 ran out"
            );
            lose(r, &why, LossCause::Unreplicated);
        }
        None => lose(r, why, LossCause::Unreachable),
    }
}

fn lose(r: &Renewal, why: &str, cause: LossCause) {
    log::warn!("lost {}: {why}", r.label);
    events::lost(&r.subject, &r.lease, cause, || r.lease.mark_lost(why));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_fall_on_a_shared_grid() {
        let ttl = Duration::from_secs(3);
        let base = Instant::now();
        let grid = on_tick(base, ttl);
        assert_eq!(on_tick(grid, ttl), grid, "on the grid already: not delayed");
        let a = on_tick(grid + Duration::from_millis(1), ttl);
        let b = on_tick(grid + Duration::from_millis(21), ttl);
        assert_eq!(a, b, "due 20 ms apart, inside one 46 ms tick: renewed together");
        for due in [base, base + Duration::from_millis(7), base + Duration::from_secs(1)] {
            let at = on_tick(due, ttl);
            assert!(at >= due && at - due < ttl / 64, "late by at most one tick");
        }
        let short = Duration::from_millis(30);
        assert!(on_tick(base, short) - base < Duration::from_millis(1));
    }

    #[test]
    fn the_grid_never_eats_into_a_short_validity() {
        let ttl = Duration::from_secs(30);
        let now = Instant::now();
        let overdue = now.checked_sub(Duration::from_millis(5)).unwrap();
        assert!(renewal_time(overdue, ttl, Some(now + Duration::from_millis(15))) <= Instant::now());
        let due = now + Duration::from_millis(10);
        let valid = due + Duration::from_millis(16);
        assert!(renewal_time(due, ttl, Some(valid)) <= due + Duration::from_millis(2));
        let roomy = due + Duration::from_secs(20);
        assert!(renewal_time(due, ttl, Some(roomy)) <= due + Duration::from_millis(50));
    }
}
