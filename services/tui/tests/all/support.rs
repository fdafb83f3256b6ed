//! Helpers shared by the end-to-end tests.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The backend binary next to `lumina`, built on demand when this test runs alone.
pub fn backend_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let lumina = PathBuf::from(env!("CARGO_BIN_EXE_lumina"));
        let bin = lumina.with_file_name("lumina-backend");
        if !bin.exists() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "-p", "lumina-backend", "--bin", "lumina-backend"])
                .status()
                .unwrap();
            assert!(status.success());
        }
        bin
    })
    .clone()
}

/// Stops the backend recorded in `<app>/state/run/backend.json`, if any.
pub fn stop_backend(app: &std::path::Path) {
    if let Some(pid) = backend_pid(app) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
}

/// The pid in `<app>/state/run/backend.json`.
pub fn backend_pid(app: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(app.join("state/run/backend.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()?
        .get("pid")?
        .as_u64()
}
