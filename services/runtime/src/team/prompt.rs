//! The team's prompts. The leader: the base prompt with the project's instructions and
//! skills, then the team's texts, its own `system.md` and the roster (names, display names,
//! who talks to whom — never another member's prompt). A member: the base prompt with the
//! project's instructions, then `team-system.md`, `shared-prompt.md`, its own `system.md`
//! and its private skills — nothing of the leader's or another member's. The leader's
//! briefing (the board: contract, round, members, gates, mail) is put at the end of each of
//! its requests and not journaled, so it always shows the current state.

use lumina_skills::SkillCatalog;
use lumina_team::{CompletionPolicy, TeamDefinition};

use super::state::TeamRecord;
use super::{Role, TeamScope, QA_MEMBER, REVIEWER_MEMBER};
use crate::context;
use crate::session::Guidance;

/// The marker of a member's prompt (tests and the scripted model match on it).
pub(crate) fn member_marker(name: &str) -> String {
    format!("You are `{name}`, a member of the agent team")
}

/// The marker of the leader's prompt.
pub(crate) const LEADER_MARKER: &str = "You lead the agent team";

fn team_texts(definition: &TeamDefinition, out: &mut String) {
    for (title, text) in [
        ("Team charter", &definition.team_system),
        ("Team conventions", &definition.shared_prompt),
    ] {
        if !text.trim().is_empty() {
            out.push_str(&format!("\n# {title}\n{}\n", text.trim()));
        }
    }
}

/// The system prompt of a run in `team`.
pub(crate) fn system_prompt(team: &TeamScope, project_root: &str, guidance: &Guidance) -> String {
    let definition = &team.definition;
    match &team.role {
        Role::Leader => {
            let mut out =
                context::system_prompt(project_root, &guidance.instructions, &guidance.skills);
            out.push_str(&format!(
                "\n# Agent team\n{LEADER_MARKER} `{}` ({}) as `{}`. You plan, hand tasks to the \
                 members with team_dispatch, talk to them with team_message, and finish with \
                 team_complete. Members do not see this conversation: each task must say \
                 everything the member needs.\n",
                definition.name, definition.display_name, definition.entry_agent
            ));
            team_texts(definition, &mut out);
            if !definition.completion_policy.trim().is_empty() {
                out.push_str(&format!(
                    "\n# When the work is done\n{}\n",
                    definition.completion_policy.trim()
                ));
            }
            if let Some(me) = definition.entry() {
                out.push_str(&format!("\n# Your role\n{}\n", me.system_prompt.trim()));
            }
            out.push_str("\n# Members\n");
            for member in definition
                .members
                .iter()
                .filter(|m| m.name != definition.entry_agent)
            {
                out.push_str(&format!(
                    "- `{}` ({}): talks with {}\n",
                    member.name,
                    member.display_name,
                    member.communicates_with.join(", ")
                ));
            }
            out.push_str(&rules(definition));
            out
        }
        Role::Member { name, .. } => {
            let empty = SkillCatalog::default();
            let mut out = context::system_prompt(project_root, &guidance.instructions, &empty);
            let me = definition.member(name);
            out.push_str(&format!(
                "\n# Agent team\n{} `{}` ({}). The team leader `{}` hands you tasks; you see \
                 only your own tasks and the messages sent to you. Work with your tools, then \
                 end with one final message that stands on its own: it is your task's result.\n",
                member_marker(name),
                definition.name,
                definition.display_name,
                definition.entry_agent
            ));
            team_texts(definition, &mut out);
            if let Some(me) = me {
                out.push_str(&format!("\n# Your role\n{}\n", me.system_prompt.trim()));
                if !me.skills.is_empty() {
                    out.push_str("\n# Your skills\n");
                    for skill in &me.skills {
                        out.push_str(&format!(
                            "\n## {} — {}\n{}\n",
                            skill.name,
                            skill.description,
                            skill.body.trim()
                        ));
                    }
                }
            }
            if definition.gates.follow_ups {
                out.push_str(
                    "\n# Follow-ups\nRecord everything your task leaves open (what you would \
                     list under \"Open\") with team_follow_up{item}, one item per call: the \
                     team cannot finish while one is open. When you finish an item that was \
                     recorded earlier, settle it with team_follow_up{id, disposition: \
                     \"done\"}. Only the team leader may defer an item.\n",
                );
            }
            if name == QA_MEMBER || name == REVIEWER_MEMBER {
                out.push_str(
                    "\n# Your verdict\nYou are one of the team's gates: before your final \
                     message, record your verdict with team_verdict (passed or not, with the \
                     evidence). The team cannot finish while your latest verdict is a failure.\n",
                );
            }
            out
        }
    }
}

fn rules(definition: &TeamDefinition) -> String {
    let mut out = String::from("\n# Rules of the loop\n");
    if definition.gates.require_contract {
        out.push_str("- Write the contract (team_contract) before the first team_dispatch.\n");
    }
    out.push_str(&format!(
        "- The team_dispatch calls of one message are a round; at most {} members work at once.\n",
        definition.loop_config.max_parallel_agents
    ));
    if definition.loop_config.max_iterations > 0 {
        out.push_str(&format!(
            "- At most {} rounds.\n",
            definition.loop_config.max_iterations
        ));
    }
    let gates: Vec<&str> = [QA_MEMBER, REVIEWER_MEMBER]
        .into_iter()
        .filter(|m| definition.member(m).is_some())
        .collect();
    if !gates.is_empty() {
        out.push_str(&format!(
            "- Gates: the verdicts of {} must pass before team_complete.\n",
            gates.join(" and ")
        ));
    }
    if !definition.gates.checks.is_empty() {
        out.push_str(&format!(
            "- Gates: these commands must succeed in the project: {}.\n",
            definition.gates.checks.join("; ")
        ));
    }
    let policy = &definition.gates.task_policy;
    if policy.require_criteria {
        out.push_str(
            "- Task policy: every team_dispatch names the contract's acceptance criteria it \
             serves (`criteria`: their numbers); team_complete needs every criterion served by \
             a completed task of a member other than qa and reviewer.\n",
        );
    }
    if policy.max_task_chars > 0 {
        out.push_str(&format!(
            "- Task policy: a task has at most {} characters; split bigger work.\n",
            policy.max_task_chars
        ));
    }
    if definition.gates.follow_ups {
        out.push_str(
            "- Follow-ups: members record what they leave open (team_follow_up). team_complete \
             is refused while one is open: have it done in a round, or defer it yourself with \
             team_follow_up{id, disposition: \"deferred\", reason}. Deferred items are listed \
             in your answer to the user.\n",
        );
    }
    if definition.loop_config.completion_policy == CompletionPolicy::LeaderAndGates {
        out.push_str("- A failed task or gate needs a recovery round before you may finish.\n");
    }
    out
}

/// The board as the leader sees it before each of its model requests.
pub(crate) fn briefing(definition: &TeamDefinition, record: &TeamRecord) -> String {
    let mut out = format!("[Team board: {}]\n", definition.display_name);
    match &record.contract {
        Some(contract) => out.push_str(&format!(
            "Contract: {} — acceptance criteria: {}\n",
            contract.goal,
            (1..)
                .zip(&contract.acceptance_criteria)
                .map(|(n, c)| format!("{n}. {c}"))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        None if definition.gates.require_contract => {
            out.push_str("Contract: not written yet (team_contract comes first)\n")
        }
        None => {}
    }
    out.push_str(&format!("Rounds so far: {}\n", record.round));
    if let Some(reason) = &record.recovery_reason {
        out.push_str(&format!("The next round is a recovery round: {reason}\n"));
    }
    out.push_str("Members:\n");
    for member in record.members.iter().filter(|m| **m != record.entry_agent) {
        let (status, _) = record.member_status(member);
        let waiting = record.undelivered(member).len();
        let mail = if waiting > 0 {
            format!(", {waiting} unread message(s)")
        } else {
            String::new()
        };
        out.push_str(&format!("- {member}: {}{mail}\n", serde_label(status)));
    }
    if !record.follow_ups.is_empty() {
        out.push_str("Follow-ups:\n");
        for item in &record.follow_ups {
            out.push_str(&format!(
                "- {} ({}, from {}): {}{}\n",
                item.id,
                item.status.as_str(),
                item.by,
                item.item,
                if item.reason.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", item.reason)
                }
            ));
        }
    }
    if !record.gates.is_empty() {
        out.push_str("Gates:\n");
        for gate in record.gates.values() {
            out.push_str(&format!(
                "- {}: {} (round {})\n",
                gate.name,
                if gate.passed { "passed" } else { "failed" },
                gate.round
            ));
        }
    }
    out
}

fn serde_label(status: lumina_protocol::MemberStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
