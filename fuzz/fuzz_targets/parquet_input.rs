//! libFuzzer target `parquet_input`: the input and the invariants checked are
//! described at `telemeter::fuzzing::parquet_input` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::parquet_input(data));
