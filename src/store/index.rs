//! The dedup index on disk, split by record-id hash, and the fixed-size
//! filter that lets `ingest` check most rows without reading it.
//!
//! An index file holds the entries (record_id hash, content hash, place) of
//! the rows one ingest step stored, grouped by id-hash partition (the same
//! [`PARTITIONS`] as `records::dedup`), with a table of where each partition
//! starts, so that a reader streams one partition of every file without
//! holding any file whole:
//!
//! ```text
//! b"TMIDX001"                      magic, 8 bytes
//! u64 partitions (P)
//! (P + 1) x u64                    entry offsets: partition p is entries [o[p], o[p+1])
//! entries, 32 bytes each:          id_hi, id_lo, content, place (source << 40 | line)
//! ```
//!
//! All integers little-endian. `source` is the position in
//! [`super::Manifest::sources`] (below 2^24), `line` the line or Parquet row
//! (capped at 2^40 - 1, as in messages).
//!
//! [`Filter`] is a blocked Bloom filter over record-id hashes, one slice per
//! partition, of a size fixed by the caller: a row whose id it has never seen
//! is new for certain; the others ("candidates") are checked exactly against
//! the index later. Its false-positive rate grows with the ids it holds, so a
//! larger store costs more exact checks, never more memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::direct::{AlignedBuffer, DirectReader, DirectWriter};
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::dedup::{IdHash, Place, PARTITIONS};

const MAGIC: &[u8; 8] = b"TMIDX001";
/// An entry's bytes: four words, each little-endian.
const ENTRY_BYTES: usize = 32;
/// Entries read per call while streaming a partition (1 MiB).
const READ_ENTRIES: usize = 32 * 1024;

/// One dedup index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// `record_id` hash, high and low halves.
    pub id: IdHash,
    /// Content hash.
    pub content: u64,
    /// Place: [`pack`]ed (source, line).
    pub place: u64,
}

impl IndexEntry {
    /// The id-hash partition.
    pub fn partition(&self) -> usize {
        self.id.partition()
    }

    /// Its bytes in a file: id_hi, id_lo, content, place.
    fn encode(&self, slot: &mut [u8]) {
        for (word, value) in slot.chunks_exact_mut(8).zip([self.id.hi, self.id.lo, self.content, self.place]) {
            word.copy_from_slice(&value.to_le_bytes());
        }
    }

    /// The entry of [`IndexEntry::encode`]'s bytes.
    fn decode(slot: &[u8]) -> IndexEntry {
        let word = |i: usize| slot.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
        IndexEntry { id: IdHash { hi: word(0), lo: word(1) }, content: word(2), place: word(3) }
    }
}

/// The largest source number a place can hold.
pub const MAX_SOURCE: u32 = (1 << 24) - 1;

/// A place (its file a source number) in one word: the line in the low
/// 40 bits.
pub fn pack(place: Place) -> u64 {
    (place.file as u64) << 40 | place.line.min((1 << 40) - 1)
}

/// The place of a packed one.
pub fn unpack(packed: u64) -> Place {
    Place { file: (packed >> 40) as u32, line: packed & ((1 << 40) - 1) }
}

/// Writes the entries of `parts` (in any order; written by partition, each
/// partition's in their order, part after part) to a new index file at
/// `path`, then handed to `syncer`. (An ingest's batch hands each chunk's
/// entries as they are, not copied into one vector first.) The entries are
/// put in the file's order by a count (one pass over them in their order,
/// not one per partition), as references: 8 bytes an entry held, not the
/// file's 32 (a batch's file is tens of MB, which were zeroed, filled,
/// then copied into the writer's blocks: measure with
/// `bench/ingest-ab.sh`).
pub fn write_index(path: &Path, parts: &[&[IndexEntry]], syncer: &Syncer) -> Result<()> {
    let entries = || parts.iter().flat_map(|part| part.iter());
    let mut offsets = vec![0u64; PARTITIONS + 1];
    for entry in entries() {
        offsets[entry.partition() + 1] += 1;
    }
    for p in 0..PARTITIONS {
        offsets[p + 1] += offsets[p];
    }
    let mut header = Vec::with_capacity(IndexFile::data_start() as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(PARTITIONS as u64).to_le_bytes());
    for offset in &offsets {
        header.extend_from_slice(&offset.to_le_bytes());
    }
    // Around the page cache: read back only by this run's candidate checks,
    // in large reads that go around it too.
    let mut out = DirectWriter::create(path).map_err(|e| Error::io(path, e))?;
    out.write_all(&header).map_err(|e| Error::io(path, e))?;
    if let Some(first) = entries().next() {
        // The entries by partition, each partition's in their order (what
        // a stable sort by partition gives), each put where it goes by
        // the count.
        let mut order = vec![first; offsets[PARTITIONS] as usize];
        let mut next: Vec<usize> = offsets[..PARTITIONS].iter().map(|&o| o as usize).collect();
        for entry in entries() {
            let at = &mut next[entry.partition()];
            order[*at] = entry;
            *at += 1;
        }
        const BLOCK_ENTRIES: usize = 2048;
        let mut block = vec![0u8; BLOCK_ENTRIES * ENTRY_BYTES];
        for run in order.chunks(BLOCK_ENTRIES) {
            for (slot, entry) in block.chunks_exact_mut(ENTRY_BYTES).zip(run) {
                entry.encode(slot);
            }
            out.write_all(&block[..run.len() * ENTRY_BYTES]).map_err(|e| Error::io(path, e))?;
        }
    }
    // Whole before it returns (the run opens it at once), its sum kept.
    let file = out.finish_behind().ready().map_err(|e| Error::io(path, e))?;
    syncer.sync(path, file)
}

/// An index file opened for reading: its partition table.
#[derive(Debug)]
pub struct IndexFile {
    path: PathBuf,
    file: DirectReader,
    offsets: Vec<u64>,
}

impl IndexFile {
    /// Opens the published index file `listed` after checking its bytes
    /// against its sum (read once through the page cache; the ingest then
    /// streams it from there, twice: its filter load and its candidate
    /// checks, where reads around the cache would each take it from the
    /// device again).
    pub(super) fn open_checked(listed: super::Listed<'_>) -> Result<IndexFile> {
        listed.check_file()?;
        let path = listed.path();
        IndexFile::open_reader(&path, DirectReader::open_cached(&path))
    }

    /// Opens an index file, read around the page cache, and reads its
    /// partition table.
    pub fn open(path: &Path) -> Result<IndexFile> {
        IndexFile::open_reader(path, DirectReader::open(path))
    }

    /// Opens a stored index file, read through the page cache (which holds
    /// it when another process checked its sum moments before, as the
    /// Spark job's driver does for its dedup tasks), and reads its
    /// partition table.
    pub fn open_cached(path: &Path) -> Result<IndexFile> {
        IndexFile::open_reader(path, DirectReader::open_cached(path))
    }

    fn open_reader(path: &Path, file: std::io::Result<DirectReader>) -> Result<IndexFile> {
        let file = file.map_err(|e| Error::io(path, e))?;
        let broken = |what: &str| Error::io(path, format!("not a store index file: {what}"));
        let mut buffer = AlignedBuffer::for_reads(Self::data_start() as usize);
        let head = file.read_at(&mut buffer, 0, Self::data_start() as usize).map_err(|_| broken("too short"))?;
        if &head[..8] != MAGIC {
            return Err(broken("bad magic"));
        }
        let partitions = u64::from_le_bytes(head[8..16].try_into().map_err(|_| broken("header"))?);
        if partitions != PARTITIONS as u64 {
            return Err(broken(&format!("{partitions} partitions, this build uses {PARTITIONS}")));
        }
        let offsets: Vec<u64> =
            head[16..].chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect();
        let size = file.len().map_err(|e| Error::io(path, e))?;
        let expected =
            offsets[PARTITIONS].checked_mul(ENTRY_BYTES as u64).and_then(|bytes| bytes.checked_add(Self::data_start()));
        if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) || expected != Some(size) {
            return Err(broken("partition table does not match the file size"));
        }
        Ok(IndexFile { path: path.to_owned(), file, offsets })
    }

    fn data_start() -> u64 {
        16 + (PARTITIONS as u64 + 1) * 8
    }

    /// Entries in the file.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.offsets[PARTITIONS]
    }

    /// Hands every entry of partition `p` to `each`, reading 1 MiB at a time.
    /// An entry whose id hash is not of partition `p` (damage a filter
    /// would hide: the id looked for in another partition) is an error
    /// naming the file.
    pub fn for_each_in(&self, p: usize, mut each: impl FnMut(IndexEntry)) -> Result<()> {
        let (mut next, end) = (self.offsets[p], self.offsets[p + 1]);
        let mut buffer = AlignedBuffer::for_reads(READ_ENTRIES.min((end - next) as usize) * ENTRY_BYTES);
        while next < end {
            let n = READ_ENTRIES.min((end - next) as usize);
            let at = Self::data_start() + next * ENTRY_BYTES as u64;
            let bytes = self.file.read_at(&mut buffer, at, n * ENTRY_BYTES).map_err(|e| Error::io(&self.path, e))?;
            for b in bytes.chunks_exact(ENTRY_BYTES) {
                let entry = IndexEntry::decode(b);
                if entry.partition() != p {
                    let found = entry.partition();
                    return Err(Error::io(
                        &self.path,
                        format!("not a store index file: an entry of partition {found} in partition {p}"),
                    ));
                }
                each(entry);
            }
            next += n as u64;
        }
        Ok(())
    }
}

/// A blocked Bloom filter over record-id hashes: one slice per partition,
/// 64-byte blocks, 8 bits set per id in one block (one cache line per check).
pub struct Filter {
    parts: Vec<Vec<u64>>,
}

/// Words per block (one 64-byte cache line).
const BLOCK_WORDS: usize = 8;

impl Filter {
    /// A filter of about `bytes` bytes in all (at least one block per
    /// partition).
    pub fn new(bytes: u64) -> Filter {
        let blocks = ((bytes / 64) as usize / PARTITIONS).max(1);
        Filter { parts: (0..PARTITIONS).map(|_| vec![0u64; blocks * BLOCK_WORDS]).collect() }
    }

    /// A filter for about `ids` ids: [`Filter::BYTES_PER_ID`] each (at
    /// least [`Filter::MIN_BYTES`]), but never more than `max_bytes`. A
    /// filter sized for what it will hold, rather than always `max_bytes`,
    /// spares the zeroing and page faults of memory no id would reach.
    pub fn for_ids(max_bytes: u64, ids: u64) -> Filter {
        Filter::new(ids.saturating_mul(Filter::BYTES_PER_ID).max(Filter::MIN_BYTES).min(max_bytes))
    }

    /// Bytes per id of [`Filter::for_ids`]: 32 bits, 8 of them set in one
    /// 512-bit block, so about 1 false candidate in 1,000 new ids when the
    /// estimate holds (measured by the tests).
    pub const BYTES_PER_ID: u64 = 4;

    /// The smallest filter [`Filter::for_ids`] makes: 1 MiB.
    pub const MIN_BYTES: u64 = 1 << 20;

    /// Its size in bytes.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|words| words.len() as u64 * 8).sum()
    }

    /// The slices of every partition, for parallel use (partition p holds
    /// only ids of partition p).
    pub fn parts_mut(&mut self) -> impl rayon::iter::IndexedParallelIterator<Item = FilterPart<'_>> {
        use rayon::prelude::*;
        self.parts.par_iter_mut().map(|words| FilterPart { words })
    }

    /// [`FilterPart::check_and_insert`] in `id`'s partition, for a caller
    /// that goes through ids one at a time (the Spark publish replaying the
    /// local ingest's decisions).
    pub fn check_and_insert(&mut self, id: IdHash) -> bool {
        match self.parts.get_mut(id.partition()) {
            Some(words) => FilterPart { words }.check_and_insert(id),
            None => true,
        }
    }

    /// [`Filter::check_and_insert`] of each of `ids` in their order (so
    /// the same answers), the partitions in parallel: whether each may
    /// have been added before.
    pub fn check_and_insert_all(&mut self, ids: &[IdHash]) -> Vec<bool> {
        use rayon::prelude::*;
        let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); PARTITIONS];
        for (k, &id) in ids.iter().enumerate() {
            by_part[id.partition()].push(k as u32);
        }
        // A partition's ids are one in 64 of `ids`, each a miss: each is
        // asked for 2 * AHEAD ids before its turn, its filter block AHEAD
        // before. Far enough that both are in cache at its turn, near
        // enough that neither is evicted before (re-tune with
        // `bench/spark.sh`, whose publish checks its ids here).
        const AHEAD: usize = 8;
        let answers: Vec<Vec<bool>> = self
            .parts_mut()
            .zip(&by_part)
            .map(|(mut part, ks)| {
                let id = |j: usize| ids[ks[j] as usize];
                (0..ks.len())
                    .map(|j| {
                        if let Some(&k) = ks.get(j + 2 * AHEAD) {
                            crate::prefetch::prefetch(&ids[k as usize]);
                        }
                        if j + AHEAD < ks.len() {
                            part.prefetch(id(j + AHEAD));
                        }
                        part.check_and_insert(id(j))
                    })
                    .collect()
            })
            .collect();
        let mut seen = vec![false; ids.len()];
        for (ks, answers) in by_part.iter().zip(answers) {
            for (&k, answer) in ks.iter().zip(answers) {
                seen[k as usize] = answer;
            }
        }
        seen
    }
}

/// The filter slice of one partition.
pub struct FilterPart<'a> {
    words: &'a mut [u64],
}

impl FilterPart<'_> {
    /// The first word of `id`'s block.
    #[inline]
    fn block(&self, id: IdHash) -> usize {
        let blocks = self.words.len() / BLOCK_WORDS;
        // The partition took the top bits of id.hi; the block comes from
        // id.lo (and the bit positions too), the step from the rest of id.hi.
        ((id.lo >> 32) % blocks.max(1) as u64) as usize * BLOCK_WORDS
    }

    /// Starts loading `id`'s block (its [`FilterPart::check_and_insert`]
    /// comes a few ids later: a miss in a filter of megabytes, waited on
    /// otherwise).
    #[inline]
    pub fn prefetch(&self, id: IdHash) {
        let block = self.block(id);
        if let Some(words) = self.words.get(block..block + BLOCK_WORDS) {
            crate::prefetch::prefetch(words);
        }
    }

    /// Adds `id`; returns whether it may have been added before (false:
    /// certainly not).
    pub fn check_and_insert(&mut self, id: IdHash) -> bool {
        let block = self.block(id);
        let (mut position, step) = ((id.lo as u32) & 511, ((id.hi as u32) & 511) | 1);
        let mut seen = true;
        for _ in 0..8 {
            let (word, bit) = (block + (position as usize >> 6), position & 63);
            let mask = 1u64 << bit;
            seen &= self.words[word] & mask != 0;
            self.words[word] |= mask;
            position = (position + step) & 511;
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: u64) -> IdHash {
        let hash = xxhash_rust::xxh3::xxh3_128(&i.to_le_bytes());
        IdHash { hi: (hash >> 64) as u64, lo: hash as u64 }
    }

    #[test]
    fn places_pack_into_one_word_and_back() {
        for (file, line) in [(0, 0), (0, 1), (7, 123_456), (MAX_SOURCE, (1 << 40) - 1)] {
            let place = Place { file, line };
            assert_eq!(unpack(pack(place)), place);
        }
    }

    #[test]
    fn index_files_hand_back_each_partition() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.idx");
        let entries: Vec<IndexEntry> = (0..5000)
            .map(|i| IndexEntry { id: id(i), content: i * 3, place: pack(Place { file: i as u32 % 7, line: i }) })
            .collect();
        write_index(&path, &[&entries[..3], &entries[3..]], &Syncer::at_once()).unwrap();
        // Read around the page cache or through it, the same entries.
        for file in [IndexFile::open(&path).unwrap(), IndexFile::open_cached(&path).unwrap()] {
            assert_eq!(file.len(), 5000);
            // Each partition holds its entries in their order, part after part.
            for p in 0..PARTITIONS {
                let mut read = Vec::new();
                file.for_each_in(p, |e| read.push(e)).unwrap();
                let expected: Vec<IndexEntry> = entries.iter().filter(|e| e.partition() == p).copied().collect();
                assert_eq!(read, expected, "partition {p}");
            }
        }

        let empty = dir.path().join("empty.idx");
        write_index(&empty, &[], &Syncer::at_once()).unwrap();
        assert_eq!(IndexFile::open(&empty).unwrap().len(), 0);
        std::fs::write(&empty, b"TMIDX001").unwrap();
        assert!(IndexFile::open(&empty).is_err());

        // A damaged partition table is an error naming the file, not an
        // overflow: a last offset whose byte size does not fit in u64.
        let damaged = dir.path().join("damaged.idx");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = 16 + PARTITIONS * 8;
        bytes[last..last + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&damaged, &bytes).unwrap();
        let Err(error) = IndexFile::open(&damaged) else { panic!("a damaged table is refused") };
        let error = error.chain();
        assert!(error.contains("damaged.idx") && error.contains("partition table"), "{error}");
    }

    /// The file's bytes are the layout of the module's documentation: the
    /// header, then the entries stably sorted by partition, 32 bytes each
    /// (here across several of the writer's blocks of entries, and parts
    /// of every size, empty ones included).
    #[test]
    fn index_file_bytes_are_the_documented_layout() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<IndexEntry> = (0..9000)
            .map(|i| IndexEntry { id: id(i * 7 + 1), content: i ^ 0x5a5a, place: pack(Place { file: 3, line: i }) })
            .collect();
        for cuts in [vec![0, 9000], vec![0, 0, 1, 2048, 2049, 9000, 9000], vec![0, 4095, 4096, 9000]] {
            let parts: Vec<&[IndexEntry]> = cuts.windows(2).map(|w| &entries[w[0]..w[1]]).collect();
            let path = dir.path().join("x.idx");
            write_index(&path, &parts, &Syncer::at_once()).unwrap();
            let mut sorted = entries.clone();
            sorted.sort_by_key(|e| e.partition());
            let mut expected = MAGIC.to_vec();
            expected.extend_from_slice(&(PARTITIONS as u64).to_le_bytes());
            for p in 0..=PARTITIONS {
                let before = sorted.iter().filter(|e| e.partition() < p).count() as u64;
                expected.extend_from_slice(&before.to_le_bytes());
            }
            for e in &sorted {
                for word in [e.id.hi, e.id.lo, e.content, e.place] {
                    expected.extend_from_slice(&word.to_le_bytes());
                }
            }
            assert!(std::fs::read(&path).unwrap() == expected, "cuts {cuts:?}");
        }
    }

    #[test]
    fn the_filter_never_forgets_and_rarely_errs() {
        let mut filter = Filter::new(64 * PARTITIONS as u64 * 256);
        let mut parts: Vec<FilterPart<'_>> = filter.parts.iter_mut().map(|words| FilterPart { words }).collect();
        let n = 100_000;
        for i in 0..n {
            let id = id(i);
            parts[id.partition()].check_and_insert(id);
        }
        for i in 0..n {
            let id = id(i);
            assert!(parts[id.partition()].check_and_insert(id), "no false negatives");
        }
        // 100,000 ids in 1 MiB: about 84 bits an id.
        let false_positives = (n..2 * n).filter(|&i| parts[id(i).partition()].check_and_insert(id(i))).count() as u64;
        assert!(false_positives < n / 1000, "{false_positives} false positives");
    }

    /// A filter sized for its ids errs as rarely as its size promises (and
    /// never forgets); its size is capped by the budget.
    #[test]
    fn a_filter_sized_for_its_ids_keeps_its_promise() {
        let n = 1_000_000;
        let mut filter = Filter::for_ids(u64::MAX, n);
        // Whole blocks in every partition: at most one block short each.
        let asked = n * Filter::BYTES_PER_ID;
        assert!(filter.bytes() <= asked && filter.bytes() > asked - 64 * PARTITIONS as u64, "{}", filter.bytes());
        for i in 0..n {
            filter.check_and_insert(id(i));
        }
        assert!((0..n).all(|i| filter.check_and_insert(id(i))), "no false negatives");
        let false_positives = (n..2 * n).filter(|&i| filter.check_and_insert(id(i))).count() as u64;
        // The documented rate is about 1 in 1,000; allow some slack.
        assert!(false_positives < n / 500, "{false_positives} false positives in {n}");

        assert_eq!(Filter::for_ids(u64::MAX, 10).bytes(), Filter::MIN_BYTES);
        assert_eq!(Filter::for_ids(4 << 20, u64::MAX).bytes(), 4 << 20);
    }

    /// Checking ids all at once (the partitions in parallel) answers as
    /// checking them one at a time in their order, repeats within the
    /// ids and false positives of a small filter included.
    #[test]
    fn checking_all_at_once_answers_as_one_at_a_time() {
        let ids: Vec<IdHash> = (0..50_000u64).map(|i| id(i % 37_000)).collect();
        let (mut one, mut all) = (Filter::new(16 << 10), Filter::new(16 << 10));
        for i in 0..5_000 {
            one.check_and_insert(id(100_000 + i));
            all.check_and_insert(id(100_000 + i));
        }
        let expected: Vec<bool> = ids.iter().map(|&id| one.check_and_insert(id)).collect();
        assert!(expected.iter().filter(|&&seen| seen).count() > 13_000, "repeats and false positives");
        assert_eq!(all.check_and_insert_all(&ids), expected);
        assert_eq!(all.parts, one.parts);
    }
}
