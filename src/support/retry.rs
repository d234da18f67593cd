//! How long to wait between attempts: to take a busy lock (the caller's
//! `Retry`), and in every retry of the library's own (`Retry::doubling`,
//! walked by `Pauses`).

use std::time::Duration;

use crate::support::token::random_unit;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Backoff {
    /// One attempt only.
    None,
    Fixed(Duration),
    /// `step`, `2*step`, ... capped at `max`.
    Linear {
        step: Duration,
        max: Duration,
    },
    /// `min`, `2*min`, `4*min`, ... capped at `max`; with jitter each wait is
    /// drawn from [wait/2, wait] so contending clients spread out.
    Exponential {
        min: Duration,
        max: Duration,
        jitter: bool,
    },
}

/// A backoff plus an optional cap on the total number of attempts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Retry {
    pub backoff: Backoff,
    pub attempts: Option<u32>,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            backoff: Backoff::Exponential {
                min: Duration::from_millis(2),
                max: Duration::from_millis(100),
                jitter: true,
            },
            attempts: None,
        }
    }
}

impl Retry {
    pub fn none() -> Self {
        Retry { backoff: Backoff::None, attempts: Some(1) }
    }

    /// `first`, `2*first`, `4*first`, ... up to `longest`, without jitter
    /// and without end: the pauses of the library's own retries.
    pub(crate) fn doubling(first: Duration, longest: Duration) -> Self {
        Retry { backoff: Backoff::Exponential { min: first, max: longest, jitter: false }, attempts: None }
    }

    /// At most `attempts` attempts in all.
    pub(crate) fn at_most(self, attempts: u32) -> Self {
        Retry { attempts: Some(attempts), ..self }
    }

    /// Its delays one after another: the first after the first failure.
    pub(crate) fn pauses(self) -> Pauses {
        Pauses { retry: self, failed: 0 }
    }

    /// The wait after `failed` attempts (1 after the first), or `None` to give up.
    pub fn delay(&self, failed: u32) -> Option<Duration> {
        if self.attempts.is_some_and(|n| failed >= n) {
            return None;
        }
        let n = failed.max(1);
        match &self.backoff {
            Backoff::None => None,
            Backoff::Fixed(d) => Some(*d),
            Backoff::Linear { step, max } => Some(step.saturating_mul(n).min(*max)),
            Backoff::Exponential { min, max, jitter } => {
                let wait = min.saturating_mul(1u32 << (n - 1).min(20)).min(*max);
                Some(if *jitter { wait.mul_f64(0.5 + random_unit() / 2.0) } else { wait })
            }
        }
    }
}

/// The delays of a `Retry`, one per failed attempt; `None` once it gives up.
pub(crate) struct Pauses {
    retry: Retry,
    failed: u32,
}

impl Iterator for Pauses {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.failed = self.failed.saturating_add(1);
        self.retry.delay(self.failed)
    }
}

impl Pauses {
    /// The next delay of a retry without end (`Retry::doubling`).
    pub(crate) fn pause(&mut self) -> Duration {
        self.next().unwrap_or_default()
    }
}

/// How long a waiter that wake-ups reach waits, at most, before it looks
/// again on its own, when its strategy is the default one: a release wakes
/// it, so this only bounds the wait if a wake-up were lost (jittered, as
/// the default's delays are: half of it to all of it).
const DEFAULT_SAFETY_NET: Duration = Duration::from_secs(1);

impl Retry {
    /// The pause of a waiter that wake-ups reach (subscribed to its lock's
    /// releases), where the strategy is only the safety net: with the
    /// default strategy, `DEFAULT_SAFETY_NET`; with a strategy of the
    /// caller's, its longest delay (jittered as its delays are); never less
    /// than `delay`, the delay it gave for this attempt. The ramp from a
    /// short first delay is for a waiter that polls: one woken by a release
    /// needs no early look.
    pub fn safety_net(&self, delay: Duration) -> Duration {
        let jittered =
            |d: Duration, jitter: bool| if jitter { d.mul_f64(0.5 + random_unit() / 2.0) } else { d };
        let longest = match &self.backoff {
            _ if *self == Retry::default() => jittered(DEFAULT_SAFETY_NET, true),
            Backoff::None => return delay,
            Backoff::Fixed(d) => *d,
            Backoff::Linear { max, .. } => *max,
            Backoff::Exponential { max, jitter, .. } => jittered(*max, *jitter),
        };
        longest.max(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn strategies() {
        assert_eq!(Retry::none().delay(1), None);
        let fixed = Retry { backoff: Backoff::Fixed(5 * MS), attempts: Some(3) };
        assert_eq!(fixed.delay(1), Some(5 * MS));
        assert_eq!(fixed.delay(2), Some(5 * MS));
        assert_eq!(fixed.delay(3), None);
        let lin = Retry { backoff: Backoff::Linear { step: 10 * MS, max: 25 * MS }, attempts: None };
        assert_eq!(lin.delay(1), Some(10 * MS));
        assert_eq!(lin.delay(2), Some(20 * MS));
        assert_eq!(lin.delay(9), Some(25 * MS));
        let exp =
            Retry { backoff: Backoff::Exponential { min: MS, max: 16 * MS, jitter: false }, attempts: None };
        let waits: Vec<_> = (1..=6).map(|i| exp.delay(i).unwrap()).collect();
        assert_eq!(waits, [MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS, 16 * MS]);
        let jit = Retry::default();
        for i in 1..50 {
            let d = jit.delay(i).unwrap();
            assert!(d >= MS && d <= 100 * MS, "{d:?}");
        }
    }

    #[test]
    fn the_librarys_own_retries_double() {
        let mut doubling = Retry::doubling(5 * MS, 16 * MS).pauses();
        let waits: Vec<_> = (0..4).map(|_| doubling.pause()).collect();
        assert_eq!(waits, [5 * MS, 10 * MS, 16 * MS, 16 * MS]);
        let bounded: Vec<_> = Retry::doubling(20 * MS, 500 * MS).at_most(3).pauses().collect();
        assert_eq!(bounded, [20 * MS, 40 * MS], "3 attempts, 2 pauses between them");
    }

    #[test]
    fn a_waiter_woken_by_releases_waits_the_longest_delay() {
        let exp =
            Retry { backoff: Backoff::Exponential { min: MS, max: 16 * MS, jitter: false }, attempts: None };
        assert_eq!(exp.safety_net(MS), 16 * MS);
        let lin = Retry { backoff: Backoff::Linear { step: 10 * MS, max: 25 * MS }, attempts: None };
        assert_eq!(lin.safety_net(10 * MS), 25 * MS);
        let fixed = Retry { backoff: Backoff::Fixed(5 * MS), attempts: None };
        assert_eq!(fixed.safety_net(5 * MS), 5 * MS);
        for _ in 0..50 {
            let d = Retry::default().safety_net(2 * MS);
            assert!(d >= 500 * MS && d <= 1000 * MS, "{d:?}");
        }
    }
}
