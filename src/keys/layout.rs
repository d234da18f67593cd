//! The one table of the key layout: every part each kind of primitive keeps
//! under `<prefix>{<name>}`, with its suffix and its role. Key names are made
//! from it, keys found by a scan are read back with it, and the operator's
//! tools (`describe.lua`, `force_release.lua`) are told each key's role from
//! it, so a primitive added here is listed, inspected and force-released by
//! every tool without changing them.
//!
//! | kind | keys under `<prefix>{<name>}` |
//! |---|---|
//! | Lock (and multi-lock) | the hold itself; `:wake` channel |
//! | fair Lock | also `:q` queue, `:qx` liveness, `:qt` waiters' tags |
//! | RWMutex | `:rw:w` writer, `:rw:r` readers, `:rw:i` intent, `:rw:qr` / `:rw:qw` / `:rw:qx` / `:rw:qt` fair queues, `:rw:wake` channel |
//! | Semaphore | `:sem:h` holders, `:sem:d` data, `:sem:q` / `:sem:qx` / `:sem:qt` fair queue, `:sem:wake` channel |
//! | Election | a fair Lock at `:el` (`:el:q`, `:el:qx`, `:el:qt`, `:el:wake`), `:el:watch` channel |

/// The kinds of primitive a name can be used as, in the order listings show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Lock,
    RwMutex,
    Semaphore,
    Election,
}

/// What a part is to the tools that read every kind alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// One holder's `token`, `fence`, marks and `meta` in one string value
    /// (lua/lib/hold.lua), its ttl the hold's.
    Hold,
    /// A sorted set of readers: token -> expiry (server ms).
    Readers,
    /// A sorted set of holders: token -> expiry (server ms), each one's fence
    /// and metadata in the kind's `Data` part.
    Permits,
    /// A hash: `permits` (the limit), the last `fence`, `f:<token>` and
    /// `m:<token>` of each holder.
    Data,
    /// A waiting writer's intent (its ttl is how long it stays).
    Intent,
    /// A fair queue of exclusive waiters (writers): token -> arrival.
    Queue,
    /// A fair queue of readers: token -> arrival.
    ReadQueue,
    /// Until when each queued waiter counts as alive.
    Alive,
    /// Each queued waiter's latest attempt and patience.
    Tags,
    /// A channel: where releases wake the waiters.
    Wake,
    /// A channel: where every change is announced to watchers.
    Watch,
}

impl Role {
    /// The name the Lua tools know this role by.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Hold => "hold",
            Role::Readers => "readers",
            Role::Permits => "permits",
            Role::Data => "data",
            Role::Intent => "intent",
            Role::Queue => "queue",
            Role::ReadQueue => "rqueue",
            Role::Alive => "alive",
            Role::Tags => "tags",
            Role::Wake => "wake",
            Role::Watch => "watch",
        }
    }

    /// Whether the part is a key (else a channel, never stored).
    pub fn is_key(self) -> bool {
        !matches!(self, Role::Wake | Role::Watch)
    }
}

/// Each part one kind keeps under a name's hash tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// A Lock's hold (also the multi-lock's, one per name).
    Hold,
    FairQueue,
    FairAlive,
    FairTags,
    Wake,
    RwWriter,
    RwReaders,
    RwIntent,
    RwQueuedReaders,
    RwQueuedWriters,
    RwAlive,
    RwTags,
    RwWake,
    SemHolders,
    SemData,
    SemQueue,
    SemAlive,
    SemTags,
    SemWake,
    /// An election's term: a fair Lock's hold of its own.
    ElTerm,
    ElQueue,
    ElAlive,
    ElTags,
    ElWake,
    ElWatch,
}

/// The table: each part's kind, role and suffix (what follows the hash tag).
const TABLE: [(Part, Kind, Role, &str); 25] = [
    (Part::Hold, Kind::Lock, Role::Hold, ""),
    (Part::FairQueue, Kind::Lock, Role::Queue, ":q"),
    (Part::FairAlive, Kind::Lock, Role::Alive, ":qx"),
    (Part::FairTags, Kind::Lock, Role::Tags, ":qt"),
    (Part::Wake, Kind::Lock, Role::Wake, ":wake"),
    (Part::RwWriter, Kind::RwMutex, Role::Hold, ":rw:w"),
    (Part::RwReaders, Kind::RwMutex, Role::Readers, ":rw:r"),
    (Part::RwIntent, Kind::RwMutex, Role::Intent, ":rw:i"),
    (Part::RwQueuedReaders, Kind::RwMutex, Role::ReadQueue, ":rw:qr"),
    (Part::RwQueuedWriters, Kind::RwMutex, Role::Queue, ":rw:qw"),
    (Part::RwAlive, Kind::RwMutex, Role::Alive, ":rw:qx"),
    (Part::RwTags, Kind::RwMutex, Role::Tags, ":rw:qt"),
    (Part::RwWake, Kind::RwMutex, Role::Wake, ":rw:wake"),
    (Part::SemHolders, Kind::Semaphore, Role::Permits, ":sem:h"),
    (Part::SemData, Kind::Semaphore, Role::Data, ":sem:d"),
    (Part::SemQueue, Kind::Semaphore, Role::Queue, ":sem:q"),
    (Part::SemAlive, Kind::Semaphore, Role::Alive, ":sem:qx"),
    (Part::SemTags, Kind::Semaphore, Role::Tags, ":sem:qt"),
    (Part::SemWake, Kind::Semaphore, Role::Wake, ":sem:wake"),
    (Part::ElTerm, Kind::Election, Role::Hold, ":el"),
    (Part::ElQueue, Kind::Election, Role::Queue, ":el:q"),
    (Part::ElAlive, Kind::Election, Role::Alive, ":el:qx"),
    (Part::ElTags, Kind::Election, Role::Tags, ":el:qt"),
    (Part::ElWake, Kind::Election, Role::Wake, ":el:wake"),
    (Part::ElWatch, Kind::Election, Role::Watch, ":el:watch"),
];

/// What follows a quorum master's hold key in its fence record (same hash
/// tag): see `recorded_fence` in lua/lib/records.lua.
pub(super) const FENCE_RECORD: &str = ":fence";

impl Part {
    /// Every part, in the table's order.
    pub fn all() -> impl Iterator<Item = Part> {
        TABLE.iter().map(|row| row.0)
    }

    fn row(self) -> &'static (Part, Kind, Role, &'static str) {
        TABLE.iter().find(|row| row.0 == self).expect("every part is in the table")
    }

    /// What follows the hash tag in this part's key.
    pub fn suffix(self) -> &'static str {
        self.row().3
    }

    pub fn kind(self) -> Kind {
        self.row().1
    }

    pub fn role(self) -> Role {
        self.row().2
    }
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Lock, Kind::RwMutex, Kind::Semaphore, Kind::Election];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::RwMutex => "rwmutex",
            Kind::Semaphore => "semaphore",
            Kind::Election => "election",
        }
    }

    /// This kind's parts, in the table's order.
    pub fn parts(self) -> impl Iterator<Item = Part> {
        Part::all().filter(move |p| p.kind() == self)
    }

    /// This kind's part playing `role` (the first, if several).
    pub fn part(self, role: Role) -> Option<Part> {
        self.parts().find(|p| p.role() == role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_unique_and_every_kind_has_a_wake_channel() {
        let mut suffixes: Vec<&str> = Part::all().map(Part::suffix).collect();
        suffixes.sort_unstable();
        let n = suffixes.len();
        suffixes.dedup();
        assert_eq!(suffixes.len(), n, "two parts share a suffix");
        assert!(!suffixes.contains(&FENCE_RECORD));
        for kind in Kind::ALL {
            assert!(kind.part(Role::Wake).is_some(), "{kind:?} has no wake-up channel");
            assert!(kind.parts().any(|p| matches!(p.role(), Role::Hold | Role::Readers | Role::Permits)));
        }
    }
}
