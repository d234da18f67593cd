//! Redlock: one lock over N independent Redis masters, held while a majority
//! holds it. Each step is sent to every master at once (one round trip, not
//! N) and decided as soon as a majority's answers settle it; the others get
//! a short grace (`gather`), and a master that has not answered by then, or
//! within the step's limit, counts as failed. A hold's validity runs from
//! when its attempt was sent, less the clock drift (ttl / 100 + 2 ms), as on
//! one server (`Lease`).
//!
//! Fences come from the masters alone, never from a client's clock: each
//! master gives its own (its clock in microseconds, above every fence it has
//! on record); the hold takes the highest a majority granted, and the
//! masters that gave less are raised to it before the acquire returns, so
//! that a majority carries it. A raised master keeps it in a fence record
//! until its own clock passes it, however the hold ends. Any later hold's
//! majority meets that one on a master whose next fence is above it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::primitive::steps::{Holder, Obtaining, Released, Steps};
use crate::scripts::{Obtain, Record, Refreshed};
use crate::support::cleanup::Cleanups;
use crate::support::per_process::PerProcess;
use crate::transport::backend::{Backend, ClientOptions, Readiness};
use crate::transport::replication::{Shortfall, Throttle};

mod members;
mod setup;

/// The masters of one quorum, each a `Backend` of its own.
pub(crate) struct Quorum {
    members: Vec<Backend>,
    /// How long a step may wait for masters that have not answered.
    command_timeout: Duration,
    opts: ClientOptions,
    keys: KeySpace,
    display: String,
    /// The undo of interrupted acquires on the quorum, this process's.
    cleanups: PerProcess<Arc<Cleanups>>,
    /// Warnings of steps the replicas did not acknowledge, throttled per quorum.
    replica_warnings: Throttle,
    /// Whether this process connected the quorum (`setup`), and whether it was closed.
    ready: Readiness,
}

/// The least grace the masters yet to answer get once the answers settle a
/// step: on a loaded machine a healthy master's answer can be that far
/// behind the others for want of a core, not because it is slow.
const MIN_GRACE: Duration = Duration::from_millis(5);

/// One master's answer: `None` when it gave none within the step's limit.
type Answers<T> = Vec<Option<Result<T>>>;

impl Quorum {
    /// How many masters make a majority.
    pub(crate) fn needed(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// How long an acquire or renewal waits for slow masters: a tenth of the
    /// ttl (small beside the validity it spends), between 50 ms and the
    /// command timeout.
    fn limit(&self, ttl: Duration) -> Duration {
        (ttl / 10).clamp(Duration::from_millis(50), self.command_timeout.max(Duration::from_millis(50)))
    }

    /// Runs `op` on the masters `which` at once, until `settled` says the
    /// answers so far decide, every one answered, or `limit` passed. Once
    /// settled, the others get as long again as that took (at least
    /// `MIN_GRACE`, and a millisecond): a healthy master's answer is that close behind, and a
    /// hold on every master outlasts more failures than one on a bare
    /// majority, while a stopped master costs little. A master that has not
    /// answered by then keeps its command: it was sent, and runs on that
    /// master in order with whatever this client sends it next.
    async fn gather<'a, T, F, Fut>(
        &'a self,
        which: impl Iterator<Item = usize>,
        limit: Duration,
        op: F,
        settled: impl Fn(&Answers<T>) -> bool,
    ) -> Answers<T>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let mut answers: Answers<T> = self.members.iter().map(|_| None).collect();
        let started = Instant::now();
        let mut deadline = started + limit;
        let mut lingering = false;
        let mut pending: FuturesUnordered<_> = which
            .map(|i| {
                let step = op(&self.members[i]);
                async move { (i, step.await) }
            })
            .collect();
        loop {
            tokio::select! {
                // An answer already in goes before the deadline: after this
                // task was descheduled, both are ready at once.
                biased;
                next = pending.next() => match next {
                    Some((i, answer)) => {
                        answers[i] = Some(answer);
                        if !lingering && settled(&answers) {
                            lingering = true;
                            let grace = started.elapsed().max(MIN_GRACE) + Duration::from_millis(1);
                            deadline = deadline.min(Instant::now() + grace);
                        }
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        answers
    }

    async fn on_all<'a, T, F, Fut>(
        &'a self,
        limit: Duration,
        op: F,
        settled: impl Fn(&Answers<T>) -> bool,
    ) -> Answers<T>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        self.gather(0..self.members.len(), limit, op, settled).await
    }

    /// An error saying too few masters answered, naming each that failed:
    /// `Unanswered` when those yet to answer could have made the majority.
    fn unreachable<T>(&self, what: &str, answers: &Answers<T>) -> Error {
        let ok = answered(answers, |_| true);
        let failed: Vec<String> = answers
            .iter()
            .zip(&self.members)
            .filter_map(|(a, m)| match a {
                Some(Err(e)) => Some(format!("{}: {e}", m.describe())),
                _ => None,
            })
            .collect();
        let silent = answers.iter().filter(|a| a.is_none()).count();
        let mut why = failed;
        if silent > 0 {
            why.push(format!("{silent} not heard from yet"));
        }
        let why = why.join("; ");
        let message = format!(
            "{what} needs {} of {} masters, and only {ok} answered ({why})",
            self.needed(),
            self.members.len()
        );
        // Enough masters still working on it to have made the majority: slow, not gone.
        if ok + silent >= self.needed() {
            Error::Unanswered(message)
        } else {
            Error::Connection(message)
        }
    }

    /// One attempt: taken when a majority grants it (with a fence a majority
    /// carries, and the worst shortfall of the masters that granted it); otherwise every grant is given back (when `ours`: a
    /// restored token's holds are its owner's) and the longest hold found
    /// is reported, or an error when a majority could not be asked.
    pub(crate) async fn obtain(&self, mode: &impl Steps, ask: &Obtaining<'_>, ours: bool) -> Result<Obtain> {
        self.ready().await?;
        let (n, need, token) = (self.members.len(), self.needed(), ask.token);
        let limit = self.limit(ask.ttl);
        let answers = self
            .on_all(
                limit,
                |m| mode.obtain_on(m, ask, true),
                |a| {
                    let granted = answered(a, |o| matches!(o, Obtain::Taken { .. }));
                    let busy = answered(a, |o| matches!(o, Obtain::Busy { .. }));
                    let pending = a.iter().filter(|x| x.is_none()).count();
                    let refused = n - granted - pending;
                    // Not taken; but whether it is busy (a majority answered)
                    // or the masters cannot be reached must be decided too:
                    // a live master a little behind is waited for (up to the
                    // limit) when its answer would make the difference.
                    let busy_or_unreachable = busy + granted >= need || busy + granted + pending < need;
                    granted >= need || (refused > n - need && busy_or_unreachable)
                },
            )
            .await;
        let granted: Vec<(usize, i64)> = answers
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                Some(Ok(Obtain::Taken { fence, .. })) => Some((i, *fence)),
                _ => None,
            })
            .collect();
        // The earliest sending of the answers counted: a hold on a master
        // lasts its ttl from when its attempt reached it, which is later.
        let sent = |taken: bool| {
            let counted =
                answers.iter().flatten().flatten().filter(|o| !taken || matches!(o, Obtain::Taken { .. }));
            counted.map(Obtain::sent).min().unwrap_or_else(std::time::Instant::now)
        };
        if granted.len() >= need {
            if let Some(fence) = self.settle_fence(mode, token, &granted, limit).await {
                let shortfall = worst(&answers, Obtain::shortfall);
                return Ok(Obtain::Taken { fence, shortfall, sent: sent(true), written: None });
            }
        }
        if ours && !granted.is_empty() {
            // Given back where granted; and sent to the masters yet to
            // answer too, which run it after their obtain (a late grant).
            let gave: Vec<usize> = granted.iter().map(|(i, _)| *i).collect();
            let back = |a: &Answers<Released>| gave.iter().all(|i| a[*i].is_some());
            let token = token.into();
            let holder = Holder::of(&token);
            self.on_all(limit, |m| mode.release_on(m, &holder), back).await;
        }
        let busy: Vec<i64> = answers
            .iter()
            .filter_map(|a| match a {
                Some(Ok(Obtain::Busy { pttl_ms, .. })) => Some(*pttl_ms),
                _ => None,
            })
            .collect();
        if busy.len() + granted.len() < need {
            return Err(self.unreachable("taking the lock", &answers));
        }
        let pttl_ms = if busy.contains(&-1) { -1 } else { busy.iter().copied().max().unwrap_or(-2) };
        Ok(Obtain::Busy { pttl_ms, sent: sent(false) })
    }

    /// The fence of a hold a majority granted: the highest given, once a
    /// majority carries it (those that gave less are raised to it).
    /// `None` when too few could be raised.
    async fn settle_fence(
        &self,
        mode: &impl Steps,
        token: &str,
        granted: &[(usize, i64)],
        limit: Duration,
    ) -> Option<i64> {
        if !mode.fenced() {
            return Some(0);
        }
        let need = self.needed();
        let top = granted.iter().map(|(_, f)| *f).max()?;
        let agreeing = granted.iter().filter(|(_, f)| *f == top).count();
        if agreeing >= need {
            return Some(top);
        }
        let behind = granted.iter().filter(|(_, f)| *f < top).map(|(i, _)| *i);
        let raised = self
            .gather(
                behind,
                limit,
                |m| mode.fence_raise_on(m, token, top),
                |a| agreeing + answered(a, |ok| *ok) >= need,
            )
            .await;
        let raised = answered(&raised, |ok| *ok);
        (agreeing + raised >= need).then_some(top)
    }

    /// A renewal: held when a majority renewed (with the worst shortfall of
    /// the masters that did), not when a majority can no longer (the hold is
    /// lost), an error when too few answered to say.
    pub(crate) async fn refresh(
        &self,
        mode: &impl Steps,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> Result<Refreshed> {
        self.renewal(ttl, |m| mode.refresh_on(m, holder, ttl)).await
    }

    /// `refresh`, as the watchdog sends it: on each master, in one call with
    /// the other renewals that fall due with it there (`Steps::renew_on`).
    pub(crate) async fn renew(
        &self,
        mode: &impl Steps,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> Result<Refreshed> {
        self.renewal(ttl, |m| mode.renew_on(m, holder, ttl)).await
    }

    /// A renewal for `ttl`, sent to each master by `op`, decided as `refresh` says.
    async fn renewal<'a, F, Fut>(&'a self, ttl: Duration, op: F) -> Result<Refreshed>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<Refreshed>> + 'a,
    {
        self.ready().await?;
        let (n, need) = (self.members.len(), self.needed());
        let answers = self
            .on_all(self.limit(ttl), op, |a| {
                let renewed = answered(a, |r| r.held);
                let refused = answered(a, |r| !r.held);
                renewed >= need || refused > n - need
            })
            .await;
        let renewed = answered(&answers, |r| r.held);
        let refused = answered(&answers, |r| !r.held);
        if renewed >= need {
            Ok(Refreshed { held: true, shortfall: worst(&answers, |r| r.shortfall), written: None })
        } else if refused > n - need {
            Ok(Refreshed { held: false, shortfall: None, written: None })
        } else {
            Err(self.unreachable("renewing the lock", &answers))
        }
    }

    /// Runs `op` on every master, settled once a majority answered (then
    /// the short grace of `gather`), at most the command timeout.
    async fn on_majority<'a, T, F, Fut>(&'a self, op: F) -> Answers<T>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<T>> + 'a,
    {
        let need = self.needed();
        self.on_all(self.command_timeout, op, |a| answered(a, |_| true) >= need).await
    }

    /// Releases on every master. It was held when no majority said it was
    /// not (masters that did not answer may still have it: they release it
    /// when their command runs, or it expires).
    pub(crate) async fn release(&self, mode: &impl Steps, holder: &Holder<'_>) -> Result<Released> {
        self.ready().await?;
        let need = self.needed();
        let answers = self.on_majority(|m| mode.release_on(m, holder)).await;
        let held = answered(&answers, |r| r.held);
        let gone = answered(&answers, |r| !r.held);
        if held == 0 && gone == 0 {
            return Err(self.unreachable("releasing the lock", &answers));
        }
        Ok(Released { held: gone < need, retried: false })
    }

    /// Runs a step on every master for its side effects (a writer's intent
    /// withdrawn), succeeding when a majority did it.
    pub(crate) async fn each<'a, F, Fut>(&'a self, what: &str, op: F) -> Result<()>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<()>> + 'a,
    {
        self.ready().await?;
        let answers = self.on_majority(op).await;
        let done = answered(&answers, |()| true);
        if done >= self.needed() {
            Ok(())
        } else {
            Err(self.unreachable(what, &answers))
        }
    }

    /// Whether `op` answered true on any master; a majority must answer.
    pub(crate) async fn any<'a, F, Fut>(&'a self, what: &str, op: F) -> Result<bool>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<bool>> + 'a,
    {
        self.ready().await?;
        let answers = self.on_majority(op).await;
        if answered(&answers, |_| true) < self.needed() {
            return Err(self.unreachable(what, &answers));
        }
        Ok(answers.iter().any(|a| matches!(a, Some(Ok(true)))))
    }

    /// The holder of each key as a majority sees it: the token a majority
    /// of masters name, with the fence and the time left a majority has (the
    /// `need`-th largest of each: a master whose grant came too late to
    /// count may hold a higher fence, not the hold's). `None` where no token
    /// has a majority.
    pub(crate) async fn inspect(&self, mode: &impl Steps) -> Result<Vec<Option<Record>>> {
        self.ready().await?;
        let need = self.needed();
        let answers = self.on_majority(|m| mode.inspect_on(m)).await;
        let seen: Vec<&Vec<Option<Record>>> =
            answers.iter().filter_map(|a| a.as_ref()?.as_ref().ok()).collect();
        if seen.len() < need {
            return Err(self.unreachable("inspecting the lock", &answers));
        }
        let keys = seen.iter().map(|s| s.len()).max().unwrap_or(0);
        Ok((0..keys)
            .map(|k| {
                let records: Vec<&Record> = seen.iter().filter_map(|s| s.get(k)?.as_ref()).collect();
                records.iter().find_map(|first| {
                    let same: Vec<&&Record> = records.iter().filter(|r| r.token == first.token).collect();
                    (same.len() >= need).then(|| Record {
                        token: first.token.clone(),
                        metadata: first.metadata.clone(),
                        fence: majority(same.iter().map(|r| r.fence).collect(), need),
                        pttl_ms: majority(same.iter().map(|r| r.pttl_ms).collect(), need),
                    })
                })
            })
            .collect())
    }

    /// A count taken on every master (`probe` answers a number each), as a
    /// majority sees it: the `need`-th largest.
    pub(crate) async fn majority_value<'a, F, Fut>(&'a self, what: &str, probe: F) -> Result<i64>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<i64>> + 'a,
    {
        self.ready().await?;
        let answers = self.on_majority(probe).await;
        let values: Vec<i64> = answers.iter().filter_map(|a| a.as_ref()?.as_ref().ok().copied()).collect();
        if values.len() < self.needed() {
            return Err(self.unreachable(what, &answers));
        }
        Ok(majority(values, self.needed()))
    }
}

/// How many masters answered, and with something `is` accepts.
fn answered<T>(answers: &Answers<T>, is: impl Fn(&T) -> bool) -> usize {
    answers.iter().filter(|a| matches!(a, Some(Ok(v)) if is(v))).count()
}

/// The worst shortfall among the masters' answers (the fewest replicas
/// acknowledged), as one server's step reports it: the hold is only as
/// safe as its least replicated master.
fn worst<T>(answers: &Answers<T>, shortfall: impl Fn(&T) -> Option<Shortfall>) -> Option<Shortfall> {
    let each = answers.iter().filter_map(|a| match a {
        Some(Ok(answer)) => shortfall(answer),
        _ => None,
    });
    each.min_by_key(|s| s.acked)
}

/// The `need`-th largest of `values` (what a majority has at least), or -2
/// when fewer.
fn majority(mut values: Vec<i64>, need: usize) -> i64 {
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.get(need.saturating_sub(1)).copied().unwrap_or(-2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_sees_the_need_th_largest() {
        assert_eq!(majority(vec![100, 300, 200], 2), 200);
        assert_eq!(majority(vec![100, -2, 200, 50, 400], 3), 100);
        assert_eq!(majority(vec![100], 2), -2);
    }

    #[test]
    fn the_worst_shortfall_of_the_masters_counts() {
        let on = |replicas| crate::transport::replication::Replication { replicas, ..Default::default() };
        let renewed = |acked: Option<u32>| Refreshed {
            held: true,
            shortfall: acked.map(|a| on(3).shortfall(a)),
            written: None,
        };
        let answers: Answers<Refreshed> = vec![
            Some(Ok(renewed(Some(2)))),
            Some(Ok(renewed(Some(0)))),
            None,
            Some(Err(Error::Connection("down".into()))),
            Some(Ok(renewed(Some(1)))),
            Some(Ok(renewed(None))),
        ];
        assert_eq!(worst(&answers, |r| r.shortfall).map(|s| s.acked), Some(0));
        let acknowledged: Answers<Refreshed> = vec![Some(Ok(renewed(None))), None];
        assert_eq!(worst(&acknowledged, |r| r.shortfall), None);
        // a tie keeps the first master's
        let tie = on(2).shortfall(1);
        let sent = std::time::Instant::now();
        let even: Answers<Obtain> = vec![
            Some(Ok(Obtain::Taken { fence: 1, shortfall: Some(tie), sent, written: None })),
            Some(Ok(Obtain::Busy { pttl_ms: 5, sent })),
            Some(Ok(Obtain::Taken { fence: 2, shortfall: Some(on(3).shortfall(1)), sent, written: None })),
        ];
        assert_eq!(worst(&even, Obtain::shortfall), Some(tie));
    }
}
