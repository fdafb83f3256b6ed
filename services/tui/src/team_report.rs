//! `lumina -p … --team NAME`: the team's part of the json report, folded from the team
//! events the run produces — each member's latest state, each gate's latest result, the
//! follow-ups and how they were settled, the number of rounds.

use lumina_client::protocol::team::FollowUpStatus;
use lumina_client::protocol::{Event, EventFrame, MemberStatus};
use serde::Serialize;

/// `team` in the json report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeamReport {
    pub team: String,
    pub members: Vec<MemberReport>,
    pub gates: Vec<GateReport>,
    /// Every follow-up of the team run (`gates.follow_ups`), in the order reported.
    pub follow_ups: Vec<FollowUpReport>,
    pub rounds: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FollowUpReport {
    pub id: String,
    pub item: String,
    pub by: String,
    pub status: FollowUpStatus,
    /// Why it was deferred, or a note on how it was done.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberReport {
    pub agent: String,
    pub status: MemberStatus,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateReport {
    pub name: String,
    pub passed: bool,
    pub output: String,
}

/// Follows one team run's events.
pub struct TeamTracker {
    team_run_id: String,
    report: TeamReport,
}

impl TeamTracker {
    /// The team as `team.enter` returned it; `members` without the entry agent.
    pub fn new(team_run_id: String, team: String, members: Vec<String>) -> Self {
        Self {
            team_run_id,
            report: TeamReport {
                team,
                members: members
                    .into_iter()
                    .map(|agent| MemberReport {
                        agent,
                        status: MemberStatus::Idle,
                        summary: String::new(),
                    })
                    .collect(),
                gates: Vec::new(),
                follow_ups: Vec::new(),
                rounds: 0,
            },
        }
    }

    pub fn event(&mut self, frame: &EventFrame) {
        let report = &mut self.report;
        match &frame.event {
            Event::TeamRoundStarted(e) if e.team_run_id == self.team_run_id => {
                report.rounds = report.rounds.max(e.round);
            }
            Event::TeamTaskDispatched(e) if e.team_run_id == self.team_run_id => {
                if let Some(member) = report.members.iter_mut().find(|m| m.agent == e.agent) {
                    member.status = MemberStatus::Working;
                    member.summary.clear();
                }
            }
            Event::TeamTaskEnded(e) if e.team_run_id == self.team_run_id => {
                if let Some(member) = report.members.iter_mut().find(|m| m.agent == e.agent) {
                    member.status = e.status.into();
                    member.summary = e.summary.clone();
                }
            }
            Event::TeamGateChecked(e) if e.team_run_id == self.team_run_id => {
                let gate = GateReport {
                    name: e.name.clone(),
                    passed: e.passed,
                    output: e.output.clone(),
                };
                match report.gates.iter_mut().find(|g| g.name == e.name) {
                    Some(existing) => *existing = gate,
                    None => report.gates.push(gate),
                }
            }
            Event::TeamFollowUpOpened(e) if e.team_run_id == self.team_run_id => {
                report.follow_ups.push(FollowUpReport {
                    id: e.follow_up_id.clone(),
                    item: e.item.clone(),
                    by: e.by.clone(),
                    status: FollowUpStatus::Open,
                    reason: String::new(),
                });
            }
            Event::TeamFollowUpResolved(e) if e.team_run_id == self.team_run_id => {
                if let Some(item) = report
                    .follow_ups
                    .iter_mut()
                    .find(|f| f.id == e.follow_up_id)
                {
                    item.status = e.disposition.into();
                    item.reason = e.reason.clone();
                }
            }
            _ => {}
        }
    }

    pub fn report(&self) -> TeamReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use lumina_client::protocol::team::{
        FollowUpDisposition, TeamFollowUpOpened, TeamFollowUpResolved, TeamGateChecked,
        TeamTaskEnded,
    };
    use lumina_client::protocol::TaskStatus;
    use pretty_assertions::assert_eq;

    use super::*;

    fn frame(event: Event) -> EventFrame {
        EventFrame {
            session_id: "s".into(),
            seq: 1,
            stream: "team/t".into(),
            stream_seq: 1,
            ts_ms: 0,
            event,
        }
    }

    #[test]
    fn members_and_gates_keep_their_latest_state() {
        let mut tracker = TeamTracker::new("t".into(), "crew".into(), vec!["qa".into()]);
        for passed in [false, true] {
            tracker.event(&frame(Event::TeamGateChecked(TeamGateChecked {
                team_run_id: "t".into(),
                round: 1,
                name: "qa".into(),
                passed,
                output: format!("passed={passed}"),
            })));
        }
        tracker.event(&frame(Event::TeamTaskEnded(TeamTaskEnded {
            team_run_id: "t".into(),
            task_id: "x".into(),
            agent: "qa".into(),
            status: TaskStatus::Completed,
            summary: "ok".into(),
        })));
        for (id, item) in [("F1", "migrate old rows"), ("F2", "document the flag")] {
            tracker.event(&frame(Event::TeamFollowUpOpened(TeamFollowUpOpened {
                team_run_id: "t".into(),
                follow_up_id: id.into(),
                round: 1,
                by: "qa".into(),
                task_id: "x".into(),
                item: item.into(),
            })));
        }
        tracker.event(&frame(Event::TeamFollowUpResolved(TeamFollowUpResolved {
            team_run_id: "t".into(),
            follow_up_id: "F1".into(),
            by: "lead".into(),
            disposition: FollowUpDisposition::Deferred,
            reason: "next release".into(),
        })));
        // Another team run's events do not count.
        tracker.event(&frame(Event::TeamTaskEnded(TeamTaskEnded {
            team_run_id: "other".into(),
            task_id: "y".into(),
            agent: "qa".into(),
            status: TaskStatus::Failed,
            summary: "no".into(),
        })));
        assert_eq!(
            tracker.report(),
            TeamReport {
                team: "crew".into(),
                members: vec![MemberReport {
                    agent: "qa".into(),
                    status: MemberStatus::Completed,
                    summary: "ok".into(),
                }],
                gates: vec![GateReport {
                    name: "qa".into(),
                    passed: true,
                    output: "passed=true".into(),
                }],
                follow_ups: vec![
                    FollowUpReport {
                        id: "F1".into(),
                        item: "migrate old rows".into(),
                        by: "qa".into(),
                        status: FollowUpStatus::Deferred,
                        reason: "next release".into(),
                    },
                    FollowUpReport {
                        id: "F2".into(),
                        item: "document the flag".into(),
                        by: "qa".into(),
                        status: FollowUpStatus::Open,
                        reason: String::new(),
                    },
                ],
                rounds: 0,
            }
        );
    }
}
