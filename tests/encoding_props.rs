//! Properties of how names and values become script arguments and keys:
//! one hash tag per name, never shared by two names, never broken by what the
//! name holds; every key of one RWMutex in the same tag.

use ferrolock::keys::{escape, unescape, KeySpace, Part};
use proptest::prelude::*;

/// The hash tag Redis Cluster would use: between the first '{' and the next '}'.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = open + 1 + key[open + 1..].find('}')?;
    (close > open + 1).then(|| &key[open + 1..close])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn distinct_names_get_distinct_tags(prefix in ".{0,12}", a in ".{1,40}", b in ".{1,40}") {
        let ks = KeySpace::new(&prefix);
        let (ka, kb) = (ks.lock(&a), ks.lock(&b));
        let (ta, tb) = (hash_tag(&ka).unwrap(), hash_tag(&kb).unwrap());
        prop_assert_eq!(ka == kb, a == b);
        prop_assert_eq!(ta == tb, a == b);
    }

    #[test]
    fn braces_in_prefix_or_name_never_move_the_tag(prefix in "[{}%a]{0,6}", name in "[{}%:a-z]{1,20}") {
        let ks = KeySpace::new(&prefix);
        let key = ks.lock(&name);
        prop_assert_eq!(key.matches('{').count(), 1);
        prop_assert_eq!(key.matches('}').count(), 1);
        let rw = ks.rw(&name);
        let tag = hash_tag(&key).unwrap();
        for k in [&rw.writer, &rw.readers, &rw.intent] {
            prop_assert_eq!(hash_tag(k).unwrap(), tag);
        }
    }

    #[test]
    fn names_decode_back_from_their_keys(prefix in ".{0,8}", name in "[{}%7BDa:]{1,20}|.{1,30}") {
        prop_assert_eq!(unescape(&escape(&name)), Some(name.clone()));
        let ks = KeySpace::new(&prefix);
        for part in [Part::Hold, Part::FairQueue, Part::RwWriter, Part::RwTags] {
            prop_assert_eq!(ks.parse(&ks.part(&name, part)), Some((name.clone(), part)));
        }
    }

    #[test]
    fn tokens_are_32_hex_digits(_n in 0..100u32) {
        let t = ferrolock::token::new_token().unwrap();
        prop_assert_eq!(t.len(), 32);
        prop_assert!(t.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
