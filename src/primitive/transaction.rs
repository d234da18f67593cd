//! A step that is a transaction, not a script: `MULTI / commands / EXEC`,
//! as atomic as a script and cheaper for the server (no Lua entry, no
//! argument or reply conversion); or plain commands in one round trip,
//! each atomic on its own (`pipeline`). With replica acknowledgement on,
//! one `WAIT` (or `WAITAOF`) follows the `EXEC` (or the commands) in the
//! same round trip, as it follows a script (`scripts::run_held`).

use std::time::Instant;

use redis::Value;

use crate::error::{Error, Result};
use crate::transport::backend::Backend;
use crate::transport::replication::Shortfall;

/// What a transaction answered: each command's reply, in order, and the
/// replicas' shortfall when too few acknowledged it (`None` when enough
/// did, or none were asked); `sent`: when it was sent.
pub(crate) struct Transacted {
    pub replies: Vec<Value>,
    pub shortfall: Option<Shortfall>,
    pub sent: Instant,
}

/// How `exchange` sends its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// As one transaction (`MULTI` … `EXEC`).
    Atomically,
    /// In one round trip, not as a transaction: each runs on its own, and
    /// its reply (an error reply too) is its own.
    Apart,
}

/// Sends `commands` to `client` as `how` says, in one round trip: their
/// replies, in order. With replica acknowledgement on, one `WAIT` follows
/// them (after the `EXEC`). `what` names the step in the error an
/// unexpected reply gives.
pub(crate) async fn exchange(
    client: &Backend,
    what: &str,
    how: Sent,
    commands: Vec<redis::Cmd>,
) -> Result<Transacted> {
    let atomic = how == Sent::Atomically;
    let count = commands.len();
    let mut pipe = redis::pipe();
    if atomic {
        pipe.cmd("MULTI");
    }
    for command in commands {
        pipe.add_command(command);
    }
    if atomic {
        pipe.cmd("EXEC");
    }
    let replication = client.options().replication;
    if replication.is_on() {
        pipe.add_command(replication.wait_cmd());
    }
    let pipe = &*pipe.ignore_errors();
    let (mut replies, sent): (Vec<Value>, _) =
        client.call_timed(|mut con| async move { pipe.query_async(&mut con).await }).await?;
    let wait = if replication.is_on() { replies.pop() } else { None };
    let replies = if atomic {
        // MULTI's OK and each command's QUEUED: an error there (a command the
        // server or an ACL refuses) is the transaction's.
        for reply in replies.iter().take(count + 1) {
            reply.clone().extract_error()?;
        }
        // EXEC's own error (a user not allowed EXEC) is the transaction's.
        let Some(Value::Array(replies)) =
            replies.into_iter().nth(count + 1).map(Value::extract_error).transpose()?
        else {
            return Err(Error::Redis(format!("unexpected reply to {what}: no EXEC reply")));
        };
        replies
    } else {
        replies
    };
    if replies.len() != count {
        return Err(Error::Redis(format!(
            "unexpected reply to {what}: {} replies to {count} commands",
            replies.len()
        )));
    }
    let shortfall = match wait {
        Some(wait) => {
            let acked = replication.acked(&wait.extract_error()?).map_err(Error::Redis)?;
            (acked < replication.replicas).then(|| replication.shortfall(acked))
        }
        None => None,
    };
    Ok(Transacted { replies, shortfall, sent })
}

/// The server's clock in microseconds, from `TIME`'s reply.
pub(crate) fn micros(time: &Value, what: &str) -> Result<i64> {
    let (secs, micros): (i64, i64) = redis::from_redis_value(time.clone())
        .map_err(|e| Error::Redis(format!("unexpected TIME reply in {what}: {e}")))?;
    Ok(secs * 1_000_000 + micros)
}
