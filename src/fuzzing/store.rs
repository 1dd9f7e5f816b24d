//! The Parquet and store-file targets: a Parquet input
//! ([`parquet_input`]) and each kind of file the store reads.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono_tz::Tz;

use super::csv::Collect;
use super::scratch_dir;
use crate::aggregate::rows::Rows;
use crate::aggregate::{Bucketing, Selector};
use crate::error::Error;
use crate::records::files::{Format, InputFile};
use crate::records::{self, Kind};
use crate::store::{Manifest, Store, FORMAT_VERSION};
use crate::time::Buckets;

// ------------------------------------------------------------- parquet_input

/// A file's bytes, read as a Parquet records file of each kind and as any
/// Parquet file. Reading may fail (a damaged file is an error naming it);
/// it may not panic, and rows come numbered 1, 2, 3...
pub fn parquet_input(data: &[u8]) {
    // libFuzzer's hook aborts on any panic, one caught by the reader too.
    crate::parquet::quiet_caught_panics();
    let dir = scratch_dir();
    let path = dir.join("fuzz.parquet");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, data)) {
        panic!("cannot write {}: {e}", path.display());
    }
    for kind in Kind::ALL {
        let file = InputFile {
            kind,
            path: path.clone(),
            name: format!("{}/fuzz.parquet", kind.name()),
            format: Format::Parquet,
            size: data.len() as u64,
            sum: None,
        };
        let mut sink = Collect { kind, rows: Vec::new() };
        match records::parquet::read(&file, &mut sink) {
            Ok(()) => {
                let lines: Vec<u64> = sink.rows.iter().map(|row| row.line).collect();
                assert!(lines.iter().copied().eq(1..=lines.len() as u64), "rows out of order: {lines:?}");
            }
            Err(e) => assert!(e.to_string().starts_with(&file.name), "an error not naming the file: {e}"),
        }
    }
    if let Ok(frame) = crate::parquet::read_frame(&path, None, crate::parquet::Rows::All) {
        assert!(frame.columns().iter().all(|column| column.len() == frame.height()), "a ragged frame");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- store files

/// The account the store-file targets file their rollups under.
const STORE_ACCOUNT: &str = "MFUZZFUZZFUZZFUZZFUZ";

/// A store in a scratch directory whose files are `files` (name in the
/// store, bytes) and whose manifest is `manifest` (format, generation and
/// the listing the caller gives), opened for reading; the directory and
/// the open store.
fn scratch_store(files: &[(&str, &[u8])], manifest: Manifest) -> (PathBuf, Store) {
    let dir = scratch_dir();
    for (name, bytes) in files {
        let path = dir.join(name);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, bytes));
        if let Err(e) = written {
            panic!("cannot write {}: {e}", path.display());
        }
    }
    // Format 5, the last without checksums: the targets fuzz the readers
    // below the sums (with them, every damaged byte is refused whole).
    let manifest = Manifest { format: crate::store::SUMS_FORMAT - 1, generation: 1, ..manifest };
    let text = serde_json::to_vec(&manifest).unwrap_or_default();
    if let Err(e) = std::fs::write(dir.join(crate::store::MANIFEST), text) {
        panic!("cannot write the manifest of {}: {e}", dir.display());
    }
    match Store::open(&dir) {
        Ok(store) => (dir, store),
        Err(e) => panic!("a scratch store does not open: {}", e.chain()),
    }
}

/// Buckets of about a month from 2000 to 2100 UTC, each boundary `shift`
/// seconds past midnight: 0 is answered from day rollups, 900 from
/// 15-minute ones, 1 from the records (no rollup grain divides it).
fn fuzz_buckets(shift: i64) -> Buckets {
    const START: i64 = 946_684_800; // 2000-01-01T00:00:00Z
    const MONTH: i64 = 30 * 86_400;
    Buckets::from_bounds((0..=1218).map(|i| START + i * MONTH + shift).collect(), Tz::UTC)
}

/// Asserts that a store reader's error is an I/O error that names the
/// store file `name` (a damaged file is an error naming it).
fn assert_names(error: &Error, name: &str) {
    let text = error.chain();
    assert!(matches!(error, Error::Io { .. }), "not an I/O error: {text}");
    assert!(text.contains(name), "an error not naming {name}: {text}");
}

/// A rollup file's bytes as both grain files of one account of a store:
/// read by an account's request at each grain (`Store::account_rows`, what
/// `summary` and the server run), by the report's pass over the accounts
/// (`Store::aggregate`), by `Store::account_span`, and by the ingest's
/// merge (`read_rollup_slice`, `for_each_rollup_in`, which also checks
/// each row's values). Each is an answer or an I/O error naming the file;
/// never a panic or an abort. An answer's rows lie in the request's
/// buckets, and the report's pass agrees with the account's request.
pub fn rollup_file(data: &[u8]) {
    crate::parquet::quiet_caught_panics();
    let name = "rollups/fuzz/f-900s.parquet";
    let by_grain: BTreeMap<i64, String> = crate::store::GRAINS.iter().map(|&g| (g, name.to_owned())).collect();
    let manifest = Manifest { rollups: BTreeMap::from([(STORE_ACCOUNT.to_owned(), by_grain)]), ..Manifest::default() };
    let (dir, store) = scratch_store(&[(name, data)], manifest);
    for shift in [0, 900] {
        let buckets = fuzz_buckets(shift);
        let selector = Selector::everything(Bucketing::shared(buckets.clone()));
        let rows = match store.account_rows(&selector, STORE_ACCOUNT) {
            Ok(Some(rows)) => rows,
            Ok(None) => panic!("buckets on the {shift}-second grid were not answered from rollups"),
            Err(e) => {
                assert_names(&e, name);
                continue;
            }
        };
        let (usage, charges) = (Rows::new(rows.strings.clone(), rows.usage), Rows::new(rows.strings, rows.charges));
        for (key, _) in usage.iter().chain(charges.iter()) {
            assert!((key.bucket as usize) < buckets.len(), "a row in bucket {} of {}", key.bucket, buckets.len());
        }
        match store.aggregate(&selector) {
            Ok(all) => {
                let records: u64 = all.groups.values().map(|t| t.records).sum();
                let expected: u64 = usage.iter().chain(charges.iter()).map(|(_, t)| t.records).sum();
                assert_eq!(records, expected, "the report's pass and the account's request disagree");
            }
            Err(e) => assert_names(&e, name),
        }
    }
    if let Err(e) = store.account_span(STORE_ACCOUNT) {
        assert_names(&e, name);
    }
    let path = dir.join(name);
    // One slice, as the merge reads a file (64k rows at a time).
    let merged = crate::store::rollup::read_rollup_slice(&path, 0, 1 << 16)
        .and_then(|frame| crate::store::rollup::for_each_rollup_in(&path, &frame, |_| Ok(())));
    if let Err(e) = merged {
        assert_names(&e, name);
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dedup index file's bytes, read as an ingest reads a stored index:
/// opened (its partition table checked against its size), loaded into a
/// record-id filter, and every partition streamed. An error names the
/// file; a file that opens gives exactly the entries its size holds, each
/// then found by the filter.
pub fn index_file(data: &[u8]) {
    use crate::store::index::{Filter, IndexFile};
    let dir = scratch_dir();
    let path = dir.join("index/calls/fuzz-00000.idx");
    let written = std::fs::create_dir_all(dir.join("index/calls")).and_then(|()| std::fs::write(&path, data));
    if let Err(e) = written {
        panic!("cannot write {}: {e}", path.display());
    }
    match IndexFile::open(&path) {
        Err(e) => assert_names(&e, "fuzz-00000.idx"),
        Ok(file) => {
            let mut filter = Filter::new(Filter::MIN_BYTES);
            let mut ids = Vec::new();
            let mut whole = true;
            for p in 0..crate::records::dedup::PARTITIONS {
                if let Err(e) = file.for_each_in(p, |entry| ids.push(entry.id)) {
                    assert_names(&e, "fuzz-00000.idx");
                    whole = false;
                }
            }
            if whole {
                let header = 16 + (crate::records::dedup::PARTITIONS + 1) * 8;
                assert_eq!(ids.len(), (data.len() - header) / 32, "entries read against the file's size");
            }
            match crate::store::ingest::load_filter(&mut filter, std::slice::from_ref(&file)) {
                Ok(()) => {
                    assert!(whole, "the filter loaded a file whose partitions do not read");
                    assert!(ids.iter().all(|&id| filter.check_and_insert(id)), "an entry the filter lost");
                }
                Err(e) => assert_names(&e, "fuzz-00000.idx"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A records file's bytes as a store's records file of one kind (the first
/// byte picks it, `& 3`; the rest is the file), read as the store reads its
/// records when a request's buckets are not unions of rollup slots
/// (`Store::aggregate` over the stored records: `records::parquet::read`
/// and the one row check). An answer counts every row it read as used or a
/// duplicate, and its groups hold the rows it used; an error names the
/// file. Never a panic or an abort.
pub fn records_file(data: &[u8]) {
    crate::parquet::quiet_caught_panics();
    let Some((&control, bytes)) = data.split_first() else { return };
    let kind = Kind::ALL[(control & 3) as usize];
    let name = format!("records/{}/fuzz-00000.parquet", kind.name());
    let files = crate::store::KindFiles { records: vec![name.clone()], ..crate::store::KindFiles::default() };
    let manifest = Manifest { kinds: BTreeMap::from([(kind.name().to_owned(), files)]), ..Manifest::default() };
    let (dir, store) = scratch_store(&[(name.as_str(), bytes)], manifest);
    let selector = Selector::everything(Bucketing::shared(fuzz_buckets(1)));
    match store.aggregate(&selector) {
        Ok(all) => {
            let tally = all.tallies.get(&kind).copied().unwrap_or_default();
            assert_eq!(tally.read, tally.used + tally.set_aside + tally.duplicates, "{tally:?}");
            let records: u64 = all.groups.values().map(|t| t.records).sum();
            assert_eq!(records, tally.selected, "groups against the rows selected");
            assert!(tally.selected <= tally.used, "{tally:?}");
        }
        Err(e) => {
            let text = e.chain();
            assert!(!matches!(e, Error::Internal(_)), "an internal error from a damaged file: {text}");
            assert!(text.contains("fuzz-00000.parquet"), "an error not naming the file: {text}");
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A manifest's bytes through `Manifest::parse` (what every reader and
/// ingest reads first): an error naming the file, or a manifest of a
/// format this build reads that writes back to text which parses to the
/// same manifest. Never a panic.
pub fn manifest_file(data: &[u8]) {
    let path = std::path::Path::new("STORE/manifest.json");
    match Manifest::parse(data, path) {
        Ok(manifest) => {
            assert!((crate::store::OLDEST_FORMAT..=FORMAT_VERSION).contains(&manifest.format), "{manifest:?}");
            let text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
            match Manifest::parse(&text, path) {
                Ok(again) => assert_eq!(again, manifest, "a manifest that does not read back"),
                Err(e) => panic!("a parsed manifest does not parse again: {}", e.chain()),
            }
        }
        Err(e) => assert_names(&e, "STORE/manifest.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed files of `target` in `fuzz/corpus/`.
    /// The seeds of `target`'s corpus that are files of a real store: not
    /// the inputs of fixed crashes (`crash-*`, `regression-*`), which are
    /// damaged on purpose.
    fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
        let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), path))
            .filter(|(name, _)| !name.starts_with("crash-") && !name.starts_with("regression-"))
            .map(|(name, path)| (name, std::fs::read(path).unwrap()))
            .collect();
        seeds.sort();
        seeds
    }

    /// The store-file seeds read cleanly as the targets read them (so that
    /// mutations of them reach past the first check): each rollup seed
    /// answers with rows at both grains, each records seed is read whole,
    /// each index seed opens, and the stores' manifests parse.
    #[test]
    fn the_store_file_seeds_read_cleanly() {
        for (name, data) in seeds("rollup_file") {
            let by_grain: BTreeMap<i64, String> =
                crate::store::GRAINS.iter().map(|&g| (g, "rollups/f/seed.parquet".to_owned())).collect();
            let rollups = BTreeMap::from([(STORE_ACCOUNT.to_owned(), by_grain)]);
            let (dir, store) =
                scratch_store(&[("rollups/f/seed.parquet", &data)], Manifest { rollups, ..Manifest::default() });
            for shift in [0, 900] {
                let selector = Selector::everything(Bucketing::shared(fuzz_buckets(shift)));
                let rows = store.account_rows(&selector, STORE_ACCOUNT).unwrap().unwrap();
                assert!(!rows.usage.is_empty() || !rows.charges.is_empty(), "{name} at {shift}");
            }
            std::fs::remove_dir_all(dir).unwrap();
        }
        for (name, data) in seeds("records_file") {
            let kind = Kind::ALL[data[0] as usize];
            let file = format!("records/{}/seed.parquet", kind.name());
            let files = crate::store::KindFiles { records: vec![file.clone()], ..Default::default() };
            let kinds = BTreeMap::from([(kind.name().to_owned(), files)]);
            let (dir, store) = scratch_store(&[(file.as_str(), &data[1..])], Manifest { kinds, ..Manifest::default() });
            let all = store.aggregate(&Selector::everything(Bucketing::shared(fuzz_buckets(1)))).unwrap();
            assert!(all.tallies[&kind].used > 0, "{name}");
            std::fs::remove_dir_all(dir).unwrap();
        }
        let dir = scratch_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in seeds("index_file") {
            std::fs::write(dir.join(&name), data).unwrap();
            crate::store::index::IndexFile::open(&dir.join(&name)).unwrap();
        }
        std::fs::remove_dir_all(dir).unwrap();
        let path = std::path::Path::new("manifest.json");
        for (name, data) in seeds("manifest_file").into_iter().filter(|(name, _)| name != "unsupported-format.json") {
            assert!(Manifest::parse(&data, path).is_ok(), "{name}");
        }
    }
}
