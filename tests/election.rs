//! The core election against a real redis-server: campaigning takes the term,
//! the leader is readable with its value, resigning ends it, a waiting
//! campaigner takes over, term numbers increase, and observers see each change.

mod common;

use std::time::{Duration, Instant};

use common::{assert_fences_increase, client, quick};
use ferrolock::election::Election;
use ferrolock::Wait;

fn soon(ms: u64) -> Wait {
    Wait::Until(Instant::now() + Duration::from_millis(ms))
}

#[tokio::test]
async fn campaign_lead_resign() {
    let c = client().await;
    let e = Election::new(c, "cron".into()).unwrap();
    assert_eq!(e.leader().await.unwrap(), None);
    let term = e.candidate("host-a".into(), quick(5000), None).unwrap();
    assert!(term.acquire(Wait::No).await.unwrap());
    let leader = e.leader().await.unwrap().expect("a leader");
    assert_eq!((leader.value.as_str(), leader.term), ("host-a", term.fence().unwrap()));
    assert!(leader.ttl.is_some_and(|t| t > Duration::ZERO && t <= Duration::from_secs(5)));
    e.proclaim(&term, "host-a:v2").await.unwrap();
    let proclaimed = e.leader().await.unwrap().unwrap();
    assert_eq!((proclaimed.value.as_str(), proclaimed.term), ("host-a:v2", leader.term));
    term.release().await.unwrap();
    assert_eq!(e.leader().await.unwrap(), None);
    assert!(e.proclaim(&term, "late").await.is_err(), "a resigned term proclaims");
}

#[tokio::test]
async fn a_second_campaigner_takes_over_with_a_higher_term() {
    let c = client().await;
    let e = Election::new(c, "primary".into()).unwrap();
    let first = e.candidate("a".into(), quick(5000), None).unwrap();
    assert!(first.acquire(Wait::No).await.unwrap());
    let first_term = first.fence().unwrap();
    let second = e.candidate("b".into(), quick(5000), None).unwrap();
    assert!(!second.acquire(Wait::No).await.unwrap(), "two leaders at once");
    let mut observer = e.observe();
    assert_eq!(observer.next().await.unwrap().map(|l| l.value), Some("a".into()));
    let waiting = tokio::spawn(async move {
        let won = second.acquire(soon(5000)).await.unwrap();
        (won, second)
    });
    first.release().await.unwrap();
    let (won, second) = waiting.await.unwrap();
    assert!(won, "the waiting campaigner did not take over");
    let leader = e.leader().await.unwrap().unwrap();
    assert_eq!(leader.value, "b");
    assert!(leader.term > first_term, "term {} not above {first_term}", leader.term);
    let seen = loop {
        // the observer may first report the gap between the two terms
        if let Some(l) = observer.next().await.unwrap() {
            break l;
        }
    };
    assert_eq!((seen.value.as_str(), seen.term), ("b", leader.term));
    second.release().await.unwrap();
    assert_eq!(observer.next().await.unwrap(), None);
}

#[tokio::test]
async fn terms_increase_across_many_leaders() {
    let c = client().await;
    let e = Election::new(c, "many".into()).unwrap();
    assert_fences_increase(10, |i| e.candidate(format!("host-{i}"), quick(5000), None).unwrap()).await;
}

#[tokio::test]
async fn an_election_on_a_quorum_is_refused() {
    let c = ferrolock::Client::new(ferrolock::ClientOptions {
        urls: vec![
            "redis://127.0.0.1:1/0".into(),
            "redis://127.0.0.1:2/0".into(),
            "redis://127.0.0.1:3/0".into(),
        ],
        ..ferrolock::ClientOptions::default()
    })
    .unwrap();
    assert!(matches!(Election::new(c, "x".into()), Err(ferrolock::Error::InvalidArgument(_))));
}
