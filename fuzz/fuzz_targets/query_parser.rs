//! libFuzzer target `query_parser`: the input and the invariants checked are
//! described at `telemeter::fuzzing::query_parser` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::query_parser(data));
