//! Fuzz target: `shaledb::fuzzing::warm_keys` on any bytes (see that function for what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb::fuzzing::warm_keys(data));
