//! A plain hold (one string key whose value is the owner's token, the layout
//! of redis-py's Lock and python-redis-lock) against a real redis-server:
//! taken by one transaction that reads the server's clock, released and
//! renewed only by its owner, with or without expiry, pushing a signal list.

mod common;

use std::time::{Duration, Instant};

use common::{client, quick, server_url, unique_prefix};
use ferrolock::lock::{PlainExtended, PlainHold};
use ferrolock::{Error, Io, Lock, LockOptions, Wait};
use redis::AsyncCommands;

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(server_url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn hold(key: &str, expires: bool) -> PlainHold {
    PlainHold { key: key.into(), signal: None, wake: true, expires }
}

async fn plain(key: &str, expires: bool, opts: LockOptions, token: Option<&str>, adopt: bool) -> Lock {
    Lock::plain(client().await, hold(key, expires), opts, token.map(String::from), adopt).unwrap()
}

#[tokio::test]
async fn the_key_holds_the_token_and_the_fence_is_the_servers_clock() {
    let (mut r, key) = (raw().await, format!("{}plain", unique_prefix()));
    let a = plain(&key, true, quick(5000), None, false).await;
    assert!(a.acquire(Wait::No).await.unwrap());
    let stored: String = r.get(&key).await.unwrap();
    assert_eq!(Some(stored), a.token());
    let pttl: i64 = r.pttl(&key).await.unwrap();
    assert!(pttl > 4000 && pttl <= 5000, "{pttl}");
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut r).await.unwrap();
    let fence = a.fence().unwrap();
    assert!((secs * 1_000_000 + micros - fence).abs() < 60_000_000, "the fence is the server's clock");
    let b = plain(&key, true, quick(5000), None, false).await;
    assert!(!b.acquire(Wait::No).await.unwrap(), "SET NX: a second holder waits");
    a.release().await.unwrap();
    assert!(b.acquire(Wait::No).await.unwrap());
    assert!(b.fence().unwrap() > fence);
    b.release().await.unwrap();
}

#[tokio::test]
async fn nobody_releases_or_extends_another_tokens_hold() {
    let (mut r, key) = (raw().await, format!("{}other", unique_prefix()));
    let _: () = r.set_ex(&key, "someone-else", 30).await.unwrap();
    let impostor = plain(&key, true, quick(5000), Some("someone"), true).await;
    assert!(matches!(impostor.release().await, Err(Error::NotOwned(_))));
    let impostor = plain(&key, true, quick(5000), Some("someone"), true).await;
    assert_eq!(
        impostor.extend_plain(Duration::from_secs(100), true, Io::Multiplexed).await,
        Ok(PlainExtended::NotHeld)
    );
    let stored: String = r.get(&key).await.unwrap();
    let ttl: i64 = r.ttl(&key).await.unwrap();
    assert_eq!((stored.as_str(), ttl <= 30), ("someone-else", true));
    let owner = plain(&key, true, quick(5000), Some("someone-else"), true).await;
    owner.release().await.unwrap();
    assert!(!r.exists::<_, bool>(&key).await.unwrap());
}

#[tokio::test]
async fn extend_adds_or_sets_and_a_hold_without_expiry_keeps_none() {
    let (mut r, key) = (raw().await, format!("{}ext", unique_prefix()));
    let a = plain(&key, true, LockOptions { auto_renew: false, ..quick(10_000) }, Some("tok"), false).await;
    assert!(a.acquire(Wait::No).await.unwrap());
    let to = a.extend_plain(Duration::from_secs(10), true, Io::Multiplexed).await.unwrap();
    assert!(
        matches!(to, PlainExtended::To(t) if t > Duration::from_secs(19) && t <= Duration::from_secs(20))
    );
    let pttl: i64 = r.pttl(&key).await.unwrap();
    assert!(pttl > 19_000 && pttl <= 20_000, "added: {pttl}");
    a.extend_plain(Duration::from_secs(3), false, Io::Multiplexed).await.unwrap();
    let pttl: i64 = r.pttl(&key).await.unwrap();
    assert!(pttl > 2_000 && pttl <= 3_000, "set: {pttl}");
    a.release().await.unwrap();

    let forever = plain(&key, false, quick(100), None, false).await;
    assert!(forever.acquire(Wait::No).await.unwrap());
    assert_eq!(r.pttl::<_, i64>(&key).await.unwrap(), -1, "taken without expiry");
    assert_eq!(
        forever.extend_plain(Duration::from_secs(5), false, Io::Multiplexed).await,
        Ok(PlainExtended::NoExpiry)
    );
    assert!(matches!(forever.extend(None).await, Err(Error::InvalidArgument(_))));
    assert_eq!(r.pttl::<_, i64>(&key).await.unwrap(), -1, "still without expiry");
    assert!(!forever.lost());
    forever.release().await.unwrap();
}

#[tokio::test]
async fn a_restored_token_is_adopted_and_a_named_one_taken_fresh() {
    let (mut r, key) = (raw().await, format!("{}adopt", unique_prefix()));
    let first = plain(&key, true, quick(5000), Some("id-1"), false).await;
    assert!(first.acquire(Wait::No).await.unwrap());
    first.release().await.unwrap();
    assert!(first.acquire(Wait::No).await.unwrap(), "the named token is taken again by the same handle");
    assert_eq!(r.get::<_, String>(&key).await.unwrap(), "id-1");
    let _: () = redis::cmd("PEXPIRE").arg(&key).arg(500).query_async(&mut r).await.unwrap();
    let adopter = plain(&key, true, quick(5000), Some("id-1"), true).await;
    assert!(adopter.acquire(Wait::No).await.unwrap(), "re-entered");
    let pttl: i64 = r.pttl(&key).await.unwrap();
    assert!(pttl > 4000, "adopting renews it to the ttl: {pttl}");
    adopter.release().await.unwrap();
}

#[tokio::test]
async fn a_release_pushes_the_signal_list_and_a_forced_one_takes_any_holder() {
    let (mut r, key) = (raw().await, format!("{}sig", unique_prefix()));
    let signal = format!("{key}:signal");
    let with_signal =
        PlainHold { key: key.clone(), signal: Some((signal.clone(), 1500)), wake: false, expires: true };
    let a = Lock::plain(client().await, with_signal.clone(), quick(5000), None, false).unwrap();
    assert!(a.acquire(Wait::No).await.unwrap());
    let _: () = r.lpush(&signal, "stale").await.unwrap();
    a.release().await.unwrap();
    assert_eq!(r.lrange::<_, Vec<String>>(&signal, 0, -1).await.unwrap(), vec!["1".to_string()]);
    let pttl: i64 = r.pttl(&signal).await.unwrap();
    assert!(pttl > 0 && pttl <= 1500, "{pttl}");
    assert!(a.acquire(Wait::No).await.unwrap());
    assert!(with_signal.force_release(&client().await).await.unwrap());
    assert!(!r.exists::<_, bool>(&key).await.unwrap());
    assert!(a.lost() || matches!(a.release().await, Err(Error::NotOwned(_))));
}

#[tokio::test]
async fn a_waiter_is_woken_by_a_release_before_its_retry() {
    let key = format!("{}wake", unique_prefix());
    let slow = LockOptions {
        retry: ferrolock::Retry {
            backoff: ferrolock::Backoff::Fixed(Duration::from_secs(30)),
            attempts: None,
        },
        ..quick(5000)
    };
    let holder = plain(&key, true, quick(5000), None, false).await;
    assert!(holder.acquire(Wait::No).await.unwrap());
    let waiter = plain(&key, true, slow, None, false).await;
    let started = Instant::now();
    let (took, ()) = tokio::join!(waiter.acquire(Wait::Until(started + Duration::from_secs(20))), async {
        while ferrolock::waiters() == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await; // nothing to await but its registration
        }
        holder.release().await.unwrap();
    });
    assert!(took.unwrap());
    assert!(started.elapsed() < Duration::from_secs(15), "woken, not its 30 s retry");
    waiter.release().await.unwrap();
}
