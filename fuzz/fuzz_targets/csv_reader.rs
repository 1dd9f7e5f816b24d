//! libFuzzer target `csv_reader`: the input and the invariants checked are
//! described at `telemeter::fuzzing::csv_reader` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::csv_reader(data));
