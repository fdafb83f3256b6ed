//! The output collector of `shell`: every byte goes to the full-output log, and the model
//! gets the head and the tail within its byte cap (errors usually show at the end, the
//! command's context at the start).

use tokio::io::AsyncWriteExt;

/// Collects output: everything to the log file, a head and a tail in memory for the model.
pub(crate) struct Sink {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    log: Option<tokio::fs::File>,
    log_error: Option<String>,
}

pub(crate) struct Captured {
    pub(crate) text: String,
    pub(crate) total_bytes: u64,
    pub(crate) truncated: bool,
    pub(crate) log_error: Option<String>,
}

impl Sink {
    pub(crate) fn new(cap: usize, log: Option<tokio::fs::File>, log_error: Option<String>) -> Self {
        let head_cap = cap / 2;
        Self {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
            log,
            log_error,
        }
    }

    pub(crate) async fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if let Some(log) = &mut self.log {
            if let Err(e) = log.write_all(chunk).await {
                self.log_error = Some(e.to_string());
                self.log = None;
            }
        }
        let room = self
            .head_cap
            .saturating_sub(self.head.len())
            .min(chunk.len());
        let (to_head, to_tail) = chunk.split_at(room);
        self.head.extend_from_slice(to_head);
        self.tail.extend_from_slice(to_tail);
        // Trim in batches so a long stream of small chunks is not quadratic.
        if self.tail.len() > 2 * self.tail_cap + 64 * 1024 {
            let excess = self.tail.len() - self.tail_cap;
            self.tail.drain(..excess);
        }
    }

    pub(crate) async fn finish(mut self) -> Captured {
        if let Some(log) = &mut self.log {
            if let Err(e) = log.flush().await {
                self.log_error = Some(e.to_string());
            }
        }
        let kept = (self.head.len() + self.tail.len()) as u64;
        let truncated = self.total > kept || self.tail.len() > self.tail_cap;
        let text = if truncated {
            let head = utf8_prefix(&self.head);
            let tail_start = self.tail.len().saturating_sub(self.tail_cap);
            let tail = utf8_suffix(&self.tail[tail_start..]);
            let omitted = self.total - (head.len() + tail.len()) as u64;
            let mut text = String::from_utf8_lossy(head).into_owned();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("… [{omitted} bytes omitted] …\n"));
            text.push_str(&String::from_utf8_lossy(tail));
            text
        } else {
            let mut all = self.head;
            all.extend_from_slice(&self.tail);
            String::from_utf8_lossy(&all).into_owned()
        };
        Captured {
            text,
            total_bytes: self.total,
            truncated,
            log_error: self.log_error,
        }
    }
}

/// Drops a character cut in half at the end of the head.
fn utf8_prefix(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// Drops continuation bytes of a character cut in half at the start of the tail.
fn utf8_suffix(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
        .count();
    &bytes[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn sink_keeps_head_and_tail() {
        let mut sink = Sink::new(10, None, None);
        sink.push(b"0123456789abcdefghij").await;
        let captured = sink.finish().await;
        assert!(captured.truncated);
        assert_eq!(captured.total_bytes, 20);
        assert_eq!(captured.text, "01234\n… [10 bytes omitted] …\nfghij");
    }

    #[tokio::test]
    async fn sink_under_the_cap_keeps_everything() {
        let mut sink = Sink::new(10, None, None);
        sink.push(b"0123").await;
        sink.push(b"4567").await;
        let captured = sink.finish().await;
        assert!(!captured.truncated);
        assert_eq!(captured.text, "01234567");
    }

    #[test]
    fn utf8_edges_are_trimmed() {
        let s = "aé".as_bytes(); // a, 0xC3, 0xA9
        assert_eq!(utf8_prefix(&s[..2]), b"a");
        assert_eq!(utf8_suffix(&s[2..]), b"");
        assert_eq!(utf8_suffix(s), s);
    }
}
