//! `lumina -p … --team NAME`: the team's part of the json report, folded from the team
//! events the run produces — each member's latest state, each gate's latest result, the
//! number of rounds.

use lumina_client::protocol::{Event, EventFrame, MemberStatus};
use serde::Serialize;

/// `team` in the json report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeamReport {
    pub team: String,
    pub members: Vec<MemberReport>,
    pub gates: Vec<GateReport>,
    pub rounds: u32,
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
            _ => {}
        }
    }

    pub fn report(&self) -> TeamReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use lumina_client::protocol::team::{TeamGateChecked, TeamTaskEnded};
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
                rounds: 0,
            }
        );
    }
}
