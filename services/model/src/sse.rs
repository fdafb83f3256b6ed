//! The SSE decoder, from `lumina-sse` (docs/specs/model-streaming.md#sse-decoding); kept at
//! this path for the vendor parsers and the fuzz targets.

pub use lumina_sse::{SseDecoder, SseEvent};

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(d.push(c));
        }
        out.extend(d.finish());
        out
    }

    /// Every split point, every single-byte feed, and the whole buffer give the same events.
    fn assert_split_invariant(input: &[u8]) -> Vec<SseEvent> {
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

    #[test]
    fn recorded_fixtures_are_split_invariant() {
        for fixture in [
            crate::fixtures::ANTHROPIC_TOOL_THINKING,
            crate::fixtures::OPENAI_INTERLEAVED,
        ] {
            let events = assert_split_invariant(fixture.as_bytes());
            assert!(events.len() > 5);
        }
    }
}
