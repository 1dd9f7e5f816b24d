//! The driver side of `ingest --engine spark` once the job has
//! deduplicated the rows:
//!
//! 1. [`KindWrites::plan`]: each kind's new rows cut into the local
//!    ingest's records files, from their places and ids alone (its
//!    batches, and its record-id filter replayed), handed to the job as
//!    its write plan;
//! 2. the write tasks' results: the files' names and sums, the sums of
//!    the amounts, the versions a correction may touch, and each task's
//!    rollup groups (`Rollups::adopt`);
//! 3. counts checked against the job's, set-aside rows, voids and
//!    corrections, the rollup merge and the manifest swap, as the local
//!    ingest does them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::super::generation::{self, Prepared};
use super::super::ingest::batches;
use super::super::ingest::chunk::NewVersion;
use super::super::ingest::corrections::{self, RunVersion};
use super::super::ingest::dedup::Pending;
use super::super::ingest::fold::Rollups;
use super::super::ingest::options::{IngestOptions, IngestProgress, IngestReport};
use super::super::ingest::{self};
use super::super::parquet_io::{polars_error, read_frame};
use super::super::{KindFiles, Manifest};
use super::dedup::{First, REPEAT_COLUMNS};
use super::filters::StoredFilters;
use super::rows::{read_places, CheckedFile, RowPlace, RowsFile};
use super::write::{read_folded, write_segments, Segment, WritePlan, WriteSummary, WriteTask};
use super::{path_text, Job, JobError, JobResult, KindResult};
use crate::aggregate::Tally;
use crate::durable::Syncer;
use crate::error::{BadRecord, Error, Location, Result};
use crate::money::Amount;
use crate::records::dedup::{IdHash, Place};
use crate::records::files::{Format, InputFile, Inventory};
use crate::records::Kind;

/// Turns the job's result into a published generation (or its error).
pub(super) fn publish(
    store: &Path,
    options: &IngestOptions,
    staging: &Path,
    prepared: Prepared,
    result: JobResult,
    job: Option<Job>,
    filters: Option<StoredFilters>,
) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let inventory = &prepared.inventory;
    let old = &prepared.old;
    if let Some(error) = result.error {
        return Err(job_error(error, inventory, old, staging)?);
    }
    let Some(mut job) = job else {
        return Err(Error::Internal("the Spark job ended before its write stage".to_owned()));
    };
    // The corrections earlier ingests stored, and the new versions this one
    // writes that a correction may touch (as the local ingest notes them).
    let registries = corrections::registries(store, old)?;
    let names: Vec<&str> = inventory.files.iter().map(|f| f.name.as_str()).collect();
    // Loading since the job started, unless the inventory came from the
    // job (a DATA URI).
    let filters = filters.unwrap_or_else(|| StoredFilters::start(store, old, &inventory.files, options.filter_bytes));
    let (kinds, tasks) = plan_writes(staging, options, inventory, old, &registries, filters)?;
    // The executors write the files and fold their rows; this waits for
    // them, then takes in their groups.
    let folded = staging.join("folded");
    let plan = WritePlan {
        store: path_text(&std::path::absolute(store).map_err(|e| Error::io(store, e))?)?,
        ingest_id: id.to_owned(),
        checked: path_text(&staging.join("checked"))?,
        folded: path_text(&folded)?,
        base: old.sources.len() as u32,
        names: names.iter().map(|n| (*n).to_owned()).collect(),
        tasks,
    };
    job.start_writes(&plan)?;
    let summaries = by_task(job.result()?.writes, plan.tasks.len())?;
    // Every task's rollup groups, merged into each account's files at the
    // publish.
    let mut rollups = Rollups::default();
    for task in 0..plan.tasks.len() {
        for part in read_folded(&folded, task)? {
            rollups.adopt(part, &folded)?;
        }
    }
    // Syncs what this publish writes from here on; the executors synced
    // theirs, and their sums are the manifest's.
    let syncer = Syncer::background();
    let mut written = Written {
        store,
        base: plan.base,
        names: &names,
        planned: &plan.tasks,
        summaries,
        syncer: &syncer,
        source_names: corrections::Names::default(),
    };
    let mut taken = ingest::Taken {
        manifest: old.clone(),
        rollups,
        report: IngestReport { id: id.to_owned(), files: inventory.files.len(), ..IngestReport::default() },
        set_aside: generation::RejectedRows::new(store, id),
        touched: BTreeMap::new(),
    };
    let none = KindResult::default();
    for plan_of_kind in kinds {
        let counts = result.kinds.get(plan_of_kind.kind.name()).unwrap_or(&none);
        written.take_kind(plan_of_kind, counts, &mut taken)?;
    }
    // The check tasks' files (gigabytes of page cache for a large ingest)
    // are not read again: they go while the rollups merge.
    let clearing = clear(staging.join("checked"));
    // The voids and the corrections, as the local ingest applies them.
    let shared = ingest::Shared { store, options, inventory, old, registries: &registries, syncer: &syncer };
    let report = ingest::correct(shared, taken).and_then(|(taken, applied)| {
        options.progress.tell(IngestProgress::Publishing);
        let folded = generation::Folded { rollups: taken.rollups, applied, set_aside: taken.set_aside };
        generation::finish(store, id, prepared, taken.manifest, folded, taken.report, syncer)
    });
    if let Some(clearing) = clearing {
        let _ = clearing.join();
    }
    job.end();
    report
}

/// The error the job reported, as the local engine says it.
fn job_error(error: JobError, inventory: &Inventory, old: &Manifest, staging: &Path) -> Result<Error> {
    Ok(match error {
        JobError::BadRecord { file, whole_file: true, reason, .. } => Error::bad_file(file, reason),
        JobError::BadRecord { file, line, is_row, column, value, reason, whole_file: false } => {
            Error::from(BadRecord { location: Location { file, line, is_row }, column, value, reason })
        }
        JobError::Conflict { kind, clash } => {
            let kind = Kind::of_name(&kind)
                .ok_or_else(|| Error::Internal(format!("the Spark job named an unknown kind '{kind}'")))?;
            let first = match clash.first {
                First::New { file, line } => new_place(inventory, file, line),
                First::Stored { source, line } => {
                    let name = old.sources.get(source as usize).cloned();
                    stored_place(name.unwrap_or_else(|| format!("source #{source}")), line)
                }
            };
            let record_id = record_id_at(staging, clash.second_file, clash.second_line)?;
            Error::Conflict {
                kind: kind.name(),
                record_id,
                first,
                second: new_place(inventory, clash.second_file, clash.second_line),
            }
        }
        JobError::Unreadable { uri, message } => super::unreadable(&uri, &message),
    })
}

/// Each kind's new rows cut into records files as the local ingest cuts
/// them ([`KindWrites::plan`]): the plans, and the write tasks of them all.
fn plan_writes(
    staging: &Path,
    options: &IngestOptions,
    inventory: &Inventory,
    old: &Manifest,
    registries: &BTreeMap<Kind, corrections::Registry>,
    mut filters: StoredFilters,
) -> Result<(Vec<KindPlan>, Vec<WriteTask>)> {
    // What the check tasks wrote, by input file: each split's files.
    let mut checked_files = CheckedFile::all_in(&staging.join("checked"))?;
    let writes = staging.join("writes");
    std::fs::create_dir_all(&writes).map_err(|e| Error::io(&writes, e))?;
    let mut tasks: Vec<WriteTask> = Vec::new();
    let mut kinds: Vec<KindPlan> = Vec::new();
    for kind in Kind::ALL {
        let of_kind = crate::records::files::of_kind(&inventory.files, kind);
        let checked: Vec<CheckedFile> =
            of_kind.iter().flat_map(|(index, _)| checked_files.remove(index).unwrap_or_default()).collect();
        let registered = registries.get(&kind).map(|r| &r.noted).filter(|noted| !noted.is_empty());
        let dups = staging.join("dups").join(kind.name());
        let plan = KindWrites { kind, old, dups: &dups, writes: &writes, options, registered };
        kinds.push(plan.plan(&of_kind, inventory, checked, &mut filters, &mut tasks)?);
    }
    Ok((kinds, tasks))
}

/// The write tasks' summaries by task number: each task once, and only
/// the plan's.
fn by_task(summaries: Vec<WriteSummary>, tasks: usize) -> Result<Vec<Option<WriteSummary>>> {
    let mut by_task: Vec<Option<WriteSummary>> = (0..tasks).map(|_| None).collect();
    for summary in summaries {
        let task = summary.task;
        match by_task.get_mut(task) {
            Some(slot @ None) => *slot = Some(summary),
            Some(Some(_)) => return Err(Error::Internal(format!("the Spark job reported write task {task} twice"))),
            None => return Err(Error::Internal(format!("the Spark job reported write task {task}, not in its plan"))),
        }
    }
    Ok(by_task)
}

/// Removes `folder` on a thread of its own (now, when no thread is to
/// spare); the thread to join.
fn clear(folder: PathBuf) -> Option<std::thread::JoinHandle<std::io::Result<()>>> {
    let clearing = crate::threads::spawn("telemeter-clear", {
        let folder = folder.clone();
        move || std::fs::remove_dir_all(folder)
    });
    match clearing {
        Ok(clearing) => Some(clearing),
        Err(_) => {
            let _ = std::fs::remove_dir_all(&folder);
            None
        }
    }
}

/// What the write tasks wrote, for [`Written::take_kind`].
struct Written<'a> {
    store: &'a Path,
    /// The first source number of this ingest's files.
    base: u32,
    /// The input files' names.
    names: &'a [&'a str],
    planned: &'a [WriteTask],
    /// Each task's summary, until taken.
    summaries: Vec<Option<WriteSummary>>,
    syncer: &'a Syncer,
    source_names: corrections::Names,
}

impl Written<'_> {
    /// Takes one kind's written files into the generation: their names
    /// and sums in the manifest, its counts (checked against the job's),
    /// the versions a correction may touch, and its rows set aside, in
    /// file and split (so line) order.
    fn take_kind(&mut self, plan: KindPlan, counts: &KindResult, taken: &mut ingest::Taken) -> Result<()> {
        let KindPlan { kind, mut files, listed, tasks, checked, rowless } = plan;
        let (mut used, mut sum) = (0, 0i128);
        let noted = taken.touched.entry(kind).or_default();
        for task in tasks {
            let summary = self.summaries[task]
                .take()
                .ok_or_else(|| Error::Internal(format!("the Spark job did not write file {task} of its plan")))?;
            if summary.rows != self.planned[task].rows {
                return Err(Error::Internal(format!("write task {task} wrote {} rows, not its plan's", summary.rows)));
            }
            used += summary.rows;
            let amount = summary.amount.parse::<i128>().ok().and_then(|amount| sum.checked_add(amount));
            sum = amount.ok_or_else(|| {
                Error::Internal(format!("write task {task} summed its amounts to '{}'", summary.amount))
            })?;
            let records: Arc<str> = Arc::from(summary.records.as_str());
            noted.extend(summary.touched.iter().map(|t| {
                let source_file = self.names.get(t.seen.file as usize).copied().unwrap_or("");
                let version = NewVersion { record_id: &t.record_id, revision: t.revision, seen: t.seen, source_file };
                RunVersion::of(&version, &records, self.base, &mut self.source_names)
            }));
            self.syncer.add_sums(summary.sums.into_iter().map(|(name, sum)| (self.store.join(name), sum)));
            files.records.push(summary.records);
            files.index.push(summary.index);
        }
        if used != counts.used {
            return Err(Error::Internal(format!(
                "the Spark job counted {} new {kind} rows but wrote {used}",
                counts.used
            )));
        }
        let tally = Tally {
            read: counts.read,
            used,
            set_aside: counts.set_aside,
            duplicates: counts.duplicates,
            ..Tally::default()
        };
        if tally.read != tally.used + tally.set_aside + tally.duplicates {
            return Err(Error::Internal(format!(
                "the Spark job's {kind} counts do not add up: read {} != used {} + set aside {} + duplicates {}",
                tally.read, tally.used, tally.set_aside, tally.duplicates
            )));
        }
        let amount = files
            .total_amount(kind, self.store)?
            .checked_add(Amount::from_nanos(sum))
            .ok_or_else(|| Error::Internal(format!("sum overflow of {kind} amounts")))?;
        files.count += used;
        files.amount = amount.to_string();
        // As the local ingest: a kind with input files (even empty ones) is
        // listed; a kind without any is left as it was.
        if listed {
            taken.manifest.kinds.insert(kind.name().to_owned(), files);
        }
        taken.report.tallies.insert(kind, tally);
        let with_rejects = checked.iter().chain(&rowless);
        let with_rejects = with_rejects.filter(|c| counts.rejected_files.contains(&c.index) && c.rejects.exists());
        let mut with_rejects: Vec<&CheckedFile> = with_rejects.collect();
        with_rejects.sort_by_key(|c| (c.index, c.split));
        for checked in with_rejects {
            taken.set_aside.kinds.append_kept(&checked.rejects)?;
        }
        Ok(())
    }
}

/// One kind's part of the write plan, and what its publish needs.
struct KindPlan {
    kind: Kind,
    /// Its files before this ingest.
    files: KindFiles,
    /// Whether the kind has input files (then the manifest lists it).
    listed: bool,
    /// Its files' tasks in the plan, in order.
    tasks: Vec<usize>,
    /// Its splits with valid rows, and those without.
    checked: Vec<CheckedFile>,
    rowless: Vec<CheckedFile>,
}

/// What the plan of one kind's files needs.
struct KindWrites<'a, V> {
    kind: Kind,
    old: &'a super::super::Manifest,
    /// Where the dedup tasks wrote the kind's repeats.
    dups: &'a Path,
    /// Where the segments files go.
    writes: &'a Path,
    options: &'a IngestOptions,
    /// The record ids the store's corrections name.
    registered: Option<&'a rustc_hash::FxHashMap<IdHash, V>>,
}

impl<V> KindWrites<'_, V> {
    /// The files of this kind's new rows, as the local ingest cuts them:
    /// one records and one index file per batch of input files (the same
    /// batches), in (file, line) order, except the rows the local ingest's
    /// record-id filter would have taken for stored ones (the same filter,
    /// loaded from the same index files, asked about the same ids in the
    /// same order): those wait, as candidates, and go to a file of their
    /// own when the local ingest would check its candidates (its budget
    /// full, counting the repeats it would hold too; at the end of the
    /// kind). Only the rows' places and ids are read; each file is pushed
    /// to `tasks`.
    fn plan(
        &self,
        of_kind: &[(u32, &InputFile)],
        inventory: &crate::records::files::Inventory,
        checked: Vec<CheckedFile>,
        filters: &mut StoredFilters,
        tasks: &mut Vec<WriteTask>,
    ) -> Result<KindPlan> {
        let (kind, options) = (self.kind, self.options);
        let files = self.old.kind(kind);
        let steps = Steps::new(inventory, of_kind, options.batch_bytes);
        let mut filter = filters.next(kind)?;
        let found = read_repeats(self.dups)?;
        // Splits without a valid row wrote at most their set-aside rows.
        let (checked, rowless): (Vec<CheckedFile>, Vec<CheckedFile>) =
            checked.into_iter().partition(|checked| checked.rows.exists());
        let places: Vec<Place> = found.iter().map(|r| r.at).collect();
        let NewRows { batches, repeat_text } = runs_by_batch(&checked, &places, &steps)?;
        let repeats = Repeats::new(&found, &repeat_text, &steps)?;
        // Every batch (or run of a file read in runs) with new rows or
        // repeats, in order: the others change nothing the local ingest
        // would do.
        let mut taken: Vec<BatchRun> = batches.iter().map(|rows| rows.batch).chain(repeats.batches()).collect();
        taken.sort_unstable();
        taken.dedup();
        let mut writes = Writes { folder: self.writes, kind, tasks, mine: Vec::new() };
        let mut pending = Candidates::default();
        let mut pending_elsewhere = 0u64;
        let mut held: FxHashSet<Place> = FxHashSet::default();
        let mut new_batches = batches.iter().peekable();
        // The places of the checked files the current batch reads: a batch
        // reads on from where the one before it ended, so the driver holds
        // the places of a batch's files, not of the day.
        let mut loaded: BTreeMap<usize, Vec<RowPlace>> = BTreeMap::new();
        for b in taken {
            held.clear();
            if let Some(BatchRows { parts: batch, .. }) = new_batches.next_if(|rows| rows.batch == b) {
                // Each run's places, and which rows of the batch the filter
                // holds for the exact check: a run with none (and no id a
                // correction names) goes to the file whole.
                let mut ids: Vec<IdHash> = Vec::new();
                for run in batch {
                    if let std::collections::btree_map::Entry::Vacant(slot) = loaded.entry(run.position) {
                        slot.insert(read_places(&run.part.places)?);
                    }
                    for rows in &run.rows {
                        ids.extend(run_places(&loaded, run, rows)?.iter().map(|place| place.id));
                    }
                }
                let seen = filter.check_and_insert_all(&ids);
                let noted = |id: &IdHash| self.registered.is_some_and(|r| r.contains_key(id));
                let mut file = FilePlan::default();
                let mut k = 0;
                for run in batch {
                    for rows in &run.rows {
                        let places = run_places(&loaded, run, rows)?;
                        let (held_here, ids_here) = (&seen[k..k + rows.len()], &ids[k..k + rows.len()]);
                        k += rows.len();
                        if !held_here.iter().any(|&held| held) && self.registered.is_none() {
                            file.push_rows(run, rows.clone(), places[0].line);
                            continue;
                        }
                        for (i, ((&held_row, id), place)) in
                            rows.clone().zip(held_here.iter().zip(ids_here).zip(places))
                        {
                            if held_row {
                                pending.file.push(run, i, place.line, noted(id));
                                pending.text += place.text;
                                held.insert(Place { file: run.part.index, line: place.line });
                            } else {
                                file.push(run, i, place.line, noted(id));
                            }
                        }
                    }
                }
                writes.push(file)?;
                if let Some(last) = batch.last() {
                    loaded = loaded.split_off(&last.position);
                }
            }
            pending_elsewhere += repeats.held_bytes(b, &held);
            if pending.bytes() + pending_elsewhere >= options.pending_bytes {
                writes.push(std::mem::take(&mut pending).file)?;
                pending_elsewhere = 0;
            }
        }
        writes.push(pending.file)?;
        let mine = writes.mine;
        Ok(KindPlan { kind, files, listed: !of_kind.is_empty(), tasks: mine, checked, rowless })
    }
}

/// The rows of one file to write, as segments.
#[derive(Default)]
struct FilePlan {
    segments: Vec<Segment>,
    rows: u64,
    noted: Vec<u64>,
}

impl FilePlan {
    /// Appends `rows` of `run`'s checked file, none of which a correction
    /// may touch for its id.
    /// `line`: the first's line.
    fn push_rows(&mut self, run: &PartRows, rows: std::ops::Range<usize>, line: u64) {
        if rows.is_empty() {
            return;
        }
        let (index, split) = (run.part.index, run.part.split);
        let (start, end) = (rows.start as u64, rows.end as u64);
        self.rows += end - start;
        match self.segments.last_mut() {
            Some(last) if (last.index, last.split) == (index, split) && last.end == start => last.end = end,
            _ => self.segments.push(Segment { index, split, start, end, line }),
        }
    }

    /// Appends row `i` of `run`'s checked file, at `line`; `noted` when a
    /// correction may touch it for its id.
    fn push(&mut self, run: &PartRows, i: usize, line: u64, noted: bool) {
        let (index, split, i) = (run.part.index, run.part.split, i as u64);
        if noted {
            self.noted.push(self.rows);
        }
        self.rows += 1;
        match self.segments.last_mut() {
            Some(last) if (last.index, last.split) == (index, split) && last.end == i => last.end += 1,
            _ => self.segments.push(Segment { index, split, start: i, end: i + 1, line }),
        }
    }
}

/// The rows the record-id filter holds for the exact check, as a local
/// ingest's candidates.
#[derive(Default)]
struct Candidates {
    file: FilePlan,
    /// Bytes of their text, as the candidate budget counts it.
    text: u64,
}

impl Candidates {
    /// What the candidate budget counts for them ([`Pending::bytes_of`]).
    fn bytes(&self) -> u64 {
        Pending::bytes_of(self.text, self.file.rows)
    }
}

/// The files planned so far.
struct Writes<'a> {
    /// Where the segments files go.
    folder: &'a Path,
    kind: Kind,
    tasks: &'a mut Vec<WriteTask>,
    /// This kind's tasks.
    mine: Vec<usize>,
}

impl Writes<'_> {
    /// Plans `file` (nothing when it has no rows), numbered after the
    /// files before it, every kind's.
    fn push(&mut self, file: FilePlan) -> Result<()> {
        if file.rows == 0 {
            return Ok(());
        }
        let number = self.tasks.len() as u64;
        let path = self.folder.join(format!("{number}.segments"));
        write_segments(&path, &file.segments)?;
        self.mine.push(self.tasks.len());
        self.tasks.push(WriteTask {
            kind: self.kind.name().to_owned(),
            number,
            rows: file.rows,
            segments: path_text(&path)?,
            noted: file.noted,
        });
        Ok(())
    }
}

/// A batch of the local ingest, in its order: the batch of input files
/// (from 0, in the kind's order), and the run of its file when that file is
/// read in runs of lines (`batches::piece_lines`; 0 otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct BatchRun {
    batch: usize,
    run: u64,
}

/// The local ingest's batches of one kind's files: which batch a row is
/// taken in, from its file and line.
struct Steps<'i> {
    inventory: &'i crate::records::files::Inventory,
    /// Where each batch ends.
    ends: Vec<BatchEnd>,
}

/// Where a batch of the local ingest ends.
#[derive(Clone, Copy)]
struct BatchEnd {
    /// Its last file (inventory index).
    file: u32,
    /// The lines of each run when the batch is one file read in runs.
    run_lines: Option<u64>,
}

impl<'i> Steps<'i> {
    fn new(
        inventory: &'i crate::records::files::Inventory,
        files: &[(u32, &InputFile)],
        batch_bytes: u64,
    ) -> Steps<'i> {
        let ends = batches::batches(files, batch_bytes)
            .iter()
            .filter_map(|batch| {
                batch.files.last().map(|(index, _)| BatchEnd { file: *index, run_lines: batch.run_lines })
            })
            .collect();
        Steps { inventory, ends }
    }

    /// The batch the row at `line` of input file `file` is taken in.
    fn of(&self, file: u32, line: u64) -> BatchRun {
        let batch = self.ends.partition_point(|end| end.file < file);
        match (self.ends.get(batch).and_then(|end| end.run_lines), self.inventory.files.get(file as usize)) {
            (Some(lines), Some(input)) => BatchRun { batch, run: batches::run_of(input, line, lines) },
            _ => BatchRun { batch, run: 0 },
        }
    }
}

/// The repeated rows of one kind (`dups/<kind>/`) that a local ingest would
/// hold as candidates, batch by batch: what its candidate budget counts
/// besides the new rows its filter holds.
struct Repeats {
    /// Bytes of the repeats of a stored row or of a row of an earlier batch
    /// (the filter has their id for certain), by batch.
    certain: BTreeMap<BatchRun, u64>,
    /// Repeats of a row of their own batch, by batch: held when that first
    /// row was.
    same_batch: BTreeMap<BatchRun, Vec<SameBatchRepeat>>,
}

/// A repeat of a row of its own batch.
struct SameBatchRepeat {
    /// The place of the row it repeats.
    first: Place,
    /// The repeat's bytes, as the candidate budget counts them.
    bytes: u64,
}

/// A repeat the job found: its place, and the place of the row it
/// repeats (`None`: a stored row).
struct FoundRepeat {
    at: Place,
    first: Option<Place>,
}

/// The repeats the dedup tasks wrote to `folder`, in place order.
fn read_repeats(folder: &Path) -> Result<Vec<FoundRepeat>> {
    let mut found = Vec::new();
    for part in parts(folder)? {
        let frame = read_frame(&part, &REPEAT_COLUMNS)?;
        let column = |name: &str| -> Result<Vec<i64>> {
            let column = frame.column(name).and_then(|c| c.i64()).map_err(polars_error(&part))?;
            column.iter().map(|v| v.ok_or_else(|| Error::io(&part, format!("null in '{name}'")))).collect()
        };
        let (file, line, first_file, first_line) =
            (column("file")?, column("line")?, column("first_file")?, column("first_line")?);
        for i in 0..file.len() {
            let broken = || Error::io(&part, format!("row {i}: not a repeat of an earlier row"));
            let place = |file: i64, line: i64| -> Result<Place> {
                let file = u32::try_from(file).map_err(|_| broken())?;
                Ok(Place { file, line: u64::try_from(line).map_err(|_| broken())? })
            };
            // A stored first row has no file (-1).
            let first = match first_file[i] {
                -1 => None,
                first => Some(place(first, first_line[i])?),
            };
            found.push(FoundRepeat { at: place(file[i], line[i])?, first });
        }
    }
    found.sort_unstable_by_key(|r| r.at);
    Ok(found)
}

impl Repeats {
    /// The repeats `found` (in place order), `text[i]` the bytes of text of
    /// the `i`th, by the batch each is taken in.
    fn new(found: &[FoundRepeat], text: &[u64], steps: &Steps<'_>) -> Result<Repeats> {
        let mut repeats = Repeats { certain: BTreeMap::new(), same_batch: BTreeMap::new() };
        for (repeat, &text) in found.iter().zip(text) {
            let bytes = Pending::bytes_of(text, 1);
            let batch = steps.of(repeat.at.file, repeat.at.line);
            match repeat.first.map(|f| (f, steps.of(f.file, f.line))) {
                Some((first, b)) if b == batch => {
                    repeats.same_batch.entry(batch).or_default().push(SameBatchRepeat { first, bytes })
                }
                Some((first, b)) if b > batch => {
                    return Err(Error::Internal(format!(
                        "the Spark job took file #{} line {} for a repeat of a later row (file #{} line {})",
                        repeat.at.file, repeat.at.line, first.file, first.line
                    )))
                }
                _ => *repeats.certain.entry(batch).or_default() += bytes,
            }
        }
        Ok(repeats)
    }

    /// The batches that hold repeats.
    fn batches(&self) -> impl Iterator<Item = BatchRun> + '_ {
        self.certain.keys().chain(self.same_batch.keys()).copied()
    }

    /// The bytes of batch `batch`'s repeats a local ingest would hold, given
    /// the rows of the batch its filter held (`held`: file and line).
    fn held_bytes(&self, batch: BatchRun, held: &FxHashSet<Place>) -> u64 {
        let same = self
            .same_batch
            .get(&batch)
            .map_or(0, |rows| rows.iter().filter(|r| held.contains(&r.first)).map(|r| r.bytes).sum());
        self.certain.get(&batch).copied().unwrap_or(0) + same
    }
}

/// The place of a new row: its input file and line.
fn new_place(inventory: &crate::records::files::Inventory, index: u32, line: u64) -> Location {
    match inventory.files.get(index as usize) {
        Some(file) => Location { file: file.name.clone(), line, is_row: file.format == Format::Parquet },
        None => Location { file: format!("source #{index}"), line, is_row: false },
    }
}

/// The place of a stored row, named as the manifest's sources name it.
fn stored_place(name: String, line: u64) -> Location {
    let is_row = name.split(" (ingest").next().is_some_and(|n| n.to_ascii_lowercase().ends_with(".parquet"));
    Location { file: name, line, is_row }
}

/// The Parquet part files Spark wrote to `folder`, in name (so row) order.
fn parts(folder: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(folder, e)),
    };
    let mut parts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("part-") && n.ends_with(".parquet"))
        })
        .collect();
    parts.sort();
    Ok(parts)
}

/// Rows of the checked file `part`: runs of its rows, in order.
struct PartRows {
    part: CheckedFile,
    /// Its position among the kind's checked files (the key of its
    /// places once loaded).
    position: usize,
    rows: Vec<std::ops::Range<usize>>,
}

/// The new rows of one batch (or run of a file read in runs).
struct BatchRows {
    batch: BatchRun,
    /// Its rows, checked file by checked file, in order.
    parts: Vec<PartRows>,
}

/// The new rows of the checked files, by batch ([`runs_by_batch`]).
struct NewRows {
    /// Each batch that has new rows, in order.
    batches: Vec<BatchRows>,
    /// The bytes of text of each repeat, in order.
    repeat_text: Vec<u64>,
}

/// The places of `rows` of `run`'s checked file, from `loaded`.
fn run_places<'p>(
    loaded: &'p BTreeMap<usize, Vec<RowPlace>>,
    run: &PartRows,
    rows: &std::ops::Range<usize>,
) -> Result<&'p [RowPlace]> {
    let places = loaded.get(&run.position).and_then(|places| places.get(rows.clone()));
    places.filter(|places| !places.is_empty()).ok_or_else(|| Error::io(&run.part.places, "fewer places than before"))
}

/// The new rows of the checked files (each in line order, the files in
/// file order): every row but the repeats (`repeats`, in order), cut into
/// the local ingest's batches ([`Steps`]). Only each row's place and text
/// size are read here, one file at a time.
fn runs_by_batch(parts: &[CheckedFile], repeats: &[Place], steps: &Steps<'_>) -> Result<NewRows> {
    let mut batches: Vec<BatchRows> = Vec::new();
    let mut repeat_text = Vec::with_capacity(repeats.len());
    let mut repeats = repeats.iter().peekable();
    let mut last: Option<Place> = None;
    for (p, part) in parts.iter().enumerate() {
        let places = read_places(&part.places)?;
        let mut start = 0;
        let mut run_batch: Option<BatchRun> = None;
        for (i, head) in places.iter().enumerate() {
            let (file, line) = (part.index, head.line);
            let at = Place { file, line };
            if last.is_some_and(|last| at <= last) {
                return Err(Error::io(&part.places, format!("row {i}: not after the row before it")));
            }
            last = Some(at);
            let repeat = repeats.next_if(|&&r| r == at).is_some();
            if repeat {
                repeat_text.push(head.text);
            }
            let batch = steps.of(file, line);
            if repeat || run_batch != Some(batch) {
                if let Some(b) = run_batch {
                    push_run(&mut batches, b, part, p, start..i);
                }
                (start, run_batch) = (i + usize::from(repeat), Some(batch));
            }
        }
        if let Some(b) = run_batch {
            push_run(&mut batches, b, part, p, start..places.len());
        }
    }
    if let Some(missed) = repeats.next() {
        return Err(Error::Internal(format!(
            "the Spark job named a repeat at file #{} line {} that no checked file holds",
            missed.file, missed.line
        )));
    }
    Ok(NewRows { batches, repeat_text })
}

/// The record id at `line` of input file `file`, from its checked files.
fn record_id_at(staging: &Path, file: u32, line: u64) -> Result<String> {
    let folder = staging.join("checked");
    let splits = CheckedFile::all_in(&folder)?.remove(&file).unwrap_or_default();
    for checked in splits.iter().filter(|checked| checked.places.exists()) {
        if let Some(at) = read_places(&checked.places)?.iter().position(|place| place.line == line) {
            return Ok(RowsFile::read(&checked.rows)?.row(at)?.view.record.record_id.to_owned());
        }
    }
    Err(Error::io(&folder, format!("no checked row of input file #{file} at line {line}")))
}

fn push_run(
    batches: &mut Vec<BatchRows>,
    batch: BatchRun,
    part: &CheckedFile,
    position: usize,
    rows: std::ops::Range<usize>,
) {
    if rows.is_empty() {
        return;
    }
    let run = || PartRows { part: part.clone(), position, rows: vec![rows.clone()] };
    match batches.last_mut() {
        Some(last) if last.batch == batch => match last.parts.last_mut() {
            Some(part) if part.position == position => part.rows.push(rows),
            _ => last.parts.push(run()),
        },
        _ => batches.push(BatchRows { batch, parts: vec![run()] }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked file of input file `index`, its rows at `lines` (only
    /// their places file: the text size of each ten times its line).
    fn checked(dir: &Path, index: u32, lines: &[u64]) -> CheckedFile {
        let checked = CheckedFile::in_folder(dir, index, 0);
        let place = |l: u64| [l, l * 10, l, 0].iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let bytes: Vec<u8> = lines.iter().flat_map(|&l| place(l)).collect();
        std::fs::write(&checked.places, bytes).expect("written");
        checked
    }

    /// The rows each batch takes: (input file, ranges), in order.
    fn taken(runs: &NewRows) -> Vec<(u32, Vec<(usize, usize)>)> {
        let ranges = |p: &PartRows| p.rows.iter().map(|r| (r.start, r.end)).collect();
        runs.batches.iter().flat_map(|rows| rows.parts.iter().map(|p| (p.part.index, ranges(p)))).collect()
    }

    /// New rows are the checked rows but the repeats; rows out of order,
    /// and a repeat that no checked file holds, are errors.
    #[test]
    fn new_rows_are_the_checked_rows_but_the_repeats() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inventory = crate::records::files::Inventory::default();
        let steps = Steps { inventory: &inventory, ends: Vec::new() };
        let parts = [checked(dir.path(), 0, &[2, 3, 5]), checked(dir.path(), 1, &[2, 4])];
        let place = |file, line| Place { file, line };

        let runs = runs_by_batch(&parts, &[place(0, 3), place(1, 4)], &steps).expect("read");
        assert_eq!(taken(&runs), vec![(0, vec![(0, 1), (2, 3)]), (1, vec![(0, 1)])]);
        assert_eq!(runs.repeat_text, vec![30, 40], "each repeat's text, in order");
        let runs = runs_by_batch(&parts, &[], &steps).expect("read");
        assert_eq!(taken(&runs), vec![(0, vec![(0, 3)]), (1, vec![(0, 2)])]);
        let runs = runs_by_batch(&parts, &[place(0, 2), place(0, 3), place(0, 5)], &steps).expect("read");
        assert_eq!(taken(&runs), vec![(1, vec![(0, 2)])]);

        let missing = runs_by_batch(&parts, &[place(0, 4)], &steps).map(|_| ()).unwrap_err().to_string();
        assert!(missing.contains("file #0 line 4"), "{missing}");
        let backwards = [checked(dir.path(), 2, &[3, 2])];
        let error = runs_by_batch(&backwards, &[], &steps).map(|_| ()).unwrap_err().chain();
        assert!(error.contains("row 1: not after the row before it"), "{error}");
    }
}
