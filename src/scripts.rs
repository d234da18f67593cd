//! The atomic steps, one Lua file each, embedded at build time. `Script`
//! sends EVALSHA and falls back to loading the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation, Value};

use crate::client::Client;
use crate::error::{Error, Result};

macro_rules! lua {
    ($name:ident, $file:literal) => {
        static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/lua/",
                $file
            )))
        });
    };
}

lua!(OBTAIN, "obtain.lua");
lua!(RELEASE, "release.lua");
lua!(REFRESH, "refresh.lua");
lua!(INSPECT, "inspect.lua");

/// What `obtain.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obtain {
    Taken {
        fence: i64,
    },
    /// Held by another owner for `pttl_ms` more (-1: no expiry, -2: just gone).
    Busy {
        pttl_ms: i64,
    },
}

/// The holder of one lock key, as stored in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub token: String,
    pub metadata: Option<String>,
    pub fence: i64,
    pub pttl_ms: i64,
}

pub async fn obtain(
    client: &Client,
    keys: &[String],
    token: &str,
    ttl_ms: u64,
    metadata: &str,
) -> Result<Obtain> {
    let (taken, n): (i64, i64) = run(
        client,
        OBTAIN.key(keys).arg(token).arg(ttl_ms).arg(metadata),
    )
    .await?;
    Ok(if taken == 1 {
        Obtain::Taken { fence: n }
    } else {
        Obtain::Busy { pttl_ms: n }
    })
}

/// Returns how many keys were released; 0 when `token` did not hold them all.
pub async fn release(client: &Client, keys: &[String], token: &str, force: bool) -> Result<u64> {
    run(
        client,
        RELEASE
            .key(keys)
            .arg(token)
            .arg(if force { "1" } else { "0" }),
    )
    .await
}

/// Returns whether `token` still held every key (and now holds it for `ttl_ms`).
pub async fn refresh(client: &Client, keys: &[String], token: &str, ttl_ms: u64) -> Result<bool> {
    let renewed: i64 = run(client, REFRESH.key(keys).arg(token).arg(ttl_ms)).await?;
    Ok(renewed == 1)
}

pub async fn inspect(client: &Client, keys: &[String]) -> Result<Vec<Option<Record>>> {
    let entries: Vec<Vec<Value>> = run(client, &mut INSPECT.key(keys)).await?;
    entries.into_iter().map(parse_record).collect()
}

async fn run<T: redis::FromRedisValue>(
    client: &Client,
    invocation: &mut ScriptInvocation<'_>,
) -> Result<T> {
    let invocation = &*invocation;
    client
        .call(|mut c| async move { invocation.invoke_async(&mut c).await })
        .await
}

fn parse_record(entry: Vec<Value>) -> Result<Option<Record>> {
    if entry.is_empty() {
        return Ok(None);
    }
    let bad =
        |e: redis::ParsingError| Error::Redis(format!("unexpected reply from inspect.lua: {e}"));
    let mut it = entry.into_iter();
    let mut next = || it.next().unwrap_or(Value::Nil);
    let token: String = redis::from_redis_value(next()).map_err(bad)?;
    let metadata: String = redis::from_redis_value(next()).map_err(bad)?;
    let fence: i64 = redis::from_redis_value(next()).map_err(bad)?;
    let pttl_ms: i64 = redis::from_redis_value(next()).map_err(bad)?;
    Ok(Some(Record {
        token,
        metadata: (!metadata.is_empty()).then_some(metadata),
        fence,
        pttl_ms,
    }))
}
