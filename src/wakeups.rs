//! Waking waiters when a lock is released, instead of polling.
//!
//! Release scripts publish on a channel under the lock's hash tag. Each
//! process has one subscription connection per `Client`; waiters register on
//! a channel (the subscription confirmed before they retry, so a release
//! between their failed attempt and the subscription is not missed). A
//! message wakes the waiters that can proceed: the oldest one, or every
//! reader when the oldest is a reader. Waiters still retry on a timer bounded
//! by the holder's ttl: wake-ups are the fast path, not the only one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::Notify;

use crate::error::Result;

/// One waiting acquire.
pub(crate) struct Waiter {
    notify: Notify,
    reader: bool,
    token: String,
    /// Woken and not yet back to waiting: if it gives up now, the wake-up
    /// passes to the next waiter.
    woken: AtomicBool,
}

#[derive(Default)]
pub(crate) struct Wakeups {
    waiters: Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>,
    /// The subscription connection of this process, and its channels.
    sub: tokio::sync::Mutex<Option<Subscription>>,
}

struct Subscription {
    pid: u32,
    sink: PubSubSink,
    channels: HashSet<String>,
    alive: Arc<AtomicBool>,
}

impl Wakeups {
    /// Registers a waiter on `channels`; returns once subscribed to all.
    pub(crate) async fn register(
        self: &Arc<Self>,
        connect: impl std::future::Future<Output = Result<redis::aio::PubSub>>,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Registration> {
        let waiter = Arc::new(Waiter {
            notify: Notify::new(),
            reader,
            token: token.to_string(),
            woken: AtomicBool::new(false),
        });
        let mut registration = Registration {
            wakeups: self.clone(),
            channels: channels.to_vec(),
            waiter,
            alive: Arc::new(AtomicBool::new(false)),
        };
        {
            let mut waiters = self.waiters.lock().unwrap();
            for c in channels {
                waiters.entry(c.clone()).or_default().push_back(registration.waiter.clone());
            }
        }
        let mut sub = self.sub.lock().await;
        let pid = std::process::id();
        let usable = sub.as_ref().is_some_and(|s| s.pid == pid && s.alive.load(Ordering::SeqCst));
        if !usable {
            if let Some(stale) = sub.take() {
                if stale.pid != pid {
                    std::mem::forget(stale); // a forked parent's connection
                }
            }
            let (sink, stream) = connect.await?.split();
            let alive = Arc::new(AtomicBool::new(true));
            let (me, flag) = (Arc::downgrade(self), alive.clone());
            tokio::spawn(async move {
                let mut stream = stream;
                while let Some(msg) = stream.next().await {
                    match me.upgrade() {
                        Some(w) => {
                            let to: String = msg.get_payload().unwrap_or_default();
                            w.dispatch(msg.get_channel_name(), &to);
                        }
                        None => return,
                    }
                }
                // The connection is gone: everyone retries, the next waiter reconnects.
                flag.store(false, Ordering::SeqCst);
                if let Some(w) = me.upgrade() {
                    w.wake_all();
                }
            });
            *sub = Some(Subscription { pid, sink, channels: HashSet::new(), alive });
        }
        let s = sub.as_mut().expect("just made");
        registration.alive = s.alive.clone();
        for c in channels {
            if !s.channels.contains(c) {
                s.sink.subscribe(c).await?;
                s.channels.insert(c.clone());
            }
        }
        Ok(registration)
    }

    /// A release was published on `channel`: wake whoever can proceed. A fair
    /// release names its new holders (`to`, one token a line): only they
    /// wake, those of them that wait here.
    fn dispatch(&self, channel: &str, to: &str) {
        let waiters = self.waiters.lock().unwrap();
        let Some(queue) = waiters.get(channel) else { return };
        if !to.is_empty() {
            for w in queue.iter().filter(|w| w.token == to || to.split('\n').any(|t| t == w.token)) {
                w.wake();
            }
            return;
        }
        let Some(first) = queue.front() else { return };
        if first.reader {
            for w in queue.iter().filter(|w| w.reader) {
                w.wake();
            }
        } else {
            first.wake();
        }
    }

    fn wake_all(&self) {
        for queue in self.waiters.lock().unwrap().values() {
            for w in queue {
                w.wake();
            }
        }
    }

    /// The last waiter on `channel` left: unsubscribe, unless one came back.
    async fn forget(self: Arc<Self>, channel: String) {
        let mut sub = self.sub.lock().await;
        if self.waiters.lock().unwrap().contains_key(&channel) {
            return;
        }
        if let Some(s) = sub.as_mut().filter(|s| s.pid == std::process::id()) {
            if s.channels.remove(&channel) {
                let _ = s.sink.unsubscribe(&channel).await;
            }
        }
    }
}

impl Waiter {
    fn wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// A waiter's place in line; leaving it (dropped) passes on an unused wake-up.
pub(crate) struct Registration {
    wakeups: Arc<Wakeups>,
    channels: Vec<String>,
    waiter: Arc<Waiter>,
    /// Whether the subscription this waiter relies on is still connected.
    alive: Arc<AtomicBool>,
}

impl Registration {
    /// Until woken (or forever: callers bound it with their own timer).
    pub(crate) async fn woken(&self) {
        self.waiter.notify.notified().await;
    }

    /// The attempt after a wake-up failed too: back in line, the wake-up used.
    pub(crate) fn rearm(&self) {
        self.waiter.woken.store(false, Ordering::SeqCst);
    }

    /// The subscription it relied on dropped: register again for wake-ups.
    pub(crate) fn stale(&self) -> bool {
        !self.alive.load(Ordering::SeqCst)
    }

    /// The acquire succeeded: its wake-up (if any) was used.
    pub(crate) fn done(self) {
        self.waiter.woken.store(false, Ordering::SeqCst);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let unused_wakeup = self.waiter.woken.load(Ordering::SeqCst);
        let mut emptied = Vec::new();
        {
            let mut waiters = self.wakeups.waiters.lock().unwrap();
            for c in &self.channels {
                if let Some(queue) = waiters.get_mut(c) {
                    queue.retain(|w| !Arc::ptr_eq(w, &self.waiter));
                    if queue.is_empty() {
                        waiters.remove(c);
                        emptied.push(c.clone());
                    }
                }
            }
        }
        if unused_wakeup {
            for c in &self.channels {
                self.wakeups.dispatch(c, "");
            }
        }
        if !emptied.is_empty() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let wakeups = self.wakeups.clone();
                rt.spawn(async move {
                    for c in emptied {
                        wakeups.clone().forget(c).await;
                    }
                });
            }
        }
    }
}
