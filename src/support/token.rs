//! Owner tokens: 128 random bits from the operating system, as 32 hex digits.

use crate::error::{Error, Result};

/// Longest accepted token, in bytes.
pub const MAX_TOKEN: usize = 512;

pub fn new_token() -> Result<String> {
    let mut buf = [0u8; 16];
    getrandom::fill(&mut buf).map_err(|e| Error::Connection(format!("the OS random source failed: {e}")))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A token given by the caller (a restored hold's, an operator's release):
/// 1 to `MAX_TOKEN` printable ASCII characters with no space, for a hold's
/// value ends its token at the first space (lua/lib/hold.lua).
pub fn check_token(token: &str) -> Result<()> {
    if token.is_empty() || token.len() > MAX_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::InvalidArgument(format!(
            "token must be 1 to {MAX_TOKEN} printable ASCII characters with no space \
             (ferrolock's own are 32 hex digits: pass the `token` a handle gave)"
        )));
    }
    Ok(())
}

/// A uniformly random fraction in [0, 1) for jitter.
pub fn random_unit() -> f64 {
    let mut buf = [0u8; 8];
    if getrandom::fill(&mut buf).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(buf) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_callers_token_is_printable_with_no_space() {
        use super::{check_token, new_token, MAX_TOKEN};
        assert!(check_token(&new_token().unwrap()).is_ok());
        assert!(check_token("job-42:a_b").is_ok());
        for bad in ["", "a b", "a\tb", "a\nb", "caf\u{e9}", &"x".repeat(MAX_TOKEN + 1)] {
            let err = check_token(bad).unwrap_err().to_string();
            assert!(err.contains("printable ASCII characters with no space"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn tokens_are_128_bit_and_fresh() {
        let a = super::new_token().unwrap();
        let b = super::new_token().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
