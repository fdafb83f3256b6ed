//! stdio transport: the server is a child process; newline-delimited JSON-RPC on its
//! stdin/stdout; stderr is the server's log (drained to tracing, never an error signal).
//!
//! A writer task owns stdin, so an abandoned request never leaves half a line behind.
//! Shutdown closes stdin, gives the server [`GRACE`] to exit, then kills it. An exit we did
//! not ask for closes the session with the exit status and the last stderr line.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::transport::{Inbound, InboundTx, Transport, TransportKind};
use crate::jsonrpc::Message;
use crate::Error;

/// Time the server gets to exit after its stdin closed.
const GRACE: Duration = Duration::from_secs(2);
/// A line longer than this is dropped (a message never legitimately is).
const MAX_LINE: usize = 64 * 1024 * 1024;
/// Characters of a stderr line kept for status reports.
const STDERR_KEEP: usize = 200;
/// How long an exit report waits for the exit status / the rest of stderr.
const SETTLE: Duration = Duration::from_secs(1);

/// What to run. `env` values may be expanded secrets: never log them.
pub struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Server name for logs.
    pub label: String,
}

pub struct StdioTransport {
    lines: Mutex<Option<mpsc::Sender<String>>>,
    pid: Option<u32>,
    stderr: Stderr,
    /// Tells the waiter task to stop the child.
    stop: watch::Sender<bool>,
    waiter: Mutex<Option<JoinHandle<()>>>,
}

/// The server's stderr as far as exit reports need it: the last line, and whether it ended.
#[derive(Clone)]
struct Stderr {
    last: Arc<Mutex<Option<String>>>,
    done: watch::Receiver<bool>,
}

impl Stderr {
    fn last_line(&self) -> Option<String> {
        self.last.lock().ok().and_then(|s| s.clone())
    }

    /// `reason` with the server's last stderr line, once stderr is drained (bounded wait).
    async fn explain(&mut self, reason: String) -> String {
        let _ = tokio::time::timeout(SETTLE, self.done.wait_for(|d| *d)).await;
        match self.last_line() {
            Some(line) => format!("{reason} (last stderr: {line})"),
            None => reason,
        }
    }
}

impl StdioTransport {
    pub fn spawn(spec: StdioSpec, inbound: InboundTx) -> Result<Self, Error> {
        let spawn_err = |reason: String| Error::Spawn {
            command: spec.command.clone(),
            reason,
        };
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &spec.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|e| spawn_err(e.to_string()))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(spawn_err("the child's stdio pipes are missing".into()));
        };
        tracing::debug!(server = %spec.label, pid, "mcp stdio server started");

        let (done_tx, done) = watch::channel(false);
        let diag = Stderr {
            last: Arc::new(Mutex::new(None)),
            done,
        };
        let last = diag.last.clone();
        let label = spec.label.clone();
        tokio::spawn(async move {
            drain_stderr(stderr, &label, &last).await;
            let _ = done_tx.send(true);
        });
        let (lines_tx, lines_rx) = mpsc::channel(64);
        tokio::spawn(write_lines(stdin, lines_rx, spec.label.clone()));
        let (exit_tx, exit_rx) = watch::channel(None::<String>);
        tokio::spawn(read_stdout(
            BufReader::new(stdout),
            spec.label.clone(),
            inbound.clone(),
            exit_rx,
            diag.clone(),
        ));
        let (stop, stop_rx) = watch::channel(false);
        let waiter = tokio::spawn(wait_child(
            child,
            spec.label,
            stop_rx,
            exit_tx,
            inbound,
            diag.clone(),
        ));
        Ok(Self {
            lines: Mutex::new(Some(lines_tx)),
            pid,
            stderr: diag,
            stop,
            waiter: Mutex::new(Some(waiter)),
        })
    }
}

#[async_trait]
impl Transport for StdioTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    async fn send(&self, msg: &Message) -> Result<(), Error> {
        let tx = self.lines.lock().ok().and_then(|l| l.clone());
        let closed = || Error::Closed("the server's stdin is closed".into());
        let mut line = msg.to_line();
        line.push('\n');
        tx.ok_or_else(closed)?
            .send(line)
            .await
            .map_err(|_| closed())
    }

    async fn close(&self) {
        // Dropping the sender ends the writer task, which closes stdin: the polite request
        // to exit.
        self.lines.lock().ok().and_then(|mut l| l.take());
        let _ = self.stop.send(true);
        let waiter = self.waiter.lock().ok().and_then(|mut w| w.take());
        if let Some(waiter) = waiter {
            let _ = waiter.await;
        }
    }

    fn process_id(&self) -> Option<u32> {
        self.pid
    }

    fn last_stderr(&self) -> Option<String> {
        self.stderr.last_line()
    }
}

async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::Receiver<String>, label: String) {
    while let Some(line) = lines.recv().await {
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        };
        if let Err(e) = written.await {
            // The process is going away; its exit is reported by the waiter.
            tracing::debug!(server = %label, error = %e, "writing to mcp server failed");
            return;
        }
    }
}

/// Owns the child: reports an unexpected exit, or stops it when asked.
async fn wait_child(
    mut child: Child,
    label: String,
    mut stop: watch::Receiver<bool>,
    exit_tx: watch::Sender<Option<String>>,
    inbound: InboundTx,
    mut stderr: Stderr,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        // Also when the transport is dropped (the sender goes away).
        _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => {
            if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
                tracing::debug!(server = %label, "mcp server ignored stdin close; killing it");
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            tracing::debug!(server = %label, "mcp stdio server stopped");
            let _ = exit_tx.send(Some("the server was shut down".into()));
            let _ = inbound.send(Inbound::Closed("the session was closed".into())).await;
            return;
        }
    };
    let what = match status {
        Ok(s) => match s.code() {
            Some(code) => format!("the server process exited with status {code}"),
            None => "the server process was killed by a signal".to_string(),
        },
        Err(e) => format!("waiting for the server process failed: {e}"),
    };
    tracing::warn!(server = %label, status = %what, "mcp stdio server exited");
    let _ = exit_tx.send(Some(what.clone()));
    let reason = stderr.explain(what).await;
    let _ = inbound.send(Inbound::Closed(reason)).await;
}

async fn read_stdout(
    mut stdout: impl AsyncBufRead + Unpin,
    label: String,
    inbound: InboundTx,
    mut exit: watch::Receiver<Option<String>>,
    mut stderr: Stderr,
) {
    loop {
        let line = match read_line(&mut stdout).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(server = %label, error = %e, "reading mcp server stdout failed");
                break;
            }
        };
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match Message::parse(text) {
            Ok(msg) => {
                if inbound.send(Inbound::Message(msg)).await.is_err() {
                    return;
                }
            }
            // The line itself is not logged: it may echo secrets.
            Err(e) => tracing::warn!(
                server = %label, bytes = text.len(), error = %e,
                "ignoring malformed line from mcp server"
            ),
        }
    }
    // stdout closed: usually the process is exiting; prefer its exit status as the reason.
    let status = tokio::time::timeout(SETTLE, exit.wait_for(Option::is_some))
        .await
        .ok()
        .and_then(|r| r.ok().and_then(|s| s.clone()));
    let reason = status.unwrap_or_else(|| "the server closed its stdout".to_string());
    let reason = stderr.explain(reason).await;
    let _ = inbound.send(Inbound::Closed(reason)).await;
}

/// One `\n`-terminated line without the terminator; `None` at EOF. Over-long lines are
/// skipped whole.
async fn read_line(r: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut overflow = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok((!line.is_empty() && !overflow).then_some(line));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !overflow && line.len() + chunk.len() <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            overflow = true;
            line.clear();
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            if overflow {
                tracing::warn!("dropping an over-long line from an mcp server");
                overflow = false;
                continue;
            }
            return Ok(Some(line));
        }
    }
}

/// Drains stderr to tracing (any bytes, not only UTF-8: a stalled pipe would block the
/// server), keeping the last non-empty line.
async fn drain_stderr(
    stderr: tokio::process::ChildStderr,
    label: &str,
    last: &Mutex<Option<String>>,
) {
    let mut reader = BufReader::new(stderr);
    while let Ok(Some(line)) = read_line(&mut reader).await {
        let line = String::from_utf8_lossy(&line);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        tracing::debug!(server = %label, line, "mcp server stderr");
        if let Ok(mut slot) = last.lock() {
            *slot = Some(line.chars().take(STDERR_KEEP).collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_split_on_newlines_and_keep_the_tail() -> std::io::Result<()> {
        let mut input: &[u8] = b"a\n\nbc\r\nlast";
        let mut got = Vec::new();
        while let Some(line) = read_line(&mut input).await? {
            got.push(String::from_utf8_lossy(&line).into_owned());
        }
        assert_eq!(got, ["a", "", "bc\r", "last"]);
        Ok(())
    }
}
