//! The quorum (Redlock) core against three real redis-servers: a lock held on
//! every master and refused to others, a majority grant with one master
//! stopped or killed, fences increasing across holds, no grant without a
//! majority, and two URLs of one server refused.

mod common;

use std::time::{Duration, Instant};

use common::{assert_fences_increase, lock, quick, unique_prefix, Server};
use ferrolock::{Client, ClientOptions, Error, Wait};

/// Three masters and the prefix of one test.
struct Masters {
    servers: Vec<Server>,
    prefix: String,
}

impl Masters {
    fn start() -> Masters {
        Masters { servers: (0..3).map(|_| Server::start()).collect(), prefix: unique_prefix() }
    }

    fn options(&self) -> ClientOptions {
        ClientOptions {
            urls: self.servers.iter().map(|s| s.url.clone()).collect(),
            prefix: self.prefix.clone(),
            command_timeout: Duration::from_secs(2),
            ..ClientOptions::default()
        }
    }

    async fn client(&self) -> Client {
        Client::connect(self.options()).await.unwrap()
    }

    /// The token master `i` has for `name`, read behind ferrolock's back.
    async fn holder(&self, i: usize, name: &str) -> Option<String> {
        let url = &self.servers[i].url;
        let mut con =
            redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let key = format!("{}{{{name}}}", self.prefix);
        let value: Option<String> = redis::cmd("GET").arg(key).query_async(&mut con).await.unwrap();
        // A hold's value starts with its token (`<token> <fence> <flags>`,
        // lua/lib/hold.lua); a kept fence alone has none.
        value.and_then(|v| v.split(' ').next().filter(|t| !t.is_empty()).map(str::to_string))
    }

    async fn holders(&self, name: &str) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for i in 0..self.servers.len() {
            out.push(self.holder(i, name).await);
        }
        out
    }

    /// Polls until every master names `want` as the holder of `name`. A step
    /// returns once a majority answered; the last master's answer, already
    /// sent for, may come after.
    async fn settle(&self, name: &str, want: Option<String>) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let seen = self.holders(name).await;
            if seen.iter().all(|h| *h == want) {
                return;
            }
            assert!(Instant::now() < deadline, "the masters name {seen:?} as holders, not {want:?} on each");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[tokio::test]
async fn held_on_every_master_refused_to_others_and_released_everywhere() {
    let m = Masters::start();
    let (c, other) = (m.client().await, m.client().await);
    assert_eq!(c.masters(), 3);
    let a = lock(&c, "report", quick(5000));
    let b = lock(&other, "report", quick(5000));
    assert!(a.acquire(Wait::No).await.unwrap());
    m.settle("report", a.token()).await;
    assert!(!b.acquire(Wait::No).await.unwrap(), "a second holder on a quorum");
    assert!(a.owned().await.unwrap());
    let fence = a.fence().unwrap();
    a.release().await.unwrap();
    m.settle("report", None).await;
    assert!(b.acquire(Wait::No).await.unwrap());
    assert!(b.fence().unwrap() > fence);
    b.release().await.unwrap();
}

#[tokio::test]
async fn fences_increase_across_holds() {
    let m = Masters::start();
    let c = m.client().await;
    assert_fences_increase(20, |_| lock(&c, "fenced", quick(5000))).await;
}

#[tokio::test]
async fn a_majority_grants_with_one_master_stopped() {
    let m = Masters::start();
    let c = m.client().await;
    let before = lock(&c, "job", quick(5000));
    assert!(before.acquire(Wait::No).await.unwrap());
    let fence = before.fence().unwrap();
    before.release().await.unwrap();
    m.servers[2].pause();
    let a = lock(&c, "job", quick(5000));
    assert!(a.acquire(Wait::No).await.unwrap(), "two of three masters answer");
    assert!(a.fence().unwrap() > fence);
    assert_eq!(m.holder(0, "job").await, a.token());
    assert_eq!(m.holder(1, "job").await, a.token());
    let b = lock(&c, "job", quick(5000));
    assert!(!b.acquire(Wait::No).await.unwrap(), "the majority's hold excludes others");
    a.release().await.unwrap();
    assert!(b.acquire(Wait::No).await.unwrap());
    b.release().await.unwrap();
    m.servers[2].resume();
}

#[tokio::test]
async fn a_majority_grants_with_one_master_killed() {
    let mut m = Masters::start();
    let c = m.client().await;
    drop(m.servers.remove(0)); // killed: its port refuses connections
    let a = lock(&c, "job", quick(5000));
    assert!(a.acquire(Wait::No).await.unwrap());
    assert!(a.owned().await.unwrap());
    a.release().await.unwrap();
}

#[tokio::test]
async fn no_grant_without_a_majority() {
    let m = Masters::start();
    let c = m.client().await;
    m.servers[1].pause();
    m.servers[2].pause();
    let a = lock(&c, "job", quick(2000));
    let outcome = a.acquire(Wait::No).await;
    assert!(!matches!(outcome, Ok(true)), "granted by one master of three: {outcome:?}");
    assert!(!a.is_held());
    assert_eq!(m.holder(0, "job").await, None, "the minority's grant is undone");
    m.servers[1].resume();
    m.servers[2].resume();
}

#[tokio::test]
async fn two_urls_of_one_server_are_refused() {
    let m = Masters::start();
    let mut opts = m.options();
    opts.urls[1] = opts.urls[0].replace("/0", "/1"); // another database of the first server
    match Client::connect(opts).await {
        Err(Error::Configuration(message)) => assert!(message.contains("are the same server"), "{message}"),
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("a quorum counting one server twice was accepted"),
    }
}
