//! A step that is a transaction, not a script: `MULTI / commands / EXEC`,
//! as atomic as a script and cheaper for the server (no Lua entry, no
//! argument or reply conversion). With replica acknowledgement on, one
//! `WAIT` (or `WAITAOF`) follows the `EXEC` in the same round trip, as it
//! follows a script (`scripts::run_held`).

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

/// Runs `commands` as one transaction on `client`. `what` names the step
/// in the error an unexpected reply gives.
pub(crate) async fn transact(client: &Backend, what: &str, commands: Vec<redis::Cmd>) -> Result<Transacted> {
    let count = commands.len();
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI");
    for command in commands {
        pipe.add_command(command);
    }
    pipe.cmd("EXEC");
    let replication = client.options().replication;
    if replication.is_on() {
        pipe.add_command(replication.wait_cmd());
    }
    let pipe = &*pipe.ignore_errors();
    let (replies, sent): (Vec<Value>, _) =
        client.call_timed(|mut con| async move { pipe.query_async(&mut con).await }).await?;
    // MULTI's OK and each command's QUEUED: an error there (a command the
    // server or an ACL refuses) is the transaction's error.
    for reply in replies.iter().take(count + 1) {
        reply.clone().extract_error()?;
    }
    let mut rest = replies.into_iter().skip(count + 1);
    let (exec, wait) = (rest.next(), rest.next());
    // EXEC's own error (a user not allowed EXEC) is the transaction's.
    let Some(Value::Array(replies)) = exec.map(Value::extract_error).transpose()? else {
        return Err(Error::Redis(format!("unexpected reply to {what}: no EXEC reply")));
    };
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
