//! The stdio transport: newline-delimited JSON-RPC on a reader/writer pair. Requests run
//! concurrently (a tool waiting for the client's elicitation answer must not block the
//! reader); a malformed line gets a JSON-RPC error and the loop goes on; end of input ends
//! the loop once the requests in flight have answered.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Id, Message};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::context::Outlet;
use crate::dispatch::Core;
use crate::error::{Error, Result};
use crate::handler::Handler;
use crate::session::Session;

/// How long requests in flight may still run after the input ended.
const EOF_DRAIN: Duration = Duration::from_secs(10);
/// Longest accepted line; longer ones are skipped and answered with a parse error.
const MAX_LINE_BYTES: usize = 16 << 20;

struct StdoutOutlet(mpsc::UnboundedSender<Message>);

impl Outlet for StdoutOutlet {
    fn send(&self, message: Message) {
        // A closed writer means stdout is gone; the read loop notices and stops.
        let _ = self.0.send(message);
    }
}

/// Serves `handler` on `input`/`output` until `input` ends.
pub async fn serve_stdio<R, W>(handler: Arc<dyn Handler>, input: R, output: W) -> Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_stdio_until(handler, input, output, std::future::pending()).await
}

/// [`serve_stdio`] that also stops when `shutdown` completes (requests in flight are
/// cancelled then).
pub async fn serve_stdio_until<R, W, S>(
    handler: Arc<dyn Handler>,
    input: R,
    output: W,
    shutdown: S,
) -> Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ()> + Send,
{
    let core = Core::new(handler);
    let session = Arc::new(Session::new());
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let mut writer = tokio::spawn(write_loop(rx, output));
    let outlet: Arc<dyn Outlet> = Arc::new(StdoutOutlet(tx.clone()));
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    let outcome = loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut reader, &mut line) => read,
            _ = &mut shutdown => {
                tracing::info!("mcp stdio server shutting down");
                session.close();
                break Ok(());
            }
            written = &mut writer => {
                break match written {
                    Ok(Err(e)) => Err(Error::Io(e)),
                    _ => Ok(()),
                };
            }
        };
        match read {
            Err(e) => break Err(Error::Io(e)),
            Ok(Line::Eof) => break Ok(()),
            Ok(Line::TooLong) => {
                let _ = tx.send(parse_error(None, "message exceeds the line limit"));
            }
            Ok(Line::Complete) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match Message::parse(text) {
                    Err(error) => {
                        tracing::debug!(code = error.code, "malformed message on stdin");
                        let _ = tx.send(Message::Error {
                            id: salvage_id(text),
                            error,
                        });
                    }
                    Ok(Message::Request { id, method, params }) => {
                        session.begin(&id);
                        let (core, session, outlet, tx) =
                            (core.clone(), session.clone(), outlet.clone(), tx.clone());
                        tasks.spawn(async move {
                            let reply = core
                                .request(&session, id, &method, params, outlet, None)
                                .await;
                            if let Some(reply) = reply {
                                let _ = tx.send(reply);
                            }
                        });
                    }
                    Ok(Message::Notification { method, params }) => {
                        core.notification(&session, &method, params.as_ref()).await
                    }
                    Ok(Message::Response { id, result }) => {
                        core.response(&session, &id, Ok(result))
                    }
                    Ok(Message::Error {
                        id: Some(id),
                        error,
                    }) => core.response(&session, &id, Err(error)),
                    Ok(Message::Error { id: None, error }) => {
                        tracing::warn!(%error, "the client reported an error without an id")
                    }
                }
            }
        }
        // Reap finished request tasks so the set does not grow with the session.
        while tasks.try_join_next().is_some() {}
    };
    // Nobody can answer server→client requests any more. Running requests may finish for a
    // while (their answers still reach stdout); then they are cancelled.
    session.peer.close();
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(EOF_DRAIN, drain).await.is_err() {
        tracing::info!("cancelling requests still running after end of input");
        session.close();
        while tasks.join_next().await.is_some() {}
    }
    drop(outlet);
    drop(tx);
    if !writer.is_finished() {
        if let Ok(Err(e)) = writer.await {
            tracing::debug!(error = %e, "stdout closed while writing");
        }
    }
    session.close();
    outcome
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Message>,
    mut output: W,
) -> std::io::Result<()> {
    while let Some(message) = rx.recv().await {
        let mut line = message.to_line();
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Reads one line into `buf` (without the newline), capped at [`MAX_LINE_BYTES`].
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                Line::Eof
            } else if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
        let (chunk, found) = match available.iter().position(|b| *b == b'\n') {
            Some(pos) => (&available[..pos], Some(pos + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = found.unwrap_or(available.len());
        reader.consume(consumed);
        if found.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

fn parse_error(id: Option<Id>, message: &str) -> Message {
    Message::Error {
        id,
        error: ErrorObject::new(code::PARSE_ERROR, message),
    }
}

/// The id of an invalid message that is still JSON, so the error can name the request.
pub(crate) fn salvage_id(text: &str) -> Option<Id> {
    let value: Value = serde_json::from_str(text).ok()?;
    serde_json::from_value(value.get("id")?.clone()).ok()
}

/// [`serve_stdio_until`] on the process's stdin and stdout.
pub async fn serve_process_stdio<S>(handler: Arc<dyn Handler>, shutdown: S) -> Result<()>
where
    S: Future<Output = ()> + Send,
{
    serve_stdio_until(handler, tokio::io::stdin(), tokio::io::stdout(), shutdown).await
}
