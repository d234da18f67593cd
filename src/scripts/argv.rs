//! A step's ARGV as a struct: one per script, declared with `step!` in the
//! file of the primitive that runs it, its fields named as the script's `-- ARGV:` header
//! names them, in that order (the test below reads every header and checks
//! it), each pushed as one argument or, for a list, as many. A field that
//! selects a case is a `wire!` enum, sent as the word the script compares;
//! a `bool` is sent as '1' or '0'; an `Option` pushes nothing when `None`
//! (a trailing optional argument).
//!
//! The naming convention is one for the three places: the header's names,
//! the Rust fields and the Lua locals the script names its ARGV with at its
//! top (`local token, ttl_ms = ARGV[1], ARGV[2]`) are the same snake_case
//! words.

use crate::transport::backend::Backend;

use super::invocation::Invocation;
use super::Lua;

/// A step's arguments, pushed onto a run of that step in ARGV order.
pub(crate) trait Argv {
    /// The step these arguments are for.
    fn step() -> &'static Lua;

    /// Pushes every field, in ARGV order.
    fn push(&self, invocation: &mut Invocation<'static>);

    /// A run of `Self::step()` for `client`'s kind of target with these
    /// arguments; its KEYS are added with `Invocation::key`.
    fn on(&self, client: &Backend) -> Invocation<'static> {
        let mut invocation = Self::step().on(client).invocation();
        self.push(&mut invocation);
        invocation
    }
}

/// `step! { NAME = "file.lua", struct NameArgv<'a> { field: Type, ... } }`:
/// the step `lua/file.lua` (a static `Lua`, with its includes) and the
/// struct of its ARGV, whose field names the step records for the header
/// check.
macro_rules! step {
    (
        $(#[$step_meta:meta])*
        $step:ident = $file:literal,
        $(#[$meta:meta])*
        struct $name:ident {}
    ) => {
        $(#[$step_meta])*
        static $step: $crate::scripts::Lua = $crate::scripts::Lua::new(
            $file,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
            &[],
        );

        $(#[$meta])*
        pub(crate) struct $name {}

        impl $crate::scripts::Argv for $name {
            fn step() -> &'static $crate::scripts::Lua {
                &$step
            }

            fn push(&self, _: &mut $crate::scripts::Invocation<'static>) {}
        }
    };
    (
        $(#[$step_meta:meta])*
        $step:ident = $file:literal,
        $(#[$meta:meta])*
        struct $name:ident $(<$lt:lifetime>)? { $($(#[$field_meta:meta])* $field:ident: $ty:ty),* $(,)? }
    ) => {
        $(#[$step_meta])*
        static $step: $crate::scripts::Lua = $crate::scripts::Lua::new(
            $file,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
            &[$(stringify!($field)),*],
        );

        $(#[$meta])*
        pub(crate) struct $name $(<$lt>)? { $($(#[$field_meta])* pub(crate) $field: $ty),* }

        impl $(<$lt>)? $crate::scripts::Argv for $name $(<$lt>)? {
            fn step() -> &'static $crate::scripts::Lua {
                &$step
            }

            fn push(&self, invocation: &mut $crate::scripts::Invocation<'static>) {
                $(invocation.arg(&self.$field);)*
            }
        }
    };
}

/// `wire! { pub(crate) enum Name { Case = "word", ... } }`: an argument that names a
/// case, sent as the word its script compares.
macro_rules! wire {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident { $($(#[$case_meta:meta])* $case:ident = $word:literal),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($(#[$case_meta])* $case),+ }

        impl redis::ToRedisArgs for $name {
            fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
                out.write_arg(match self { $($name::$case => $word.as_bytes()),+ });
            }
        }
    };
}

pub(crate) use {step, wire};

wire! {
    /// Whose hold a release ends: the token's own, or whoever's (an
    /// operator's recovery, python-redis-lock's reset).
    pub(crate) enum Whose {
        Own = "0",
        Anyone = "1",
    }
}

wire! {
    /// What a fair waiter or holder leaves: its hold too (a release), or
    /// only its place in the queue (a cancelled adopt of a restored hold).
    pub(crate) enum Leave {
        Hold = "1",
        QueueOnly = "0",
    }
}

impl Leave {
    /// `Hold` when the caller holds (`ours`), else `QueueOnly`.
    pub(crate) fn ours(ours: bool) -> Leave {
        if ours {
            Leave::Hold
        } else {
            Leave::QueueOnly
        }
    }
}

/// The header checks of a step, for the tests that run them over every step.
#[cfg(test)]
pub(crate) mod tests {
    use super::Lua;

    /// The text of a Lua header's `-- <what>:` entry, its continuation
    /// lines (indented further) joined on.
    fn header_entry(source: &str, what: &str) -> Option<String> {
        let tag = format!("-- {what}:");
        let mut lines = source.lines().skip_while(|l| !l.starts_with(&tag));
        let first = lines.next()?.strip_prefix(&tag)?.to_string();
        let rest = lines.take_while(|l| l.starts_with("--   ")).map(|l| l.trim_start_matches('-'));
        Some(std::iter::once(first.as_str()).chain(rest).collect::<Vec<_>>().join(" "))
    }

    /// The names of a header list `[a (what a is), b, c (...)]`: the first
    /// word of each item between commas outside parentheses; `none`: no
    /// item.
    fn header_names(entry: &str) -> Result<Vec<String>, String> {
        let entry = entry.trim();
        if entry == "none" {
            return Ok(Vec::new());
        }
        let inner = entry
            .strip_prefix('[')
            .and_then(|e| e.rfind(']').map(|end| &e[..end]))
            .ok_or_else(|| format!("not a `[name (what), ...]` list: {entry}"))?;
        let mut items = vec![String::new()];
        let mut depth = 0;
        for c in inner.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(String::new());
                    continue;
                }
                _ => {}
            }
            if depth == 0 && c != ')' {
                items.last_mut().unwrap().push(c);
            }
        }
        items
            .iter()
            .map(|item| {
                let words: Vec<&str> = item.split_whitespace().collect();
                match words.as_slice() {
                    [name]
                        if name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
                    {
                        Ok((*name).to_string())
                    }
                    _ => Err(format!("an item is not one snake_case name, then (what it is): {item:?}")),
                }
            })
            .collect()
    }

    /// The code lines of a step (comments cut off), numbered from 0.
    fn code_lines(source: &str) -> Vec<String> {
        source
            .lines()
            .map(|l| l.split("--").next().unwrap_or("").trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// Splits at commas outside parentheses and brackets.
    fn split_top(text: &str) -> Vec<String> {
        let mut parts = vec![String::new()];
        let mut depth = 0;
        for c in text.chars() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(String::new());
                    continue;
                }
                _ => {}
            }
            parts.last_mut().unwrap().push(c);
        }
        parts.into_iter().map(|p| p.trim().to_string()).collect()
    }

    /// The locals a step names `table`'s elements with in the `local a, b =
    /// X[1], f(X[2])` lines at its top, in order; and the first line after
    /// that top that mentions `table` (none when every use is up there).
    fn named_locals(source: &str, table: &str) -> (Vec<String>, Option<String>) {
        let mut names = Vec::new();
        let mut top = true;
        let mut stray = None;
        for line in code_lines(source) {
            let declared = line.strip_prefix("local ").and_then(|l| l.split_once(" = "));
            let mentions = line.contains(table);
            match declared {
                Some((lhs, rhs)) if top && mentions => {
                    let lhs = split_top(lhs);
                    let rhs = split_top(rhs);
                    assert_eq!(lhs.len(), rhs.len(), "a `local` line names as many as it assigns: {line}");
                    names.extend(lhs.into_iter().zip(rhs).filter(|(_, r)| r.contains(table)).map(|(l, _)| l));
                }
                Some(_) if top => {}
                _ => {
                    top = false;
                    if mentions && stray.is_none() {
                        stray = Some(line);
                    }
                }
            }
        }
        (names, stray)
    }

    /// `step`'s ARGV struct, its `-- ARGV:` header and the locals naming
    /// ARGV at its top agree (run over every step by `primitive`'s tests).
    pub(crate) fn check_argv(step: &Lua) {
        let name = step.file;
        let entry =
            header_entry(step.source, "ARGV").unwrap_or_else(|| panic!("{name}: no `-- ARGV:` header"));
        let header = header_names(&entry).unwrap_or_else(|e| panic!("{name}: its `-- ARGV:` header: {e}"));
        assert_eq!(
            header, step.argv,
            "{name}: the `-- ARGV:` header and the Rust struct of its step! differ"
        );
        let (locals, stray) = named_locals(step.source, "ARGV");
        assert_eq!(locals, header, "{name}: the locals naming ARGV at its top differ from its header");
        assert_eq!(stray, None, "{name}: ARGV is read below the locals at its top");
    }

    /// `step`'s `-- KEYS:` header names what the locals at its top name.
    pub(crate) fn check_keys(step: &Lua) {
        let name = step.file;
        let entry =
            header_entry(step.source, "KEYS").unwrap_or_else(|| panic!("{name}: no `-- KEYS:` header"));
        // A list of fixed keys names each; a variable number is described in words.
        if entry.trim_start().starts_with('[') {
            let header =
                header_names(&entry).unwrap_or_else(|e| panic!("{name}: its `-- KEYS:` header: {e}"));
            let (locals, _) = named_locals(step.source, "KEYS");
            assert!(
                header.starts_with(&locals) && !locals.is_empty(),
                "{name}: the locals naming KEYS at its top ({locals:?}) are not its header's ({header:?})"
            );
        }
    }

    #[test]
    fn a_header_list_is_read_name_by_name() {
        let source = "-- include:\n-- x.lua: y\n-- ARGV: [token, ttl_ms (in ms, as\n--        PX takes it), how ('a', 'b')]\n-- Returns 1\n";
        let entry = header_entry(source, "ARGV").unwrap();
        assert_eq!(header_names(&entry).unwrap(), ["token", "ttl_ms", "how"]);
        assert_eq!(header_names("none").unwrap(), Vec::<String>::new());
        assert!(header_names("[token of a reader]").is_err());
        assert!(header_names("token").is_err());
        let (locals, stray) = named_locals(
            "local a, b = KEYS[1], KEYS[2]\nlocal t, n, m = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'\nreturn ARGV[4]",
            "ARGV",
        );
        assert_eq!(locals, ["t", "n", "m"]);
        assert_eq!(stray.as_deref(), Some("return ARGV[4]"));
    }
}
