//! `lumina --web [--open]`: the real binary starts (or finds) the local backend and prints a
//! one-time console link that signs in once; `--open` hands it to `xdg-open`.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{backend_bin, stop_backend};

/// Runs `lumina` with `extra_path` before `PATH`.
async fn lumina(tmp: &Path, args: &[&str], extra_path: &Path) -> std::process::Output {
    let path = format!(
        "{}:{}",
        extra_path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lumina"));
    cmd.args(args)
        .current_dir(tmp)
        .env_clear()
        .env("PATH", path)
        .env("HOME", tmp)
        .env("LUMINA_HOME", tmp.join("app"))
        .env("LUMINA_BACKEND_BIN", backend_bin())
        .stdin(std::process::Stdio::null());
    tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("lumina timed out")
        .unwrap()
}

/// The status line and the `Location` and `Set-Cookie` headers of a GET.
async fn get(url: &str) -> (String, Option<String>, Option<String>) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let mut lines = response.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let mut location = None;
    let mut cookie = None;
    for line in lines.take_while(|l| !l.is_empty()) {
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "location" => location = Some(value.trim().to_string()),
                "set-cookie" => cookie = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    (status, location, cookie)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_prints_a_one_time_link_and_open_hands_it_to_xdg_open() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();

    let out = lumina(tmp.path(), &["--web"], &bin).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/console/login?ticket="),
        "{url}"
    );
    let endpoint = std::fs::read_to_string(tmp.path().join("app/state/run/backend.json")).unwrap();
    let token: serde_json::Value = serde_json::from_str(&endpoint).unwrap();
    assert!(!url.contains(token["token"].as_str().unwrap()));

    let (status, location, cookie) = get(&url).await;
    assert!(status.contains("303"), "{status}");
    assert_eq!(location.as_deref(), Some("/"));
    assert!(cookie.unwrap().contains("HttpOnly"));
    let (_, location, cookie) = get(&url).await;
    assert_eq!(
        location.as_deref(),
        Some("/?signin=refused"),
        "a ticket works once"
    );
    assert_eq!(cookie, None);

    // --open: a stand-in xdg-open records what it was given.
    let opener = bin.join("xdg-open");
    let opened = tmp.path().join("opened.txt");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > {}\n", opened.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = lumina(tmp.path(), &["--web", "--open"], &bin).await;
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_ne!(printed, url, "every --web mints a new ticket");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The stand-in's redirect creates the file before printf writes to it: wait for the
    // whole link, not for the file.
    let mut got = String::new();
    while got != printed && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        got = std::fs::read_to_string(&opened).unwrap_or_default();
    }
    assert_eq!(got, printed);

    stop_backend(&tmp.path().join("app"));
}
