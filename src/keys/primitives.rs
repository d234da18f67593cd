//! The keys of each primitive, by part, as its atomic steps take them: all
//! made from the layout table (`layout.rs`) under the name's hash tag.

use super::layout::Part;
use super::KeySpace;

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

impl KeySpace {
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
            channel: part(Part::RwWake),
        }
    }

    /// The keys of the fair Lock `name`.
    pub fn fair(&self, name: &str) -> FairKeys {
        let part = |p| self.part(name, p);
        FairKeys {
            lock: part(Part::Hold),
            queue: part(Part::FairQueue),
            alive: part(Part::FairAlive),
            tags: part(Part::FairTags),
            channel: part(Part::Wake),
            announce: String::new(),
        }
    }

    /// An election's term is a fair Lock of its own under the name's tag,
    /// announcing its changes on its watch channel.
    pub fn election(&self, name: &str) -> FairKeys {
        let part = |p| self.part(name, p);
        FairKeys {
            lock: part(Part::ElTerm),
            queue: part(Part::ElQueue),
            alive: part(Part::ElAlive),
            tags: part(Part::ElTags),
            channel: part(Part::ElWake),
            announce: part(Part::ElWatch),
        }
    }

    /// The keys of the semaphore `name`, all under its hash tag.
    pub fn semaphore(&self, name: &str) -> SemKeys {
        let part = |p| self.part(name, p);
        SemKeys {
            holders: part(Part::SemHolders),
            data: part(Part::SemData),
            queue: part(Part::SemQueue),
            alive: part(Part::SemAlive),
            tags: part(Part::SemTags),
            channel: part(Part::SemWake),
        }
    }
}
