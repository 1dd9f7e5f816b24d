//! libFuzzer target `rollup_file`: the input and the invariants checked are
//! described at `telemeter::fuzzing::rollup_file` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::rollup_file(data));
