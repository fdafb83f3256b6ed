//! What derived indexes are made of: the analysis of one evidence row, shared by every
//! backend's index builder, and the configuration fingerprint that versions it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::embed::EmbeddingProvider;
use crate::text;
use crate::time::date_words;
use crate::Evidence;

/// Version of the derived index layout (tables, fields, edge kinds). Bump on any change.
pub const INDEX_SCHEMA_VERSION: u32 = 2;

/// Edge kinds of the event/context/concept graph. Adjacent-turn edges are not stored:
/// they follow from the documents' order within their context.
pub const EDGE_CONTEXT: i64 = 1;
/// See [`EDGE_CONTEXT`].
pub const EDGE_CONCEPT: i64 = 2;
/// An accepted semantic node and an event it cites. Not stored in index generations: the
/// read path adds these edges from the node tables (`semantic::overlay`).
pub const EDGE_NODE: i64 = 3;

/// Sparse fields: the event's own terms and its window's.
pub const FIELD_BODY: i64 = 0;
/// See [`FIELD_BODY`].
pub const FIELD_WINDOW: i64 = 1;

/// Index-time options (part of the fingerprint: changing one rebuilds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexOptions {
    /// Turns on each side whose terms form an event's window field (its conversational
    /// context: an answer rarely repeats the words of the question it answers). Default 2.
    pub window: usize,
    /// With an embedding model: also embed every span of an event that has more than one
    /// (`text::spans`, sentence-like, at least [`SPAN_MIN_CHARS`]), so span scoring finds
    /// the sentence a query is about inside a long event. Default on.
    pub span_vectors: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            window: 2,
            span_vectors: true,
        }
    }
}

/// The shortest span (characters) of `text::spans` for span scoring and span vectors.
pub const SPAN_MIN_CHARS: usize = 40;

/// The configuration part of the retrieval fingerprint: index schema, analyzer, window and
/// embedding model (id, dimensions and the outputs it stores). API keys and endpoints are
/// deliberately not part of it.
pub fn config_fingerprint(
    options: &IndexOptions,
    embedding: Option<&dyn EmbeddingProvider>,
) -> String {
    let embedding = match embedding {
        Some(e) => {
            let o = e.outputs();
            format!(
                "{}/{}{}{}",
                e.model_id(),
                e.dims(),
                if o.sparse { "+sparse" } else { "" },
                if o.multivector { "+multivector" } else { "" }
            )
        }
        None => "none".to_owned(),
    };
    format!(
        "schema={INDEX_SCHEMA_VERSION};analyzer={};fts=porter-unicode61;window={};spans={};embedding={embedding}",
        text::ANALYZER_VERSION,
        options.window,
        if options.span_vectors { SPAN_MIN_CHARS } else { 0 },
    )
}

/// The indexed forms of one evidence row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedDoc {
    /// "actor: text (8 May 2023)": what full-text and sparse indexes see. The event's date
    /// is part of it so that questions naming a time can match.
    pub body: String,
    /// Analyzed terms of `body`.
    pub terms: Vec<String>,
    /// Graph concepts of the text (names, numbers, months).
    pub concepts: Vec<String>,
}

/// Analyzes one evidence row.
pub fn derive(evidence: &Evidence) -> DerivedDoc {
    let row = &evidence.row;
    let body = format!(
        "{}: {} ({})",
        row.actor,
        row.text,
        date_words(row.event_time_ms)
    );
    DerivedDoc {
        terms: text::terms(&body),
        concepts: text::concepts(&row.text),
        body,
    }
}

/// The graph edges of an event: to its context and to each of its concepts, as
/// (node key, kind).
pub fn edges(evidence: &Evidence, doc: &DerivedDoc) -> Vec<(String, i64)> {
    let mut edges = vec![(format!("c:{}", evidence.row.context), EDGE_CONTEXT)];
    edges.extend(doc.concepts.iter().map(|c| (c.clone(), EDGE_CONCEPT)));
    edges
}

/// The text an embedding model sees for an event.
pub fn embedding_text(evidence: &Evidence) -> String {
    format!("{}: {}", evidence.row.actor, evidence.row.text)
}

/// The texts an embedding model sees for the spans of an event, when it has more than one.
pub fn span_texts(evidence: &Evidence) -> Vec<String> {
    let row = &evidence.row;
    let spans = text::spans(&row.text, SPAN_MIN_CHARS);
    if spans.len() < 2 {
        return Vec::new();
    }
    spans
        .into_iter()
        .map(|(a, b)| format!("{}: {}", row.actor, row.text[a..b].trim()))
        .collect()
}

/// An FTS5 query matching any of `words` (each quoted; only alphanumeric words, which
/// cannot break out of the quotes).
pub fn fts_query(words: &[String]) -> String {
    let mut seen = BTreeSet::new();
    words
        .iter()
        .filter(|w| !w.is_empty() && w.chars().all(char::is_alphanumeric) && seen.insert(*w))
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}
