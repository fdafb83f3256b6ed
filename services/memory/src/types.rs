//! Value types of the store contract: evidence rows, ledger heads, index status, recall
//! queries and results.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A piece of raw evidence to record: one visible event (a user, assistant or tool turn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvidence {
    /// The project space (tenant/project) the evidence belongs to; retrieval never crosses it.
    pub space: String,
    /// The context the event happened in (a session, a thread, a document).
    pub context: String,
    /// The runtime session that produced it (may equal `context`).
    pub session_id: String,
    /// Who said or did it.
    pub actor: String,
    /// When it happened, milliseconds since the Unix epoch (UTC).
    pub event_time_ms: i64,
    /// Its position within `context`.
    pub turn_order: i64,
    /// The visible text.
    pub text: String,
    /// The source's id for this event: the idempotency key within the space.
    pub source_id: String,
    /// Offset in the source stream (a journal seq, a byte offset), for tracing back.
    pub source_offset: i64,
}

impl NewEvidence {
    /// sha256 (hex) of the canonical row: a JSON array of every field in declaration
    /// order, so equal evidence always has an equal checksum.
    pub fn checksum(&self) -> String {
        let canonical = serde_json::json!([
            self.space,
            self.context,
            self.session_id,
            self.actor,
            self.event_time_ms,
            self.turn_order,
            self.text,
            self.source_id,
            self.source_offset,
        ]);
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}

/// A ledger row: immutable evidence with its event id (the ledger's row id, increasing in
/// append order across all spaces) and checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The source event id every retrieved item points back to.
    pub event_id: u64,
    /// The recorded fields.
    #[serde(flatten)]
    pub row: NewEvidence,
    /// sha256 of the canonical row ([`NewEvidence::checksum`]).
    pub checksum: String,
}

/// The result of appending one piece of evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// The stored row (the existing one for a duplicate).
    pub evidence: Evidence,
    /// The source id was already recorded with the same content; nothing was written.
    pub duplicate: bool,
}

/// The ledger checksum of a space: its last row and the hash chain up to it
/// (`chain_n = sha256(chain_{n-1} || checksum_n)`, starting from the empty string), so
/// one comparison proves an index covers an unaltered prefix of the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerHead {
    /// The last event id of the space (0 when empty).
    pub last_event_id: u64,
    /// The chain hash at that row ("" when empty).
    pub chain: String,
    /// Rows in the space.
    pub rows: u64,
}

/// Extends a ledger hash chain by one row checksum.
pub fn chain_next(previous: &str, checksum: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(previous.as_bytes());
    hasher.update(checksum.as_bytes());
    hex::encode(hasher.finalize())
}

/// How far the derived indexes of a space are behind its ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStatus {
    /// The space.
    pub space: String,
    /// The published index generation (0 before the first build).
    pub generation: u64,
    /// The published generation's configuration fingerprint.
    pub fingerprint: String,
    /// The fingerprint this store would build now.
    pub expected_fingerprint: String,
    /// The ledger position the published index covers.
    pub indexed: LedgerHead,
    /// The ledger's current head.
    pub ledger: LedgerHead,
}

impl IndexStatus {
    /// Whether a query would find the index aligned (no rebuild, no catch-up).
    pub fn aligned(&self) -> bool {
        self.generation > 0
            && self.fingerprint == self.expected_fingerprint
            && self.indexed == self.ledger
    }
}

/// Bounds of one run of the index job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildLimits {
    /// Ledger rows indexed per transaction (each commits its checkpoint).
    pub batch_rows: usize,
    /// Stop (as a crash would) after this many rows; `None` runs to the end.
    pub stop_after_rows: Option<usize>,
}

impl Default for BuildLimits {
    fn default() -> Self {
        Self {
            batch_rows: 256,
            stop_after_rows: None,
        }
    }
}

/// What one run of the index job did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncReport {
    /// The generation the job worked on.
    pub generation: u64,
    /// A new generation was built (configuration changed or the ledger did not match).
    pub rebuilt: bool,
    /// The generation was published by this run.
    pub published: bool,
    /// Ledger rows indexed by this run.
    pub rows_indexed: u64,
    /// The run stopped at `stop_after_rows` before finishing; a later run resumes.
    pub paused: bool,
}

/// One read-path query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallQuery {
    /// The space to search (never crossed).
    pub space: String,
    /// The query text, as the user or agent wrote it.
    pub text: String,
    /// "Now" for the organized context; the wall clock when `None`.
    pub reference_time_ms: Option<i64>,
    /// At most this many evidence items.
    pub max_items: usize,
    /// At most this many (estimated) tokens of evidence text.
    pub token_budget: usize,
}

impl RecallQuery {
    /// A query with the default limits (10 items, 2,000 tokens).
    pub fn new(space: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            space: space.into(),
            text: text.into(),
            reference_time_ms: None,
            max_items: 10,
            token_budget: 2_000,
        }
    }
}

/// The signals that ranked an item (0 when a signal does not exist for it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// Reciprocal-rank fusion of the candidate lists.
    pub fused: f32,
    /// Personalized PageRank mass over the graph.
    pub graph: f32,
    /// Exact sparse (BM25) score of the best span.
    pub sparse: f32,
    /// Cosine of the query and event vectors.
    pub dense: f32,
    /// Dot product of the query's and the event's learned sparse weights (0 without a
    /// model that has them).
    #[serde(default)]
    pub learned: f32,
    /// Multi-vector MaxSim of the query's and the event's token vectors (0 without a
    /// model that has them).
    #[serde(default)]
    pub multivector: f32,
    /// The reranker's relevance, when a reranker re-scored this item
    /// ([`crate::rerank`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<f32>,
}

/// One piece of selected evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecalledItem {
    /// The source event (ledger row) this evidence is.
    pub event_id: u64,
    /// The source's own id.
    pub source_id: String,
    /// Context, session and actor of the event.
    pub context: String,
    /// The runtime session.
    pub session_id: String,
    /// Who said or did it.
    pub actor: String,
    /// When, milliseconds since the epoch.
    pub event_time_ms: i64,
    /// Position in its context.
    pub turn_order: i64,
    /// The evidence text (the whole event).
    pub text: String,
    /// Byte range of the best-matching span within `text`.
    pub span: (usize, usize),
    /// Final score (higher is better).
    pub score: f32,
    /// Estimated tokens of `text`.
    pub tokens: usize,
    /// The individual signals.
    pub signals: Signals,
}

/// Selected evidence of one context, in turn order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextGroup {
    /// The context.
    pub context: String,
    /// Earliest and latest event time of the group's items.
    pub start_ms: i64,
    /// See `start_ms`.
    pub end_ms: i64,
    /// Indices into [`Recall::items`].
    pub items: Vec<usize>,
}

/// The conflict state of a recalled item: a compiled node citing its event is disputed
/// (`pending`: another node disagrees and no rule decided) or was replaced (`superseded`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemConflict {
    /// Index into [`Recall::items`].
    pub item: usize,
    /// The item's event.
    pub event_id: u64,
    /// The node citing it.
    pub node_id: u64,
    /// `Pending` or `Superseded`.
    pub state: crate::semantic::NodeStatus,
    /// The node's subject.
    pub subject: String,
    /// The node's predicate.
    pub predicate: String,
    /// The node's value.
    pub value: String,
    /// The competing values (pending) or the value that replaced it (superseded).
    pub others: Vec<String>,
}

/// The organized context handed to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrganizedContext {
    /// "Now" for the reader of the evidence.
    pub reference_time_ms: i64,
    /// Groups in chronological order.
    pub groups: Vec<ContextGroup>,
    /// Estimated tokens of all items.
    pub tokens: usize,
    /// The conflict state of items whose events are cited by pending or superseded nodes,
    /// in item order (empty without semantic compile).
    #[serde(default)]
    pub conflicts: Vec<ItemConflict>,
}

/// Counters of one read-path run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallStats {
    /// The generation that answered.
    pub generation: u64,
    /// Rows the alignment check indexed first (catch-up or rebuild).
    pub aligned_rows: u64,
    /// The alignment check rebuilt the indexes.
    pub rebuilt: bool,
    /// Candidates per recall list.
    pub fulltext: usize,
    /// See `fulltext`.
    pub sparse: usize,
    /// See `fulltext`.
    pub dense: usize,
    /// Distinct events after fusion.
    pub fused: usize,
    /// Events scored exactly (fused plus graph-reached).
    pub scored: usize,
    /// Best candidates the reranker re-scored (0 without a reranker, or when it failed).
    #[serde(default)]
    pub reranked: usize,
    /// How the space's read view was had: from the store's cache, refreshed with the rows
    /// indexed since, or built from every row.
    #[serde(default)]
    pub view: ViewLoad,
    /// Ledger rows this recall loaded into the read view (0 from the cache, the new rows
    /// on a refresh, every indexed row on a build).
    #[serde(default)]
    pub loaded_rows: u64,
}

/// How a recall had its read view ([`RecallStats::view`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewLoad {
    /// The cached view was current (or a recall that ran meanwhile made it so).
    #[default]
    Cached,
    /// The cached view was refreshed with the rows indexed after it.
    Refreshed,
    /// The view was built from every indexed row (none cached, or a new generation or
    /// semantic revision).
    Built,
}

/// The read path's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recall {
    /// Selected evidence, best first, one per source event.
    pub items: Vec<RecalledItem>,
    /// The same evidence organized for a model.
    pub context: OrganizedContext,
    /// Counters.
    pub stats: RecallStats,
}
