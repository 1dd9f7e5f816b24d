//! libFuzzer target `record_checks`: the input and the invariants checked are
//! described at `telemeter::fuzzing::record_checks` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::record_checks(data));
