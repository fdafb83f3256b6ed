//! The real `lumina` binary against the cluster with a JWT, through a gateway instance that
//! does not own the session: headless `-p`, the full-screen UI in tmux (with the permission
//! dialog), and clear messages for bad tokens.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lumina_protocol::methods::SessionCreateParams;
use lumina_testkit::Turn;
use serde_json::{json, Value};

use super::support::*;

/// `lumina`, built next to `lumina-backend` (scripts/test builds every binary first).
fn lumina_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_lumina-backend")).with_file_name("lumina");
    if !bin.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "lumina-tui", "--bin", "lumina"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    bin
}

fn lumina(cluster: &Cluster, url: &str, jwt: &str, args: &[&str]) -> std::process::Output {
    Command::new(lumina_bin())
        .args(args)
        .current_dir(&cluster.project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cluster.tmp.path())
        .env("LUMINA_HOME", cluster.tmp.path().join("client"))
        .env("LUMINA_BACKEND_URL", url)
        .env("LUMINA_JWT", jwt)
        .output()
        .unwrap()
}

async fn session_owned_by_i1(cluster: &Cluster, token: &str) -> String {
    let (owner, _n) = cluster.client(1, token).await;
    let id = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: Some("through a gateway".into()),
        })
        .await
        .unwrap()
        .id;
    assert_eq!(owner.session_info(&id).await.unwrap().owner, "i1");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_cli_through_a_gateway_and_clear_token_errors() {
    let cluster = Cluster::start(2, vec![Turn::text("answered by the owner")]).await;
    let token = cluster.user_token();
    let session = session_owned_by_i1(&cluster, &token).await;
    let gateway = cluster.instances[0].url();
    let out = lumina(
        &cluster,
        &gateway,
        &token,
        &[
            "--resume",
            &session,
            "-p",
            "hello",
            "--output-format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let object: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(object["result"], "answered by the owner");
    assert_eq!(object["session_id"], json!(session));

    let expired = {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims =
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "a", "tenant": TENANT, "exp": now - 60});
        let pem = std::fs::read_to_string(cluster.key_dir.join(lumina_auth::KEY_FILE)).unwrap();
        let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        use base64::Engine;
        let pkcs8 = base64::engine::general_purpose::STANDARD
            .decode(der)
            .unwrap();
        let info: Value = serde_json::from_str(
            &std::fs::read_to_string(cluster.key_dir.join(lumina_auth::CLUSTER_FILE)).unwrap(),
        )
        .unwrap();
        lumina_auth::sign_ed25519_pkcs8(&pkcs8, info["kid"].as_str().unwrap(), &claims).unwrap()
    };
    for bad in [expired.as_str(), "not-a-token"] {
        let out = lumina(&cluster, &gateway, bad, &["-p", "hello"]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("401") && stderr.contains("LUMINA_JWT"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains(bad),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "one clear line: {stderr}");
    }
}

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .env("LC_ALL", "C.UTF-8")
        .args(["-u", "-L", socket])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn wait_for(socket: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = tmux(socket, &["capture-pane", "-p"]);
        if ready(&screen) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn launcher(cluster: &Cluster, url: &str, jwt: &str, session: &str) -> PathBuf {
    let script = cluster.tmp.path().join("tui.sh");
    let text = format!(
        "#!/bin/sh\ncd '{}' || exit 9\nexec env -i TERM=\"$TERM\" PATH='{}' HOME='{}' LUMINA_HOME='{}' LUMINA_BACKEND_URL='{url}' LUMINA_JWT='{jwt}' '{}' --resume {session} --permission-mode ask\n",
        cluster.project.display(),
        std::env::var("PATH").unwrap_or_default(),
        cluster.tmp.path().display(),
        cluster.tmp.path().join("client").display(),
        lumina_bin().display(),
    );
    std::fs::write(&script, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

struct TmuxServer(String);

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_ui_works_through_a_gateway() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("notice: skipping: tmux is not installed (scripts/setup installs it)");
        return;
    }
    let cluster = Cluster::start(
        2,
        vec![
            Turn::tool_call(
                "write_file",
                json!({"path": "gateway.txt", "content": "via i0\n"}),
            ),
            Turn::text("Wrote gateway.txt through the gateway."),
        ],
    )
    .await;
    let token = cluster.user_token();
    let session = session_owned_by_i1(&cluster, &token).await;
    let script = launcher(&cluster, &cluster.instances[0].url(), &token, &session);
    let socket = format!("lumina-cluster-e2e-{}", std::process::id());
    let status = Command::new("tmux")
        .args([
            "-L",
            &socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
        ])
        .arg(format!("{}; echo EXITED $?; sleep 60", script.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let _server = TmuxServer(socket.clone());
    wait_for(&socket, "the UI", |s| s.contains("connected")).await;
    tmux(&socket, &["send-keys", "-l", "write the gateway file"]);
    tmux(&socket, &["send-keys", "Enter"]);
    let dialog = wait_for(&socket, "the permission dialog", |s| {
        s.contains("Permission needed")
    })
    .await;
    assert!(dialog.contains("gateway.txt"), "{dialog}");
    assert!(!Path::new(&cluster.project.join("gateway.txt")).exists());
    tmux(&socket, &["send-keys", "1"]);
    wait_for(&socket, "the answer", |s| {
        s.contains("Wrote gateway.txt through the gateway.")
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(cluster.project.join("gateway.txt")).unwrap(),
        "via i0\n"
    );

    // A wrong token: one clear line and a non-zero exit, no stack trace, no raw terminal.
    let bad = launcher(
        &cluster,
        &cluster.instances[0].url(),
        "wrong-token",
        &session,
    );
    let socket = format!("lumina-cluster-bad-{}", std::process::id());
    let status = Command::new("tmux")
        .args([
            "-L",
            &socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "20",
        ])
        .arg(format!("{}; echo EXITED $?; sleep 60", bad.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let _bad_server = TmuxServer(socket.clone());
    let screen = wait_for(&socket, "the exit", |s| s.contains("EXITED")).await;
    assert!(screen.contains("EXITED 1"), "{screen}");
    assert!(
        screen.contains("LUMINA_JWT") && screen.contains("401"),
        "{screen}"
    );
    assert!(
        !screen.contains("panicked") && !screen.contains("wrong-token"),
        "{screen}"
    );
}
