//! Riding through an outage while waiting: a server restart, a Cluster or
//! Sentinel failover, a quorum's majority briefly out of reach.

use std::time::{Duration, Instant};

use super::Wait;
use crate::client::Client;
use crate::error::Error;
use crate::support::retry::{Pauses, Retry};

/// A waiter riding through a server restart, a failover, or a quorum's
/// majority briefly out of reach. An attempt that fails because its server
/// (its slot's master, a majority of the masters) cannot be reached or cannot
/// serve (restarting, killed, being replaced, CLUSTERDOWN) is tried again,
/// after a short pause, instead of ending the acquire: until the acquire's
/// deadline when it has one; without one, as long as the hold it waits
/// behind could still be valid (its ttl left at the last busy answer), and
/// for at least a connect plus a command timeout from the first failure.
/// Only a waiter rides through: an acquire whose first attempt fails reports
/// the error at once, unless a quorum's masters were only slow to answer it
/// (`Error::Unanswered`): a blocking acquire then tries again for up to a
/// connect plus a command timeout, never past its deadline.
#[derive(Default)]
pub(super) struct Outage {
    /// When the last busy answer came, and the holder's ttl left then.
    busy: Option<(Instant, i64)>,
    /// Since the first failing attempt: until when to keep trying, and the next pause.
    riding: Option<(Instant, Pauses)>,
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
    pub(super) fn ride(&mut self, e: &Error, client: &Client, wait: Wait) -> Option<Duration> {
        let slow = matches!(e, Error::Unanswered(_));
        if !slow && !matches!(e, Error::Connection(_)) {
            return None;
        }
        let now = Instant::now();
        if self.riding.is_none() {
            let opts = client.options();
            let least = now + opts.connect_timeout + opts.command_timeout;
            let until = match (self.busy, wait) {
                (_, Wait::No) | (None, _) if !slow => return None,
                (_, Wait::No) => return None,
                // A first attempt the quorum's masters were too slow for.
                (None, Wait::Until(deadline)) => deadline.min(least),
                (None, Wait::Forever) => least,
                (Some(_), Wait::Until(deadline)) => deadline,
                (Some((at, pttl_ms)), Wait::Forever) => {
                    (at + Duration::from_millis(pttl_ms.max(0) as u64)).max(least)
                }
            };
            log::info!(
                "{e}; waiting until the lock is served again (a failover or an outage may be under way)"
            );
            self.riding = Some((until, Retry::doubling(Self::FIRST_PAUSE, Self::LONGEST_PAUSE).pauses()));
        }
        let (until, pauses) = self.riding.as_mut()?;
        if now >= *until {
            return None;
        }
        Some(pauses.pause().min(*until - now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::backend::ClientOptions;

    fn client(url: &str) -> Client {
        let opts = ClientOptions {
            url: url.into(),
            connect_timeout: Duration::from_millis(100),
            command_timeout: Duration::from_millis(100),
            ..ClientOptions::default()
        };
        Client::new(opts).unwrap()
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

        // With a deadline: until it, whatever the holder had left, never past it.
        let mut outage = Outage::default();
        outage.busy(0);
        let deadline = Instant::now() + Duration::from_millis(400);
        assert!(outage.ride(&down, &cluster, Wait::Until(deadline)).is_some());
        std::thread::sleep(Duration::from_millis(250));
        assert!(outage.ride(&down, &cluster, Wait::Until(deadline)).is_some(), "past the holder's ttl");
        std::thread::sleep(Duration::from_millis(160));
        assert_eq!(outage.ride(&down, &cluster, Wait::Until(deadline)), None);
        outage.over();
        assert!(outage.ride(&down, &cluster, Wait::Forever).is_some(), "a new outage after an answer");
    }

    #[test]
    fn a_blocking_acquire_rides_out_masters_slow_to_answer_its_first_attempt() {
        let quorum = client("redis://127.0.0.1:6379/0");
        let slow = Error::Unanswered("taking the lock needs 2 of 3 masters, and only 1 answered".into());
        let down = Error::Connection("taking the lock needs 2 of 3 masters, and only 0 answered".into());
        assert_eq!(Outage::default().ride(&slow, &quorum, Wait::No), None, "a try: the error is reported");
        assert_eq!(Outage::default().ride(&down, &quorum, Wait::Forever), None, "gone, not slow: reported");
        // A connect plus a command timeout (200 ms here), never past the deadline.
        let mut outage = Outage::default();
        assert_eq!(outage.ride(&slow, &quorum, Wait::Forever), Some(Outage::FIRST_PAUSE));
        std::thread::sleep(Duration::from_millis(210));
        assert_eq!(outage.ride(&slow, &quorum, Wait::Forever), None, "still unanswered: reported");
        let mut outage = Outage::default();
        let deadline = Instant::now() + Duration::from_millis(50);
        assert!(outage.ride(&slow, &quorum, Wait::Until(deadline)).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(outage.ride(&slow, &quorum, Wait::Until(deadline)), None, "the acquire's deadline passed");
    }

    #[test]
    fn a_waiter_on_one_server_rides_out_its_restart_until_its_deadline() {
        let node = client("redis://127.0.0.1:6379/0");
        let down = Error::Connection("cannot reach Redis".into());
        let mut outage = Outage::default();
        assert_eq!(outage.ride(&down, &node, Wait::Forever), None, "not a waiter: the error is reported");
        outage.busy(10);
        let deadline = Instant::now() + Duration::from_millis(300);
        assert!(outage.ride(&down, &node, Wait::Until(deadline)).is_some());
        std::thread::sleep(Duration::from_millis(310));
        assert_eq!(outage.ride(&down, &node, Wait::Until(deadline)), None, "the acquire's deadline passed");
    }
}
