//! What compiled nodes add to the read path: graph edges between each accepted (active or
//! pending) node and the events it cites, for Personalized PageRank; and, per event, the
//! conflict state of the nodes citing it (pending or superseded), for the organized
//! context. Rejected nodes add nothing.

use std::collections::{BTreeSet, HashMap};

use super::{Conflict, ConflictState, NodeStatus, SemanticNode};
use crate::derive::EDGE_NODE;

/// A disputed or replaced node citing an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictNote {
    /// The node.
    pub node_id: u64,
    /// Pending or superseded.
    pub state: NodeStatus,
    /// The node's subject.
    pub subject: String,
    /// The node's predicate.
    pub predicate: String,
    /// The node's value.
    pub value: String,
    /// The competing values (pending) or the value that replaced it (superseded).
    pub others: Vec<String>,
}

/// Graph edges and conflict notes of a space's nodes.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// (event id, node key `s:<node id>`, [`EDGE_NODE`]).
    pub edges: Vec<(u64, String, i64)>,
    /// Event id → the notes of the nodes citing it, by node id.
    pub notes: HashMap<u64, Vec<ConflictNote>>,
}

/// The overlay of a space's nodes and conflicts.
pub fn overlay(nodes: &[SemanticNode], conflicts: &[Conflict]) -> Overlay {
    let by_id: HashMap<u64, &SemanticNode> = nodes.iter().map(|n| (n.node_id, n)).collect();
    let value = |id: u64| by_id.get(&id).map(|n| n.value.clone());
    let mut others: HashMap<u64, BTreeSet<String>> = HashMap::new();
    for c in conflicts {
        match (&c.state, &c.resolution) {
            (ConflictState::Pending, _) => {
                for (me, other) in [(c.older, c.newer), (c.newer, c.older)] {
                    if let Some(v) = value(other) {
                        others.entry(me).or_default().insert(v);
                    }
                }
            }
            (ConflictState::Resolved, Some(r)) if r.rule != "superseded" => {
                if let Some(v) = value(r.winner) {
                    others.entry(r.loser).or_default().insert(v);
                }
            }
            _ => {}
        }
    }
    let mut out = Overlay::default();
    let mut edges = BTreeSet::new();
    for n in nodes {
        if n.status.in_graph() {
            for c in &n.cites {
                edges.insert((c.event_id, format!("s:{}", n.node_id), EDGE_NODE));
            }
        }
        if matches!(n.status, NodeStatus::Pending | NodeStatus::Superseded) {
            let cited: BTreeSet<u64> = n.cites.iter().map(|c| c.event_id).collect();
            for event_id in cited {
                out.notes.entry(event_id).or_default().push(ConflictNote {
                    node_id: n.node_id,
                    state: n.status,
                    subject: n.subject.clone(),
                    predicate: n.predicate.clone(),
                    value: n.value.clone(),
                    others: others
                        .get(&n.node_id)
                        .map(|s| s.iter().cloned().collect())
                        .unwrap_or_default(),
                });
            }
        }
    }
    out.edges = edges.into_iter().collect();
    for notes in out.notes.values_mut() {
        notes.sort_by_key(|n| n.node_id);
    }
    out
}
