//! Conflict checks (write path step 3) and the read path's use of compiled nodes: explicit
//! updates supersede by authority and time with a resolution, ambiguous disagreements stay
//! pending, accepted nodes join the retrieval graph, and recalls report conflict states.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::semantic::{append_ids, ledger_state, node_json, profile_conversation, ScriptedModel};
use super::{sample_conversation, SPACE};
use crate::semantic::{ConflictState, NodeStatus};
use crate::{CompileLimits, MemoryStore, NewEvidence, RecallQuery};

fn query(text: &str) -> RecallQuery {
    RecallQuery {
        reference_time_ms: Some(1_700_000_000_000),
        ..RecallQuery::new(SPACE, text)
    }
}

/// A later user statement about the same subject and predicate supersedes the older node
/// (same authority: the later one wins) and an explicit update by the user supersedes the
/// assistant's (authority), each with a resolution saying who, why and when; recalls
/// report the superseded evidence.
pub async fn compile_supersedes_on_user_update(store: Arc<dyn MemoryStore>) {
    let rows = profile_conversation(SPACE);
    let a = append_ids(&store, rows[..4].to_vec()).await;
    let model = ScriptedModel::new();
    model.nodes(vec![
        node_json(
            "fact",
            ("user", "lives in", "Berlin"),
            &[(a[0], "I live in Berlin")],
        ),
        node_json(
            "fact",
            ("project", "builds with", "Rust 1.79"),
            &[(a[3], "builds with Rust 1.79")],
        ),
    ]);
    store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    let b = append_ids(&store, rows[4..].to_vec()).await;
    let before = ledger_state(&store, SPACE).await;
    let mut pinned = node_json(
        "fact",
        ("project", "builds_with", "Rust 1.81"),
        &[(b[2], "pinned the toolchain to Rust 1.81")],
    );
    pinned["updates"] = json!({"subject": "project", "predicate": "builds with"});
    model.nodes(vec![
        node_json(
            "fact",
            ("User", "Lives In", "Lisbon"),
            &[(b[0], "I moved to Lisbon last month")],
        ),
        pinned,
    ]);
    let report = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!(
        (report.accepted, report.superseded, report.pending),
        (2, 2, 0)
    );
    let prompt = &model.prompts()[1];
    assert!(prompt.contains("- user | lives in | Berlin"), "{prompt}");

    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(
        nodes
            .iter()
            .map(|n| (n.value.as_str(), n.status))
            .collect::<Vec<_>>(),
        [
            ("Berlin", NodeStatus::Superseded),
            ("Rust 1.79", NodeStatus::Superseded),
            ("Lisbon", NodeStatus::Active),
            ("Rust 1.81", NodeStatus::Active),
        ]
    );
    let (berlin, rust79, lisbon, rust81) = (&nodes[0], &nodes[1], &nodes[2], &nodes[3]);
    let conflicts = store.conflicts(SPACE).await.unwrap();
    assert_eq!(conflicts.len(), 2);
    let moved = &conflicts[0];
    assert_eq!(
        (moved.key.subject.as_str(), moved.key.predicate.as_str()),
        ("user", "lives in")
    );
    assert_eq!(
        (moved.older, moved.newer, moved.state),
        (berlin.node_id, lisbon.node_id, ConflictState::Resolved)
    );
    let r = moved.resolution.clone().unwrap();
    assert_eq!(
        (
            r.winner,
            r.loser,
            r.rule.as_str(),
            r.decided_by.as_str(),
            r.at_ms
        ),
        (
            lisbon.node_id,
            berlin.node_id,
            "time",
            "user",
            rows[4].event_time_ms
        )
    );
    assert!(
        r.reason.contains("Lisbon") && r.reason.contains("Berlin"),
        "{}",
        r.reason
    );
    let r = conflicts[1].resolution.clone().unwrap();
    assert_eq!(
        (r.winner, r.loser, r.rule.as_str(), r.decided_by.as_str()),
        (rust81.node_id, rust79.node_id, "authority", "user")
    );
    assert_eq!(
        ledger_state(&store, SPACE).await,
        before,
        "evidence is never overwritten"
    );

    // The superseded evidence is still evidence, reported as superseded.
    let recall = store
        .recall(&query("Does the user live in Berlin with the cats?"))
        .await
        .unwrap();
    let at = recall
        .items
        .iter()
        .position(|i| i.event_id == a[0])
        .expect("the Berlin turn is recalled");
    let marks: Vec<_> = recall
        .context
        .conflicts
        .iter()
        .filter(|c| c.item == at)
        .collect();
    assert_eq!(marks.len(), 1, "{:?}", recall.context.conflicts);
    assert_eq!(
        (marks[0].event_id, marks[0].node_id, marks[0].state),
        (a[0], berlin.node_id, NodeStatus::Superseded)
    );
    assert_eq!(marks[0].others, vec!["Lisbon".to_owned()]);
    let text = crate::retrieve::render(&recall);
    assert!(
        text.contains("superseded: user lives in \"Berlin\", now \"Lisbon\""),
        "{text}"
    );
}

/// Disagreements no rule decides (no explicit update, the same authority) stay pending: both
/// nodes remain, marked, and recalls report the dispute. A later explicit user update
/// settles it: both are superseded and the pending conflict is resolved with them.
pub async fn compile_keeps_ambiguous_conflicts_pending(store: Arc<dyn MemoryStore>) {
    let rows = profile_conversation(SPACE);
    let ids = append_ids(&store, rows.clone()).await;
    let model = ScriptedModel::new();
    model
        .nodes(vec![node_json(
            "fact",
            ("project", "builds with", "Rust 1.79"),
            &[(ids[3], "builds with Rust 1.79")],
        )])
        .nodes(vec![node_json(
            "fact",
            ("project", "builds with", "Rust 1.80"),
            &[(ids[5], "the toolchain file now says Rust 1.80")],
        )]);
    let limits = CompileLimits {
        batch_rows: 4,
        ..CompileLimits::default()
    };
    let report = store.compile(SPACE, &model, limits).await.unwrap();
    assert_eq!(
        (report.batches, report.pending, report.superseded),
        (2, 1, 0)
    );
    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.status).collect::<Vec<_>>(),
        [NodeStatus::Pending, NodeStatus::Pending]
    );
    let conflicts = store.conflicts(SPACE).await.unwrap();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(
        (
            conflicts[0].older,
            conflicts[0].newer,
            conflicts[0].state,
            conflicts[0].resolution.clone()
        ),
        (
            nodes[0].node_id,
            nodes[1].node_id,
            ConflictState::Pending,
            None
        )
    );

    let recall = store
        .recall(&query("Which Rust toolchain does the project build with?"))
        .await
        .unwrap();
    let mut disputed: Vec<(u64, NodeStatus, Vec<String>)> = recall
        .context
        .conflicts
        .iter()
        .map(|c| (c.event_id, c.state, c.others.clone()))
        .collect();
    disputed.sort_by_key(|d| d.0);
    assert_eq!(
        disputed,
        [
            (ids[3], NodeStatus::Pending, vec!["Rust 1.80".to_owned()]),
            (ids[5], NodeStatus::Pending, vec!["Rust 1.79".to_owned()]),
        ]
    );
    for c in &recall.context.conflicts {
        assert_eq!(recall.items[c.item].event_id, c.event_id);
    }
    assert!(crate::retrieve::render(&recall).contains("unresolved"));

    // The user settles it.
    let later = append_ids(
        &store,
        vec![NewEvidence {
            context: "profile-3".into(),
            session_id: "profile-3".into(),
            actor: "user".into(),
            event_time_ms: rows[6].event_time_ms + 86_400_000,
            turn_order: 0,
            text: "Final answer: the project builds with Rust 1.82 from now on.".into(),
            source_id: "profile-3:0".into(),
            source_offset: 7,
            ..rows[0].clone()
        }],
    )
    .await;
    model.nodes(vec![node_json(
        "fact",
        ("project", "builds with", "Rust 1.82"),
        &[(later[0], "the project builds with Rust 1.82")],
    )]);
    let report = store.compile(SPACE, &model, limits).await.unwrap();
    assert_eq!((report.superseded, report.pending), (2, 0));
    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.status).collect::<Vec<_>>(),
        [
            NodeStatus::Superseded,
            NodeStatus::Superseded,
            NodeStatus::Active
        ]
    );
    let conflicts = store.conflicts(SPACE).await.unwrap();
    assert!(conflicts.iter().all(|c| c.state == ConflictState::Resolved));
    assert_eq!(
        conflicts
            .iter()
            .map(|c| {
                let r = c.resolution.clone().unwrap();
                (r.rule, r.winner, r.loser)
            })
            .collect::<Vec<_>>(),
        [
            ("superseded".to_owned(), nodes[1].node_id, nodes[0].node_id),
            ("authority".to_owned(), nodes[2].node_id, nodes[0].node_id),
            ("authority".to_owned(), nodes[2].node_id, nodes[1].node_id),
        ]
    );
}

/// An accepted node links the events it cites in the graph: evidence the query shares no
/// word or concept with is reached through it by Personalized PageRank. Rejected nodes
/// link nothing.
pub async fn compiled_nodes_join_the_graph(store: Arc<dyn MemoryStore>) {
    store.append(sample_conversation(SPACE)).await.unwrap();
    let row = |context: &str, actor: &str, time: i64, text: &str| NewEvidence {
        space: SPACE.into(),
        context: context.into(),
        session_id: context.into(),
        actor: actor.into(),
        event_time_ms: time,
        turn_order: 0,
        text: text.into(),
        source_id: format!("{context}:0"),
        source_offset: 0,
    };
    let ids = append_ids(
        &store,
        vec![
            row(
                "family",
                "user",
                1_690_000_000_000,
                "My sister Maria lives in Porto.",
            ),
            row(
                "work",
                "user",
                1_695_000_000_000,
                "She works as an architect at a small studio.",
            ),
            row(
                "misc",
                "user",
                1_696_000_000_000,
                "The studio roof leaks when it rains.",
            ),
        ],
    )
    .await;
    let (maria, architect, roof) = (ids[0], ids[1], ids[2]);
    let q = query("Tell me about Maria");
    let before = store.recall(&q).await.unwrap();
    assert!(before.items.iter().any(|i| i.event_id == maria));
    assert!(
        before.items.iter().all(|i| i.event_id != architect),
        "nothing links the architect turn yet"
    );

    let model = ScriptedModel::new();
    model.nodes(vec![
        node_json(
            "identity",
            ("Maria", "works as", "architect"),
            &[
                (maria, "My sister Maria"),
                (architect, "works as an architect"),
            ],
        ),
        // Rejected (the value is not in the cited evidence): must link nothing.
        node_json(
            "fact",
            ("Maria", "owns", "Lisbon villa"),
            &[
                (maria, "Maria lives in Porto"),
                (roof, "The studio roof leaks"),
            ],
        ),
    ]);
    let report = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!((report.accepted, report.rejected), (1, 1));
    let after = store.recall(&q).await.unwrap();
    let linked = after
        .items
        .iter()
        .find(|i| i.event_id == architect)
        .expect("the node links Maria to the architect turn");
    assert!(linked.signals.graph > 0.0);
    assert!(after.items.iter().all(|i| i.event_id != roof));
    assert!(after.context.conflicts.is_empty());
}
