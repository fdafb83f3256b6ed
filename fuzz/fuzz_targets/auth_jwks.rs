#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lumina_fuzz::auth_jwks::run(data));
