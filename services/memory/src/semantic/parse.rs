//! The model's answer: `{"nodes":[…]}` as JSON, strictly. A code fence or prose around the
//! object is tolerated (models add them); anything else that is not the expected shape —
//! not JSON, a missing field, an unknown kind, a field of the wrong type — fails the whole
//! batch, so a batch is never half-written.

use serde::Deserialize;

use super::{Citation, NodeKey, NodeKind};

/// Nodes one answer may propose at most (a runaway answer fails the batch).
pub const MAX_NODES: usize = 100;
/// Citations one node may carry at most.
pub const MAX_CITES: usize = 16;
/// Longest field (subject, predicate, value, text, quote, times), in bytes.
pub const MAX_FIELD_BYTES: usize = 2_000;

/// Why a model's answer fails its batch (recorded with the failed batch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not the `{"nodes": [...]}` object: serde_json's message (line and column, no
    /// document text).
    #[error("the model's answer is not the expected JSON: {0}")]
    NotJson(String),
    /// More than [`MAX_NODES`] nodes (their number).
    #[error("the model proposed {0} nodes (at most {max})", max = MAX_NODES)]
    TooManyNodes(usize),
    /// A node is unusable.
    #[error("node {index}: {problem}")]
    Node {
        /// Its position in the answer, from 0.
        index: usize,
        /// What is wrong with it.
        problem: NodeError,
    },
}

/// What is wrong with one proposed node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// A `kind` that is not a [`NodeKind`] (as written).
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    /// More than [`MAX_CITES`] citations (their number).
    #[error("{0} citations (at most {max})", max = MAX_CITES)]
    TooManyCites(usize),
    /// A required field (named) that is empty after trimming.
    #[error("node field `{0}` is empty")]
    EmptyField(&'static str),
    /// A field (named) longer than [`MAX_FIELD_BYTES`].
    #[error("node field `{0}` is longer than {max} bytes", max = MAX_FIELD_BYTES)]
    LongField(&'static str),
}

/// A node as the model proposed it, before the grounding check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedNode {
    /// What it states.
    pub kind: NodeKind,
    /// What it is about.
    pub subject: String,
    /// Which property.
    pub predicate: String,
    /// The value.
    pub value: String,
    /// One sentence.
    pub text: String,
    /// The evidence it cites.
    pub cites: Vec<Citation>,
    /// Since when.
    pub valid_from: Option<String>,
    /// Until when.
    pub valid_to: Option<String>,
    /// The (subject, predicate) it updates.
    pub updates: Option<NodeKey>,
}

#[derive(Deserialize)]
struct Answer {
    nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
struct RawNode {
    kind: String,
    subject: String,
    predicate: String,
    value: String,
    text: String,
    cites: Vec<RawCite>,
    #[serde(default)]
    valid_from: Option<String>,
    #[serde(default)]
    valid_to: Option<String>,
    #[serde(default)]
    updates: Option<RawKey>,
}

#[derive(Deserialize)]
struct RawCite {
    event_id: u64,
    quote: String,
}

#[derive(Deserialize)]
struct RawKey {
    subject: String,
    predicate: String,
}

/// The JSON object of an answer: the text itself, or the span from its first `{` to its
/// last `}` (a fence or a sentence around it).
fn json_object(answer: &str) -> &str {
    let trimmed = answer.trim();
    match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(a), Some(b)) if a < b => &trimmed[a..=b],
        _ => trimmed,
    }
}

fn field(name: &'static str, value: String) -> Result<String, NodeError> {
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(NodeError::EmptyField(name));
    }
    if value.len() > MAX_FIELD_BYTES {
        return Err(NodeError::LongField(name));
    }
    Ok(value)
}

fn optional(name: &'static str, value: Option<String>) -> Result<Option<String>, NodeError> {
    match value.map(|v| v.trim().to_owned()) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => field(name, v).map(Some),
    }
}

/// Parses a model's answer. The error says what was wrong (it is recorded with the failed
/// batch).
pub fn parse_nodes(answer: &str) -> Result<Vec<ProposedNode>, AnswerError> {
    let parsed: Answer = serde_json::from_str(json_object(answer))
        .map_err(|e| AnswerError::NotJson(e.to_string()))?;
    if parsed.nodes.len() > MAX_NODES {
        return Err(AnswerError::TooManyNodes(parsed.nodes.len()));
    }
    parsed
        .nodes
        .into_iter()
        .enumerate()
        .map(|(index, raw)| node(raw).map_err(|problem| AnswerError::Node { index, problem }))
        .collect()
}

fn node(raw: RawNode) -> Result<ProposedNode, NodeError> {
    let kind =
        NodeKind::parse(raw.kind.trim()).ok_or_else(|| NodeError::UnknownKind(raw.kind.clone()))?;
    if raw.cites.len() > MAX_CITES {
        return Err(NodeError::TooManyCites(raw.cites.len()));
    }
    let cites = raw
        .cites
        .into_iter()
        .map(|c| {
            Ok(Citation {
                event_id: c.event_id,
                quote: field("quote", c.quote)?,
            })
        })
        .collect::<Result<Vec<_>, NodeError>>()?;
    let updates = match raw.updates {
        None => None,
        Some(k) => Some(NodeKey {
            subject: field("updates.subject", k.subject)?,
            predicate: field("updates.predicate", k.predicate)?,
        }),
    };
    Ok(ProposedNode {
        kind,
        subject: field("subject", raw.subject)?,
        predicate: field("predicate", raw.predicate)?,
        value: field("value", raw.value)?,
        text: field("text", raw.text)?,
        cites,
        valid_from: optional("valid_from", raw.valid_from)?,
        valid_to: optional("valid_to", raw.valid_to)?,
        updates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = r#"{"kind":"fact","subject":"user","predicate":"lives in","value":"Berlin",
        "text":"The user lives in Berlin.","cites":[{"event_id":3,"quote":"I live in Berlin"}]}"#;

    #[test]
    fn a_fenced_answer_parses() {
        let answer = format!("```json\n{{\"nodes\":[{NODE}]}}\n```");
        let nodes = parse_nodes(&answer).unwrap_or_default();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].kind, NodeKind::Fact);
        assert_eq!(nodes[0].cites[0].event_id, 3);
        assert_eq!(nodes[0].updates, None);
    }

    #[test]
    fn malformed_answers_fail_whole() {
        for bad in [
            "I could not find any facts.",
            r#"{"nodes":[{"kind":"fact"}]}"#,
            r#"{"nodes":[{"kind":"opinion","subject":"a","predicate":"b","value":"c","text":"d","cites":[]}]}"#,
            r#"{"nodes":[{"kind":"fact","subject":"a","predicate":"b","value":"c","text":"d","cites":[{"event_id":-1,"quote":"x"}]}]}"#,
            r#"{"nodes":[{"kind":"fact","subject":" ","predicate":"b","value":"c","text":"d","cites":[]}]}"#,
            r#"{"facts":[]}"#,
        ] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_nodes(r#"{"nodes":[]}"#), Ok(Vec::new()));
    }
}
