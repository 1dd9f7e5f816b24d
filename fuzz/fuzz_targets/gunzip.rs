//! libFuzzer target `gunzip`: the input and the invariants checked are
//! described at `telemeter::fuzzing::gunzip` (src/fuzzing/gzip.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::gunzip(data));
