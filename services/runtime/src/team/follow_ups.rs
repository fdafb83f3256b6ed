//! The follow-up/deferral gate (`gates.follow_ups`). Every member and the leader get
//! `team_follow_up`:
//!
//! - `{item}` reports something left open (`team.follow_up_opened`, numbered `F1`, `F2`, …
//!   over the team run);
//! - `{id, disposition: "done", reason?}` settles it once it is done (anyone);
//! - `{id, disposition: "deferred", reason}` leaves it for later — the leader only, and only
//!   with a reason (`team.follow_up_resolved`).
//!
//! `team_complete` runs the `follow_ups` gate: it fails while an item is open. The items
//! deferred (and, under `completion_policy: leader`, any left open) are listed in
//! `team.completed.follow_ups` and in the leader's result, so nothing is dropped silently.
//! The state is a projection of those board events (`state::TeamRecord::follow_ups`), the
//! same after a restart.

use lumina_protocol::team::{
    FollowUpDisposition, FollowUpItem, FollowUpStatus, TeamFollowUpOpened, TeamFollowUpResolved,
};
use lumina_protocol::{team_board_stream, Event};
use lumina_tools::{ToolDescriptor, ToolOutput};
use serde_json::{json, Value};

use super::state::TeamRecord;
use super::tools::{runtime_tool, string_arg};
use super::{active_team, TeamScope};
use crate::run::RunContext;
use crate::Result;

pub(crate) const FOLLOW_UP_TOOL: &str = "team_follow_up";

pub(crate) fn descriptor(team: &TeamScope) -> ToolDescriptor {
    let leader = &team.definition.entry_agent;
    runtime_tool(
        FOLLOW_UP_TOOL,
        format!(
            "Record a follow-up: something the task leaves open (`item`), so it is not lost. \
             The team cannot finish while a follow-up is open. When an open item is done, \
             settle it with `id` and disposition \"done\". Only the team leader `{leader}` \
             may defer one (disposition \"deferred\" with a `reason`); deferred items are \
             reported to the user."
        ),
        json!({
            "type": "object",
            "properties": {
                "item": {"type": "string", "description": "what is left open (to record a new follow-up)"},
                "id": {"type": "string", "description": "the follow-up to settle, e.g. F1"},
                "disposition": {"type": "string", "enum": ["done", "deferred"]},
                "reason": {"type": "string", "description": "why it is deferred (required then), or how it was done"}
            }
        }),
    )
}

/// A follow-up id as given: `F3`, `f3` or `3`.
fn normalize_id(raw: &str) -> String {
    let digits = raw.trim().trim_start_matches(['F', 'f']);
    format!("F{digits}")
}

/// `team_follow_up`.
pub(crate) async fn call(ctx: &RunContext, team: &TeamScope, args: &Value) -> Result<ToolOutput> {
    let me = team.me().to_string();
    let reason = args
        .get("reason")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    // One at a time: numbering and "is it still open" read the projection.
    let _board = team.shared.follow_ups.lock().await;
    let Some(record) = active_team(&ctx.session).await else {
        return Ok(ToolOutput::error("the session has left its team"));
    };
    let board = team_board_stream(&record.team_run_id);
    let id = args
        .get("id")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let Some(raw_id) = id else {
        if args.get("disposition").is_some() {
            return Ok(ToolOutput::error(
                "`id` (the follow-up to settle, e.g. F1) is required with `disposition`; to \
                 record a new follow-up give only `item`",
            ));
        }
        let item = match string_arg(args, "item") {
            Ok(item) => item.to_string(),
            Err(problem) => return Ok(ToolOutput::error(problem.to_string())),
        };
        let follow_up_id = format!("F{}", record.follow_ups_total + 1);
        ctx.session
            .journal()
            .append_to(
                &board,
                vec![Event::TeamFollowUpOpened(TeamFollowUpOpened {
                    team_run_id: record.team_run_id.clone(),
                    follow_up_id: follow_up_id.clone(),
                    round: record.round,
                    by: me,
                    task_id: team.task_id().to_string(),
                    item,
                })],
            )
            .await?;
        return Ok(ToolOutput::ok(format!(
            "follow-up {follow_up_id} recorded (open); the team cannot finish until it is done \
             or the leader defers it"
        ))
        .with_metadata(json!({ "follow_up_id": follow_up_id })));
    };
    let follow_up_id = normalize_id(raw_id);
    let Some(existing) = record.follow_up(&follow_up_id) else {
        let known: Vec<&str> = record.follow_ups.iter().map(|f| f.id.as_str()).collect();
        return Ok(ToolOutput::error(format!(
            "no follow-up `{raw_id}` in this task; the follow-ups are: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    if existing.status != FollowUpStatus::Open {
        return Ok(ToolOutput::error(format!(
            "{follow_up_id} is {} already",
            existing.status.as_str()
        )));
    }
    let disposition = match args.get("disposition").and_then(Value::as_str) {
        Some("done") => FollowUpDisposition::Done,
        Some("deferred") => FollowUpDisposition::Deferred,
        _ => {
            return Ok(ToolOutput::error(
                "`disposition` must be \"done\" or \"deferred\"",
            ))
        }
    };
    if disposition == FollowUpDisposition::Deferred {
        if !team.is_leader() {
            return Ok(ToolOutput::error(format!(
                "only the team leader `{}` may defer a follow-up; say in your result why \
                 {follow_up_id} should wait",
                team.definition.entry_agent
            )));
        }
        if reason.is_empty() {
            return Ok(ToolOutput::error(
                "deferring needs a `reason`: why the item can wait (it is reported to the user)",
            ));
        }
    }
    ctx.session
        .journal()
        .append_to(
            &board,
            vec![Event::TeamFollowUpResolved(TeamFollowUpResolved {
                team_run_id: record.team_run_id.clone(),
                follow_up_id: follow_up_id.clone(),
                by: me,
                disposition,
                reason,
            })],
        )
        .await?;
    Ok(ToolOutput::ok(match disposition {
        FollowUpDisposition::Done => format!("{follow_up_id} is done"),
        FollowUpDisposition::Deferred => {
            format!("{follow_up_id} is deferred; it is listed in the answer to the user")
        }
    }))
}

/// The `follow_ups` gate: passes when no follow-up is open.
pub(crate) fn gate(record: &TeamRecord) -> (bool, String) {
    let open = record.open_follow_ups();
    if open.is_empty() {
        let deferred = record
            .follow_ups
            .iter()
            .filter(|f| f.status == FollowUpStatus::Deferred)
            .count();
        let done = record.follow_ups.len() - deferred;
        return (
            true,
            format!("no open follow-ups ({done} done, {deferred} deferred)"),
        );
    }
    let mut output = String::from(
        "open follow-ups (settle each with team_follow_up: have it done, or defer it with a \
         reason):\n",
    );
    for item in open {
        output.push_str(&format!(
            "- {} from `{}` (round {}): {}\n",
            item.id, item.by, item.round, item.item
        ));
    }
    (false, output)
}

/// The follow-ups `team.completed` lists: every one not done.
pub(crate) fn unfinished(record: &TeamRecord) -> Vec<FollowUpItem> {
    record
        .follow_ups
        .iter()
        .filter(|f| f.status != FollowUpStatus::Done)
        .map(|f| f.item())
        .collect()
}

/// The follow-ups appended to the leader's result.
pub(crate) fn listing(items: &[FollowUpItem]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\nFollow-ups not done:\n");
    for item in items {
        out.push_str(&format!(
            "- {} ({}, from {}): {}",
            item.follow_up_id,
            item.status.as_str(),
            item.by,
            item.item
        ));
        if !item.reason.is_empty() {
            out.push_str(&format!(" — {}", item.reason));
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}
