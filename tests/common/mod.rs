//! Shared by the cargo integration tests: real redis-servers (each started on
//! a free loopback port, or the one REDIS_URL names for the shared one) and
//! clients with unique prefixes. The only launcher of the Rust tests: the
//! Python ones use `ferrolock.testing.RedisServer`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferrolock::{Client, ClientOptions, Lock, LockOptions};

/// A throwaway redis-server on a free loopback port, with no persistence.
/// It is killed when dropped, or when the test process exits however it
/// exits (its shell wrapper kills it when our end of its stdin closes).
pub(crate) struct Server {
    pub url: String,
    pub port: u16,
    pid: Option<u32>,
    _child: Option<Child>,
}

impl Server {
    pub(crate) fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // SIGKILL at the end: a server left stopped (SIGSTOP) ignores SIGTERM.
        let mut child = Command::new("sh")
            .args([
                "-c",
                "redis-server \"$@\" >/dev/null 2>&1 & pid=$!; echo $pid; read _; kill -9 $pid",
                "sh",
            ])
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (make deps installs it)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let pid = line.trim().parse().expect("the shell wrapper prints redis-server's pid");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10)); // nothing to await but its port
        }
        Server { url: format!("redis://127.0.0.1:{port}/0"), port, pid: Some(pid), _child: Some(child) }
    }

    fn signal(&self, name: &str) {
        let pid = self.pid.expect("a server this test started").to_string();
        assert!(Command::new("kill").args([name, &pid]).status().unwrap().success(), "kill {name} {pid}");
    }

    /// SIGSTOP: the port still accepts connections, nothing answers.
    pub(crate) fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT, after `pause`.
    pub(crate) fn resume(&self) {
        self.signal("-CONT");
    }
}

static SERVER: OnceLock<Server> = OnceLock::new();
static PREFIX: AtomicUsize = AtomicUsize::new(0);

/// The server shared by a test binary: REDIS_URL's, or one started for it.
pub(crate) fn server_url() -> &'static str {
    &SERVER
        .get_or_init(|| match std::env::var("REDIS_URL") {
            Ok(url) => Server { url, port: 0, pid: None, _child: None },
            Err(_) => Server::start(),
        })
        .url
}

/// A prefix no other client of this test process has.
pub(crate) fn unique_prefix() -> String {
    let n = PREFIX.fetch_add(1, Ordering::SeqCst);
    format!("core:{}:{n}:", std::process::id())
}

pub(crate) async fn client() -> Client {
    let opts =
        ClientOptions { url: server_url().to_string(), prefix: unique_prefix(), ..ClientOptions::default() };
    Client::connect(opts).await.unwrap()
}

pub(crate) fn lock(client: &Client, name: &str, opts: LockOptions) -> Lock {
    Lock::new(client.clone(), vec![name.to_string()], opts, None).unwrap()
}

pub(crate) fn quick(ttl_ms: u64) -> LockOptions {
    LockOptions { ttl: Duration::from_millis(ttl_ms), ..LockOptions::default() }
}

/// Takes and releases `n` holds made by `make(i)`, one after another, each
/// at once: each fence must be above the one before.
pub(crate) async fn assert_fences_increase(n: usize, make: impl Fn(usize) -> Lock) {
    let mut last = 0;
    for i in 0..n {
        let hold = make(i);
        assert!(hold.acquire(ferrolock::Wait::No).await.unwrap(), "hold {i} not granted");
        let fence = hold.fence().unwrap();
        assert!(fence > last, "fence {fence} not above {last}");
        last = fence;
        hold.release().await.unwrap();
    }
}

/// Polls Redis until the sorted sets `keys` hold `n` members together (another
/// task's progress, seen from outside).
/// Until the one waiter tagged in a fair primitive's `tags` hash (token ->
/// '<attempt> <patience_ms>') has made attempt `n` or a later one.
pub(crate) async fn wait_for_attempt(tags: &str, n: u64) {
    let mut con =
        redis::Client::open(server_url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tagged: Vec<String> = redis::cmd("HVALS").arg(tags).query_async(&mut con).await.unwrap();
        let attempt = tagged.first().and_then(|t| t.split(' ').next()?.parse::<u64>().ok());
        if attempt.is_some_and(|a| a >= n) {
            return;
        }
        assert!(Instant::now() < deadline, "{tags:?} never tagged attempt {n} (last {tagged:?})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(crate) async fn wait_for_zcard(keys: &[&String], n: usize) {
    let mut con =
        redis::Client::open(server_url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut total = 0;
        for k in keys {
            total += redis::cmd("ZCARD").arg(*k).query_async::<usize>(&mut con).await.unwrap();
        }
        if total == n {
            return;
        }
        assert!(Instant::now() < deadline, "{keys:?} never held {n} members (last {total})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
