//! libFuzzer target `token_decoder`: the input and the invariants checked are
//! described at `telemeter::fuzzing::token_decoder` (src/fuzzing/).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| telemeter::fuzzing::token_decoder(data));
