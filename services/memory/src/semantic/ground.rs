//! The local grounding check: deterministic, no model. A node is accepted only when
//!
//! 1. it cites at least one event, and every cited event is evidence of the same space;
//! 2. every quote occurs in its event's text — after normalizing case and whitespace, or
//!    fuzzily: at least 90 % of the quote's content words appear in order in the event;
//! 3. its own content words (subject and value, stopwords removed) are supported by the
//!    cited events (their text, actor and date): at least 60 % of them are found, and every
//!    number and proper noun is.
//!
//! Changing a rule must bump [`GROUNDING_VERSION`](super::GROUNDING_VERSION).

use std::collections::{HashMap, HashSet};

use super::parse::ProposedNode;
use crate::text::{self, content_words, is_stopword, stem};
use crate::{time, Evidence};

/// Share of a quote's content words that must appear in order in the event.
const QUOTE_MATCH: f64 = 0.9;
/// Share of a node's content words the cited events must support.
const SUPPORT: f64 = 0.6;
/// Quotes with more content words than this are refused (the fuzzy match is quadratic).
const MAX_QUOTE_WORDS: usize = 200;

/// Ranks of actors for conflict resolution: user > assistant > tool > anyone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Authority {
    Other,
    Tool,
    Assistant,
    User,
}

impl Authority {
    /// The authority of an actor as the runtime records them: `user`, `assistant` (and the
    /// model-written `user-note`), `tool:<name>`; other names (transcript speakers) rank
    /// below all three.
    pub(crate) fn of(actor: &str) -> Self {
        match actor {
            "user" => Self::User,
            "assistant" | "user-note" => Self::Assistant,
            a if a == "tool" || a.starts_with("tool:") => Self::Tool,
            _ => Self::Other,
        }
    }
}

/// What an accepted node's citations say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grounded {
    /// The cited actor of highest authority (the latest of them on a tie).
    pub actor: String,
    /// The latest time among the cited events.
    pub event_time_ms: i64,
}

/// Lowercase with single spaces.
fn squash(s: &str) -> String {
    s.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Length of the longest common subsequence of `a` and `b`.
fn lcs(a: &[String], b: &[String]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Whether `quote` occurs in `text` (see the module docs).
pub(crate) fn quote_occurs(quote: &str, text: &str) -> bool {
    let q = squash(quote);
    if q.is_empty() {
        return false;
    }
    if squash(text).contains(&q) {
        return true;
    }
    let wanted = content_words(quote);
    if wanted.is_empty() || wanted.len() > MAX_QUOTE_WORDS {
        return false;
    }
    let found = lcs(&wanted, &text::words(text));
    found as f64 >= QUOTE_MATCH * wanted.len() as f64
}

/// A content word of a node field and whether it must be found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    word: String,
    required: Option<&'static str>,
}

/// The content words of a field. Numbers are required; so are capitalized words (proper
/// nouns) except the field's first word when the field has several (it may be capitalized
/// only because it starts the field).
fn field_words(field: &str) -> Vec<Word> {
    let raw: Vec<&str> = field
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}'))
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .collect();
    let many = raw.len() > 1;
    let mut out = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let capital = r.chars().next().is_some_and(char::is_uppercase);
        for word in text::words(r) {
            if is_stopword(&word) {
                continue;
            }
            let required = if word.chars().any(|c| c.is_ascii_digit()) {
                Some("number")
            } else if capital && (i > 0 || !many) {
                Some("proper noun")
            } else {
                None
            };
            out.push(Word { word, required });
        }
    }
    out
}

/// Why a proposed node is rejected (stored as the node's reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejection {
    #[error("the node cites no event")]
    NoCitations,
    #[error("it cites event {0}, which is not evidence of this space")]
    NotEvidence(u64),
    #[error("the quote {quote:?} does not occur in event {event_id}")]
    QuoteMissing { quote: String, event_id: u64 },
    #[error("the node's subject and value have no content words to ground")]
    NoContentWords,
    /// A number or proper noun of the node that its evidence does not contain.
    #[error("the {what} {word:?} of the node is not in the evidence it cites")]
    RequiredWordMissing { what: &'static str, word: String },
    #[error(
        "the evidence it cites does not support the node: {found} of {total} content words \
         found (missing {})",
        .missing.join(", ")
    )]
    Unsupported {
        found: usize,
        total: usize,
        missing: Vec<String>,
    },
}

/// Checks a proposed node against the space's evidence (`evidence` holds every cited event
/// that exists in the space).
pub(crate) fn check(
    node: &ProposedNode,
    evidence: &HashMap<u64, Evidence>,
) -> Result<Grounded, Rejection> {
    if node.cites.is_empty() {
        return Err(Rejection::NoCitations);
    }
    let mut cited: Vec<&Evidence> = Vec::new();
    for cite in &node.cites {
        let Some(event) = evidence.get(&cite.event_id) else {
            return Err(Rejection::NotEvidence(cite.event_id));
        };
        if !quote_occurs(&cite.quote, &event.row.text) {
            return Err(Rejection::QuoteMissing {
                quote: cite.quote.clone(),
                event_id: cite.event_id,
            });
        }
        if !cited.iter().any(|e| e.event_id == event.event_id) {
            cited.push(event);
        }
    }
    supported(node, &cited)?;
    let mut by_rank = cited.clone();
    by_rank.sort_by_key(|e| (Authority::of(&e.row.actor), e.row.event_time_ms, e.event_id));
    let actor = by_rank
        .last()
        .map(|e| e.row.actor.clone())
        .unwrap_or_default();
    let event_time_ms = cited.iter().map(|e| e.row.event_time_ms).max().unwrap_or(0);
    Ok(Grounded {
        actor,
        event_time_ms,
    })
}

/// Rule 3: the node's subject and value are supported by its cited events.
fn supported(node: &ProposedNode, cited: &[&Evidence]) -> Result<(), Rejection> {
    let mut words: HashSet<String> = HashSet::new();
    for e in cited {
        let source = format!(
            "{} {} {}",
            e.row.actor,
            e.row.text,
            time::date_words(e.row.event_time_ms)
        );
        words.extend(text::words(&source));
    }
    let stems: HashSet<String> = words.iter().map(|w| stem(w)).collect();
    let mut content = field_words(&node.subject);
    content.extend(field_words(&node.value));
    if content.is_empty() {
        return Err(Rejection::NoContentWords);
    }
    let mut found = 0usize;
    let mut missing = Vec::new();
    for w in &content {
        let ok = match w.required {
            Some("number") => words.contains(&w.word),
            _ => words.contains(&w.word) || stems.contains(&stem(&w.word)),
        };
        if ok {
            found += 1;
            continue;
        }
        if let Some(what) = w.required {
            return Err(Rejection::RequiredWordMissing {
                what,
                word: w.word.clone(),
            });
        }
        missing.push(w.word.clone());
    }
    if (found as f64) < SUPPORT * content.len() as f64 {
        return Err(Rejection::Unsupported {
            found,
            total: content.len(),
            missing,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantic::{Citation, NodeKind};
    use crate::NewEvidence;

    fn event(id: u64, actor: &str, text: &str) -> Evidence {
        let row = NewEvidence {
            space: "s".into(),
            context: "c".into(),
            session_id: "c".into(),
            actor: actor.into(),
            event_time_ms: 1_683_554_160_000 + id as i64,
            turn_order: id as i64,
            text: text.into(),
            source_id: format!("e{id}"),
            source_offset: 0,
        };
        Evidence {
            event_id: id,
            checksum: row.checksum(),
            row,
        }
    }

    fn node(subject: &str, value: &str, cites: &[(u64, &str)]) -> ProposedNode {
        ProposedNode {
            kind: NodeKind::Fact,
            subject: subject.into(),
            predicate: "p".into(),
            value: value.into(),
            text: "t".into(),
            cites: cites
                .iter()
                .map(|&(event_id, quote)| Citation {
                    event_id,
                    quote: quote.into(),
                })
                .collect(),
            valid_from: None,
            valid_to: None,
            updates: None,
        }
    }

    fn space() -> HashMap<u64, Evidence> {
        [
            event(
                1,
                "user",
                "I live in Berlin with my two cats, Mochi and Tofu.",
            ),
            event(2, "assistant", "Noted: you   prefer\nDARK roast coffee."),
        ]
        .into_iter()
        .map(|e| (e.event_id, e))
        .collect()
    }

    #[test]
    fn quotes_match_exactly_or_fuzzily() {
        let text = "I live in Berlin with my two cats, Mochi and Tofu.";
        assert!(quote_occurs("i LIVE in   berlin", text));
        assert!(!quote_occurs(
            "live in Berlin with my 2 cats Mochi and Tofu",
            text
        ));
        assert!(quote_occurs(
            "I live in Berlin, with my two cats: Mochi & Tofu",
            text
        ));
        assert!(!quote_occurs("I live in Munich", text));
        assert!(!quote_occurs("  ", text));
    }

    #[test]
    fn grounded_nodes_pass() {
        let ok = check(
            &node("user", "Berlin", &[(1, "I live in Berlin")]),
            &space(),
        );
        assert_eq!(
            ok,
            Ok(Grounded {
                actor: "user".into(),
                event_time_ms: 1_683_554_160_001
            })
        );
        let coffee = node(
            "user",
            "dark roast coffee",
            &[(2, "you prefer dark roast coffee")],
        );
        assert!(check(&coffee, &space()).is_ok());
        // The highest authority among the cited events is the node's actor.
        let both = node(
            "user",
            "Berlin coffee",
            &[(2, "prefer dark roast"), (1, "live in Berlin")],
        );
        assert_eq!(check(&both, &space()).map(|g| g.actor), Ok("user".into()));
    }

    #[test]
    fn ungrounded_nodes_are_rejected_with_a_reason() {
        let cases = [
            (node("user", "Berlin", &[]), "cites no event"),
            (
                node("user", "Berlin", &[(9, "I live in Berlin")]),
                "not evidence of this space",
            ),
            (
                node("user", "Munich", &[(1, "I live in Munich")]),
                "does not occur",
            ),
            (
                node("user", "Munich", &[(1, "I live in Berlin")]),
                "proper noun \"munich\"",
            ),
            (
                node("user", "three dogs", &[(1, "my two cats")]),
                "does not support",
            ),
            (
                node("user", "42 cats", &[(1, "my two cats")]),
                "number \"42\"",
            ),
        ];
        for (n, expected) in cases {
            let reason = check(&n, &space()).unwrap_err().to_string();
            assert!(reason.contains(expected), "{reason}");
        }
    }
}
