//! Semantic compile checks (write path steps 2–3): the scripted model, grounded and
//! ungrounded nodes, failed batches, resumption from the checkpoint, rebuilds. Conflicts
//! and the read path's use of nodes are in `conflicts`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{sample_conversation, OTHER_SPACE, SPACE};
use crate::semantic::{fingerprint, FailureState, NodeKind, NodeStatus, SemanticModel};
use crate::{
    CompileLimits, Error, Evidence, LedgerHead, MemoryStore, NewEvidence, Result, SemanticNode,
};

/// A test double of the compile model: answers from a script, in order (`{"nodes":[]}` once
/// it runs out), and remembers every prompt.
pub struct ScriptedModel {
    id: String,
    answers: Mutex<VecDeque<Result<String>>>,
    prompts: Mutex<Vec<String>>,
}

impl ScriptedModel {
    /// A model named `scripted-model` with no answers yet.
    pub fn new() -> Self {
        Self::with_id("scripted-model")
    }

    /// A model with another id (another semantic fingerprint).
    pub fn with_id(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            answers: Mutex::new(VecDeque::new()),
            prompts: Mutex::new(Vec::new()),
        }
    }

    /// Queues a text answer.
    pub fn answer(&self, text: impl Into<String>) -> &Self {
        self.answers.lock().unwrap().push_back(Ok(text.into()));
        self
    }

    /// Queues `{"nodes": nodes}`.
    pub fn nodes(&self, nodes: Vec<Value>) -> &Self {
        self.answer(json!({ "nodes": nodes }).to_string())
    }

    /// Queues a failed call.
    pub fn fail(&self, error: &str) -> &Self {
        self.answers
            .lock()
            .unwrap()
            .push_back(Err(Error::Model(error.to_owned())));
        self
    }

    /// Every prompt so far.
    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl SemanticModel for ScriptedModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    async fn propose(&self, prompt: &str) -> Result<String> {
        self.prompts.lock().unwrap().push(prompt.to_owned());
        match self.answers.lock().unwrap().pop_front() {
            Some(Ok(text)) => Ok(text),
            Some(Err(e)) => Err(e),
            None => Ok(r#"{"nodes":[]}"#.to_owned()),
        }
    }
}

/// A node as the model writes it.
pub fn node_json(
    kind: &str,
    (subject, predicate, value): (&str, &str, &str),
    cites: &[(u64, &str)],
) -> Value {
    json!({
        "kind": kind,
        "subject": subject,
        "predicate": predicate,
        "value": value,
        "text": format!("{subject} {predicate} {value}."),
        "cites": cites
            .iter()
            .map(|(id, quote)| json!({"event_id": id, "quote": quote}))
            .collect::<Vec<_>>(),
    })
}

/// Two sessions of a user and an assistant, 30 days apart: where the user lives, coffee,
/// the Rust toolchain, then a move and a toolchain bump. Actors are the runtime's.
pub fn profile_conversation(space: &str) -> Vec<NewEvidence> {
    type Session<'a> = (&'a str, i64, &'a [(&'a str, &'a str)]);
    let sessions: [Session<'_>; 2] = [
        (
            "profile-1",
            1_683_554_160_000,
            &[
                (
                    "user",
                    "Hi! I live in Berlin with my two cats, Mochi and Tofu.",
                ),
                ("assistant", "Nice to meet you. Berlin is lovely in spring."),
                ("user", "I prefer dark roast coffee, always black."),
                (
                    "assistant",
                    "The project builds with Rust 1.79 according to rust-toolchain.toml.",
                ),
            ],
        ),
        (
            "profile-2",
            1_686_146_160_000,
            &[
                ("user", "Quick update: I moved to Lisbon last month."),
                (
                    "assistant",
                    "Checking again, the toolchain file now says Rust 1.80.",
                ),
                ("user", "We pinned the toolchain to Rust 1.81 today."),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (context, time, turns) in sessions {
        for (t, (actor, text)) in turns.iter().enumerate() {
            out.push(NewEvidence {
                space: space.to_owned(),
                context: context.to_owned(),
                session_id: context.to_owned(),
                actor: (*actor).to_owned(),
                event_time_ms: time + t as i64 * 60_000,
                turn_order: t as i64,
                text: (*text).to_owned(),
                source_id: format!("{context}:{t}"),
                source_offset: out.len() as i64,
            });
        }
    }
    out
}

/// Appends rows and returns their event ids.
pub async fn append_ids(store: &Arc<dyn MemoryStore>, rows: Vec<NewEvidence>) -> Vec<u64> {
    store
        .append(rows)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.evidence.event_id)
        .collect()
}

/// Everything the ledger holds for a space: rows and head.
pub async fn ledger_state(
    store: &Arc<dyn MemoryStore>,
    space: &str,
) -> (Vec<Evidence>, LedgerHead) {
    (
        store.read(space, 0, usize::MAX).await.unwrap(),
        store.head(space).await.unwrap(),
    )
}

/// A node without its store ids (for comparing rebuilds).
pub fn node_content(n: &SemanticNode) -> Value {
    json!({
        "kind": n.kind.as_str(), "subject": n.subject, "predicate": n.predicate,
        "value": n.value, "text": n.text, "cites": n.cites, "status": n.status.as_str(),
        "reason": n.reason, "actor": n.actor, "time": n.event_time_ms,
        "batch": n.batch_event_id, "updates": n.updates,
    })
}

/// A grounded node is accepted with citations of existing evidence; a second run without
/// new evidence calls nobody; the ledger is untouched.
pub async fn compile_accepts_grounded_nodes(store: Arc<dyn MemoryStore>) {
    let ids = append_ids(&store, profile_conversation(SPACE)).await;
    store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    let before = ledger_state(&store, SPACE).await;
    let model = ScriptedModel::new();
    model.nodes(vec![
        node_json(
            "fact",
            ("user", "lives in", "Berlin"),
            &[(ids[0], "I live in Berlin")],
        ),
        node_json(
            "preference",
            ("user", "prefers", "dark roast coffee"),
            &[(ids[2], "i prefer  DARK roast coffee")],
        ),
        node_json(
            "fact",
            ("project", "builds with", "Rust 1.79"),
            &[(ids[3], "builds with Rust 1.79")],
        ),
    ]);
    let report = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!(
        (
            report.batches,
            report.rows,
            report.accepted,
            report.rejected
        ),
        (1, ids.len() as u64, 3, 0)
    );
    assert_eq!(report.last_event_id, *ids.last().unwrap());
    assert!(!report.paused && !report.rebuilt && report.failed.is_none());
    let prompt = &model.prompts()[0];
    for id in &ids {
        assert!(prompt.contains(&format!("[event {id} · ")), "{prompt}");
    }

    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.windows(2).all(|w| w[0].node_id < w[1].node_id));
    assert_eq!(
        nodes
            .iter()
            .map(|n| (n.kind, n.status, n.actor.as_str(), n.value.as_str()))
            .collect::<Vec<_>>(),
        [
            (NodeKind::Fact, NodeStatus::Active, "user", "Berlin"),
            (
                NodeKind::Preference,
                NodeStatus::Active,
                "user",
                "dark roast coffee"
            ),
            (NodeKind::Fact, NodeStatus::Active, "assistant", "Rust 1.79"),
        ]
    );
    for n in &nodes {
        assert_eq!(n.space, SPACE);
        assert_eq!(n.reason, None);
        assert_eq!(n.fingerprint, fingerprint("scripted-model"));
        assert_eq!(n.batch_event_id, *ids.last().unwrap());
        let cited: Vec<u64> = n.cites.iter().map(|c| c.event_id).collect();
        let events = store.get(SPACE, &cited).await.unwrap();
        assert_eq!(
            events.len(),
            cited.len(),
            "citations are evidence of the space"
        );
        assert_eq!(n.event_time_ms, events[0].row.event_time_ms);
    }
    assert_eq!(nodes[1].cites[0].quote, "i prefer  DARK roast coffee");
    assert!(store.conflicts(SPACE).await.unwrap().is_empty());
    assert!(store.nodes(OTHER_SPACE).await.unwrap().is_empty());

    let status = store.semantic_status(SPACE).await.unwrap();
    assert_eq!(status.last_event_id, *ids.last().unwrap());
    assert_eq!(status.fingerprint, fingerprint("scripted-model"));
    assert!(status.revision >= 1 && status.failures.is_empty());

    let again = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!((again.batches, again.accepted), (0, 0));
    assert_eq!(model.prompts().len(), 1, "nothing new, no model call");
    assert_eq!(ledger_state(&store, SPACE).await, before);
}

/// Nodes that cite nothing, missing or foreign events, quotes their events do not contain,
/// or values their evidence does not support are rejected with a reason, never conflict
/// and never reach retrieval.
pub async fn compile_rejects_ungrounded_nodes(store: Arc<dyn MemoryStore>) {
    let ids = append_ids(&store, profile_conversation(SPACE)).await;
    let foreign = append_ids(&store, sample_conversation(OTHER_SPACE)).await;
    let before = ledger_state(&store, SPACE).await;
    let lives = ("user", "lives in", "Munich");
    let model = ScriptedModel::new();
    model.nodes(vec![
        node_json(
            "fact",
            ("user", "lives in", "Berlin"),
            &[(ids[0], "I live in Berlin")],
        ),
        node_json("fact", lives, &[(ids[0], "I live in Munich")]),
        node_json("fact", lives, &[(ids[0], "I live in Berlin")]),
        node_json(
            "fact",
            ("user", "owns", "three dogs"),
            &[(ids[0], "my two cats")],
        ),
        node_json("fact", lives, &[(999_999_999, "I live in Munich")]),
        node_json(
            "fact",
            ("Ana", "went hiking in", "Dolomites"),
            &[(foreign[0], "hiking trip in the Dolomites")],
        ),
        node_json("fact", lives, &[]),
        node_json(
            "fact",
            ("user", "has cats", "Mochi and Tofu"),
            &[(ids[0], "with my two cats: Mochi & Tofu")],
        ),
    ]);
    let report = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!((report.accepted, report.rejected), (2, 6));
    let nodes = store.nodes(SPACE).await.unwrap();
    let verdicts: Vec<(NodeStatus, &str)> = nodes
        .iter()
        .map(|n| (n.status, n.reason.as_deref().unwrap_or("")))
        .collect();
    let expected = [
        (NodeStatus::Active, ""),
        (NodeStatus::Rejected, "does not occur in event"),
        (NodeStatus::Rejected, "proper noun \"munich\""),
        (NodeStatus::Rejected, "does not support the node"),
        (NodeStatus::Rejected, "which is not evidence of this space"),
        (NodeStatus::Rejected, "which is not evidence of this space"),
        (NodeStatus::Rejected, "cites no event"),
        (NodeStatus::Active, ""),
    ];
    assert_eq!(verdicts.len(), expected.len());
    for ((status, reason), (want_status, want)) in verdicts.iter().zip(expected) {
        assert_eq!(*status, want_status, "{reason}");
        assert!(reason.contains(want), "{reason:?} should say {want:?}");
    }
    // Rejected nodes keep what the model said, for diagnostics.
    assert_eq!(nodes[4].cites[0].event_id, 999_999_999);
    assert_eq!(nodes[1].value, "Munich");
    // A rejected "Munich" never conflicts with the accepted "Berlin".
    assert!(store.conflicts(SPACE).await.unwrap().is_empty());
    assert_eq!(ledger_state(&store, SPACE).await, before);
}

/// A failed model call or a malformed answer (not JSON, a missing field) writes nothing but
/// a failure record; the next run retries the same batch; a success marks it recovered;
/// a batch failing `max_attempts` times is abandoned and the checkpoint moves past it.
pub async fn compile_failed_batches_retry(store: Arc<dyn MemoryStore>) {
    let rows = profile_conversation(SPACE);
    let first = append_ids(&store, rows[..4].to_vec()).await;
    let before = ledger_state(&store, SPACE).await;
    let limits = CompileLimits {
        max_attempts: 5,
        ..CompileLimits::default()
    };
    let good = node_json(
        "fact",
        ("user", "lives in", "Berlin"),
        &[(first[0], "I live in Berlin")],
    );
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("cites");
    let model = ScriptedModel::new();
    model
        .answer("Sorry, I can't produce JSON today.")
        .answer(json!({ "nodes": [good.clone(), missing] }).to_string())
        .fail("connection reset")
        .nodes(vec![good]);
    for attempt in 1..=3u32 {
        let report = store.compile(SPACE, &model, limits).await.unwrap();
        let failed = report.failed.expect("a failed batch");
        assert_eq!(
            (
                failed.first_event_id,
                failed.last_event_id,
                failed.attempts,
                failed.state
            ),
            (first[0], first[3], attempt, FailureState::Failed)
        );
        assert_eq!((report.batches, report.last_event_id), (0, 0));
        assert!(
            store.nodes(SPACE).await.unwrap().is_empty(),
            "nothing half-written"
        );
        let status = store.semantic_status(SPACE).await.unwrap();
        assert_eq!(status.last_event_id, 0);
        assert_eq!(status.failures, vec![failed]);
    }
    assert_eq!(model.prompts().len(), 3);
    assert!(
        model.prompts().windows(2).all(|w| w[0] == w[1]),
        "the same batch again"
    );

    let report = store.compile(SPACE, &model, limits).await.unwrap();
    assert_eq!((report.batches, report.accepted), (1, 1));
    assert_eq!(report.last_event_id, first[3]);
    let status = store.semantic_status(SPACE).await.unwrap();
    assert_eq!(status.failures.len(), 1);
    assert_eq!(
        (status.failures[0].attempts, status.failures[0].state),
        (3, FailureState::Recovered)
    );
    assert!(
        status.failures[0].error.contains("connection reset"),
        "{:?}",
        status.failures
    );

    // A batch that keeps failing is abandoned once it reaches the attempt limit.
    let second = append_ids(&store, rows[4..].to_vec()).await;
    model.answer("not json").answer("{\"nodes\": 3}");
    let once = CompileLimits {
        max_attempts: 2,
        ..CompileLimits::default()
    };
    let report = store.compile(SPACE, &model, once).await.unwrap();
    assert_eq!(report.failed.map(|f| f.attempts), Some(1));
    let report = store.compile(SPACE, &model, once).await.unwrap();
    assert_eq!(report.failed, None);
    assert_eq!(report.last_event_id, *second.last().unwrap());
    let status = store.semantic_status(SPACE).await.unwrap();
    assert_eq!(
        status
            .failures
            .iter()
            .map(|f| (f.first_event_id, f.attempts, f.state))
            .collect::<Vec<_>>(),
        [
            (first[0], 3, FailureState::Recovered),
            (second[0], 2, FailureState::Abandoned)
        ]
    );
    assert_eq!(store.nodes(SPACE).await.unwrap().len(), 1);
    let mut after = ledger_state(&store, SPACE).await;
    after.0.truncate(before.0.len());
    assert_eq!(after.0, before.0);
}

/// An interrupted job resumes at its checkpoint: no batch is sent twice, and the result is
/// the uninterrupted one.
pub async fn compile_resumes_from_checkpoint(store: Arc<dyn MemoryStore>) {
    let rows: Vec<NewEvidence> = (0..45)
        .map(|i| NewEvidence {
            space: SPACE.into(),
            context: "long".into(),
            session_id: "long".into(),
            actor: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            event_time_ms: 1_683_554_160_000 + i * 60_000,
            turn_order: i,
            text: format!("Note {i}: the code word for day {i} is word{i}."),
            source_id: format!("long:{i}"),
            source_offset: i,
        })
        .collect();
    let ids = append_ids(&store, rows).await;
    let model = ScriptedModel::new();
    for start in [0usize, 20, 40] {
        model.nodes(vec![node_json(
            "fact",
            (
                &format!("day {start}"),
                "code word",
                &format!("word{start}"),
            ),
            &[(
                ids[start],
                &format!("the code word for day {start} is word{start}"),
            )],
        )]);
    }
    let limits = CompileLimits {
        batch_rows: 20,
        stop_after_batches: Some(1),
        ..CompileLimits::default()
    };
    let first = store.compile(SPACE, &model, limits).await.unwrap();
    assert!(first.paused);
    assert_eq!(
        (first.batches, first.rows, first.last_event_id),
        (1, 20, ids[19])
    );
    assert_eq!(
        store.semantic_status(SPACE).await.unwrap().last_event_id,
        ids[19]
    );
    assert_eq!(store.nodes(SPACE).await.unwrap().len(), 1);

    let rest = store
        .compile(
            SPACE,
            &model,
            CompileLimits {
                stop_after_batches: None,
                ..limits
            },
        )
        .await
        .unwrap();
    assert!(!rest.paused);
    assert_eq!(
        (rest.batches, rest.rows, rest.last_event_id),
        (2, 25, ids[44])
    );
    let prompts = model.prompts();
    assert_eq!(prompts.len(), 3, "every batch sent once");
    for (p, (from, to)) in prompts.iter().zip([(0usize, 19usize), (20, 39), (40, 44)]) {
        assert!(p.contains(&format!("[event {} · ", ids[from])));
        assert!(p.contains(&format!("[event {} · ", ids[to])));
        if from > 0 {
            assert!(!p.contains(&format!("[event {} · ", ids[from - 1])));
        }
    }
    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.value.as_str()).collect::<Vec<_>>(),
        ["word0", "word20", "word40"]
    );
    assert!(nodes.iter().all(|n| n.status == NodeStatus::Active));
    assert_eq!(
        nodes.iter().map(|n| n.batch_event_id).collect::<Vec<_>>(),
        [ids[19], ids[39], ids[44]]
    );
}

/// Nodes are derived data: a reset deletes them (and their conflicts) without touching the
/// ledger, the next compile rebuilds the same nodes from it, and a model change (another
/// fingerprint) rebuilds on its own.
pub async fn compile_rebuild_recompiles_from_the_ledger(store: Arc<dyn MemoryStore>) {
    let ids = append_ids(&store, profile_conversation(SPACE)).await;
    let before = ledger_state(&store, SPACE).await;
    let script = |model: &ScriptedModel| {
        model.nodes(vec![
            node_json(
                "fact",
                ("user", "lives in", "Berlin"),
                &[(ids[0], "I live in Berlin")],
            ),
            node_json(
                "preference",
                ("user", "prefers", "dark roast coffee"),
                &[(ids[2], "I prefer dark roast coffee")],
            ),
            node_json(
                "fact",
                ("user", "lives in", "Lisbon"),
                &[(ids[4], "I moved to Lisbon")],
            ),
            node_json(
                "fact",
                ("user", "lives in", "Madrid"),
                &[(ids[4], "I moved to Madrid")],
            ),
        ]);
    };
    let model = ScriptedModel::new();
    script(&model);
    store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    let contents = |nodes: &[SemanticNode]| nodes.iter().map(node_content).collect::<Vec<_>>();
    let nodes = store.nodes(SPACE).await.unwrap();
    let conflicts = store.conflicts(SPACE).await.unwrap();
    assert_eq!(nodes.len(), 4);
    // The in-batch update: Lisbon (the user, later) supersedes Berlin.
    assert_eq!(
        nodes.iter().map(|n| n.status).collect::<Vec<_>>(),
        [
            NodeStatus::Superseded,
            NodeStatus::Active,
            NodeStatus::Active,
            NodeStatus::Rejected
        ]
    );
    assert_eq!(conflicts.len(), 1);
    let revision = store.semantic_status(SPACE).await.unwrap().revision;

    store.reset_semantic(SPACE).await.unwrap();
    assert!(store.nodes(SPACE).await.unwrap().is_empty());
    assert!(store.conflicts(SPACE).await.unwrap().is_empty());
    let status = store.semantic_status(SPACE).await.unwrap();
    assert_eq!((status.last_event_id, status.fingerprint.as_str()), (0, ""));
    assert!(status.revision > revision);
    assert_eq!(ledger_state(&store, SPACE).await, before);

    script(&model);
    let report = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!(report.last_event_id, *ids.last().unwrap());
    let rebuilt = store.nodes(SPACE).await.unwrap();
    assert_eq!(contents(&rebuilt), contents(&nodes));
    assert!(
        rebuilt[0].node_id > nodes[3].node_id,
        "ids are never reused"
    );
    let again = store.conflicts(SPACE).await.unwrap();
    assert_eq!(again.len(), 1);
    let resolution = again[0].resolution.clone().unwrap();
    assert_eq!(
        (resolution.winner, resolution.loser),
        (rebuilt[2].node_id, rebuilt[0].node_id)
    );

    // Another model: another fingerprint, so the space is rebuilt before compiling.
    let other = ScriptedModel::with_id("other-model");
    other.nodes(vec![node_json(
        "fact",
        ("user", "lives in", "Lisbon"),
        &[(ids[4], "moved to Lisbon")],
    )]);
    let report = store
        .compile(SPACE, &other, CompileLimits::default())
        .await
        .unwrap();
    assert!(report.rebuilt);
    let nodes = store.nodes(SPACE).await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].fingerprint, fingerprint("other-model"));
    assert!(store.conflicts(SPACE).await.unwrap().is_empty());
    assert_eq!(ledger_state(&store, SPACE).await, before);
}
