//! When a client connects: not when it is made (making one does no network
//! I/O, so an application can build it at import while Redis is down), but
//! at its first use, or at `connect()`. The check that connecting runs (the
//! server answers, fits the settings, is new enough) runs once per process,
//! one caller at a time, and again after a failure. A closed client refuses
//! every use.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::support::per_process::PerProcess;

/// Whether this process has checked the deployment, and whether it was closed.
#[derive(Default)]
pub(crate) struct Readiness {
    /// This process's gate: a forked child makes its own, so a check under
    /// way in the parent when it forked cannot leave the child waiting.
    gate: PerProcess<Arc<Gate>>,
    closed: AtomicBool,
    /// Told when the client is closed: what runs in the background for it
    /// (following a Sentinel master) ends then.
    closing: tokio::sync::Notify,
}

#[derive(Default)]
struct Gate {
    checked: AtomicBool,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Readiness {
    /// Runs `check` unless this process has passed it already; an error of
    /// `check` is returned, and the next call checks again.
    pub(crate) async fn ensure<F, Fut>(&self, check: F) -> Result<()>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        self.open()?;
        let gate = self.gate();
        if gate.checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one_at_a_time = gate.one_at_a_time.lock().await;
        if !gate.checked.load(Ordering::Acquire) {
            self.open()?;
            check().await?;
            gate.checked.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// An error when the client was closed.
    pub(crate) fn open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::InvalidArgument(
                "this Client is closed (by close(), aclose() or the end of its with block): make a new \
                 Client to use Redis again"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Refuses every later use.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Once the client is closed (at once if it is).
    pub(crate) async fn closed(&self) {
        let closing = self.closing.notified();
        tokio::pin!(closing);
        // Told from here on, so a close between the look and the wait is not missed.
        closing.as_mut().enable();
        if !self.is_closed() {
            closing.await;
        }
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.get(Arc::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_check_runs_again_and_a_passed_one_does_not() {
        let ready = Readiness::default();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let failing = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            Err(Error::Connection("down".into()))
        };
        assert!(ready.ensure(failing).await.is_err());
        let passing = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        ready.ensure(passing).await.unwrap();
        ready.ensure(passing).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        ready.close();
        let closed = ready.ensure(passing).await.unwrap_err();
        assert!(closed.to_string().contains("closed"), "{closed}");
    }

    #[tokio::test]
    async fn what_waits_for_the_close_is_told_and_after_it_does_not_wait() {
        let ready = Arc::new(Readiness::default());
        let waiting = tokio::spawn({
            let ready = ready.clone();
            async move { ready.closed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "told before the close");
        ready.close();
        let soon = std::time::Duration::from_secs(5);
        tokio::time::timeout(soon, waiting).await.expect("not told of the close").unwrap();
        tokio::time::timeout(soon, ready.closed()).await.expect("waits though closed already");
    }
}
