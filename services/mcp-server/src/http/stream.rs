//! The SSE streams of one HTTP session, with their events kept for resumption.
//!
//! Stream 0 is the standalone GET stream; every POST answered with SSE gets its own stream.
//! Event ids are `<stream>-<seq>`, so `Last-Event-ID` names the stream to resume. Each event
//! is recorded before it is handed to the live connection (if any), so a client that lost
//! the connection — or whose stream the server closed on purpose (SEP-1699) — gets the rest
//! by reconnecting with GET and `Last-Event-ID`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use lumina_mcp_proto::jsonrpc::Message;
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;

pub(crate) const STANDALONE: u64 = 0;
/// Events kept per stream for replay.
const MAX_EVENTS: usize = 1024;
/// Finished POST streams kept for replay.
const MAX_FINISHED: usize = 64;
const KEEPALIVE: Duration = Duration::from_secs(15);

pub(crate) type Receiver = mpsc::UnboundedReceiver<Bytes>;

struct Stream {
    next_seq: u64,
    events: VecDeque<(u64, Bytes)>,
    live: Option<mpsc::UnboundedSender<Bytes>>,
    /// Events up to this seq went to some live connection.
    delivered: u64,
    done: bool,
}

impl Default for Stream {
    fn default() -> Self {
        Self {
            // Seq 0 is the priming event of a POST stream.
            next_seq: 1,
            events: VecDeque::new(),
            live: None,
            delivered: 0,
            done: false,
        }
    }
}

impl Stream {
    fn push(&mut self, frame: Bytes, seq: u64) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back((seq, frame.clone()));
        if let Some(live) = &self.live {
            if live.send(frame).is_ok() {
                self.delivered = seq;
            } else {
                // The client went away; keep recording for a resume.
                self.live = None;
            }
        }
    }

    /// A new connection that first gets the events after `after`.
    fn attach(&mut self, after: u64, retry_ms: u64) -> Receiver {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(Bytes::from(format!("retry: {retry_ms}\n\n")));
        for (seq, frame) in self.events.iter().filter(|(seq, _)| *seq > after) {
            let _ = tx.send(frame.clone());
            self.delivered = *seq;
        }
        // A finished stream ends after the replay (the sender is dropped here).
        self.live = (!self.done).then_some(tx);
        rx
    }
}

#[derive(Default)]
struct Inner {
    next_stream: u64,
    streams: HashMap<u64, Stream>,
    finished: VecDeque<u64>,
}

pub(crate) struct Streams {
    inner: Mutex<Inner>,
    retry_ms: u64,
}

pub(crate) enum ResumeError {
    Malformed,
    Unknown,
}

impl Streams {
    pub(crate) fn new(retry: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner {
                next_stream: STANDALONE + 1,
                ..Inner::default()
            }),
            retry_ms: retry.as_millis().try_into().unwrap_or(u64::MAX),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A stream for one POST: its first event is the priming event (an id, `retry`, no
    /// data), so the client can resume even before any message was sent.
    pub(crate) fn open(&self) -> (u64, Receiver) {
        let mut inner = self.lock();
        let id = inner.next_stream;
        inner.next_stream += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut stream = Stream::default();
        let _ = tx.send(priming(id, 0, self.retry_ms));
        stream.live = Some(tx);
        inner.streams.insert(id, stream);
        (id, rx)
    }

    /// Records `message` on `stream` and delivers it when a connection is attached.
    pub(crate) fn push(&self, stream: u64, message: &Message) {
        let mut inner = self.lock();
        let entry = inner.streams.entry(stream).or_default();
        if entry.done {
            return;
        }
        let seq = entry.next_seq;
        entry.next_seq += 1;
        entry.push(event(stream, seq, message), seq);
    }

    /// Sends the final response (if any) and ends the stream.
    pub(crate) fn finish(&self, stream: u64, message: Option<&Message>) {
        if let Some(message) = message {
            self.push(stream, message);
        }
        let mut inner = self.lock();
        if let Some(entry) = inner.streams.get_mut(&stream) {
            entry.done = true;
            entry.live = None;
        }
        inner.finished.push_back(stream);
        while inner.finished.len() > MAX_FINISHED {
            if let Some(old) = inner.finished.pop_front() {
                inner.streams.remove(&old);
            }
        }
    }

    /// Closes the live connection of `stream` without ending the stream (SEP-1699).
    pub(crate) fn disconnect(&self, stream: u64) {
        if let Some(entry) = self.lock().streams.get_mut(&stream) {
            entry.live = None;
        }
    }

    /// Attaches a GET without `Last-Event-ID` to the standalone stream (replacing an older
    /// connection), delivering what was queued while nobody listened.
    pub(crate) fn standalone(&self) -> Receiver {
        let mut inner = self.lock();
        let stream = inner.streams.entry(STANDALONE).or_default();
        let seq = stream.next_seq;
        stream.next_seq += 1;
        let after = stream.delivered;
        let rx = stream.attach(after, self.retry_ms);
        if let Some(live) = &stream.live {
            let _ = live.send(priming(STANDALONE, seq, self.retry_ms));
        }
        rx
    }

    /// Attaches a GET with `Last-Event-ID` to the stream it names, replaying what followed.
    pub(crate) fn resume(&self, last_event_id: &str) -> Result<Receiver, ResumeError> {
        let (stream, seq) = last_event_id
            .trim()
            .split_once('-')
            .and_then(|(s, q)| Some((s.parse::<u64>().ok()?, q.parse::<u64>().ok()?)))
            .ok_or(ResumeError::Malformed)?;
        let mut inner = self.lock();
        let entry = inner.streams.get_mut(&stream).ok_or(ResumeError::Unknown)?;
        Ok(entry.attach(seq, self.retry_ms))
    }

    /// True while some connection is attached.
    pub(crate) fn has_live(&self) -> bool {
        self.lock().streams.values().any(|s| s.live.is_some())
    }

    /// Ends every connection (session end, server shutdown).
    pub(crate) fn close_all(&self) {
        for stream in self.lock().streams.values_mut() {
            stream.done = true;
            stream.live = None;
        }
    }
}

fn priming(stream: u64, seq: u64, retry_ms: u64) -> Bytes {
    Bytes::from(format!("id: {stream}-{seq}\nretry: {retry_ms}\ndata: \n\n"))
}

fn event(stream: u64, seq: u64, message: &Message) -> Bytes {
    Bytes::from(format!(
        "id: {stream}-{seq}\nevent: message\ndata: {}\n\n",
        message.to_line()
    ))
}

/// An SSE event without an id (stateless streams are not resumable).
pub(crate) fn plain_event(message: &Message) -> Bytes {
    Bytes::from(format!("event: message\ndata: {}\n\n", message.to_line()))
}

/// The response body for a stream receiver, with keep-alive comments. `on_drop` is
/// cancelled when the body goes away (stateless revision: a closed stream cancels).
pub(crate) fn body(rx: Receiver, on_drop: Option<DropGuard>) -> Body {
    let keepalive = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
    let state = (rx, keepalive, on_drop);
    let stream = futures::stream::unfold(state, |(mut rx, mut keepalive, guard)| async move {
        let frame = tokio::select! {
            frame = rx.recv() => frame?,
            _ = keepalive.tick() => Bytes::from_static(b": keepalive\n\n"),
        };
        Some((Ok::<Bytes, Infallible>(frame), (rx, keepalive, guard)))
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_mcp_proto::jsonrpc::Id;

    fn drain(rx: &mut Receiver) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(String::from_utf8_lossy(&b).into_owned());
        }
        out
    }

    #[test]
    fn a_closed_stream_resumes_after_the_last_event_id() {
        let streams = Streams::new(Duration::from_millis(500));
        let (id, mut rx) = streams.open();
        assert!(drain(&mut rx)[0].starts_with(&format!("id: {id}-0\nretry: 500")));
        streams.disconnect(id);
        let reply = Message::Response {
            id: Id::Num(1),
            result: serde_json::json!({}),
        };
        streams.finish(id, Some(&reply));
        let mut resumed = streams.resume(&format!("{id}-0")).ok().unwrap();
        let frames = drain(&mut resumed);
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert!(frames[1].contains("\"id\":1"));
        // The stream is finished: the replay ends it.
        assert!(matches!(
            resumed.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(matches!(streams.resume("9-0"), Err(ResumeError::Unknown)));
        assert!(matches!(streams.resume("x"), Err(ResumeError::Malformed)));
    }
}
