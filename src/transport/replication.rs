//! Replica acknowledgement: after a script makes or re-asserts a hold, wait
//! until `replicas` replicas have it, with `WAIT numreplicas timeout` (or
//! `WAITAOF 0 numreplicas timeout` when they must also have written it to
//! their append-only file). The wait is pipelined behind the script on the
//! very connection that ran it, because WAIT counts that connection's own
//! writes: a WAIT sent on another connection (or after a reconnect) would
//! find nothing to wait for and succeed at once.
//!
//! Here is the mechanism and what a shortfall looks like. A step that makes
//! or re-asserts a hold returns its shortfall with its answer
//! (`scripts::run_held`; on a quorum, the worst of the masters'). What a lock does
//! about one (undo the grant, not count the renewal, or warn) is the
//! policy, applied where the lock's steps are (`lock.rs`, `watchdog.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Cmd, RedisResult, Value};

use crate::error::{Error, Result};
use crate::support::events::{self, Event, HoldId, ReplicaStep, Subject};

/// What a lock does when the replicas do not acknowledge a step in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// A grant is undone and the acquire fails; a renewal does not count (the
    /// hold keeps its last acknowledged validity, and the watchdog retries).
    Fail,
    /// The step counts all the same; a warning is logged and an event told.
    Warn,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Fail => "fail",
            Policy::Warn => "warn",
        }
    }

    /// `"fail"` or `"warn"`.
    pub fn parse(s: &str) -> Result<Policy> {
        match s {
            "fail" => Ok(Policy::Fail),
            "warn" => Ok(Policy::Warn),
            other => Err(Error::InvalidArgument(format!(
                "replica_policy must be \"fail\" (undo a grant the replicas did not acknowledge, and do \
                 not count such a renewal) or \"warn\" (keep it and log a warning), got {other:?}"
            ))),
        }
    }
}

/// How many replicas must acknowledge each grant and renewal, and how long
/// to wait for them. `replicas == 0` (the default) turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    pub replicas: u32,
    /// How long the server waits for the acknowledgements (milliseconds on the wire).
    pub timeout: Duration,
    pub policy: Policy,
    /// The replicas must have written the step to their append-only file
    /// (`WAITAOF`, Redis 7.2 and newer), not only received it.
    pub fsync: bool,
}

impl Default for Replication {
    fn default() -> Self {
        Replication { replicas: 0, timeout: DEFAULT_TIMEOUT, policy: Policy::Fail, fsync: false }
    }
}

/// `replica_timeout` when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

impl Replication {
    pub fn is_on(&self) -> bool {
        self.replicas > 0
    }

    /// Checks the settings against the client's `command_timeout`, which the
    /// script and its wait must fit in together.
    pub fn validate(&self, command_timeout: Duration) -> Result<()> {
        if self.fsync && !self.is_on() {
            return Err(Error::InvalidArgument(
                "replica_fsync=True needs replicas=1 or more (how many replicas must have written each \
                 grant to their append-only file)"
                    .into(),
            ));
        }
        if !self.is_on() {
            return Ok(());
        }
        if self.timeout < Duration::from_millis(1) {
            return Err(Error::InvalidArgument(format!(
                "replica_timeout must be at least 0.001 seconds (Redis waits for replicas in whole \
                 milliseconds, and 0 would mean forever), got {}",
                self.timeout.as_secs_f64()
            )));
        }
        if self.timeout >= command_timeout {
            return Err(Error::InvalidArgument(format!(
                "replica_timeout ({} s) must be shorter than command_timeout ({} s): the script and the wait \
                 for its replicas are one command exchange; lower replica_timeout or raise command_timeout",
                self.timeout.as_secs_f64(),
                command_timeout.as_secs_f64()
            )));
        }
        Ok(())
    }

    /// Redis's timeout argument: whole milliseconds, never 0 (which blocks forever).
    fn timeout_ms(&self) -> u64 {
        (self.timeout.as_millis() as u64).max(1)
    }

    /// `WAIT n ms`, or `WAITAOF 0 n ms` (no local fsync asked: `appendfsync`
    /// on the master is the master's own setting).
    pub(crate) fn wait_cmd(&self) -> redis::Cmd {
        if self.fsync {
            redis::cmd("WAITAOF").arg(0).arg(self.replicas).arg(self.timeout_ms()).take()
        } else {
            redis::cmd("WAIT").arg(self.replicas).arg(self.timeout_ms()).take()
        }
    }

    /// The replicas that acknowledged, from WAIT's reply (a number) or
    /// WAITAOF's (`[local, replicas]`).
    pub(crate) fn acked(&self, reply: &Value) -> std::result::Result<u32, String> {
        let count = match (self.fsync, reply) {
            (false, Value::Int(n)) => *n,
            (true, Value::Array(items)) if items.len() == 2 => match items[1] {
                Value::Int(n) => n,
                _ => return Err(format!("unexpected WAITAOF reply {reply:?}")),
            },
            _ => return Err(format!("unexpected reply to {} {reply:?}", self.command())),
        };
        Ok(u32::try_from(count.max(0)).unwrap_or(u32::MAX))
    }

    fn command(&self) -> &'static str {
        if self.fsync {
            "WAITAOF"
        } else {
            "WAIT"
        }
    }

    pub(crate) fn shortfall(&self, acked: u32) -> Shortfall {
        Shortfall { acked, wanted: self.replicas, timeout: self.timeout, fsync: self.fsync }
    }
}

/// A step the replicas did not acknowledge in time: how many did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    pub acked: u32,
    pub wanted: u32,
    pub timeout: Duration,
    pub fsync: bool,
}

impl Shortfall {
    /// "0 of 1 replicas acknowledged it within 0.05 s".
    pub fn describe(&self) -> String {
        format!(
            "{} of {} replica{} {} within {} s",
            self.acked,
            self.wanted,
            if self.wanted == 1 { "" } else { "s" },
            if self.fsync { "wrote it to their append-only file" } else { "acknowledged it" },
            self.timeout.as_secs_f64()
        )
    }
}

/// Runs the step `script` and then WAIT (or WAITAOF) in one pipeline on
/// `conn`, and returns the script's reply with how many replicas
/// acknowledged; `None` on NOSCRIPT (the server has not loaded the script: a
/// restart, SCRIPT FLUSH, a replica just promoted): the script did not run,
/// and the caller loads it and sends the pipeline again.
pub(crate) async fn invoke_acked(
    conn: &mut impl redis::aio::ConnectionLike,
    script: Cmd,
    replication: &Replication,
) -> RedisResult<Option<(Value, u32)>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors().add_command(script).add_command(replication.wait_cmd());
    let replies: Vec<Value> = pipe.query_async(conn).await?;
    if replies.first().is_some_and(is_noscript) {
        return Ok(None);
    }
    let mut replies = replies.into_iter();
    let (Some(script), Some(wait)) = (replies.next(), replies.next()) else {
        return Err((redis::ErrorKind::Client, "a script and its WAIT gave fewer than two replies").into());
    };
    let script = script.extract_error()?;
    let acked = replication
        .acked(&wait.extract_error()?)
        .map_err(|detail| redis::RedisError::from((redis::ErrorKind::Client, "bad wait reply", detail)))?;
    Ok(Some((script, acked)))
}

fn is_noscript(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(_))
        && reply
            .clone()
            .extract_error()
            .is_err_and(|e| e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
}

/// Lets a warning through at most once per `every`, and counts the ones held back.
pub(crate) struct Throttle {
    every: Duration,
    /// When the last one went out, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    pub(crate) const fn new(every: Duration) -> Throttle {
        Throttle { every, state: Mutex::new((None, 0)) }
    }

    /// `Some(held back since the last one)` when a warning may go out at `now`.
    pub(crate) fn pass(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (last, held) = &mut *state;
        if last.is_some_and(|t| now.saturating_duration_since(t) < self.every) {
            *held += 1;
            return None;
        }
        *last = Some(now);
        Some(std::mem::take(held))
    }
}

/// One warning about unacknowledged steps per 10 s and client: a replica
/// that lags lags for every lock of the client at once.
pub(crate) const REPLICA_WARNINGS_EVERY: Duration = Duration::from_secs(10);

/// Logs `message` at WARNING, unless `throttle` let another one out lately
/// (then it is counted, and the next one says how many were held back).
pub(crate) fn warn(throttle: &Throttle, message: impl FnOnce() -> String) {
    if let Some(held) = throttle.pass(Instant::now()) {
        let more = if held > 0 {
            format!(" ({held} more like it in the last 10 s not logged)")
        } else {
            String::new()
        };
        log::warn!("{}{more}", message());
    }
}

/// Tells of a step of `label`'s hold that the replicas did not acknowledge
/// in time: an event for observers, and a (throttled) warning when the step
/// counted all the same (`kept`) or is a renewal to be retried. A grant or
/// an extend that does not count raises instead, which says it.
pub(crate) fn unacknowledged(
    warnings: &Throttle,
    subject: &Arc<Subject>,
    label: &str,
    step: ReplicaStep,
    shortfall: &Shortfall,
    kept: bool,
    hold: Option<HoldId>,
) {
    events::emit(|| Event::Unreplicated { subject, step, kept, hold });
    if kept {
        warn(warnings, || {
            format!(
                "the {} of {label} was not acknowledged by enough replicas: {}; it counts all the same \
                 (replica_policy \"warn\"), but a failover now could lose it",
                step.as_str(),
                shortfall.describe()
            )
        });
    } else if step == ReplicaStep::Renewal {
        warn(warnings, || {
            format!(
                "the renewal of {label} was not acknowledged by enough replicas: {}; it does not count \
                 (replica_policy \"fail\"): retrying until the hold's validity runs out",
                shortfall.describe()
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(replicas: u32) -> Replication {
        Replication { replicas, ..Replication::default() }
    }

    #[test]
    fn settings_are_checked() {
        let five = Duration::from_secs(5);
        assert!(Replication::default().validate(five).is_ok());
        assert!(on(1).validate(five).is_ok());
        let fsync_alone = Replication { fsync: true, ..Replication::default() };
        assert!(fsync_alone.validate(five).unwrap_err().to_string().contains("replicas=1 or more"));
        let tiny = Replication { timeout: Duration::from_micros(500), ..on(1) };
        assert!(tiny.validate(five).unwrap_err().to_string().contains("at least 0.001"));
        let long = Replication { timeout: five, ..on(1) };
        let msg = long.validate(five).unwrap_err().to_string();
        assert!(
            msg.contains("shorter than command_timeout") && msg.contains("raise command_timeout"),
            "{msg}"
        );
        assert_eq!(Policy::parse("warn").unwrap(), Policy::Warn);
        assert!(Policy::parse("ignore").unwrap_err().to_string().contains("\"fail\""));
    }

    #[test]
    fn wait_commands() {
        let packed = |r: Replication| String::from_utf8(r.wait_cmd().get_packed_command()).unwrap();
        let wait = Replication { timeout: Duration::from_millis(50), ..on(2) };
        assert_eq!(packed(wait), "*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$2\r\n50\r\n");
        let aof = Replication { fsync: true, ..on(1) };
        assert_eq!(packed(aof), "*4\r\n$7\r\nWAITAOF\r\n$1\r\n0\r\n$1\r\n1\r\n$3\r\n100\r\n");
        // 0 would block forever: a sub-millisecond timeout is sent as 1
        let short = Replication { timeout: Duration::from_micros(1500), ..on(1) };
        assert!(packed(short).ends_with("$1\r\n1\r\n"));
    }

    #[test]
    fn acknowledgements_are_read() {
        assert_eq!(on(1).acked(&Value::Int(3)), Ok(3));
        assert_eq!(on(1).acked(&Value::Int(-1)), Ok(0));
        let aof = Replication { fsync: true, ..on(1) };
        assert_eq!(aof.acked(&Value::Array(vec![Value::Int(0), Value::Int(2)])), Ok(2));
        assert!(aof.acked(&Value::Int(1)).is_err());
        assert!(on(1).acked(&Value::Array(vec![])).is_err());
        let s = on(2).shortfall(1);
        assert_eq!(s.describe(), "1 of 2 replicas acknowledged it within 0.1 s");
        assert!(aof.shortfall(0).describe().contains("append-only file"));
    }

    #[test]
    fn warnings_are_throttled() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.pass(t0), Some(0), "the first goes out");
        assert_eq!(throttle.pass(t0 + Duration::from_secs(1)), None);
        assert_eq!(throttle.pass(t0 + Duration::from_secs(9)), None);
        assert_eq!(throttle.pass(t0 + Duration::from_secs(10)), Some(2), "then says how many were held back");
        assert_eq!(throttle.pass(t0 + Duration::from_secs(11)), None);
        assert_eq!(throttle.pass(t0 + Duration::from_secs(30)), Some(1));
    }
}
