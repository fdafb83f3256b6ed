//! Session lifecycle: create, list, summaries, archive, tenants, unknown ids.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::{assert_error, batch, create, key, numbered, read_all, record, OTHER_TENANT, TENANT};
use crate::{now_ms, AppendBatch, Error, ExpectedVersion, JournalStore, SessionKey, SessionRecord};

/// Create, get, list (newest first), duplicate create, unknown id.
pub async fn create_get_list(store: Arc<dyn JournalStore>) {
    let s1 = record("s1", 1_000);
    let s2 = record("s2", 2_000);
    store.create_session(&s1, 1).await.unwrap();
    store.create_session(&s2, 1).await.unwrap();

    assert_eq!(store.session(TENANT, "s1").await.unwrap(), Some(s1.clone()));
    assert_eq!(
        store.list_sessions(TENANT, false).await.unwrap(),
        vec![s2.clone(), s1.clone()]
    );
    assert_eq!(
        store.list_sessions(TENANT, true).await.unwrap(),
        vec![s2, s1.clone()]
    );

    let imposter = SessionRecord {
        title: "imposter".into(),
        ..record("s1", 9_000)
    };
    assert_error(
        store.create_session(&imposter, 1).await,
        Error::AlreadyExists("s1".into()),
    );
    assert_eq!(store.session(TENANT, "s1").await.unwrap(), Some(s1));

    assert_eq!(store.session(TENANT, "missing").await.unwrap(), None);
    let k = key("s1");
    assert_eq!(store.head(&k).await.unwrap(), 0);
    assert_eq!(store.fence(&k).await.unwrap(), 1);
    assert_eq!(read_all(&*store, &k).await, vec![]);
}

/// `put_summary` replaces the summary, bumps `updated_at_ms`, and shows in list and get.
pub async fn summary_in_list(store: Arc<dyn JournalStore>) {
    store.create_session(&record("s1", 1_000), 1).await.unwrap();
    store.create_session(&record("s2", 2_000), 1).await.unwrap();
    let k = key("s1");

    let before = now_ms();
    store
        .put_summary(&k, 1, &json!({"title": "draft"}))
        .await
        .unwrap();
    let summary = json!({"title": "fix the parser", "status": "idle", "usage": {"tokens": 42}});
    store.put_summary(&k, 1, &summary).await.unwrap();

    let got = store.session(TENANT, "s1").await.unwrap().unwrap();
    assert!(
        got.updated_at_ms >= before - 300_000,
        "updated_at_ms not bumped: {got:?}"
    );
    let expected = SessionRecord {
        updated_at_ms: got.updated_at_ms,
        summary,
        ..record("s1", 1_000)
    };
    assert_eq!(got, expected);
    // s1 is now the most recently updated.
    assert_eq!(
        store.list_sessions(TENANT, false).await.unwrap(),
        vec![expected, record("s2", 2_000)]
    );
}

/// Archived sessions stay readable, leave the default list and refuse appends.
pub async fn archive(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    store.create_session(&record("s2", 500), 1).await.unwrap();
    let appended = store
        .append(&k, 1, AppendBatch::any("a", numbered("x", 3)))
        .await
        .unwrap();
    store.set_consumer_offset(&k, 1, "c", 2).await.unwrap();

    store.archive(&k, 1).await.unwrap();
    let archived = store.session(TENANT, "s1").await.unwrap().unwrap();
    assert_eq!(
        archived,
        SessionRecord {
            archived: true,
            // Archiving may count as an update; nothing else about the record changes.
            updated_at_ms: archived.updated_at_ms,
            ..record("s1", 1_000)
        }
    );

    assert_eq!(
        store.list_sessions(TENANT, false).await.unwrap(),
        vec![record("s2", 500)]
    );
    let mut all = store.list_sessions(TENANT, true).await.unwrap();
    all.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    assert_eq!(all, vec![archived.clone(), record("s2", 500)]);

    assert_error(
        store
            .append(&k, 1, AppendBatch::any("a", numbered("x", 1)))
            .await,
        Error::Archived("s1".into()),
    );
    assert_eq!(read_all(&*store, &k).await, appended);
    assert_eq!(
        store.read_stream(&k, "a", 1, 10).await.unwrap(),
        appended[1..].to_vec()
    );
    assert_eq!(store.head(&k).await.unwrap(), 3);
    assert_eq!(store.consumer_offset(&k, "c").await.unwrap(), 2);

    // Archiving again is a no-op.
    store.archive(&k, 1).await.unwrap();
    assert_eq!(store.session(TENANT, "s1").await.unwrap(), Some(archived));
}

/// Another tenant sees none of the sessions, events or metadata.
pub async fn tenant_isolation(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    store
        .append(&k, 1, AppendBatch::any("a", numbered("x", 2)))
        .await
        .unwrap();
    store.put_blob(&k, 1, b"secret").await.unwrap();

    let other = SessionKey::new(OTHER_TENANT, "s1");
    let not_found = || Error::NotFound("s1".into());
    assert_eq!(store.session(OTHER_TENANT, "s1").await.unwrap(), None);
    assert_eq!(
        store.list_sessions(OTHER_TENANT, true).await.unwrap(),
        vec![]
    );
    assert_error(store.read(&other, 0, 10).await, not_found());
    assert_error(store.read_stream(&other, "a", 0, 10).await, not_found());
    assert_error(store.head(&other).await, not_found());
    assert_error(store.fence(&other).await, not_found());
    let secret = crate::sha256_hex(b"secret");
    assert_error(store.get_blob(&other, &secret).await, not_found());
    assert_error(
        store
            .append(&other, 1, AppendBatch::any("a", numbered("x", 1)))
            .await,
        not_found(),
    );
    assert_error(store.command_result(&other, "k").await, not_found());
    assert_error(store.consumer_offset(&other, "c").await, not_found());
    assert_error(
        store.set_consumer_offset(&other, 1, "c", 1).await,
        not_found(),
    );
    assert_error(store.put_blob(&other, 1, b"x").await, not_found());
    assert_error(store.put_summary(&other, 1, &json!({})).await, not_found());
    assert_error(store.archive(&other, 1).await, not_found());

    assert_eq!(store.head(&k).await.unwrap(), 2);
    assert_eq!(
        store
            .session(TENANT, "s1")
            .await
            .unwrap()
            .map(|r| r.archived),
        Some(false)
    );
}

/// Every session operation on an unknown session is [`Error::NotFound`].
pub async fn unknown_session(store: Arc<dyn JournalStore>) {
    create(&*store, "s1").await;
    let k = key("nope");
    let not_found = || Error::NotFound("nope".into());
    assert_eq!(store.session(TENANT, "nope").await.unwrap(), None);
    assert_error(
        store
            .append(&k, 1, AppendBatch::any("a", numbered("x", 1)))
            .await,
        not_found(),
    );
    assert_error(store.read(&k, 0, 10).await, not_found());
    assert_error(store.read_stream(&k, "a", 0, 10).await, not_found());
    assert_error(store.head(&k).await, not_found());
    assert_error(store.command_result(&k, "c").await, not_found());
    assert_error(store.put_blob(&k, 1, b"x").await, not_found());
    assert_error(store.get_blob(&k, "00").await, not_found());
    assert_error(store.consumer_offset(&k, "c").await, not_found());
    assert_error(store.set_consumer_offset(&k, 1, "c", 1).await, not_found());
    assert_error(store.put_summary(&k, 1, &json!({})).await, not_found());
    assert_error(store.archive(&k, 1).await, not_found());
    assert_error(store.fence(&k).await, not_found());
    // Probing did not create it.
    assert_eq!(store.list_sessions(TENANT, true).await.unwrap().len(), 1);
}

/// `heads`: every listed session of the tenant with its head, in the order asked; unknown
/// ids and another tenant's sessions left out.
pub async fn heads_of_many_sessions(store: Arc<dyn JournalStore>) {
    let s1 = create(&*store, "s1").await;
    create(&*store, "s2").await;
    store
        .append(
            &s1,
            1,
            batch("main", ExpectedVersion::Any, numbered("note", 3)),
        )
        .await
        .unwrap();
    let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        store
            .heads(TENANT, &ids(&["s2", "missing", "s1"]))
            .await
            .unwrap(),
        vec![("s2".to_string(), 0), ("s1".to_string(), 3)]
    );
    assert_eq!(store.heads(TENANT, &[]).await.unwrap(), vec![]);
    assert_eq!(
        store
            .heads(OTHER_TENANT, &ids(&["s1", "s2"]))
            .await
            .unwrap(),
        vec![]
    );
}
