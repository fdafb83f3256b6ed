//! Bad input: a clear message on stderr, exit status 2, no panic, no traffic.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lumina-loadtest"))
        .args(args)
        .arg("--out")
        .arg(dir.path().join("out"))
        .env_remove("LUMINA_JWT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn non_loopback_targets_are_refused() {
    let (code, stderr) = run(&["--url", "ws://10.1.2.3:8080/v1/ws", "steady"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("non-loopback"), "{stderr}");
    let (code, stderr) = run(&["--url", "ws://example.com:80/v1/ws", "connect-storm"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "idle",
        "--bind-ips",
        "192.168.0.7",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("loopback"), "{stderr}");
}

#[test]
fn missing_files_and_bad_urls_are_input_errors() {
    let (code, stderr) = run(&["--instances", "/nonexistent/instances.json", "failover"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/instances.json"), "{stderr}");
    let (code, stderr) = run(&["--app-root", "/nonexistent/app", "steady"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("backend.json"), "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "--token-file",
        "/nonexistent/token",
        "steady",
    ]);
    assert_eq!(code, 2, "{stderr}");
    let (code, stderr) = run(&["--url", "not a url", "steady"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid URL"), "{stderr}");
    let (code, _) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "steady",
        "--sessions",
        "0",
    ]);
    assert_eq!(code, 2);
    let (code, _) = run(&["steady"]);
    assert_eq!(code, 2);
    // Unknown options are clap's usage errors, also 2.
    let (code, _) = run(&["steady", "--no-such-option"]);
    assert_eq!(code, 2);
}

#[test]
fn failover_without_instances_is_an_input_error() {
    let (code, stderr) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "failover",
        "--trials",
        "1",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--instances"), "{stderr}");
}

#[test]
fn nothing_listening_is_a_target_error() {
    // Port 9 (discard) on loopback: nothing answers, so the preflight fails with status 1.
    let (code, stderr) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "--token",
        "x",
        "steady",
        "--duration",
        "1",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot use ws://127.0.0.1:9/v1/ws"),
        "{stderr}"
    );
    assert!(!stderr.contains("Bearer x"), "{stderr}");
}

#[test]
fn merge_and_start_at_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, r#"{"not": "a report"}"#).unwrap();
    let (code, stderr) = run(&["merge", "/nonexistent/report.json"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/report.json"), "{stderr}");
    let (code, stderr) = run(&["merge", junk.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is not a lumina-loadtest report"),
        "{stderr}"
    );
    let (code, stderr) = run(&["merge"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "ws://127.0.0.1:9/v1/ws",
        "steady",
        "--start-at",
        "1e300",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--start-at"), "{stderr}");
}
