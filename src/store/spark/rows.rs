//! The checked-rows file: the valid rows of one input file (or split of
//! one), as a Spark check task hands them to the publish
//! (`checked/<n>.<s>.rows`, scratch in the staging folder, written and
//! read by this binary only).
//!
//! A row is copied out as it is, not encoded: the write tasks read each
//! row back once, in order, to write the store's files, so a columnar format
//! (Parquet: dictionary pages, statistics) would cost the check tasks more
//! than half their time and the publish a decode. The closed vocabularies are a
//! code each and a text's length is a byte: every byte of these files is
//! written to the page cache and read back, and past a fifth of memory the
//! kernel writes them to disk while the tasks wait. The layout,
//! little-endian:
//!
//! ```text
//! b"TMROWS02"                          magic, 8 bytes
//! rows, each:
//!   u32 size                           bytes of the row after this field
//!   i64 secs, u32 nanos                the timestamp, UTC
//!   u64 units, i64 duration, i64 amount, i64 surcharge   (nano-units)
//!   u32 file, u64 line                 input file index, line or row
//!   u64 id_hi, u64 id_lo, u64 content  dedup hashes (as `Seen`)
//!   u64 revision
//!   [u8; 4] closed                     product, direction, country
//!                                      (`records::Closed::codes`)
//!   5 x (length, UTF-8 bytes)          record_id, auth_id, subaccount,
//!                                      type, code ("" for none); the
//!                                      length a byte, or 255 then a u32
//! ```
//!
//! Beside it, `checked/<n>.<s>.places`: each row's line, the bytes of its
//! five text fields that the candidate budget counts (record id, account,
//! subaccount, type, code) and its id hash, four `u64` a row, so that the
//! driver finds where the repeats are and replays the record-id filter
//! without reading the rows; and `checked/<n>.<s>.offsets`: where every
//! [`OFFSET_EVERY`]th row starts (a `u64` each), so that a write task reads
//! only the stretch of the file that holds its rows.
//!
//! The reader checks every length against the file and every text for
//! UTF-8 and its type, so a damaged file is an error naming it, never a
//! panic.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::super::ingest::dedup::Pending;
use super::super::parquet_io::RecordView;
use crate::error::{Error, Result};
use crate::records::dedup::{IdHash, Seen};
use crate::records::{Closed, Record};
use crate::time::Instant;

const MAGIC: &[u8; 8] = b"TMROWS02";
/// Where each fixed field of a row starts, after its size: the layout
/// above, which the writer and the reader both place by these.
mod field {
    pub(super) const SECS: usize = 0;
    pub(super) const NANOS: usize = SECS + 8;
    pub(super) const UNITS: usize = NANOS + 4;
    pub(super) const DURATION: usize = UNITS + 8;
    pub(super) const AMOUNT: usize = DURATION + 8;
    pub(super) const SURCHARGE: usize = AMOUNT + 8;
    pub(super) const FILE: usize = SURCHARGE + 8;
    pub(super) const LINE: usize = FILE + 4;
    pub(super) const ID_HI: usize = LINE + 8;
    pub(super) const ID_LO: usize = ID_HI + 8;
    pub(super) const CONTENT: usize = ID_LO + 8;
    pub(super) const REVISION: usize = CONTENT + 8;
    pub(super) const CLOSED: usize = REVISION + 8;
}
/// Bytes of a row's fixed fields: the numbers, then the codes.
const FIXED: usize = field::CLOSED + CODES;
/// Bytes of the product, direction and country codes.
const CODES: usize = 4;
/// Texts per row.
const TEXTS: usize = 5;
/// A text's length byte that says a `u32` length follows.
const LONG_TEXT: u8 = u8::MAX;
/// Rows between two offsets of the `.offsets` file: a write task reads at
/// most this many rows more than it writes, at each end of a stretch.
pub(super) const OFFSET_EVERY: usize = 4096;
/// Where each field of a row's place starts (four `u64`).
mod place {
    pub(super) const LINE: usize = 0;
    pub(super) const TEXT: usize = 8;
    pub(super) const ID_HI: usize = 16;
    pub(super) const ID_LO: usize = 24;
}
/// Bytes of a row's place.
const PLACE_BYTES: usize = place::ID_LO + 8;

/// The files a check task writes for split `split` of input file `index`
/// (in its output folder, `checked/`: `<index>.<split>.<suffix>`; a file
/// not split is split 0).
#[derive(Clone, PartialEq, Eq)]
pub(super) struct CheckedFile {
    /// The input file's index in the inventory.
    pub(super) index: u32,
    /// The split of the file, in line order.
    pub(super) split: u32,
    /// Its valid rows ([`RowsFile`]).
    pub(super) rows: PathBuf,
    /// Their places ([`read_places`]).
    pub(super) places: PathBuf,
    /// Where every [`OFFSET_EVERY`]th row starts ([`read_offsets`]).
    pub(super) offsets: PathBuf,
    /// Their dedup entries (an index file, by id-hash partition).
    pub(super) entries: PathBuf,
    /// Its rows set aside (`--on-bad-row set-aside`), as JSON.
    pub(super) rejects: PathBuf,
}

impl CheckedFile {
    /// The files of split `split` of input file `index` in `folder`.
    pub(super) fn in_folder(folder: &Path, index: u32, split: u32) -> CheckedFile {
        let file = |suffix: &str| folder.join(format!("{index}.{split}.{suffix}"));
        CheckedFile {
            index,
            split,
            rows: file("rows"),
            places: file("places"),
            offsets: file("offsets"),
            entries: file("index"),
            rejects: file("rejects.csv"),
        }
    }

    /// The splits of each input file that wrote anything to `folder`, by
    /// input file index, each file's in split (so line) order.
    pub(super) fn all_in(folder: &Path) -> Result<BTreeMap<u32, Vec<CheckedFile>>> {
        let mut found: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        let entries = std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(folder, e))?;
            let name = entry.file_name();
            let mut parts = name.to_str().unwrap_or_default().splitn(3, '.');
            let (index, split) = (parts.next().map(str::parse::<u32>), parts.next().map(str::parse::<u32>));
            if let (Some(Ok(index)), Some(Ok(split))) = (index, split) {
                found.entry(index).or_default().insert(split);
            }
        }
        Ok(found
            .into_iter()
            .map(|(index, splits)| {
                (index, splits.into_iter().map(|s| CheckedFile::in_folder(folder, index, s)).collect())
            })
            .collect())
    }
}

/// Writes a checked-rows file and its places.
pub(super) struct RowsWriter {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    places_path: PathBuf,
    places: std::io::BufWriter<std::fs::File>,
    offsets_path: PathBuf,
    /// Where every [`OFFSET_EVERY`]th row starts.
    offsets: Vec<u64>,
    /// Rows and bytes written.
    rows: usize,
    bytes: u64,
    row: Vec<u8>,
}

impl RowsWriter {
    /// New, empty files for `checked`'s rows and places.
    pub(super) fn create(checked: &CheckedFile) -> Result<RowsWriter> {
        let (path, places) = (&checked.rows, &checked.places);
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        out.write_all(MAGIC).map_err(|e| Error::io(path, e))?;
        let file = std::fs::File::create(places).map_err(|e| Error::io(places, e))?;
        let places_out = std::io::BufWriter::with_capacity(1 << 16, file);
        Ok(RowsWriter {
            path: path.to_owned(),
            out,
            places_path: places.to_owned(),
            places: places_out,
            offsets_path: checked.offsets.clone(),
            offsets: Vec::new(),
            rows: 0,
            bytes: MAGIC.len() as u64,
            row: Vec::with_capacity(256),
        })
    }

    /// Appends one row.
    pub(super) fn push(&mut self, view: &RecordView<'_>, seen: &Seen) -> Result<()> {
        let mut fixed = [0u8; FIXED];
        let mut put = |at: usize, bytes: &[u8]| fixed[at..at + bytes.len()].copy_from_slice(bytes);
        put(field::SECS, &view.record.timestamp.secs.to_le_bytes());
        put(field::NANOS, &view.record.timestamp.nanos.to_le_bytes());
        put(field::UNITS, &view.record.units.to_le_bytes());
        put(field::DURATION, &view.record.duration.to_le_bytes());
        put(field::AMOUNT, &view.record.amount.to_le_bytes());
        put(field::SURCHARGE, &view.record.surcharge.to_le_bytes());
        put(field::FILE, &seen.file.to_le_bytes());
        put(field::LINE, &seen.line.to_le_bytes());
        put(field::ID_HI, &seen.id.hi.to_le_bytes());
        put(field::ID_LO, &seen.id.lo.to_le_bytes());
        put(field::CONTENT, &seen.content.to_le_bytes());
        put(field::REVISION, &view.record.revision.to_le_bytes());
        put(
            field::CLOSED,
            &Closed { product: view.record.product, direction: view.record.direction, country: view.record.country }
                .codes(),
        );
        let row = &mut self.row;
        row.clear();
        row.extend_from_slice(&fixed);
        for text in
            [view.record.record_id, view.record.auth_id, view.record.subaccount, view.record.type_, view.record.code]
        {
            match u8::try_from(text.len()) {
                Ok(length) if length < LONG_TEXT => row.push(length),
                _ => {
                    let length = u32::try_from(text.len())
                        .map_err(|_| Error::Limit(format!("a text of {} bytes in a checked row", text.len())))?;
                    row.push(LONG_TEXT);
                    row.extend_from_slice(&length.to_le_bytes());
                }
            }
            row.extend_from_slice(text.as_bytes());
        }
        let size =
            u32::try_from(row.len()).map_err(|_| Error::Limit(format!("a checked row of {} bytes", row.len())))?;
        let path = &self.path;
        if self.rows.is_multiple_of(OFFSET_EVERY) {
            self.offsets.push(self.bytes);
        }
        self.out.write_all(&size.to_le_bytes()).map_err(|e| Error::io(path, e))?;
        self.out.write_all(row).map_err(|e| Error::io(path, e))?;
        self.rows += 1;
        self.bytes += 4 + u64::from(size);
        let text = Pending::text_of(view);
        let mut bytes = [0u8; PLACE_BYTES];
        for (at, word) in
            [(place::LINE, seen.line), (place::TEXT, text), (place::ID_HI, seen.id.hi), (place::ID_LO, seen.id.lo)]
        {
            bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
        }
        self.places.write_all(&bytes).map_err(|e| Error::io(&self.places_path, e))
    }

    /// Writes out what is buffered, and the offsets.
    pub(super) fn finish(self) -> Result<()> {
        let (path, places) = (self.path, self.places_path);
        self.out.into_inner().map_err(|e| Error::io(&path, e.error().to_string()))?;
        self.places.into_inner().map_err(|e| Error::io(&places, e.error().to_string()))?;
        let offsets: Vec<u8> = self.offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(&self.offsets_path, offsets).map_err(|e| Error::io(&self.offsets_path, e))
    }
}

/// A row's line, the bytes of its five text fields that the candidate
/// budget counts, and its id hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RowPlace {
    pub(super) line: u64,
    pub(super) text: u64,
    pub(super) id: IdHash,
}

/// The places file at `path`, every row's.
pub(super) fn read_places(path: &Path) -> Result<Vec<RowPlace>> {
    use std::io::Read;
    let cut = || Error::io(path, "not a checked-places file: a cut row");
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size % PLACE_BYTES as u64 != 0 {
        return Err(cut());
    }
    // Read through a small buffer: the file whole beside its places would
    // be twice the memory, each page of it a fault.
    let mut file = std::io::BufReader::with_capacity(1 << 20, file);
    let rows = (size / PLACE_BYTES as u64) as usize;
    let mut places = Vec::with_capacity(rows);
    let mut p = [0u8; PLACE_BYTES];
    for _ in 0..rows {
        file.read_exact(&mut p).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => cut(),
            _ => Error::io(path, e),
        })?;
        places.push(RowPlace {
            line: u64_at(&p, place::LINE),
            text: u64_at(&p, place::TEXT),
            id: IdHash { hi: u64_at(&p, place::ID_HI), lo: u64_at(&p, place::ID_LO) },
        });
    }
    Ok(places)
}

/// The offsets file at `path`: where every [`OFFSET_EVERY`]th row starts.
pub(super) fn read_offsets(path: &Path) -> Result<Vec<u64>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.len() % 8 != 0 {
        return Err(Error::io(path, "not a checked-offsets file: a cut offset"));
    }
    Ok(bytes.chunks_exact(8).map(|o| u64_at(o, 0)).collect())
}

/// A checked-rows file, read whole.
pub(super) struct RowsFile {
    path: PathBuf,
    bytes: Vec<u8>,
    /// Where each row starts (after its size).
    starts: Vec<usize>,
}

/// One row of a [`RowsFile`].
pub(super) struct CheckedRow<'a> {
    /// The row as a record (its `source_file` empty: the caller names it).
    pub(super) view: RecordView<'a>,
    /// Its dedup entry.
    pub(super) seen: Seen,
}

impl RowsFile {
    /// Reads the file at `path` and finds its rows.
    pub(super) fn read(path: &Path) -> Result<RowsFile> {
        RowsFile::read_stretch(path, MAGIC.len() as u64, None, Vec::new())
    }

    /// The rows `runs` name (ranges of rows of the file at `path`, in
    /// order), and only those: row `k` of the result is the `k`th row
    /// named. The file is read [`SELECT_BLOCKS`] blocks of
    /// [`OFFSET_EVERY`] rows at a time, from the offsets around the rows
    /// (`offsets`, [`read_offsets`]), so memory holds the rows named and
    /// one such stretch, however scattered the rows are.
    pub(super) fn read_selected(path: &Path, offsets: &[u64], runs: &[std::ops::Range<usize>]) -> Result<RowsFile> {
        RowsFile::read_selected_by(path, offsets, runs, SELECT_BLOCKS)
    }

    /// [`RowsFile::read_selected`], `blocks` blocks at a time.
    fn read_selected_by(
        path: &Path,
        offsets: &[u64],
        runs: &[std::ops::Range<usize>],
        blocks: usize,
    ) -> Result<RowsFile> {
        if runs.iter().any(|run| run.start > run.end) {
            return Err(broken(path, "a run of rows that ends before it starts"));
        }
        let size = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
        // No more rows than the file can hold, whatever the runs say.
        let named = runs.iter().fold(0usize, |n, run| n.saturating_add(run.len())).min(size as usize / FIXED + 1);
        let mut out = RowsFile { path: path.to_owned(), bytes: MAGIC.to_vec(), starts: Vec::with_capacity(named) };
        // Room for the rows named at the file's mean row size (the offsets
        // tell it), a tenth more: mostly no copy as they are added. Its
        // pages, and those of the one stretch buffer, in one call each.
        let rows = (offsets.len() * OFFSET_EVERY).max(1) as u64;
        let mean = size / rows + 1;
        out.bytes.reserve((named as u64 * mean / 10 * 11).min(size) as usize);
        crate::parts::populate(&mut out.bytes);
        let mut buffer = Vec::new();
        let mut at = 0;
        // The first row of `runs[at]` not copied yet.
        let mut next = runs.first().map_or(0, |run| run.start);
        while at < runs.len() {
            let block = next / OFFSET_EVERY;
            let from = *offsets.get(block).ok_or_else(|| broken(path, "no offset of a row it holds"))?;
            let to = offsets.get(block + blocks).copied();
            let stretch = RowsFile::read_stretch(path, from, to, std::mem::take(&mut buffer))?;
            let (first, end) = (block * OFFSET_EVERY, (block + blocks) * OFFSET_EVERY);
            // A stretch between two offsets holds exactly their rows: an
            // offset that is some other row's start is caught here.
            if to.is_some() && stretch.starts.len() != end - first {
                return Err(broken(path, "offsets that do not match its rows"));
            }
            while at < runs.len() && next < end {
                let until = runs[at].end.min(end);
                for row in next..until {
                    let bytes = stretch.bytes_of(row - first)?;
                    out.bytes.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    out.starts.push(out.bytes.len());
                    out.bytes.extend_from_slice(bytes);
                }
                next = until;
                if next == runs[at].end {
                    at += 1;
                    if let Some(run) = runs.get(at) {
                        if run.start < next {
                            return Err(broken(path, "rows asked for out of order"));
                        }
                        next = run.start;
                    }
                }
            }
            buffer = stretch.bytes;
        }
        Ok(out)
    }

    /// The rows of the file at `path` from byte `from` (where a row
    /// starts) to byte `to` (where one starts, or the end). Their sizes are
    /// found block by block as the file is read, while each block is in
    /// cache: found after the whole read, every row's size would be a wait
    /// on memory (a third of the reading thread's time).
    fn read_stretch(path: &Path, from: u64, to: Option<u64>, mut bytes: Vec<u8>) -> Result<RowsFile> {
        use std::io::{Read, Seek};
        bytes.clear();
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_or(0, |m| m.len());
        let to = to.unwrap_or(size);
        if from < MAGIC.len() as u64 || to < from || to > size {
            return Err(broken(path, "offsets outside the file"));
        }
        let length = (to - from) as usize;
        bytes.reserve(MAGIC.len() + length);
        // Its pages in one call, not a fault each as the read fills them.
        crate::parts::populate(&mut bytes);
        let mut starts = Vec::with_capacity(length / 128);
        (&mut file).take(MAGIC.len() as u64).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        if bytes != MAGIC {
            return Err(broken(path, "no magic"));
        }
        file.seek(std::io::SeekFrom::Start(from)).map_err(|e| Error::io(path, e))?;
        let mut stretch = file.take(to - from);
        let mut at = MAGIC.len();
        loop {
            let read = (&mut stretch).take(SCAN_BLOCK).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
            while let Some(size) = word::<4>(&bytes, at).map(u32::from_le_bytes) {
                let start = at + 4;
                at = start.checked_add(size as usize).ok_or_else(|| broken(path, "a cut row"))?;
                starts.push(start);
            }
            if read == 0 {
                break;
            }
        }
        if at != bytes.len() {
            return Err(broken(path, "a cut row"));
        }
        Ok(RowsFile { path: path.to_owned(), bytes, starts })
    }

    /// Rows in the file.
    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The bytes of row `i`, at least its fixed fields.
    fn bytes_of(&self, i: usize) -> Result<&[u8]> {
        let bad = |what: &str| broken(&self.path, &format!("row {i}: {what}"));
        let start = *self.starts.get(i).ok_or_else(|| bad("no such row"))?;
        let end = self.starts.get(i + 1).map_or(self.bytes.len(), |next| next - 4);
        let row = self.bytes.get(start..end).ok_or_else(|| bad("no such row"))?;
        if row.len() < FIXED {
            return Err(bad("too short"));
        }
        Ok(row)
    }

    /// Row `i`.
    pub(super) fn row(&self, i: usize) -> Result<CheckedRow<'_>> {
        let bad = |what: &str| broken(&self.path, &format!("row {i}: {what}"));
        let row = self.bytes_of(i)?;
        let at64 = |at: usize| u64_at(row, at);
        let (secs, nanos) = (at64(field::SECS) as i64, u32_at(row, field::NANOS));
        let (units, duration) = (at64(field::UNITS), at64(field::DURATION) as i64);
        let (amount, surcharge) = (at64(field::AMOUNT) as i64, at64(field::SURCHARGE) as i64);
        let (file, line) = (u32_at(row, field::FILE), at64(field::LINE));
        let id = IdHash { hi: at64(field::ID_HI), lo: at64(field::ID_LO) };
        let (content, revision) = (at64(field::CONTENT), at64(field::REVISION));
        let codes = word::<CODES>(row, field::CLOSED).ok_or_else(|| bad("a cut row"))?;
        let Closed { product, direction, country } =
            Closed::from_codes(codes).ok_or_else(|| bad("a product, direction or country code"))?;
        let mut texts = [""; TEXTS];
        let mut at = FIXED;
        for text in &mut texts {
            let cut = || bad("a cut text");
            let mut length = usize::from(*row.get(at).ok_or_else(cut)?);
            at += 1;
            if length == usize::from(LONG_TEXT) {
                length = word::<4>(row, at).map(u32::from_le_bytes).ok_or_else(cut)? as usize;
                at += 4;
            }
            let bytes = row.get(at..at.checked_add(length).ok_or_else(cut)?).ok_or_else(cut)?;
            *text = std::str::from_utf8(bytes).map_err(|_| bad("a text that is not UTF-8"))?;
            at += length;
        }
        if at != row.len() {
            return Err(bad("bytes after its texts"));
        }
        let [record_id, auth_id, subaccount, type_, code] = texts;
        let timestamp = Instant { secs, nanos };
        let record = Record {
            record_id,
            auth_id,
            subaccount,
            timestamp,
            product,
            type_,
            direction,
            country,
            units,
            duration,
            amount,
            surcharge,
            code,
            revision,
        };
        let view = RecordView { record, source_file: "", source_line: line };
        Ok(CheckedRow { view, seen: Seen { id, file, line, content } })
    }
}

/// Blocks of [`OFFSET_EVERY`] rows [`RowsFile::read_selected`] reads at
/// a time (about 50 MB of the benchmark's rows): enough that a write
/// task's reads are few and long, little beside the rows it holds.
/// Re-tune with `bench/spark.sh` (the write stage's time and memory).
const SELECT_BLOCKS: usize = 64;

/// Bytes [`RowsFile::read_stretch`] reads at a time: well within a core's
/// cache, so that its rows' sizes are found there.
const SCAN_BLOCK: u64 = 256 << 10;

/// `N` bytes of `bytes` at `at`, if there are.
fn word<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The little-endian `u32` of `bytes` at `at` (0 past their end: a
/// caller checks the length first).
pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    word::<4>(bytes, at).map_or(0, u32::from_le_bytes)
}

/// The little-endian `u64` of `bytes` at `at` (0 past their end).
pub(super) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    word::<8>(bytes, at).map_or(0, u64::from_le_bytes)
}

fn broken(path: &Path, what: &str) -> Error {
    Error::io(path, format!("not a checked-rows file: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::dedup::id_hash;
    use crate::records::{Country, Direction, Product};

    /// Row `i`: every product, direction and country code in turn, and
    /// texts of one-byte and of long lengths, revision `i`.
    fn view(i: u64) -> RecordView<'static> {
        static IDS: std::sync::LazyLock<[String; 5]> = std::sync::LazyLock::new(|| {
            ["r0".to_owned(), "rec-1".to_owned(), "é".repeat(200), "x".repeat(254), "y".repeat(255)]
        });
        let directions = [None, Some(Direction::Inbound), Some(Direction::Outbound)];
        let record = Record {
            record_id: IDS[i as usize % 5].as_str(),
            auth_id: "MA1",
            subaccount: if i.is_multiple_of(2) { "" } else { "SA1" },
            timestamp: Instant { secs: 1_795_000_000 + i as i64, nanos: i as u32 },
            product: Product::ALL[i as usize % Product::ALL.len()],
            type_: "pstn",
            direction: directions[i as usize % 3],
            country: if i % 4 == 3 { None } else { Country::parse(b"US") },
            units: i,
            duration: -(i as i64),
            amount: i64::MAX - i as i64,
            surcharge: i as i64,
            code: "4000",
            revision: i,
        };
        RecordView { record, source_file: "", source_line: i + 2 }
    }

    /// Rows read back are the rows written, with their places; a file cut
    /// anywhere or with any byte changed is refused or read as rows, never
    /// a panic.
    #[test]
    fn rows_read_back_as_written_and_damage_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let checked = CheckedFile::in_folder(dir.path(), 0, 0);
        let (path, places) = (&checked.rows, &checked.places);
        let mut writer = RowsWriter::create(&checked).expect("created");
        for i in 0..5u64 {
            let v = view(i);
            let seen = Seen { id: id_hash(v.record.record_id), file: 7, line: v.source_line, content: i * 3 };
            writer.push(&v, &seen).expect("pushed");
        }
        writer.finish().expect("finished");
        let rows = RowsFile::read(path).expect("read");
        assert_eq!(rows.len(), 5);
        for i in 0..5u64 {
            let row = rows.row(i as usize).expect("a row");
            assert_eq!(format!("{:?}", row.view), format!("{:?}", view(i)));
            assert_eq!((row.seen.file, row.seen.line, row.seen.content), (7, i + 2, i * 3));
            assert_eq!(row.seen.id, id_hash(view(i).record.record_id));
        }
        let text: Vec<u64> = read_places(places).expect("places").iter().map(|p| p.text).collect();
        let expected = (0..5).map(|i| {
            let v = view(i);
            [v.record.record_id, v.record.auth_id, v.record.subaccount, v.record.type_, v.record.code]
                .iter()
                .map(|t| t.len() as u64)
                .sum::<u64>()
        });
        assert_eq!(text, expected.collect::<Vec<_>>());

        let bytes = std::fs::read(path).expect("bytes");
        let damaged = dir.path().join("damaged.rows");
        let every_row = |file: &RowsFile| (0..5).filter_map(|i| file.row(i).ok()).count();
        for cut in 0..bytes.len() {
            std::fs::write(&damaged, &bytes[..cut]).expect("written");
            if let Ok(file) = RowsFile::read(&damaged) {
                assert!(every_row(&file) < 5, "cut at {cut}: every row read");
            }
        }
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x5a;
            std::fs::write(&damaged, &changed).expect("written");
            if let Ok(file) = RowsFile::read(&damaged) {
                every_row(&file);
            }
        }
    }

    /// Rows read through the offsets are the rows asked for, each the row
    /// the whole file holds there; offsets that are not where
    /// rows start are an error, never a panic.
    #[test]
    fn rows_read_by_selection_are_the_rows_of_the_whole_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let checked = CheckedFile::in_folder(dir.path(), 0, 0);
        let mut writer = RowsWriter::create(&checked).expect("created");
        let n = 3 * OFFSET_EVERY + 17;
        for i in 0..n as u64 {
            let v = view(i);
            let seen = Seen { id: id_hash(v.record.record_id), file: 1, line: v.source_line, content: i };
            writer.push(&v, &seen).expect("pushed");
        }
        writer.finish().expect("finished");
        let whole = RowsFile::read(&checked.rows).expect("read");
        let offsets = read_offsets(&checked.offsets).expect("offsets");
        assert_eq!(offsets.len(), 4);
        let places = read_places(&checked.places).expect("places");
        assert_eq!(places.len(), n);
        assert!(places.iter().enumerate().all(|(i, p)| p.id == whole.row(i).expect("a row").seen.id));
        let same = |a: CheckedRow<'_>, b: CheckedRow<'_>| {
            format!("{:?} {:?}", a.view, a.seen) == format!("{:?} {:?}", b.view, b.seen)
        };
        let sets: [&[(usize, usize)]; 5] = [
            &[(0, 1)],
            &[(0, n)],
            &[(4095, 4097), (5000, 9000), (n - 1, n)],
            &[(3, 4), (8192, 12288), (12289, 12290)],
            &[(1, 2), (300_000 % n, 300_000 % n + 1)],
        ];
        // By one and two blocks at a time, runs cross from one stretch to
        // the next.
        for (runs, blocks) in sets.iter().flat_map(|runs| [1, 2, SELECT_BLOCKS].map(|blocks| (runs, blocks))) {
            let runs: Vec<std::ops::Range<usize>> = runs.iter().map(|&(a, b)| a..b).collect();
            let selected = RowsFile::read_selected_by(&checked.rows, &offsets, &runs, blocks).expect("rows");
            let named: Vec<usize> = runs.iter().flat_map(|run| run.clone()).collect();
            assert_eq!(selected.starts.len(), named.len(), "{runs:?} by {blocks}");
            for (k, &i) in named.iter().enumerate() {
                assert!(same(selected.row(k).expect("a row"), whole.row(i).expect("a row")), "row {i} by {blocks}");
            }
        }
        // An offset moved to another row's start is refused.
        let mut shifted = offsets.clone();
        shifted[1] = whole.starts[OFFSET_EVERY + 1] as u64 - 4;
        let across = 4000..4200;
        let read = RowsFile::read_selected_by(&checked.rows, &shifted, std::slice::from_ref(&across), 1);
        assert!(read.is_err(), "a shifted offset");
        let (first, past_end) = (0..1, 0..n + 1);
        // Offsets into the middle of a row, or past the file.
        for bad in [vec![9, 100], vec![8, 3], vec![u64::MAX]] {
            if let Ok(file) = RowsFile::read_selected(&checked.rows, &bad, std::slice::from_ref(&first)) {
                let _ = file.row(0);
            }
        }
        assert!(
            RowsFile::read_selected(&checked.rows, &offsets, std::slice::from_ref(&past_end)).is_err(),
            "rows past the end"
        );
        assert!(RowsFile::read_selected(&checked.rows, &offsets, &[5..6, 2..3]).is_err(), "rows out of order");
    }
}
