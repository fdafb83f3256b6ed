//! The confined shell end to end (docs/sandbox.md): `hello` carries the confinement level,
//! and a model that asks the shell — in bypass mode — to read the backend's endpoint file
//! (its bearer token) gets a refusal; with `shell_confinement = off` it would get the token.

use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

/// The harness's AppRoot is `<tmp>/app`, next to the project `<tmp>/project`.
const CAT_ENDPOINT: &str = "cat ../app/state/run/backend.json";

async fn cat_endpoint_file(extra_env: &[(&str, &str)]) -> (String, Vec<(String, bool, String)>) {
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({ "command": CAT_ENDPOINT })),
            Turn::text("done"),
        ],
        extra_env,
    )
    .await;
    // What `serve` writes: the URL and the token that answers permission requests.
    let endpoint = h.tmp.path().join("app/state/run/backend.json");
    std::fs::create_dir_all(endpoint.parent().unwrap()).unwrap();
    std::fs::write(
        &endpoint,
        json!({"url": h.url, "token": h.token}).to_string(),
    )
    .unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "read the endpoint", bypass()))
        .await
        .unwrap();
    let outputs = tool_outputs(&events(&until_run_end(&mut notes, &run.run_id).await));
    let token = h.token.clone();
    h.stop().await;
    (token, outputs)
}

#[tokio::test]
async fn the_shell_cannot_read_the_backends_token() {
    let (token, outputs) = cat_endpoint_file(&[]).await;
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let (tool, is_error, output) = &outputs[0];
    assert_eq!((tool.as_str(), *is_error), ("shell", true), "{output}");
    assert!(output.contains("Permission denied"), "{output}");
    assert!(!output.contains(&token), "the token leaked: {output}");

    // The same call with the sandbox turned off reads it: the defect the sandbox closes.
    let (token, outputs) = cat_endpoint_file(&[("LUMINA_SHELL_CONFINEMENT", "off")]).await;
    let (_, is_error, output) = &outputs[0];
    assert!(!is_error && output.contains(&token), "{output}");
    assert!(output.contains("ran unconfined"), "{output}");
}

#[tokio::test]
async fn hello_carries_the_confinement_level() {
    let h = Harness::start("anthropic", vec![]).await;
    let (client, _notes) = h.client().await;
    let hello = client.hello("test").await.unwrap();
    assert_eq!(hello.confinement.as_ref(), Some(lumina_sandbox::probe()));
    assert_ne!(
        hello.confinement.map(|c| c.level),
        Some(lumina_protocol::ConfinementLevel::None)
    );
    h.stop().await;
}

#[test]
fn doctor_reports_the_confinement_level() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["doctor", "--json", "--app-root"])
        .arg(tmp.path())
        .current_dir(tmp.path())
        .env_remove("LUMINA_SHELL_CONFINEMENT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        serde_json::from_value::<lumina_protocol::Confinement>(report["confinement"].clone())
            .unwrap(),
        *lumina_sandbox::probe()
    );
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "shell confinement")
        .unwrap();
    assert_eq!(
        check["detail"].as_str().unwrap().split(' ').next(),
        Some(lumina_sandbox::probe().level.as_str())
    );

    // The text form leads with the same check.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["doctor", "--app-root"])
        .arg(tmp.path())
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().unwrap().contains(&format!(
            "shell confinement: {}",
            lumina_sandbox::probe().level
        )),
        "{text}"
    );
}
