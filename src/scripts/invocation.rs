//! Running a step: EVALSHA with its keys and arguments; when the server has
//! not loaded the script (NOSCRIPT: a restart, SCRIPT FLUSH, a Cluster
//! replica just promoted, which never had it: scripts are not replicated),
//! SCRIPT LOAD on the node the step goes to, then EVALSHA again. On a
//! Cluster redis-rs would send SCRIPT LOAD to every node, which in a
//! failover waits on, or fails at, a node that is dead or stopped, and may
//! miss the new master: the step then failed with that error, or with
//! NOSCRIPT again. Loading it on the slot's node alone costs what loading
//! costs on one server, and needs no command beyond EVALSHA and SCRIPT LOAD
//! (a user allowed only those still runs every step).

use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, ToRedisArgs};

use crate::transport::conn::StepConn;

/// A step assembled for one kind of target (`Lua::on`): its code and hash.
pub(crate) struct Built {
    code: String,
    hash: String,
}

impl Built {
    pub(crate) fn new(code: String) -> Built {
        let hash = redis::Script::new(&code).get_hash().to_string();
        Built { code, hash }
    }

    pub(crate) fn code(&self) -> &str {
        &self.code
    }

    /// A run of this step, its KEYS and ARGV still empty (`Argv::on`
    /// makes one with its arguments).
    pub(crate) fn invocation(&self) -> Invocation<'_> {
        Invocation { built: self, keys: Vec::new(), args: Vec::new() }
    }
}

/// One run of a step: its KEYS and ARGV.
pub(crate) struct Invocation<'a> {
    built: &'a Built,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Invocation<'_> {
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The step by its hash: what is sent.
    pub(crate) fn evalsha(&self) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.built.hash).arg(self.keys.len()).arg(&self.keys).arg(&self.args);
        cmd
    }

    /// Loads the script where this run goes (after a NOSCRIPT answer): the
    /// first time (`loads` 0), on the master of its first key as the
    /// client's slot map has it; after that, on every node. A slot map
    /// behind a Cluster failover names the old master, now a replica, which
    /// takes the load, while the run is redirected (MOVED) to the promoted
    /// one, which has not loaded it: every node includes it.
    pub(crate) async fn load(&self, con: &mut impl StepConn, loads: u32) -> RedisResult<()> {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(&self.built.code);
        if loads > 0 {
            return con.untimed().on_every_node(cmd).await;
        }
        let key = self.keys.first().map_or(&[][..], Vec::as_slice);
        con.untimed().on_node_of(key, cmd).await.map(drop)
    }

    /// Runs it on `con`: EVALSHA, and after a NOSCRIPT answer, `load` and
    /// EVALSHA again; up to `LOADS` times, since in a Cluster failover the
    /// slot can move between the load and the run (the run then reaches a
    /// newly promoted master, which has not loaded it either).
    pub(crate) async fn invoke_async<T: FromRedisValue>(&self, con: &mut impl StepConn) -> RedisResult<T> {
        let mut loads = 0;
        loop {
            match self.evalsha().query_async(con).await {
                Err(e) if is_noscript_error(&e) && loads < LOADS => {
                    self.load(con, loads).await?;
                    loads += 1;
                }
                other => return other,
            }
        }
    }
}

/// How often one run loads its script before a NOSCRIPT answer is the error.
pub(crate) const LOADS: u32 = 3;

fn is_noscript_error(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evalsha_carries_the_keys_and_arguments_by_the_scripts_hash() {
        let built = Built::new("return {KEYS[1], ARGV[2]}".into());
        let mut run = built.invocation();
        run.arg("a").key(&["k1".to_string(), "k2".to_string()][..]).arg(7);
        let packed = String::from_utf8(run.evalsha().get_packed_command()).unwrap();
        let expected = ["EVALSHA", &built.hash, "2", "k1", "k2", "a", "7"];
        let parts: String = expected.iter().map(|part| format!("${}\r\n{part}\r\n", part.len())).collect();
        assert_eq!(packed, format!("*{}\r\n{parts}", expected.len()));
        assert_eq!(built.hash, redis::Script::new(built.code()).get_hash());
    }
}
