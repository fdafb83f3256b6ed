//! The task-policy gate (`gates.task_policy`): rules a program can decide, checked on every
//! `team_dispatch` — a refused dispatch is an error result naming the rule and never runs —
//! and, for `require_criteria`, once more at `team_complete` (the `task_policy` gate):
//!
//! - `require_criteria`: the dispatch names the contract's acceptance criteria it serves
//!   (`criteria: [1, 3]`, numbers of the current contract); at completion every criterion
//!   must have been served by a completed task of a member that is not a gate (`qa`,
//!   `reviewer` verify work, they do not do it) — so no criterion is forgotten.
//! - `max_task_chars`: a task longer than that is too big for one owner; split it.
//!
//! Whether a task fits a member's role is not decided here: free text cannot be judged
//! without a model, and the member's `tools` and the permission engine already bound what
//! it can do.

use lumina_team::{TaskPolicy, TeamDefinition};
use serde_json::Value;

use super::state::TeamRecord;
use super::tools::is_gate_member;

/// Why a dispatch breaks the task policy (its error result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PolicyRefusal {
    #[error(
        "gates.task_policy.require_criteria: name the contract's acceptance criteria this \
         task serves in `criteria` (their numbers): {criteria}"
    )]
    NoCriteria { criteria: String },
    #[error(
        "gates.task_policy.require_criteria: `criteria` has {given}, which is not a criterion \
         of the contract (it has {count}, numbered 1 to {count}): {criteria}"
    )]
    UnknownCriterion {
        given: String,
        count: usize,
        criteria: String,
    },
    #[error(
        "gates.task_policy.max_task_chars = {max}: this task has {chars} characters; split it \
         into smaller tasks with one owner and one outcome each"
    )]
    TooLong { max: u32, chars: usize },
}

/// What the leader's `team_dispatch` description adds for the policy.
pub(crate) fn describe(policy: &TaskPolicy) -> String {
    let mut out = String::new();
    if policy.require_criteria {
        out.push_str(
            " Task policy: every task names the contract's acceptance criteria it serves \
             (`criteria`: their numbers); the team cannot finish until each criterion was \
             served by a completed task of a member other than qa and reviewer.",
        );
    }
    if policy.max_task_chars > 0 {
        out.push_str(&format!(
            " Task policy: a task has at most {} characters.",
            policy.max_task_chars
        ));
    }
    out
}

/// The criteria of `record`'s contract, numbered, for error results.
fn numbered(record: &TeamRecord) -> String {
    record
        .contract
        .as_ref()
        .map(|c| {
            (1..)
                .zip(&c.acceptance_criteria)
                .map(|(n, text)| format!("{n}. {text}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

/// Checks one dispatch against the policy; its criteria (sorted, once each) when it passes.
pub(crate) fn check(
    policy: &TaskPolicy,
    record: &TeamRecord,
    task: &str,
    args: &Value,
) -> Result<Vec<u32>, PolicyRefusal> {
    let chars = task.chars().count();
    if policy.max_task_chars > 0 && chars > policy.max_task_chars as usize {
        return Err(PolicyRefusal::TooLong {
            max: policy.max_task_chars,
            chars,
        });
    }
    if !policy.require_criteria {
        return Ok(Vec::new());
    }
    let count = record
        .contract
        .as_ref()
        .map_or(0, |c| c.acceptance_criteria.len());
    let items = match args.get("criteria") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(PolicyRefusal::NoCriteria {
                criteria: numbered(record),
            })
        }
    };
    let mut criteria = Vec::new();
    for item in items {
        let number = item
            .as_u64()
            .filter(|n| (1..=count as u64).contains(n))
            .and_then(|n| u32::try_from(n).ok());
        match number {
            Some(n) => criteria.push(n),
            None => {
                return Err(PolicyRefusal::UnknownCriterion {
                    given: item.to_string(),
                    count,
                    criteria: numbered(record),
                })
            }
        }
    }
    criteria.sort_unstable();
    criteria.dedup();
    Ok(criteria)
}

/// The `task_policy` gate at `team_complete` (`None` unless `require_criteria`): every
/// criterion of the contract served by a completed task of a non-gate member. A team whose
/// only members besides the leader are gates counts theirs.
pub(crate) fn gate(definition: &TeamDefinition, record: &TeamRecord) -> Option<(bool, String)> {
    if !definition.gates.task_policy.require_criteria {
        return None;
    }
    let Some(contract) = &record.contract else {
        return Some((false, "no contract to serve (team_contract)".into()));
    };
    let others: Vec<&str> = definition
        .members
        .iter()
        .map(|m| m.name.as_str())
        .filter(|m| *m != definition.entry_agent)
        .collect();
    let workers: Vec<&str> = match others.iter().any(|m| !is_gate_member(m)) {
        true => others.into_iter().filter(|m| !is_gate_member(m)).collect(),
        false => others,
    };
    let unserved = record.unserved_criteria(&workers);
    if unserved.is_empty() {
        return Some((
            true,
            format!(
                "each of the {} acceptance criteria was served by a completed task",
                contract.acceptance_criteria.len()
            ),
        ));
    }
    let mut output = String::from(
        "no completed task served these acceptance criteria (dispatch them with `criteria` \
         naming them):\n",
    );
    for (n, text) in unserved {
        output.push_str(&format!("- {n}. {text}\n"));
    }
    Some((false, output))
}
