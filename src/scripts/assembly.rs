//! How a step's Lua source is put together: the line that sets `PUBLISH`,
//! then the libraries of `lua/lib/` the step includes (and what those
//! include, each once, dependencies first), then the step's own file.
//!
//! The scheme, for whoever adds a script or a library:
//!
//! - Every Lua file's first line names the libraries it calls into:
//!   `-- include: clock hold wake` (names of `lua/lib/<name>.lua`; empty
//!   after the colon when it calls none). Only the helpers of the libraries
//!   named there, and of what they include in turn, are defined when it runs.
//! - A library (`lua/lib/<name>.lua`) defines helpers as top-level
//!   `local function name(...)`, lists them on a `-- Defines: a, b.` line of
//!   its header, and is registered in [`LIBS`] below.
//! - A new step is one `lua!(NAME, "file.lua")` line in the module of its
//!   call wrapper (`src/scripts/*.rs`).
//! - The libraries go before the step's own code, or where the step has a
//!   line [`HERE`]: what is above it (its arguments' locals, then a fast
//!   path that calls no helper) runs before any helper is built, so a
//!   fast path that returns there pays for none of them.
//!
//! The tests below fail when a file calls a helper of a library it does not
//! include, includes a library it calls nothing of, names a library that
//! does not exist, or when the includes form a cycle.

/// Every library: its name (as `-- include:` lines give it) and its source.
macro_rules! libs {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/lib/", $name, ".lua")))),*]
    };
}

type Lib = (&'static str, &'static str);

const LIBS: &[Lib] = libs![
    "clock",
    "fence",
    "records",
    "hold",
    "wake",
    "queue",
    "handover",
    "leases",
    "rw_fair",
    "sem_end",
    "sem",
    "sem_queue",
    "parts"
];

const INCLUDE: &str = "-- include:";

/// The line of a step where its libraries are put (else before it all).
const HERE: &str = "-- libraries here\n";

/// The luacheck lines around libraries put inside a step: a helper's
/// parameters may share a name with the step's locals above them.
const SHADOWING: (&str, &str) = ("-- luacheck: push ignore 431 432\n", "-- luacheck: pop\n");

/// The libraries a Lua file names on its first line (none without that line).
fn includes(source: &str) -> Vec<&str> {
    let first = source.lines().next().unwrap_or("");
    first.strip_prefix(INCLUDE).map(|names| names.split_whitespace().collect()).unwrap_or_default()
}

fn lib(libs: &'static [Lib], name: &str) -> Result<&'static Lib, String> {
    libs.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        format!("no Lua library named {name} (lua/lib/{name}.lua, registered in src/scripts/assembly.rs)")
    })
}

/// The libraries of `libs` that `source` needs, each once, every one after
/// those it includes.
fn needed(libs: &'static [Lib], source: &str) -> Result<Vec<&'static Lib>, String> {
    fn visit(
        libs: &'static [Lib],
        name: &str,
        done: &mut Vec<&'static Lib>,
        open: &mut Vec<String>,
    ) -> Result<(), String> {
        if done.iter().any(|(d, _)| *d == name) {
            return Ok(());
        }
        if open.iter().any(|o| o == name) {
            return Err(format!("the Lua libraries include each other: {} -> {name}", open.join(" -> ")));
        }
        let found = lib(libs, name)?;
        open.push(name.to_string());
        for inner in includes(found.1) {
            visit(libs, inner, done, open)?;
        }
        open.pop();
        done.push(found);
        Ok(())
    }
    let mut done = Vec::new();
    for name in includes(source) {
        visit(libs, name, &mut done, &mut Vec::new())?;
    }
    Ok(done)
}

/// The script sent to Redis for the step `source`, publishing with `publish`
/// ('PUBLISH' or 'SPUBLISH'). A script whose includes cannot be resolved
/// (which the tests rule out for the files shipped) becomes one that fails
/// with that reason, so loading it never panics.
pub(super) fn assemble(publish: &str, source: &str) -> String {
    match needed(LIBS, source) {
        Ok(libs) => {
            let mut script = format!("local PUBLISH = '{publish}'\n");
            let (above, below) = match source.split_once(&format!("\n{HERE}")) {
                Some((above, below)) => (Some(above), below),
                None => (None, source),
            };
            if let Some(above) = above {
                script.push_str(above);
                script.push('\n');
                script.push_str(SHADOWING.0);
            }
            for (_, lib) in libs {
                script.push_str(lib);
            }
            if above.is_some() {
                script.push_str(SHADOWING.1);
            }
            script.push_str(below);
            script
        }
        Err(e) => format!("return redis.error_reply('FERROLOCK_SCRIPT {}')", e.replace('\'', "")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::*;

    /// Every `*.lua` file of `lua/<under>`: (path shown in messages, source).
    fn lua_files(under: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua").join(under);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("lua/ is readable")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "lua"))
            .map(|p| {
                let shown = p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
                (shown, std::fs::read_to_string(&p).expect("a readable Lua file"))
            })
            .collect();
        files.sort();
        files
    }

    /// The code of a Lua file, its comments cut off.
    fn code(source: &str) -> String {
        source.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
    }

    /// The names a Lua file defines with `local function name(`.
    fn defined(source: &str) -> BTreeSet<String> {
        code(source)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("local function "))
            .map(|rest| rest.split('(').next().unwrap_or("").trim().to_string())
            .collect()
    }

    /// The names a Lua file calls (`name(`), its own definitions left out.
    fn called(source: &str) -> BTreeSet<String> {
        let code = code(source);
        let mut names = BTreeSet::new();
        let chars: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i].is_alphabetic() || chars[i] == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let mut j = i;
                while j < chars.len() && chars[j] == ' ' {
                    j += 1;
                }
                let after_dot = start > 0 && chars[start - 1] == '.';
                if j < chars.len() && chars[j] == '(' && !after_dot {
                    names.insert(chars[start..i].iter().collect());
                }
            } else {
                i += 1;
            }
        }
        let own = defined(source);
        names.retain(|n| !own.contains(n));
        names
    }

    /// Which library defines each helper.
    fn owners() -> BTreeMap<String, &'static str> {
        let mut owners = BTreeMap::new();
        for (name, source) in LIBS {
            for helper in defined(source) {
                let before = owners.insert(helper.clone(), *name);
                assert!(
                    before.is_none(),
                    "{helper} is defined by both lib/{} and lib/{name}",
                    before.unwrap()
                );
            }
        }
        owners
    }

    #[test]
    fn every_library_file_is_registered_and_states_what_it_defines() {
        let files = lua_files("lib");
        let on_disk: BTreeSet<String> = files.iter().map(|(p, _)| p.clone()).collect();
        let registered: BTreeSet<String> = LIBS.iter().map(|(n, _)| format!("lua/lib/{n}.lua")).collect();
        assert_eq!(on_disk, registered, "lua/lib/ and LIBS in src/scripts/assembly.rs differ");
        for (path, source) in &files {
            let stated = source
                .lines()
                .find_map(|l| l.strip_prefix("-- Defines: "))
                .unwrap_or_else(|| panic!("{path}: no `-- Defines: ...` line in its header"));
            let stated: BTreeSet<String> =
                stated.trim_end_matches('.').split(", ").map(str::to_string).collect();
            assert_eq!(stated, defined(source), "{path}: its `-- Defines:` line is not what it defines");
        }
        owners();
    }

    #[test]
    fn every_file_includes_exactly_the_libraries_it_calls() {
        let owners = owners();
        let files: Vec<_> = lua_files("").into_iter().chain(lua_files("lib")).collect();
        assert!(files.len() > LIBS.len() + 10, "the Lua files were not found");
        for (path, source) in &files {
            assert!(source.starts_with(INCLUDE), "{path}: the first line is not `{INCLUDE} ...`");
            let named = includes(source);
            let declared: BTreeSet<&str> = named.iter().copied().collect();
            assert_eq!(declared.len(), named.len(), "{path}: a library is named twice");
            let used: BTreeSet<&str> = called(source).iter().filter_map(|h| owners.get(h).copied()).collect();
            let missing: Vec<_> = used.difference(&declared).collect();
            let unused: Vec<_> = declared.difference(&used).collect();
            assert!(missing.is_empty(), "{path}: calls helpers of {missing:?} without including them");
            assert!(unused.is_empty(), "{path}: includes {unused:?} and calls nothing of them");
        }
    }

    #[test]
    fn the_includes_form_no_cycle_and_resolve() {
        static CYCLE: &[Lib] =
            &[("a", "-- include: b\n"), ("b", "-- include: c\n"), ("c", "-- include: a\n")];
        for (name, source) in LIBS {
            let libs = needed(LIBS, source).unwrap_or_else(|e| panic!("lib/{name}: {e}"));
            assert!(libs.iter().all(|(n, _)| n != name), "lib/{name} needs itself");
        }
        for (path, source) in lua_files("") {
            needed(LIBS, &source).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        let err = needed(CYCLE, "-- include: a\nreturn 1").unwrap_err();
        assert!(err.contains("a -> b -> c -> a"), "{err}");
        let err = needed(LIBS, "-- include: clock nope\nreturn 1").unwrap_err();
        assert!(err.contains("no Lua library named nope"), "{err}");
    }

    #[test]
    fn a_script_gets_what_it_includes_once_dependencies_first() {
        let step = "-- include: wake rw_fair clock\nreturn 1";
        let script = assemble("SPUBLISH", step);
        assert!(script.starts_with("local PUBLISH = 'SPUBLISH'\n"));
        assert!(script.ends_with(step));
        let at = |lib: &str| {
            let header = format!("-- lib/{lib}.lua:");
            assert_eq!(script.matches(&header).count(), 1, "lib/{lib} is not in once");
            script.find(&header).unwrap()
        };
        assert!(at("fence") < at("wake") && at("wake") < at("handover") && at("handover") < at("rw_fair"));
        assert!(at("queue") < at("handover") && at("leases") < at("rw_fair") && at("rw_fair") < at("clock"));
        assert!(at("hold") < at("handover"));
        assert!(!script.contains("-- lib/sem.lua:"));
        let broken = assemble("PUBLISH", "-- include: nope\nreturn 1");
        assert!(broken.starts_with("return redis.error_reply('FERROLOCK_SCRIPT no Lua library named nope"));
    }

    #[test]
    fn a_step_gets_its_libraries_where_it_says_and_calls_none_above() {
        let step = "-- include: clock\nlocal a = ARGV[1]\nif a then\n  return 1\nend\n-- libraries here\nreturn now_us()";
        let script = assemble("PUBLISH", step);
        let (fast, clock, rest) = (
            script.find("if a then").unwrap(),
            script.find("-- lib/clock.lua:").unwrap(),
            script.find("return now_us()").unwrap(),
        );
        assert!(fast < clock && clock < rest, "{script}");
        assert!(!script.contains(HERE), "{script}");
        let owners = owners();
        for (path, source) in lua_files("") {
            if let Some((above, _)) = source.split_once(&format!("\n{HERE}")) {
                let early: Vec<_> = called(above).into_iter().filter(|h| owners.contains_key(h)).collect();
                assert!(
                    early.is_empty(),
                    "{path}: calls {early:?} above `{}`, before they are built",
                    HERE.trim()
                );
            }
        }
    }

    /// Writes every step as one server runs it (`assemble`) to
    /// `target/lua-assembled/<file>`, where `make lint-lua` runs luacheck
    /// over them. The first lines tell luacheck not to report as unused
    /// what the assembly defines for every step: `PUBLISH`, and the
    /// helpers of the included libraries (a step calls only some of them).
    #[test]
    fn every_step_is_written_assembled_for_the_linter() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/lua-assembled");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("target/lua-assembled can be made");
        // Each file of `lua/` is a step (`primitive`'s tests check it).
        for (shown, source) in lua_files("") {
            let file = Path::new(&shown).file_name().expect("a file's name");
            let libs = needed(LIBS, &source).unwrap_or_else(|e| panic!("{shown}: {e}"));
            let helpers = libs.iter().flat_map(|(_, lib)| defined(lib));
            let mut text: String = std::iter::once("PUBLISH".to_string())
                .chain(helpers)
                .map(|h| format!("-- luacheck: ignore 211/{h}\n"))
                .collect();
            text.push_str(&assemble("PUBLISH", &source));
            std::fs::write(dir.join(file), text).expect("an assembled step can be written");
        }
    }
}
