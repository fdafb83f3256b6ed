#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lumina_fuzz::a2a_jsonrpc::run(data));
