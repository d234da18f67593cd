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
pub fn escape(s: &str) -> String {
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

/// The inverse of `escape`: `None` for text `escape` never makes (a bare
/// `{` or `}`, or a `%` not followed by `25`, `7B` or `7D`).
pub fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['%', '{', '}']) {
        out.push_str(&rest[..i]);
        let decoded = match rest.get(i..i + 3)? {
            "%25" => '%',
            "%7B" => '{',
            "%7D" => '}',
            _ => return None,
        };
        out.push(decoded);
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// What a kind of primitive keeps under `<prefix>{<name>}`: each part's
/// suffix. The one table of the layout: key names are made from it, and
/// keys found by a scan are read back with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// A Lock's hold (also the multi-lock's, one per name).
    Hold,
    FairQueue,
    FairAlive,
    FairTags,
    RwWriter,
    RwReaders,
    RwIntent,
    RwQueuedReaders,
    RwQueuedWriters,
    RwAlive,
    RwTags,
}

/// The kinds of primitive a name can be used as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Lock,
    RwMutex,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::RwMutex => "rwmutex",
        }
    }
}

impl Part {
    const ALL: [Part; 11] = [
        Part::Hold,
        Part::FairQueue,
        Part::FairAlive,
        Part::FairTags,
        Part::RwWriter,
        Part::RwReaders,
        Part::RwIntent,
        Part::RwQueuedReaders,
        Part::RwQueuedWriters,
        Part::RwAlive,
        Part::RwTags,
    ];

    /// What follows the hash tag in this part's key.
    pub fn suffix(self) -> &'static str {
        match self {
            Part::Hold => "",
            Part::FairQueue => ":q",
            Part::FairAlive => ":qx",
            Part::FairTags => ":qt",
            Part::RwWriter => ":rw:w",
            Part::RwReaders => ":rw:r",
            Part::RwIntent => ":rw:i",
            Part::RwQueuedReaders => ":rw:qr",
            Part::RwQueuedWriters => ":rw:qw",
            Part::RwAlive => ":rw:qx",
            Part::RwTags => ":rw:qt",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Part::Hold | Part::FairQueue | Part::FairAlive | Part::FairTags => Kind::Lock,
            _ => Kind::RwMutex,
        }
    }
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

    /// The key of one part of `name`.
    pub fn part(&self, name: &str, part: Part) -> String {
        format!("{}{}", self.lock(name), part.suffix())
    }

    /// The keys of the read/write mutex `name`, all under its hash tag.
    pub fn rw(&self, name: &str) -> RwKeys {
        let part = |p| self.part(name, p);
        RwKeys {
            writer: part(Part::RwWriter),
            readers: part(Part::RwReaders),
            intent: part(Part::RwIntent),
            queued_readers: part(Part::RwQueuedReaders),
            queued_writers: part(Part::RwQueuedWriters),
            alive: part(Part::RwAlive),
            tags: part(Part::RwTags),
            channel: format!("{}:rw:wake", self.lock(name)),
        }
    }

    /// The name and part a key of this namespace stands for; `None` for a
    /// key this layout does not make (another prefix, an unknown suffix).
    pub fn parse(&self, key: &str) -> Option<(String, Part)> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('{')?;
        let close = rest.find('}')?;
        let (name, suffix) = (&rest[..close], &rest[close + 1..]);
        let part = Part::ALL.into_iter().find(|p| p.suffix() == suffix)?;
        let name = unescape(name).filter(|n| !n.is_empty())?;
        Some((name, part))
    }

    /// A SCAN `MATCH` pattern for the keys of every name matching `names`
    /// (a glob: see `Glob`): it matches at least those keys, perhaps more
    /// (a `?` or a class may stand for an escaped character, three long in
    /// the key, so it goes out as `*`); what it found is matched exactly
    /// against the decoded names.
    pub fn scan_pattern(&self, names: &Glob) -> String {
        let mut out = glob_escape(&self.prefix);
        out.push('{');
        let mut wild = false;
        for token in &names.tokens {
            match token {
                Token::Literal(c) => out.push_str(&glob_escape(&escape(&c.to_string()))),
                _ if wild => {}
                _ => out.push('*'),
            }
            wild = !matches!(token, Token::Literal(_));
        }
        out.push_str("}*");
        out
    }
}

/// `s` with Redis's glob characters escaped, to match itself only.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A glob over names, as Redis's `MATCH` reads one: `*` any run, `?` any
/// one character, `[abc]`, `[a-z]` and `[^...]` a class, a backslash before a character that character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    Any,
    Star,
    Class { negated: bool, ranges: Vec<(char, char)> },
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let token = match chars[i] {
                '*' => Token::Star,
                '?' => Token::Any,
                '\\' if i + 1 < chars.len() => {
                    i += 1;
                    Token::Literal(chars[i])
                }
                '[' => match Self::class(&chars[i + 1..]) {
                    Some((token, used)) => {
                        i += used;
                        token
                    }
                    None => Token::Literal('['),
                },
                c => Token::Literal(c),
            };
            tokens.push(token);
            i += 1;
        }
        Glob { tokens }
    }

    /// A class after its `[`, and how many characters it took (with its `]`);
    /// `None` when it is never closed (then `[` is taken literally).
    fn class(chars: &[char]) -> Option<(Token, usize)> {
        let negated = chars.first() == Some(&'^');
        let mut i = usize::from(negated);
        let mut ranges = Vec::new();
        loop {
            let c = *chars.get(i)?;
            if c == ']' {
                return Some((Token::Class { negated, ranges }, i + 1));
            }
            let c = if c == '\\' {
                i += 1;
                *chars.get(i)?
            } else {
                c
            };
            if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|e| *e != ']') {
                let end = chars[i + 2];
                ranges.push((c.min(end), c.max(end)));
                i += 3;
            } else {
                ranges.push((c, c));
                i += 1;
            }
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        let s: Vec<char> = name.chars().collect();
        let one = |t: &Token, c: char| match t {
            Token::Literal(l) => *l == c,
            Token::Any => true,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(a, b)| (*a..=*b).contains(&c)) != *negated
            }
            Token::Star => false,
        };
        // The classic two-pointer walk, going back to the latest `*` on a mismatch.
        let (mut p, mut i) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            if p < self.tokens.len() && self.tokens[p] == Token::Star {
                star = Some((p, i));
                p += 1;
            } else if p < self.tokens.len() && one(&self.tokens[p], s[i]) {
                p += 1;
                i += 1;
            } else if let Some((sp, si)) = star {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            } else {
                return false;
            }
        }
        self.tokens[p..].iter().all(|t| *t == Token::Star)
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
            queue: format!("{lock}{}", Part::FairQueue.suffix()),
            alive: format!("{lock}{}", Part::FairAlive.suffix()),
            tags: format!("{lock}{}", Part::FairTags.suffix()),
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

/// A quorum master's fence record of a lock key (same hash tag): see
/// `recorded_fence` in lua/common.lua.
pub fn fence_record(lock_key: &str) -> String {
    format!("{lock_key}:fence")
}

/// `keys`, then the fence record of each: the keys of a quorum's fenced step.
pub fn with_fence_records(keys: &[String]) -> Vec<String> {
    keys.iter().cloned().chain(keys.iter().map(|k| fence_record(k))).collect()
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

    #[test]
    fn keys_read_back_as_their_name_and_part() {
        let ks = KeySpace::new("app:{x}");
        for name in ["orders:42", "a}b{c%7D", "%", "{}"] {
            assert_eq!(ks.parse(&ks.lock(name)), Some((name.to_string(), Part::Hold)));
            for part in Part::ALL {
                assert_eq!(ks.parse(&ks.part(name, part)), Some((name.to_string(), part)));
            }
        }
        assert_eq!(ks.parse(&ks.fair("n").queue).map(|(_, p)| p.kind()), Some(Kind::Lock));
        assert_eq!(ks.parse(&ks.rw("n").tags).map(|(_, p)| p.kind()), Some(Kind::RwMutex));
        for foreign in
            ["app:{x}{n}:wake", "other:{n}", "app:%7Bx%7D{n}:zz", "app:%7Bx%7D{}", "app:%7Bx%7D{a%7}"]
        {
            assert_eq!(ks.parse(foreign), None, "{foreign}");
        }
        assert_eq!(unescape("a%7Bb%7D%25"), Some("a{b}%".into()));
        assert_eq!(unescape("a{"), None);
        assert_eq!(unescape("%2"), None);
    }

    #[test]
    fn globs_match_as_redis_does() {
        let cases = [
            ("*", "anything", true),
            ("orders:*", "orders:42", true),
            ("orders:*", "order:42", false),
            ("o?d*", "orders", true),
            ("a[bc]d", "acd", true),
            ("a[^bc]d", "acd", false),
            ("a[a-c]d", "abd", true),
            ("a[c-a]d", "abd", true),
            ("\\*", "*", true),
            ("\\*", "x", false),
            ("[", "[", true),
            ("*a*b", "xxaxxb", true),
            ("*a*b", "xxaxxbc", false),
            ("{x}", "{x}", true),
            ("", "", true),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(Glob::new(pattern).matches(name), expected, "{pattern:?} ~ {name:?}");
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
