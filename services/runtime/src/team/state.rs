//! The team projection: a session's team runs folded from `team.*` events (one reducer,
//! fed in seq order on replay and live, like the rest of `crate::projection`). Everything
//! the loop decides — the next round's number, whether it is a recovery round, which
//! messages a member has not seen, which tasks a restart interrupted — is read from here,
//! so it is the same before and after a restart.

use std::collections::BTreeMap;

use lumina_protocol::team::{FollowUpItem, FollowUpStatus};
use lumina_protocol::{Event, MemberStatus, TaskStatus};

/// The leader's contract for the current task.
#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    pub goal: String,
    pub acceptance_criteria: Vec<String>,
}

/// A task handed to a member.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task_id: String,
    pub agent: String,
    pub round: u32,
    pub task: String,
    pub call_id: String,
    pub retry_of: Option<String>,
    /// The contract's acceptance criteria it serves (1-based; `gates.task_policy`).
    pub criteria: Vec<u32>,
    /// [`TeamRecord::contract_version`] when it was dispatched: its `criteria` number that
    /// contract's.
    pub contract_version: u32,
    /// `None` while it runs.
    pub status: Option<TaskStatus>,
    pub summary: String,
}

/// An item a member left open (`team_follow_up`), and how it was settled.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUpRecord {
    pub id: String,
    pub item: String,
    pub by: String,
    pub round: u32,
    pub task_id: String,
    pub status: FollowUpStatus,
    /// Who settled it.
    pub resolved_by: String,
    /// Why it was deferred, or a note on how it was done.
    pub reason: String,
}

impl FollowUpRecord {
    /// As `team.completed` lists it.
    pub fn item(&self) -> FollowUpItem {
        FollowUpItem {
            follow_up_id: self.id.clone(),
            item: self.item.clone(),
            by: self.by.clone(),
            status: self.status,
            reason: self.reason.clone(),
        }
    }
}

/// A message in a mailbox.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRecord {
    pub msg_id: String,
    pub round: u32,
    pub from: String,
    pub to: String,
    pub text: String,
    pub task_id: String,
    pub delivered: bool,
}

/// A gate's latest result.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRecord {
    pub name: String,
    pub round: u32,
    pub passed: bool,
    pub output: String,
}

/// One team run of a session (from `team.entered` to `team.exited`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TeamRecord {
    pub team_run_id: String,
    pub team: String,
    pub display_name: String,
    pub entry_agent: String,
    pub members: Vec<String>,
    /// Entered and not exited.
    pub active: bool,
    pub contract: Option<Contract>,
    /// How many contracts were written in this team run (each `team.contract_written`
    /// replaces the previous one).
    pub contract_version: u32,
    /// The latest round's number (0 before the first).
    pub round: u32,
    /// The latest round started and has not ended.
    pub round_open: bool,
    /// Why the next round is a recovery round (a failed round or gate); cleared when a
    /// round starts.
    pub recovery_reason: Option<String>,
    pub tasks: Vec<TaskRecord>,
    pub messages: Vec<MessageRecord>,
    /// Latest result per gate name, in first-seen order.
    pub gates: BTreeMap<String, GateRecord>,
    /// Every gate result, in order (for reports).
    pub gate_log: Vec<GateRecord>,
    /// The summaries of `team.completed`, in order.
    pub completions: Vec<String>,
    /// The follow-ups of the current task (cleared by `team.completed`), in order.
    pub follow_ups: Vec<FollowUpRecord>,
    /// Follow-ups reported over the whole team run (numbers `F1`, `F2`, …).
    pub follow_ups_total: u32,
}

impl TeamRecord {
    /// Messages to `to` not yet in its context, in the order they were sent.
    pub fn undelivered(&self, to: &str) -> Vec<&MessageRecord> {
        self.messages
            .iter()
            .filter(|m| m.to == to && !m.delivered)
            .collect()
    }

    /// Messages sent in `round`.
    pub fn messages_in_round(&self, round: u32) -> usize {
        self.messages.iter().filter(|m| m.round == round).count()
    }

    pub fn task(&self, task_id: &str) -> Option<&TaskRecord> {
        self.tasks.iter().find(|t| t.task_id == task_id)
    }

    /// Tasks dispatched and not ended.
    pub fn running_tasks(&self) -> Vec<&TaskRecord> {
        self.tasks.iter().filter(|t| t.status.is_none()).collect()
    }

    /// A member's state: its latest task's.
    pub fn member_status(&self, member: &str) -> (MemberStatus, String) {
        match self.tasks.iter().rev().find(|t| t.agent == member) {
            None => (MemberStatus::Idle, String::new()),
            Some(task) => match task.status {
                None => (MemberStatus::Working, String::new()),
                Some(status) => (status.into(), task.summary.clone()),
            },
        }
    }

    pub fn follow_up(&self, id: &str) -> Option<&FollowUpRecord> {
        self.follow_ups.iter().find(|f| f.id == id)
    }

    /// Follow-ups neither done nor deferred.
    pub fn open_follow_ups(&self) -> Vec<&FollowUpRecord> {
        self.follow_ups
            .iter()
            .filter(|f| f.status == FollowUpStatus::Open)
            .collect()
    }

    /// The current contract's criteria (1-based) that no completed task of a member in
    /// `workers` served, with their text.
    pub fn unserved_criteria(&self, workers: &[&str]) -> Vec<(u32, String)> {
        let Some(contract) = &self.contract else {
            return Vec::new();
        };
        (1..)
            .zip(&contract.acceptance_criteria)
            .filter(|(n, _)| {
                !self.tasks.iter().any(|t| {
                    t.contract_version == self.contract_version
                        && t.status == Some(TaskStatus::Completed)
                        && workers.contains(&t.agent.as_str())
                        && t.criteria.contains(n)
                })
            })
            .map(|(n, text)| (n, text.clone()))
            .collect()
    }

    /// The interrupted tasks of the open round that have not been dispatched again.
    pub fn interrupted_in_open_round(&self) -> Vec<&TaskRecord> {
        if !self.round_open {
            return Vec::new();
        }
        self.tasks
            .iter()
            .filter(|t| t.round == self.round && t.status == Some(TaskStatus::Interrupted))
            .filter(|t| {
                !self
                    .tasks
                    .iter()
                    .any(|r| r.retry_of.as_deref() == Some(&t.task_id))
            })
            .collect()
    }

    /// What failed in `round`: tasks that did not complete and gates that failed, one line
    /// each. A task that was dispatched again counts by its retry.
    pub fn round_failures(&self, round: u32) -> Vec<String> {
        let mut failures: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.round == round)
            .filter(|t| {
                !self
                    .tasks
                    .iter()
                    .any(|r| r.retry_of.as_deref() == Some(&t.task_id))
            })
            .filter_map(|t| match t.status {
                Some(TaskStatus::Completed) => None,
                Some(status) => Some(format!(
                    "task of `{}` {}: {}",
                    t.agent,
                    status.as_str(),
                    first_line(&t.summary)
                )),
                None => Some(format!("task of `{}` did not end", t.agent)),
            })
            .collect();
        failures.extend(
            self.gate_log
                .iter()
                .filter(|g| g.round == round && !g.passed)
                .map(|g| format!("gate `{}` failed: {}", g.name, first_line(&g.output))),
        );
        failures
    }
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// Folds a `team.*` event into the session's team runs.
pub(crate) fn apply(teams: &mut Vec<TeamRecord>, event: &Event) {
    if let Event::TeamEntered(e) = event {
        teams.push(TeamRecord {
            team_run_id: e.team_run_id.clone(),
            team: e.team.clone(),
            display_name: e.display_name.clone(),
            entry_agent: e.entry_agent.clone(),
            members: e.members.clone(),
            active: true,
            ..TeamRecord::default()
        });
        return;
    }
    let id = match event {
        Event::TeamExited(e) => &e.team_run_id,
        Event::TeamContractWritten(e) => &e.team_run_id,
        Event::TeamRoundStarted(e) => &e.team_run_id,
        Event::TeamRoundEnded(e) => &e.team_run_id,
        Event::TeamTaskDispatched(e) => &e.team_run_id,
        Event::TeamTaskEnded(e) => &e.team_run_id,
        Event::TeamMessageSent(e) => &e.team_run_id,
        Event::TeamMessagesDelivered(e) => &e.team_run_id,
        Event::TeamGateChecked(e) => &e.team_run_id,
        Event::TeamCompleted(e) => &e.team_run_id,
        Event::TeamFollowUpOpened(e) => &e.team_run_id,
        Event::TeamFollowUpResolved(e) => &e.team_run_id,
        _ => return,
    };
    let Some(team) = teams.iter_mut().find(|t| t.team_run_id == *id) else {
        return;
    };
    match event {
        Event::TeamExited(_) => team.active = false,
        Event::TeamContractWritten(e) => {
            team.contract = Some(Contract {
                goal: e.goal.clone(),
                acceptance_criteria: e.acceptance_criteria.clone(),
            });
            team.contract_version += 1;
        }
        Event::TeamRoundStarted(e) => {
            team.round = e.round;
            team.round_open = true;
            team.recovery_reason = None;
        }
        Event::TeamRoundEnded(e) => {
            team.round_open = false;
            if !e.passed {
                team.recovery_reason = Some(format!(
                    "round {} failed: {}",
                    e.round,
                    e.failures.join("; ")
                ));
            }
        }
        Event::TeamTaskDispatched(e) => team.tasks.push(TaskRecord {
            task_id: e.task_id.clone(),
            agent: e.agent.clone(),
            round: e.round,
            task: e.task.clone(),
            call_id: e.call_id.clone(),
            retry_of: e.retry_of.clone(),
            criteria: e.criteria.clone(),
            contract_version: team.contract_version,
            status: None,
            summary: String::new(),
        }),
        Event::TeamTaskEnded(e) => {
            if let Some(task) = team.tasks.iter_mut().find(|t| t.task_id == e.task_id) {
                task.status = Some(e.status);
                task.summary = e.summary.clone();
            }
        }
        Event::TeamMessageSent(e) => team.messages.push(MessageRecord {
            msg_id: e.msg_id.clone(),
            round: e.round,
            from: e.from.clone(),
            to: e.to.clone(),
            text: e.text.clone(),
            task_id: e.task_id.clone(),
            delivered: false,
        }),
        Event::TeamMessagesDelivered(e) => {
            for message in team.messages.iter_mut() {
                if e.msg_ids.contains(&message.msg_id) {
                    message.delivered = true;
                }
            }
        }
        Event::TeamGateChecked(e) => {
            let record = GateRecord {
                name: e.name.clone(),
                round: e.round,
                passed: e.passed,
                output: e.output.clone(),
            };
            if !e.passed {
                team.recovery_reason = Some(format!(
                    "gate `{}` failed: {}",
                    e.name,
                    first_line(&e.output)
                ));
            }
            team.gates.insert(e.name.clone(), record.clone());
            team.gate_log.push(record);
        }
        Event::TeamCompleted(e) => {
            team.completions.push(e.summary.clone());
            // The next task starts from a clean slate: a new contract, fresh verdicts.
            team.contract = None;
            team.gates.clear();
            team.recovery_reason = None;
            team.follow_ups.clear();
        }
        Event::TeamFollowUpOpened(e) => {
            team.follow_ups_total += 1;
            team.follow_ups.push(FollowUpRecord {
                id: e.follow_up_id.clone(),
                item: e.item.clone(),
                by: e.by.clone(),
                round: e.round,
                task_id: e.task_id.clone(),
                status: FollowUpStatus::Open,
                resolved_by: String::new(),
                reason: String::new(),
            });
        }
        Event::TeamFollowUpResolved(e) => {
            if let Some(item) = team.follow_ups.iter_mut().find(|f| f.id == e.follow_up_id) {
                item.status = e.disposition.into();
                item.resolved_by = e.by.clone();
                item.reason = e.reason.clone();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use lumina_protocol::team::{
        TeamEntered, TeamMessageSent, TeamMessagesDelivered, TeamRoundStarted, TeamTaskDispatched,
        TeamTaskEnded,
    };
    use pretty_assertions::assert_eq;

    use super::*;

    fn dispatched(task_id: &str, agent: &str, retry_of: Option<&str>) -> Event {
        Event::TeamTaskDispatched(TeamTaskDispatched {
            team_run_id: "t".into(),
            round: 1,
            task_id: task_id.into(),
            agent: agent.into(),
            task: format!("task of {agent}"),
            call_id: String::new(),
            retry_of: retry_of.map(str::to_string),
            criteria: Vec::new(),
        })
    }

    fn ended(task_id: &str, agent: &str, status: TaskStatus) -> Event {
        Event::TeamTaskEnded(TeamTaskEnded {
            team_run_id: "t".into(),
            task_id: task_id.into(),
            agent: agent.into(),
            status,
            summary: format!("{agent} {}", status.as_str()),
        })
    }

    fn message(msg_id: &str, to: &str) -> Event {
        Event::TeamMessageSent(TeamMessageSent {
            team_run_id: "t".into(),
            msg_id: msg_id.into(),
            round: 1,
            from: "lead".into(),
            to: to.into(),
            text: msg_id.into(),
            task_id: String::new(),
        })
    }

    fn fold(events: Vec<Event>) -> TeamRecord {
        let mut teams = Vec::new();
        apply(
            &mut teams,
            &Event::TeamEntered(TeamEntered {
                team_run_id: "t".into(),
                team: "crew".into(),
                display_name: "Crew".into(),
                entry_agent: "lead".into(),
                members: vec!["lead".into(), "a".into(), "b".into()],
                show_member_dialogue: true,
                show_tool_details: false,
                show_thinking: false,
            }),
        );
        for event in &events {
            apply(&mut teams, event);
        }
        teams.remove(0)
    }

    #[test]
    fn an_interrupted_task_is_retried_once_and_counts_by_its_retry() {
        let round = Event::TeamRoundStarted(TeamRoundStarted {
            team_run_id: "t".into(),
            round: 1,
            recovery: false,
            reason: None,
        });
        let record = fold(vec![
            round.clone(),
            dispatched("1", "a", None),
            dispatched("2", "b", None),
            ended("1", "a", TaskStatus::Completed),
            ended("2", "b", TaskStatus::Interrupted),
        ]);
        let again: Vec<&str> = record
            .interrupted_in_open_round()
            .iter()
            .map(|t| t.task_id.as_str())
            .collect();
        assert_eq!(again, vec!["2"]);
        assert_eq!(record.round_failures(1).len(), 1);

        let record = fold(vec![
            round,
            dispatched("1", "a", None),
            dispatched("2", "b", None),
            ended("1", "a", TaskStatus::Completed),
            ended("2", "b", TaskStatus::Interrupted),
            dispatched("3", "b", Some("2")),
            ended("3", "b", TaskStatus::Completed),
        ]);
        assert!(record.interrupted_in_open_round().is_empty());
        assert_eq!(record.round_failures(1), Vec::<String>::new());
        assert_eq!(
            record.member_status("b"),
            (MemberStatus::Completed, "b completed".to_string())
        );
        assert_eq!(record.member_status("lead").0, MemberStatus::Idle);
    }

    #[test]
    fn mail_is_delivered_once_in_order() {
        let record = fold(vec![
            message("m1", "a"),
            message("m2", "b"),
            message("m3", "a"),
        ]);
        let waiting: Vec<&str> = record
            .undelivered("a")
            .iter()
            .map(|m| m.msg_id.as_str())
            .collect();
        assert_eq!(waiting, vec!["m1", "m3"]);
        let record = fold(vec![
            message("m1", "a"),
            message("m2", "b"),
            message("m3", "a"),
            Event::TeamMessagesDelivered(TeamMessagesDelivered {
                team_run_id: "t".into(),
                to: "a".into(),
                msg_ids: vec!["m1".into(), "m3".into()],
            }),
            message("m4", "a"),
        ]);
        let waiting: Vec<&str> = record
            .undelivered("a")
            .iter()
            .map(|m| m.msg_id.as_str())
            .collect();
        assert_eq!(waiting, vec!["m4"]);
        assert_eq!(record.undelivered("b").len(), 1);
        assert_eq!(record.messages_in_round(1), 4);
    }
}
