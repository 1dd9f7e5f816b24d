//! The checked-rows file: the valid rows of one input file (or split of
//! one), as a Spark check task hands them to the publish
//! (`checked/<n>.<s>.rows`, scratch in the staging folder, written and
//! read by this binary only).
//!
//! A row is copied out as it is, not encoded: the publish reads every row
//! back once, in order, to write the store's files, so a columnar format
//! (Parquet: dictionary pages, statistics) cost the check tasks more than
//! half their time and the publish a decode. The layout, little-endian:
//!
//! ```text
//! b"TMROWS01"                          magic, 8 bytes
//! rows, each:
//!   u32 size                           bytes of the row after this field
//!   i64 secs, u32 nanos                the timestamp, UTC
//!   u64 units, i64 duration, i64 amount, i64 surcharge   (nano-units)
//!   u32 file, u64 line                 input file index, line or row
//!   u64 id_hi, u64 id_lo, u64 content  dedup hashes (as `Seen`)
//!   u64 revision
//!   8 x (u32 length, UTF-8 bytes)      record_id, auth_id, subaccount,
//!                                      product, type, direction, country,
//!                                      code ("" for none)
//! ```
//!
//! Beside it, `checked/<n>.<s>.places`: each row's line and the bytes of its
//! five text fields that the candidate budget counts (record id, account,
//! subaccount, type, code), two `u64` a row, so that the publish finds
//! where the repeats are and cuts its batches without reading the rows.
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
use crate::records::dedup::Seen;
use crate::records::{Country, Direction, Product};

const MAGIC: &[u8; 8] = b"TMROWS01";
/// Bytes of a row's fixed fields.
const FIXED: usize = 8 + 4 + 8 * 4 + 4 + 8 + 8 * 4;
/// Texts per row.
const TEXTS: usize = 8;

/// The files a check task writes for split `split` of input file `index`
/// (in its output folder, `checked/`: `<index>.<split>.<suffix>`; a file
/// not split is split 0).
#[derive(PartialEq, Eq)]
pub(super) struct CheckedFile {
    /// The input file's index in the inventory.
    pub(super) index: u32,
    /// The split of the file, in line order.
    pub(super) split: u32,
    /// Its valid rows ([`RowsFile`]).
    pub(super) rows: PathBuf,
    /// Their places ([`read_places`]).
    pub(super) places: PathBuf,
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
            entries: file("index"),
            rejects: file("rejects.json"),
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
            row: Vec::with_capacity(256),
        })
    }

    /// Appends one row.
    pub(super) fn push(&mut self, view: &RecordView<'_>, seen: &Seen, revision: u64) -> Result<()> {
        let row = &mut self.row;
        row.clear();
        row.extend_from_slice(&view.secs.to_le_bytes());
        row.extend_from_slice(&view.nanos.to_le_bytes());
        for word in [view.units, view.duration as u64, view.amount as u64, view.surcharge as u64] {
            row.extend_from_slice(&word.to_le_bytes());
        }
        row.extend_from_slice(&seen.file.to_le_bytes());
        for word in [seen.line, seen.id.0, seen.id.1, seen.content, revision] {
            row.extend_from_slice(&word.to_le_bytes());
        }
        let texts = [
            view.record_id,
            view.auth_id,
            view.subaccount,
            view.product.as_str(),
            view.type_,
            view.direction.map_or("", Direction::as_str),
            view.country.as_ref().map_or("", Country::as_str),
            view.code,
        ];
        for text in texts {
            let length = u32::try_from(text.len())
                .map_err(|_| Error::Limit(format!("a text of {} bytes in a checked row", text.len())))?;
            row.extend_from_slice(&length.to_le_bytes());
            row.extend_from_slice(text.as_bytes());
        }
        let size =
            u32::try_from(row.len()).map_err(|_| Error::Limit(format!("a checked row of {} bytes", row.len())))?;
        let path = &self.path;
        self.out.write_all(&size.to_le_bytes()).map_err(|e| Error::io(path, e))?;
        self.out.write_all(row).map_err(|e| Error::io(path, e))?;
        let text = Pending::text_of(view);
        let mut place = [0u8; 16];
        place[..8].copy_from_slice(&seen.line.to_le_bytes());
        place[8..].copy_from_slice(&text.to_le_bytes());
        self.places.write_all(&place).map_err(|e| Error::io(&self.places_path, e))
    }

    /// Writes out what is buffered.
    pub(super) fn finish(self) -> Result<()> {
        let (path, places) = (self.path, self.places_path);
        self.out.into_inner().map_err(|e| Error::io(&path, e.error().to_string()))?;
        self.places.into_inner().map_err(|e| Error::io(&places, e.error().to_string()))?;
        Ok(())
    }
}

/// A row's line and the bytes of its five text fields that the candidate
/// budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RowPlace {
    pub(super) line: u64,
    pub(super) text: u64,
}

/// The places file at `path`, every row's.
pub(super) fn read_places(path: &Path) -> Result<Vec<RowPlace>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.len() % 16 != 0 {
        return Err(Error::io(path, "not a checked-places file: a cut row"));
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    Ok(bytes.chunks_exact(16).map(|p| RowPlace { line: word(&p[..8]), text: word(&p[8..]) }).collect())
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
    /// Its revision.
    pub(super) revision: u64,
}

impl RowsFile {
    /// Reads the file at `path` and finds its rows.
    pub(super) fn read(path: &Path) -> Result<RowsFile> {
        RowsFile::read_into(path, Vec::new())
    }

    /// [`RowsFile::read`] into `bytes` (its memory reused: a fresh buffer
    /// of a batch's size costs its pages' faults and zeroing again). The
    /// rows are found block by block as the file is read, while each block
    /// is in cache: found after the whole read, every row's size was a
    /// wait on memory (a third of the reading thread's time).
    pub(super) fn read_into(path: &Path, mut bytes: Vec<u8>) -> Result<RowsFile> {
        use std::io::Read;
        bytes.clear();
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_or(0, |m| m.len() as usize);
        bytes.reserve(size);
        let mut starts = Vec::with_capacity(size / 128);
        (&mut file).take(MAGIC.len() as u64).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        if bytes != MAGIC {
            return Err(broken(path, "no magic"));
        }
        let mut at = MAGIC.len();
        loop {
            let read = (&mut file).take(SCAN_BLOCK).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
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

    /// The file's buffer, for the next [`RowsFile::read_into`].
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Rows in the file.
    #[cfg(test)]
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
        let u64_at = |at: usize| word::<8>(row, at).map_or(0, u64::from_le_bytes);
        let (secs, nanos) = (u64_at(0) as i64, word::<4>(row, 8).map_or(0, u32::from_le_bytes));
        let (units, duration, amount, surcharge) =
            (u64_at(12), u64_at(20) as i64, u64_at(28) as i64, u64_at(36) as i64);
        let file = word::<4>(row, 44).map_or(0, u32::from_le_bytes);
        let (line, id, content, revision) = (u64_at(48), (u64_at(56), u64_at(64)), u64_at(72), u64_at(80));
        let mut texts = [""; TEXTS];
        let mut at = FIXED;
        for text in &mut texts {
            let length = word::<4>(row, at).map(u32::from_le_bytes).ok_or_else(|| bad("a cut text"))? as usize;
            let bytes = row.get(at + 4..at + 4 + length).ok_or_else(|| bad("a cut text"))?;
            *text = std::str::from_utf8(bytes).map_err(|_| bad("a text that is not UTF-8"))?;
            at += 4 + length;
        }
        if at != row.len() {
            return Err(bad("bytes after its texts"));
        }
        let [record_id, auth_id, subaccount, product, type_, direction, country, code] = texts;
        let product = Product::parse(product).ok_or_else(|| bad("product"))?;
        let direction = match direction {
            "" => None,
            text => Some(Direction::parse(text.as_bytes()).ok_or_else(|| bad("direction"))?),
        };
        let country = match country {
            "" => None,
            text => Some(Country::parse(text.as_bytes()).ok_or_else(|| bad("country"))?),
        };
        let view = RecordView {
            record_id,
            auth_id,
            subaccount,
            secs,
            nanos,
            product,
            type_,
            direction,
            country,
            units,
            duration,
            amount,
            surcharge,
            code,
            source_file: "",
            source_line: line,
        };
        Ok(CheckedRow { view, seen: Seen { id, file, line, content }, revision })
    }
}

/// Bytes [`RowsFile::read_into`] reads at a time: well within a core's
/// cache, so that its rows' sizes are found there.
const SCAN_BLOCK: u64 = 256 << 10;

/// `N` bytes of `bytes` at `at`, if there are.
fn word<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn broken(path: &Path, what: &str) -> Error {
    Error::io(path, format!("not a checked-rows file: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::dedup::id_hash;

    fn view(i: u64) -> RecordView<'static> {
        let ids = ["r0", "rec-1", "é2"];
        RecordView {
            record_id: ids[i as usize % 3],
            auth_id: "MA1",
            subaccount: if i.is_multiple_of(2) { "" } else { "SA1" },
            secs: 1_795_000_000 + i as i64,
            nanos: i as u32,
            product: Product::Voice,
            type_: "pstn",
            direction: if i.is_multiple_of(2) { None } else { Some(Direction::Inbound) },
            country: Country::parse(b"US"),
            units: i,
            duration: -(i as i64),
            amount: i64::MAX - i as i64,
            surcharge: i as i64,
            code: "4000",
            source_file: "",
            source_line: i + 2,
        }
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
            let seen = Seen { id: id_hash(v.record_id), file: 7, line: v.source_line, content: i * 3 };
            writer.push(&v, &seen, i).expect("pushed");
        }
        writer.finish().expect("finished");
        let rows = RowsFile::read(path).expect("read");
        assert_eq!(rows.len(), 5);
        for i in 0..5u64 {
            let row = rows.row(i as usize).expect("a row");
            assert_eq!(format!("{:?}", row.view), format!("{:?}", view(i)));
            assert_eq!((row.seen.file, row.seen.line, row.seen.content, row.revision), (7, i + 2, i * 3, i));
            assert_eq!(row.seen.id, id_hash(view(i).record_id));
        }
        let text: Vec<u64> = read_places(places).expect("places").iter().map(|p| p.text).collect();
        let expected = (0..5).map(|i| {
            let v = view(i);
            [v.record_id, v.auth_id, v.subaccount, v.type_, v.code].iter().map(|t| t.len() as u64).sum::<u64>()
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
}
