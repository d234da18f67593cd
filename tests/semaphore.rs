//! The core semaphore against a real redis-server: at most `permits` holders,
//! each permit its own lease, fences, fair hand-over, a clear error for
//! disagreeing permit counts.

mod common;

use std::time::{Duration, Instant};

use common::{client, quick};
use ferrolock::{semaphore, Error, LockOptions, Wait};

fn soon(ms: u64) -> Wait {
    Wait::Until(Instant::now() + Duration::from_millis(ms))
}

#[tokio::test]
async fn at_most_permits_holders_each_with_a_fence() {
    let c = client().await;
    let permits: Vec<_> =
        (0..3).map(|_| semaphore::permit(c.clone(), "api".into(), 2, quick(5000), None).unwrap()).collect();
    assert!(permits[0].acquire(Wait::No).await.unwrap());
    assert!(permits[1].acquire(Wait::No).await.unwrap());
    assert!(!permits[2].acquire(Wait::No).await.unwrap(), "a third holder of two permits");
    let (f0, f1) = (permits[0].fence().unwrap(), permits[1].fence().unwrap());
    assert!(f1 > f0);
    let state = semaphore::state(&c, "api").await.unwrap();
    assert_eq!((state.permits, state.holders.len()), (2, 2));
    permits[0].release().await.unwrap();
    assert!(permits[2].acquire(soon(1000)).await.unwrap());
    assert!(permits[2].fence().unwrap() > f1);
    permits[1].release().await.unwrap();
    permits[2].release().await.unwrap();
    assert!(semaphore::state(&c, "api").await.unwrap().holders.is_empty());
}

#[tokio::test]
async fn a_dead_holder_frees_only_its_own_permit_after_its_ttl() {
    let c = client().await;
    let dead =
        semaphore::permit(c.clone(), "s".into(), 2, LockOptions { auto_renew: false, ..quick(300) }, None)
            .unwrap();
    let live = semaphore::permit(c.clone(), "s".into(), 2, quick(300), None).unwrap();
    assert!(dead.acquire(Wait::No).await.unwrap());
    assert!(live.acquire(Wait::No).await.unwrap());
    let next = semaphore::permit(c.clone(), "s".into(), 2, quick(5000), None).unwrap();
    let t = Instant::now();
    assert!(next.acquire(soon(2000)).await.unwrap(), "the dead holder's permit never came free");
    assert!(t.elapsed() >= Duration::from_millis(200), "freed before its ttl");
    assert!(!live.lost(), "a live holder lost its permit");
    assert!(live.owned().await.unwrap());
    live.release().await.unwrap();
    next.release().await.unwrap();
}

#[tokio::test]
async fn disagreeing_permit_counts_are_refused_while_held() {
    let c = client().await;
    let two = semaphore::permit(c.clone(), "n".into(), 2, quick(5000), None).unwrap();
    assert!(two.acquire(Wait::No).await.unwrap());
    let three = semaphore::permit(c.clone(), "n".into(), 3, quick(5000), None).unwrap();
    match three.acquire(Wait::No).await {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("2 permits") && m.contains("same permits"), "{m}");
        }
        other => panic!("expected a clear refusal, got {other:?}"),
    }
    two.release().await.unwrap();
    assert!(three.acquire(Wait::No).await.unwrap(), "with nothing held, the new count applies");
    three.release().await.unwrap();
    assert!(semaphore::permit(c.clone(), "n".into(), 0, quick(5000), None).is_err());
}

#[tokio::test]
async fn fair_permits_go_in_arrival_order() {
    let c = client().await;
    let fair = |ttl| LockOptions { fair: true, ..quick(ttl) };
    let holder = semaphore::permit(c.clone(), "f".into(), 1, fair(5000), None).unwrap();
    assert!(holder.acquire(Wait::No).await.unwrap());
    let first = std::sync::Arc::new(semaphore::permit(c.clone(), "f".into(), 1, fair(5000), None).unwrap());
    let waiting = {
        let first = first.clone();
        tokio::spawn(async move { first.acquire(soon(5000)).await.unwrap() })
    };
    while semaphore::state(&c, "f").await.unwrap().waiters == 0 {
        tokio::task::yield_now().await;
    }
    let newcomer = semaphore::permit(c.clone(), "f".into(), 1, fair(5000), None).unwrap();
    holder.release().await.unwrap();
    assert!(!newcomer.acquire(Wait::No).await.unwrap(), "a newcomer barged past the queue");
    assert!(waiting.await.unwrap());
    first.release().await.unwrap();
    assert!(newcomer.acquire(Wait::No).await.unwrap());
    newcomer.release().await.unwrap();
}
