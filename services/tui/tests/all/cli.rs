//! `lumina -p`, `--output-format`, `--list`, `--resume`, and the no-model exit.

use std::path::{Path, PathBuf};
use std::process::Output;

use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::{backend_bin, stop_backend};

struct Env {
    tmp: tempfile::TempDir,
    project: PathBuf,
    app: PathBuf,
    model_vars: Vec<(String, String)>,
}

impl Env {
    fn new(model: Option<&ScriptedModelServer>, api_type: &str) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let app = tmp.path().join("app");
        let model_vars = match model {
            Some(m) => vec![
                ("LUMINA_API_KEY".into(), "cli-test-key".into()),
                ("LUMINA_API_BASE_URL".into(), m.base_url()),
                ("LUMINA_API_MODEL".into(), "scripted".into()),
                ("LUMINA_API_TYPE".into(), api_type.into()),
            ],
            None => vec![],
        };
        Env {
            tmp,
            project,
            app,
            model_vars,
        }
    }

    async fn lumina(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lumina"));
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path())
            .env("LUMINA_HOME", &self.app)
            .env("LUMINA_BACKEND_BIN", backend_bin())
            .envs(self.model_vars.iter().cloned())
            .stdin(std::process::Stdio::null());
        tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
            .await
            .expect("lumina timed out")
            .unwrap()
    }

    fn endpoint_file(&self) -> PathBuf {
        self.app.join("state/run/backend.json")
    }
}

impl Drop for Env {
    /// Stops the backend `lumina` started in the background.
    fn drop(&mut self) {
        stop_backend(&self.app);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn agent_script() -> Vec<Turn> {
    vec![
        Turn::tool_call(
            "write_file",
            json!({"path": "notes/todo.md", "content": "- ship it\n"}),
        ),
        Turn::tool_call("shell", json!({"command": "wc -l notes/todo.md"})),
        Turn::text("Created notes/todo.md (1 line)."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_with_anthropic_writes_the_file_and_prints_the_answer() {
    let model = ScriptedModelServer::start(agent_script()).unwrap();
    let env = Env::new(Some(&model), "anthropic");
    let out = env
        .lumina(&["-p", "write the todo file", "--permission-mode", "bypass"])
        .await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Created notes/todo.md (1 line).\n");
    assert_eq!(read(&env.project.join("notes/todo.md")), "- ship it\n");
    assert_eq!(model.request_count(), 3);
    // The backend it started is recorded for the next invocation (mode 0600).
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.endpoint_file())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!read(&env.endpoint_file()).contains("cli-test-key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_with_openai_prints_one_json_object() {
    let model = ScriptedModelServer::start(agent_script()).unwrap();
    let env = Env::new(Some(&model), "openai_compatible");
    let out = env
        .lumina(&[
            "-p",
            "write the todo file",
            "--permission-mode",
            "bypass",
            "--output-format",
            "json",
        ])
        .await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let object: Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object");
    assert_eq!(object["result"], "Created notes/todo.md (1 line).");
    assert_eq!(object["is_error"], false);
    assert!(object["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(object["usage"]["input_tokens"].as_u64().is_some());
    assert_eq!(read(&env.project.join("notes/todo.md")), "- ship it\n");

    // --list shows the session; --resume continues it with its history.
    let list = env.lumina(&["--list", "--output-format", "json"]).await;
    assert!(list.status.success(), "{}", text(&list.stderr));
    let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["id"], object["session_id"]);
    model.push(Turn::text("continued"));
    let session_id = object["session_id"].as_str().unwrap();
    let resumed = env
        .lumina(&[
            "--resume",
            session_id,
            "-p",
            "and now?",
            "--output-format",
            "json",
        ])
        .await;
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let resumed: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(
        (resumed["session_id"].clone(), resumed["result"].clone()),
        (object["session_id"].clone(), json!("continued"))
    );
    let last = model.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("write the todo file") && last.contains("and now?"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_ask_is_denied_and_reported() {
    let model = ScriptedModelServer::start(vec![
        Turn::tool_call("write_file", json!({"path": "x.txt", "content": "x"})),
        Turn::text("I could not write the file."),
    ])
    .unwrap();
    let env = Env::new(Some(&model), "anthropic");
    let out = env
        .lumina(&["-p", "write x", "--output-format", "json"])
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let object: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(object["permission_denials"][0]["tool"], "write_file");
    assert!(!env.project.join("x.txt").exists());
    let plain = {
        model.push(Turn::tool_call(
            "write_file",
            json!({"path": "y.txt", "content": "y"}),
        ));
        model.push(Turn::text("no luck"));
        env.lumina(&["-p", "write y"]).await
    };
    assert!(
        text(&plain.stderr).contains("write_file"),
        "{}",
        text(&plain.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_model_configured_names_the_variables_and_exits_2() {
    let env = Env::new(None, "");
    let out = env.lumina(&["-p", "hello"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    for var in ["LUMINA_API_KEY", "LUMINA_API_BASE_URL", "LUMINA_API_MODEL"] {
        assert!(stderr.contains(var), "{stderr}");
    }
    assert!(out.stdout.is_empty());
    assert!(!env.endpoint_file().exists(), "no backend is started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interactive_ui_needs_a_terminal() {
    let env = Env::new(None, "");
    let out = env.lumina(&[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    assert!(!env.endpoint_file().exists(), "no backend is started");
}

/// A project team `duo`: `lead` (entry), `builder`, and `qa` (a gate).
fn write_duo(project: &Path) {
    let root = project.join(".Lumina/TEAM/duo");
    for (path, text) in [
        (
            "team.yaml",
            "name: duo\nentry_agent: lead\nagents: [lead, builder, qa]\n",
        ),
        ("agents/lead/agent.yaml", "name: lead\n"),
        ("agents/lead/system.md", "Lead.\n"),
        ("agents/builder/agent.yaml", "name: builder\n"),
        ("agents/builder/system.md", "Build.\n"),
        ("agents/qa/agent.yaml", "name: qa\n"),
        ("agents/qa/system.md", "Check.\n"),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_with_a_team_reports_members_gates_and_rounds() {
    let lead = "You lead the agent team";
    let model = ScriptedModelServer::start(vec![
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "builder", "task": "build"}),
        )
        .matching(lead),
        Turn::text("built it").matching("You are `builder`, a member"),
        Turn::tool_call("team_dispatch", json!({"agent": "qa", "task": "check"})).matching(lead),
        Turn::tool_call(
            "team_verdict",
            json!({"passed": true, "output": "all good"}),
        )
        .matching("You are `qa`, a member"),
        Turn::text("checked").matching("You are `qa`, a member"),
        Turn::tool_call("team_complete", json!({"summary": "done as a team"})).matching(lead),
    ])
    .unwrap();
    let env = Env::new(Some(&model), "anthropic");
    write_duo(&env.project);
    let out = env
        .lumina(&["-p", "build it", "--team", "duo", "--output-format", "json"])
        .await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let object: Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object");
    assert_eq!(object["result"], "done as a team");
    assert_eq!(
        object["team"],
        json!({
            "team": "duo",
            "members": [
                {"agent": "builder", "status": "completed", "summary": "built it"},
                {"agent": "qa", "status": "completed", "summary": "checked"},
            ],
            "gates": [{"name": "qa", "passed": true, "output": "all good"}],
            "follow_ups": [],
            "rounds": 2,
        })
    );

    // An unknown team: a clear error, nothing submitted.
    let requests = model.request_count();
    let out = env.lumina(&["-p", "x", "--team", "nobody"]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot enter the team `nobody`"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(model.request_count(), requests);
}
