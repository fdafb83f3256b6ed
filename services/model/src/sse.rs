//! The SSE decoder, from `lumina-sse` (docs/specs/model-streaming.md#sse-decoding); kept at
//! this path for the vendor parsers and the fuzz targets.

pub use lumina_sse::{SseDecoder, SseEvent};

#[cfg(test)]
mod tests {
    use lumina_sse::testing::assert_split_invariant;

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
