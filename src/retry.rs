//! How long to wait between attempts to take a busy lock.

use std::time::Duration;

use crate::token::random_unit;

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
}
