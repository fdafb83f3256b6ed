//! The official MCP conformance suite (server mode, every scenario) against the fixture
//! binary `lumina-mcp-everything`. Needs Node and the suite from `scripts/setup`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use lumina_testkit::McpPeers;

/// Kills the fixture server when the test ends, pass or fail.
struct Fixture(Child);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_fixture_passes_every_server_scenario() {
    let peers = McpPeers::locate().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lumina-mcp-everything"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let fixture = Fixture(child);
    let mut addr = String::new();
    BufReader::new(stdout).read_line(&mut addr).unwrap();
    let url = format!("http://{}/mcp", addr.trim());
    let out = tempfile_dir();
    let output = peers
        .conformance(&["server", "--url", &url, "--suite", "all"], &out)
        .unwrap();
    drop(fixture);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or(&stdout)
        .to_string();
    println!("{summary}");
    assert!(
        output.status.success(),
        "conformance suite failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        summary.contains("Total:") && summary.contains(" 0 failed"),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lumina-mcp-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
