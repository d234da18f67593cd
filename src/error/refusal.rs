//! The errors the scripts return on purpose, told apart by code, never by
//! their text. A script refuses with `redis.error_reply('<CODE> <detail>')`;
//! Redis sends `-<CODE> <detail>`, redis-rs reads the code word, and
//! `Error::from` (src/error/mod.rs) turns a code listed here into its error.

use crate::error::Error;

/// One reason a script refuses, with the code it refuses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `sem_obtain.lua`, `sem_take.lua`: the semaphore has another permit
    /// count while a permit is held. Detail: "the semaphore has N permits
    /// while held, not M".
    Permits,
    /// A script whose `-- include:` line could not be resolved (see
    /// `assembly`; the tests rule it out for the files shipped).
    Script,
}

impl Refusal {
    const ALL: [Refusal; 2] = [Refusal::Permits, Refusal::Script];

    pub(crate) fn code(self) -> &'static str {
        match self {
            Refusal::Permits => "FERROLOCK_PERMITS",
            Refusal::Script => "FERROLOCK_SCRIPT",
        }
    }

    pub(crate) fn from_code(code: &str) -> Option<Refusal> {
        Refusal::ALL.into_iter().find(|r| r.code() == code)
    }

    /// The error a refusal with `detail` (the reply after its code) becomes.
    pub(crate) fn error(self, detail: &str) -> Error {
        match self {
            Refusal::Permits => Error::InvalidArgument(format!(
                "{detail}: every process must use the same permits for one semaphore while any permit is held \
                 (a new count applies once none is)"
            )),
            Refusal::Script => Error::Redis(format!("a ferrolock script could not be built: {detail}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(raw: &str) -> redis::RedisError {
        redis::parse_redis_value(format!("-{raw}\r\n").as_bytes())
            .and_then(redis::Value::extract_error)
            .expect_err("an error reply")
    }

    #[test]
    fn a_refusal_maps_by_its_code() {
        let e = Error::from(reply("FERROLOCK_PERMITS the semaphore has 2 permits while held, not 3"));
        let Error::InvalidArgument(m) = e else { panic!("not InvalidArgument: {e:?}") };
        assert!(m.starts_with("the semaphore has 2 permits while held, not 3: every process"), "{m}");
        assert!(m.contains("same permits"), "{m}");
        let e = Error::from(reply("FERROLOCK_SCRIPT no Lua library named nope"));
        assert!(matches!(&e, Error::Redis(m) if m.contains("no Lua library named nope")), "{e:?}");
        // The text alone does not count: only the code word does.
        let e = Error::from(reply("ERR user_script:1: FERROLOCK_PERMITS somewhere in the text"));
        assert!(matches!(e, Error::Redis(_)), "{e:?}");
        for r in Refusal::ALL {
            assert_eq!(Refusal::from_code(r.code()), Some(r));
        }
        assert_eq!(Refusal::from_code("PERMITS"), None);
    }

    #[test]
    fn every_code_a_script_refuses_with_is_mapped() {
        let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let mut seen = 0;
        let entries = |dir: std::path::PathBuf| std::fs::read_dir(dir).expect("lua/ is readable");
        for entry in entries(lua.clone()).chain(entries(lua.join("lib"))) {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_none_or(|e| e != "lua") {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("a readable Lua file");
            for after in source.split("error_reply(").skip(1) {
                let code = after.trim_start_matches(['\'', '"']).split([' ', '\'', '"']).next().unwrap_or("");
                assert!(
                    Refusal::from_code(code).is_some(),
                    "{}: refuses with unmapped code {code:?}",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen > 0, "no script refuses: the scan found nothing");
    }
}
