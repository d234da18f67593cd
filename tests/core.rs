//! The pyo3-free core against a real redis-server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, lock, quick};
use ferrolock::{Backend, ClientOptions, Error, Io, Lock, LockOptions, Retry, Wait};

#[tokio::test]
async fn obtain_release_and_fences_increase() {
    let c = client().await;
    let a = lock(&c, "orders:42", quick(5000));
    let b = lock(&c, "orders:42", quick(5000));
    assert!(a.acquire(Wait::No).await.unwrap());
    assert!(!b.acquire(Wait::No).await.unwrap());
    let first = a.fence().unwrap();
    let rec = c.inspect("orders:42").await.unwrap().unwrap();
    assert_eq!(rec.token, a.token().unwrap());
    // Taken by the transaction: the owner records its fence with its first
    // renewal, until then a reader sees none.
    assert_eq!(rec.fence, 0);
    a.extend(None).await.unwrap();
    assert_eq!(c.inspect("orders:42").await.unwrap().unwrap().fence, first);
    a.release().await.unwrap();
    assert!(c.inspect("orders:42").await.unwrap().is_none());
    let mut last = first;
    for _ in 0..50 {
        assert!(b.acquire(Wait::No).await.unwrap());
        let f = b.fence().unwrap();
        assert!(f > last, "fence {f} not above {last}");
        last = f;
        b.release().await.unwrap();
    }
}

#[tokio::test]
async fn release_by_a_non_owner_touches_nothing() {
    let c = client().await;
    let a = lock(&c, "n", LockOptions { auto_renew: false, ..quick(100) });
    assert!(a.acquire(Wait::No).await.unwrap());
    let b = lock(&c, "n", quick(5000));
    assert!(b.acquire(Wait::Until(Instant::now() + Duration::from_secs(2))).await.unwrap());
    assert!(a.lost());
    assert!(matches!(a.release().await, Err(Error::NotOwned(_))));
    assert_eq!(c.inspect("n").await.unwrap().unwrap().token, b.token().unwrap());
    b.release().await.unwrap();
}

#[tokio::test]
async fn waiter_times_out_and_retry_gives_up() {
    let c = client().await;
    let holder = lock(&c, "busy", quick(5000));
    assert!(holder.acquire(Wait::No).await.unwrap());
    let waiter = lock(&c, "busy", quick(5000));
    let t = Instant::now();
    assert!(!waiter.acquire(Wait::Until(t + Duration::from_millis(150))).await.unwrap());
    assert!(t.elapsed() >= Duration::from_millis(150));
    let limited = LockOptions {
        retry: Retry { backoff: ferrolock::Backoff::Fixed(Duration::from_millis(1)), attempts: Some(3) },
        ..quick(5000)
    };
    assert!(!lock(&c, "busy", limited).acquire(Wait::Forever).await.unwrap());
    holder.release().await.unwrap();
}

#[tokio::test]
async fn watchdog_keeps_the_hold_past_several_ttls() {
    let c = client().await;
    // A ttl a loaded machine's renewal (every ttl/3) keeps up with, held for
    // two and a half ttls.
    let a = lock(&c, "wd", quick(1000));
    assert!(a.acquire(Wait::No).await.unwrap());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(a.owned().await.unwrap(), "the hold expired: renewal did not keep it");
    assert!(!a.lost());
    a.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(c.inspect("wd").await.unwrap().is_none(), "renewal outlived release");
}

#[tokio::test]
async fn takeover_is_reported_once() {
    let c = client().await;
    let fired = Arc::new(AtomicUsize::new(0));
    let counter = fired.clone();
    let opts = LockOptions {
        on_lost: Some(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })),
        ..quick(300)
    };
    let a = lock(&c, "taken", opts);
    assert!(a.acquire(Wait::No).await.unwrap());
    c.force_release("taken", None).await.unwrap();
    let b = lock(&c, "taken", quick(5000));
    assert!(b.acquire(Wait::No).await.unwrap());
    assert!(tokio::time::timeout(Duration::from_secs(2), a.lease().unwrap().wait_ended()).await.unwrap());
    assert!(a.lost());
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(matches!(a.release().await, Err(Error::NotOwned(_))));
    assert!(b.owned().await.unwrap());
    b.release().await.unwrap();
}

#[tokio::test]
async fn multi_lock_is_all_or_nothing() {
    let c = client().await;
    let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let single = lock(&c, "c", quick(5000));
    assert!(single.acquire(Wait::No).await.unwrap());
    let multi = Lock::new(c.clone(), names.clone(), quick(5000), None).unwrap();
    assert!(!multi.acquire(Wait::No).await.unwrap());
    assert!(c.inspect("a").await.unwrap().is_none(), "a partial multi-lock was left");
    single.release().await.unwrap();
    assert!(multi.acquire(Wait::No).await.unwrap());
    for n in &names {
        assert_eq!(c.inspect(n).await.unwrap().unwrap().token, multi.token().unwrap());
    }
    multi.release().await.unwrap();
    for n in &names {
        assert!(c.inspect(n).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn dropped_acquire_leaves_nothing_behind() {
    let c = client().await;
    for steps in 0..20u64 {
        let a = lock(&c, "cancel", quick(5000));
        let fut = a.acquire(Wait::Forever);
        // Drop the acquire after a varying time, possibly after the script ran.
        let _ = tokio::time::timeout(Duration::from_micros(steps * 25), fut).await;
        if a.is_held() {
            a.release().await.unwrap();
        }
        c.settle().await;
        assert!(c.inspect("cancel").await.unwrap().is_none(), "left behind after {steps} steps");
    }
}

#[tokio::test]
async fn restored_token_releases_and_adopts() {
    let c = client().await;
    let a = lock(&c, "job", quick(5000));
    assert!(a.acquire(Wait::No).await.unwrap());
    let token = a.token().unwrap();
    let wrong = Lock::new(c.clone(), vec!["job".into()], quick(5000), Some("f".repeat(32))).unwrap();
    assert!(matches!(wrong.release().await, Err(Error::NotOwned(_))));
    // Adopted before the hold's first renewal recorded its fence: a newer
    // one, recorded; adopted after, the recorded one.
    let restored = Lock::new(c.clone(), vec!["job".into()], quick(5000), Some(token.clone())).unwrap();
    assert!(restored.acquire(Wait::No).await.unwrap(), "adopting its own hold");
    assert!(restored.fence() > a.fence());
    assert_eq!(c.inspect("job").await.unwrap().unwrap().fence, restored.fence().unwrap());
    let again = Lock::new(c.clone(), vec!["job".into()], quick(5000), Some(token.clone())).unwrap();
    assert!(again.acquire(Wait::No).await.unwrap());
    assert_eq!(again.fence(), restored.fence());
    restored.release().await.unwrap();
    assert!(c.inspect("job").await.unwrap().is_none());
}

#[tokio::test]
async fn bad_options_are_rejected() {
    let c = client().await;
    let bad = |names: Vec<&str>, opts: LockOptions| {
        Lock::new(c.clone(), names.into_iter().map(String::from).collect(), opts, None).err()
    };
    assert!(matches!(bad(vec![""], quick(100)), Some(Error::InvalidArgument(_))));
    assert!(matches!(bad(vec![], quick(100)), Some(Error::InvalidArgument(_))));
    assert!(matches!(bad(vec!["a", "a"], quick(100)), Some(Error::InvalidArgument(_))));
    assert!(matches!(bad(vec!["a"], quick(0)), Some(Error::InvalidArgument(_))));
    let long = "x".repeat(5000);
    assert!(matches!(bad(vec![long.as_str()], quick(100)), Some(Error::InvalidArgument(_))));
    let refused = Backend::connect(ClientOptions {
        url: "redis://127.0.0.1:1/0".into(),
        connect_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    });
    let t = Instant::now();
    assert!(matches!(refused.await, Err(Error::Connection(_))));
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_holder_expiring_any_moment_is_retried_at_once() {
    // The holder's key is about to expire (PTTL 0 or -2 at the waiter's
    // attempt): a slow retry must not sleep its whole interval.
    let c = client().await;
    let slow = LockOptions {
        retry: Retry { backoff: ferrolock::Backoff::Fixed(Duration::from_secs(5)), attempts: None },
        ..quick(5000)
    };
    for round in 0..20u64 {
        let holder =
            lock(&c, &format!("edge{round}"), LockOptions { auto_renew: false, ..quick(3 + round % 3) });
        assert!(holder.acquire(Wait::No).await.unwrap());
        let waiter = lock(&c, &format!("edge{round}"), slow.clone());
        let t = Instant::now();
        assert!(waiter.acquire(Wait::Until(t + Duration::from_secs(2))).await.unwrap());
        assert!(t.elapsed() < Duration::from_millis(500), "round {round}: waited {:?}", t.elapsed());
        waiter.release().await.unwrap();
    }
}

/// A caller blocked on the core's futures (as the Python bindings' sync calls
/// are) sends their commands on its own thread when it says so (`Io::Inline`):
/// the same results, each operation on a pooled connection, and work spawned
/// meanwhile (renewal) still on the runtime.
#[test]
fn inline_calls_take_release_and_renew_as_the_runtime_does() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let c = rt.block_on(client());
    let a = lock(&c, "inline", LockOptions { ttl: Duration::from_millis(300), ..quick(300) });
    let b = lock(&c, "inline", quick(5000));
    let inline = c.via(Io::Inline);
    rt.block_on(async {
        assert!(a.via(Io::Inline).acquire(Wait::No).await.unwrap());
        assert!(!b.via(Io::Inline).acquire(Wait::No).await.unwrap());
        assert_eq!(inline.inspect("inline").await.unwrap().unwrap().token, a.token().unwrap());
    });
    // renewed by the runtime's watchdog past its 300 ms ttl
    std::thread::sleep(Duration::from_millis(700));
    rt.block_on(async {
        assert!(!a.lost());
        assert!(a.via(Io::Inline).owned().await.unwrap());
        a.via(Io::Inline).release().await.unwrap();
        assert!(inline.inspect("inline").await.unwrap().is_none());
        assert!(b.via(Io::Inline).acquire(Wait::No).await.unwrap());
        b.via(Io::Inline).release().await.unwrap();
    });
}
