//! Ledger checks: ids, checksums, idempotency, conflicts, paging, heads, isolation.

use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::{sample_conversation, OTHER_SPACE, SPACE};
use crate::{chain_next, Error, LedgerHead, MemoryStore};

/// Appends assign increasing event ids and the canonical checksum.
pub async fn append_assigns_ids_and_checksums(store: Arc<dyn MemoryStore>) {
    let rows = sample_conversation(SPACE);
    let appended = store.append(rows.clone()).await.unwrap();
    assert_eq!(appended.len(), rows.len());
    let mut last = 0;
    for (a, row) in appended.iter().zip(&rows) {
        assert!(!a.duplicate);
        assert!(a.evidence.event_id > last, "event ids increase");
        last = a.evidence.event_id;
        assert_eq!(&a.evidence.row, row);
        assert_eq!(a.evidence.checksum, row.checksum());
        assert_eq!(a.evidence.checksum.len(), 64);
    }
}

/// The same source id twice is one row; the duplicate returns the stored row.
pub async fn idempotent_ingestion(store: Arc<dyn MemoryStore>) {
    let rows = sample_conversation(SPACE);
    let first = store.append(rows.clone()).await.unwrap();
    let second = store.append(rows.clone()).await.unwrap();
    assert!(second.iter().all(|a| a.duplicate));
    assert_eq!(
        first.iter().map(|a| &a.evidence).collect::<Vec<_>>(),
        second.iter().map(|a| &a.evidence).collect::<Vec<_>>()
    );
    // A batch mixing old and new rows writes only the new one.
    let mut extra = rows[0].clone();
    extra.source_id = "s9:1".into();
    extra.text = "A brand new remark.".into();
    let mixed = store.append(vec![rows[1].clone(), extra]).await.unwrap();
    assert_eq!(
        mixed.iter().map(|a| a.duplicate).collect::<Vec<_>>(),
        [true, false]
    );
    let all = store.read(SPACE, 0, usize::MAX).await.unwrap();
    assert_eq!(all.len(), rows.len() + 1);
    assert_eq!(store.head(SPACE).await.unwrap().rows, rows.len() as u64 + 1);
}

/// A known source id with other content refuses the whole batch; nothing is written.
pub async fn conflicting_source_refuses_batch(store: Arc<dyn MemoryStore>) {
    let rows = sample_conversation(SPACE);
    store.append(rows[..3].to_vec()).await.unwrap();
    let before = store.head(SPACE).await.unwrap();
    let mut changed = rows[1].clone();
    changed.text = "rewritten history".into();
    let result = store.append(vec![rows[3].clone(), changed]).await;
    match result {
        Err(Error::SourceConflict { space, source_id }) => {
            assert_eq!((space.as_str(), source_id.as_str()), (SPACE, "s1:2"));
        }
        other => panic!("expected a source conflict, got {other:?}"),
    }
    assert_eq!(store.head(SPACE).await.unwrap(), before);
    let stored = store.read(SPACE, 0, usize::MAX).await.unwrap();
    assert_eq!(stored[1].row, rows[1], "evidence is never overwritten");
}

/// `read` pages by event id; `get` returns requested rows of the space only.
pub async fn read_paging_and_get(store: Arc<dyn MemoryStore>) {
    let appended = store.append(sample_conversation(SPACE)).await.unwrap();
    let ids: Vec<u64> = appended.iter().map(|a| a.evidence.event_id).collect();
    let page = store.read(SPACE, 0, 4).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        ids[..4]
    );
    let rest = store.read(SPACE, ids[3], 100).await.unwrap();
    assert_eq!(
        rest.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        ids[4..]
    );
    let got = store.get(SPACE, &[ids[5], 999_999, ids[0]]).await.unwrap();
    assert_eq!(
        got.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        [ids[5], ids[0]]
    );
    assert!(store.get(OTHER_SPACE, &ids).await.unwrap().is_empty());
}

/// The head is the last row and the hash chain of the space's checksums.
pub async fn heads_chain_rows(store: Arc<dyn MemoryStore>) {
    assert_eq!(store.head(SPACE).await.unwrap(), LedgerHead::default());
    let appended = store.append(sample_conversation(SPACE)).await.unwrap();
    let chain = appended
        .iter()
        .fold(String::new(), |c, a| chain_next(&c, &a.evidence.checksum));
    assert_eq!(
        store.head(SPACE).await.unwrap(),
        LedgerHead {
            last_event_id: appended.last().unwrap().evidence.event_id,
            chain,
            rows: appended.len() as u64,
        }
    );
}

/// Spaces never see each other's evidence; the same source id may exist in both.
pub async fn space_isolation(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let other = store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    assert!(other.iter().all(|a| !a.duplicate));
    assert_eq!(
        store.spaces().await.unwrap(),
        [SPACE.to_owned(), OTHER_SPACE.to_owned()]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    let mine = store.read(SPACE, 0, usize::MAX).await.unwrap();
    assert!(mine.iter().all(|e| e.row.space == SPACE));
    assert_eq!(store.head(SPACE).await.unwrap().rows, mine.len() as u64);
    assert_eq!(store.head("nobody").await.unwrap(), LedgerHead::default());
}

/// Rows without a space or source id, and recalls without a space, are refused.
pub async fn invalid_requests(store: Arc<dyn MemoryStore>) {
    let mut row = sample_conversation(SPACE).remove(0);
    row.source_id.clear();
    assert!(matches!(
        store.append(vec![row]).await,
        Err(Error::Invalid(_))
    ));
    let query = crate::RecallQuery::new("", "anything");
    assert!(matches!(store.recall(&query).await, Err(Error::Invalid(_))));
    assert!(store.read(SPACE, 0, 10).await.unwrap().is_empty());
}
