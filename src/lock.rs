//! The exclusive lock: one handle, at most one hold at a time, over one name
//! or (all-or-nothing) several.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::retry::Retry;
use crate::scripts::{self, Obtain, Record};
use crate::token::new_token;
use crate::watchdog::{Renewal, Watchdog};

/// Longest accepted name, metadata and token, in bytes.
pub const MAX_NAME: usize = 4096;
pub const MAX_METADATA: usize = 65536;
pub const MAX_TOKEN: usize = 512;
/// Shortest and longest accepted ttl.
pub const MIN_TTL: Duration = Duration::from_millis(1);
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

pub type LostCallback = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Clone)]
pub struct LockOptions {
    pub ttl: Duration,
    pub auto_renew: bool,
    pub retry: Retry,
    /// Stored beside the owner token (seed 002), readable with `inspect`.
    pub metadata: Option<String>,
    pub on_lost: Option<LostCallback>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: Duration::from_secs(30),
            auto_renew: true,
            retry: Retry::default(),
            metadata: None,
            on_lost: None,
        }
    }
}

/// How long `acquire` may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    No,
    Forever,
    Until(Instant),
}

impl Wait {
    fn expired(self) -> bool {
        match self {
            Wait::No => true,
            Wait::Forever => false,
            Wait::Until(t) => Instant::now() >= t,
        }
    }
}

pub struct Lock {
    client: Client,
    names: Vec<String>,
    keys: Arc<[String]>,
    opts: LockOptions,
    /// One permit: held while this handle holds, so two tasks sharing a handle
    /// never share a hold (the second waits, as with `threading.Lock`).
    gate: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    hold: Option<Hold>,
    /// The lease of the latest hold, kept after release to answer `lost`.
    last: Option<Arc<Lease>>,
}

struct Hold {
    token: String,
    fence: Option<i64>,
    lease: Arc<Lease>,
    /// Restored from a token, not yet re-acquired: the next acquire adopts it.
    adopted: bool,
    watchdog: Option<Watchdog>,
}

impl Lock {
    /// A handle on the lock `names` (one name, or several taken all-or-nothing).
    /// With `token`, the handle starts out holding the lock that token owns
    /// (seed 004's restore): it can release it, or acquire to adopt it.
    pub fn new(
        client: Client,
        names: Vec<String>,
        opts: LockOptions,
        token: Option<String>,
    ) -> Result<Lock> {
        validate(&names, &opts, token.as_deref())?;
        let keys: Arc<[String]> = names.iter().map(|n| client.keys().lock(n)).collect();
        let gate = Arc::new(Semaphore::new(1));
        let mut state = State::default();
        if let Some(token) = token {
            gate.try_acquire()
                .expect("a new gate has its permit")
                .forget();
            let lease = Arc::new(Lease::new(None, opts.ttl));
            state.last = Some(lease.clone());
            state.hold = Some(Hold {
                token,
                fence: None,
                lease,
                adopted: true,
                watchdog: None,
            });
        }
        Ok(Lock {
            client,
            names,
            keys,
            opts,
            gate,
            state: Mutex::new(state),
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn options(&self) -> &LockOptions {
        &self.opts
    }

    fn label(&self) -> String {
        format!("lock {:?}", self.names.join(", "))
    }

    /// Takes the lock, waiting as `wait` allows. `Ok(false)`: not taken in time,
    /// or the retry strategy gave up. Cancel-safe: dropping the future leaves
    /// no lock behind.
    pub async fn acquire(&self, wait: Wait) -> Result<bool> {
        self.forget_lost_hold();
        let adopted = self.adopted_token();
        let permit = match adopted {
            Some(_) => None,
            None => match self.enter(wait).await {
                Some(p) => Some(p),
                None => return Ok(false),
            },
        };
        let token = match adopted.clone() {
            Some(t) => t,
            None => new_token()?,
        };
        let metadata = self.opts.metadata.as_deref().unwrap_or("");
        let ttl_ms = self.opts.ttl.as_millis() as u64;
        let mut failed = 0u32;
        loop {
            let sent = Instant::now();
            // Until the answer is in, the script may have taken the lock: if this
            // future is dropped now, release it in the background.
            let guard = adopted.is_none().then(|| CleanupGuard::new(self, &token));
            // On an error the guard releases, in case the script ran.
            let answer =
                scripts::obtain(&self.client, &self.keys, &token, ttl_ms, metadata).await?;
            match answer {
                Obtain::Taken { fence } => {
                    if let Some(g) = guard {
                        g.disarm();
                    }
                    if let Some(p) = permit {
                        p.forget();
                    }
                    self.install(token, fence, sent);
                    return Ok(true);
                }
                Obtain::Busy { pttl_ms } => {
                    if let Some(g) = guard {
                        g.disarm();
                    }
                    failed += 1;
                    let Some(mut delay) = self.opts.retry.delay(failed) else {
                        return Ok(false);
                    };
                    if wait.expired() {
                        return Ok(false);
                    }
                    if pttl_ms > 0 {
                        delay = delay.min(Duration::from_millis(pttl_ms as u64));
                    }
                    let mut wake = Instant::now() + delay;
                    if let Wait::Until(deadline) = wait {
                        wake = wake.min(deadline);
                    }
                    tokio::time::sleep_until(wake.into()).await;
                }
            }
        }
    }

    /// Waits for this handle's own permit.
    async fn enter(&self, wait: Wait) -> Option<OwnedSemaphorePermit> {
        let gate = self.gate.clone();
        match wait {
            Wait::No => gate.try_acquire_owned().ok(),
            Wait::Forever => gate.acquire_owned().await.ok(),
            Wait::Until(t) => tokio::time::timeout_at(t.into(), gate.acquire_owned())
                .await
                .ok()?
                .ok(),
        }
    }

    /// A hold known to be lost protects nothing: free the handle for a new one.
    fn forget_lost_hold(&self) {
        let mut state = self.state.lock().unwrap();
        if state
            .hold
            .as_ref()
            .is_some_and(|h| h.lease.is_marked_lost())
        {
            state.hold = None;
            self.gate.add_permits(1);
        }
    }

    fn adopted_token(&self) -> Option<String> {
        match &self.state.lock().unwrap().hold {
            Some(h) if h.adopted => Some(h.token.clone()),
            _ => None,
        }
    }

    fn install(&self, token: String, fence: i64, sent: Instant) {
        let lease = Arc::new(Lease::new(Some(sent), self.opts.ttl));
        if let Some(cb) = &self.opts.on_lost {
            let cb = cb.clone();
            lease.on_lost(Box::new(move |why| cb(why)));
        }
        let renewal = Renewal {
            client: self.client.clone(),
            keys: self.keys.clone(),
            token: token.clone(),
            lease: lease.clone(),
            label: self.label(),
        };
        let watchdog = Watchdog::start(renewal, self.opts.auto_renew);
        let mut state = self.state.lock().unwrap();
        state.last = Some(lease.clone());
        state.hold = Some(Hold {
            token,
            fence: Some(fence),
            lease,
            adopted: false,
            watchdog: Some(watchdog),
        });
    }

    /// Gives the lock up. `NotOwned` when this handle holds nothing, or Redis
    /// says its hold had already ended (then nobody else's hold is touched).
    pub async fn release(&self) -> Result<()> {
        let hold = self
            .state
            .lock()
            .unwrap()
            .hold
            .take()
            .ok_or_else(|| self.not_owned())?;
        // This handle no longer holds, whatever Redis answers; renewal stops
        // (the watchdog drops) before the release is sent.
        self.gate.add_permits(1);
        let Hold {
            token,
            lease,
            watchdog,
            ..
        } = hold;
        drop(watchdog);
        let released = scripts::release(&self.client, &self.keys, &token, false).await?;
        if released == 0 {
            lease.mark_lost("it had expired or been taken over before release");
            return Err(Error::NotOwned(format!(
                "{} was no longer held by this handle: it expired or was taken over",
                self.label()
            )));
        }
        lease.mark_released();
        Ok(())
    }

    /// Pushes the expiry to `ttl` (default: the handle's ttl) from now; later
    /// renewals keep that ttl.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let ttl = ttl.unwrap_or(self.opts.ttl);
        check_ttl(ttl)?;
        let (token, lease) = self.current().ok_or_else(|| self.not_owned())?;
        if lease.is_lost() {
            return Err(Error::NotOwned(format!(
                "{} was lost: {}",
                self.label(),
                lease.lost_reason().unwrap_or_default()
            )));
        }
        let sent = Instant::now();
        if scripts::refresh(&self.client, &self.keys, &token, ttl.as_millis() as u64).await? {
            lease.extended(sent, ttl);
            Ok(())
        } else {
            lease.mark_lost("it had expired or been taken over before extend");
            Err(Error::NotOwned(format!(
                "{} is no longer held by this handle",
                self.label()
            )))
        }
    }

    /// The holder of each key, as Redis sees it now.
    pub async fn inspect(&self) -> Result<Vec<Option<Record>>> {
        scripts::inspect(&self.client, &self.keys).await
    }

    /// Held by anyone (any of the names, for a multi-lock).
    pub async fn locked(&self) -> Result<bool> {
        Ok(self.inspect().await?.iter().any(Option::is_some))
    }

    /// Held by this handle, as Redis sees it now.
    pub async fn owned(&self) -> Result<bool> {
        Ok(self.remaining().await?.is_some())
    }

    /// Time left on this handle's hold, or `None` when it holds nothing.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        let Some((token, _)) = self.current() else {
            return Ok(None);
        };
        let records = self.inspect().await?;
        let mut least: Option<i64> = None;
        for r in &records {
            match r {
                Some(r) if r.token == token => {
                    least = Some(least.map_or(r.pttl_ms, |l| l.min(r.pttl_ms)));
                }
                _ => return Ok(None),
            }
        }
        Ok(least.map(|ms| Duration::from_millis(ms.max(0) as u64)))
    }

    fn current(&self) -> Option<(String, Arc<Lease>)> {
        self.state
            .lock()
            .unwrap()
            .hold
            .as_ref()
            .map(|h| (h.token.clone(), h.lease.clone()))
    }

    /// Whether this handle holds the lock, by its own account (no round trip).
    pub fn is_held(&self) -> bool {
        self.state.lock().unwrap().hold.is_some()
    }

    pub fn token(&self) -> Option<String> {
        self.current().map(|(t, _)| t)
    }

    /// The fence of the current hold: greater than every earlier one for these names.
    pub fn fence(&self) -> Option<i64> {
        self.state
            .lock()
            .unwrap()
            .hold
            .as_ref()
            .and_then(|h| h.fence)
    }

    /// The lease of the current (or latest) hold.
    pub fn lease(&self) -> Option<Arc<Lease>> {
        self.state.lock().unwrap().last.clone()
    }

    /// Whether the current (or latest) hold was lost.
    pub fn lost(&self) -> bool {
        self.lease().is_some_and(|l| l.is_lost())
    }

    fn not_owned(&self) -> Error {
        Error::NotOwned(format!("{} is not held by this handle", self.label()))
    }
}

/// Releases a just-sent acquire in the background unless disarmed.
struct CleanupGuard {
    client: Client,
    keys: Arc<[String]>,
    token: String,
    armed: bool,
}

impl CleanupGuard {
    fn new(lock: &Lock, token: &str) -> Self {
        CleanupGuard {
            client: lock.client.clone(),
            keys: lock.keys.clone(),
            token: token.to_string(),
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (client, keys, token) = (
            self.client.clone(),
            self.keys.clone(),
            std::mem::take(&mut self.token),
        );
        self.client.spawn_cleanup(async move {
            let _ = scripts::release(&client, &keys, &token, false).await;
        });
    }
}

pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::InvalidArgument(format!(
            "ttl must be between {} and {} seconds, got {}",
            MIN_TTL.as_secs_f64(),
            MAX_TTL.as_secs_f64(),
            ttl.as_secs_f64()
        )));
    }
    Ok(())
}

pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("lock name must not be empty".into()));
    }
    if name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "lock name is {} bytes long; the limit is {MAX_NAME}",
            name.len()
        )));
    }
    Ok(())
}

fn validate(names: &[String], opts: &LockOptions, token: Option<&str>) -> Result<()> {
    if names.is_empty() {
        return Err(Error::InvalidArgument(
            "a lock needs at least one name".into(),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        check_name(name)?;
        if names[..i].contains(name) {
            return Err(Error::InvalidArgument(format!(
                "lock name {name:?} is given twice"
            )));
        }
    }
    check_ttl(opts.ttl)?;
    if opts
        .metadata
        .as_ref()
        .is_some_and(|m| m.len() > MAX_METADATA)
    {
        return Err(Error::InvalidArgument(format!(
            "metadata is longer than {MAX_METADATA} bytes"
        )));
    }
    if let Some(t) = token {
        if t.is_empty() || t.len() > MAX_TOKEN {
            return Err(Error::InvalidArgument(format!(
                "token must be 1 to {MAX_TOKEN} bytes long"
            )));
        }
    }
    Ok(())
}
