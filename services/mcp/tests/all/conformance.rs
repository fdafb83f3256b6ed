//! The official conformance suite's client scenarios against our driver binary: the whole
//! `core` suite (initialize, tools, elicitation, SSE retry and every core `auth/*`
//! scenario), the 2025-03-26 `backcompat` and the `draft` auth suites, and the two
//! `client_credentials` extension scenarios (Basic and `private_key_jwt`).

use anyhow::{Context, Result};
use lumina_testkit::McpPeers;

/// What `--suite core` of the installed suite runs (checked, so a suite upgrade that adds
/// scenarios is noticed).
const CORE: [&str; 18] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
];

/// One suite run: its summary lines (`✓ name: …` / `✗ name: …`) and whether it passed.
struct Run {
    text: String,
    passed: bool,
}

impl Run {
    /// Scenario name → passed, from the summary.
    fn scenarios(&self) -> Vec<(String, bool)> {
        self.text
            .lines()
            .filter_map(|l| {
                let (ok, rest) = match l.trim_start() {
                    s if s.starts_with('✓') => (true, &s['✓'.len_utf8()..]),
                    s if s.starts_with('✗') => (false, &s['✗'.len_utf8()..]),
                    _ => return None,
                };
                let name = rest.trim().split(':').next()?.trim().to_string();
                Some((name, ok))
            })
            .collect()
    }
}

fn run(args: &[&str]) -> Result<Run> {
    let peers = McpPeers::locate()?;
    let client = env!("CARGO_BIN_EXE_lumina-mcp-conformance-client");
    let work = tempfile::tempdir()?;
    let mut all = vec!["client", "--command", client];
    all.extend_from_slice(args);
    let out = peers
        .conformance(&all, work.path())
        .with_context(|| format!("run the suite with {args:?}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = out.status.success()
        && (text.contains("OVERALL: PASSED") || text.contains(" failed, 0 warnings"))
        && !text.contains("FAILURE");
    Ok(Run { text, passed })
}

#[test]
fn conformance_core_suite_passes() -> Result<()> {
    let core = run(&["--suite", "core"])?;
    let scenarios = core.scenarios();
    let names: Vec<&str> = scenarios.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, CORE, "{}", core.text);
    let failed: Vec<&str> = scenarios
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| n.as_str())
        .collect();
    if failed == ["sse-retry"] {
        // It measures a 500 ms reconnection delay with 200 ms tolerance, which a loaded
        // machine running 17 other scenarios (and this crate's other tests) can miss: it
        // must then pass on its own.
        let alone = run(&["--scenario", "sse-retry"])?;
        assert!(alone.passed, "sse-retry alone:\n{}", alone.text);
        return Ok(());
    }
    assert!(
        core.passed && failed.is_empty(),
        "failed: {failed:?}\n{}",
        core.text
    );
    assert!(core.text.contains("failed, 0 warnings"), "{}", core.text);
    Ok(())
}

#[test]
fn conformance_backcompat_draft_and_client_credentials_auth_pass() -> Result<()> {
    for suite in ["backcompat", "draft"] {
        let r = run(&["--suite", suite])?;
        assert!(!r.scenarios().is_empty(), "{suite}: {}", r.text);
        assert!(r.passed, "{suite}:\n{}", r.text);
    }
    for scenario in [
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
    ] {
        let r = run(&["--scenario", scenario])?;
        assert!(r.passed, "{scenario}:\n{}", r.text);
    }
    Ok(())
}
