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

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use redis::aio::{PubSub, PubSubSink};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;

use crate::error::Result;

/// A subscription connection: where to (un)subscribe, and what arrives.
pub(crate) struct Feed {
    sink: Sink,
    /// (channel, payload) of each message; ends when the connection drops.
    messages: BoxStream<'static, (String, String)>,
}

enum Sink {
    /// SUBSCRIBE on one node.
    Plain(PubSubSink),
    /// SSUBSCRIBE on a Cluster: each channel on the node owning its slot.
    Sharded(ClusterConnection),
}

impl Feed {
    pub(crate) fn plain(pubsub: PubSub) -> Feed {
        let (sink, stream) = pubsub.split();
        let messages =
            stream.map(|m| (m.get_channel_name().to_string(), m.get_payload().unwrap_or_default()));
        Feed { sink: Sink::Plain(sink), messages: messages.boxed() }
    }

    /// A Cluster connection's pushes: sharded messages, until it reports a
    /// disconnection (a message may have been lost then: the feed ends, so
    /// every waiter retries and a new feed is made).
    pub(crate) fn sharded(conn: ClusterConnection, pushes: UnboundedReceiver<PushInfo>) -> Feed {
        let messages = futures_util::stream::unfold(pushes, |mut pushes| async move {
            loop {
                let push = pushes.recv().await?;
                match (push.kind, push.data.as_slice()) {
                    (PushKind::SMessage, [channel, payload]) => {
                        let text = |v| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
                        return Some(((text(channel), text(payload)), pushes));
                    }
                    (PushKind::Disconnection, _) => return None,
                    _ => {} // subscription confirmations
                }
            }
        });
        Feed { sink: Sink::Sharded(conn), messages: messages.boxed() }
    }
}

impl Sink {
    async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(s) => s.subscribe(channel).await,
            Sink::Sharded(c) => c.ssubscribe(channel).await,
        }
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(s) => s.unsubscribe(channel).await,
            Sink::Sharded(c) => c.sunsubscribe(channel).await,
        }
    }
}

/// One waiting acquire.
pub(crate) struct Waiter {
    notify: Notify,
    reader: bool,
    token: String,
    /// Woken and not yet back to waiting: if it gives up now, the wake-up
    /// passes to the next waiter.
    woken: AtomicBool,
    /// A fair release handed it the lock, with this fence (0 for a reader).
    handed: Mutex<Option<i64>>,
}

#[derive(Default)]
pub(crate) struct Wakeups {
    waiters: Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>,
    /// The subscription connection of this process, and its channels.
    sub: tokio::sync::Mutex<Option<Subscription>>,
}

struct Subscription {
    pid: u32,
    sink: Sink,
    channels: HashSet<String>,
    alive: Arc<AtomicBool>,
}

impl Wakeups {
    /// Registers a waiter on `channels`; returns once subscribed to all.
    pub(crate) async fn register(
        self: &Arc<Self>,
        connect: impl std::future::Future<Output = Result<Feed>>,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Registration> {
        let waiter = Arc::new(Waiter {
            notify: Notify::new(),
            reader,
            token: token.to_string(),
            woken: AtomicBool::new(false),
            handed: Mutex::new(None),
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
            let Feed { sink, mut messages } = connect.await?;
            let alive = Arc::new(AtomicBool::new(true));
            let (me, flag) = (Arc::downgrade(self), alive.clone());
            tokio::spawn(async move {
                while let Some((channel, to)) = messages.next().await {
                    match me.upgrade() {
                        Some(w) => w.dispatch(&channel, &to),
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
    /// release names the new holders it handed the lock to (`to`: one a line,
    /// `<token>` or `<token> <fence>`): only they wake, those that wait here.
    fn dispatch(&self, channel: &str, to: &str) {
        let waiters = self.waiters.lock().unwrap();
        let Some(queue) = waiters.get(channel) else { return };
        if !to.is_empty() {
            for line in to.split('\n') {
                let (token, fence) = match line.split_once(' ') {
                    Some((token, fence)) => (token, fence.parse().ok()),
                    None => (line, Some(0)),
                };
                if let Some(w) = queue.iter().find(|w| w.token == token) {
                    *w.handed.lock().unwrap() = fence;
                    w.wake();
                }
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

    /// The fence of the lock a fair release handed to this waiter, once.
    pub(crate) fn take_handed(&self) -> Option<i64> {
        self.waiter.handed.lock().unwrap().take()
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
