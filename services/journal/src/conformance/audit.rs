//! The approvals audit: records committed with their append, listed newest first across
//! sessions with filters and cursor paging, never another tenant's.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::{assert_error, create, event, key, numbered, read_all, OTHER_TENANT, TENANT};
use crate::{
    AppendBatch, AuditQuery, AuditRecord, CommandRecord, Error, JournalStore, NewAudit, SessionKey,
};

fn decision(event: usize, request: &str, decision: &str, by: &str) -> NewAudit {
    NewAudit {
        event,
        run_id: "r1".into(),
        request_id: request.into(),
        tool: "shell".into(),
        args_hash: format!("hash-{request}"),
        preview: Some(format!("$ echo {request}")),
        decision: decision.into(),
        by: by.into(),
        sub: (by == "user").then(|| "alice".to_string()),
        reason: (decision == "deny").then(|| "not now".to_string()),
    }
}

/// Appends `requested` + `resolved` with the decision's audit record on the second event.
async fn decide(store: &dyn JournalStore, k: &SessionKey, audit: NewAudit) -> Vec<AuditRecord> {
    let mut batch = AppendBatch::any(
        "main",
        vec![
            event(
                "permission.requested",
                json!({"request_id": audit.request_id}),
            ),
            event(
                "permission.resolved",
                json!({"request_id": audit.request_id}),
            ),
        ],
    );
    batch.audit = vec![audit.clone()];
    let stored = store.append(k, 1, batch).await.unwrap();
    let resolved = &stored[1];
    vec![AuditRecord::from_new(
        &k.tenant,
        &k.session_id,
        resolved.seq,
        resolved.ts_ms,
        audit,
    )]
}

fn all(limit: usize) -> AuditQuery {
    AuditQuery {
        limit,
        ..AuditQuery::default()
    }
}

/// A record takes its event's seq and time and comes back whole; another tenant sees none.
pub async fn audit_recorded_with_append(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    store
        .append(&k, 1, AppendBatch::any("main", numbered("x", 3)))
        .await
        .unwrap();
    let mut expected = decide(&*store, &k, decision(1, "q1", "allow_once", "user")).await;
    assert_eq!(expected[0].seq, 5);
    let events = read_all(&*store, &k).await;
    assert_eq!(expected[0].ts_ms, events[4].ts_ms);

    // A decision nobody was asked about: one event, no preview, no subject.
    let rule = NewAudit {
        preview: None,
        ..decision(0, "c2", "allow_once", "rule")
    };
    let mut batch = AppendBatch::any(
        "agent/x",
        vec![event("permission.resolved", json!({"by": "rule"}))],
    );
    batch.audit = vec![rule.clone()];
    let stored = store.append(&k, 1, batch).await.unwrap();
    expected.insert(
        0,
        AuditRecord::from_new(TENANT, "s1", stored[0].seq, stored[0].ts_ms, rule),
    );
    let listed = store.list_audit(TENANT, &all(10)).await.unwrap();
    assert_eq!(listed, expected);

    assert_eq!(
        store.list_audit(OTHER_TENANT, &all(10)).await.unwrap(),
        vec![]
    );
    let other_session = AuditQuery {
        session_id: Some("s1".into()),
        ..all(10)
    };
    assert_eq!(
        store
            .list_audit(OTHER_TENANT, &other_session)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(store.list_audit(TENANT, &all(0)).await.unwrap(), vec![]);
}

/// Newest first across sessions; filters by session and time window; cursor pages see
/// every record exactly once.
pub async fn audit_filters_and_paging(store: Arc<dyn JournalStore>) {
    let a = create(&*store, "sa").await;
    let b = create(&*store, "sb").await;
    let mut written = Vec::new();
    for (i, k) in [&a, &b, &a, &b, &a].into_iter().enumerate() {
        let request = format!("q{i}");
        let choice = ["allow_once", "allow_session", "deny"][i % 3];
        written.extend(decide(&*store, k, decision(1, &request, choice, "user")).await);
        // Distinct times, so the window filters below have something to cut.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let newest_first = crate::newest_first(written.clone(), usize::MAX);
    assert_eq!(
        store.list_audit(TENANT, &all(100)).await.unwrap(),
        newest_first
    );

    let only_b = AuditQuery {
        session_id: Some("sb".into()),
        ..all(100)
    };
    let b_records: Vec<AuditRecord> = newest_first
        .iter()
        .filter(|r| r.session_id == "sb")
        .cloned()
        .collect();
    assert_eq!(store.list_audit(TENANT, &only_b).await.unwrap(), b_records);
    let unknown = AuditQuery {
        session_id: Some("nope".into()),
        ..all(100)
    };
    assert_eq!(store.list_audit(TENANT, &unknown).await.unwrap(), vec![]);

    // [since, until): the middle three by time.
    let window = AuditQuery {
        since_ms: Some(written[1].ts_ms),
        until_ms: Some(written[4].ts_ms),
        ..all(100)
    };
    let in_window: Vec<AuditRecord> = newest_first
        .iter()
        .filter(|r| r.ts_ms >= written[1].ts_ms && r.ts_ms < written[4].ts_ms)
        .cloned()
        .collect();
    assert!(!in_window.is_empty());
    assert_eq!(store.list_audit(TENANT, &window).await.unwrap(), in_window);

    // Pages of two, each after the last record of the previous one.
    let mut paged = Vec::new();
    let mut query = all(2);
    loop {
        let page = store.list_audit(TENANT, &query).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        query.after = Some(last.cursor());
        paged.extend(page);
    }
    assert_eq!(paged, newest_first);
}

/// A refused append records nothing, and a record pointing outside its batch refuses the
/// whole append.
pub async fn audit_is_atomic_with_append(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    store.claim(&k, 3).await.unwrap();
    let mut stale = AppendBatch::any("main", numbered("x", 1));
    stale.audit = vec![decision(0, "q1", "deny", "user")];
    assert_error(
        store.append(&k, 1, stale).await,
        Error::Fenced {
            presented: 1,
            recorded: 3,
        },
    );

    let mut first = AppendBatch::any("main", numbered("x", 1));
    first.command = Some(CommandRecord {
        key: "k1".into(),
        result: json!({"run": 1}),
    });
    store.append(&k, 3, first).await.unwrap();
    let mut duplicate = AppendBatch::any("main", numbered("x", 1));
    duplicate.command = Some(CommandRecord {
        key: "k1".into(),
        result: json!({"run": 2}),
    });
    duplicate.audit = vec![decision(0, "q2", "allow_once", "rule")];
    assert_error(
        store.append(&k, 3, duplicate).await,
        Error::DuplicateCommand("k1".into()),
    );

    let mut outside = AppendBatch::any("main", numbered("x", 2));
    outside.audit = vec![decision(2, "q3", "allow_once", "rule")];
    match store.append(&k, 3, outside).await {
        Err(Error::InvalidBatch(_)) => {}
        other => panic!("expected InvalidBatch, got {other:?}"),
    }

    assert_eq!(store.list_audit(TENANT, &all(10)).await.unwrap(), vec![]);
    assert_eq!(store.head(&key("s1")).await.unwrap(), 1);
}
