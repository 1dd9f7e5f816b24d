//! The one string interner: distinct strings to dense `u32` ids, in the
//! order first seen, and the ids' ranks in byte order of the strings.
//!
//! The pass ([`crate::aggregate`]), a result's rows
//! ([`crate::aggregate::rows`]) and the store (answers and ingest rollups)
//! key groups by string ids, so that a row costs one hash of each text and
//! no owned copy. They sort by [`ranks`]: ids replaced by ranks order as the
//! strings do, so a sort compares integers, not text.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

/// Strings interned to dense `u32` ids, in the order first seen.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    /// The ids, found by the hash of their string.
    ids: HashTable<u32>,
    strings: Vec<Box<str>>,
}

/// The hash of a string in the interner's table.
#[inline]
fn hash(text: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(text)
}

/// Whether two strings are equal: their lengths, then their first and last
/// words by overlapping loads, without a call to `memcmp` (a row's fields
/// are looked up several times per row; the call was 7 % of a one-account
/// pass's samples); past 16 bytes, equal words lead to a full compare.
/// Also the one-account pass's account check.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |s: &[u8], at: usize| -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[at..at + 4]);
        u32::from_le_bytes(w)
    };
    match n {
        0 => true,
        1..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8) && (n <= 16 || a == b),
    }
}

impl Interner {
    /// An interner whose id 0 is the empty string.
    pub(crate) fn with_empty() -> Interner {
        let mut interner = Interner::default();
        interner.intern("");
        interner
    }

    /// The id of `text`, interning it if new.
    #[inline]
    pub(crate) fn intern(&mut self, text: &str) -> u32 {
        let hashed = hash(text);
        let strings = &self.strings;
        if let Some(id) = self.ids.find(hashed, |&id| same(&strings[id as usize], text)) {
            return *id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(text.into());
        let strings = &self.strings;
        self.ids.insert_unique(hashed, id, |&id| hash(&strings[id as usize]));
        id
    }

    /// The id of `text` (interned if new), tried first against `last`, the
    /// id this caller interned last for the same field, which is then
    /// `text`'s: consecutive rows often repeat a field's value, found by a
    /// compare instead of a hash.
    #[inline]
    pub(crate) fn intern_after(&mut self, last: &mut Option<u32>, text: &str) -> u32 {
        if let Some(id) = *last {
            if same(self.get(id), text) {
                return id;
            }
        }
        let id = self.intern(text);
        *last = Some(id);
        id
    }

    /// The string of `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> &str {
        &self.strings[id as usize]
    }

    /// The id of `text`, if interned.
    #[inline]
    pub(crate) fn lookup(&self, text: &str) -> Option<u32> {
        self.ids.find(hash(text), |&id| same(&self.strings[id as usize], text)).copied()
    }

    /// Number of strings.
    pub(crate) fn len(&self) -> usize {
        self.strings.len()
    }

    /// The strings, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.strings.iter().map(|s| &**s)
    }

    /// The rank of each id in byte order of the strings (see [`ranks`]).
    pub(crate) fn ranks(&self) -> Vec<u32> {
        ranks(self.strings.len(), |id| self.get(id))
    }

    /// The strings as a table indexed by id.
    pub(crate) fn into_table(self) -> Arc<[Box<str>]> {
        self.strings.into()
    }
}

/// The rank of each of the ids `0..n` in byte order of their strings
/// (`text` of an id): `ranks[a] < ranks[b]` exactly when `text(a) < text(b)`
/// for distinct strings. For an id space that is not one [`Interner`] (a
/// shared table plus strings of one's own); [`Interner::ranks`] otherwise.
pub(crate) fn ranks<'a>(n: usize, text: impl Fn(u32) -> &'a str) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by(|a, b| text(*a).cmp(text(*b)));
    let mut ranks = vec![0; n];
    for (rank, id) in order.into_iter().enumerate() {
        ranks[id as usize] = rank as u32;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_first_seen() {
        let mut strings = Interner::with_empty();
        assert_eq!(strings.intern("b"), 1);
        assert_eq!(strings.intern("a"), 2);
        assert_eq!(strings.intern("b"), 1);
        assert_eq!(strings.lookup(""), Some(0));
        assert_eq!(strings.lookup("c"), None);
        assert_eq!(strings.iter().collect::<Vec<_>>(), ["", "b", "a"]);
        assert_eq!(&*strings.into_table(), ["".into(), "b".into(), "a".into()] as [Box<str>; 3]);
    }

    #[test]
    fn ranks_order_ids_as_their_strings() {
        let texts = ["sms", "", "S2", "voice", "S1", "4000", "30007", "é", "Z", "a"];
        let mut strings = Interner::default();
        for text in texts {
            strings.intern(text);
        }
        let ranks = strings.ranks();
        let mut by_rank: Vec<u32> = (0..texts.len() as u32).collect();
        by_rank.sort_by_key(|id| ranks[*id as usize]);
        let ranked: Vec<&str> = by_rank.iter().map(|id| strings.get(*id)).collect();
        let mut sorted = texts.to_vec();
        sorted.sort_unstable();
        assert_eq!(ranked, sorted);
    }

    proptest::proptest! {
        /// The short-text equality is `==`, at every length up to and past
        /// its word paths, and on strings that differ in one byte only.
        #[test]
        fn same_is_equality(a in "[a-c\\x00é]{0,40}", flip in 0usize..40) {
            proptest::prop_assert!(same(&a, &a.clone()));
            let mut b = a.clone().into_bytes();
            if let Some(byte) = b.get_mut(flip) {
                *byte ^= 1;
            }
            let b = String::from_utf8_lossy(&b).into_owned();
            proptest::prop_assert_eq!(same(&a, &b), a == b);
            let shorter = &a[..a.floor_char_boundary(a.len() / 2)];
            proptest::prop_assert_eq!(same(&a, shorter), a == shorter);
        }

        /// Interning many strings gives one id per distinct string, found
        /// again by `intern` and `lookup`, whatever the table's growth.
        #[test]
        fn every_distinct_string_has_one_id(texts in proptest::collection::vec("[a-d]{0,20}", 0..300)) {
            let mut strings = Interner::default();
            let ids: Vec<u32> = texts.iter().map(|t| strings.intern(t)).collect();
            for (text, id) in texts.iter().zip(&ids) {
                proptest::prop_assert_eq!(strings.intern(text), *id);
                proptest::prop_assert_eq!(strings.lookup(text), Some(*id));
                proptest::prop_assert_eq!(strings.get(*id), text.as_str());
            }
            let distinct: std::collections::BTreeSet<&String> = texts.iter().collect();
            proptest::prop_assert_eq!(strings.len(), distinct.len());
        }
    }
}
