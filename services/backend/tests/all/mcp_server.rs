//! `lumina-backend mcp-server`: the real binary as a child, talking to an in-process local
//! backend whose model is the scripted server. Driven with raw JSON-RPC lines (stdio) and raw
//! HTTP requests (`--http`), plus the conformance suite's protocol scenarios.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::support::*;

mod http;

pub(super) fn mcp_server(h: &Harness, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lumina-backend"));
    command
        .arg("mcp-server")
        .args(args)
        .arg("--url")
        .arg(&h.url)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", h.tmp.path())
        .env("LUMINA_LOG", "warn")
        .current_dir(&h.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command
}

pub(super) fn token_file(h: &Harness) -> PathBuf {
    let path = h.tmp.path().join("token");
    std::fs::write(&path, format!("{}\n", h.token)).unwrap();
    path
}

struct StdioMcp {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: i64,
}

impl StdioMcp {
    fn spawn(h: &Harness) -> StdioMcp {
        let tokens = token_file(h);
        let child = mcp_server(h, &["--stdio", "--token-file", tokens.to_str().unwrap()])
            .spawn()
            .unwrap();
        Self::attach(child)
    }

    fn attach(mut child: Child) -> StdioMcp {
        StdioMcp {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            _child: child,
            next_id: 1,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
                .await
                .expect("no answer from mcp-server within 30 s")
                .unwrap()
                .expect("mcp-server closed stdout");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let reply = self
            .call("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        reply["result"].clone()
    }
}

#[tokio::test]
async fn stdio_session_prompt_read_and_list() {
    let h = Harness::start("anthropic", vec![Turn::text("Hello from Lumina.")]).await;
    let mut mcp = StdioMcp::spawn(&h);
    let init = mcp
        .call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "another-agent", "version": "1"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "lumina");
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let tools = mcp.call("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            "lumina_session_start",
            "lumina_prompt",
            "lumina_session_read",
            "lumina_sessions"
        ]
    );

    let started = mcp
        .tool(
            "lumina_session_start",
            json!({"project_root": h.project, "title": "from mcp"}),
        )
        .await;
    let session_id = started["content"][0]["text"].as_str().unwrap().to_string();
    assert_eq!(started["structuredContent"]["session_id"], session_id);

    let answer = mcp
        .tool(
            "lumina_prompt",
            json!({"session_id": session_id, "prompt": "say hello", "request_id": "req-1"}),
        )
        .await;
    assert_eq!(answer["content"][0]["text"], "Hello from Lumina.");
    assert_eq!(answer["structuredContent"]["status"], "completed");
    assert_eq!(answer.get("isError"), None);
    let run_id = answer["structuredContent"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();

    // The same request id is idempotent: the original run, no second model call.
    let again = mcp
        .tool(
            "lumina_prompt",
            json!({"session_id": session_id, "prompt": "say hello", "request_id": "req-1"}),
        )
        .await;
    assert_eq!(again["structuredContent"]["run_id"], run_id.as_str());
    assert_eq!(again["structuredContent"]["created"], false);
    assert_eq!(again["content"][0]["text"], "Hello from Lumina.");
    assert_eq!(h.model.request_count(), 1);

    let read = mcp
        .tool("lumina_session_read", json!({"session_id": session_id}))
        .await;
    let text = read["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("user: say hello"), "{text}");
    assert!(text.contains("assistant: Hello from Lumina."), "{text}");
    assert!(text.contains(&format!("run {run_id} completed")), "{text}");

    let list = mcp.tool("lumina_sessions", json!({})).await;
    assert!(list["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains(&session_id));

    let missing = mcp
        .tool(
            "lumina_prompt",
            json!({"session_id": "no-such-session", "prompt": "x"}),
        )
        .await;
    assert_eq!(missing["isError"], true);
    let invalid = mcp
        .call(
            "tools/call",
            json!({"name": "lumina_prompt", "arguments": {}}),
        )
        .await;
    assert_eq!(invalid["error"]["code"], -32602);
    h.stop().await;
}

#[tokio::test]
async fn permission_asks_become_reported_denials() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("write_file", json!({"path": "x.txt", "content": "x"})),
            Turn::text("I could not write the file."),
        ],
    )
    .await;
    let mut mcp = StdioMcp::spawn(&h);
    mcp.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}),
    )
    .await;
    let started = mcp
        .tool("lumina_session_start", json!({"project_root": h.project}))
        .await;
    let session_id = started["content"][0]["text"].as_str().unwrap().to_string();
    let answer = mcp
        .tool(
            "lumina_prompt",
            json!({"session_id": session_id, "prompt": "write x.txt"}),
        )
        .await;
    assert_eq!(answer["content"][0]["text"], "I could not write the file.");
    let denials = &answer["structuredContent"]["denials"];
    assert_eq!(denials[0]["tool"], "write_file");
    assert_eq!(denials[0]["by"], "headless");
    assert!(answer["content"][1]["text"]
        .as_str()
        .unwrap()
        .contains("permission denied for write_file (headless)"));
    assert!(!h.path("x.txt").exists());
    h.stop().await;
}

#[tokio::test]
async fn without_a_url_the_local_backend_is_found_or_started() {
    let (tmp, project, app) = crate::crash::dirs();
    let child = Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["mcp-server", "--stdio", "--app-root"])
        .arg(&app)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", tmp.path())
        .env("LUMINA_LOG", "warn")
        .current_dir(&project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut mcp = StdioMcp::attach(child);
    mcp.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}),
    )
    .await;
    // No backend runs for this AppRoot: the first tool call starts one.
    let started = mcp.tool("lumina_session_start", json!({})).await;
    assert_eq!(started.get("isError"), None, "{started}");
    let session_id = started["content"][0]["text"].as_str().unwrap().to_string();
    // The project defaults to the MCP server's working directory.
    let root = started["structuredContent"]["project_root"]
        .as_str()
        .unwrap();
    assert_eq!(
        Path::new(root).canonicalize().unwrap(),
        project.canonicalize().unwrap()
    );
    let list = mcp.tool("lumina_sessions", json!({})).await;
    assert!(list["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains(&session_id));

    // The backend outlives the MCP server (own process group); stop it.
    let file = lumina_backend::endpoint::read(&app.join("state/run/backend.json"))
        .expect("the started backend wrote its endpoint file");
    drop(mcp);
    let _ = std::process::Command::new("kill")
        .arg(file.pid.to_string())
        .status();
    for _ in 0..100 {
        if !Path::new(&format!("/proc/{}", file.pid)).exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
