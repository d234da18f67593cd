//! A primitive whose steps answer as a test scripts them, on no server:
//! for the unit tests of what runs the steps (the acquire loop). Each step
//! it is asked is noted in its `Log`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::steps::{Holder, Obtaining, Released, Steps};
use crate::error::{Error, Result};
use crate::scripts::{Obtain, Record, Refreshed};
use crate::transport::backend::Backend;

/// What an attempt answers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    Taken,
    /// Held by another for this many ms more.
    Busy(i64),
    /// The server cannot be reached.
    Down,
    /// No answer, ever (an attempt cut short by its caller).
    Stall,
}

/// The answers still to give (`Busy(-1)` once they run out), and the steps asked.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) answers: VecDeque<Answer>,
    /// Each attempt's number and whether it would wait.
    pub(crate) attempts: Vec<(u64, bool)>,
    pub(crate) released: Vec<String>,
    /// Each withdrawal's token and whether it was the acquire's own.
    pub(crate) withdrawn: Vec<(String, bool)>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Fake {
    pub(crate) log: Arc<Mutex<Log>>,
    /// A waiter leaves an intent, kept alive by an attempt this often (as a
    /// writer's of an RWMutex with writer preference).
    pub(crate) intent: Option<Duration>,
}

impl Fake {
    pub(crate) fn answering(answers: &[Answer]) -> Fake {
        let log = Log { answers: answers.iter().copied().collect(), ..Log::default() };
        Fake { log: Arc::new(Mutex::new(log)), intent: None }
    }

    pub(crate) fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap()
    }
}

impl Steps for Fake {
    async fn obtain_on(&self, _: &Backend, ask: &Obtaining<'_>, _: bool) -> Result<Obtain> {
        let answer = {
            let mut log = self.log();
            log.attempts.push((ask.attempt, ask.will_wait));
            log.answers.pop_front().unwrap_or(Answer::Busy(-1))
        };
        let sent = Instant::now();
        match answer {
            Answer::Taken => Ok(Obtain::Taken { fence: 1, shortfall: None, sent, written: None }),
            Answer::Busy(pttl_ms) => Ok(Obtain::Busy { pttl_ms, sent }),
            Answer::Down => Err(Error::Connection("the fake server is down".into())),
            Answer::Stall => std::future::pending().await,
        }
    }

    async fn refresh_on(&self, _: &Backend, _: &Holder<'_>, _: Duration) -> Result<Refreshed> {
        Ok(Refreshed { held: true, shortfall: None, written: None })
    }

    async fn release_on(&self, _: &Backend, holder: &Holder<'_>) -> Result<Released> {
        self.log().released.push(holder.token.to_string());
        Ok(Released { held: true, retried: false })
    }

    async fn withdraw_on(&self, _: &Backend, token: &str, ours: bool) -> Result<()> {
        self.log().withdrawn.push((token.to_string(), ours));
        Ok(())
    }

    async fn inspect_on(&self, _: &Backend) -> Result<Vec<Option<Record>>> {
        Ok(vec![None])
    }

    fn kind(&self) -> &'static str {
        "lock"
    }

    fn channels(&self) -> Vec<String> {
        Vec::new()
    }

    /// Its waiters poll: no server to subscribe on.
    fn wakes(&self) -> bool {
        false
    }

    fn keep_alive(&self, _: Duration) -> Option<Duration> {
        self.intent
    }
}
