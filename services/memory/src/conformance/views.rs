//! Read-view checks: a view refreshed with the rows appended since answers exactly as one
//! built from every row, it loads only those rows, and concurrent recalls load it once.

use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::{sample_conversation, StoreFixture, SPACE};
use crate::{MemoryStore, NewEvidence, RecallQuery, ViewLoad};

/// Queries about old turns (whose windows the appended turns change) and new ones.
const QUERIES: &[&str] = &[
    "Is Biscuit still afraid of water?",
    "a lake near the Dolomites",
    "hiking boots before the trip",
    "weather on the high trails",
    "sourdough starter in the fridge",
    "sailing trip to Croatia",
];

fn query(text: &str) -> RecallQuery {
    RecallQuery {
        reference_time_ms: Some(1_700_000_000_000),
        max_items: 6,
        ..RecallQuery::new(SPACE, text)
    }
}

/// A turn of `context` at `turn` (session-1 has turns 0–5, session-2 turns 0–3).
fn turn(context: &str, turn: i64, actor: &str, text: &str, source: &str) -> NewEvidence {
    NewEvidence {
        space: SPACE.into(),
        context: context.into(),
        session_id: context.into(),
        actor: actor.into(),
        event_time_ms: 1_685_000_000_000 + turn * 60_000,
        turn_order: turn,
        text: text.into(),
        source_id: source.into(),
        source_offset: 100 + turn,
    }
}

/// The appends, each followed by a refresh: two turns at the end of session-1 (the
/// context that sorts first among the old ones: every session-2 doc moves, and the windows
/// of session-1's last turns change); then a new context sorting before all, a turn of
/// session-1 between two old ones (turn order 2, after the old turn 2 by event id) and
/// one at the end of session-2.
fn appends() -> Vec<Vec<NewEvidence>> {
    vec![
        vec![
            turn(
                "session-1",
                6,
                "Ana",
                "Maybe a shallow lake would help Biscuit with water.",
                "a:1",
            ),
            turn(
                "session-1",
                7,
                "Ben",
                "There is a quiet lake near the Dolomites we could try.",
                "a:2",
            ),
        ],
        vec![
            turn(
                "session-0",
                0,
                "Ana",
                "Before any trip I buy new hiking boots. Old boots hurt on long trails.",
                "b:1",
            ),
            turn(
                "session-1",
                2,
                "Ben",
                "Was the weather cold on the high trails at night?",
                "b:2",
            ),
            turn(
                "session-2",
                4,
                "Ben",
                "The sourdough starter survived a week in the fridge.",
                "b:3",
            ),
        ],
    ]
}

/// The refreshed store and a fresh one over the same data answer every query alike.
async fn same_answers(refreshed: &dyn MemoryStore, built: &dyn MemoryStore) {
    for (i, text) in QUERIES.iter().enumerate() {
        let a = refreshed.recall(&query(text)).await.unwrap();
        let b = built.recall(&query(text)).await.unwrap();
        let expected = if i == 0 {
            ViewLoad::Built
        } else {
            ViewLoad::Cached
        };
        assert_eq!(b.stats.view, expected, "the second store builds its view");
        assert!(!a.items.is_empty(), "{text}");
        assert_eq!(a.items, b.items, "{text}");
        assert_eq!(a.context, b.context, "{text}");
    }
}

/// After appends (to existing contexts, between old turns, in new contexts), the store
/// refreshes its cached view with the new rows only, and that view ranks exactly as the
/// view a second store over the same data builds from every row (`reopen`: such a store,
/// nothing cached, e.g. after a restart). With a model, vectors of every kind the model
/// has take part.
pub async fn refreshed_views_rank_like_built_ones(
    store: Arc<dyn MemoryStore>,
    reopen: &(dyn Fn() -> Arc<dyn MemoryStore> + Sync),
) {
    let rows = sample_conversation(SPACE);
    store.append(rows.clone()).await.unwrap();
    let first = store.recall(&query(QUERIES[0])).await.unwrap();
    assert_eq!(first.stats.view, ViewLoad::Built);
    assert_eq!(first.stats.loaded_rows, rows.len() as u64);
    same_answers(&*store, &*reopen()).await;
    for batch in appends() {
        let n = batch.len() as u64;
        store.append(batch).await.unwrap();
        let recall = store.recall(&query(QUERIES[1])).await.unwrap();
        assert_eq!(recall.stats.view, ViewLoad::Refreshed);
        assert_eq!(recall.stats.loaded_rows, n, "only the new rows are loaded");
        let again = store.recall(&query(QUERIES[1])).await.unwrap();
        assert_eq!(
            (again.stats.view, again.stats.loaded_rows),
            (ViewLoad::Cached, 0)
        );
        same_answers(&*store, &*reopen()).await;
    }
}

/// [`refreshed_views_rank_like_built_ones`] with the fixture's store and its reopening.
pub async fn views_refresh_like_rebuilds<F: StoreFixture + Sync>(fixture: &F) {
    refreshed_views_rank_like_built_ones(fixture.store(), &|| fixture.reopen()).await;
}

/// The stats (view, loaded rows) of `n` recalls of [`SPACE`] started together, sorted by
/// loaded rows.
async fn together(store: &Arc<dyn MemoryStore>, n: usize) -> Vec<(ViewLoad, u64)> {
    let recalls: Vec<_> = (0..n)
        .map(|i| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let stats = store
                    .recall(&query(QUERIES[i % QUERIES.len()]))
                    .await
                    .unwrap()
                    .stats;
                (stats.view, stats.loaded_rows)
            })
        })
        .collect();
    let mut loads = Vec::new();
    for recall in recalls {
        loads.push(recall.await.unwrap());
    }
    loads.sort_by_key(|l| l.1);
    loads
}

/// Recalls of one space arriving together load its view once: on a store with nothing
/// cached one builds it and the others wait and use it; after an append one refreshes it.
pub async fn concurrent_recalls_load_a_view_once<F: StoreFixture + Sync>(fixture: &F) {
    let store = fixture.store();
    // Enough rows that building the view takes a while.
    let mut rows = Vec::new();
    for copy in 0..30 {
        for mut row in sample_conversation(SPACE) {
            row.context = format!("{}-{copy}", row.context);
            row.source_id = format!("{}-{copy}", row.source_id);
            rows.push(row);
        }
    }
    let total = rows.len() as u64;
    store.append(rows).await.unwrap();
    store.sync(crate::BuildLimits::default()).await.unwrap();
    let cold = fixture.reopen();
    let mut expected = vec![(ViewLoad::Cached, 0); 7];
    expected.push((ViewLoad::Built, total));
    assert_eq!(together(&cold, 8).await, expected);

    let batch = appends().remove(0);
    let n = batch.len() as u64;
    store.append(batch).await.unwrap();
    let mut expected = vec![(ViewLoad::Cached, 0); 7];
    expected.push((ViewLoad::Refreshed, n));
    assert_eq!(together(&cold, 8).await, expected);
}
