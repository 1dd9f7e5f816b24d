//! The fuzz targets in plain `cargo test`: every seed-corpus file of
//! `fuzz/corpus/<target>/` (crash inputs included, as regressions) through
//! its target, then a bounded random run of each target over mutated seeds.
//! The long runs are `cargo fuzz run <target>` (docs/fuzzing.md); this is
//! the short one CI can afford, with no extra install.

use std::path::PathBuf;

use proptest::prelude::*;
use telemeter::fuzzing::TARGETS;

use crate::common::root;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let folder = root().join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read(&path).expect("a corpus file"))).collect()
}

#[test]
fn every_seed_passes_its_target() {
    for (name, target) in TARGETS {
        let seeds = corpus(name);
        assert!(seeds.len() >= 5, "{name}: only {} seeds", seeds.len());
        for (path, data) in seeds {
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} fails on {}", path.display());
        }
    }
}

/// Bytes that end fields, lines, values or parameters in the inputs.
const STRUCTURAL: &[u8] = b",\"\r\n\xff&=%.:-+0";

/// A seed with some bytes replaced, inserted or removed.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let count = seeds.len();
    (0..count, proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 0..12)).prop_map(
        move |(pick, edits)| {
            let mut data = seeds[pick].clone();
            for (at, byte, how) in edits {
                let at = if data.is_empty() { 0 } else { at.index(data.len()) };
                match how {
                    0 if !data.is_empty() => data[at] = byte,
                    1 => data.insert(at, byte),
                    2 if !data.is_empty() => {
                        data.remove(at);
                    }
                    // A structural byte of the formats, where mutations find edges.
                    _ => data.insert(at, STRUCTURAL[byte as usize % STRUCTURAL.len()]),
                }
            }
            data
        },
    )
}

fn seeds_of(target: &str) -> Vec<Vec<u8>> {
    corpus(target).into_iter().map(|(_, data)| data).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn csv_reader_on_mutated_seeds(data in mutated(seeds_of("csv_reader"))) {
        telemeter::fuzzing::csv_reader(&data);
    }

    /// The structural index against the line-at-a-time reader on lines of
    /// quotes, commas and line ends: quoted fields, doubled quotes, stray
    /// and unclosed quotes, CRLF and bare carriage returns.
    #[test]
    fn csv_paths_on_quote_heavy_lines(
        width in 0u8..16,
        bytes in proptest::collection::vec(proptest::sample::select(b",,\"\"\"a\r\n\n".to_vec()), 0..300),
    ) {
        let data: Vec<u8> = std::iter::once(width).chain(bytes).collect();
        telemeter::fuzzing::csv_paths(&data);
    }

    #[test]
    fn gunzip_on_mutated_seeds(data in mutated(seeds_of("gunzip"))) {
        telemeter::fuzzing::gunzip(&data);
    }

    #[test]
    fn record_checks_on_mutated_seeds(data in mutated(seeds_of("record_checks"))) {
        telemeter::fuzzing::record_checks(&data);
    }

    #[test]
    fn query_parser_on_mutated_seeds(data in mutated(seeds_of("query_parser"))) {
        telemeter::fuzzing::query_parser(&data);
    }

    #[test]
    fn token_decoder_on_mutated_seeds(data in mutated(seeds_of("token_decoder"))) {
        telemeter::fuzzing::token_decoder(&data);
    }

    #[test]
    fn every_target_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        for (_, target) in TARGETS {
            target(&data);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parquet_input_on_mutated_seeds(data in mutated(seeds_of("parquet_input"))) {
        telemeter::fuzzing::parquet_input(&data);
    }
}

/// The readers of the store's files (rollups, index, records, manifest),
/// each fed its seeds with random damage: 2,000 mutated inputs in all, from
/// a fixed seed (so a failure repeats), each a few bytes changed,
/// inserted, removed or cut off. Each input must read or be an error
/// naming its file (the targets' checks), never a panic or an abort.
#[test]
fn store_file_readers_on_2000_seeded_mutations() {
    let targets: [(&str, telemeter::fuzzing::Target); 4] = [
        ("rollup_file", telemeter::fuzzing::rollup_file),
        ("index_file", telemeter::fuzzing::index_file),
        ("records_file", telemeter::fuzzing::records_file),
        ("manifest_file", telemeter::fuzzing::manifest_file),
    ];
    let mut state: u64 = 0x5eed_0fd1_5cf0_1100;
    let mut next = move || {
        // xorshift64*: the same inputs on every run.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut ran = 0;
    for (name, target) in targets {
        let seeds = seeds_of(name);
        assert!(!seeds.is_empty(), "{name}: no seeds");
        for case in 0..500 {
            let mut data = seeds[next() as usize % seeds.len()].clone();
            for _ in 0..1 + next() % 4 {
                let at = if data.is_empty() { 0 } else { next() as usize % data.len() };
                let byte = next() as u8;
                match next() % 8 {
                    0 => data.insert(at, byte),
                    1 if !data.is_empty() => {
                        data.remove(at);
                    }
                    2 => data.truncate(at),
                    _ if !data.is_empty() => data[at] ^= byte | 1,
                    _ => data.push(byte),
                }
            }
            if let Err(panic) = std::panic::catch_unwind(|| target(&data)) {
                let why = panic.downcast_ref::<String>().map(String::as_str).or(panic.downcast_ref::<&str>().copied());
                let kept = std::env::temp_dir().join(format!("telemeter-{name}-mutation-{case}"));
                let _ = std::fs::write(&kept, &data);
                panic!("{name}: mutation {case} (kept in {}): {why:?}", kept.display());
            }
            ran += 1;
        }
    }
    assert_eq!(ran, 2000);
}

/// Every byte of each Parquet seed damaged in turn (five bit patterns, in
/// rotation), footer included: each damaged file reads or is an error.
/// Before the page checks of `src/parquet.rs`, some of these aborted the
/// process (a decoder asking for impossible memory) or panicked.
#[test]
fn every_byte_of_a_parquet_seed_damaged_in_turn() {
    let seeds: Vec<(PathBuf, Vec<u8>)> =
        corpus("parquet_input").into_iter().filter(|(_, data)| data.starts_with(b"PAR1") && data.len() > 100).collect();
    assert!(seeds.len() >= 4, "{} Parquet seeds", seeds.len());
    for (path, good) in seeds {
        for (at, flip) in (0..good.len()).zip([0xff_u8, 0x01, 0x80, 0x7f, 0x10].into_iter().cycle()) {
            let mut data = good.clone();
            data[at] ^= flip;
            if let Err(panic) = std::panic::catch_unwind(|| telemeter::fuzzing::parquet_input(&data)) {
                let why = panic.downcast_ref::<String>().map(String::as_str).or(panic.downcast_ref::<&str>().copied());
                panic!("{}: byte {at} ^ {flip:#04x}: {why:?}", path.display());
            }
        }
    }
}

/// A rollup file whose footer holds an Arrow schema polars cannot read
/// (polars panics "not yet implemented" in its schema reader), found by
/// the `rollup_file` target: every reader of it gives an error naming the
/// file, never a panic.
#[test]
fn a_rollup_whose_arrow_schema_polars_cannot_read_is_an_error() {
    let data = std::fs::read(root().join("fuzz/corpus/rollup_file/crash-arrow-schema-not-implemented"))
        .expect("the crash input");
    let outcome = std::panic::catch_unwind(|| telemeter::fuzzing::rollup_file(&data));
    assert!(outcome.is_ok(), "the rollup readers panicked");
}

/// A rollup file whose rows' sums overflow (values no real total comes
/// near), found by the `rollup_file` target: an error naming the file,
/// not an internal error.
#[test]
fn a_rollup_whose_sums_overflow_is_an_error_naming_it() {
    let data =
        std::fs::read(root().join("fuzz/corpus/rollup_file/crash-rollup-sums-overflow")).expect("the crash input");
    let outcome = std::panic::catch_unwind(|| telemeter::fuzzing::rollup_file(&data));
    assert!(outcome.is_ok(), "a reader's error did not name the file");
}
