//! Conflicts (write path step 3), decided before anything is written: a batch's checked
//! nodes and the space's current nodes with the same keys become one [`BatchPlan`], which a
//! backend applies in one transaction with the batch's checkpoint.
//!
//! An accepted node that disagrees (another value) with an active or pending node about the
//! same normalized (subject, predicate):
//! - is an **explicit update** when the model said it `updates` that key, or when its
//!   evidence is the user's and later than the other node's. Then authority decides
//!   (user > assistant > tool > others), then time (later wins); the loser becomes
//!   `superseded` with a resolution. Same authority and same time decide nothing.
//! - otherwise the conflict stays **pending**: both nodes remain, marked `pending`.
//!
//! A node superseded by a third one also settles the pending conflicts it was part of (rule
//! `superseded`): the question they asked is moot.

use super::ground::{Authority, Grounded, Rejection};
use super::parse::ProposedNode;
use super::{normalize, NodeKey, NodeStatus};
use crate::{time, Error, Result};

/// A proposed node with the verdict of the grounding check.
#[derive(Debug, Clone)]
pub(crate) struct CheckedNode {
    pub proposed: ProposedNode,
    pub verdict: Result<Grounded, Rejection>,
}

/// A node of the space that shares a key with the batch (active or pending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupNode {
    /// The stored node id.
    pub node_id: u64,
    /// Its normalized (subject, predicate).
    pub key: NodeKey,
    /// Its value.
    pub value: String,
    /// Actor of the evidence it cites.
    pub actor: String,
    /// Event time of that evidence.
    pub event_time_ms: i64,
    /// Active or pending.
    pub status: NodeStatus,
}

/// The space's nodes and open conflicts for a batch's keys.
#[derive(Debug, Clone, Default)]
pub struct NodeGroup {
    /// The nodes sharing a key with the batch.
    pub nodes: Vec<GroupNode>,
    /// (conflict id, older node, newer node).
    pub pending: Vec<(u64, u64, u64)>,
}

/// A node of the plan: stored already, or the n-th new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRef {
    /// A node already stored, by id.
    Stored(u64),
    /// The n-th new node of the plan.
    New(usize),
}

/// A node to insert.
#[derive(Debug, Clone)]
pub struct NewNode {
    /// The node as the model proposed it.
    pub proposed: ProposedNode,
    /// Its status.
    pub status: NodeStatus,
    /// Why it was rejected or is pending, when it is.
    pub reason: Option<String>,
    /// Actor of the evidence it cites.
    pub actor: String,
    /// Event time of that evidence.
    pub event_time_ms: i64,
}

/// A decision to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedResolution {
    /// The node that stays.
    pub winner: NodeRef,
    /// The node superseded.
    pub loser: NodeRef,
    /// `authority`, `time` or `superseded` ([`crate::semantic::Resolution::rule`]).
    pub rule: &'static str,
    /// Whose evidence decided: the winning node's actor.
    pub decided_by: String,
    /// The decision in words.
    pub reason: String,
    /// The later event time of the two nodes.
    pub at_ms: i64,
}

/// A conflict to insert (resolved at once or pending).
#[derive(Debug, Clone)]
pub struct NewConflict {
    /// The normalized (subject, predicate) in dispute.
    pub key: NodeKey,
    /// The earlier node.
    pub older: NodeRef,
    /// The later node.
    pub newer: NodeRef,
    /// Its resolution, when decided at once.
    pub resolution: Option<PlannedResolution>,
}

/// Where the batch sits in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpan {
    /// The space.
    pub space: String,
    /// The semantic fingerprint of the compile.
    pub fingerprint: String,
    /// The checkpoint the batch was read after; the commit refuses another.
    pub after: u64,
    /// The first event of the batch.
    pub first_event_id: u64,
    /// The last event of the batch.
    pub last_event_id: u64,
    /// The checksum of the batch's last row (the next checkpoint).
    pub last_checksum: String,
}

impl BatchSpan {
    /// Refuses a write when the space's compile checkpoint (`last`, the store's) is no longer
    /// the one the batch was read after: another compile ran.
    pub fn check_checkpoint(&self, last: u64) -> Result<()> {
        if last != self.after {
            return Err(Error::Unavailable(format!(
                "the compile checkpoint of space {} moved to event {last} (another compile ran)",
                self.space
            )));
        }
        Ok(())
    }
}

/// Everything one batch writes, in one transaction.
#[derive(Debug, Clone)]
pub struct BatchPlan {
    /// Where the batch sits in the ledger.
    pub span: BatchSpan,
    /// Nodes to insert.
    pub nodes: Vec<NewNode>,
    /// Stored nodes whose status changes.
    pub status_changes: Vec<(u64, NodeStatus)>,
    /// Conflicts to insert.
    pub conflicts: Vec<NewConflict>,
    /// Stored pending conflicts this batch resolves.
    pub resolved: Vec<(u64, PlannedResolution)>,
}

impl BatchPlan {
    /// Nodes of the batch that end with `status` (new ones and changed ones).
    pub fn count(&self, status: NodeStatus) -> u64 {
        let new = self.nodes.iter().filter(|n| n.status == status).count();
        let changed = self
            .status_changes
            .iter()
            .filter(|(_, s)| *s == status)
            .count();
        (new + changed) as u64
    }

    /// Conflicts of the batch left pending.
    pub fn pending_conflicts(&self) -> u64 {
        self.conflicts
            .iter()
            .filter(|c| c.resolution.is_none())
            .count() as u64
    }
}

/// One node while the plan is made.
struct Entry {
    at: NodeRef,
    key: NodeKey,
    value_key: String,
    value: String,
    actor: String,
    authority: Authority,
    time: i64,
    updates: Option<NodeKey>,
    original: Option<NodeStatus>,
    superseded: bool,
}

/// An open conflict while the plan is made.
struct Open {
    stored: Option<u64>,
    older: usize,
    newer: usize,
}

/// Decides the batch's conflicts. `checked` is in the model's order.
pub(crate) fn plan(span: BatchSpan, checked: Vec<CheckedNode>, group: NodeGroup) -> BatchPlan {
    let mut entries: Vec<Entry> = group
        .nodes
        .iter()
        .map(|n| Entry {
            at: NodeRef::Stored(n.node_id),
            key: n.key.normalized(),
            value_key: normalize(&n.value),
            value: n.value.clone(),
            actor: n.actor.clone(),
            authority: Authority::of(&n.actor),
            time: n.event_time_ms,
            updates: None,
            original: Some(n.status),
            superseded: false,
        })
        .collect();
    let index_of =
        |entries: &[Entry], id: u64| entries.iter().position(|e| e.at == NodeRef::Stored(id));
    let mut open: Vec<Open> = group
        .pending
        .iter()
        .filter_map(|&(id, older, newer)| {
            Some(Open {
                stored: Some(id),
                older: index_of(&entries, older)?,
                newer: index_of(&entries, newer)?,
            })
        })
        .collect();
    let mut nodes = Vec::with_capacity(checked.len());
    let mut conflicts: Vec<NewConflict> = Vec::new();
    let mut resolved: Vec<(u64, PlannedResolution)> = Vec::new();

    for c in checked {
        let grounded = match c.verdict {
            Err(reason) => {
                nodes.push(NewNode {
                    proposed: c.proposed,
                    status: NodeStatus::Rejected,
                    reason: Some(reason.to_string()),
                    actor: String::new(),
                    event_time_ms: 0,
                });
                continue;
            }
            Ok(g) => g,
        };
        let p = &c.proposed;
        let n = entries.len();
        entries.push(Entry {
            at: NodeRef::New(nodes.len()),
            key: NodeKey {
                subject: p.subject.clone(),
                predicate: p.predicate.clone(),
            }
            .normalized(),
            value_key: normalize(&p.value),
            value: p.value.clone(),
            actor: grounded.actor.clone(),
            authority: Authority::of(&grounded.actor),
            time: grounded.event_time_ms,
            updates: p.updates.as_ref().map(NodeKey::normalized),
            original: None,
            superseded: false,
        });
        nodes.push(NewNode {
            proposed: c.proposed,
            status: NodeStatus::Active,
            reason: None,
            actor: grounded.actor,
            event_time_ms: grounded.event_time_ms,
        });
        for o in 0..n {
            let (old, new) = (&entries[o], &entries[n]);
            if old.superseded || old.key != new.key || old.value_key == new.value_key {
                continue;
            }
            let decision = decide(old, new);
            let key = new.key.clone();
            let (older, newer) = (old.at, new.at);
            match decision {
                None => {
                    open.push(Open {
                        stored: None,
                        older: o,
                        newer: n,
                    });
                    conflicts.push(NewConflict {
                        key,
                        older,
                        newer,
                        resolution: None,
                    });
                }
                Some((new_wins, rule, reason)) => {
                    let (w, l) = if new_wins { (n, o) } else { (o, n) };
                    conflicts.push(NewConflict {
                        key,
                        older,
                        newer,
                        resolution: Some(PlannedResolution {
                            winner: entries[w].at,
                            loser: entries[l].at,
                            rule,
                            decided_by: entries[w].actor.clone(),
                            reason,
                            at_ms: entries[w].time.max(entries[l].time),
                        }),
                    });
                    supersede(&mut entries, &mut open, &mut conflicts, &mut resolved, l, w);
                    if l == n {
                        break;
                    }
                }
            }
        }
    }

    // Final statuses: superseded, else pending while in an open conflict, else active.
    let mut status_changes = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let status = if e.superseded {
            NodeStatus::Superseded
        } else if open.iter().any(|o| o.older == i || o.newer == i) {
            NodeStatus::Pending
        } else {
            NodeStatus::Active
        };
        match e.at {
            NodeRef::New(k) => nodes[k].status = status,
            NodeRef::Stored(id) => {
                if e.original != Some(status) {
                    status_changes.push((id, status));
                }
            }
        }
    }
    BatchPlan {
        span,
        nodes,
        status_changes,
        conflicts,
        resolved,
    }
}

/// Whether the newer node wins, by which rule and why; `None` when the conflict stays
/// pending.
fn decide(old: &Entry, new: &Entry) -> Option<(bool, &'static str, String)> {
    let marked = new.updates.as_ref() == Some(&new.key);
    let user_later = new.authority == Authority::User && new.time > old.time;
    if !(marked || user_later) {
        return None;
    }
    let key = format!("{} / {}", new.key.subject, new.key.predicate);
    let (winner_is_new, rule) = if new.authority != old.authority {
        (new.authority > old.authority, "authority")
    } else if new.time != old.time {
        (new.time > old.time, "time")
    } else {
        return None;
    };
    let (w, l) = if winner_is_new {
        (new, old)
    } else {
        (old, new)
    };
    let reason = match rule {
        "authority" => format!(
            "{key}: {:?} from {} outranks {:?} from {}",
            w.value, w.actor, l.value, l.actor
        ),
        _ => format!(
            "{key}: {:?} ({}) is later than {:?} ({}), same authority ({})",
            w.value,
            time::display(w.time),
            l.value,
            time::display(l.time),
            w.actor
        ),
    };
    Some((winner_is_new, rule, reason))
}

/// Marks entry `loser` superseded by `winner` and settles the open conflicts it was in.
fn supersede(
    entries: &mut [Entry],
    open: &mut Vec<Open>,
    conflicts: &mut [NewConflict],
    resolved: &mut Vec<(u64, PlannedResolution)>,
    loser: usize,
    winner: usize,
) {
    entries[loser].superseded = true;
    let mut still = Vec::with_capacity(open.len());
    for o in open.drain(..) {
        if o.older != loser && o.newer != loser {
            still.push(o);
            continue;
        }
        let other = if o.older == loser { o.newer } else { o.older };
        let resolution = PlannedResolution {
            winner: entries[other].at,
            loser: entries[loser].at,
            rule: "superseded",
            decided_by: entries[winner].actor.clone(),
            reason: format!(
                "{:?} was superseded by {:?}; this conflict is settled with it",
                entries[loser].value, entries[winner].value
            ),
            at_ms: entries[winner].time,
        };
        match o.stored {
            Some(id) => resolved.push((id, resolution)),
            None => {
                let (a, b) = (entries[o.older].at, entries[o.newer].at);
                if let Some(c) = conflicts
                    .iter_mut()
                    .find(|c| c.older == a && c.newer == b && c.resolution.is_none())
                {
                    c.resolution = Some(resolution);
                }
            }
        }
    }
    *open = still;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantic::{Citation, NodeKind};

    fn span() -> BatchSpan {
        BatchSpan {
            space: "s".into(),
            fingerprint: "f".into(),
            after: 0,
            first_event_id: 1,
            last_event_id: 9,
            last_checksum: "c".into(),
        }
    }

    fn stored(id: u64, value: &str, actor: &str, time: i64) -> GroupNode {
        GroupNode {
            node_id: id,
            key: NodeKey {
                subject: "user".into(),
                predicate: "editor".into(),
            },
            value: value.into(),
            actor: actor.into(),
            event_time_ms: time,
            status: NodeStatus::Active,
        }
    }

    fn proposed(value: &str, actor: &str, time: i64, marked: bool) -> CheckedNode {
        CheckedNode {
            proposed: ProposedNode {
                kind: NodeKind::Preference,
                subject: "User".into(),
                predicate: "Editor".into(),
                value: value.into(),
                text: "t".into(),
                cites: vec![Citation {
                    event_id: 5,
                    quote: "q".into(),
                }],
                valid_from: None,
                valid_to: None,
                updates: marked.then(|| NodeKey {
                    subject: "user".into(),
                    predicate: "editor".into(),
                }),
            },
            verdict: Ok(Grounded {
                actor: actor.into(),
                event_time_ms: time,
            }),
        }
    }

    fn group(nodes: Vec<GroupNode>) -> NodeGroup {
        NodeGroup {
            nodes,
            pending: Vec::new(),
        }
    }

    #[test]
    fn an_explicit_update_by_a_lower_authority_loses() {
        let plan = plan(
            span(),
            vec![proposed("Emacs", "assistant", 20, true)],
            group(vec![stored(7, "Vim", "user", 10)]),
        );
        assert_eq!(plan.nodes[0].status, NodeStatus::Superseded);
        assert!(plan.status_changes.is_empty(), "the user's node stands");
        let r = plan.conflicts[0].resolution.clone().unwrap();
        assert_eq!(
            (r.winner, r.loser, r.rule, r.decided_by.as_str()),
            (NodeRef::Stored(7), NodeRef::New(0), "authority", "user")
        );
    }

    #[test]
    fn undecided_disagreements_stay_pending() {
        for (actor, time, marked) in [
            // Same authority, same time, even with the marker.
            ("user", 10, true),
            // No marker, and not the user.
            ("assistant", 20, false),
            ("tool:shell", 30, false),
        ] {
            let plan = plan(
                span(),
                vec![proposed("Emacs", actor, time, marked)],
                group(vec![stored(7, "Vim", "user", 10)]),
            );
            assert_eq!(plan.nodes[0].status, NodeStatus::Pending, "{actor}");
            assert_eq!(plan.status_changes, vec![(7, NodeStatus::Pending)]);
            assert_eq!(plan.pending_conflicts(), 1);
        }
    }

    #[test]
    fn equal_values_and_rejected_nodes_never_conflict() {
        let mut rejected = proposed("Emacs", "user", 20, true);
        rejected.verdict = Err(Rejection::NoCitations);
        let plan = plan(
            span(),
            vec![proposed("vim", "assistant", 20, false), rejected],
            group(vec![stored(7, "Vim", "user", 10)]),
        );
        assert!(plan.conflicts.is_empty());
        assert_eq!(
            plan.nodes.iter().map(|n| n.status).collect::<Vec<_>>(),
            [NodeStatus::Active, NodeStatus::Rejected]
        );
        assert_eq!(
            plan.nodes[1].reason.as_deref(),
            Some("the node cites no event")
        );
    }
}
