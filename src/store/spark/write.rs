//! The write stage of `ingest --engine spark`: the new rows written to the
//! store's records and index files by the executors, one Spark task per
//! file, as the driver planned them.
//!
//! 1. The driver replays the local ingest's record-id filter on the rows'
//!    places and ids alone (`publish.rs`), which decides every file's rows;
//!    it writes each file's [`Segment`]s to `writes/<task>.segments` and
//!    the list to `writes.json` ([`WritePlan`]).
//! 2. Each task ([`write_task`]) reads only its rows of the checked files
//!    (`rows::RowsFile::read_selected`) and writes
//!    them with the local ingest's writer (`generation::write_files`), so
//!    the files are byte for byte the local engine's. It folds them into
//!    rollup groups, written as the local ingest spills them, with their
//!    strings (`folded/<task>.json`). It reports the names it wrote, the
//!    sum of the rows' amounts and the versions a correction may touch
//!    ([`WriteSummary`]).
//! 3. The driver takes in every task's groups (`Rollups::adopt`: no row is
//!    read there), merges them into each account's rollup files and lists
//!    the files in the manifest.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::generation;
use super::super::index::{self, IndexEntry};
use super::super::ingest::fold::{Rollups, ShardPart};
use super::super::parquet_io::RecordView;
use super::rows::{read_offsets, u32_at, u64_at, CheckedFile, RowsFile};
use crate::checksum::FileSum;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::dedup::{Place, Seen};
use crate::records::Kind;

/// What the driver tells the write stage (`writes.json`).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct WritePlan {
    /// The store, absolute.
    pub(super) store: String,
    pub(super) ingest_id: String,
    /// The check tasks' folder (`checked/`).
    pub(super) checked: String,
    /// Where each task writes its rollup groups (`folded/`).
    pub(super) folded: String,
    /// Sources stored before this ingest: a new row's index entry names
    /// source `base + file`.
    pub(super) base: u32,
    /// The input files' names, by inventory index (each row's
    /// `source_file`).
    pub(super) names: Vec<String>,
    /// The files to write, in the order the manifest lists them.
    pub(super) tasks: Vec<WriteTask>,
}

/// One records file (and its index file) to write.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct WriteTask {
    pub(super) kind: String,
    /// The file's number among this ingest's files.
    pub(super) number: u64,
    /// Its rows.
    pub(super) rows: u64,
    /// Where its rows are ([`read_segments`]).
    pub(super) segments: String,
    /// Positions (in the file) of the rows a correction may touch for
    /// their record id (the store's corrections name it), besides every
    /// row above revision 0.
    pub(super) noted: Vec<u64>,
}

/// A run of rows of one checked file: rows `start..end` of split `split`
/// of input file `index`, the first at line `line` (which the task checks:
/// a row read from the wrong place is an error, not a wrong records file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Segment {
    pub(super) index: u32,
    pub(super) split: u32,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) line: u64,
}

/// Where each field of a segment in a segments file starts: `u32 index,
/// u32 split, u64 start, u64 end, u64 line`, little-endian.
mod field {
    pub(super) const INDEX: usize = 0;
    pub(super) const SPLIT: usize = 4;
    pub(super) const START: usize = 8;
    pub(super) const END: usize = 16;
    pub(super) const LINE: usize = 24;
}
/// Bytes of a segment.
const SEGMENT_BYTES: usize = field::LINE + 8;

/// Writes `segments` to `path`.
pub(super) fn write_segments(path: &Path, segments: &[Segment]) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = std::io::BufWriter::new(file);
    for s in segments {
        let mut bytes = [0u8; SEGMENT_BYTES];
        let mut put = |at: usize, word: &[u8]| bytes[at..at + word.len()].copy_from_slice(word);
        put(field::INDEX, &s.index.to_le_bytes());
        put(field::SPLIT, &s.split.to_le_bytes());
        put(field::START, &s.start.to_le_bytes());
        put(field::END, &s.end.to_le_bytes());
        put(field::LINE, &s.line.to_le_bytes());
        out.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    }
    out.into_inner().map_err(|e| Error::io(path, e.error().to_string()))?;
    Ok(())
}

/// The segments file at `path`.
pub(super) fn read_segments(path: &Path) -> Result<Vec<Segment>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.len() % SEGMENT_BYTES != 0 {
        return Err(Error::io(path, "not a segments file: a cut segment"));
    }
    let segments: Vec<Segment> = bytes
        .chunks_exact(SEGMENT_BYTES)
        .map(|b| Segment {
            index: u32_at(b, field::INDEX),
            split: u32_at(b, field::SPLIT),
            start: u64_at(b, field::START),
            end: u64_at(b, field::END),
            line: u64_at(b, field::LINE),
        })
        .collect();
    if segments.iter().any(|s| s.start >= s.end) {
        return Err(Error::io(path, "not a segments file: an empty segment"));
    }
    Ok(segments)
}

/// What a write task reports (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
pub struct WriteSummary {
    /// The task's position in the plan.
    pub task: usize,
    /// The records file written, relative to the store.
    pub records: String,
    /// Its index file.
    pub index: String,
    /// Rows written.
    pub rows: u64,
    /// The sum of their amounts, in nano-units.
    pub amount: String,
    /// The sums of the two files, as they were written.
    pub sums: Vec<(String, FileSum)>,
    /// The rows a correction may touch, in file order.
    pub touched: Vec<Touched>,
}

/// A version written that a correction may touch.
#[derive(Debug, Serialize, Deserialize)]
pub struct Touched {
    /// Its record id.
    pub record_id: String,
    /// Its revision.
    pub revision: u64,
    /// Its dedup entry: hashes, input file (inventory index) and line.
    pub seen: Seen,
}

/// The Spark task of one file of the plan at `plan` (`writes.json`): its
/// rows read from the checked files and written to the store.
pub fn write_task(plan: &Path, task: usize) -> Result<WriteSummary> {
    let plan_of: WritePlan = super::read_json(plan, "a write plan")?;
    let WritePlan { store, ingest_id, checked, folded, base, names, tasks } = &plan_of;
    let this = tasks.get(task).ok_or_else(|| Error::io(plan, format!("no task {task}")))?;
    let kind =
        Kind::of_name(&this.kind).ok_or_else(|| Error::io(plan, format!("'{}' is not a record kind", this.kind)))?;
    let segments = read_segments(Path::new(&this.segments))?;
    // A file's segments are one after the other (rows are written in file
    // and line order): each checked file's rows are read at once, and
    // only those.
    let mut selected: Vec<(RowsFile, &[Segment])> = Vec::new();
    let mut at = 0;
    while at < segments.len() {
        let first = segments[at];
        let same = segments[at..].iter().take_while(|s| (s.index, s.split) == (first.index, first.split)).count();
        let mine = &segments[at..at + same];
        let runs: Vec<std::ops::Range<usize>> = mine.iter().map(|s| s.start as usize..s.end as usize).collect();
        at += same;
        let files = CheckedFile::in_folder(Path::new(checked), first.index, first.split);
        let offsets = read_offsets(&files.offsets)?;
        selected.push((RowsFile::read_selected(&files.rows, &offsets, &runs)?, mine));
    }
    let rows: usize = selected.iter().map(|(file, _)| file.len()).sum();
    let mut views: Vec<RecordView<'_>> = Vec::with_capacity(rows);
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(rows);
    crate::parts::populate(&mut views);
    crate::parts::populate(&mut entries);
    let mut touched = Vec::new();
    let mut noted = this.noted.iter().peekable();
    for (file, mine) in &selected {
        let mut i = 0;
        for segment in *mine {
            for k in segment.start..segment.end {
                let mut row = file.row(i)?;
                i += 1;
                // Each segment's first row is at the line the plan says.
                if k == segment.start && (row.seen.file, row.seen.line) != (segment.index, segment.line) {
                    return Err(Error::io(
                        &this.segments,
                        format!(
                            "row {k} of checked file {}.{} is line {} of input file #{}, not line {} of #{}",
                            segment.index, segment.split, row.seen.line, row.seen.file, segment.line, segment.index
                        ),
                    ));
                }
                let name = names.get(row.seen.file as usize).ok_or_else(|| {
                    Error::io(plan, format!("a row of input file #{}, which the plan does not name", row.seen.file))
                })?;
                row.view.source_file = name;
                let position = views.len() as u64;
                let is_noted = noted.next_if_eq(&&position).is_some();
                if row.view.record.revision > 0 || is_noted {
                    let (record_id, revision, seen) =
                        (row.view.record.record_id.to_owned(), row.view.record.revision, row.seen);
                    touched.push(Touched { record_id, revision, seen });
                }
                let place = index::pack(Place { file: base + row.seen.file, line: row.seen.line });
                entries.push(IndexEntry { id: row.seen.id, content: row.seen.content, place });
                views.push(row.view);
            }
        }
    }
    if views.len() as u64 != this.rows {
        return Err(Error::io(plan, format!("task {task}: {} rows planned, {} found", this.rows, views.len())));
    }
    // The fold first: its groups are written out (and their memory gone)
    // before the files are encoded.
    let amount: i128 = views.iter().map(|view| i128::from(view.record.amount)).sum();
    let mut rollups = Rollups::default();
    rollups.add_all(&views, |view| view)?;
    let folded = Path::new(folded);
    std::fs::create_dir_all(folded).map_err(|e| Error::io(folded, e))?;
    let parts = rollups.spill_all(folded, &task.to_string())?;
    let parts_path = folded_parts(folded, task);
    let bytes = serde_json::to_vec(&parts).map_err(|e| Error::Internal(format!("folded groups: {e}")))?;
    std::fs::write(&parts_path, bytes).map_err(|e| Error::io(&parts_path, e))?;
    drop(parts);
    let syncer = Syncer::background();
    let written =
        generation::write_files(Path::new(store), ingest_id, this.number, kind, &views[..], &[&entries], &syncer)?;
    drop(views);
    drop(entries);
    drop(selected);
    let mut file_sums = syncer.wait()?;
    let mut sums = Vec::new();
    for name in [&written.records, &written.index] {
        if let Some(sum) = file_sums.remove(&Path::new(store).join(name)) {
            sums.push((name.clone(), sum));
        }
    }
    let (records, index, rows, amount) = (written.records, written.index, this.rows, amount.to_string());
    Ok(WriteSummary { task, records, index, rows, amount, sums, touched })
}

/// Where write task `task` lists its rollup groups' strings and runs
/// (`Rollups::spill_all`).
pub(super) fn folded_parts(folded: &Path, task: usize) -> std::path::PathBuf {
    folded.join(format!("{task}.json"))
}

/// The rollup groups of write task `task`, from `folded`.
pub(super) fn read_folded(folded: &Path, task: usize) -> Result<Vec<ShardPart>> {
    super::read_json(&folded_parts(folded, task), "a task's rollup groups")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments read back as written; a cut or empty one is an error.
    #[test]
    fn segments_read_back_and_damage_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("0.segments");
        let segments = [
            Segment { index: 0, split: 1, start: 0, end: 3, line: 2 },
            Segment { index: 7, split: 0, start: 4096, end: 1 << 40, line: 9000 },
        ];
        write_segments(&path, &segments).expect("written");
        assert_eq!(read_segments(&path).expect("read"), segments);
        let bytes = std::fs::read(&path).expect("bytes");
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("cut");
        assert!(read_segments(&path).is_err(), "a cut segment");
        write_segments(&path, &[Segment { index: 0, split: 0, start: 5, end: 5, line: 7 }]).expect("written");
        assert!(read_segments(&path).is_err(), "an empty segment");
    }
}
