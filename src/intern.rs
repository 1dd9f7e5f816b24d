//! The one string interner: distinct strings to dense `u32` ids, in the
//! order first seen, and the ids' ranks in byte order of the strings.
//!
//! The pass ([`crate::aggregate`]), a result's rows
//! ([`crate::aggregate::rows`]) and the store (answers and ingest rollups)
//! key groups by string ids, so that a row costs one hash of each text and
//! no owned copy. They sort by [`ranks`]: ids replaced by ranks order as the
//! strings do, so a sort compares integers, not text.

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// Strings interned to dense `u32` ids, in the order first seen.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    ids: FxHashMap<Box<str>, u32>,
    strings: Vec<Box<str>>,
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
        if let Some(id) = self.ids.get(text) {
            return *id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(text.into());
        self.ids.insert(text.into(), id);
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
        self.ids.get(text).copied()
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
}
