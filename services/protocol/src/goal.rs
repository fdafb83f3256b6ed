//! Goal mode (LightWorker) wire types: a goal's budgets, what it has used, and its states.
//! Methods are in [`crate::methods`] (`goal.*`), events in [`crate::Event`] (`goal.*`).

use serde::{Deserialize, Serialize};

/// Where a goal is. Terminal states never change again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoalState {
    /// Turns are being taken.
    Running,
    /// A tool call of the goal waits for `permission.respond`.
    AwaitingApproval,
    /// Stopped by `goal.pause`, `session.interrupt` or a backend restart; `goal.resume`
    /// continues it.
    Paused,
    /// The model declared the acceptance criteria met (`goal_complete`).
    Success,
    /// A budget (turns, tool calls, tokens, wall time) ran out; `reason` names it.
    BudgetExhausted,
    /// An error, or the no-progress verdict (`reason: "no-progress"`).
    Failed,
    /// Stopped for good by `goal.cancel`.
    Cancelled,
}

impl GoalState {
    pub fn as_str(self) -> &'static str {
        match self {
            GoalState::Running => "running",
            GoalState::AwaitingApproval => "awaiting-approval",
            GoalState::Paused => "paused",
            GoalState::Success => "success",
            GoalState::BudgetExhausted => "budget-exhausted",
            GoalState::Failed => "failed",
            GoalState::Cancelled => "cancelled",
        }
    }

    /// Whether the goal is over (success, budget-exhausted, failed, cancelled).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            GoalState::Success
                | GoalState::BudgetExhausted
                | GoalState::Failed
                | GoalState::Cancelled
        )
    }
}

impl std::fmt::Display for GoalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Limits of a goal; `None` = unlimited. A budget is spent when its usage reaches it; the
/// goal then ends `budget-exhausted` at the next turn boundary — `max_wall_ms` at once, also
/// in the middle of a model stream or a tool call (which is journaled as interrupted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalBudgets {
    /// Model turns (one model request and its tool calls each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Tool calls run (`goal_complete` is not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// Input + output tokens of the goal's model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Milliseconds spent running (paused time does not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_ms: Option<u64>,
}

/// What a goal has used so far, over all its runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalUsage {
    pub turns: u32,
    pub tool_calls: u32,
    pub tokens: u64,
    pub wall_ms: u64,
}

impl GoalUsage {
    /// The first budget `self` has reached, named as its key (`max_turns`, …).
    pub fn exhausted(&self, budgets: &GoalBudgets) -> Option<&'static str> {
        if budgets.max_turns.is_some_and(|max| self.turns >= max) {
            Some("max_turns")
        } else if budgets
            .max_tool_calls
            .is_some_and(|max| self.tool_calls >= max)
        {
            Some("max_tool_calls")
        } else if budgets.max_tokens.is_some_and(|max| self.tokens >= max) {
            Some("max_tokens")
        } else if budgets.max_wall_ms.is_some_and(|max| self.wall_ms >= max) {
            Some("max_wall_ms")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_use_kebab_case_and_budgets_name_the_spent_one() {
        assert_eq!(
            serde_json::to_string(&GoalState::BudgetExhausted).unwrap(),
            "\"budget-exhausted\""
        );
        assert_eq!(
            serde_json::from_str::<GoalState>("\"awaiting-approval\"").unwrap(),
            GoalState::AwaitingApproval
        );
        let budgets = GoalBudgets {
            max_tool_calls: Some(2),
            max_tokens: Some(100),
            ..GoalBudgets::default()
        };
        let mut usage = GoalUsage {
            tool_calls: 1,
            tokens: 99,
            ..GoalUsage::default()
        };
        assert_eq!(usage.exhausted(&budgets), None);
        usage.tool_calls = 2;
        assert_eq!(usage.exhausted(&budgets), Some("max_tool_calls"));
        assert_eq!(usage.exhausted(&GoalBudgets::default()), None);
    }
}
