#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lumina_fuzz::ws_frame::run(data));
