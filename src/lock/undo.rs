//! The undo of an acquire dropped part-way.

use std::time::Duration;

use crate::deployment::Deployment;
use crate::mode::Mode;

/// Undoes, in the background, what a dropped acquire may have left in Redis.
pub(super) struct Undo {
    pub(super) client: Deployment,
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
            let mut pause = Duration::from_millis(20);
            for _ in 0..UNDO_TRIES {
                match mode.undo(&client, &token, ours).await {
                    Ok(()) => return,
                    Err(e) => log::debug!("undoing an interrupted acquire failed, retrying: {e}"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        });
    }
}

/// How often an interrupted acquire's undo is tried: over about 2.5 s, long
/// enough for a server restart, after which a fair waiter's place has lapsed
/// anyway (its patience is at most 2 s).
const UNDO_TRIES: u32 = 8;
