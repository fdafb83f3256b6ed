//! shell through its sandbox (docs/sandbox.md): every escape fails confined and works with
//! `shell_confinement = off`, with the warning in the result.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::PathBuf;

use lumina_tools::{ConfinementMode, ToolOutput};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::{project, Project};

const TOKEN: &str = "bearer-token-of-the-backend";

/// A project plus, outside it, another session's workspace and an AppRoot-like tree.
struct Host {
    p: Project,
    other_ws: PathBuf,
    app_root: PathBuf,
}

fn host() -> Host {
    let mut p = project();
    let base = p.root.parent().unwrap().to_path_buf();
    let other_ws = base.join("other-session");
    let app_root = base.join("approot");
    std::fs::create_dir_all(&other_ws).unwrap();
    std::fs::create_dir_all(app_root.join("config")).unwrap();
    std::fs::create_dir_all(app_root.join("state/run")).unwrap();
    std::fs::write(other_ws.join("notes.txt"), "another session's notes").unwrap();
    std::fs::write(
        app_root.join("config/settings.json"),
        r#"{"api_key":"sk-secret"}"#,
    )
    .unwrap();
    std::fs::write(
        app_root.join("state/run/backend.json"),
        format!(r#"{{"url":"ws://127.0.0.1:9","token":"{TOKEN}"}}"#),
    )
    .unwrap();
    p.ctx.shell.protected = vec![app_root.clone()];
    p.ctx.shell.limits.processes = 32;
    p.ctx.shell.limits.file_size_bytes = 1 << 20;
    Host {
        p,
        other_ws,
        app_root,
    }
}

impl Host {
    async fn shell(&self, args: Value) -> ToolOutput {
        self.p.call("shell", args).await
    }

    fn off(&mut self) {
        self.p.ctx.shell.mode = ConfinementMode::Off;
    }
}

const OFF_WARNING: &str = "[warning: this command ran unconfined (shell_confinement = off)";

fn escapes(h: &Host) -> Vec<String> {
    vec![
        format!("cat {}/notes.txt", h.other_ws.display()),
        format!("cat {}/config/settings.json", h.app_root.display()),
        format!("cat {}/state/run/backend.json", h.app_root.display()),
        "cat /etc/shadow".to_string(),
        format!("echo planted > {}/planted.txt", h.other_ws.display()),
        format!("echo x > {}/outside.txt", h.p.outside().display()),
    ]
}

#[tokio::test]
async fn confined_commands_cannot_read_or_write_outside_the_project() {
    let mut h = host();
    for command in escapes(&h) {
        let out = h.shell(json!({ "command": command })).await;
        assert!(out.is_error, "`{command}` worked confined: {out:?}");
        assert!(out.content.contains("Permission denied"), "{out:?}");
        assert!(!out.content.contains(TOKEN) && !out.content.contains("sk-secret"));
        assert!(!out.content.contains("another session's notes"));
        assert_eq!(out.metadata["confinement"]["mode"], json!("best_effort"));
    }
    assert!(!h.other_ws.join("planted.txt").exists());
    assert!(!h.p.outside().join("outside.txt").exists());

    // Inside the project it works, and so does the private temporary directory.
    let out = h
        .shell(json!({"command": "echo made > made.txt && echo t > \"$TMPDIR/t\" && cat made.txt \"$HOME/t\""}))
        .await;
    assert_eq!((out.is_error, out.content.as_str()), (false, "made\nt\n"));

    // With confinement off the same commands work, and the result says so.
    h.off();
    for command in escapes(&h) {
        let out = h.shell(json!({ "command": command })).await;
        assert!(!out.is_error, "`{command}` failed unconfined: {out:?}");
        assert!(out.content.contains(OFF_WARNING), "{out:?}");
        assert_eq!(out.metadata["confinement"]["mode"], json!("off"));
    }
    let out = h
        .shell(json!({"command": format!("cat {}/state/run/backend.json", h.app_root.display())}))
        .await;
    assert!(out.content.contains(TOKEN));
}

#[tokio::test]
async fn the_network_needs_the_setting_and_the_call_to_ask_for_it() {
    let mut h = host();
    // A fixed port, where servers listen (with network a command may connect there, not to
    // the ephemeral range: docs/sandbox.md, "Network opt-in").
    let (low, _) = lumina_sandbox::ephemeral_ports();
    let listener = (21_000 + std::process::id() as u16 % 5_000..low)
        .find_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
        .expect("a free port below the ephemeral range");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("echo hi > /dev/tcp/127.0.0.1/{port}");
    let no_connection = |listener: &TcpListener| {
        assert_eq!(
            listener.accept().map(|_| ()).map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock),
            "the server saw a connection"
        );
    };

    let out = h.shell(json!({ "command": connect })).await;
    assert!(out.is_error, "{out:?}");
    no_connection(&listener);

    // Asking for the network without `shell_network` is refused before anything runs.
    let out = h
        .shell(json!({ "command": connect, "network": true }))
        .await;
    assert_eq!(
        (out.is_error, out.content.as_str()),
        (
            true,
            "network access is off for shell commands (the `shell_network` setting); run the \
             command without `network`"
        )
    );
    no_connection(&listener);

    // Allowed and asked for: it connects; the permission preview says so.
    h.p.ctx.shell.network_allowed = true;
    let args = json!({ "command": connect, "network": true });
    assert_eq!(
        h.p.preview("shell", &args).await.unwrap(),
        format!("{connect}\n[network: on — this command may use the network]")
    );
    let out = h.shell(args).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.metadata["confinement"]["network"], json!(true));
    assert!(listener.accept().is_ok());
    // Not asked for: still off.
    let out = h.shell(json!({ "command": connect })).await;
    assert!(out.is_error, "{out:?}");
    no_connection(&listener);

    h.off();
    let out = h.shell(json!({ "command": connect })).await;
    assert!(!out.is_error, "{out:?}");
    assert!(listener.accept().is_ok());
}

#[tokio::test]
async fn a_fork_bomb_and_a_huge_file_are_bounded() {
    let h = host();
    let out = h
        .shell(json!({"command": "bomb() { bomb | bomb & }; bomb; wait", "timeout_ms": 3000}))
        .await;
    // The shell itself returns at once (the bomb runs in the background), the bomb's
    // forks fail at the limit, and whatever it left is killed with the command's cgroup.
    assert!(
        out.content.contains("Resource temporarily unavailable"),
        "forks never failed: {}",
        &out.content[..out.content.len().min(600)]
    );
    assert_eq!(processes_in(&h.p.root), Vec::<u32>::new());
    // The tool (and this test process) still runs commands.
    let out = h.shell(json!({"command": "echo alive"})).await;
    assert_eq!(out.content, "alive\n");

    let out = h
        .shell(json!({"command": "head -c 10G /dev/zero > big.bin"}))
        .await;
    assert!(out.is_error, "{out:?}");
    assert_eq!(
        std::fs::metadata(h.p.root.join("big.bin")).unwrap().len(),
        1 << 20
    );
}

#[tokio::test]
async fn a_project_holding_the_app_root_is_refused() {
    let mut h = host();
    h.p.ctx.shell.protected = vec![h.p.root.join(".lumina")];
    let out = h.shell(json!({"command": "echo hi"})).await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("refused to run the command: "),
        "{}",
        out.content
    );
    assert!(out.content.contains(".lumina"), "{}", out.content);
}

#[tokio::test]
async fn required_confinement_runs_on_this_host() {
    let mut h = host();
    h.p.ctx.shell.mode = ConfinementMode::Required;
    let out = h
        .shell(json!({"command": "cat /etc/shadow; echo done"}))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.content.contains("Permission denied") && out.content.contains("done"));
    assert_eq!(out.metadata["confinement"]["mode"], json!("required"));
}

/// Processes whose working directory is `dir`.
fn processes_in(dir: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .ok()
                .as_deref()
                == Some(dir)
        })
        .collect()
}
