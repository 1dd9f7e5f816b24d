//! libFuzzer target `csv_paths`: the input and the invariants checked are
//! described at `telemeter::fuzzing::csv_paths` (src/fuzzing/csv.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::csv_paths(data));
