//! Waking waiters when a lock is released, instead of polling.
//!
//! Release scripts publish on a channel under the lock's hash tag. Each
//! process has one subscription connection per `Backend`; waiters register on
//! a channel (the subscription confirmed before they retry, so a release
//! between their failed attempt and the subscription is not missed). A
//! message wakes the waiters that can proceed: the oldest one, or every
//! reader when the oldest is a reader. A woken waiter that cannot use its
//! wake-up (it gave up, or it also waits for another name of a multi-lock)
//! passes it on. Waiters still retry on a timer bounded by the holder's ttl:
//! wake-ups are the fast path, not the only one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::support::cleanup::Cleanups;
use crate::support::stats::WAITERS;
use crate::transport::wakeups::handover::Grant;

mod feed;
mod handover;
mod waits;

pub(crate) use feed::Feed;
use feed::Sink;
pub(crate) use waits::Waits;

/// One waiting acquire.
pub(crate) struct Waiter {
    notify: Notify,
    reader: bool,
    token: String,
    /// Woken and not yet back to waiting: if it gives up now, the wake-up
    /// passes to the next waiter.
    woken: AtomicBool,
    /// What a fair release handed it: the fence (0 for a reader) and the
    /// attempt the grant was made for.
    handed: Mutex<Option<Handed>>,
}

/// A fair release's grant to one waiter, valid for that waiter's `attempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handed {
    pub fence: i64,
    pub attempt: u64,
}

/// The wake-ups of one process (a forked child gets its own).
pub(crate) struct Wakeups {
    waiters: Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>,
    /// The subscription connection, and its channels.
    sub: tokio::sync::Mutex<Option<Subscription>>,
    cleanups: Arc<Cleanups>,
    /// Told when a woken waiter has tried again (back in line, holding, or
    /// gone): see `yield_to_woken`.
    settled: Notify,
}

struct Subscription {
    sink: Sink,
    channels: HashSet<String>,
    alive: Arc<AtomicBool>,
    /// The task reading its messages: ended with it.
    reader: tokio::task::AbortHandle,
    /// How long a (UN)SUBSCRIBE may wait for its answer.
    limit: Duration,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        self.reader.abort();
    }
}

impl Wakeups {
    pub(crate) fn new(cleanups: Arc<Cleanups>) -> Wakeups {
        Wakeups {
            waiters: Mutex::default(),
            sub: tokio::sync::Mutex::default(),
            cleanups,
            settled: Notify::new(),
        }
    }

    /// A waiter of this process was woken on one of `channels` and has not
    /// tried again yet: a new acquire here lets it go first, until it has
    /// (or until `until`), so a task that releases and comes straight back
    /// does not take the lock from under the waiter its release woke. The
    /// newcomer still makes its own first attempt after that.
    /// `channels` is asked for only when this process has a waiter at all.
    pub(crate) async fn yield_to_woken(
        &self,
        channels: impl FnOnce() -> Vec<String>,
        until: tokio::time::Instant,
    ) {
        if self.waiters.lock().unwrap().is_empty() {
            return;
        }
        let channels = channels();
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if !self.woken_on(&channels) || tokio::time::timeout_at(until, settled).await.is_err() {
                return;
            }
        }
    }

    fn woken_on(&self, channels: &[String]) -> bool {
        let waiters = self.waiters.lock().unwrap();
        channels
            .iter()
            .any(|c| waiters.get(c).is_some_and(|q| q.iter().any(|w| w.woken.load(Ordering::SeqCst))))
    }

    /// Registers a waiter on `channels`; returns once subscribed to all. A
    /// SUBSCRIBE not answered within `limit` fails it, and the connection
    /// is treated as dead: every waiter on it retries, the next one
    /// subscribes anew.
    pub(crate) async fn register(
        self: &Arc<Self>,
        connect: impl std::future::Future<Output = Result<Feed>>,
        channels: &[String],
        reader: bool,
        token: &str,
        limit: Duration,
    ) -> Result<Registration> {
        WAITERS.add();
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
        let usable = sub.as_ref().is_some_and(|s| s.alive.load(Ordering::SeqCst));
        if !usable {
            let Feed { sink, mut messages } = connect.await?;
            let alive = Arc::new(AtomicBool::new(true));
            let (me, flag) = (Arc::downgrade(self), alive.clone());
            let task = tokio::spawn(async move {
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
            let reader = task.abort_handle();
            *sub = Some(Subscription { sink, channels: HashSet::new(), alive, reader, limit });
        }
        let s = sub.as_mut().expect("just made");
        registration.alive = s.alive.clone();
        for c in channels {
            if !s.channels.contains(c) {
                let Ok(subscribed) = tokio::time::timeout(limit, s.sink.subscribe(c)).await else {
                    let dead = sub.take();
                    drop(sub);
                    self.discard(dead);
                    return Err(Error::Connection(format!(
                        "no answer to SUBSCRIBE within {:.3} s: the subscription connection is dropped",
                        limit.as_secs_f64()
                    )));
                };
                subscribed?;
                s.channels.insert(c.clone());
            }
        }
        Ok(registration)
    }

    /// A subscription given up: its waiters are woken, to retry and
    /// subscribe anew.
    fn discard(&self, dropped: Option<Subscription>) {
        if let Some(sub) = dropped {
            drop(sub);
            self.wake_all();
        }
    }

    /// A release was published on `channel`: wake whoever can proceed. A fair
    /// release names the new holders it handed the lock to (`to`: grants,
    /// see `scripts::handover`): only they wake, those that wait here.
    fn dispatch(&self, channel: &str, to: &str) {
        if to.is_empty() {
            self.wake_next(channel, None);
            return;
        }
        let waiters = self.waiters.lock().unwrap();
        let Some(queue) = waiters.get(channel) else { return };
        for Grant { token, fence, attempt } in Grant::all(to) {
            if let Some(w) = queue.iter().find(|w| w.token == token) {
                *w.handed.lock().unwrap() = Some(Handed { fence, attempt });
                w.wake();
            }
        }
    }

    /// Wakes the oldest waiter on `channel` (every reader, when the oldest is
    /// a reader); with `after`, the oldest that came after that waiter (the
    /// one passing its wake-up on: never back to an earlier one, so two
    /// waiters that cannot proceed do not wake each other in turn).
    fn wake_next(&self, channel: &str, after: Option<&Arc<Waiter>>) {
        let waiters = self.waiters.lock().unwrap();
        let Some(queue) = waiters.get(channel) else { return };
        let start = match after {
            Some(me) => match queue.iter().position(|w| Arc::ptr_eq(w, me)) {
                Some(i) => i + 1,
                None => return,
            },
            None => 0,
        };
        let mut others = queue.iter().skip(start);
        let Some(first) = others.next() else { return };
        first.wake();
        if first.reader {
            for w in others.filter(|w| w.reader) {
                w.wake();
            }
        }
    }

    /// The subscription's node is no longer the master: drop it, and wake
    /// every waiter, so each retries and the next one subscribes anew.
    pub(crate) async fn drop_subscription(self: Arc<Self>) {
        let dropped = self.sub.lock().await.take();
        self.discard(dropped);
    }

    fn wake_all(&self) {
        for queue in self.waiters.lock().unwrap().values() {
            for w in queue {
                w.wake();
            }
        }
    }

    /// The last waiter on `channel` left: unsubscribe, unless one came back.
    /// Unanswered within the limit, the connection is given up.
    async fn forget(self: Arc<Self>, channel: String) {
        let mut sub = self.sub.lock().await;
        if self.waiters.lock().unwrap().contains_key(&channel) {
            return;
        }
        if let Some(s) = sub.as_mut() {
            if s.channels.remove(&channel)
                && tokio::time::timeout(s.limit, s.sink.unsubscribe(&channel)).await.is_err()
            {
                let dead = sub.take();
                drop(sub);
                self.discard(dead);
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
    /// What a fair release handed to this waiter, once.
    pub(crate) fn take_handed(&self) -> Option<Handed> {
        self.waiter.handed.lock().unwrap().take()
    }

    /// The attempt after a wake-up failed too: back in line. A waiter on
    /// several channels (a multi-lock) that was woken may have been let down
    /// by another of its names, not by the one released: its wake-up goes on
    /// to the next waiter of each channel, who may be able to proceed.
    pub(crate) fn rearm(&self) {
        let was_woken = self.waiter.woken.swap(false, Ordering::SeqCst);
        if was_woken {
            self.wakeups.settled.notify_waiters();
        }
        if was_woken && self.channels.len() > 1 {
            for c in &self.channels {
                self.wakeups.wake_next(c, Some(&self.waiter));
            }
        }
    }

    /// The subscription it relied on dropped: register again for wake-ups.
    pub(crate) fn stale(&self) -> bool {
        !self.alive.load(Ordering::SeqCst)
    }

    /// The acquire succeeded: its wake-up (if any) was used.
    pub(crate) fn done(self) {
        self.waiter.woken.store(false, Ordering::SeqCst);
        self.wakeups.settled.notify_waiters();
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        WAITERS.sub();
        let mut emptied = Vec::new();
        // Leave the queues first, then look whether a wake-up came: a
        // dispatch wakes only waiters it finds queued, under this same lock,
        // so one that landed before the removal is seen here and passed on.
        let unused_wakeup = {
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
            self.waiter.woken.load(Ordering::SeqCst)
        };
        if unused_wakeup {
            for c in &self.channels {
                self.wakeups.wake_next(c, None);
            }
        }
        self.wakeups.settled.notify_waiters();
        if !emptied.is_empty() {
            let wakeups = self.wakeups.clone();
            self.wakeups.cleanups.spawn(async move {
                for c in emptied {
                    wakeups.clone().forget(c).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter on `channel`, registered as `register` does, without a subscription.
    fn waiter_on(wakeups: &Arc<Wakeups>, channel: &str) -> Registration {
        WAITERS.add();
        let waiter = Arc::new(Waiter {
            notify: Notify::new(),
            reader: false,
            token: "t".into(),
            woken: AtomicBool::new(false),
            handed: Mutex::new(None),
        });
        wakeups.waiters.lock().unwrap().entry(channel.to_string()).or_default().push_back(waiter.clone());
        Registration {
            wakeups: wakeups.clone(),
            channels: vec![channel.to_string()],
            waiter,
            alive: Arc::new(AtomicBool::new(true)),
        }
    }

    #[tokio::test]
    async fn a_new_acquire_lets_a_woken_waiter_of_its_process_try_first() {
        let wakeups = Arc::new(Wakeups::new(Cleanups::new()));
        let channels = vec!["c".to_string()];
        let far = tokio::time::Instant::now() + Duration::from_secs(60);
        let soon = Duration::from_secs(10);
        let waiter = waiter_on(&wakeups, "c");
        // Nobody woken: the newcomer goes at once.
        tokio::time::timeout(soon, wakeups.yield_to_woken(|| channels.clone(), far))
            .await
            .expect("nobody was woken");
        // A release woke the waiter: the newcomer waits until it has tried.
        wakeups.dispatch("c", "");
        let newcomer = tokio::spawn({
            let (wakeups, channels) = (wakeups.clone(), channels.clone());
            async move { wakeups.yield_to_woken(|| channels.clone(), far).await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await; // one thread: the newcomer runs meanwhile
        }
        assert!(!newcomer.is_finished(), "the newcomer went before the woken waiter tried");
        waiter.rearm(); // its attempt failed: back in line
        tokio::time::timeout(soon, newcomer).await.expect("the waiter tried: the newcomer goes").unwrap();
        // Woken again: a newcomer on another channel does not wait, and one
        // on this channel no longer than its bound.
        wakeups.dispatch("c", "");
        let other = vec!["other".to_string()];
        tokio::time::timeout(soon, wakeups.yield_to_woken(|| other.clone(), far))
            .await
            .expect("another channel");
        let bound = tokio::time::Instant::now() + Duration::from_millis(20);
        tokio::time::timeout(soon, wakeups.yield_to_woken(|| channels.clone(), bound))
            .await
            .expect("bounded");
        // Taking the lock (or leaving the line) lets newcomers go too.
        let newcomer = tokio::spawn({
            let (wakeups, channels) = (wakeups.clone(), channels.clone());
            async move { wakeups.yield_to_woken(|| channels.clone(), far).await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!newcomer.is_finished(), "the newcomer went before the woken waiter tried");
        waiter.done();
        tokio::time::timeout(soon, newcomer).await.expect("the waiter holds: the newcomer goes").unwrap();
    }
}
