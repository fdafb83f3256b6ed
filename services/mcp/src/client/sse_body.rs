//! Reading an SSE response body event by event, with `lumina_sse`'s decoder.

use std::collections::VecDeque;

use lumina_sse::{SseDecoder, SseEvent};

use crate::Error;

/// Whether a response is an event stream.
pub(crate) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

pub(crate) struct SseBody {
    resp: reqwest::Response,
    decoder: SseDecoder,
    queue: VecDeque<SseEvent>,
    finished: bool,
}

impl SseBody {
    pub(crate) fn new(resp: reqwest::Response) -> Self {
        Self {
            resp,
            decoder: SseDecoder::new(),
            queue: VecDeque::new(),
            finished: false,
        }
    }

    /// The next event; `Ok(None)` when the stream ended gracefully.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, Error> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            if self.finished {
                return Ok(None);
            }
            match self.resp.chunk().await.map_err(Error::http)? {
                Some(bytes) => self.queue.extend(self.decoder.push(&bytes)),
                None => {
                    self.finished = true;
                    self.queue.extend(self.decoder.finish());
                }
            }
        }
    }
}

/// Whether an SSE event carries a JSON-RPC message (`message` or unnamed, non-empty data).
pub(crate) fn is_message_event(ev: &SseEvent) -> bool {
    matches!(ev.event.as_deref(), None | Some("message")) && !ev.data.trim().is_empty()
}
