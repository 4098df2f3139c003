#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| load_agent_fuzz::sop_parse(data));
