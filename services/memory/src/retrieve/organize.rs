//! Context organization: the selected evidence grouped by context in chronological order,
//! each item with its time, actor, context and source id, plus the reference time.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::{now_ms, time, ContextGroup, OrganizedContext, Recall, RecallQuery, RecalledItem};

pub(super) fn organize(items: &[RecalledItem], query: &RecallQuery) -> OrganizedContext {
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
    OrganizedContext {
        reference_time_ms: query.reference_time_ms.unwrap_or_else(now_ms),
        tokens: items.iter().map(|i| i.tokens).sum(),
        groups,
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
        }
    }
    out
}
