//! shell: output, exit codes, timeouts, process-group kills, caps and the full-output log.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{call_with, error_text, ok_text, project};

#[tokio::test]
async fn shell_runs_in_the_project_root_and_logs_the_full_output() {
    let p = project();
    let out = p.call("shell", json!({"command": "echo hello; pwd"})).await;
    assert_eq!(ok_text(&out), format!("hello\n{}\n", p.root.display()));
    let log = p.ctx.results_dir.join("call-1.log");
    assert_eq!(out.metadata["exit_code"], json!(0));
    assert_eq!(
        out.metadata["full_output_path"],
        json!(log.display().to_string())
    );
    assert_eq!(out.metadata["truncated"], json!(false));
    assert_eq!(out.metadata["timed_out"], json!(false));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("hello\n{}\n", p.root.display())
    );
}

#[tokio::test]
async fn shell_interleaves_stdout_and_stderr_in_arrival_order() {
    let p = project();
    let out = p
        .call(
            "shell",
            json!({"command": "echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2"}),
        )
        .await;
    assert_eq!(ok_text(&out), "out1\nerr1\nout2\n");
}

#[tokio::test]
async fn shell_nonzero_exit_is_an_error_with_the_code() {
    let p = project();
    let out = p
        .call("shell", json!({"command": "echo failing >&2; exit 3"}))
        .await;
    assert_eq!(error_text(&out), "failing\n[command exited with code 3]\n");
    assert_eq!(out.metadata["exit_code"], json!(3));
}

#[tokio::test]
async fn shell_without_output_and_with_stdin_closed() {
    let p = project();
    // `cat` would hang on an inherited terminal; stdin is /dev/null.
    let out = p.call("shell", json!({"command": "cat"})).await;
    assert_eq!(ok_text(&out), "(no output)\n");
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_process_group() {
    let p = project();
    let started = Instant::now();
    let out = p
        .call(
            "shell",
            json!({"command": "sleep 30 & echo $! > bg.pid; echo started; wait", "timeout_ms": 300}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error_text(&out),
        "started\n[command timed out after 300 ms; it and its child processes were killed]\n"
    );
    assert_eq!(out.metadata["timed_out"], json!(true));
    assert_eq!(out.metadata["exit_code"], json!(null));
    let pid = p.read("bg.pid").trim().to_string();
    assert_process_gone(&pid).await;
}

#[tokio::test]
async fn shell_timeout_is_clamped_to_the_maximum() {
    let mut p = project();
    p.ctx.shell_max_timeout_ms = 200;
    let out = p
        .call(
            "shell",
            json!({"command": "sleep 10", "timeout_ms": 100000}),
        )
        .await;
    assert!(
        error_text(&out).contains("[command timed out after 200 ms;"),
        "{out:?}"
    );
    assert_eq!(out.metadata["timeout_ms"], json!(200));

    // Without timeout_ms the session default applies.
    let mut p = project();
    p.ctx.shell_timeout_ms = 150;
    let out = p.call("shell", json!({"command": "sleep 10"})).await;
    assert!(
        error_text(&out).contains("timed out after 150 ms"),
        "{out:?}"
    );
}

#[tokio::test]
async fn shell_cancel_interrupts_and_kills() {
    let p = project();
    let cancel = p.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out = p
        .call(
            "shell",
            json!({"command": "echo $$ > sh.pid; echo begun; sleep 30"}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        error_text(&out),
        "begun\n[command was interrupted; it and its child processes were killed]\n"
    );
    assert_eq!(out.metadata["interrupted"], json!(true));
    assert_process_gone(p.read("sh.pid").trim()).await;
}

#[tokio::test]
async fn shell_caps_output_for_the_model_but_logs_everything() {
    let mut p = project();
    p.ctx.output_cap_bytes = 100;
    p.ctx.call_id = "../../escape".to_string();
    let out = p
        .call(
            "shell",
            json!({"command": "for i in $(seq 1 2000); do echo line$i; done"}),
        )
        .await;
    let text = ok_text(&out);
    let log = p.ctx.results_dir.join("______escape.log");
    let full = std::fs::read_to_string(&log).unwrap();
    assert_eq!(full.lines().count(), 2000);
    assert!(text.starts_with("line1\nline2\n"), "{text}");
    assert!(text.contains(" bytes omitted] …\n"), "{text}");
    assert!(text.contains("line2000\n"), "{text}");
    assert!(text.contains(&format!(
        "[output truncated: {} bytes in total, the middle was left out; full output: {}]",
        full.len(),
        log.display()
    )));
    assert_eq!(out.metadata["truncated"], json!(true));
    assert_eq!(out.metadata["output_bytes"], json!(full.len()));
}

#[tokio::test]
async fn shell_does_not_wait_for_background_jobs_after_exit() {
    let p = project();
    let started = Instant::now();
    let out = p
        .call("shell", json!({"command": "sleep 3 & echo started"}))
        .await;
    assert_eq!(ok_text(&out), "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn shell_argument_errors_and_preview() {
    let p = project();
    let out = p.call("shell", json!({"command": "  "})).await;
    assert_eq!(error_text(&out), "command must not be empty");
    let out = p
        .call("shell", json!({"command": "ls", "timeout_ms": "5"}))
        .await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for shell: field `timeout_ms` must be an integer, got a string"
    );
    let out = call_with(&p.ctx, "shell", json!({"cmd": "ls"})).await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for shell: missing required field `command`"
    );
    assert_eq!(
        p.preview("shell", &json!({"command": "cargo test"}))
            .await
            .as_deref(),
        Some("cargo test")
    );
}

/// Waits until `pid` no longer runs (gone, or a zombie waiting to be reaped).
async fn assert_process_gone(pid: &str) {
    let stat = format!("/proc/{pid}/stat");
    for _ in 0..50 {
        match std::fs::read_to_string(&stat) {
            Err(_) => return,
            Ok(s)
                if s.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z')) =>
            {
                return
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("process {pid} is still running");
}
