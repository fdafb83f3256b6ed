#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lumina_fuzz::model_sse::run_anthropic(data));
