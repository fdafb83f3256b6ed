#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lumina_fuzz::mcp_jsonrpc::run(data));
