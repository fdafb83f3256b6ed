//! The `lumina-scripted-model` binary as end-to-end tests of other binaries use it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Kills the server if an assertion fails before the orderly SIGTERM.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[tokio::test]
async fn binary_prints_its_url_serves_the_script_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("lumina-scripted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(&script, r#"[{"text": "scripted"}]"#).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_lumina-scripted-model"))
        .arg("--script")
        .arg(&script)
        .args(["--default-text", "afterwards"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reap(child);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("LUMINA_SCRIPTED_MODEL_URL=")
        .expect("first stdout line announces the URL")
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let http = reqwest::Client::new();
    let mut answers = Vec::new();
    for _ in 0..2 {
        let body = http
            .post(format!("{url}/v1/chat/completions"))
            .json(&serde_json::json!({"model": "m", "stream": true}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let text: String = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .filter_map(|v| {
                v.pointer("/choices/0/delta/content")
                    .and_then(|c| c.as_str())
                    .map(str::to_string)
            })
            .collect();
        answers.push(text);
    }
    assert_eq!(answers, vec!["scripted", "afterwards"]);

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.0.wait().unwrap();
    assert!(exit.success(), "exit status after SIGTERM: {exit:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
