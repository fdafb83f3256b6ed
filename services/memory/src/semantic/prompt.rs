//! The compile prompt: instructions, the answer's JSON shape, the space's current nodes (so
//! the model can mark updates) and the batch's events with their ids, actors and times.
//! Changing it must bump [`PROMPT_VERSION`].

use std::fmt::Write as _;

use super::SemanticNode;
use crate::{time, Evidence};

/// Version of the prompt (part of the semantic fingerprint).
pub const PROMPT_VERSION: u32 = 1;

const INSTRUCTIONS: &str = "\
You compile long-term memory from conversation evidence. Read the events below and propose \
memory nodes for the durable information they state: facts, preferences, identities and \
time scopes.

Answer with one JSON object and nothing else, in this shape:
{\"nodes\":[{\"kind\":\"fact|preference|identity|time_scope\",\"subject\":\"…\",\"predicate\":\"…\",\
\"value\":\"…\",\"text\":\"one-sentence statement\",\"cites\":[{\"event_id\":N,\"quote\":\"exact span \
from that event\"}],\"valid_from\":\"optional\",\"valid_to\":\"optional\",\
\"updates\":{\"subject\":\"…\",\"predicate\":\"…\"}}]}

Rules:
- Every node cites at least one event by its id, each with a quote copied exactly from that \
event's text.
- Use the words of the cited events for subject and value; never add names, numbers or \
details the events do not state. Refer to the person talking to the assistant as \"user\".
- Add \"updates\" (the subject and predicate of a known node) only when an event explicitly \
changes that node; leave it out otherwise. valid_from and valid_to are optional.
- When the events hold nothing durable, answer {\"nodes\":[]}.
";

/// The prompt for one batch. `known` are current nodes of the space, newest first.
pub(crate) fn build(events: &[Evidence], known: &[SemanticNode]) -> String {
    let mut out = String::from(INSTRUCTIONS);
    if !known.is_empty() {
        out.push_str("\nKnown nodes (subject | predicate | value):\n");
        for n in known {
            let _ = writeln!(out, "- {} | {} | {}", n.subject, n.predicate, n.value);
        }
    }
    out.push_str("\nEvents:\n");
    for e in events {
        let _ = writeln!(
            out,
            "\n[event {} · {} · {} · {}]\n{}",
            e.event_id,
            e.row.actor,
            time::display(e.row.event_time_ms),
            e.row.context,
            e.row.text
        );
    }
    out
}
