//! `shell{command, timeout_ms?}`: run a command with `bash -c` in the project root.
//!
//! The model sees stdout and stderr interleaved in arrival order, capped at
//! `ctx.output_cap_bytes` (head and tail kept, the middle elided); the complete output is
//! always written to `{results_dir}/{call_id}.log`. The command runs in its own process group
//! with stdin closed; a timeout or an interrupt kills the whole group.
//!
//! Unless `shell_confinement` is `off` (local profile only), the command runs in the
//! sandbox of `lumina-sandbox` (docs/sandbox.md): it reads and writes the project root and a
//! private temporary directory (its `TMPDIR` and `HOME`), reads the system's toolchain, and
//! nothing else; no network unless the call asks for it (`network: true`, allowed by
//! `shell_network`); CPU, memory, process and file-size limits. Its background jobs end with
//! it. Where the host cannot confine it, the cluster profile refuses and the local profile
//! says what is missing. Variables named `LUMINA_*` and `LLM_*` are removed from the
//! command's environment: they carry the runtime's own credentials (API keys, JWTs).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{ChildStderr, ChildStdout, Command};
use tokio::time::Instant;

use lumina_sandbox::{Enforcement, Policy, Sandbox};

use super::process_group::GroupGuard;
use super::shell_output::Sink;
use super::{args, fsutil};
use crate::{paths, ConfinementMode, Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "shell";
/// After the shell exits, how long to keep reading from background jobs that still hold
/// the pipes open before returning without them.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// After a kill, how long to wait for the group to die and the pipes to close.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);
/// Environment prefixes removed from commands: the runtime's secrets live there.
const SCRUBBED_ENV_PREFIXES: [&str; 2] = ["LUMINA_", "LLM_"];

/// Runs a shell command in the project root.
#[derive(Debug, Default, Clone, Copy)]
pub struct Shell;

#[derive(Debug, Deserialize)]
struct Args {
    command: String,
    timeout_ms: Option<u64>,
    #[serde(default)]
    network: bool,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command, run with `bash -c` in the project root. stdin is closed."},
            "timeout_ms": {"type": "integer", "minimum": 1, "description": "Timeout in milliseconds (the session default when omitted; capped at the session maximum)."},
            "network": {"type": "boolean", "description": "Let this command use the network (off by default; needs the `shell_network` setting and is shown in the permission request)."}
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for Shell {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Run a shell command (bash -c) in the project root with stdin closed. \
                          Returns combined stdout and stderr (long output is shortened; the \
                          full output is saved to a file) and fails on a non-zero exit code. \
                          The command and everything it starts are killed on timeout."
                .to_string(),
            input_schema: schema(),
            read_only: false,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        fsutil::flatten(run(ctx, args).await)
    }

    async fn preview(&self, _ctx: &ToolContext, args: &Value) -> Option<String> {
        let command = args.get("command").and_then(Value::as_str)?;
        if args.get("network").and_then(Value::as_bool) == Some(true) {
            Some(format!(
                "{command}\n[network: on — this command may use the network]"
            ))
        } else {
            Some(command.to_string())
        }
    }
}

/// How the wait for the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Exited,
    TimedOut,
    Interrupted,
}

async fn run(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    if args.command.trim().is_empty() {
        return Err(ToolOutput::error("command must not be empty"));
    }
    let timeout_ms = args
        .timeout_ms
        .unwrap_or(ctx.shell_timeout_ms)
        .min(ctx.shell_max_timeout_ms)
        .max(1);
    let root =
        paths::canonical_root(&ctx.project_root).map_err(|e| ToolOutput::error(e.to_string()))?;

    if args.network && !ctx.shell.network_allowed {
        return Err(ToolOutput::error(
            "network access is off for shell commands (the `shell_network` setting); run the \
             command without `network`",
        ));
    }
    let mut sandbox = confine(ctx, &root, args.network)?;

    let log_path = ctx
        .results_dir
        .join(format!("{}.log", log_file_stem(&ctx.call_id)));
    let (log, log_error) = match open_log(&log_path).await {
        Ok(file) => (Some(file), None),
        Err(e) => {
            tracing::warn!(path = %log_path.display(), error = %e, "cannot create shell output log");
            (None, Some(e.to_string()))
        }
    };

    let mut cmd = Command::new(shell_program());
    cmd.arg("-c")
        .arg(&args.command)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        let key_str = key.to_string_lossy();
        if SCRUBBED_ENV_PREFIXES.iter().any(|p| key_str.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }

    if let Some(sandbox) = sandbox.as_mut() {
        sandbox.apply(&mut cmd);
    }

    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        ToolOutput::error(if sandbox.is_some() {
            format!("failed to start the shell in its sandbox: {e}")
        } else {
            format!("failed to start the shell: {e}")
        })
    })?;
    let mut guard = GroupGuard::new(child.id());
    let mut pipes = Pipes {
        out: child.stdout.take(),
        err: child.stderr.take(),
    };
    let mut sink = Sink::new(ctx.output_cap_bytes, log, log_error);

    let deadline = started + Duration::from_millis(timeout_ms);
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let mut drain_until: Option<Instant> = None;
    let ending = loop {
        if status.is_some() && pipes.closed() {
            break Ending::Exited;
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => break Ending::Interrupted,
            _ = tokio::time::sleep_until(deadline) => break Ending::TimedOut,
            chunk = pipes.next_chunk(), if !pipes.closed() => {
                if let Some(chunk) = chunk {
                    sink.push(&chunk).await;
                }
            }
            exited = child.wait(), if status.is_none() => {
                status = Some(exited);
                drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = sleep_until_opt(drain_until) => break Ending::Exited,
        }
    };

    if ending == Ending::Exited {
        guard.disarm();
    } else {
        guard.kill();
        let until = Instant::now() + DRAIN_AFTER_KILL;
        // Reap the leader and collect what the group wrote before it died.
        let _ = tokio::time::timeout_at(until, child.wait()).await;
        while !pipes.closed() {
            tokio::select! {
                chunk = pipes.next_chunk() => {
                    if let Some(chunk) = chunk {
                        sink.push(&chunk).await;
                    }
                }
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let captured = sink.finish().await;
    let confinement = describe_confinement(ctx, sandbox.as_ref(), args.network);
    if let Some(sandbox) = sandbox {
        // Kills what the command left in its cgroup; blocking file-system work.
        let _ = tokio::task::spawn_blocking(move || sandbox.finish()).await;
    }

    let mut content = if captured.text.is_empty() {
        "(no output)\n".to_string()
    } else {
        captured.text
    };
    if !content.ends_with('\n') {
        content.push('\n');
    }
    let full_output_path = if captured.log_error.is_none() {
        Some(log_path.display().to_string())
    } else {
        None
    };
    if captured.truncated {
        content.push_str(&format!(
            "[output truncated: {} bytes in total, the middle was left out; full output: {}]\n",
            captured.total_bytes,
            full_output_path.as_deref().unwrap_or("not saved")
        ));
    }
    if let Some(e) = &captured.log_error {
        content.push_str(&format!("[the full output could not be saved: {e}]\n"));
    }

    if let Some(note) = &confinement.note {
        content.push_str(note);
    }

    let mut exit_code = None;
    let is_error = match ending {
        Ending::TimedOut => {
            content.push_str(&format!(
                "[command timed out after {timeout_ms} ms; it and its child processes were killed]\n"
            ));
            true
        }
        Ending::Interrupted => {
            content.push_str("[command was interrupted; it and its child processes were killed]\n");
            true
        }
        Ending::Exited => match status {
            Some(Ok(status)) => describe_exit(status, &mut content, &mut exit_code),
            Some(Err(e)) => {
                content.push_str(&format!("[could not collect the exit status: {e}]\n"));
                true
            }
            None => true,
        },
    };

    Ok(ToolOutput {
        content,
        is_error,
        metadata: json!({
            "exit_code": exit_code,
            "full_output_path": full_output_path,
            "truncated": captured.truncated,
            "output_bytes": captured.total_bytes,
            "timed_out": ending == Ending::TimedOut,
            "interrupted": ending == Ending::Interrupted,
            "timeout_ms": timeout_ms,
            "duration_ms": duration_ms,
            "confinement": confinement.metadata,
        }),
    })
}

/// Prepares the sandbox for one command, or `None` when `shell_confinement` is `off`.
fn confine(ctx: &ToolContext, root: &Path, network: bool) -> Result<Option<Sandbox>, ToolOutput> {
    let enforcement = match ctx.shell.mode {
        ConfinementMode::Off => {
            tracing::warn!(session_id = %ctx.session_id, "shell command runs unconfined");
            return Ok(None);
        }
        ConfinementMode::Required => Enforcement::Required,
        ConfinementMode::BestEffort => Enforcement::BestEffort,
    };
    let policy = Policy {
        read_write: vec![root.to_path_buf()],
        read_only: ctx.shell.read_only.clone(),
        protected: ctx.shell.protected.clone(),
        network,
        limits: ctx.shell.limits,
        enforcement,
    };
    match Sandbox::prepare(&policy) {
        Ok(sandbox) => Ok(Some(sandbox)),
        Err(e) => {
            tracing::warn!(session_id = %ctx.session_id, error = %e, "shell command refused");
            Err(ToolOutput::error(format!(
                "refused to run the command: {e}. The shell never runs commands unconfined \
                 unless the user sets `shell_confinement` to `off` (local profile only)."
            ))
            .with_metadata(json!({"confinement": {"refused": e.to_string()}})))
        }
    }
}

/// The result's note on confinement and its `confinement` metadata.
struct ConfinementInfo {
    note: Option<String>,
    metadata: Value,
}

fn describe_confinement(
    ctx: &ToolContext,
    sandbox: Option<&Sandbox>,
    network: bool,
) -> ConfinementInfo {
    match sandbox {
        None => ConfinementInfo {
            note: Some(
                "[warning: this command ran unconfined (shell_confinement = off): it could read \
                 and write everything the backend's user can, and use the network]\n"
                    .to_string(),
            ),
            metadata: json!({"mode": "off", "level": "none", "network": true}),
        },
        Some(sandbox) => {
            let missing = sandbox.missing();
            let note = (!missing.is_empty()).then(|| {
                format!(
                    "[confinement is partial on this host: {}]\n",
                    missing.join("; ")
                )
            });
            let mode = match ctx.shell.mode {
                ConfinementMode::Required => "required",
                _ => "best_effort",
            };
            ConfinementInfo {
                note,
                metadata: json!({
                    "mode": mode,
                    "level": sandbox.level().as_str(),
                    "network": network,
                    "missing": missing,
                }),
            }
        }
    }
}

/// Appends the exit line and returns whether the command failed.
fn describe_exit(status: ExitStatus, content: &mut String, exit_code: &mut Option<i32>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        *exit_code = Some(code);
        if code != 0 {
            content.push_str(&format!("[command exited with code {code}]\n"));
        }
        code != 0
    } else {
        let signal = status.signal().unwrap_or(0);
        content.push_str(&format!("[command was killed by signal {signal}]\n"));
        true
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `bash` when it is on PATH (or in /bin), else `sh`: minimal containers may lack bash.
fn shell_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let on_path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default();
        on_path
            .into_iter()
            .chain([PathBuf::from("/bin"), PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("bash"))
            .find(|candidate| candidate.is_file())
            .unwrap_or_else(|| PathBuf::from("sh"))
    })
}

/// Call ids come from the model provider; keep them from naming a path outside the
/// results directory.
fn log_file_stem(call_id: &str) -> String {
    let clean: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "call".to_string()
    } else {
        clean
    }
}

async fn open_log(path: &Path) -> std::io::Result<tokio::fs::File> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    tokio::fs::File::create(path).await
}

/// The command's stdout and stderr, read in arrival order.
struct Pipes {
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
}

impl Pipes {
    fn closed(&self) -> bool {
        self.out.is_none() && self.err.is_none()
    }

    /// The next chunk from whichever stream has data; `None` once both are closed.
    /// Cancel-safe: it only awaits cancel-safe reads and returns the bytes it read.
    async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.closed() {
                return None;
            }
            let (from_out, read) = tokio::select! {
                read = read_some(&mut self.out) => (true, read),
                read = read_some(&mut self.err) => (false, read),
            };
            match read {
                Ok(chunk) if !chunk.is_empty() => return Some(chunk),
                // EOF or a read error: that stream is done.
                _ => {
                    if from_out {
                        self.out = None;
                    } else {
                        self.err = None;
                    }
                }
            }
        }
    }
}

/// One read from an open stream; never completes for a closed one.
async fn read_some<R: AsyncRead + Unpin>(stream: &mut Option<R>) -> std::io::Result<Vec<u8>> {
    let Some(stream) = stream else {
        return std::future::pending().await;
    };
    let mut buf = vec![0u8; 16 * 1024];
    let n = stream.read(&mut buf).await?;
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn call_ids_cannot_escape_the_results_dir() {
        assert_eq!(log_file_stem("toolu_01AbC"), "toolu_01AbC");
        assert_eq!(log_file_stem("../../etc/passwd"), "______etc_passwd");
        assert_eq!(log_file_stem(""), "call");
    }
}
