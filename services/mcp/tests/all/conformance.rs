//! The official conformance suite's client scenarios against our driver binary.

use anyhow::{Context, Result};
use lumina_testkit::McpPeers;

const SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

#[test]
fn conformance_client_scenarios_pass() -> Result<()> {
    let peers = McpPeers::locate()?;
    let client = env!("CARGO_BIN_EXE_lumina-mcp-conformance-client");
    let work = tempfile::tempdir()?;
    let mut failed = Vec::new();
    // One after the other: `sse-retry` measures the client's reconnection delay.
    for scenario in SCENARIOS {
        let out = peers
            .conformance(
                &["client", "--command", client, "--scenario", scenario],
                work.path(),
            )
            .with_context(|| format!("run the suite for {scenario}"))?;
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() || !text.contains("OVERALL: PASSED") || text.contains("FAILURE") {
            failed.push(format!("{scenario}: {}\n{text}", out.status));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    Ok(())
}
