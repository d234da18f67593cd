//! A hold's renewal and release by comparing its value: one command where
//! the server has one (`SET … IFEQ`, `DELIFEQ`: `transport::compare`), and
//! a batch of renewals in `refresh_compared.lua` on every server (what
//! `SET … IFEQ` does, for each hold): for a hold whose value its owner knows exactly
//! (`Holder::written`: a Lock's take by the transaction, and the renewals
//! that compared it since). A value that is not the one the owner wrote (a
//! waiter marked it, another handle took it over, it expired) makes the
//! command change nothing, and the step's script runs next and decides, as
//! it would have alone; so does a command the server refuses. Either way
//! the owner no longer knows the value, and its later steps are scripts.
//! docs/design.md, "A renewal and a release without a script".

use std::sync::Arc;

use redis::Value;

use super::steps::{Holder, Released};
use super::transaction::{exchange, Sent};
use crate::error::Result;
use crate::scripts::{run_held, step, Argv, Lua, Refreshed};
use crate::transport::backend::{Backend, Renewal};
use crate::transport::replication::Shortfall;

step! {
    REFRESH_COMPARED = "refresh_compared.lua",
    struct RefreshComparedArgv<'a> {
        holds: &'a [ComparedHold<'a>],
    }
}

/// One hold's items in `refresh_compared.lua`'s ARGV: its ttl in ms, its
/// value as written, and the value to write ('' when the same).
type ComparedHold<'a> = (u64, &'a str, &'a str);

/// A renewal `refresh_each` compares: its key, its value as written, and
/// the value it writes.
struct Compared<'a> {
    key: &'a str,
    written: &'a Arc<str>,
    now: Arc<str>,
    ttl_ms: u64,
}

/// The steps of this module, for `every_step`.
pub(super) static STEPS: [&Lua; 1] = [&REFRESH_COMPARED];

/// A new hold's value with no fence and no flags in it: `<token>  [ <meta>]`
/// (lua/lib/hold.lua's layout, `<token> <fence> <flags>[ <meta>]`).
pub(crate) fn unrecorded(token: &str, metadata: Option<&str>) -> String {
    match metadata {
        Some(meta) => format!("{token}   {meta}"),
        None => format!("{token}  "),
    }
}

/// `written` with `fence` recorded in it, as lua/lib/hold.lua's `renew_hold`
/// records it: `<token> <fence> <flags>[ <meta>]`; a value with a fence in
/// it already is kept as it is (the same, not a copy).
fn recorded(written: &Arc<str>, token: &str, fence: i64) -> Arc<str> {
    match written.strip_prefix(token).and_then(|rest| rest.strip_prefix(' ')) {
        Some(rest) if rest.starts_with(' ') => Arc::from(format!("{token} {fence}{rest}")),
        _ => written.clone(),
    }
}

/// `SET key <recorded value> IFEQ <written> PX ttl`, and the value it
/// writes: the renewal of one hold; `None` when the owner does not know
/// its value (or has no fence to record), or the server has no such command.
fn renewal(
    c: &Backend,
    key: &str,
    token: &str,
    fence: Option<i64>,
    written: Option<&Arc<str>>,
    ttl_ms: u64,
) -> Option<(redis::Cmd, Arc<str>)> {
    let (Some(written), Some(fence)) = (written, fence) else { return None };
    if !c.compare().can_set() {
        return None;
    }
    let now = recorded(written, token, fence);
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(&*now).arg("IFEQ").arg(&**written).arg("PX").arg(ttl_ms);
    Some((cmd, now))
}

/// What the server answered one compare command: `Some(true)` when it did
/// what it was asked, `Some(false)` when the value was not the one compared
/// (or the key is gone), `None` when it refused the command (`refused`
/// is told why).
fn answered(reply: &Value, refused: impl FnOnce(&str)) -> Option<bool> {
    match reply {
        Value::Okay | Value::Int(1) => Some(true),
        Value::ServerError(e) => {
            refused(&format!("{} {}", e.code(), e.details().unwrap_or("")));
            None
        }
        Value::SimpleString(s) if s == "OK" => Some(true),
        _ => Some(false),
    }
}

/// Renews `holder`'s hold on `key` for `ttl_ms` by comparing its value:
/// `None` when its script must (the value is unknown or not the one
/// written, or the server refused the command).
pub(crate) async fn refresh(
    c: &Backend,
    key: &str,
    holder: &Holder<'_>,
    ttl_ms: u64,
) -> Result<Option<Refreshed>> {
    let Some((cmd, now)) = renewal(c, key, holder.token, holder.fence, holder.written, ttl_ms) else {
        return Ok(None);
    };
    let done = exchange(c, "a hold's renewal", Sent::Apart, vec![cmd]).await?;
    Ok(match answered(&done.replies[0], |e| c.compare().set_refused(e)) {
        Some(true) => Some(Refreshed { held: true, shortfall: done.shortfall, written: Some(now) }),
        _ => None,
    })
}

/// `refresh` for several single-key holds at once, in one call of
/// `refresh_compared.lua` on any server: what `SET … IFEQ … PX` does for
/// each, with one MGET for them all (per hold, less of the server's time
/// than a pipeline of `SET … IFEQ`, and one reply for the client to read:
/// docs/benchmarks.md, "Renewals by comparing"). Returns each one's value
/// now when it was renewed so, in order (`None` where its script must
/// decide), and the replicas' shortfall; `None` when not one of them can be.
pub(crate) async fn refresh_each(
    c: &Backend,
    renewals: &[Renewal],
) -> Result<Option<(Vec<Option<Arc<str>>>, Option<Shortfall>)>> {
    let each: Vec<Option<Compared<'_>>> = renewals
        .iter()
        .map(|r| match (&r.keys[..], &r.written, r.fence) {
            ([key], Some(written), Some(fence)) => {
                Some(Compared { key, written, now: recorded(written, &r.token, fence), ttl_ms: r.ttl_ms })
            }
            _ => None,
        })
        .collect();
    let keys: Vec<&str> = each.iter().flatten().map(|h| h.key).collect();
    if keys.is_empty() {
        return Ok(None);
    }
    let holds: Vec<ComparedHold<'_>> = each
        .iter()
        .flatten()
        .map(|h| {
            let changed = if Arc::ptr_eq(&h.now, h.written) { "" } else { &*h.now };
            (h.ttl_ms, &**h.written, changed)
        })
        .collect();
    let mut invocation = RefreshComparedArgv { holds: &holds }.on(c);
    invocation.key(&keys[..]);
    let done = run_held(c, &invocation, |answers: &Vec<i64>| answers.contains(&1)).await?;
    let mut answers = done.answer.into_iter();
    let now = each
        .into_iter()
        .map(|h| {
            let h = h?;
            (answers.next() == Some(1)).then_some(h.now)
        })
        .collect();
    Ok(Some((now, done.shortfall)))
}

/// Releases `holder`'s hold on `key` by comparing its value (`DELIFEQ`):
/// `Deleted::Released` when it did; else `Deleted::Not`, and its script must
/// decide (the value is unknown or not the one written, or the server
/// refused the command). `twice`: the command was sent a second time after
/// a dropped connection, so the first may have deleted the hold.
pub(crate) async fn release(c: &Backend, key: &str, holder: &Holder<'_>) -> Result<Deleted> {
    let Some(written) = holder.written else { return Ok(Deleted::Not { twice: false }) };
    if !c.compare().can_delete() {
        return Ok(Deleted::Not { twice: false });
    }
    let cmd = redis::cmd("DELIFEQ").arg(key).arg(&**written).take();
    let cmd = &cmd;
    let (reply, twice): (Value, bool) = c
        .call_noting_retry(|mut conn| async move {
            let mut pipe = redis::pipe();
            pipe.add_command(cmd.clone()).ignore_errors();
            let mut replies: Vec<Value> = pipe.query_async(&mut conn).await?;
            Ok(replies.pop().unwrap_or(Value::Nil))
        })
        .await?;
    Ok(match answered(&reply, |e| c.compare().delete_refused(e)) {
        Some(true) => Deleted::Released(Released { held: true, retried: twice }),
        _ => Deleted::Not { twice },
    })
}

/// What `release` did.
pub(crate) enum Deleted {
    Released(Released),
    /// Nothing: the script decides. `twice`: see `release`.
    Not {
        twice: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_recorded_where_the_script_records_it() {
        let recorded = |written: &str, fence| recorded(&Arc::from(written), "t", fence).to_string();
        assert_eq!(recorded(&unrecorded("t", None), 42), "t 42 ");
        assert_eq!(recorded(&unrecorded("t", Some("a b")), 42), "t 42  a b");
        assert_eq!(recorded("t 42 ", 43), "t 42 ");
        assert_eq!(recorded("t 42  a b", 43), "t 42  a b");
    }
}
