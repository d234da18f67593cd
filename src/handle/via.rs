//! `Via`: a handle seen through one way of sending its commands. Each
//! operation a blocking caller may send on its own thread's connection
//! (`Io::Inline`, see `transport::conn`) is written once, on `Via<'_, Lock>`
//! or `Via<'_, Election>`; the handle's own method is that operation
//! through `Io::Multiplexed`.

use std::ops::Deref;

use crate::transport::conn::Io;

/// `handle`, its commands sent as `io` says: `lock.via(Io::Inline).release()`.
pub struct Via<'a, T> {
    handle: &'a T,
    pub(crate) io: Io,
}

impl<'a, T> Via<'a, T> {
    pub(crate) fn new(handle: &'a T, io: Io) -> Self {
        Via { handle, io }
    }
}

impl<T> Deref for Via<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.handle
    }
}
