//! Read-path checks: source ids, budgets, catch-up, organization, empty spaces, sync.

use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::{sample_conversation, OTHER_SPACE, SPACE};
use crate::{BuildLimits, MemoryStore, NewEvidence, RecallQuery};

fn query(text: &str) -> RecallQuery {
    RecallQuery {
        reference_time_ms: Some(1_700_000_000_000),
        ..RecallQuery::new(SPACE, text)
    }
}

/// The best item answers the query, and every item points back to its ledger row.
pub async fn recall_returns_source_ids(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    let recall = store
        .recall(&query("Where did Ana go hiking?"))
        .await
        .unwrap();
    assert!(!recall.items.is_empty());
    assert_eq!(recall.items[0].source_id, "s1:1");
    let ids: Vec<u64> = recall.items.iter().map(|i| i.event_id).collect();
    let rows = store.get(SPACE, &ids).await.unwrap();
    assert_eq!(
        rows.len(),
        ids.len(),
        "every item is evidence of this space"
    );
    for (item, row) in recall.items.iter().zip(&rows) {
        assert_eq!(item.event_id, row.event_id);
        assert_eq!(item.source_id, row.row.source_id);
        assert_eq!(item.text, row.row.text);
        assert_eq!(item.actor, row.row.actor);
        assert!(item.span.0 < item.span.1 && item.span.1 <= item.text.len());
    }
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "one item per source event");
}

/// The evidence count and the token budget both bound the selection.
pub async fn recall_respects_budget_and_count(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let q = RecallQuery {
        max_items: 2,
        token_budget: 10_000,
        ..query("Biscuit the dog and the water")
    };
    assert!(store.recall(&q).await.unwrap().items.len() <= 2);
    for budget in [0, 12, 25, 40] {
        let q = RecallQuery {
            max_items: 10,
            token_budget: budget,
            ..query("trip weather trails dog bread sailing")
        };
        let recall = store.recall(&q).await.unwrap();
        let used: usize = recall.items.iter().map(|i| i.tokens).sum();
        assert!(used <= budget, "{used} tokens over a budget of {budget}");
        assert_eq!(recall.context.tokens, used);
        if budget >= 25 {
            assert!(
                !recall.items.is_empty(),
                "a {budget}-token budget fits a turn"
            );
        }
    }
}

/// Evidence appended after a query is found by the next one (the alignment check
/// catches the index up).
pub async fn recall_catches_up_new_evidence(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let first = store.recall(&query("cat named Pixel")).await.unwrap();
    assert!(first.items.iter().all(|i| !i.text.contains("Pixel")));
    let appended = store
        .append(vec![NewEvidence {
            space: SPACE.into(),
            context: "session-3".into(),
            session_id: "session-3".into(),
            actor: "Ben".into(),
            event_time_ms: 1_690_000_000_000,
            turn_order: 0,
            text: "We adopted a kitten, a cat named Pixel.".into(),
            source_id: "s3:1".into(),
            source_offset: 10,
        }])
        .await
        .unwrap();
    let second = store.recall(&query("cat named Pixel")).await.unwrap();
    assert_eq!(second.items[0].event_id, appended[0].evidence.event_id);
    assert_eq!(second.items[0].source_id, "s3:1");
    assert!(second.stats.aligned_rows >= 1);
    assert!(store.status(SPACE).await.unwrap().aligned());
}

/// A word in most of a large space's rows is no full-text candidate (its BM25 IDF is at
/// the floor, and matching it would read every such row: `retrieve::fulltext_query`), while
/// the rare word of the same query still finds its row.
pub async fn recall_skips_ubiquitous_words(store: Arc<dyn MemoryStore>) {
    let rows = crate::retrieve::UBIQUITOUS_MIN_DOCS as i64 + 100;
    let chatter: Vec<NewEvidence> = (0..rows)
        .map(|k| NewEvidence {
            space: SPACE.into(),
            context: format!("load-{}", k / 4),
            session_id: format!("load-{}", k / 4),
            actor: if k % 2 == 0 { "user" } else { "assistant" }.into(),
            event_time_ms: 1_690_000_000_000 + k,
            turn_order: k % 4,
            text: if k % 2 == 0 { "Say ok." } else { "I say ok." }.into(),
            source_id: format!("load:{k}"),
            source_offset: k,
        })
        .collect();
    for batch in chatter.chunks(500) {
        store.append(batch.to_vec()).await.unwrap();
    }
    let rare = store
        .append(vec![NewEvidence {
            space: SPACE.into(),
            context: "pets".into(),
            session_id: "pets".into(),
            actor: "user".into(),
            event_time_ms: 1_690_000_100_000,
            turn_order: 0,
            text: "Our dog Biscuit says ok to water.".into(),
            source_id: "pets:0".into(),
            source_offset: 0,
        }])
        .await
        .unwrap();
    let only_common = store.recall(&query("Say ok")).await.unwrap();
    assert_eq!(
        only_common.stats.fulltext, 0,
        "words in every row are no full-text candidates"
    );
    let mixed = store.recall(&query("Say ok, Biscuit")).await.unwrap();
    assert_eq!(mixed.stats.fulltext, 1, "only the row with the rare word");
    assert_eq!(mixed.items[0].event_id, rare[0].evidence.event_id);
}

/// Groups are chronological, items inside a group in turn order, every item once.
pub async fn recall_organizes_context(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let recall = store
        .recall(&query("trip to the Dolomites and a sailing trip"))
        .await
        .unwrap();
    let ctx = &recall.context;
    assert_eq!(ctx.reference_time_ms, 1_700_000_000_000);
    let mut seen: Vec<usize> = ctx.groups.iter().flat_map(|g| g.items.clone()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..recall.items.len()).collect::<Vec<_>>());
    assert!(ctx
        .groups
        .windows(2)
        .all(|w| w[0].start_ms <= w[1].start_ms));
    for g in &ctx.groups {
        let orders: Vec<i64> = g
            .items
            .iter()
            .map(|&i| recall.items[i].turn_order)
            .collect();
        assert!(
            orders.windows(2).all(|w| w[0] <= w[1]),
            "turn order in {}",
            g.context
        );
        assert!(g
            .items
            .iter()
            .all(|&i| recall.items[i].context == g.context));
    }
    let text = crate::retrieve::render(&recall);
    assert!(text.contains("source s1:1"), "{text}");
    assert!(text.contains("source s2:4"), "{text}");
}

/// A space without evidence answers with nothing, not an error.
pub async fn recall_empty_space(store: Arc<dyn MemoryStore>) {
    let recall = store.recall(&query("anything at all")).await.unwrap();
    assert!(recall.items.is_empty());
    store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    let recall = store.recall(&query("hiking trip")).await.unwrap();
    assert!(recall.items.is_empty(), "no evidence leaks across spaces");
}

/// The index job aligns every space; a second run has nothing to do.
pub async fn sync_aligns_every_space(store: Arc<dyn MemoryStore>) {
    let rows = sample_conversation(SPACE);
    store.append(rows.clone()).await.unwrap();
    store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    let report = store.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(report.rows_indexed, 2 * rows.len() as u64);
    assert!(!report.paused);
    for space in [SPACE, OTHER_SPACE] {
        assert!(store.status(space).await.unwrap().aligned(), "{space}");
    }
    let again = store.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(again.rows_indexed, 0);
    assert!(!again.rebuilt);
}

/// The model of a store for [`recall_uses_learned_sparse_and_token_vectors`]: feature
/// hashing with learned-sparse-shaped weights and token vectors.
pub fn multi_output_model() -> Arc<dyn crate::embed::EmbeddingProvider> {
    Arc::new(crate::embed::HashEmbeddings::with_outputs(
        64,
        crate::embed::Outputs {
            sparse: true,
            multivector: true,
        },
    ))
}

/// Not in the macro (it needs a store built with [`multi_output_model`]): a model's learned
/// sparse weights become a recall list and its token vectors score candidates by MaxSim,
/// from what the index build stored, and again after the store is reopened (`reopened`:
/// a second store over the same data, e.g. after a restart).
pub async fn recall_uses_learned_sparse_and_token_vectors(
    store: Arc<dyn MemoryStore>,
    reopened: impl std::future::Future<Output = Arc<dyn MemoryStore>>,
) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let check = |recall: crate::Recall| {
        assert_eq!(recall.items[0].source_id, "s2:1", "{:?}", recall.items);
        let best = recall.items[0].signals;
        assert!(best.learned > 0.0, "{best:?}");
        // Every query token is one of the event's tokens: MaxSim ≈ 1 (i8 quantization).
        assert!(best.multivector > 0.95, "{best:?}");
        let hiking = recall.items.iter().find(|i| i.source_id == "s1:1");
        if let Some(other) = hiking {
            assert!(other.signals.multivector < 0.9, "{:?}", other.signals);
            assert_eq!(other.signals.learned, 0.0);
        }
        // Learned sparse postings are one more candidate list (with the BM25 one).
        assert!(recall.stats.sparse > 0);
    };
    check(
        store
            .recall(&query("baking sourdough bread"))
            .await
            .unwrap(),
    );
    drop(store);
    let store = reopened.await;
    check(
        store
            .recall(&query("baking sourdough bread"))
            .await
            .unwrap(),
    );
    let status = store.status(SPACE).await.unwrap();
    assert!(
        status.fingerprint.contains("+sparse+multivector"),
        "{status:?}"
    );
}

/// Not in the macro (it needs two stores with a dense model, `with` embedding spans and
/// `without`): an event of several sentences is as close to a query as its closest
/// sentence, so span vectors raise its dense signal above the whole event's.
pub async fn span_vectors_score_the_closest_sentence(
    with: Arc<dyn MemoryStore>,
    without: Arc<dyn MemoryStore>,
) {
    let long = NewEvidence {
        text: "I repaired the old bicycle in the garage yesterday afternoon, it took hours. \
               Then we cooked a large pot of vegetable soup for the neighbours."
            .into(),
        source_id: "long:1".into(),
        ..sample_conversation(SPACE).remove(0)
    };
    let mut dense = Vec::new();
    for store in [&with, &without] {
        store.append(vec![long.clone()]).await.unwrap();
        let recall = store.recall(&query("vegetable soup")).await.unwrap();
        let item = &recall.items[0];
        assert_eq!(item.source_id, "long:1");
        assert!(item.text[item.span.0..item.span.1].contains("vegetable soup"));
        dense.push(item.signals.dense);
    }
    assert!(
        dense[0] > dense[1] + 0.1,
        "with and without span vectors: {dense:?}"
    );
}
