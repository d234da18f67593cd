//! Core log records into Python's `logging` (the `ferrolock` logger), from a
//! thread of their own. pyo3-log calls Python on whichever thread logs; when
//! that is the main thread, inside a blocking call, a pending Ctrl-C runs its
//! handler inside `logging` and the KeyboardInterrupt is left set on the
//! thread, so the call returns with an error set (a SystemError, and a result
//! lost). Here the calling thread only queues the record; a forwarding thread,
//! never the main one, hands it to pyo3-log.
//!
//! Levels: a record at info or above (rare: a failover, a lost hold, a URL
//! parameter not used) is always queued and the forwarding thread asks the
//! Python logger whether it is enabled, so a level set at any time is obeyed.
//! A debug record (one per renewal) is filtered on the calling thread by
//! pyo3-log's level cache, which the forwarding thread clears every second:
//! a level lowered to DEBUG takes effect within a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{Level, Log, Metadata, Record};
use pyo3::prelude::*;

use super::exit::{exiting, InFlight};
use crate::support::per_process::PerProcess;

/// A record that can cross threads.
struct Queued {
    level: Level,
    target: String,
    message: String,
    module_path: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

/// Records queued for Python's `logging` so far, in this process.
static QUEUED: AtomicU64 = AtomicU64::new(0);

/// Records queued for Python's `logging` so far (`_debug_stats`).
pub(crate) fn queued() -> u64 {
    QUEUED.load(Ordering::Relaxed)
}

/// How stale the level cache of debug records may get.
const LEVEL_CACHE_LIFE: Duration = Duration::from_secs(1);

/// The two views of Python's `logging` a record goes through.
struct Loggers {
    /// Loggers cached, levels asked each time: info and above.
    exact: pyo3_log::Logger,
    /// Loggers and levels cached: debug and below.
    cached: pyo3_log::Logger,
}

impl Loggers {
    fn for_level(&self, level: Level) -> &pyo3_log::Logger {
        if level <= Level::Info {
            &self.exact
        } else {
            &self.cached
        }
    }
}

struct Forwarder {
    python: Arc<Loggers>,
    /// The queue of this process and its forwarding thread: a forked child
    /// starts its own (its parent's thread does not exist there).
    queue: PerProcess<Sender<Queued>>,
}

impl Forwarder {
    fn queue(&self) -> Option<Sender<Queued>> {
        self.queue
            .try_get(|| {
                let (tx, rx) = channel();
                let python = self.python.clone();
                let thread = std::thread::Builder::new().name("ferrolock-log".into());
                thread.spawn(move || forward(&python, &rx)).map(|_| tx)
            })
            .ok()
    }
}

fn forward(python: &Loggers, records: &Receiver<Queued>) {
    let levels = python.cached.reset_handle();
    let mut reset = Instant::now();
    loop {
        let next = records.recv_timeout(LEVEL_CACHE_LIFE);
        if reset.elapsed() >= LEVEL_CACHE_LIFE {
            levels.reset();
            reset = Instant::now();
        }
        let r = match next {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let _in_flight = InFlight::enter();
        if exiting() {
            return;
        }
        python.for_level(r.level).log(
            &Record::builder()
                .level(r.level)
                .target(&r.target)
                .module_path(r.module_path.as_deref())
                .file(r.file.as_deref())
                .line(r.line)
                .args(format_args!("{}", r.message))
                .build(),
        );
    }
}

impl Log for Forwarder {
    fn enabled(&self, metadata: &Metadata) -> bool {
        // No call into Python on the calling thread: info and above are
        // always queued, debug goes by pyo3-log's level cache, which holds
        // the levels of the loggers records go to: looked up by the name
        // the record is forwarded under, not by its module path (which
        // the cache never holds, so every debug record went to Python).
        metadata.level() <= Level::Info || {
            let target = logger_target(metadata.target());
            self.python.cached.enabled(&Metadata::builder().level(metadata.level()).target(&target).build())
        }
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) || exiting() {
            return;
        }
        let queued = Queued {
            level: record.level(),
            target: logger_target(record.target()),
            message: record.args().to_string(),
            module_path: record.module_path().map(str::to_string),
            file: record.file().map(str::to_string),
            line: record.line(),
        };
        if let Some(queue) = self.queue() {
            if queue.send(queued).is_ok() {
                QUEUED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn flush(&self) {}
}

/// The logger a record goes to: `ferrolock.<module>` for the core's
/// top-level module, whichever of its files logged, so a module split into
/// files keeps the one logger name users configure (`ferrolock.client`,
/// `ferrolock.lock`, `ferrolock.watchdog`, ...).
fn logger_target(target: &str) -> String {
    let mut parts = target.split("::");
    let (Some(krate), Some(mut module)) = (parts.next(), parts.next()) else {
        return target.to_string();
    };
    // The layer folders of `src/` are not part of the name (docs/design.md, "Layers").
    if LAYERS.contains(&module) {
        module = parts.next().unwrap_or(module);
    }
    // One deployment's connections log as the client users made.
    if module == "backend" {
        module = "client";
    }
    format!("{krate}::{module}")
}

/// The folders of `src/` that group modules by layer.
const LAYERS: [&str; 5] = ["transport", "handle", "support", "primitive", "ops"];

/// Routes the core's `log` records to Python's `logging`.
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    let python = Loggers {
        exact: pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?,
        cached: pyo3_log::Logger::new(py, pyo3_log::Caching::LoggersAndLevels)?,
    };
    let forwarder = Forwarder { python: Arc::new(python), queue: PerProcess::new() };
    if log::set_boxed_logger(Box::new(forwarder)).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    Ok(())
}
