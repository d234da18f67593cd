//! The core RwMutex against a real redis-server.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, quick};
use ferrolock::{Error, LockOptions, RwMutex, Wait};

fn soon(ms: u64) -> Wait {
    Wait::Until(Instant::now() + Duration::from_millis(ms))
}

#[tokio::test]
async fn readers_share_and_writers_exclude() {
    let c = client().await;
    let rw = RwMutex::new(c.clone(), "doc".into(), true).unwrap();
    let r1 = rw.read(quick(5000), None).unwrap();
    let r2 = rw.read(quick(5000), None).unwrap();
    assert!(r1.acquire(Wait::No).await.unwrap());
    assert!(r2.acquire(Wait::No).await.unwrap());
    assert_eq!(rw.readers().await.unwrap(), 2);
    assert!(r1.fence().is_none(), "readers carry no fence");
    let w = rw.write(quick(5000), None).unwrap();
    assert!(!w.acquire(Wait::No).await.unwrap());
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    assert!(!rw.locked().await.unwrap());
    assert!(w.acquire(Wait::No).await.unwrap());
    assert!(w.fence().is_some());
    assert!(!r1.acquire(Wait::No).await.unwrap());
    assert!(!rw.write(quick(5000), None).unwrap().acquire(Wait::No).await.unwrap());
    w.release().await.unwrap();
    assert!(!rw.locked().await.unwrap());
}

#[tokio::test]
async fn a_dead_reader_expires_alone() {
    let c = client().await;
    let rw = RwMutex::new(c.clone(), "doc".into(), true).unwrap();
    // The "dead" reader: no renewal, short ttl. The live one renews.
    let dead = rw.read(LockOptions { auto_renew: false, ..quick(300) }, None).unwrap();
    let live = rw.read(quick(1500), None).unwrap();
    assert!(dead.acquire(Wait::No).await.unwrap());
    assert!(live.acquire(Wait::No).await.unwrap());
    let w = rw.write(quick(5000), None).unwrap();
    let t = Instant::now();
    // The writer must not wait for the live reader only because it renews.
    assert!(!w.acquire(soon(1000)).await.unwrap());
    assert_eq!(rw.readers().await.unwrap(), 1, "the dead reader still counts");
    live.release().await.unwrap();
    assert!(w.acquire(soon(1000)).await.unwrap());
    assert!(t.elapsed() < Duration::from_secs(3));
    w.release().await.unwrap();
}

#[tokio::test]
async fn waiting_writer_holds_new_readers_back() {
    let c = client().await;
    let rw = Arc::new(RwMutex::new(c.clone(), "pref".into(), true).unwrap());
    let r = rw.read(quick(5000), None).unwrap();
    assert!(r.acquire(Wait::No).await.unwrap());
    let w = Arc::new(rw.write(quick(5000), None).unwrap());
    let writer = {
        let w = w.clone();
        tokio::spawn(async move { w.acquire(Wait::Forever).await })
    };
    // Once the writer's intent is there, a newcomer reader waits.
    let newcomer = rw.read(quick(5000), None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if !newcomer.acquire(Wait::No).await.unwrap() {
            break;
        }
        newcomer.release().await.unwrap();
        assert!(Instant::now() < deadline, "the writer's intent never held readers back");
        tokio::task::yield_now().await;
    }
    r.release().await.unwrap();
    assert!(writer.await.unwrap().unwrap());
    w.release().await.unwrap();
    assert!(newcomer.acquire(soon(1000)).await.unwrap());
    newcomer.release().await.unwrap();

    // Reader preference: readers join whatever writers wait.
    let rp = RwMutex::new(c.clone(), "rpref".into(), false).unwrap();
    let r = rp.read(quick(5000), None).unwrap();
    assert!(r.acquire(Wait::No).await.unwrap());
    let w = rp.write(quick(5000), None).unwrap();
    assert!(!w.acquire(soon(100)).await.unwrap());
    let other = rp.read(quick(5000), None).unwrap();
    assert!(other.acquire(Wait::No).await.unwrap());
    other.release().await.unwrap();
    r.release().await.unwrap();
}

#[tokio::test]
async fn a_writer_that_gives_up_withdraws_its_intent() {
    let c = client().await;
    let rw = RwMutex::new(c.clone(), "gaveup".into(), true).unwrap();
    let r = rw.read(quick(5000), None).unwrap();
    assert!(r.acquire(Wait::No).await.unwrap());
    let w = rw.write(quick(5000), None).unwrap();
    assert!(!w.acquire(soon(100)).await.unwrap());
    let newcomer = rw.read(quick(5000), None).unwrap();
    assert!(newcomer.acquire(Wait::No).await.unwrap(), "intent left behind by a writer that stopped waiting");
    newcomer.release().await.unwrap();
    // Dropped mid-wait: the intent goes too.
    let _ = tokio::time::timeout(Duration::from_millis(100), w.acquire(Wait::Forever)).await;
    c.settle().await;
    assert!(newcomer.acquire(Wait::No).await.unwrap());
    newcomer.release().await.unwrap();
    r.release().await.unwrap();
}

#[tokio::test]
async fn expired_reader_release_is_not_owned() {
    let c = client().await;
    let rw = RwMutex::new(c.clone(), "exp".into(), true).unwrap();
    let r = rw.read(LockOptions { auto_renew: false, ..quick(100) }, None).unwrap();
    assert!(r.acquire(Wait::No).await.unwrap());
    let w = rw.write(quick(5000), None).unwrap();
    assert!(w.acquire(soon(2000)).await.unwrap());
    assert!(matches!(r.release().await, Err(Error::NotOwned(_))));
    assert!(w.owned().await.unwrap(), "a stale reader's release touched the writer");
    w.release().await.unwrap();
}

#[tokio::test]
async fn reader_watchdog_keeps_its_own_expiry() {
    let c = client().await;
    let rw = RwMutex::new(c.clone(), "wd".into(), true).unwrap();
    // A ttl a loaded machine's renewal (every ttl/3) keeps up with; held
    // for more than twice the ttl, so only renewal can keep it.
    let r = rw.read(quick(1000), None).unwrap();
    assert!(r.acquire(Wait::No).await.unwrap());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(r.owned().await.unwrap(), "the reader's lease expired: renewal did not keep it");
    let left = r.remaining().await.unwrap().unwrap();
    assert!(left <= Duration::from_secs(1) && left > Duration::ZERO, "{left:?}");
    assert!(!r.lost());
    r.release().await.unwrap();
    assert_eq!(rw.readers().await.unwrap(), 0);
}

#[tokio::test]
async fn fair_turns_follow_arrival_order() {
    let c = client().await;
    let rw = Arc::new(RwMutex::new_fair(c.clone(), "fair".into()).unwrap());
    let w0 = rw.write(quick(5000), None).unwrap();
    assert!(w0.acquire(Wait::No).await.unwrap());
    // Queue a reader, then a writer, then a reader (each after the last is in line).
    let r1 = Arc::new(rw.read(quick(5000), None).unwrap());
    let w2 = Arc::new(rw.write(quick(5000), None).unwrap());
    let r3 = Arc::new(rw.read(quick(5000), None).unwrap());
    let mut waits = Vec::new();
    let keys = c.keys().rw("fair");
    for (n, h) in [&r1, &w2, &r3].into_iter().enumerate() {
        let h = h.clone();
        waits.push(tokio::spawn(async move { h.acquire(soon(5000)).await.unwrap() }));
        common::wait_for_zcard(&[&keys.queued_readers, &keys.queued_writers], n + 1).await;
    }
    let [r1_in, w2_in, r3_in]: [_; 3] = waits.try_into().unwrap();
    w0.release().await.unwrap();
    assert!(r1_in.await.unwrap(), "the reader queued first comes in");
    assert!(!w2_in.is_finished() && !r3_in.is_finished());
    assert!(!rw.read(quick(5000), None).unwrap().acquire(Wait::No).await.unwrap(), "no barging");
    r1.release().await.unwrap();
    assert!(w2_in.await.unwrap(), "the last reader out lets the writer in");
    assert!(w2.fence().unwrap() > 0);
    w2.release().await.unwrap();
    assert!(r3_in.await.unwrap());
    r3.release().await.unwrap();
    assert!(!rw.locked().await.unwrap());
}
