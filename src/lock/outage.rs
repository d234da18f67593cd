//! Riding through an outage while waiting: a Cluster failover, a quorum's
//! majority briefly out of reach.

use std::time::{Duration, Instant};

use super::Wait;
use crate::deployment::Deployment;
use crate::error::Error;

/// A waiter riding through a Redis Cluster failover, or a quorum's majority
/// briefly out of reach. An attempt that fails because its slot's master (or
/// a majority of the masters) cannot be reached or cannot serve (killed,
/// being replaced, CLUSTERDOWN) is tried again, after a short pause, instead of
/// ending the acquire, as long as the hold it waits behind could still be
/// valid (its ttl left at the last busy answer), and for at least a connect
/// plus a command timeout from the first failure; never past the acquire's
/// deadline. Only a waiter rides through: an acquire whose first attempt
/// fails reports the error at once, as on a single node.
#[derive(Default)]
pub(super) struct Outage {
    /// When the last busy answer came, and the holder's ttl left then.
    busy: Option<(Instant, i64)>,
    /// Since the first failing attempt: until when to keep trying, and the next pause.
    riding: Option<(Instant, Duration)>,
}

impl Outage {
    const FIRST_PAUSE: Duration = Duration::from_millis(10);
    const LONGEST_PAUSE: Duration = Duration::from_millis(200);

    pub(super) fn busy(&mut self, pttl_ms: i64) {
        self.busy = Some((Instant::now(), pttl_ms));
    }

    pub(super) fn over(&mut self) {
        self.riding = None;
    }

    /// The pause before trying again after `e`, or `None` to give up with it.
    pub(super) fn ride(&mut self, e: &Error, client: &Deployment, wait: Wait) -> Option<Duration> {
        let rides = client.is_cluster() || client.masters() > 1;
        if !rides || !matches!(e, Error::Connection(_)) {
            return None;
        }
        let now = Instant::now();
        let (until, pause) = if let Some(riding) = self.riding {
            riding
        } else {
            let (at, pttl_ms) = self.busy?;
            let opts = client.options();
            let holder = at + Duration::from_millis(pttl_ms.max(0) as u64);
            let mut until = holder.max(now + opts.connect_timeout + opts.command_timeout);
            if let Wait::Until(deadline) = wait {
                until = until.min(deadline);
            }
            log::info!(
                "{e}; waiting until the lock is served again (a failover or an outage may be under way)"
            );
            (until, Self::FIRST_PAUSE)
        };
        if now >= until {
            return None;
        }
        self.riding = Some((until, (pause * 2).min(Self::LONGEST_PAUSE)));
        Some(pause.min(until - now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientOptions;

    fn client(url: &str) -> Deployment {
        let opts = ClientOptions {
            url: url.into(),
            connect_timeout: Duration::from_millis(100),
            command_timeout: Duration::from_millis(100),
            ..ClientOptions::default()
        };
        Deployment::new(opts).unwrap()
    }

    #[test]
    fn a_cluster_waiter_rides_through_a_failover_for_as_long_as_the_hold_it_waits_on() {
        let cluster = client("redis+cluster://127.0.0.1:7000");
        let down = Error::Connection("cannot reach Redis".into());
        let mut outage = Outage::default();
        assert_eq!(
            outage.ride(&down, &cluster, Wait::Forever),
            None,
            "not a waiter yet: the error is reported"
        );
        outage.busy(400);
        let pauses: Vec<_> = (0..6).map(|_| outage.ride(&down, &cluster, Wait::Forever).unwrap()).collect();
        assert_eq!(pauses[0], Outage::FIRST_PAUSE);
        assert!(pauses.windows(2).all(|w| w[1] >= w[0]) && pauses[5] == Outage::LONGEST_PAUSE, "{pauses:?}");
        let other = Error::Redis("WRONGTYPE".into());
        assert_eq!(outage.ride(&other, &cluster, Wait::Forever), None, "not a failover: reported");
        std::thread::sleep(Duration::from_millis(410));
        assert_eq!(outage.ride(&down, &cluster, Wait::Forever), None, "the hold it waited on has expired");

        // At least a connect plus a command timeout, never past the deadline.
        let mut outage = Outage::default();
        outage.busy(0);
        let deadline = Instant::now() + Duration::from_millis(50);
        assert!(outage.ride(&down, &cluster, Wait::Until(deadline)).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(outage.ride(&down, &cluster, Wait::Until(deadline)), None);
        outage.over();
        assert!(outage.ride(&down, &cluster, Wait::Forever).is_some(), "a new outage after an answer");

        let node = client("redis://127.0.0.1:6379/0");
        let mut outage = Outage::default();
        outage.busy(10_000);
        assert_eq!(outage.ride(&down, &node, Wait::Forever), None, "a single node reports it at once");
    }
}
