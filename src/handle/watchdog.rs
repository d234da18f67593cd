//! One tokio task per hold. With renewal on, it pushes the expiry every ttl/3
//! (in one call with the other renewals that fall due with it on the
//! deployment: `Client::renew`, each hold getting its own answer) and
//! survives reconnects by retrying until the local validity deadline;
//! without it, it only reports the hold lost when its ttl runs out. Either
//! way nobody is left believing they hold a lock they do not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::time::{sleep, sleep_until};

use crate::client::Client;
use crate::handle::lease::Lease;
use crate::primitive::Mode;
use crate::support::events::{self, Event, LossCause, ReplicaStep};
use crate::support::retry::Retry;
use crate::transport::replication::{self, Policy};

use crate::support::stats::{RENEWALS, WATCHDOGS};

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

/// Starts the task that keeps `lease`: with `renew`, renewing it with
/// `steps` on `client`; without, reporting it lost when its ttl runs out. The
/// lease stops the task when its hold is released or its handle dropped.
pub(crate) fn start(lease: &Arc<Lease>, client: &Client, steps: &Mode, renew: bool) {
    let alive = Alive::new();
    let keeper = Keeper { client: client.clone(), steps: steps.clone(), lease: lease.clone() };
    let task = tokio::spawn(async move {
        let _alive = alive;
        if renew {
            keeper.renew_until_lost().await;
        } else {
            expire_unless_extended(&keeper.lease, "its ttl ran out (auto_renew is off)").await;
        }
    });
    lease.renewed_by(task.abort_handle());
}

/// What the task renews, and with what.
struct Keeper {
    client: Client,
    steps: Mode,
    lease: Arc<Lease>,
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

/// Without renewal (or once renewal reached `max_hold`) the hold is lost
/// when its validity runs out, for `why`; an `extend` moves that point, so
/// the deadline is read again after each one.
async fn expire_unless_extended(lease: &Arc<Lease>, why: &str) {
    while let Some(until) = lease.valid_until() {
        tokio::select! {
            () = sleep_until(until.into()) => {
                if lease.valid_until().is_some_and(|t| t <= Instant::now()) {
                    log::info!("{} ended: {why}", lease.label());
                    lease.lose(LossCause::Expired, why);
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

impl Keeper {
    async fn renew_until_lost(self) {
        let lease = &self.lease;
        // A Sentinel client follows the master while the hold renews, so a
        // renewal after a failover goes to the new master.
        let _following = self.client.holding();
        let mut failing = Failing::default();
        loop {
            let due = lease.renewed_at() + lease.ttl() / 3;
            let next = renewal_time(due, lease.ttl(), lease.valid_until());
            tokio::select! {
                () = sleep_until(next.into()) => {}
                () = lease.wait_rescheduled() => continue,
            }
            let mut pauses = Retry::doubling(Duration::from_millis(10), Duration::MAX).pauses();
            loop {
                let Some(deadline) = lease.valid_until() else {
                    return;
                };
                let full = lease.ttl();
                let Some(ttl) = lease.renewable(full) else {
                    return expire_unless_extended(lease, &self.max_hold_reached()).await;
                };
                let sent = Instant::now();
                let written = lease.written();
                let holder = lease.holder(written.as_ref());
                let attempt = self.client.renew(&self.steps, &holder, ttl).map(|r| lease.answered(r));
                let (outcome, unacknowledged) = tokio::select! {
                    outcome = attempt => outcome,
                    () = sleep_until(deadline.into()) => {
                        return self.lose_at_deadline("renewal did not succeed before the hold's validity ran out");
                    }
                };
                if let (Ok(true), Some(shortfall)) = (&outcome, unacknowledged) {
                    let kept = self.client.options().replication.policy == Policy::Warn;
                    replication::unacknowledged(
                        self.client.replica_warnings(),
                        lease.subject(),
                        &lease.label(),
                        ReplicaStep::Renewal,
                        &shortfall,
                        kept,
                        Some(lease.id()),
                    );
                    if !kept {
                        // It reached the master but does not count: the lease
                        // keeps its last acknowledged validity; retry.
                        lease.renewal_unacknowledged(shortfall.describe());
                        // At most a tenth of the ttl: many tries before it runs out.
                        let backoff = pauses.pause().min(ttl / 10).max(Duration::from_millis(1));
                        tokio::select! {
                            () = sleep(backoff) => {}
                            () = sleep_until(deadline.into()) => {
                                return self.lose_at_deadline("renewal did not succeed before the hold's validity ran out");
                            }
                        }
                        continue;
                    }
                }
                match outcome {
                    Ok(true) => {
                        failing.over(lease);
                        lease.renewed(sent, ttl);
                        RENEWALS.add();
                        let (subject, latency, hold) = (lease.subject(), sent.elapsed(), lease.id());
                        events::emit(|| Event::Renewed { subject, latency, hold });
                        log::debug!("renewed {} for {:?}", lease.label(), ttl);
                        if ttl < full {
                            // Cut short by max_hold: the hold now ends when it says.
                            return expire_unless_extended(lease, &self.max_hold_reached()).await;
                        }
                        break;
                    }
                    Ok(false) => {
                        return self.lose(
                            "it expired or was taken over before it could be renewed",
                            LossCause::TakenOver,
                        )
                    }
                    Err(e) => {
                        failing.failed(lease, &e);
                        // At most a tenth of the ttl: many tries before it runs out.
                        let backoff = pauses.pause().min(ttl / 10).max(Duration::from_millis(1));
                        tokio::select! {
                            () = sleep(backoff) => {}
                            () = sleep_until(deadline.into()) => {
                                return self.lose_at_deadline("Redis was unreachable until the hold's validity ran out");
                            }
                        }
                    }
                }
            }
        }
    }

    fn max_hold_reached(&self) -> String {
        let max_hold = self.lease.max_hold().unwrap_or_default().as_secs_f64();
        format!("it reached its max_hold ({max_hold} s after it was taken), so renewal stopped")
    }

    /// The validity ran out before a renewal counted: because the replicas did
    /// not acknowledge the renewals, when that is what kept them from counting,
    /// else for `why`.
    fn lose_at_deadline(&self, why: &str) {
        match self.lease.unacknowledged() {
            Some(detail) => {
                let why = format!(
                    "its renewals were not acknowledged by enough replicas ({detail}) before the hold's validity \
                     ran out"
                );
                self.lose(&why, LossCause::Unreplicated);
            }
            None => self.lose(why, LossCause::Unreachable),
        }
    }

    fn lose(&self, why: &str, cause: LossCause) {
        log::warn!("lost {}: {why}", self.lease.label());
        self.lease.lose(cause, why);
    }
}

/// Failed renewals of one hold in a row, told without flooding the log: the
/// first at once, then at most one line every `Failing::QUIET`, and a line
/// when renewal works again.
#[derive(Default)]
struct Failing {
    count: u32,
    /// When the last line was written.
    told: Option<Instant>,
}

impl Failing {
    const QUIET: Duration = Duration::from_secs(5);

    fn failed(&mut self, lease: &Lease, e: &crate::error::Error) {
        self.count += 1;
        match self.told {
            Some(at) if at.elapsed() < Self::QUIET => {
                log::debug!("renewing {} failed again, retrying: {e}", lease.label());
            }
            Some(_) => {
                log::warn!(
                    "renewing {} still fails after {} attempts, retrying: {e}",
                    lease.label(),
                    self.count
                );
                self.told = Some(Instant::now());
            }
            None => {
                log::warn!("renewing {} failed, retrying: {e}", lease.label());
                self.told = Some(Instant::now());
            }
        }
    }

    fn over(&mut self, lease: &Lease) {
        if self.count > 0 {
            log::info!("renewed {} again after {} failed attempts", lease.label(), self.count);
        }
        *self = Failing::default();
    }
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
