//! What the primitives stand on: one Redis deployment (a `Backend`: one
//! server, a Sentinel service or a Cluster) or a quorum of independent
//! masters (Redlock). A primitive's step (`Steps`) runs here on that one
//! deployment, or on every master of the quorum, decided by a majority.
//! What a quorum cannot do (a primitive whose state lives on one server) is
//! refused when the primitive is made (`single`), never at a step.
//! `via(Io::Inline)` is a view whose steps on one deployment run on the
//! calling thread (`conn`); a quorum's stay multiplexed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::primitive::steps::{Holder, Obtaining, Released, Steps};
use crate::quorum::Quorum;
use crate::scripts::{Obtain, Record, Refreshed};
use crate::transport::backend::{Backend, ClientOptions, Holding};
use crate::transport::conn::Io;
use crate::transport::replication::Throttle;
use crate::transport::wakeups::Waits;

/// One deployment or a quorum of them, shared by every lock made from it.
#[derive(Clone)]
pub struct Client(On);

#[derive(Clone)]
enum On {
    One(Backend),
    Quorum(Arc<Quorum>),
}

impl From<Backend> for Client {
    fn from(client: Backend) -> Client {
        Client(On::One(client))
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.describe())
    }
}

impl Client {
    /// Validates the options and connects: one deployment (`url`, or a
    /// single entry of `urls`) as `Backend::connect` does, or every master of
    /// a quorum at once (a majority must answer, and none may be misconfigured).
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let deployment = Client::new(opts)?;
        deployment.ready().await?;
        Ok(deployment)
    }

    /// Connects and checks, unless this process did already (each step
    /// waits for it, so the first use raises what connecting found). An
    /// error when closed.
    pub async fn ready(&self) -> Result<()> {
        match &self.0 {
            On::One(client) => client.ready().await,
            On::Quorum(quorum) => quorum.ready().await,
        }
    }

    /// Closes this process's connections, and refuses every later use.
    pub async fn close(&self) {
        match &self.0 {
            On::One(client) => client.close().await,
            On::Quorum(quorum) => quorum.close().await,
        }
    }

    /// Validates the options without any network I/O; the first step connects.
    pub fn new(opts: ClientOptions) -> Result<Client> {
        if opts.urls.len() < 2 {
            return Backend::new(opts).map(Client::from);
        }
        if opts.connect_timeout.is_zero() || opts.command_timeout.is_zero() {
            return Err(Error::InvalidArgument("timeouts must be positive".into()));
        }
        opts.replication.validate(opts.command_timeout)?;
        Ok(Client(On::Quorum(Arc::new(Quorum::new(opts)?))))
    }

    /// This deployment with its steps' commands sent as `io` says: on one
    /// deployment, its client's view (`Backend::via`); a quorum sends each
    /// step to its masters at once, on their multiplexed connections, under
    /// any view.
    #[must_use]
    pub fn via(&self, io: Io) -> Client {
        match &self.0 {
            On::One(client) => Client(On::One(client.via(io))),
            On::Quorum(_) => self.clone(),
        }
    }

    /// This deployment, multiplexed: for what outlives a call (a handle's
    /// renewal and clean-ups, an election's watchers).
    pub(crate) fn into_multiplexed(self) -> Client {
        match self.0 {
            On::One(client) if client.io() != Io::Multiplexed => Client(On::One(client.via(Io::Multiplexed))),
            on => Client(on),
        }
    }

    /// The one deployment, or, on a quorum, an error naming `what` and what
    /// a quorum supports: for what is made on one server's state.
    pub fn single(&self, what: &str) -> Result<&Backend> {
        self.one().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what} is not available on a quorum of independent masters (Redlock), which supports Lock \
                 (not fair), multi_lock and RWMutex (not fair): its state lives on one server. Use a client \
                 of one deployment (one URL, a Sentinel service or a Cluster) for it"
            ))
        })
    }

    /// The one deployment; `None` on a quorum.
    pub(crate) fn one(&self) -> Option<&Backend> {
        match &self.0 {
            On::One(client) => Some(client),
            On::Quorum(_) => None,
        }
    }

    pub fn options(&self) -> &ClientOptions {
        match &self.0 {
            On::One(c) => c.options(),
            On::Quorum(q) => q.options(),
        }
    }

    pub fn keys(&self) -> &KeySpace {
        match &self.0 {
            On::One(c) => c.keys(),
            On::Quorum(q) => q.keys(),
        }
    }

    /// The servers without credentials, for messages and repr.
    pub fn describe(&self) -> &str {
        match &self.0 {
            On::One(c) => c.describe(),
            On::Quorum(q) => q.describe(),
        }
    }

    /// How many independent masters this locks on (1 unless a quorum).
    pub fn masters(&self) -> usize {
        match &self.0 {
            On::One(_) => 1,
            On::Quorum(q) => q.members().len(),
        }
    }

    /// Whether this is a Redis Cluster (sharded pub/sub, one slot per script).
    pub fn is_cluster(&self) -> bool {
        matches!(&self.0, On::One(c) if c.is_cluster())
    }

    /// At most one warning per 10 s of steps its replicas did not acknowledge.
    pub(crate) fn replica_warnings(&self) -> &Throttle {
        match &self.0 {
            On::One(c) => c.replica_warnings(),
            On::Quorum(q) => q.replica_warnings(),
        }
    }

    /// Runs a clean-up (the undo of an interrupted acquire) detached from
    /// its caller, counted so `settle` can wait for it.
    pub(crate) fn spawn_cleanup<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match &self.0 {
            On::One(c) => c.spawn_cleanup(fut),
            On::Quorum(q) => q.spawn_cleanup(fut),
        }
    }

    /// Waits until no clean-up of this process is in flight; on a quorum,
    /// its own and those of a majority of its masters.
    pub async fn settle(&self) {
        match &self.0 {
            On::One(c) => c.settle().await,
            On::Quorum(q) => q.settle().await,
        }
    }

    /// Joins the waiters on `channels` (on a quorum: on every master, woken
    /// by whichever publishes first), subscribed before it returns.
    pub(crate) async fn register_waiter(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Waits> {
        match &self.0 {
            On::One(c) => c.register_waiter(channels, reader, token).await,
            On::Quorum(q) => q.register_waiter(channels, reader, token).await,
        }
    }

    /// Lets a waiter of this process woken on `channels` try first (see
    /// `Wakeups::yield_to_woken`); a quorum's waiters, woken by several
    /// masters, are not waited for.
    pub(crate) async fn yield_to_woken(
        &self,
        channels: impl FnOnce() -> Vec<String>,
        until: tokio::time::Instant,
    ) {
        if let On::One(c) = &self.0 {
            c.yield_to_woken(channels, until).await;
        }
    }

    /// While a waiter waits: follows a Sentinel master through a failover
    /// (each master's, on a quorum). Never returns.
    pub(crate) async fn follow_master(&self) {
        match &self.0 {
            On::One(c) => c.follow_master().await,
            On::Quorum(q) => q.follow_master().await,
        }
    }

    /// While a hold renews: follows each Sentinel master through a failover
    /// (see `Backend::holding`); dropped when the renewal ends.
    pub(crate) fn holding(&self) -> Vec<Holding> {
        match &self.0 {
            On::One(c) => c.holding().into_iter().collect(),
            On::Quorum(q) => q.members().iter().filter_map(Backend::holding).collect(),
        }
    }

    /// One attempt. `ours`: the token is this acquire's own (not restored),
    /// so what a quorum's failed attempt took is given back. A grant
    /// carries the replicas' shortfall (on a quorum: the worst of its masters').
    pub(crate) async fn obtain(&self, steps: &impl Steps, ask: &Obtaining<'_>, ours: bool) -> Result<Obtain> {
        match &self.0 {
            On::One(c) => steps.obtain_on(c, ask, false).await,
            On::Quorum(q) => q.obtain(steps, ask, ours).await,
        }
    }

    /// Whether `token` still held, and now holds for `ttl` more, with the
    /// replicas' shortfall (on a quorum: the worst of its masters').
    pub(crate) async fn refresh(
        &self,
        steps: &impl Steps,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> Result<Refreshed> {
        match &self.0 {
            On::One(c) => steps.refresh_on(c, holder, ttl).await,
            On::Quorum(q) => q.refresh(steps, holder, ttl).await,
        }
    }

    /// `refresh`, as the watchdog sends it: in one call with the other
    /// renewals that fall due with it on the deployment (on a quorum: on
    /// each master). An `extend` goes alone (`refresh`).
    pub(crate) async fn renew(
        &self,
        steps: &impl Steps,
        holder: &Holder<'_>,
        ttl: Duration,
    ) -> Result<Refreshed> {
        match &self.0 {
            On::One(c) => steps.renew_on(c, holder, ttl).await,
            On::Quorum(q) => q.renew(steps, holder, ttl).await,
        }
    }

    /// Releases `holder`'s hold.
    pub(crate) async fn release(&self, steps: &impl Steps, holder: &Holder<'_>) -> Result<Released> {
        match &self.0 {
            On::One(c) => steps.release_on(c, holder).await,
            On::Quorum(q) => q.release(steps, holder).await,
        }
    }

    /// Takes back what waiting left (see `Steps::withdraw_on`).
    pub(crate) async fn withdraw(&self, steps: &impl Steps, token: &str, ours: bool) -> Result<()> {
        if !steps.leaves_intent() {
            return Ok(());
        }
        let withdraw = |m| steps.withdraw_on(m, token, ours);
        self.each("withdrawing a waiting writer", withdraw).await
    }

    /// The exclusive holder of each key (on a quorum: as a majority sees it).
    pub(crate) async fn holders(&self, steps: &impl Steps) -> Result<Vec<Option<Record>>> {
        match &self.0 {
            On::One(c) => steps.inspect_on(c).await,
            On::Quorum(q) => q.inspect(steps).await,
        }
    }

    /// Runs `op` for its side effects; on a quorum, on every master, done
    /// when a majority did it.
    pub(crate) async fn each<'a, F, Fut>(&'a self, what: &str, op: F) -> Result<()>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<()>> + 'a,
    {
        match &self.0 {
            On::One(c) => op(c).await,
            On::Quorum(q) => q.each(what, op).await,
        }
    }

    /// Whether `op` answered true (on a quorum: on any master, a majority answering).
    pub(crate) async fn any<'a, F, Fut>(&'a self, what: &str, op: F) -> Result<bool>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<bool>> + 'a,
    {
        match &self.0 {
            On::One(c) => op(c).await,
            On::Quorum(q) => q.any(what, op).await,
        }
    }

    /// A count `probe` takes (on a quorum: as a majority sees it, the `need`-th largest).
    pub(crate) async fn majority_value<'a, F, Fut>(&'a self, what: &str, probe: F) -> Result<i64>
    where
        F: Fn(&'a Backend) -> Fut,
        Fut: Future<Output = Result<i64>> + 'a,
    {
        match &self.0 {
            On::One(c) => probe(c).await,
            On::Quorum(q) => q.majority_value(what, probe).await,
        }
    }
}
