//! The undo of an acquire dropped part-way.

use std::time::Duration;

use crate::client::Client;
use crate::primitive::Mode;
use crate::support::retry::Retry;

/// Undoes, in the background, what a dropped acquire may have left in Redis.
pub(super) struct Undo {
    pub(super) client: Client,
    pub(super) mode: Mode,
    pub(super) token: String,
    /// False for a restored token: its hold belongs to its owner.
    pub(super) ours: bool,
    pub(super) pending: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        let (client, mode, token, ours) =
            (self.client.clone(), self.mode.clone(), std::mem::take(&mut self.token), self.ours);
        self.client.spawn_cleanup(async move {
            // A few tries: the undo races the faults that often cut an
            // acquire short (a dropped connection, a restarting server).
            let retry = Retry::doubling(Duration::from_millis(20), Duration::from_millis(500));
            let mut pauses = retry.at_most(UNDO_TRIES).pauses();
            loop {
                let Err(e) = mode.undo(&client, &token, ours).await else { return };
                let Some(pause) = pauses.next() else {
                    log::debug!("undoing an interrupted acquire failed; what it would undo expires: {e}");
                    return;
                };
                log::debug!("undoing an interrupted acquire failed, retrying: {e}");
                tokio::time::sleep(pause).await;
            }
        });
    }
}

/// How often an interrupted acquire's undo is tried: its tries spread over about 1.6 s (pauses from 20 ms doubling to 500 ms), long
/// enough for a server restart, after which a fair waiter's place has lapsed
/// anyway (its patience is at most 2 s).
const UNDO_TRIES: u32 = 8;
