//! The English analyzer shared by indexing and query encoding: word splitting, stopwords,
//! Porter stemming, concept extraction for the graph, span splitting and token estimates.
//!
//! Everything here is deterministic and versioned by [`ANALYZER_VERSION`]: changing any
//! rule must bump it, which changes the retrieval fingerprint and rebuilds derived indexes.

mod porter;
mod stopwords;

pub use porter::stem;
pub use stopwords::is_stopword;

/// Version of the analysis rules (tokenizer, stopwords, stemmer, concepts, time words).
pub const ANALYZER_VERSION: &str = "en-porter-v1";

/// Lowercase words of `text`: runs of alphanumeric characters, apostrophes inside a word
/// dropped (so "don't" is one word, "dont", and "Caroline's" stems like "Caroline").
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        } else if (c == '\'' || c == '\u{2019}')
            && !current.is_empty()
            && chars.peek().is_some_and(|n| n.is_alphanumeric())
        {
            // Inside a word: skip the apostrophe, keep the word going.
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Index terms of `text`: words without stopwords, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(|w| stem(&w))
        .collect()
}

/// Words without stopwords, unstemmed (the full-text index stems with its own tokenizer).
pub fn content_words(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .collect()
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Graph concepts mentioned in `text`: capitalized words (names, places, titles), numbers
/// and month names, each as a prefixed node key (`k:`, `n:`, `m:`). Deduplicated, sorted.
pub fn concepts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}')) {
        let raw = raw.trim_matches(|c| c == '\'' || c == '\u{2019}');
        let Some(first) = raw.chars().next() else {
            continue;
        };
        let lower: String = words(raw).concat();
        if lower.is_empty() {
            continue;
        }
        if first.is_ascii_digit() {
            if lower.chars().all(|c| c.is_ascii_digit()) {
                out.push(format!("n:{lower}"));
            }
        } else if MONTHS.contains(&lower.as_str()) {
            out.push(format!("m:{lower}"));
        } else if first.is_uppercase() && lower.chars().count() > 1 && !is_stopword(&lower) {
            out.push(format!("k:{}", stem(&lower)));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The month name (lowercase) for `month` in 1..=12.
pub fn month_name(month: u32) -> &'static str {
    MONTHS
        .get((month as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("")
}

/// A rough token count for budgets: about four characters per token, at least one per
/// word, which is close to BPE tokenizers on English prose.
pub fn estimate_tokens(text: &str) -> usize {
    let chars = text.chars().count();
    let words = text.split_whitespace().count();
    chars.div_ceil(4).max(words)
}

/// Byte ranges of the sentence-like spans of `text` (split after `.`, `!`, `?` or a line
/// break), merged so none is shorter than `min_chars` unless it is the last.
pub fn spans(text: &str, min_chars: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let boundary = b == b'\n'
            || (matches!(b, b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()));
        if boundary && i + 1 - start >= min_chars {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < text.len() {
        match out.last_mut() {
            Some(last) if text.len() - start < min_chars => last.1 = text.len(),
            _ => out.push((start, text.len())),
        }
    }
    if out.is_empty() {
        out.push((0, text.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_terms() {
        assert_eq!(
            words("Caroline's LGBTQ group, don't stop!"),
            ["carolines", "lgbtq", "group", "dont", "stop"]
        );
        assert_eq!(
            terms("I went to the support groups yesterday"),
            ["went", "support", "group", "yesterdai"]
        );
    }

    #[test]
    fn concepts_of_a_turn() {
        assert_eq!(
            concepts("Melanie painted a sunrise in May 2022 with Caroline's help."),
            ["k:carolin", "k:melani", "m:may", "n:2022"]
        );
    }

    #[test]
    fn spans_split_sentences() {
        let text = "Hi there. I went to a support group yesterday! It was great";
        let spans = spans(text, 12);
        let parts: Vec<&str> = spans.iter().map(|&(a, b)| text[a..b].trim()).collect();
        assert_eq!(
            parts,
            [
                "Hi there. I went to a support group yesterday!",
                "It was great"
            ]
        );
    }
}
