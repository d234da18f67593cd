//! Listing and describing names, and forcing an RWMutex free, against a real
//! redis-server: what the `ferrolock` command line shows an operator.

mod common;

use std::time::{Duration, Instant};

use common::{client, lock, quick, wait_for_zcard};
use ferrolock::keys::Kind;
use ferrolock::{ClientOptions, Lock, LockOptions, RwMutex, Wait};

#[tokio::test]
async fn scan_lists_holders_waiters_and_readers_under_the_prefix_only() {
    let c = client().await;
    let meta = LockOptions { metadata: Some("host-a".into()), ..quick(30_000) };
    let held = lock(&c, "jobs:{nightly}%", meta);
    assert!(held.acquire(Wait::No).await.unwrap());
    // Its fence is in Redis from its first renewal on (a take by the
    // transaction records none).
    held.extend(None).await.unwrap();
    let fair = LockOptions { fair: true, ..quick(30_000) };
    let head = lock(&c, "jobs:fair", fair.clone());
    assert!(head.acquire(Wait::No).await.unwrap());
    let waiter = lock(&c, "jobs:fair", fair);
    let waiting = tokio::spawn(async move { waiter.acquire(Wait::Forever).await });
    wait_for_zcard(&[&c.keys().fair("jobs:fair").queue], 1).await;

    let rw = RwMutex::new(c.clone(), "doc".into(), true).unwrap();
    let readers = [rw.read(quick(30_000), None).unwrap(), rw.read(quick(30_000), None).unwrap()];
    for r in &readers {
        assert!(r.acquire(Wait::No).await.unwrap());
    }
    let writer = rw.write(quick(30_000), None).unwrap();
    assert!(!writer.acquire(Wait::Until(Instant::now() + Duration::from_millis(30))).await.unwrap());
    // A writer that gave up withdrew its intent: make one that stays.
    let stays = rw.write(quick(30_000), None).unwrap();
    let intent = tokio::spawn(async move { stays.acquire(Wait::Forever).await });

    let other = ferrolock::Client::connect(ClientOptions {
        prefix: format!("{}other:", c.options().prefix),
        ..c.options().clone()
    })
    .await
    .unwrap();
    let foreign = lock(&other, "jobs:foreign", quick(30_000));
    assert!(foreign.acquire(Wait::No).await.unwrap());

    // The spawned writer's intent shows in Redis only: look until it does.
    let deadline = Instant::now() + Duration::from_secs(5);
    let all = loop {
        let all = c.scan("*").await.unwrap();
        if all.iter().any(|s| s.intent_pttl_ms.is_some()) {
            break all;
        }
        assert!(Instant::now() < deadline, "the waiting writer left no intent");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let seen: Vec<(&str, Kind)> = all.iter().map(|s| (s.name.as_str(), s.kind)).collect();
    assert_eq!(seen, [("doc", Kind::RwMutex), ("jobs:fair", Kind::Lock), ("jobs:{nightly}%", Kind::Lock)]);
    let nightly = &all[2];
    let holder = nightly.holder.as_ref().unwrap();
    assert_eq!(holder.token, held.token().unwrap());
    assert_eq!(holder.metadata.as_deref(), Some("host-a"));
    assert_eq!(holder.fence, held.fence().unwrap());
    assert!(holder.pttl_ms > 20_000);
    assert_eq!(all[1].queued_writers, 1);
    assert_eq!(all[1].waiters(), 1);
    let doc = &all[0];
    assert!(doc.holder.is_none());
    let mut tokens: Vec<&str> = doc.readers.iter().map(|r| r.token.as_str()).collect();
    tokens.sort_unstable();
    let mut expected: Vec<String> = readers.iter().map(|r| r.token().unwrap()).collect();
    expected.sort_unstable();
    assert_eq!(tokens, expected);
    assert!(doc.readers.iter().all(|r| r.pttl_ms > 20_000));

    let only: Vec<String> = c.scan("jobs:*").await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(only, ["jobs:fair", "jobs:{nightly}%"]);
    let braces: Vec<String> = c.scan("jobs:{n?ghtly}?").await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(braces, ["jobs:{nightly}%"]);
    assert!(c.scan("nothing*").await.unwrap().is_empty());
    assert!(matches!(c.scan("").await, Err(ferrolock::Error::InvalidArgument(_))));
    // Under every prefix: this one's and the other's, each read back with its own.
    let p = c.options().prefix.clone();
    let every: Vec<(String, String)> = c
        .scan_every_prefix("jobs:*")
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.prefix.starts_with(&p))
        .map(|s| (s.prefix, s.name))
        .collect();
    let other_prefix = format!("{p}other:");
    let expected =
        [(p.as_str(), "jobs:fair"), (p.as_str(), "jobs:{nightly}%"), (other_prefix.as_str(), "jobs:foreign")];
    assert_eq!(every, expected.map(|(prefix, name)| (prefix.to_string(), name.to_string())));
    assert!(all.iter().all(|s| s.prefix == p));

    assert_eq!(rw.force_release(None).await.unwrap(), (false, 2));
    assert!(intent.await.unwrap().unwrap(), "the waiting writer gets in once the readers are gone");
    head.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    assert_eq!(c.state_of("doc").await.unwrap()[0].holder.as_ref().map(|h| h.fence > 0), Some(true));
}

#[tokio::test]
async fn a_free_name_has_no_state() {
    let c = client().await;
    assert!(c.state_of("free").await.unwrap().is_empty());
    let l: Lock = lock(&c, "free", quick(5000));
    assert!(l.acquire(Wait::No).await.unwrap());
    let states = c.state_of("free").await.unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].kind, Kind::Lock);
    l.release().await.unwrap();
    assert!(c.state_of("free").await.unwrap().is_empty());
    assert!(c.scan("*").await.unwrap().is_empty());
}

/// Every kind is read from the key layout table: a semaphore's permits and
/// an election's leader are described, inspected and force-released as a
/// Lock is.
#[tokio::test]
async fn semaphores_and_elections_are_listed_inspected_and_force_released() {
    let c = client().await;
    let meta = |m: &str| LockOptions { metadata: Some(m.into()), ..quick(30_000) };
    let permits: Vec<Lock> = ["worker-0", "worker-1"]
        .into_iter()
        .map(|m| ferrolock::semaphore::permit(c.clone(), "partner-api".into(), 3, meta(m), None).unwrap())
        .collect();
    for p in &permits {
        assert!(p.acquire(Wait::No).await.unwrap());
    }
    let election = ferrolock::election::Election::new(c.clone(), "leader-x".into()).unwrap();
    let term = election.candidate("host-a".into(), quick(30_000), None).unwrap();
    assert!(term.acquire(Wait::No).await.unwrap());

    let all = c.scan("*").await.unwrap();
    let seen: Vec<(&str, Kind)> = all.iter().map(|s| (s.name.as_str(), s.kind)).collect();
    assert_eq!(seen, [("leader-x", Kind::Election), ("partner-api", Kind::Semaphore)]);
    let (el, sem) = (&all[0], &all[1]);
    let leader = el.holder.as_ref().unwrap();
    assert_eq!(
        (leader.token.as_str(), leader.metadata.as_deref(), leader.fence),
        (term.token().unwrap().as_str(), Some("host-a"), term.fence().unwrap())
    );
    assert_eq!(sem.limit, Some(3));
    assert!(sem.holder.is_none() && sem.readers.is_empty());
    let mut held: Vec<(String, Option<String>)> =
        sem.holders.iter().map(|h| (h.token.clone(), h.metadata.clone())).collect();
    held.sort();
    let mut expected: Vec<(String, Option<String>)> = permits
        .iter()
        .zip(["worker-0", "worker-1"])
        .map(|(p, m)| (p.token().unwrap(), Some(m.into())))
        .collect();
    expected.sort();
    assert_eq!(held, expected);
    assert!(c.inspect("partner-api").await.unwrap().is_some());
    assert_eq!(c.inspect("leader-x").await.unwrap().map(|r| r.token), term.token());

    let first = permits[0].token().unwrap();
    assert!(!c.force_release("partner-api", Some("not-a-holder")).await.unwrap());
    assert_eq!(
        c.force_release_kinds("partner-api", Some(&first)).await.unwrap().iter().map(|k| k.1).sum::<u64>(),
        1
    );
    assert_eq!(c.state_of("partner-api").await.unwrap()[0].holders.len(), 1);
    assert!(c.force_release("partner-api", None).await.unwrap());
    assert!(c.state_of("partner-api").await.unwrap().is_empty());
    assert!(c.force_release("leader-x", term.token().as_deref()).await.unwrap());
    assert!(election.leader().await.unwrap().is_none());
    assert!(c.scan("*").await.unwrap().is_empty());
}
