//! Taking a lock: the attempt loop, waiting between attempts (woken by a
//! release, or polling), a fair hand-over taken from its wake-up, and the
//! reactions to a grant its replicas did not acknowledge.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use super::outage::Outage;
use super::undo::Undo;
use super::{Lock, Wait};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::handle::lease::Lease;
use crate::handle::Via;
use crate::primitive::steps::{Holder, Obtaining, Steps};
use crate::primitive::Mode;
use crate::scripts::Obtain;
use crate::support::events::{self, AcquireProbe, Event, Outcome, ReplicaStep, Wakeup};
use crate::support::token::{check_token, new_token};
use crate::transport::conn::Io;
use crate::transport::replication::{self, Policy, Shortfall};
use crate::transport::wakeups::{Handed, Waits};

/// Holds this process took straight from a fair release's wake-up, without
/// a round trip to claim them.
static HANDED_OVER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The longest a new acquire lets a woken waiter of its process try first.
const YIELD_TO_WOKEN: Duration = Duration::from_millis(5);

/// The longest pause before a waiter whose subscribing failed (a failover,
/// a partition) tries to subscribe again: it is not woken meanwhile, and its
/// retry's own delay may be seconds.
const RESUBSCRIBE: Duration = Duration::from_millis(100);

pub fn handed_over() -> usize {
    HANDED_OVER.load(std::sync::atomic::Ordering::Relaxed)
}

impl Lock {
    /// Takes the lock, waiting as `wait` allows. `Ok(false)`: not taken in time,
    /// or the retry strategy gave up. Cancel-safe: dropping the future leaves
    /// no lock (and no writer's intent or place in a queue) behind, and never
    /// touches a restored token's hold, which is its owner's.
    pub async fn acquire(&self, wait: Wait) -> Result<bool> {
        self.via(Io::Multiplexed).acquire(wait).await
    }

    /// One attempt to take the lock, as `acquire(Wait::No)`, that also takes
    /// over the hold of `from` (another handle's token) where `from` holds
    /// it: in the same atomic step that hold becomes this handle's, under a
    /// token of its own, its fence kept (a quorum's: the highest its masters
    /// granted) and its metadata set to this
    /// handle's (kept without), so whoever else knows `from` can no longer
    /// adopt, renew or release it. A plain (not fair) lock's handle only,
    /// not restored from a token (a restored handle adopts with `acquire`).
    /// A quorum takes it over where it holds on a majority. As any acquire,
    /// cancelled part-way it leaves no hold behind: the hold it took over
    /// is then released.
    pub async fn take_over(&self, from: &str) -> Result<bool> {
        self.via(Io::Multiplexed).take_over(from).await
    }

    /// Runs `take`, reporting its outcome to the listeners.
    async fn observed(
        &self,
        wait: Wait,
        take: impl std::future::Future<Output = Result<bool>>,
    ) -> Result<bool> {
        // Boxed: the attempt nests each primitive's steps on one server or a
        // quorum's masters, deeper than rustc's default recursion limit lets
        // a caller's future be laid out (a crate awaiting `acquire` would
        // otherwise need `#![recursion_limit]`). One allocation an acquire.
        let take = Box::pin(take);
        if !events::observed() {
            return take.await;
        }
        let probe = AcquireProbe::start(&self.subject, wait != Wait::No);
        let taken = take.await;
        let outcome = match &taken {
            Ok(true) => Outcome::Acquired,
            Ok(false) if matches!(wait, Wait::Until(_)) && wait.expired() => Outcome::TimedOut,
            Ok(false) => Outcome::NotAcquired,
            Err(_) => Outcome::Error,
        };
        let hold = self.lease().filter(|_| outcome == Outcome::Acquired).map(|l| l.id());
        probe.finish(outcome, hold);
        taken
    }

    /// A grant fewer replicas acknowledged than asked, warned about and
    /// counted: `kept` as the `"warn"` policy says (the hold it made is
    /// named), or refused.
    fn unacknowledged(&self, shortfall: &Shortfall, kept: bool) {
        let hold = if kept { self.lease().map(|l| l.id()) } else { None };
        replication::unacknowledged(
            self.client.replica_warnings(),
            &self.subject,
            &self.label(),
            ReplicaStep::Acquire,
            shortfall,
            kept,
            hold,
        );
    }

    /// `from`: a token whose hold the attempts take over (`take_over`).
    async fn take(&self, wait: Wait, io: Io, from: Option<&str>) -> Result<bool> {
        self.forget_lost_hold();
        let adopted = self.adopted_token();
        let ours = adopted.is_none();
        let permit = match adopted {
            Some(_) => None,
            None => match self.enter(wait).await {
                Some(p) => Some(p),
                None => return Ok(false),
            },
        };
        let token = match adopted {
            Some(t) => t,
            None => self.named.clone().map_or_else(new_token, Ok)?,
        };
        let metadata = self.opts.metadata.as_deref();
        // While a script may have taken the lock (its answer not in yet), or a
        // waiting writer's intent or a place in a queue stands, a dropped
        // future must undo that.
        let mut undo = Undo {
            client: self.client.clone(),
            mode: self.mode.clone(),
            token: token.clone(),
            ours,
            pending: false,
        };
        // The attempts go out as `io` says; what may outlive this future
        // (the guard's clean-up, renewal) takes the handle's own deployment.
        let client = self.client.via(io);
        if wait != Wait::No {
            // A waiter here that a release just woke tries first: this acquire
            // (maybe the releaser, straight back) waits for its go, briefly.
            let mut until = Instant::now() + YIELD_TO_WOKEN;
            if let Wait::Until(deadline) = wait {
                until = until.min(deadline);
            }
            client.yield_to_woken(|| self.mode.channels(), until.into()).await;
        }
        let mut attempts = Attempts::default();
        let mut waiting = Waiting { registration: None, subscribe: wait != Wait::No && self.mode.wakes() };
        let mut outage = Outage::default();
        loop {
            undo.pending = true;
            let will_wait = wait != Wait::No;
            let number = attempts.next();
            let ask =
                Obtaining { token: &token, ttl: self.opts.ttl, metadata, will_wait, attempt: number, from };
            let answer = match client.obtain(&self.mode, &ask, ours).await {
                Ok(answer) => {
                    outage.over();
                    answer
                }
                Err(e) => {
                    // The attempt may have run (a timeout): the token is
                    // still this acquire's, and the next attempt re-enters
                    // it; the guard undoes it if the acquire gives up.
                    let pause = outage.ride(&e, &self.client, wait).ok_or(e)?;
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            attempts.answered(number, answer.sent());
            match answer {
                Obtain::Taken { fence, shortfall: unacknowledged, sent, written } => {
                    let kept = self.client.options().replication.policy == Policy::Warn;
                    if let Some(shortfall) = unacknowledged.filter(|_| !kept) {
                        let refused = self.refuse_unreplicated(&client, &mut undo, &token, ours, &shortfall);
                        return Err(refused.await);
                    }
                    let lease = Lease::new(self.terms(token, fence, sent, written));
                    self.granted(&mut undo, &mut waiting, permit, lease);
                    if let Some(shortfall) = unacknowledged {
                        self.unacknowledged(&shortfall, true);
                    }
                    return Ok(true);
                }
                Obtain::Busy { pttl_ms, .. } => {
                    outage.busy(pttl_ms);
                    undo.pending = will_wait && self.mode.leaves_intent();
                    let delay = match self.opts.retry.delay(attempts.failed()) {
                        Some(d) if !wait.expired() => d,
                        _ => {
                            if undo.pending {
                                // Still pending while the withdrawal is under way: if
                                // it fails, or this future is dropped meanwhile, the
                                // guard's clean-up withdraws again.
                                client.withdraw(&self.mode, &token, ours).await?;
                                undo.pending = false;
                            }
                            return Ok(false);
                        }
                    };
                    let woken = self.pause(&mut waiting, &token, delay, pttl_ms, wait).await;
                    if let Some(lease) = self.handed_over(&token, &waiting, &attempts) {
                        self.granted(&mut undo, &mut waiting, permit, lease);
                        HANDED_OVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        self.woken(Some(Wakeup::HandOver));
                        return Ok(true);
                    }
                    self.woken(woken);
                }
            }
        }
    }

    /// A grant fewer replicas than asked acknowledged in time, under policy
    /// "fail": undone before the error is returned (released, and out of any
    /// queue; a restored token's hold stays its owner's). The guard stays
    /// pending meanwhile, so an undo that fails, or this future dropped, is
    /// finished by its clean-up.
    async fn refuse_unreplicated(
        &self,
        client: &Client,
        undo: &mut Undo,
        token: &str,
        ours: bool,
        shortfall: &Shortfall,
    ) -> Error {
        self.unacknowledged(shortfall, false);
        match self.mode.undo(client, token, ours).await {
            Ok(()) => undo.pending = false,
            Err(e) => {
                log::debug!("undoing an unacknowledged grant of {} failed, retrying: {e}", self.label());
            }
        }
        let undone = if ours { "the grant was undone" } else { "the restored hold stays its owner's" };
        Error::NotReplicated(format!(
            "{} was granted by the master, but {}: {undone} (replica_policy \"fail\")",
            self.label(),
            shortfall.describe()
        ))
    }

    /// The acquire succeeded: nothing to undo, its wake-up used, the handle's
    /// permit kept for the hold.
    fn granted(
        &self,
        undo: &mut Undo,
        waiting: &mut Waiting,
        permit: Option<OwnedSemaphorePermit>,
        lease: Lease,
    ) {
        undo.pending = false;
        if let Some(w) = waiting.registration.take() {
            w.done();
        }
        if let Some(p) = permit {
            p.forget();
        }
        self.install(lease);
    }

    fn woken(&self, wakeup: Option<Wakeup>) {
        if let Some(wakeup) = wakeup {
            events::emit(|| Event::Woken { subject: &self.subject, wakeup });
        }
    }

    /// Between two attempts. The first time, subscribes to wake-ups and
    /// returns at once: the attempt right after the subscription catches a
    /// release that came before it. Later, waits for a wake-up or for the
    /// retry's safety net (its longest delay: `Retry::safety_net`; its
    /// delay for this attempt when not subscribed), bounded by the holder's
    /// ttl and the deadline, and says which came.
    async fn pause(
        &self,
        waiting: &mut Waiting,
        token: &str,
        delay: Duration,
        holder_pttl_ms: i64,
        wait: Wait,
    ) -> Option<Wakeup> {
        if waiting.registration.as_ref().is_some_and(Waits::stale) {
            // Its subscription dropped (and woke it): subscribe anew.
            waiting.registration = None;
            waiting.subscribe = true;
        }
        if let Some(w) = &waiting.registration {
            w.rearm();
        } else if std::mem::take(&mut waiting.subscribe) {
            let channels = self.mode.channels();
            let register = self.client.register_waiter(&channels, self.mode.is_reader(), token);
            // Subscribing never outlasts the acquire's own deadline.
            let registered = match wait {
                Wait::Until(deadline) => {
                    tokio::time::timeout_at(deadline.into(), register).await.unwrap_or_else(|_| {
                        Err(Error::Connection(
                            "subscribing for wake-ups took longer than the acquire may wait".into(),
                        ))
                    })
                }
                _ => register.await,
            };
            match registered {
                Ok(w) => {
                    waiting.registration = Some(w);
                    return None;
                }
                Err(e) => {
                    // The master unreachable (a failover under way): subscribe at the next pause.
                    waiting.subscribe = matches!(e, Error::Connection(_) | Error::Unanswered(_));
                    log::debug!("no wake-ups for {} ({e}); polling", self.label());
                }
            }
        }
        // Wake-ups reach a subscribed waiter: the retry is only its safety net.
        // One whose subscribing failed and may succeed now tries again soon.
        let delay = match (&waiting.registration, waiting.subscribe) {
            (Some(_), _) => self.opts.retry.safety_net(delay),
            (None, true) => delay.min(RESUBSCRIBE),
            (None, false) => delay,
        };
        let mut wake = Instant::now() + self.wait_between(delay, holder_pttl_ms);
        if let Wait::Until(deadline) = wait {
            wake = wake.min(deadline);
        }
        if let Some(w) = &waiting.registration {
            tokio::select! {
                message = w.woken() => return Some(if message { Wakeup::PubSub } else { Wakeup::Poll }),
                () = tokio::time::sleep_until(wake.into()) => {}
                () = self.client.follow_master() => {}
            }
        } else {
            tokio::time::sleep_until(wake.into()).await;
        }
        Some(Wakeup::Poll)
    }

    /// The longest pause before the next attempt: the retry's delay, no longer
    /// than the holder has left, and short enough to keep a writer's intent or
    /// a fair waiter's place alive.
    fn wait_between(&self, delay: Duration, holder_pttl_ms: i64) -> Duration {
        let mut delay = delay;
        // -1: no expiry known. 0 (under a millisecond left) and -2 (just gone)
        // mean "any moment now": an expiry publishes no wake-up, so look again.
        if holder_pttl_ms != -1 {
            delay = delay.min(Duration::from_millis(holder_pttl_ms.max(1) as u64));
        }
        if let Some(keep_alive) = self.mode.keep_alive(self.opts.ttl) {
            delay = delay.min(keep_alive);
        }
        delay
    }

    /// Waits for this handle's own permit.
    async fn enter(&self, wait: Wait) -> Option<OwnedSemaphorePermit> {
        let gate = self.state(|s| s.gate.clone());
        match wait {
            Wait::No => gate.try_acquire_owned().ok(),
            Wait::Forever => gate.acquire_owned().await.ok(),
            Wait::Until(t) => tokio::time::timeout_at(t.into(), gate.acquire_owned()).await.ok()?.ok(),
        }
    }

    /// A hold known to be lost protects nothing: free the handle for a new
    /// one. Its token is released in the background, in case Redis still has
    /// it (the loss was local: validity ran out while Redis was unreachable),
    /// so this process is not left waiting on its own stale hold.
    fn forget_lost_hold(&self) {
        let lost = self.state(|state| {
            let lost = state.hold.take_if(|l| l.is_marked_lost())?;
            lost.stop_renewal();
            state.gate.add_permits(1);
            Some(lost)
        });
        if let Some(lost) = lost {
            let (client, mode) = (self.client.clone(), self.mode.clone());
            self.client.spawn_cleanup(async move {
                let _ = client.release(&mode, &Holder::of(&lost.token().into())).await;
            });
        }
    }

    pub(super) fn adopted_token(&self) -> Option<String> {
        self.state(|state| match &state.hold {
            Some(l) if l.is_restored() => Some(l.token().to_string()),
            _ => None,
        })
    }

    /// Whether a fair release handed the lock to this waiter (its wake-up
    /// names it, with the fence and the attempt it answers), so it holds
    /// without a round trip to claim it: then the fence, and a lease valid for
    /// this waiter's patience from when it sent that attempt (which ran
    /// before the release did, so Redis keeps the grant at least that long),
    /// renewed to the full ttl at once. A grant for an attempt this acquire
    /// no longer knows is stale and ignored. A waiter with metadata to store,
    /// without renewal, or woken too late to be sure claims it with one more
    /// attempt instead.
    fn handed_over(&self, token: &str, waiting: &Waiting, attempts: &Attempts) -> Option<Lease> {
        let Handed { fence, attempt } = waiting.registration.as_ref()?.take_handed()?;
        let sent = attempts.find(attempt)?;
        let patience = self.mode.patience()?;
        let lease = Lease::handed(self.terms(token.to_string(), fence, sent, None), patience);
        let margin = Duration::from_millis(5);
        let in_time = lease.valid_until().is_some_and(|t| Instant::now() + margin < t);
        // A hand-over is written by the releaser's script, whose replicas this
        // waiter cannot wait for: with replica acknowledgement on, it claims
        // the hold with an attempt of its own, which is waited for.
        let acked = !self.client.options().replication.is_on();
        (self.opts.auto_renew && self.opts.metadata.is_none() && in_time && acked).then_some(lease)
    }
}

impl Via<'_, Lock> {
    /// As [`Lock::acquire`], its attempts (and their undo when it gives up)
    /// sent as the view's `Io` says. Its wake-up subscription, and the
    /// clean-up of an acquire dropped part-way, are multiplexed whatever the
    /// `Io` is.
    pub async fn acquire(&self, wait: Wait) -> Result<bool> {
        self.observed(wait, self.take(wait, self.io, None)).await
    }

    /// As [`Lock::take_over`], its commands sent as the view's `Io` says.
    pub async fn take_over(&self, from: &str) -> Result<bool> {
        check_token(from)?;
        if !matches!(self.mode, Mode::Exclusive(_)) {
            return Err(Error::InvalidArgument(format!(
                "{} cannot be taken over: take_over is for a plain Lock's handle, not a fair Lock's, an \
                 RWMutex's or a semaphore's",
                self.label()
            )));
        }
        if self.is_restored() {
            return Err(Error::InvalidArgument(format!(
                "take_over on a handle restored from a token: make the handle without `token` and pass \
                 the token to take_over, or adopt the restored hold with acquire ({})",
                self.label()
            )));
        }
        self.observed(Wait::No, self.take(Wait::No, self.io, Some(from))).await
    }
}

/// A waiter's wake-up subscription: none until its first failed attempt, and
/// none for good if subscribing failed, or a release of what it waits for
/// announces nothing (a plain hold's on a Cluster, without a hash tag): it
/// then polls.
struct Waiting {
    registration: Option<Waits>,
    subscribe: bool,
}

/// The attempts of one acquire: their numbers and when each was sent, so a
/// fair grant is measured from the attempt it answers. Only recent ones are
/// kept: a grant for an older attempt has lapsed anyway.
#[derive(Default)]
struct Attempts {
    count: u64,
    sent: VecDeque<(u64, Instant)>,
}

impl Attempts {
    const KEPT: usize = 32;

    /// Numbers the attempt about to be sent, noting the time now until its
    /// answer says when it was sent (after connecting, say).
    fn next(&mut self) -> u64 {
        self.count += 1;
        if self.sent.len() == Self::KEPT {
            self.sent.pop_front();
        }
        self.sent.push_back((self.count, Instant::now()));
        self.count
    }

    /// Attempt `number` was answered: it was sent at `sent`.
    fn answered(&mut self, number: u64, sent: Instant) {
        if let Some(entry) = self.sent.iter_mut().find(|(n, _)| *n == number) {
            entry.1 = sent;
        }
    }

    fn failed(&self) -> u32 {
        u32::try_from(self.count).unwrap_or(u32::MAX)
    }

    fn find(&self, number: u64) -> Option<Instant> {
        self.sent.iter().find(|(n, _)| *n == number).map(|(_, t)| *t)
    }
}

/// The acquire loop against a primitive whose answers each test scripts
/// (`primitive::fake`), on no server: its waiters poll.
#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{Lock, LockOptions, Wait};
    use crate::client::Client;
    use crate::error::Error;
    use crate::primitive::fake::{Answer, Fake};
    use crate::primitive::Mode;
    use crate::support::retry::{Backoff, Retry};
    use crate::transport::backend::ClientOptions;

    /// A handle on `fake`, on a deployment nothing listens on (the fake's
    /// steps never reach it), retrying every millisecond unless `retry`.
    fn handle(fake: &Fake, retry: Option<Retry>) -> (Lock, Client) {
        let opts = ClientOptions { url: "redis://127.0.0.1:1/0".into(), ..ClientOptions::default() };
        let deployment = Client::new(opts).unwrap();
        let retry =
            retry.unwrap_or(Retry { backoff: Backoff::Fixed(Duration::from_millis(1)), attempts: None });
        let opts = LockOptions { auto_renew: false, retry, ..LockOptions::default() };
        let lock =
            Lock::with_mode(deployment.clone(), vec!["n".into()], Mode::Fake(fake.clone()), opts, None);
        (lock, deployment)
    }

    #[tokio::test]
    async fn a_waiter_tries_again_until_it_is_taken_each_attempt_numbered() {
        let fake = Fake::answering(&[Answer::Busy(-1), Answer::Busy(5_000), Answer::Taken]);
        let (lock, _) = handle(&fake, None);
        assert!(lock.acquire(Wait::Forever).await.unwrap());
        assert!(lock.token().is_some());
        assert_eq!(fake.log().attempts, [(1, true), (2, true), (3, true)]);
        assert!(fake.log().withdrawn.is_empty(), "nothing left to withdraw");
    }

    #[tokio::test]
    async fn a_one_shot_attempt_tries_once_and_leaves_nothing() {
        let fake = Fake { intent: Some(Duration::from_millis(10)), ..Fake::default() };
        let (lock, _) = handle(&fake, None);
        assert!(!lock.acquire(Wait::No).await.unwrap());
        let log = fake.log();
        assert_eq!(log.attempts, [(1, false)]);
        assert!(log.withdrawn.is_empty() && log.released.is_empty(), "{log:?}");
    }

    #[tokio::test]
    async fn a_waiter_gives_up_at_its_deadline_and_withdraws_its_intent() {
        let fake = Fake { intent: Some(Duration::from_millis(10)), ..Fake::default() };
        let (lock, _) = handle(&fake, None);
        let start = Instant::now();
        let deadline = start + Duration::from_millis(50);
        assert!(!lock.acquire(Wait::Until(deadline)).await.unwrap());
        assert!(Instant::now() >= deadline, "gave up before its deadline");
        let log = fake.log();
        assert!(log.attempts.len() > 1, "{log:?}");
        assert_eq!(log.withdrawn.len(), 1, "{log:?}");
        assert!(log.withdrawn[0].1, "the acquire's own token");
    }

    #[tokio::test]
    async fn the_retry_strategy_bounds_the_attempts() {
        let fake = Fake::default();
        let retry = Retry { backoff: Backoff::Fixed(Duration::from_millis(1)), attempts: Some(3) };
        let (lock, _) = handle(&fake, Some(retry));
        assert!(!lock.acquire(Wait::Forever).await.unwrap());
        assert_eq!(fake.log().attempts.len(), 3);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_reported_to_a_first_attempt_and_ridden_out_by_a_waiter() {
        let fake = Fake::answering(&[Answer::Down]);
        let (lock, _) = handle(&fake, None);
        let err = lock.acquire(Wait::Forever).await.unwrap_err();
        assert!(matches!(err, Error::Connection(_)), "{err:?}");

        // A waiter that saw the lock held rides out an outage, the token kept.
        let fake = Fake::answering(&[Answer::Busy(60_000), Answer::Down, Answer::Down, Answer::Taken]);
        let (lock, _) = handle(&fake, None);
        assert!(lock.acquire(Wait::Forever).await.unwrap());
        assert_eq!(fake.log().attempts.len(), 4);
    }

    #[tokio::test]
    async fn a_dropped_acquire_undoes_the_attempt_it_left_unanswered() {
        let fake = Fake { intent: Some(Duration::from_millis(10)), ..Fake::answering(&[Answer::Stall]) };
        let (lock, deployment) = handle(&fake, None);
        let acquire = lock.acquire(Wait::Forever);
        assert!(tokio::time::timeout(Duration::from_millis(20), acquire).await.is_err());
        deployment.settle().await;
        let log = fake.log();
        assert_eq!(log.attempts, [(1, true)]);
        assert_eq!(log.released.len(), 1, "the attempt may have taken it: released");
        assert_eq!(log.withdrawn.len(), 1, "and its intent withdrawn: {log:?}");
        assert_eq!(log.released[0], log.withdrawn[0].0, "both under the acquire's token");
    }
}
