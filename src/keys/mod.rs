//! Redis key names. Every key of one lock shares a hash tag derived from the
//! lock's name alone, so one script touches one Cluster slot. Each kind of
//! primitive has its own parts under that tag (the table in `layout.rs`), so
//! a Lock and an RWMutex (or any other kind) of the same name never share a
//! key. Names are escaped into the tag by `names.rs`; each primitive gathers
//! its own keys from them (`RwKeys` in `crate::primitive::rw`, and so on).

mod layout;
mod names;

pub use layout::{Kind, Part, Role};
pub use names::{escape, unescape, Glob};

/// The namespace all keys of one `Backend` live in.
#[derive(Debug, Clone)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    pub fn new(prefix: &str) -> Self {
        Self { prefix: escape(prefix) }
    }

    /// The hash holding the exclusive hold of `name`.
    pub fn lock(&self, name: &str) -> String {
        self.part(name, Part::Hold)
    }

    /// The key (or channel) of one part of `name`.
    pub fn part(&self, name: &str, part: Part) -> String {
        format!("{}{{{}}}{}", self.prefix, escape(name), part.suffix())
    }

    /// Every part of `name` that is a key, of every kind, with its key: what
    /// an operator's tool reads or clears.
    pub fn parts(&self, name: &str) -> Vec<(Part, String)> {
        Part::all().map(|p| (p, self.part(name, p))).collect()
    }

    /// The name and part a key of this namespace stands for; `None` for a
    /// key this layout does not make (another prefix, an unknown suffix).
    pub fn parse(&self, key: &str) -> Option<(String, Part)> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('{')?;
        let close = rest.find('}')?;
        let (name, suffix) = (&rest[..close], &rest[close + 1..]);
        let part = Part::all().find(|p| p.role().is_key() && p.suffix() == suffix)?;
        let name = unescape(name).filter(|n| !n.is_empty())?;
        Some((name, part))
    }

    /// A SCAN `MATCH` pattern for the keys of every name matching `names`:
    /// it matches at least those keys, perhaps more; what it found is
    /// matched exactly against the decoded names.
    pub fn scan_pattern(&self, names: &Glob) -> String {
        names.scan_pattern(&self.prefix)
    }

    /// The prefix, as it was given.
    pub fn prefix(&self) -> String {
        unescape(&self.prefix).unwrap_or_else(|| self.prefix.clone())
    }

    /// `scan_pattern` under any prefix.
    pub fn scan_pattern_every_prefix(names: &Glob) -> String {
        format!("*{}", names.scan_pattern(""))
    }

    /// The prefix, name and part a key of the layout stands for, under
    /// whatever prefix: an escaped prefix has no `{`, so the first one opens
    /// the hash tag. `None` for a key the layout does not make.
    pub fn parse_any(key: &str) -> Option<(String, String, Part)> {
        let prefix = unescape(&key[..key.find('{')?])?;
        let (name, part) = KeySpace::new(&prefix).parse(key)?;
        Some((prefix, name, part))
    }
}

/// Whether a Redis Cluster keeps all of `keys` in one hash slot (one script
/// may only touch one slot there).
pub fn one_slot(keys: &[String]) -> bool {
    use redis::cluster_routing::Slot;
    keys.windows(2).all(|pair| Slot::for_key(&pair[0]) == Slot::for_key(&pair[1]))
}

/// A quorum master's fence record of a lock key (same hash tag): see
/// `recorded_fence` in lua/lib/records.lua.
pub fn fence_record(lock_key: &str) -> String {
    format!("{lock_key}{}", layout::FENCE_RECORD)
}

/// `keys`, then the fence record of each: the keys of a quorum's fenced step.
pub fn with_fence_records(keys: &[String]) -> Vec<String> {
    keys.iter().cloned().chain(keys.iter().map(|k| fence_record(k))).collect()
}

/// The wake-up channel of a Lock's hold key (same hash tag).
pub fn wake_channel(lock_key: &str) -> String {
    format!("{lock_key}{}", Part::Wake.suffix())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_in_names_cannot_escape_the_tag() {
        let ks = KeySpace::new("app:");
        assert_eq!(ks.lock("orders:42"), "app:{orders:42}");
        assert_eq!(ks.lock("a}b{c"), "app:{a%7Db%7Bc}");
        assert_ne!(ks.lock("%7B"), ks.lock("{"));
        assert_eq!(KeySpace::new("{x}").lock("n"), "%7Bx%7D{n}");
        let rw = ks.rw("doc}7");
        assert_eq!(
            [rw.writer, rw.readers, rw.intent],
            ["app:{doc%7D7}:rw:w", "app:{doc%7D7}:rw:r", "app:{doc%7D7}:rw:i"]
        );
        assert_eq!(wake_channel(&ks.lock("n")), ks.fair("n").channel);
    }

    #[test]
    fn keys_read_back_under_any_prefix() {
        for prefix in ["app:", "", "{x}:", "a%b"] {
            let ks = KeySpace::new(prefix);
            assert_eq!(ks.prefix(), prefix);
            for (part, key) in ks.parts("n{1}") {
                if part.role().is_key() {
                    assert_eq!(
                        KeySpace::parse_any(&key),
                        Some((prefix.to_string(), "n{1}".to_string(), part))
                    );
                }
            }
        }
        assert_eq!(KeySpace::parse_any("app:{n}:not-ours"), None);
        assert_eq!(KeySpace::parse_any("no-tag"), None);
        assert_eq!(KeySpace::scan_pattern_every_prefix(&Glob::new("o*")), "*{o*}*");
    }

    #[test]
    fn the_layout_is_what_it_was() {
        let ks = KeySpace::new("p:");
        let (sem, el) = (ks.semaphore("s"), ks.election("e"));
        assert_eq!(
            sem.all().map(String::as_str),
            ["p:{s}:sem:h", "p:{s}:sem:d", "p:{s}:sem:q", "p:{s}:sem:qx", "p:{s}:sem:qt", "p:{s}:sem:wake"]
        );
        assert_eq!(
            el.all().map(String::as_str),
            ["p:{e}:el", "p:{e}:el:q", "p:{e}:el:qx", "p:{e}:el:qt", "p:{e}:el:wake"]
        );
        assert_eq!(el.announce, "p:{e}:el:watch");
        assert_eq!(ks.rw("r").channel, "p:{r}:rw:wake");
        assert_eq!(fence_record(&ks.lock("l")), "p:{l}:fence");
    }

    #[test]
    fn kinds_of_one_name_never_share_a_key() {
        let ks = KeySpace::new("app:");
        let (rw, fair, sem, el) = (ks.rw("n"), ks.fair("n"), ks.semaphore("n"), ks.election("n"));
        let mut kinds: Vec<Vec<&String>> =
            vec![fair.all().to_vec(), rw.all().to_vec(), sem.all().to_vec(), el.all().to_vec()];
        kinds[3].push(&el.announce);
        for (i, a) in kinds.iter().enumerate() {
            for b in &kinds[i + 1..] {
                assert!(a.iter().all(|k| !b.contains(k)), "two kinds share a key: {a:?} {b:?}");
            }
        }
    }

    #[test]
    fn every_key_of_a_name_shares_its_slot() {
        let ks = KeySpace::new("app:{x}");
        let all: Vec<String> = ks.parts("doc").into_iter().map(|(_, k)| k).collect();
        assert!(one_slot(&all));
        assert!(!one_slot(&[ks.lock("a"), ks.lock("b")]));
    }

    #[test]
    fn keys_read_back_as_their_name_and_part() {
        let ks = KeySpace::new("app:{x}");
        for name in ["orders:42", "a}b{c%7D", "%", "{}"] {
            assert_eq!(ks.parse(&ks.lock(name)), Some((name.to_string(), Part::Hold)));
            for part in Part::all().filter(|p| p.role().is_key()) {
                assert_eq!(ks.parse(&ks.part(name, part)), Some((name.to_string(), part)));
            }
        }
        assert_eq!(ks.parse(&ks.fair("n").queue).map(|(_, p)| p.kind()), Some(Kind::Lock));
        assert_eq!(ks.parse(&ks.rw("n").tags).map(|(_, p)| p.kind()), Some(Kind::RwMutex));
        assert_eq!(ks.parse(&ks.semaphore("n").holders).map(|(_, p)| p.kind()), Some(Kind::Semaphore));
        assert_eq!(ks.parse(&ks.election("n").lock).map(|(_, p)| p.kind()), Some(Kind::Election));
        for foreign in [
            "app:{x}{n}:wake",
            "other:{n}",
            "app:%7Bx%7D{n}:zz",
            "app:%7Bx%7D{n}:wake",
            "app:%7Bx%7D{}",
            "app:%7Bx%7D{a%7}",
        ] {
            assert_eq!(ks.parse(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn scan_patterns_cover_escaped_names() {
        let ks = KeySpace::new("p*[");
        assert_eq!(ks.scan_pattern(&Glob::new("*")), "p\\*\\[{*}*");
        assert_eq!(ks.scan_pattern(&Glob::new("a{?*b")), "p\\*\\[{a%7B*b}*");
        assert_eq!(ks.scan_pattern(&Glob::new("x\\*")), "p\\*\\[{x\\*}*");
    }
}
