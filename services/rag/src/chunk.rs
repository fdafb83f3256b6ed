//! Chunking: a document's text into overlapping chunks of about [`TARGET_TOKENS`] tokens,
//! each with its exact byte and line span (docs/rag.md#chunking).
//!
//! **Tokens** are approximated by one deterministic rule, used for chunk sizes and reported
//! counts alike: the text is split into units — a run of ASCII letters and digits counts
//! ⌈chars / 4⌉ tokens (long identifiers and numbers are several BPE pieces), every other
//! letter or digit (accented, CJK …) and every punctuation or symbol character counts one,
//! whitespace counts nothing. On English prose this is ≈ 1.2–1.3 tokens per word, close to
//! the BPE tokenizers of current models; no tokenizer model is needed.
//!
//! **Chunks** are consecutive runs of units of at most [`TARGET_TOKENS`]; a chunk that does
//! not reach the end of the text ends, when it can, at the last paragraph break, else line
//! break, else sentence end found in its final quarter. The next chunk starts
//! [`OVERLAP_TOKENS`] tokens (or fewer, at whole units) before the previous one ended. A
//! chunk's text is exactly `text[start..end]`: it starts at its first unit and ends after
//! its last (no surrounding whitespace).

/// Tokens a chunk holds at most.
pub const TARGET_TOKENS: usize = 1_000;
/// Tokens consecutive chunks share.
pub const OVERLAP_TOKENS: usize = 120;
/// ASCII alphanumeric runs longer than this are split (a base64 blob is not one unit).
const MAX_UNIT_CHARS: usize = 64;

/// Chunking parameters (the product uses [`ChunkOptions::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Tokens a chunk holds at most (at least 1).
    pub target_tokens: usize,
    /// Tokens consecutive chunks share (less than `target_tokens`).
    pub overlap_tokens: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        Self {
            target_tokens: TARGET_TOKENS,
            overlap_tokens: OVERLAP_TOKENS,
        }
    }
}

/// One chunk of a document's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based position in the document (the `N` of `[path#chunk-N]`).
    pub index: u32,
    /// Byte offset of its first character in the text.
    pub start: usize,
    /// Byte offset just after its last character.
    pub end: usize,
    /// 1-based line of `start`.
    pub line_start: u32,
    /// 1-based line of its last character.
    pub line_end: u32,
    /// Approximate tokens (the module's rule).
    pub tokens: u32,
    /// `text[start..end]`.
    pub text: String,
}

/// A token unit: a byte range and its token count.
#[derive(Debug, Clone, Copy)]
struct Unit {
    start: usize,
    end: usize,
    tokens: usize,
}

/// Approximate tokens of `text` (the module's rule).
pub fn estimate_tokens(text: &str) -> usize {
    units(text).iter().map(|u| u.tokens).sum()
}

fn units(text: &str) -> Vec<Unit> {
    let mut out = Vec::new();
    // An open ASCII alphanumeric run: (start byte, chars).
    let mut run: Option<(usize, usize)> = None;
    let close = |run: &mut Option<(usize, usize)>, end: usize, out: &mut Vec<Unit>| {
        if let Some((start, chars)) = run.take() {
            out.push(Unit {
                start,
                end,
                tokens: chars.div_ceil(4).max(1),
            });
        }
    };
    for (i, c) in text.char_indices() {
        if c.is_ascii_alphanumeric() {
            match &mut run {
                Some((_, chars)) if *chars < MAX_UNIT_CHARS => *chars += 1,
                _ => {
                    close(&mut run, i, &mut out);
                    run = Some((i, 1));
                }
            }
            continue;
        }
        close(&mut run, i, &mut out);
        if !c.is_whitespace() && !c.is_control() {
            out.push(Unit {
                start: i,
                end: i + c.len_utf8(),
                tokens: 1,
            });
        }
    }
    close(&mut run, text.len(), &mut out);
    out
}

/// Byte offsets where lines start (for 1-based line numbers).
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

fn line_of(starts: &[usize], byte: usize) -> u32 {
    let line = starts.partition_point(|&s| s <= byte);
    u32::try_from(line).unwrap_or(u32::MAX)
}

/// How good a break is between unit `b - 1` and unit `b` (higher is better; 0 = none).
fn break_quality(text: &str, units: &[Unit], b: usize) -> u8 {
    let (Some(prev), Some(next)) = (units.get(b.wrapping_sub(1)), units.get(b)) else {
        return 0;
    };
    let gap = text.get(prev.end..next.start).unwrap_or("");
    if gap.matches('\n').count() >= 2 {
        3
    } else if gap.contains('\n') {
        2
    } else if !gap.is_empty() && matches!(text.get(prev.start..prev.end), Some("." | "!" | "?")) {
        1
    } else {
        0
    }
}

/// Splits `text` into chunks (none for text without a single token).
pub fn chunk(text: &str, options: ChunkOptions) -> Vec<Chunk> {
    let target = options.target_tokens.max(1);
    let overlap = options.overlap_tokens.min(target.saturating_sub(1));
    let units = units(text);
    let n = units.len();
    // cum[i] = tokens of units[..i].
    let mut cum = Vec::with_capacity(n + 1);
    cum.push(0usize);
    for u in &units {
        cum.push(cum.last().copied().unwrap_or(0) + u.tokens);
    }
    let tokens = |a: usize, b: usize| cum[b] - cum[a];
    let lines = line_starts(text);
    let mut chunks = Vec::new();
    let mut i = 0;
    while i < n {
        // The longest run from `i` within the target (always at least one unit).
        let mut j = i + 1;
        while j < n && tokens(i, j + 1) <= target {
            j += 1;
        }
        if j < n {
            // End at the best break in the chunk's final quarter, the latest of its kind.
            let floor = target - target / 4;
            let mut best = (0u8, j);
            let mut b = j;
            while b > i + 1 && tokens(i, b) >= floor {
                let q = break_quality(text, &units, b);
                if q > best.0 {
                    best = (q, b);
                }
                b -= 1;
            }
            j = best.1;
        }
        let (start, end) = (units[i].start, units[j - 1].end);
        chunks.push(Chunk {
            index: u32::try_from(chunks.len() + 1).unwrap_or(u32::MAX),
            start,
            end,
            line_start: line_of(&lines, start),
            line_end: line_of(&lines, end - 1),
            tokens: u32::try_from(tokens(i, j)).unwrap_or(u32::MAX),
            text: text[start..end].to_string(),
        });
        if j >= n {
            break;
        }
        // The next chunk repeats the last `overlap` tokens (whole units), and always moves on.
        let mut k = j;
        while k > i + 1 && tokens(k - 1, j) <= overlap {
            k -= 1;
        }
        i = k.max(i + 1);
    }
    chunks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn token_rule() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("   \n\t"), 0);
        assert_eq!(estimate_tokens("the cat sat."), 4);
        // 13 ASCII letters: ⌈13/4⌉ = 4; "é" and each CJK character count one.
        assert_eq!(estimate_tokens("international"), 4);
        assert_eq!(estimate_tokens("café"), 2);
        assert_eq!(estimate_tokens("日本語"), 3);
        // A 200-character blob is split into 64-character units (16 tokens each).
        assert_eq!(estimate_tokens(&"a".repeat(200)), 16 * 3 + 2);
    }

    #[test]
    fn small_text_is_one_chunk_with_its_exact_span() {
        let text = "\n\n  Hello world.\nSecond line!  \n";
        let chunks = chunk(text, ChunkOptions::default());
        assert_eq!(
            chunks,
            vec![Chunk {
                index: 1,
                start: 4,
                end: 29,
                line_start: 3,
                line_end: 4,
                tokens: 9,
                text: "Hello world.\nSecond line!".into(),
            }]
        );
        assert!(chunk(" \n ", ChunkOptions::default()).is_empty());
    }

    fn prose(paragraphs: usize) -> String {
        (0..paragraphs)
            .map(|p| {
                (0..12)
                    .map(|s| format!("Paragraph {p} sentence {s} says something about topic {p}."))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    #[test]
    fn chunks_respect_the_target_overlap_and_spans() {
        let text = prose(60);
        let options = ChunkOptions::default();
        let chunks = chunk(&text, options);
        assert!(chunks.len() > 5, "{}", chunks.len());
        for (n, c) in chunks.iter().enumerate() {
            assert_eq!(c.index as usize, n + 1);
            assert_eq!(c.text, &text[c.start..c.end]);
            assert!(c.tokens as usize <= options.target_tokens);
            assert_eq!(c.tokens as usize, estimate_tokens(&c.text));
            assert_eq!(
                c.line_start as usize,
                text[..c.start].matches('\n').count() + 1
            );
            assert_eq!(c.line_end as usize, text[..c.end].matches('\n').count() + 1);
            if n + 1 < chunks.len() {
                // Full chunks are close to the target, and end at a paragraph break.
                assert!(
                    c.tokens as usize >= options.target_tokens * 3 / 4,
                    "{}",
                    c.tokens
                );
                assert!(
                    text[c.end..].starts_with("\n\n"),
                    "chunk {} ends mid-paragraph",
                    c.index
                );
                // The next one starts inside this one, within the overlap.
                let next = &chunks[n + 1];
                assert!(next.start > c.start && next.start < c.end);
                let shared = estimate_tokens(&text[next.start..c.end]);
                assert!(
                    shared <= options.overlap_tokens && shared >= options.overlap_tokens - 20,
                    "{shared}"
                );
            }
        }
        // Together the chunks cover every token.
        assert_eq!(chunks[0].start, 0);
        assert_eq!(chunks.last().unwrap().end, text.len());
    }

    #[test]
    fn text_without_breaks_still_chunks() {
        let text = "x".repeat(100_000);
        let chunks = chunk(&text, ChunkOptions::default());
        assert!(chunks.len() > 20);
        assert!(chunks.iter().all(|c| c.tokens <= 1_000));
        assert_eq!(chunks.last().unwrap().end, text.len());
        // Tiny targets still progress.
        let tiny = chunk(
            "a b c d e",
            ChunkOptions {
                target_tokens: 1,
                overlap_tokens: 5,
            },
        );
        assert_eq!(
            tiny.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c", "d", "e"]
        );
    }
}
