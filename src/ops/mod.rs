//! What an operator does to the keys whoever holds them: scan and describe
//! (what `ferrolock ls` and `inspect` show), and force-release and inspect by
//! name.

pub(crate) mod admin;
pub mod listing;
