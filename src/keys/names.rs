//! Names inside keys: escaping a name into its hash tag and back, and globs
//! over names (as Redis's `MATCH` reads them) with the SCAN pattern that
//! finds their keys.

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

/// `s` with Redis's glob characters escaped, to match itself only.
pub(super) fn glob_escape(s: &str) -> String {
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

    /// A SCAN `MATCH` pattern for the keys under `prefix` (escaped already)
    /// of every name this glob matches: it matches at least those keys,
    /// perhaps more (a `?` or a class may stand for an escaped character,
    /// three long in the key, so it goes out as `*`); what it found is
    /// matched exactly against the decoded names.
    pub(super) fn scan_pattern(&self, prefix: &str) -> String {
        let mut out = glob_escape(prefix);
        out.push('{');
        let mut wild = false;
        for token in &self.tokens {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_reads_back() {
        assert_eq!(unescape("a%7Bb%7D%25"), Some("a{b}%".into()));
        assert_eq!(unescape(&escape("a}b{c%7D")), Some("a}b{c%7D".into()));
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
}
