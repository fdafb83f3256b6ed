//! Context organization: the selected evidence grouped by context in chronological order,
//! each item with its time, actor, context and source id, plus the reference time and the
//! conflict state of items whose events compiled nodes dispute or replaced.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::semantic::overlay::ConflictNote;
use crate::semantic::NodeStatus;
use crate::{
    now_ms, time, ContextGroup, ItemConflict, OrganizedContext, Recall, RecallQuery, RecalledItem,
};

pub(super) fn organize(
    items: &[RecalledItem],
    query: &RecallQuery,
    notes: &HashMap<u64, Vec<ConflictNote>>,
) -> OrganizedContext {
    let mut groups: Vec<ContextGroup> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let at = *index.entry(item.context.as_str()).or_insert_with(|| {
            groups.push(ContextGroup {
                context: item.context.clone(),
                start_ms: item.event_time_ms,
                end_ms: item.event_time_ms,
                items: Vec::new(),
            });
            groups.len() - 1
        });
        let g = &mut groups[at];
        g.start_ms = g.start_ms.min(item.event_time_ms);
        g.end_ms = g.end_ms.max(item.event_time_ms);
        g.items.push(i);
    }
    for g in &mut groups {
        g.items.sort_by_key(|&i| {
            (
                items[i].turn_order,
                items[i].event_time_ms,
                items[i].event_id,
            )
        });
    }
    groups.sort_by(|a, b| a.start_ms.cmp(&b.start_ms).then(a.context.cmp(&b.context)));
    let conflicts = items
        .iter()
        .enumerate()
        .flat_map(|(i, item)| {
            notes
                .get(&item.event_id)
                .into_iter()
                .flatten()
                .map(move |n| ItemConflict {
                    item: i,
                    event_id: item.event_id,
                    node_id: n.node_id,
                    state: n.state,
                    subject: n.subject.clone(),
                    predicate: n.predicate.clone(),
                    value: n.value.clone(),
                    others: n.others.clone(),
                })
        })
        .collect();
    OrganizedContext {
        reference_time_ms: query.reference_time_ms.unwrap_or_else(now_ms),
        tokens: items.iter().map(|i| i.tokens).sum(),
        groups,
        conflicts,
    }
}

/// A conflict in words, for a model: `superseded: user lives in "Berlin", now "Lisbon"`
/// or `disputed: project builds with "Rust 1.79" vs "Rust 1.80"; unresolved`.
pub fn conflict_note(c: &ItemConflict) -> String {
    let others = c
        .others
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let head = format!("{} {} {:?}", c.subject, c.predicate, c.value);
    match (c.state, others.is_empty()) {
        (NodeStatus::Superseded, true) => format!("superseded: {head}"),
        (NodeStatus::Superseded, false) => format!("superseded: {head}, now {others}"),
        (_, true) => format!("disputed: {head}; unresolved"),
        (_, false) => format!("disputed: {head} vs {others}; unresolved"),
    }
}

/// The organized context as text for a model: the reference time, then each context with
/// its evidence lines `[event <id> · source <source id> · <time> · <actor>] <text>`.
pub fn render(recall: &Recall) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Reference time: {}",
        time::display(recall.context.reference_time_ms)
    );
    for g in &recall.context.groups {
        let _ = writeln!(
            out,
            "\n## {} ({} – {})",
            g.context,
            time::date_words(g.start_ms),
            time::date_words(g.end_ms)
        );
        for &i in &g.items {
            let Some(item) = recall.items.get(i) else {
                continue;
            };
            let _ = writeln!(
                out,
                "[event {} · source {} · {} · {}] {}",
                item.event_id,
                item.source_id,
                time::display(item.event_time_ms),
                item.actor,
                item.text
            );
            for c in recall.context.conflicts.iter().filter(|c| c.item == i) {
                let _ = writeln!(out, "  ({})", conflict_note(c));
            }
        }
    }
    out
}
