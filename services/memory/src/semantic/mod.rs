//! Semantic compile and conflicts (docs/design.md#memory-write-path, steps 2–3).
//!
//! A resumable job ([`MemoryStore::compile`](crate::MemoryStore::compile)) sends batches of
//! new evidence of a space to a [`SemanticModel`], which proposes memory nodes as JSON
//! ([`parse`]). Every proposed node passes a deterministic local grounding check
//! ([`ground`]): it must cite evidence of the same space, each quote must occur in its
//! event, and the node's own words must be supported by what it cites. Rejected nodes are
//! kept with their reason, for diagnostics only. Accepted nodes that disagree with an
//! existing node about the same (subject, predicate) are resolved by authority and time
//! when the newer one is an explicit update, and stay pending otherwise ([`plan`]).
//!
//! Nodes, conflicts and resolutions are derived data: they carry the semantic fingerprint
//! ([`fingerprint`]), are rebuilt from the ledger when it changes, and never touch
//! evidence. The read path adds accepted nodes to the graph and reports the conflict state
//! of evidence cited by pending or superseded nodes ([`overlay`]).

pub(crate) mod ground;
pub mod job;
pub mod overlay;
pub mod parse;
pub mod plan;
pub(crate) mod prompt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{text, Result};

/// Version of the node, conflict and resolution layout. Bump on any change.
pub const SEMANTIC_SCHEMA_VERSION: u32 = 1;
/// Version of the grounding rules ([`ground`]). Bump on any change.
pub const GROUNDING_VERSION: u32 = 1;

/// The model that proposes nodes. The memory crate does not know how models are called: the
/// runtime implements this over its model client; tests use a scripted double.
#[async_trait]
pub trait SemanticModel: Send + Sync {
    /// The model's identity (part of the semantic fingerprint: another model rebuilds).
    fn model_id(&self) -> &str;

    /// Sends one prompt and returns the model's whole text answer.
    async fn propose(&self, prompt: &str) -> Result<String>;
}

/// The semantic fingerprint of nodes compiled by `model_id`: schema, grounding rules,
/// prompt and analyzer versions and the model. A stored checkpoint with another
/// fingerprint rebuilds the space's nodes.
pub fn fingerprint(model_id: &str) -> String {
    format!(
        "semantic={SEMANTIC_SCHEMA_VERSION};grounding={GROUNDING_VERSION};prompt={};analyzer={};model={model_id}",
        prompt::PROMPT_VERSION,
        text::ANALYZER_VERSION
    )
}

/// What a node states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A fact about the world or the project.
    Fact,
    /// What someone likes, wants or prefers.
    Preference,
    /// Who someone or something is.
    Identity,
    /// When something holds.
    TimeScope,
}

impl NodeKind {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Preference => "preference",
            Self::Identity => "identity",
            Self::TimeScope => "time_scope",
        }
    }

    /// The kind named `s` (the stored and wire name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "fact" => Some(Self::Fact),
            "preference" => Some(Self::Preference),
            "identity" => Some(Self::Identity),
            "time_scope" => Some(Self::TimeScope),
            _ => None,
        }
    }
}

/// Where a node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Accepted and current: part of the retrieval graph.
    Active,
    /// Accepted, in an unresolved conflict with another node: still in the graph, and the
    /// evidence it cites is reported as disputed.
    Pending,
    /// Accepted, then replaced by a resolution: out of the graph; the evidence it cites is
    /// reported as superseded.
    Superseded,
    /// Failed the grounding check: kept for diagnostics, never used for retrieval.
    Rejected,
}

impl NodeStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Pending => "pending",
            Self::Superseded => "superseded",
            Self::Rejected => "rejected",
        }
    }

    /// The status named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "pending" => Some(Self::Pending),
            "superseded" => Some(Self::Superseded),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }

    /// Whether the node takes part in retrieval (active or pending).
    pub fn in_graph(self) -> bool {
        matches!(self, Self::Active | Self::Pending)
    }
}

/// One citation: a ledger event and the span of its text the node rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The cited event.
    pub event_id: u64,
    /// The quoted span, as the model gave it.
    pub quote: String,
}

/// The (subject, predicate) a node is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeKey {
    /// What the node is about.
    pub subject: String,
    /// Which property of the subject.
    pub predicate: String,
}

impl NodeKey {
    /// The key in normalized form ([`normalize`] of both parts): two nodes are about the
    /// same thing when their normalized keys are equal.
    pub fn normalized(&self) -> NodeKey {
        NodeKey {
            subject: normalize(&self.subject),
            predicate: normalize(&self.predicate),
        }
    }
}

/// Lowercase words joined by single spaces: "Lives_In" and "lives in" are equal.
pub fn normalize(s: &str) -> String {
    text::words(s).join(" ")
}

/// A stored node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SemanticNode {
    /// The store's id of the node (increasing in commit order).
    pub node_id: u64,
    /// The space whose evidence it cites.
    pub space: String,
    /// What it states.
    pub kind: NodeKind,
    /// What it is about.
    pub subject: String,
    /// Which property.
    pub predicate: String,
    /// The property's value.
    pub value: String,
    /// The statement as one sentence.
    pub text: String,
    /// The evidence it rests on, in the model's order.
    pub cites: Vec<Citation>,
    /// Since when it holds, as the model said it.
    pub valid_from: Option<String>,
    /// Until when it holds.
    pub valid_to: Option<String>,
    /// The (subject, predicate) the model said this node updates.
    pub updates: Option<NodeKey>,
    /// Where it stands.
    pub status: NodeStatus,
    /// Why it was rejected.
    pub reason: Option<String>,
    /// The actor of highest authority among the cited events ("" when none exists).
    pub actor: String,
    /// The latest time among the cited events (0 when none exists).
    pub event_time_ms: i64,
    /// The last event id of the batch that proposed it.
    pub batch_event_id: u64,
    /// The semantic fingerprint it was compiled under.
    pub fingerprint: String,
}

impl SemanticNode {
    /// The node's (subject, predicate).
    pub fn key(&self) -> NodeKey {
        NodeKey {
            subject: self.subject.clone(),
            predicate: self.predicate.clone(),
        }
    }
}

/// Whether a conflict is still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictState {
    /// Neither rule decided: both nodes remain, marked pending.
    Pending,
    /// A resolution decided it.
    Resolved,
}

impl ConflictState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Resolved => "resolved",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "resolved" => Some(Self::Resolved),
            _ => None,
        }
    }
}

/// How a conflict was decided: who won, by which rule, why and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// The node that stands.
    pub winner: u64,
    /// The node that became superseded.
    pub loser: u64,
    /// `authority` (user > assistant > tool), `time` (later evidence wins) or `superseded`
    /// (a party was superseded by a third node).
    pub rule: String,
    /// Whose evidence decided: the winning node's actor.
    pub decided_by: String,
    /// The decision in words.
    pub reason: String,
    /// When it took effect: the time of the deciding evidence.
    pub at_ms: i64,
}

/// Two accepted nodes with the same (subject, predicate) and different values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The store's id of the conflict.
    pub conflict_id: u64,
    /// The space.
    pub space: String,
    /// The normalized key both nodes share.
    pub key: NodeKey,
    /// The node that was there first.
    pub older: u64,
    /// The node that disagreed with it.
    pub newer: u64,
    /// Open or decided.
    pub state: ConflictState,
    /// The decision, once resolved.
    pub resolution: Option<Resolution>,
}

/// Bounds of one run of the compile job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileLimits {
    /// Evidence rows per model call (each batch commits with its checkpoint). Default 20.
    pub batch_rows: usize,
    /// Stop (as a crash would) after this many batches; `None` runs to the end.
    pub stop_after_batches: Option<usize>,
    /// Attempts of a batch whose model call or output failed before it is abandoned (the
    /// checkpoint moves past it, the failure stays recorded). Default 3.
    pub max_attempts: u32,
    /// Current nodes shown to the model (so it can mark updates). Default 40.
    pub known_nodes: usize,
}

impl Default for CompileLimits {
    fn default() -> Self {
        Self {
            batch_rows: 20,
            stop_after_batches: None,
            max_attempts: 3,
            known_nodes: 40,
        }
    }
}

/// What happened to a batch that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureState {
    /// It will be retried by the next run (the checkpoint did not move).
    Failed,
    /// It failed `max_attempts` times; the checkpoint moved past it without nodes.
    Abandoned,
    /// A later attempt succeeded.
    Recovered,
}

impl FailureState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Abandoned => "abandoned",
            Self::Recovered => "recovered",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "failed" => Some(Self::Failed),
            "abandoned" => Some(Self::Abandoned),
            "recovered" => Some(Self::Recovered),
            _ => None,
        }
    }
}

/// A batch whose model call failed or whose output was malformed. Nothing of it was
/// written but this record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchFailure {
    /// The batch's first event id (its identity: a retry starts at the same event).
    pub first_event_id: u64,
    /// Its last event id at the latest attempt.
    pub last_event_id: u64,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The latest error.
    pub error: String,
    /// Retry, abandoned or recovered.
    pub state: FailureState,
}

/// The compile job's state in a space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SemanticStatus {
    /// The space.
    pub space: String,
    /// The fingerprint the space's nodes were compiled under ("" before the first batch).
    pub fingerprint: String,
    /// The last event compiled (0 before the first batch).
    pub last_event_id: u64,
    /// Increases with every change of the space's nodes (commits, rebuilds).
    pub revision: u64,
    /// Failed batches, oldest first.
    pub failures: Vec<BatchFailure>,
}

/// What one run of the compile job did in a space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileReport {
    /// The space.
    pub space: String,
    /// The fingerprint compiled under.
    pub fingerprint: String,
    /// The space's nodes were deleted first (fingerprint change or ledger mismatch).
    pub rebuilt: bool,
    /// Batches committed by this run.
    pub batches: u64,
    /// Evidence rows those batches covered.
    pub rows: u64,
    /// Nodes accepted.
    pub accepted: u64,
    /// Nodes rejected by the grounding check.
    pub rejected: u64,
    /// Nodes superseded by a resolution.
    pub superseded: u64,
    /// Conflicts left pending.
    pub pending: u64,
    /// The failure that stopped this run (retried by the next one).
    pub failed: Option<BatchFailure>,
    /// The run stopped at `stop_after_batches` with evidence left; a later run resumes.
    pub paused: bool,
    /// The checkpoint after the run.
    pub last_event_id: u64,
}
