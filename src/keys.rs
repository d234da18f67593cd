//! Redis key names. Every key of one lock shares a hash tag derived from the
//! lock's name alone, so one script touches one Cluster slot. Each kind of
//! primitive has its own suffixes under that tag, so a Lock and an RWMutex
//! (or a later primitive) of the same name never share a key:
//!
//! | kind | keys under `<prefix>{<name>}` |
//! |---|---|
//! | Lock (and multi-lock) | the hold itself; `:wake` channel |
//! | fair Lock | also `:q` queue, `:qx` liveness, `:qt` waiters' tags |
//! | RWMutex | `:rw:w` writer, `:rw:r` readers, `:rw:i` intent, `:rw:qr` / `:rw:qw` / `:rw:qx` / `:rw:qt` fair queues, `:rw:wake` channel |
//! | Semaphore | `:sem:h` holders, `:sem:d` data, `:sem:q` / `:sem:qx` / `:sem:qt` fair queue, `:sem:wake` channel |
//! | Election | a fair Lock at `:el` (`:el:q`, `:el:qx`, `:el:qt`, `:el:wake`), `:el:watch` channel |

/// Escapes `%`, `{` and `}` so any name (braces included) yields exactly one,
/// unambiguous hash tag, and two different names never share a key.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// The namespace all keys of one `Client` live in.
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
        format!("{}{{{}}}", self.prefix, escape(name))
    }

    /// The keys of the read/write mutex `name`, all under its hash tag.
    pub fn rw(&self, name: &str) -> RwKeys {
        let base = format!("{}:rw", self.lock(name));
        RwKeys {
            writer: format!("{base}:w"),
            readers: format!("{base}:r"),
            intent: format!("{base}:i"),
            queued_readers: format!("{base}:qr"),
            queued_writers: format!("{base}:qw"),
            alive: format!("{base}:qx"),
            tags: format!("{base}:qt"),
            channel: format!("{base}:wake"),
        }
    }
}

/// An RWMutex: the writer's hold (shaped like a Lock's), the readers (a sorted
/// set of token -> expiry in server milliseconds), a waiting writer's intent,
/// and in fair mode the waiting readers and writers (token -> arrival), until
/// when each waiter counts as alive, and each waiter's tag (its latest attempt
/// and its patience: what a hand-over to it is valid for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwKeys {
    pub writer: String,
    pub readers: String,
    pub intent: String,
    pub queued_readers: String,
    pub queued_writers: String,
    pub alive: String,
    pub tags: String,
    /// Where releases that may let a waiter in are published.
    pub channel: String,
}

impl RwKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 8] {
        [
            &self.writer,
            &self.readers,
            &self.intent,
            &self.queued_readers,
            &self.queued_writers,
            &self.alive,
            &self.tags,
            &self.channel,
        ]
    }
}

/// A fair lock: its hold (the same hash as a Lock's), the waiters in arrival
/// order, until when each waiter counts as alive, and each waiter's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairKeys {
    pub lock: String,
    pub queue: String,
    pub alive: String,
    pub tags: String,
    pub channel: String,
    /// Told '' whenever the hold is taken, claimed or released (an
    /// election's watchers listen there); empty for a plain fair Lock.
    pub announce: String,
}

impl FairKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 5] {
        [&self.lock, &self.queue, &self.alive, &self.tags, &self.channel]
    }
}

impl KeySpace {
    pub fn fair(&self, name: &str) -> FairKeys {
        FairKeys::at(self.lock(name))
    }

    /// An election's term is a fair Lock of its own under the name's tag,
    /// announcing its changes on `:el:watch`.
    pub fn election(&self, name: &str) -> FairKeys {
        let base = format!("{}:el", self.lock(name));
        FairKeys { announce: format!("{base}:watch"), ..FairKeys::at(base) }
    }

    /// The keys of the semaphore `name`, all under its hash tag.
    pub fn semaphore(&self, name: &str) -> SemKeys {
        let base = format!("{}:sem", self.lock(name));
        SemKeys {
            holders: format!("{base}:h"),
            data: format!("{base}:d"),
            queue: format!("{base}:q"),
            alive: format!("{base}:qx"),
            tags: format!("{base}:qt"),
            channel: format!("{base}:wake"),
        }
    }
}

impl FairKeys {
    /// A fair lock whose hold is the hash `lock`.
    fn at(lock: String) -> FairKeys {
        FairKeys {
            queue: format!("{lock}:q"),
            alive: format!("{lock}:qx"),
            tags: format!("{lock}:qt"),
            channel: wake_channel(&lock),
            announce: String::new(),
            lock,
        }
    }
}

/// A semaphore: its holders (token -> expiry in server milliseconds, each
/// permit its own lease), its data (the permit count, the last fence, each
/// holder's fence and metadata), and in fair mode a queue like a fair Lock's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemKeys {
    pub holders: String,
    pub data: String,
    pub queue: String,
    pub alive: String,
    pub tags: String,
    /// Where given-back permits are announced.
    pub channel: String,
}

impl SemKeys {
    /// Every key and the channel, in a fixed order.
    pub fn all(&self) -> [&String; 6] {
        [&self.holders, &self.data, &self.queue, &self.alive, &self.tags, &self.channel]
    }
}

/// Whether a Redis Cluster keeps all of `keys` in one hash slot (one script
/// may only touch one slot there).
pub fn one_slot(keys: &[String]) -> bool {
    use redis::cluster_routing::Slot;
    keys.windows(2).all(|pair| Slot::for_key(&pair[0]) == Slot::for_key(&pair[1]))
}

/// The wake-up channel of an exclusive lock key (same hash tag).
pub fn wake_channel(lock_key: &str) -> String {
    format!("{lock_key}:wake")
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
    fn every_key_of_a_lock_shares_its_slot() {
        let ks = KeySpace::new("app:{x}");
        let rw = ks.rw("doc");
        let fair = ks.fair("q");
        assert!(one_slot(&rw.all().map(String::clone)));
        assert!(one_slot(&fair.all().map(String::clone)));
        let sem = ks.semaphore("s");
        let el = ks.election("s");
        let mut same = sem.all().map(String::clone).to_vec();
        same.extend(el.all().map(String::clone));
        same.push(el.announce.clone());
        assert!(one_slot(&same));
        assert!(!one_slot(&[ks.lock("a"), ks.lock("b")]));
    }
}
