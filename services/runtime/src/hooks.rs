//! User and project hooks (settings `hooks`): commands run at fixed points of a session.
//!
//! | event | when | exit code 2 |
//! |---|---|---|
//! | `session_start` | after `session.created` | — |
//! | `user_prompt_submit` | when a run starts, before its first model request; and when a steering message is submitted, before it is journaled (payload `steering: true`) | fails the run (`blocked_by_hook`); refuses the steering submit (`forbidden`) |
//! | `pre_tool_use` | before a tool call's permission check (`matcher` = tool-name glob) | blocks the call; the model sees `blocked by hook: <stderr>` |
//! | `post_tool_use` | after a tool ran (`matcher` as above) | — |
//! | `stop` | when a run ends, before its terminal event | — |
//!
//! Each hook runs `sh -c <command>` in the project root, in its own process group (killed
//! whole on timeout or interrupt), with the event as JSON on stdin and the runtime's own
//! `LUMINA_*`/`LLM_*` variables removed from its environment (they hold credentials). Every
//! run is journaled as `hook.completed`; a non-zero exit that blocks nothing, a timeout or a
//! failure to start is also journaled as a `warning`. Hooks of one event run in order; the
//! first that blocks stops the rest.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use globset::{Glob, GlobMatcher};
use lumina_protocol::Event;
use lumina_tools::builtin::process_group::GroupGuard;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::journal::SessionJournal;
use crate::Result;

/// Default time a hook may run.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Bytes kept of each of stdout and stderr.
const STREAM_CAP: usize = 8 * 1024;
/// Characters of the command shown in `hook.completed`.
const COMMAND_SHOWN: usize = 200;
/// After the hook exits, how long to wait for children that still hold its pipes.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
const SCRUBBED_ENV_PREFIXES: [&str; 2] = ["LUMINA_", "LLM_"];

/// The points at which hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::Stop => "stop",
        }
    }

    /// Whether exit code 2 blocks what the event announces.
    pub fn can_block(self) -> bool {
        matches!(self, HookEvent::UserPromptSubmit | HookEvent::PreToolUse)
    }
}

#[derive(Debug, Clone)]
struct Hook {
    event: HookEvent,
    command: String,
    timeout: Duration,
    matcher: Option<GlobMatcher>,
}

/// The hooks of one settings snapshot, compiled.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    hooks: Vec<Hook>,
}

impl HookSet {
    /// Compiles the settings' hooks; a hook whose matcher is not a valid glob is left out
    /// and reported in the returned messages.
    pub fn from_settings(settings: &lumina_config::Hooks) -> (Self, Vec<String>) {
        let mut hooks = Vec::new();
        let mut problems = Vec::new();
        let lists = [
            (HookEvent::SessionStart, &settings.session_start),
            (HookEvent::UserPromptSubmit, &settings.user_prompt_submit),
            (HookEvent::PreToolUse, &settings.pre_tool_use),
            (HookEvent::PostToolUse, &settings.post_tool_use),
            (HookEvent::Stop, &settings.stop),
        ];
        for (event, entries) in lists {
            for entry in entries {
                let matcher = match entry.matcher.as_deref().map(str::trim) {
                    None | Some("") | Some("*") => None,
                    Some(glob) => match Glob::new(glob) {
                        Ok(g) => Some(g.compile_matcher()),
                        Err(e) => {
                            problems.push(format!(
                                "hook `{}` ({}) left out: bad matcher `{glob}`: {e}",
                                clip(&entry.command, COMMAND_SHOWN),
                                event.as_str()
                            ));
                            continue;
                        }
                    },
                };
                hooks.push(Hook {
                    event,
                    command: entry.command.clone(),
                    timeout: Duration::from_millis(entry.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
                    matcher,
                });
            }
        }
        (Self { hooks }, problems)
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    fn matching<'a>(
        &'a self,
        event: HookEvent,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event
                && match (&h.matcher, tool) {
                    (None, _) => true,
                    (Some(m), Some(tool)) => m.is_match(tool),
                    (Some(_), None) => false,
                }
        })
    }
}

/// Where hooks run and what their events are tied to.
pub struct HookScope<'a> {
    pub journal: &'a SessionJournal,
    /// The stream `hook.completed` goes to (the run's: `main` or a sub-agent's).
    pub stream: &'a str,
    pub project_root: &'a Path,
    pub run_id: Option<&'a str>,
    pub call_id: Option<&'a str>,
    pub tool: Option<&'a str>,
    /// Kills a running hook (the run was interrupted).
    pub cancel: Option<&'a CancellationToken>,
}

/// What the hooks decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    Continue,
    /// A hook exited with code 2 on an event that can be blocked; the reason is its stderr.
    Blocked(String),
}

/// Runs the hooks of `event` (those whose matcher fits `scope.tool`) in order with `payload`
/// (an object; the common fields are added) and journals each one.
pub async fn run_hooks(
    set: &HookSet,
    event: HookEvent,
    scope: &HookScope<'_>,
    payload: Value,
) -> Result<HookVerdict> {
    let mut hooks = set.matching(event, scope.tool).peekable();
    if hooks.peek().is_none() {
        return Ok(HookVerdict::Continue);
    }
    let mut body = match payload {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    body.insert("event".into(), event.as_str().into());
    body.insert("session_id".into(), scope.journal.session_id().into());
    body.insert(
        "project_root".into(),
        scope.project_root.display().to_string().into(),
    );
    if let Some(run_id) = scope.run_id {
        body.insert("run_id".into(), run_id.into());
    }
    if let Some(tool) = scope.tool {
        body.insert("tool".into(), tool.into());
    }
    if let Some(call_id) = scope.call_id {
        body.insert("call_id".into(), call_id.into());
    }
    let stdin = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();

    for hook in hooks {
        let ran = execute(hook, event, scope, &stdin).await;
        let blocked = event.can_block() && ran.exit_code == Some(2);
        let shown = clip(&hook.command, COMMAND_SHOWN);
        let mut events = vec![Event::HookCompleted {
            hook: shown.clone(),
            event: event.as_str().into(),
            exit_code: ran.exit_code,
            output: ran.output(),
            blocked,
            timed_out: ran.timed_out,
            duration_ms: ran.duration_ms,
            run_id: scope.run_id.map(str::to_string),
            call_id: scope.call_id.map(str::to_string),
            tool: scope.tool.map(str::to_string),
        }];
        if let Some((code, message)) = ran.problem(event, &shown) {
            events.push(Event::Warning {
                code: code.into(),
                message,
                run_id: scope.run_id.map(str::to_string),
            });
        }
        scope.journal.append_to(scope.stream, events).await?;
        if blocked {
            return Ok(HookVerdict::Blocked(ran.reason()));
        }
    }
    Ok(HookVerdict::Continue)
}

/// How one hook process went.
struct Ran {
    exit_code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    timed_out: bool,
    interrupted: bool,
    /// Why it could not start.
    failed: Option<String>,
    duration_ms: u64,
}

impl Ran {
    fn output(&self) -> String {
        let out = String::from_utf8_lossy(&self.stdout);
        let err = String::from_utf8_lossy(&self.stderr);
        let mut text = out.trim_end().to_string();
        if !err.trim().is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(err.trim_end());
        }
        if let Some(failed) = &self.failed {
            text = failed.clone();
        }
        text
    }

    /// The block reason: stderr, else stdout, else a generic line.
    fn reason(&self) -> String {
        let err = String::from_utf8_lossy(&self.stderr).trim().to_string();
        let out = String::from_utf8_lossy(&self.stdout).trim().to_string();
        let reason = if !err.is_empty() {
            err
        } else if !out.is_empty() {
            out
        } else {
            "the hook exited with code 2".to_string()
        };
        clip(&reason, 2000)
    }

    /// A warning for outcomes that are not a clean success or an intended block.
    fn problem(&self, event: HookEvent, shown: &str) -> Option<(&'static str, String)> {
        let what = format!("{} hook `{shown}`", event.as_str());
        if let Some(failed) = &self.failed {
            return Some(("hook_failed", format!("{what} could not run: {failed}")));
        }
        if self.timed_out {
            return Some(("hook_timeout", format!("{what} timed out and was killed")));
        }
        if self.interrupted {
            return None;
        }
        match self.exit_code {
            Some(0) => None,
            Some(2) if event.can_block() => None,
            Some(code) => {
                let first = String::from_utf8_lossy(&self.stderr)
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .map(|l| format!(": {}", clip(l.trim(), 300)))
                    .unwrap_or_default();
                Some((
                    "hook_failed",
                    format!("{what} exited with code {code}{first}"),
                ))
            }
            None => Some(("hook_failed", format!("{what} was killed by a signal"))),
        }
    }
}

async fn execute(hook: &Hook, event: HookEvent, scope: &HookScope<'_>, stdin: &[u8]) -> Ran {
    let started = Instant::now();
    let elapsed =
        |started: Instant| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(scope.project_root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if SCRUBBED_ENV_PREFIXES.iter().any(|p| name.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }
    cmd.env("LUMINA_HOOK_EVENT", event.as_str())
        .env("LUMINA_SESSION_ID", scope.journal.session_id())
        .env("LUMINA_PROJECT_DIR", scope.project_root);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                exit_code: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
                timed_out: false,
                interrupted: false,
                failed: Some(e.to_string()),
                duration_ms: elapsed(started),
            }
        }
    };
    let mut guard = GroupGuard::new(child.id());
    if let Some(mut pipe) = child.stdin.take() {
        let payload = stdin.to_vec();
        // A hook that never reads stdin must not stall us on a full pipe.
        tokio::spawn(async move {
            let _ = pipe.write_all(&payload).await;
        });
    }
    let out = child.stdout.take().map(|s| tokio::spawn(read_capped(s)));
    let err = child.stderr.take().map(|s| tokio::spawn(read_capped(s)));
    let never = CancellationToken::new();
    let cancel = scope.cancel.unwrap_or(&never);

    let (status, timed_out, interrupted) = tokio::select! {
        status = child.wait() => (status.ok(), false, false),
        _ = tokio::time::sleep(hook.timeout) => (None, true, false),
        _ = cancel.cancelled() => (None, false, true),
    };
    if status.is_some() {
        guard.disarm();
    } else {
        guard.kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    }
    let stdout = collect(out).await;
    let stderr = collect(err).await;
    Ran {
        exit_code: status.and_then(|s| s.code()),
        stdout,
        stderr,
        timed_out,
        interrupted,
        failed: None,
        duration_ms: elapsed(started),
    }
}

/// Reads a pipe to its end, keeping the first [`STREAM_CAP`] bytes.
async fn read_capped<R: AsyncRead + Unpin>(mut pipe: R) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = STREAM_CAP.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
        }
    }
}

/// A reader's bytes, waiting briefly for background children that still hold the pipe.
async fn collect(task: Option<tokio::task::JoinHandle<Vec<u8>>>) -> Vec<u8> {
    let Some(mut task) = task else {
        return Vec::new();
    };
    match tokio::time::timeout(DRAIN_AFTER_EXIT, &mut task).await {
        Ok(Ok(bytes)) => bytes,
        _ => {
            task.abort();
            Vec::new()
        }
    }
}

fn clip(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max_chars).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_config::HookEntry;
    use pretty_assertions::assert_eq;

    fn entry(command: &str, matcher: Option<&str>) -> HookEntry {
        HookEntry {
            command: command.into(),
            timeout_ms: None,
            matcher: matcher.map(str::to_string),
        }
    }

    #[test]
    fn matchers_select_hooks_by_tool_name() {
        let settings = lumina_config::Hooks {
            pre_tool_use: vec![
                entry("all", None),
                entry("shell-only", Some("shell")),
                entry("mcp", Some("mcp__*")),
                entry("bad", Some("[")),
            ],
            ..Default::default()
        };
        let (set, problems) = HookSet::from_settings(&settings);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let names = |tool: Option<&str>| -> Vec<String> {
            set.matching(HookEvent::PreToolUse, tool)
                .map(|h| h.command.clone())
                .collect()
        };
        assert_eq!(names(Some("shell")), vec!["all", "shell-only"]);
        assert_eq!(names(Some("mcp__gh__issue")), vec!["all", "mcp"]);
        assert_eq!(names(None), vec!["all"]);
        assert!(set.matching(HookEvent::Stop, None).next().is_none());
    }
}
