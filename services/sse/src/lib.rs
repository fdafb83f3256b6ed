//! Incremental Server-Sent Events decoder (docs/specs/model-streaming.md#sse-decoding), shared
//! by the model clients (`lumina-model`) and the MCP client's HTTP transports (`lumina-mcp`).
//!
//! Bytes arrive in arbitrary network chunks; lines are split on raw bytes first and only
//! whole lines are UTF-8 decoded, so a multibyte character split across two chunks is
//! never corrupted.

/// One dispatched SSE event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any (Anthropic names every event; OpenAI never does).
    pub event: Option<String>,
    /// All `data:` lines joined with `\n`.
    pub data: String,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

/// Feed bytes with [`SseDecoder::push`], then call [`SseDecoder::finish`] at end of stream.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous byte was a CR: a following LF belongs to the same line terminator,
    /// even when it arrives in the next chunk.
    after_cr: bool,
    /// Still at the very start of the stream (a UTF-8 BOM there is dropped).
    at_start: bool,
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    pub fn new() -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            event: None,
            data: None,
            id: None,
            retry: None,
        }
    }

    /// Consume a chunk of bytes and return the events completed by it.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.end_line(&mut out);
                    self.after_cr = true;
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// End of stream. The standard discards an unterminated event; compat servers sometimes
    /// close without the final blank line, so the pending event is returned instead.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        self.dispatch(&mut out);
        out.pop()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let raw = std::mem::take(&mut self.line);
        let mut bytes = raw.as_slice();
        if self.at_start {
            self.at_start = false;
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        if bytes.is_empty() {
            self.dispatch(out);
            return;
        }
        let line = String::from_utf8_lossy(bytes);
        if line.starts_with(':') {
            return; // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        // Like the vendors' SDKs: a block that set no field at all (only comments) is no event.
        if self.event.is_none() && self.data.is_none() && self.id.is_none() && self.retry.is_none()
        {
            return;
        }
        out.push(SseEvent {
            event: self.event.take(),
            data: self.data.take().unwrap_or_default(),
            id: self.id.take(),
            retry: self.retry.take(),
        });
    }
}

/// Checks for code built on the decoder (feature `testsuite`): the events of a whole
/// buffer, and that every way of splitting it into network chunks gives the same events.
#[cfg(any(test, feature = "testsuite"))]
pub mod testing {
    use super::{SseDecoder, SseEvent};

    /// The events of `chunks` fed in order, the end of the stream included.
    pub fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(d.push(c));
        }
        out.extend(d.finish());
        out
    }

    /// Every split point, every single-byte feed, and the whole buffer give the same events;
    /// returns them.
    pub fn assert_split_invariant(input: &[u8]) -> Vec<SseEvent> {
        let whole = decode_chunks(&[input]);
        for i in 0..=input.len() {
            let (a, b) = input.split_at(i);
            assert_eq!(decode_chunks(&[a, b]), whole, "split at byte {i}");
        }
        // Three-way splits are cubic; the small inputs cover them.
        let three_way = if input.len() <= 300 { input.len() } else { 0 };
        for i in 0..=three_way {
            for j in i..=three_way {
                let parts = [&input[..i], &input[i..j], &input[j..]];
                assert_eq!(decode_chunks(&parts), whole, "split at {i},{j}");
            }
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(decode_chunks(&bytes), whole, "byte by byte");
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{assert_split_invariant, decode_chunks};
    use super::*;
    use pretty_assertions::assert_eq;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn line_endings_comments_and_multiline_data() {
        let input = "\u{feff}: keep-alive\r\n\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\n\
                     event: b\rdata: x\r\rdata: {\"t\":\"héllo 日本 🦀\"}\n\n\
                     id: 7\nretry: 1500\ndata\n\n:only a comment\n\n";
        let events = assert_split_invariant(input.as_bytes());
        assert_eq!(
            events,
            vec![
                ev(Some("a"), "one\ntwo"),
                ev(Some("b"), "x"),
                ev(None, "{\"t\":\"héllo 日本 🦀\"}"),
                SseEvent {
                    id: Some("7".into()),
                    retry: Some(1500),
                    ..ev(None, "")
                },
            ]
        );
    }

    #[test]
    fn unterminated_final_event_is_flushed_at_eof() {
        let events = assert_split_invariant(b"data: {\"a\":1}\n\ndata: [DONE]");
        assert_eq!(events, vec![ev(None, "{\"a\":1}"), ev(None, "[DONE]")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let events = decode_chunks(&[b"data: a\xffb\n\n"]);
        assert_eq!(events, vec![ev(None, "a\u{fffd}b")]);
    }
}
