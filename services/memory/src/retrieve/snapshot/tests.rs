//! A view extended batch by batch equals the view built from all rows at once, part for
//! part and in ranking: with appends to the context that sorts first, last and in the
//! middle, turns inserted between old ones of a context, new contexts, windows of 0 to 3,
//! vectors of every kind and semantic overlay edges citing rows that arrive later.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::{Rows, Snapshot};
use crate::build::LedgerRow;
use crate::derive::{derive, edges, EDGE_NODE};
use crate::embed::codec::vector_rows;
use crate::embed::{EmbeddingProvider, HashEmbeddings, Outputs};
use crate::retrieve::{encode, model_encoding, rank, RetrievalOptions};
use crate::semantic::overlay::Overlay;
use crate::{Evidence, NewEvidence, RecallStats};

const WORDS: &[&str] = &[
    "hiking",
    "Dolomites",
    "weather",
    "Biscuit",
    "water",
    "sourdough",
    "starter",
    "sailing",
    "Croatia",
    "kitten",
    "Pixel",
    "garden",
    "tomatoes",
    "violin",
    "concert",
    "Lisbon",
    "train",
    "budget",
    "deadline",
    "report",
];

/// Row `id` (ids are the ledger order) of `context` at `turn`: a text of one to three
/// sentences from a small vocabulary, so that terms repeat across rows and contexts.
fn row(id: u64, context: &str, turn: i64) -> LedgerRow {
    let word = |k: u64| WORDS[((id * 7 + k * 13) % WORDS.len() as u64) as usize];
    let mut text = format!("We talked about {} and the {} again.", word(0), word(1));
    if !id.is_multiple_of(3) {
        text.push_str(&format!(
            " Then {} came up, with {} and more {} than before.",
            word(2),
            word(3),
            word(1)
        ));
    }
    if id % 4 == 1 {
        text.push_str(&format!("\nA note on {} for later.", word(4)));
    }
    LedgerRow {
        evidence: Evidence {
            event_id: id,
            row: NewEvidence {
                space: "space".into(),
                context: context.into(),
                session_id: context.into(),
                actor: if id.is_multiple_of(2) { "Ana" } else { "Ben" }.into(),
                event_time_ms: 1_683_554_160_000 + id as i64 * 3_600_000,
                turn_order: turn,
                text,
                source_id: format!("e{id}"),
                source_offset: id as i64,
            },
            checksum: String::new(),
        },
        chain: format!("chain-{id}"),
    }
}

/// The batches: (context, turn order) of each row, ids in order.
fn batches() -> Vec<Vec<(&'static str, i64)>> {
    vec![
        // Two contexts.
        vec![
            ("m", 0),
            ("m", 1),
            ("m", 2),
            ("k", 0),
            ("k", 1),
            ("m", 3),
            ("k", 2),
        ],
        // One turn at the end of the context that sorts last.
        vec![("m", 4)],
        // The context that sorts first: every later doc moves.
        vec![("k", 3)],
        // A new context in the middle, and one before all.
        vec![("l", 0), ("a", 0), ("l", 1)],
        // A turn between old turns of a context (turn order 1, after 1 and before 2 by id).
        vec![("k", 1)],
        // A new context at the end, and turns in three contexts at once.
        vec![("z", 0), ("m", 5), ("a", 1), ("z", 1), ("k", 4)],
        vec![("a", 2)],
    ]
}

fn rows_of(batch: &[(&str, i64)], first_id: u64) -> Vec<LedgerRow> {
    batch
        .iter()
        .enumerate()
        .map(|(i, (context, turn))| row(first_id + i as u64, context, *turn))
        .collect()
}

fn model() -> Arc<dyn EmbeddingProvider> {
    Arc::new(HashEmbeddings::with_outputs(
        32,
        Outputs {
            sparse: true,
            multivector: true,
        },
    ))
}

/// What a store would load for these rows: their vectors and stored edges.
async fn load(rows: Vec<LedgerRow>, model: Option<&dyn EmbeddingProvider>) -> Rows {
    let events: Vec<&Evidence> = rows.iter().map(|r| &r.evidence).collect();
    let vectors = vector_rows(model, events, true).await.unwrap();
    let mut stored: Vec<(u64, String, i64)> = rows
        .iter()
        .flat_map(|r| {
            let e = &r.evidence;
            edges(e, &derive(e))
                .into_iter()
                .map(|(node, kind)| (e.event_id, node, kind))
        })
        .collect();
    stored.sort_by(|a, b| (a.0, a.1.as_bytes(), a.2).cmp(&(b.0, b.1.as_bytes(), b.2)));
    stored.dedup();
    Rows {
        rows,
        vectors,
        edges: stored,
    }
}

/// Semantic nodes citing rows 2, 5 and 9 (9 is not in the first batch) and 40 (never).
fn overlay() -> Overlay {
    let mut o = Overlay::default();
    for (event_id, node) in [(2, 1), (5, 1), (9, 2), (40, 2), (5, 3)] {
        o.edges.push((event_id, format!("s:{node}"), EDGE_NODE));
    }
    o.edges.sort();
    o
}

async fn check(window: usize, model: Option<Arc<dyn EmbeddingProvider>>) {
    let options = RetrievalOptions::default();
    let model = model.as_deref();
    let mut all: Vec<LedgerRow> = Vec::new();
    let mut refreshed: Option<Snapshot> = None;
    for batch in batches() {
        let rows = rows_of(&batch, all.len() as u64 + 1);
        all.extend(rows.clone());
        let delta = load(rows, model).await;
        let view = match refreshed.take() {
            None => Snapshot::build(delta, overlay(), window, &options),
            Some(mut view) => {
                view.extend(delta, &options);
                view
            }
        };
        let built = Snapshot::build(load(all.clone(), model).await, overlay(), window, &options);
        assert_eq!(
            view.canonical(),
            built.canonical(),
            "after {} rows",
            all.len()
        );
        let mut ranked = 0;
        for text in [
            "hiking in the Dolomites",
            "Biscuit and the water",
            "a sourdough starter in Lisbon",
            "violin concert budget",
            "What did Ana say about the garden?",
        ] {
            let query = encode(text).with_model(model_encoding(model, text).await.unwrap());
            let a = rank(&view, &query, &[], None, &options, RecallStats::default());
            let b = rank(&built, &query, &[], None, &options, RecallStats::default());
            ranked += b.docs.len();
            assert_eq!(format!("{:?}", a.docs), format!("{:?}", b.docs), "{text}");
        }
        assert!(ranked > 0, "the queries find something");
        refreshed = Some(view);
    }
}

#[tokio::test]
async fn extending_equals_building_without_a_model() {
    for window in 0..=3 {
        check(window, None).await;
    }
}

#[tokio::test]
async fn extending_equals_building_with_every_vector_kind() {
    check(2, Some(model())).await;
}

#[tokio::test]
async fn rows_the_view_holds_are_skipped() {
    let options = RetrievalOptions::default();
    let rows = rows_of(&batches()[0], 1);
    let mut view = Snapshot::build(
        load(rows.clone(), None).await,
        Overlay::default(),
        2,
        &options,
    );
    let before = view.canonical();
    view.extend(load(rows, None).await, &options);
    assert_eq!(view.canonical(), before);
}
