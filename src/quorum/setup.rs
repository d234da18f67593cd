//! Making a quorum, connecting it, and what it holds beside its steps: its
//! options, its clean-ups, and its waiters' subscriptions on every master.

use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::{answered, Quorum};
use crate::error::{Error, Result};
use crate::keys::KeySpace;
use crate::quorum::members;
use crate::support::cleanup::Cleanups;
use crate::support::per_process::PerProcess;
use crate::transport::backend::{Backend, ClientOptions, Readiness};
use crate::transport::replication::{Throttle, REPLICA_WARNINGS_EVERY};
use crate::transport::wakeups::Waits;

impl Quorum {
    /// A quorum of the masters `opts.urls`, validated without connecting.
    pub(crate) fn new(opts: ClientOptions) -> Result<Quorum> {
        let mut members: Vec<Backend> = Vec::new();
        for url in &opts.urls {
            let member = Backend::new(ClientOptions { url: url.clone(), urls: Vec::new(), ..opts.clone() })?;
            if member.is_cluster() {
                return Err(Error::InvalidArgument(format!(
                    "{} is a Redis Cluster: the masters of a quorum are independent servers (or Sentinel \
                     services), each holding every lock; give one URL per server",
                    member.describe()
                )));
            }
            if members.iter().any(|m| m.describe() == member.describe()) {
                return Err(Error::InvalidArgument(format!(
                    "{} is given twice: the masters of a quorum must be distinct servers",
                    member.describe()
                )));
            }
            members.push(member);
        }
        let list: Vec<&str> = members.iter().map(Backend::describe).collect();
        Ok(Quorum {
            display: format!("quorum of {}: {}", members.len(), list.join(", ")),
            members,
            command_timeout: opts.command_timeout,
            keys: KeySpace::new(&opts.prefix),
            opts,
            cleanups: PerProcess::new(),
            replica_warnings: Throttle::new(REPLICA_WARNINGS_EVERY),
            ready: Readiness::default(),
        })
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.opts
    }

    pub(crate) fn keys(&self) -> &KeySpace {
        &self.keys
    }

    pub(crate) fn describe(&self) -> &str {
        &self.display
    }

    pub(crate) fn replica_warnings(&self) -> &Throttle {
        &self.replica_warnings
    }

    /// Runs an undo detached from its caller, counted so `settle` waits for it.
    pub(crate) fn spawn_cleanup<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.cleanups.get(Cleanups::new).spawn(fut);
    }

    pub(crate) fn members(&self) -> &[Backend] {
        &self.members
    }

    /// While a waiter waits: each Sentinel master is followed through a
    /// failover (see `Backend::follow_master`). Never returns.
    pub(crate) async fn follow_master(&self) {
        futures_util::future::join_all(self.members.iter().map(Backend::follow_master)).await;
    }

    /// Connects the quorum (`verify`) unless this process did already:
    /// every step waits for it. An error when the quorum was closed.
    pub(crate) async fn ready(&self) -> Result<()> {
        self.ready.ensure(|| Box::pin(self.verify())).await
    }

    /// Closes every master's connections and refuses every later use.
    pub(crate) async fn close(&self) {
        self.ready.close();
        futures_util::future::join_all(self.members.iter().map(Backend::close)).await;
    }

    /// Connects to every master and checks it, done once a majority is
    /// ready: a stopped master does not hold up the others. A master whose
    /// settings do not fit it (a wrong password, not Redis), or two URLs of
    /// one server, fail it all.
    async fn verify(&self) -> Result<()> {
        let limit = self.opts.connect_timeout;
        members::distinct_addresses(&self.members).await?;
        let need = self.needed();
        let check = |m| async move {
            Backend::ready(m).await?;
            crate::primitive::load_every_step(m).await?;
            members::run_id(m).await
        };
        let answers = self
            .on_all(limit, check, |a| {
                answered(a, |_| true) >= need
                    || a.iter().any(|x| matches!(x, Some(Err(Error::Configuration(_)))))
            })
            .await;
        // A master not heard from in time goes on connecting and loading
        // the steps in the background: a step dropped part-way on it would
        // have sent nothing (connecting) or no script (NOSCRIPT), not just
        // been late.
        for (answer, member) in answers.iter().zip(&self.members) {
            if answer.is_none() {
                let member = member.clone();
                tokio::spawn(async move {
                    if let Err(e) = async {
                        member.ready().await?;
                        crate::primitive::load_every_step(&member).await
                    }
                    .await
                    {
                        log::debug!("master {} of the quorum: not ready yet ({e})", member.describe());
                    }
                });
            }
        }
        for (answer, member) in answers.iter().zip(&self.members) {
            match answer {
                Some(Err(e @ Error::Configuration(_))) => return Err(e.clone()),
                Some(Err(e)) => {
                    log::warn!("master {} of the quorum is not reachable now: {e}", member.describe());
                }
                _ => {}
            }
        }
        if answered(&answers, |_| true) < need {
            return Err(self.unreachable("connecting", &answers));
        }
        let run_ids: Vec<Option<String>> =
            answers.iter().map(|a| a.as_ref().and_then(|r| r.as_ref().ok()).cloned().flatten()).collect();
        members::distinct_run_ids(&self.members, &run_ids)
    }

    /// Until the clean-ups of a majority of masters are done (a stopped
    /// master's unsubscribe is not waited for), and the others' a short
    /// grace more (`gather`).
    pub(crate) async fn settle(&self) {
        self.cleanups.get(Cleanups::new).settle().await;
        self.on_majority(|m| async move {
            m.settle().await;
            Ok(())
        })
        .await;
    }

    /// Joins the waiters on `channels` on every master, woken by whichever
    /// publishes first. Returns once a majority subscribed (or, when too
    /// many failed for that, once the others are done): a master that does
    /// not answer is done without, and joins if it subscribes later.
    pub(crate) async fn register_waiter(
        &self,
        channels: &[String],
        reader: bool,
        token: &str,
    ) -> Result<Waits> {
        self.ready().await?;
        let need = self.needed();
        let mut pending: FuturesUnordered<_> = self
            .members
            .iter()
            .map(|m| {
                let (m, channels, token) = (m.clone(), channels.to_vec(), token.to_string());
                async move { m.register_one(&channels, reader, &token).await }
            })
            .collect();
        let (mut ok, mut first_error) = (Vec::new(), None);
        while ok.len() < need && (ok.is_empty() || ok.len() + pending.len() >= need) {
            match pending.next().await {
                Some(Ok(part)) => ok.push(part),
                Some(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                None => break,
            }
        }
        if ok.is_empty() {
            return Err(first_error.unwrap_or_else(|| Error::Connection("no master to subscribe on".into())));
        }
        let waits = Waits::new(ok);
        if !pending.is_empty() {
            let joiner = waits.joiner();
            tokio::spawn(async move {
                while let Some(part) = pending.next().await {
                    if let Ok(part) = part {
                        joiner.join(part);
                    }
                }
            });
        }
        Ok(waits)
    }
}
