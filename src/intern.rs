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
/// are looked up several times per row, and the call costs more than the
/// compare); up to 24 bytes (an account or subaccount id is 20)
/// by words alone, past 24 equal words lead to a full compare. Also the
/// one-account pass's account check.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        17..=24 => word(a, 0) == word(b, 0) && word(a, 8) == word(b, 8) && word(a, n - 8) == word(b, n - 8),
        _ => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8) && a == b,
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

/// Slots of a [`ShortCache`] (a power of two): enough that a chunk's
/// recurring values seldom evict each other, few enough that the cache
/// (32 bytes a slot) stays in the core's own caches (re-tune with
/// `bench/ingest-ab.sh`).
const SHORT_SLOTS: usize = 1024;

/// A slot of a [`ShortCache`].
#[derive(Clone, Copy)]
struct ShortSlot {
    /// The string's [`words`].
    words: [u64; 3],
    /// Its length; `u32::MAX` in an empty slot.
    length: u32,
    /// Its id.
    id: u32,
}

/// The ids of recently interned strings of at most 24 bytes, direct-mapped
/// by the string's bytes read as three words: in front of an [`Interner`]
/// for fields whose few values recur row after row in any order (a row's
/// account, subaccount, type and code), a hit costs three loads, a
/// multiply and one compare, where the interner hashes the text, probes
/// its table and compares with the string it points to (about 90
/// instructions a look-up). Longer strings,
/// and the misses, go to the interner. A cache serves one interner: the
/// ids it keeps are that interner's.
pub(crate) struct ShortCache {
    slots: Box<[ShortSlot; SHORT_SLOTS]>,
}

impl Default for ShortCache {
    fn default() -> ShortCache {
        ShortCache { slots: Box::new([ShortSlot { words: [0; 3], length: u32::MAX, id: 0 }; SHORT_SLOTS]) }
    }
}

impl ShortCache {
    /// `interner.intern(text)`, through the cache.
    #[inline(always)]
    pub(crate) fn intern(&mut self, interner: &mut Interner, text: &str) -> u32 {
        let Some(words) = words(text.as_bytes()) else { return interner.intern(text) };
        let length = text.len() as u32;
        let mix = words[0] ^ words[1].rotate_left(21) ^ words[2].rotate_left(42) ^ u64::from(length);
        let at = (mix.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHORT_SLOTS.trailing_zeros())) as usize;
        let slot = &self.slots[at % SHORT_SLOTS];
        let known = &slot.words;
        if slot.length == length && known[0] == words[0] && known[1] == words[1] && known[2] == words[2] {
            return slot.id;
        }
        self.miss(interner, text, at, words)
    }

    /// `text` interned, and kept in slot `at`.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, interner: &mut Interner, text: &str, at: usize, words: [u64; 3]) -> u32 {
        let id = interner.intern(text);
        self.slots[at % SHORT_SLOTS] = ShortSlot { words, length: text.len() as u32, id };
        id
    }
}

/// The bytes of a string of at most 24 bytes as three words, which with
/// its length tell it from every other (every byte is in one of them, at a
/// place its length fixes); `None` for a longer one.
#[inline]
fn words(s: &[u8]) -> Option<[u64; 3]> {
    let n = s.len();
    Some(match n {
        0 => [0; 3],
        1..=3 => [u64::from(s[0]) | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]) << 16, 0, 0],
        4..=7 => [u64::from(half(s, 0)) | u64::from(half(s, n - 4)) << 32, 0, 0],
        8..=16 => [word(s, 0), word(s, n - 8), 0],
        17..=24 => [word(s, 0), word(s, 8), word(s, n - 8)],
        _ => return None,
    })
}

/// The 8 bytes of `s` at `at`, as one word (little-endian).
#[inline]
fn word(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The 4 bytes of `s` at `at`, as one half word (little-endian).
#[inline]
fn half(s: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_le_bytes(w)
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

    #[test]
    fn short_words_tell_every_byte() {
        // Every string of up to 26 bytes against each of its one-byte
        // changes: the cache's key (words and length) differs, or the
        // string is too long to have one.
        for n in 0..=26 {
            let base: Vec<u8> = (0..n as u8).map(|i| b'a' + i).collect();
            let key = words(&base);
            assert_eq!(key.is_some(), n <= 24);
            for at in 0..n {
                let mut changed = base.clone();
                changed[at] = b'Z';
                if let Some(key) = key {
                    assert_ne!(words(&changed), Some(key), "length {n}, byte {at}");
                }
            }
        }
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

        /// Through a cache, every string gets the interner's own id, at
        /// every length up to and past the cache's 24 bytes, among strings
        /// that differ in one byte or in length only, whatever evicts what.
        #[test]
        fn a_cache_gives_the_interners_ids(texts in proptest::collection::vec("[ab\\x00é]{0,30}", 0..400)) {
            let (mut cached, mut plain) = (Interner::default(), Interner::default());
            let mut cache = ShortCache::default();
            for text in &texts {
                proptest::prop_assert_eq!(cache.intern(&mut cached, text), plain.intern(text));
            }
            for text in &texts {
                proptest::prop_assert_eq!(cache.intern(&mut cached, text), plain.intern(text));
                proptest::prop_assert_eq!(cached.get(plain.intern(text)), text.as_str());
            }
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
