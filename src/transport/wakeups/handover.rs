//! The hand-over message: what a fair release publishes on a wake-up
//! channel to name the waiters it handed the lock (a permit, a reader's
//! place) to. Built by `grant_line` / `publish_grants` in `lua/lib/wake.lua`,
//! which states the contract:
//!
//! - `''`: a plain wake-up, naming nobody;
//! - otherwise one line per grant, joined by `'\n'`, each
//!   `<token> <fence> <attempt>`: the waiter's token (no space in it), the
//!   fence it holds with in decimal (0 for a reader), and the number of the
//!   attempt the grant is valid for.

/// One grant read from a hand-over message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant<'a> {
    pub token: &'a str,
    pub fence: i64,
    pub attempt: u64,
}

impl<'a> Grant<'a> {
    /// One line, or None when it is not `<token> <fence> <attempt>`.
    pub(crate) fn parse(line: &'a str) -> Option<Grant<'a>> {
        let mut parts = line.split(' ');
        let (Some(token), Some(fence), Some(attempt), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if token.is_empty() {
            return None;
        }
        Some(Grant { token, fence: fence.parse().ok()?, attempt: attempt.parse().ok()? })
    }

    /// The grants of a message, malformed lines skipped (none for `''`).
    pub(crate) fn all(message: &'a str) -> impl Iterator<Item = Grant<'a>> {
        message.split('\n').filter_map(Grant::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `grant_line` in lua/lib/wake.lua writes (`fence_text`: `%.0f`).
    fn line(g: &Grant<'_>) -> String {
        format!("{} {} {}", g.token, g.fence, g.attempt)
    }

    #[test]
    fn grants_round_trip_and_malformed_lines_are_skipped() {
        let grants = [
            Grant { token: "tok-a", fence: 1_800_000_000_000_000, attempt: 7 },
            Grant { token: "r1", fence: 0, attempt: 1 },
            Grant { token: "x", fence: 9_007_199_254_740_991, attempt: u64::MAX },
        ];
        let one = line(&grants[0]);
        assert_eq!(Grant::all(&one).collect::<Vec<_>>(), grants[..1]);
        let message = grants.iter().map(line).collect::<Vec<_>>().join("\n");
        assert_eq!(Grant::all(&message).collect::<Vec<_>>(), grants);

        assert_eq!(Grant::all("").count(), 0, "a plain wake-up names nobody");
        for bad in [
            "tok",
            "tok 12",
            "tok 12 3 4",
            "tok twelve 3",
            "tok 12 -3",
            "tok 1.8e15 3",
            " 12 3",
            "tok  12 3",
            "tok 12 3 ",
        ] {
            assert_eq!(Grant::parse(bad), None, "{bad:?}");
        }
        let mixed = format!("{}\ngarbage\n\n{}", line(&grants[1]), line(&grants[2]));
        assert_eq!(Grant::all(&mixed).collect::<Vec<_>>(), grants[1..]);
    }
}
