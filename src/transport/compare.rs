//! The server's compare-and-set and compare-and-delete of a string value:
//! `SET key new IFEQ old` (Valkey 8.1 and later) and `DELIFEQ key old`
//! (Valkey 9.0 and later), one command each where a script would otherwise
//! read the value and decide. Which of them the server has is read once, at
//! connect, from its `HELLO` (`server::check`); one the server then
//! refuses (a failover to an older server, an ACL that does not allow it)
//! is forgotten, and its steps run their scripts from then on. Redis 8.4's
//! `DELEX … IFEQ` and `SET … IFEQ` are not used: no server the tests run
//! has them.

use std::sync::atomic::{AtomicBool, Ordering};

/// Which compare commands a server has (`detect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Commands {
    /// `SET … IFEQ`.
    pub set: bool,
    /// `DELIFEQ`.
    pub delete: bool,
}

/// What `SET … IFEQ` came with: Valkey 8.1.
const VALKEY_SET_IFEQ: (u32, u32) = (8, 1);
/// What `DELIFEQ` came with: Valkey 9.0.
const VALKEY_DELIFEQ: (u32, u32) = (9, 0);

impl Commands {
    /// Which compare commands a server has, from the `server` and
    /// `version` fields of its `HELLO` (`version`: major and minor).
    pub(crate) fn detect(server: &str, version: (u32, u32)) -> Commands {
        if !server.eq_ignore_ascii_case("valkey") {
            return Commands::default();
        }
        Commands { set: version >= VALKEY_SET_IFEQ, delete: version >= VALKEY_DELIFEQ }
    }
}

/// The compare commands a deployment's steps may use: none until the
/// server was checked, then what it has, less what it refused since.
#[derive(Debug, Default)]
pub(crate) struct Compare {
    set: AtomicBool,
    delete: AtomicBool,
}

impl Compare {
    /// What connecting found the server to have.
    pub(crate) fn found(&self, commands: Commands) {
        self.set.store(commands.set, Ordering::Relaxed);
        self.delete.store(commands.delete, Ordering::Relaxed);
    }

    /// Whether a step may send `SET … IFEQ`.
    pub(crate) fn can_set(&self) -> bool {
        self.set.load(Ordering::Relaxed)
    }

    /// Whether a step may send `DELIFEQ`.
    pub(crate) fn can_delete(&self) -> bool {
        self.delete.load(Ordering::Relaxed)
    }

    /// The server answered `SET … IFEQ` with `error`: unless the error is
    /// the key's (a value of another type), it is not sent again.
    pub(crate) fn set_refused(&self, error: &str) {
        forget(&self.set, "SET … IFEQ", error);
    }

    /// As `set_refused`, for `DELIFEQ`.
    pub(crate) fn delete_refused(&self, error: &str) {
        forget(&self.delete, "DELIFEQ", error);
    }
}

fn forget(flag: &AtomicBool, command: &str, error: &str) {
    if error.starts_with("WRONGTYPE") {
        return;
    }
    if flag.swap(false, Ordering::Relaxed) {
        log::debug!("the server refused {command} ({error}): the steps that used it run their scripts now");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valkey_versions_say_which_commands() {
        assert_eq!(Commands::detect("valkey", (9, 1)), Commands { set: true, delete: true });
        assert_eq!(Commands::detect("valkey", (8, 1)), Commands { set: true, delete: false });
        assert_eq!(Commands::detect("valkey", (8, 0)), Commands::default());
        assert_eq!(Commands::detect("redis", (8, 4)), Commands::default());
    }

    #[test]
    fn a_refused_command_is_forgotten_but_not_for_a_wrong_type() {
        let compare = Compare::default();
        compare.found(Commands { set: true, delete: true });
        compare.delete_refused("WRONGTYPE Operation against a key holding the wrong kind of value");
        assert!(compare.can_set() && compare.can_delete());
        compare.delete_refused("NOPERM User u has no permissions to run the 'delifeq' command");
        assert!(compare.can_set() && !compare.can_delete());
        compare.set_refused("ERR syntax error");
        assert!(!compare.can_set());
    }
}
