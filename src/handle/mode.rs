//! What a handle asks of its `Mode` over a whole deployment, beyond one
//! step: the undo of an interrupted acquire, the time left on a hold,
//! whether anyone holds.

use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::primitive::steps::{Holder, Steps};
use crate::primitive::{rw, semaphore, FairRw, Mode, Permit, Read, RwKeys, Write};

impl Mode {
    /// Undoes what an interrupted acquire may have left: the hold when `ours`
    /// (never a restored token's: it is its owner's), and a writer's intent
    /// or a place in a queue. A fair withdrawal releases as it leaves the
    /// queue, so nothing is sent twice.
    pub(crate) async fn undo(&self, d: &Client, token: &str, ours: bool) -> Result<()> {
        if ours && self.patience().is_none() {
            d.release(self, &Holder::of(&token.into())).await?;
        }
        d.withdraw(self, token, ours).await
    }

    /// Time left on `token`'s hold, or `None` when it holds nothing.
    pub(crate) async fn remaining(&self, d: &Client, token: &str) -> Result<Option<Duration>> {
        if let Mode::Permit(Permit { keys, .. }) = self {
            let state = semaphore::inspect(d.single("a semaphore")?, keys).await?;
            let mine = state.holders.iter().find(|r| r.token == token);
            return Ok(mine.map(|r| Duration::from_millis(r.pttl_ms.max(0) as u64)));
        }
        if let Some(keys) = self.reader_keys() {
            let reader = |m| async move { Ok(rw::inspect(m, keys, token).await?.reader_pttl_ms) };
            let pttl_ms = d.majority_value("inspecting a reader", reader).await?;
            return Ok((pttl_ms >= 0).then(|| Duration::from_millis(pttl_ms as u64)));
        }
        let mut least: Option<i64> = None;
        for r in d.holders(self).await? {
            match r {
                Some(r) if r.token == token => {
                    least = Some(least.map_or(r.pttl_ms, |l| l.min(r.pttl_ms)));
                }
                _ => return Ok(None),
            }
        }
        Ok(least.map(|ms| Duration::from_millis(ms.max(0) as u64)))
    }

    /// Held by anyone: for an RWMutex, a writer or any live reader.
    pub(crate) async fn locked(&self, d: &Client) -> Result<bool> {
        match self {
            Mode::Exclusive(_) | Mode::Fair(_) | Mode::Permit(_) | Mode::Plain(_) => {
                Ok(d.holders(self).await?.iter().any(Option::is_some))
            }
            #[cfg(test)]
            Mode::Fake(_) => Ok(d.holders(self).await?.iter().any(Option::is_some)),
            Mode::Read(Read { keys, .. })
            | Mode::Write(Write { keys, .. })
            | Mode::FairRw(FairRw { keys, .. }) => {
                let held = |c| async move {
                    let state = rw::inspect(c, keys, "").await?;
                    Ok(i64::from(state.writer || state.readers > 0))
                };
                Ok(d.majority_value("inspecting the RWMutex", held).await? > 0)
            }
        }
    }

    /// A reader's keys (of either order).
    fn reader_keys(&self) -> Option<&RwKeys> {
        match self {
            Mode::Read(Read { keys, .. }) | Mode::FairRw(FairRw { keys, writer: false, .. }) => Some(keys),
            _ => None,
        }
    }
}
