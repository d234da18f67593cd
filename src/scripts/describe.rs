//! Everything stored under one name, for listing and inspecting.

use redis::Value;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::{FairKeys, RwKeys};

use super::{parse_record, run, Record};

lua!(DESCRIBE, "describe.lua");

/// Everything stored under one name, as `describe.lua` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Described {
    pub holder: Option<Record>,
    /// Live waiters in a fair Lock's queue.
    pub waiters: u64,
    pub writer: Option<Record>,
    /// Live readers: token and milliseconds left.
    pub readers: Vec<(String, i64)>,
    /// Milliseconds left on a waiting writer's intent; negative when none.
    pub intent_pttl_ms: i64,
    pub queued_readers: u64,
    pub queued_writers: u64,
}

/// `describe.lua`'s answer: holder, waiters, writer, readers, intent, queued readers and writers.
type DescribeReply = (Vec<Value>, i64, Vec<Value>, Vec<Value>, i64, i64, i64);

pub async fn describe(client: &Client, lock: &FairKeys, rw: &RwKeys) -> Result<Described> {
    let keys = [
        &lock.lock,
        &lock.queue,
        &lock.alive,
        &rw.writer,
        &rw.readers,
        &rw.intent,
        &rw.queued_readers,
        &rw.queued_writers,
        &rw.alive,
    ];
    let (holder, waiters, writer, readers, intent_pttl_ms, queued_readers, queued_writers): DescribeReply =
        run(client, &DESCRIBE.on(client).key(&keys)).await?;
    let bad = |e: redis::ParsingError| Error::Redis(format!("unexpected reply from describe.lua: {e}"));
    let readers = readers
        .chunks(2)
        .map(|pair| match pair {
            [token, pttl] => Ok((
                redis::from_redis_value_ref::<String>(token).map_err(bad)?,
                redis::from_redis_value_ref::<i64>(pttl).map_err(bad)?,
            )),
            _ => Err(Error::Redis("unexpected reply from describe.lua: an odd list of readers".into())),
        })
        .collect::<Result<_>>()?;
    let count = |n: i64| n.max(0) as u64;
    Ok(Described {
        holder: parse_record(holder)?,
        waiters: count(waiters),
        writer: parse_record(writer)?,
        readers,
        intent_pttl_ms,
        queued_readers: count(queued_readers),
        queued_writers: count(queued_writers),
    })
}
