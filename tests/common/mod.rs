//! Shared by the cargo integration tests: a real redis-server (started on a
//! free port, or the one REDIS_URL names) and clients with unique prefixes.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferrolock::{ClientOptions, Deployment, Lock, LockOptions};

pub struct Server {
    url: String,
    _child: Option<Child>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static PREFIX: AtomicUsize = AtomicUsize::new(0);

pub fn server_url() -> &'static str {
    &SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("REDIS_URL") {
                return Server { url, _child: None };
            }
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            // The shell stops redis-server when our end of its stdin closes,
            // that is when this test process exits, however it exits.
            let child = Command::new("sh")
                .args(["-c", "redis-server \"$@\" >/dev/null 2>&1 & pid=$!; read _; kill $pid", "sh"])
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (make test installs it)");
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(10));
            }
            Server { url: format!("redis://127.0.0.1:{port}/0"), _child: Some(child) }
        })
        .url
}

pub async fn client() -> Deployment {
    let n = PREFIX.fetch_add(1, Ordering::SeqCst);
    let opts = ClientOptions {
        url: server_url().to_string(),
        prefix: format!("core:{}:{n}:", std::process::id()),
        ..ClientOptions::default()
    };
    Deployment::connect(opts).await.unwrap()
}

pub fn lock(client: &Deployment, name: &str, opts: LockOptions) -> Lock {
    Lock::new(client.clone(), vec![name.to_string()], opts, None).unwrap()
}

pub fn quick(ttl_ms: u64) -> LockOptions {
    LockOptions { ttl: Duration::from_millis(ttl_ms), ..LockOptions::default() }
}

/// Polls Redis until the sorted sets `keys` hold `n` members together (another
/// task's progress, seen from outside).
pub async fn wait_for_zcard(keys: &[&String], n: usize) {
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
