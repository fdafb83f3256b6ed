//! Each escape a command might try fails under the sandbox and works without it.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::time::Duration;

use lumina_sandbox::{probe, ConfinementLevel, Error, ProcessLimit, Sandbox};
use pretty_assertions::assert_eq;

use crate::{host, run, SHORT, TOKEN};

/// This machine (and CI) runs the tests as root on a kernel with Landlock, seccomp and
/// network namespaces; a weaker host would make every test below meaningless.
#[test]
fn this_host_confines_filesystem_network_and_limits() {
    let report = probe();
    assert!(report.landlock_abi >= 1, "{report:?}");
    assert!(report.seccomp, "{report:?}");
    assert!(report.rlimits);
    assert_ne!(report.level, ConfinementLevel::None, "{report:?}");
}

#[tokio::test]
async fn reading_outside_the_workspace_fails() {
    let h = host();
    let policy = h.policy();
    let app = h.app_root.display();
    let attempts = [
        format!("cat {}/secret.txt", h.other_ws.display()),
        format!("ls {}", h.other_ws.display()),
        format!("cat {app}/config/settings.json"),
        format!("cat {app}/state/run/backend.json"),
        "cat /etc/shadow".to_string(),
        format!("cat /proc/{}/environ", std::process::id()),
        "cat /proc/1/cmdline".to_string(),
        "ls /tmp".to_string(),
    ];
    for script in &attempts {
        let ran = run(Some(&policy), &h.ws, script, SHORT).await;
        assert!(!ran.ok(), "`{script}` worked confined: {ran:?}");
        assert!(!ran.output.contains(TOKEN), "`{script}`: {ran:?}");
        assert!(
            !ran.output.contains("session's secret"),
            "`{script}`: {ran:?}"
        );
        assert!(!ran.output.contains("sk-x"), "`{script}`: {ran:?}");
    }
    // The same reads work unconfined (the test runs as root, so /etc/shadow too).
    for script in &attempts[..5] {
        let ran = run(None, &h.ws, script, SHORT).await;
        assert!(ran.ok(), "`{script}` failed unconfined: {ran:?}");
    }
    // Inside the workspace and the toolchain everything works.
    let ran = run(
        Some(&policy),
        &h.ws,
        "cat mine.txt && ls /usr/bin >/dev/null && head -c 4 /dev/urandom | wc -c && grep -c root /etc/passwd",
        SHORT,
    )
    .await;
    assert_eq!((ran.code, ran.output.as_str()), (Some(0), "my file4\n1\n"));
}

#[tokio::test]
async fn writing_outside_the_workspace_fails() {
    let h = host();
    let policy = h.policy();
    let outside = h.base.join("outside.txt");
    let tmp_file = std::env::temp_dir().join(format!("lumina-escape-{}", std::process::id()));
    for script in [
        format!("echo x > {}", outside.display()),
        format!("echo x > {}", tmp_file.display()),
        format!("echo x > {}/planted.txt", h.other_ws.display()),
        format!("rm -f {}/config/settings.json", h.app_root.display()),
    ] {
        let ran = run(Some(&policy), &h.ws, &script, SHORT).await;
        assert!(!ran.ok(), "`{script}` worked confined: {ran:?}");
    }
    assert!(!outside.exists() && !tmp_file.exists());
    assert!(!h.other_ws.join("planted.txt").exists());
    assert!(h.app_root.join("config/settings.json").exists());

    // Inside the workspace and the private temporary directory writes work.
    let ran = run(
        Some(&policy),
        &h.ws,
        "echo new > new.txt && mkdir -p sub && mv new.txt sub/ && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" \"$HOME/t\"",
        SHORT,
    )
    .await;
    assert_eq!((ran.code, ran.output.as_str()), (Some(0), "t\nt\n"));
    assert_eq!(
        std::fs::read_to_string(h.ws.join("sub/new.txt")).unwrap(),
        "new\n"
    );

    // Unconfined, the first write works.
    let ran = run(
        None,
        &h.ws,
        &format!("echo x > {}", outside.display()),
        SHORT,
    )
    .await;
    assert!(ran.ok() && outside.exists(), "{ran:?}");
}

#[tokio::test]
async fn the_network_is_off_unless_allowed() {
    let h = host();
    // A server on a fixed port (where servers listen) and one on port 0 (where the browser's
    // DevTools endpoint and proxy listen: the kernel's ephemeral range).
    let (low, _) = lumina_sandbox::ephemeral_ports();
    let fixed = (20_000 + std::process::id() as u16 % 5_000..low)
        .find_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
        .expect("a free port below the ephemeral range");
    let ephemeral = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut commands = Vec::new();
    for listener in [&fixed, &ephemeral] {
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        commands.push(format!("echo hi > /dev/tcp/127.0.0.1/{port}"));
    }
    let no_connection = |listener: &TcpListener| {
        assert_eq!(
            listener.accept().map(|_| ()).map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock),
            "the server saw a connection"
        );
    };

    for (connect, listener) in commands.iter().zip([&fixed, &ephemeral]) {
        let ran = run(Some(&h.policy()), &h.ws, connect, SHORT).await;
        assert!(!ran.ok(), "connected while confined: {ran:?}");
        no_connection(listener);
    }

    // Opted in: the same command connects to the fixed port, still confined otherwise; the
    // ephemeral range stays closed.
    let mut policy = h.policy();
    policy.network = true;
    let ran = run(Some(&policy), &h.ws, &commands[0], SHORT).await;
    assert!(ran.ok(), "{ran:?}");
    assert!(fixed.accept().is_ok(), "no connection with network on");
    let ran = run(Some(&policy), &h.ws, &commands[1], SHORT).await;
    assert!(!ran.ok(), "reached an ephemeral port: {ran:?}");
    assert!(ran.output.contains("Permission denied"), "{ran:?}");
    no_connection(&ephemeral);
    let ran = run(Some(&policy), &h.ws, "cat ../other-ws/secret.txt", SHORT).await;
    assert!(!ran.ok(), "{ran:?}");

    // Unconfined it connects to both.
    for (connect, listener) in commands.iter().zip([&fixed, &ephemeral]) {
        let ran = run(None, &h.ws, connect, SHORT).await;
        assert!(ran.ok(), "{ran:?}");
        assert!(listener.accept().is_ok());
    }
}

#[tokio::test]
async fn a_fork_bomb_is_bounded() {
    let h = host();
    let report = probe();
    if report.process_limit == ProcessLimit::None {
        panic!("no process bound on this host: {report:?}");
    }
    let mut policy = h.policy();
    policy.limits.processes = 32;
    // The bomb's errors go to a file in the workspace (the pipe would be lost on the kill).
    let ran = run(
        Some(&policy),
        &h.ws,
        "exec 2>bomb.log; bomb() { bomb | bomb & }; bomb; wait",
        Duration::from_secs(3),
    )
    .await;
    assert!(!ran.ok(), "{ran:?}");
    let log = std::fs::read_to_string(h.ws.join("bomb.log")).unwrap_or_default();
    assert!(
        log.contains("Resource temporarily unavailable"),
        "forks never failed: {}",
        &log[..log.len().min(500)]
    );
    // The test process is unharmed: it still starts processes.
    let ran = run(None, &h.ws, "echo alive", SHORT).await;
    assert_eq!(ran.output, "alive\n");
}

#[tokio::test]
async fn a_huge_file_is_cut_at_the_file_size_limit() {
    let h = host();
    let policy = h.policy(); // 1 MiB
    let ran = run(
        Some(&policy),
        &h.ws,
        "head -c 10G /dev/zero > big.bin",
        SHORT,
    )
    .await;
    assert!(!ran.ok(), "{ran:?}");
    let size = std::fs::metadata(h.ws.join("big.bin")).unwrap().len();
    assert_eq!(size, 1 << 20);
    // Without confinement a small file of the same kind is written.
    let ran = run(None, &h.ws, "head -c 2M /dev/zero > big.bin", SHORT).await;
    assert!(ran.ok(), "{ran:?}");
    assert_eq!(
        std::fs::metadata(h.ws.join("big.bin")).unwrap().len(),
        2 << 20
    );
}

#[tokio::test]
async fn limits_and_privileges_are_those_of_the_policy() {
    let h = host();
    let mut policy = h.policy();
    policy.limits.address_space_bytes = 2 << 30;
    let ran = run(
        Some(&policy),
        &h.ws,
        "ulimit -t; ulimit -v; ulimit -u; ulimit -f; ulimit -H -t",
        SHORT,
    )
    .await;
    // ulimit -v and -f count KiB and 1024-byte blocks.
    assert_eq!(ran.output, "30\n2097152\n64\n1024\n31\n");
    // Raising a hard limit needs CAP_SYS_RESOURCE, which the command no longer has, and
    // namespaces and mounts are refused.
    for script in [
        "ulimit -H -f unlimited",
        "unshare -n true",
        "mount -t tmpfs none sub",
    ] {
        let ran = run(Some(&policy), &h.ws, script, SHORT).await;
        assert!(!ran.ok(), "`{script}` worked: {ran:?}");
    }
}

#[test]
fn a_protected_path_inside_a_granted_directory_is_refused() {
    let h = host();
    let mut policy = h.policy();
    policy.protected = vec![h.ws.join("state")];
    std::fs::create_dir_all(h.ws.join("state")).unwrap();
    match Sandbox::prepare(&policy) {
        Err(Error::ProtectedPathReachable { protected, granted }) => {
            assert_eq!(protected, h.ws.join("state"));
            assert_eq!(granted, h.ws);
        }
        other => panic!("expected ProtectedPathReachable, got {other:?}"),
    }
}

#[test]
fn the_temporary_directory_goes_with_the_sandbox() {
    let h = host();
    let sandbox = Sandbox::prepare(&h.policy()).unwrap();
    let dir = sandbox.temp_dir().to_path_buf();
    assert!(dir.is_dir());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(dir.metadata().unwrap().permissions().mode() & 0o777, 0o700);
    sandbox.finish();
    assert!(!dir.exists());
}

#[tokio::test]
async fn extra_read_paths_are_readable_not_writable() {
    let h = host();
    let mut policy = h.policy();
    policy.read_only = vec![h.other_ws.clone(), h.base.join("missing")];
    let sandbox = Sandbox::prepare(&policy).unwrap();
    assert!(sandbox
        .missing()
        .iter()
        .any(|m| m.starts_with("read path `") && m.contains("missing")));
    sandbox.finish();
    let other = h.other_ws.display();
    let ran = run(
        Some(&policy),
        &h.ws,
        &format!("cat {other}/secret.txt"),
        SHORT,
    )
    .await;
    assert_eq!(ran.output, "other session's secret");
    let ran = run(
        Some(&policy),
        &h.ws,
        &format!("echo x > {other}/new"),
        SHORT,
    )
    .await;
    assert!(!ran.ok(), "{ran:?}");
    // A read path holding the AppRoot is refused outright.
    policy.read_only = vec![h.base.clone()];
    assert!(matches!(
        Sandbox::prepare(&policy),
        Err(Error::ProtectedPathReachable { .. })
    ));
}
