//! `/NewTeam`: a minimal valid team (a leader and one specialist) with every field written
//! out and explained, for the user to edit in `<AppRoot>/config/teams/<name>/`.

use std::path::PathBuf;

use lumina_config::AppRoot;

use crate::error::{Error, Result};
use crate::files::{self, Entry};
use crate::fsutil::{hidden_sibling, remove_any, sync_dir, write_tree};
use crate::load::check_label;
use crate::lookup::{check_team_name, user_teams_dir};

/// Creates the template team `name` in `<AppRoot>/config/teams/<name>/` and returns its
/// folder. Refuses a name that already has a folder there ([`Error::AlreadyExists`]); a
/// built-in or project team of the same name is fine (the user's team hides the built-in,
/// a project's hides the user's). The folder appears complete or not at all.
pub fn create_team(app_root: &AppRoot, name: &str, display_name: &str) -> Result<PathBuf> {
    check_team_name(name)?;
    let display_name = check_label(display_name).map_err(|_| {
        Error::InvalidDisplayName(
            "use 1 to 200 characters without control characters (line breaks, tabs)",
        )
    })?;
    let teams = user_teams_dir(app_root);
    std::fs::create_dir_all(&teams).map_err(|e| Error::io("create", &teams, e))?;
    let target = teams.join(name);
    let exists = || Error::AlreadyExists {
        name: name.to_string(),
        path: target.clone(),
    };
    if files::entry(&target).map_err(|e| Error::io("inspect", &target, e))? != Entry::Missing {
        return Err(exists());
    }

    let tmp = hidden_sibling(&target, "tmp");
    let texts = template(name, &display_name);
    let files: Vec<(PathBuf, &str)> = texts
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.as_str()))
        .collect();
    let dirs = [
        PathBuf::from("agents/leader/skills"),
        PathBuf::from("agents/specialist/skills"),
    ];
    if let Err(e) = write_tree(&tmp, &files, &dirs) {
        let _ = remove_any(&tmp);
        return Err(e);
    }
    // Renaming onto an existing non-empty folder fails, so a team created by someone else
    // in the meantime is never overwritten.
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = remove_any(&tmp);
        return Err(match files::entry(&target) {
            Ok(Entry::Missing) => Error::io("create", &target, e),
            _ => exists(),
        });
    }
    sync_dir(&teams);
    Ok(target)
}

/// A YAML double-quoted scalar (`value` has no control characters).
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn template(name: &str, display_name: &str) -> Vec<(&'static str, String)> {
    let team_yaml = format!(
        r#"# A Lumina agent team (docs/teams.md). Every field is written out with its default;
# unknown fields are errors.

# The team's id; must equal this folder's name.
name: {name}
# Shown in the team list and the transcript. Default: the name.
display_name: {display}
# The member that receives your task, plans the work and answers you. One of `agents`.
entry_agent: leader

loop:
  # Rounds of plan -> work -> check before the team stops and reports. 0 = no limit: the
  # team works until it is done or you interrupt it.
  max_iterations: 0
  # How many members may work at the same time (at least 1). Default 4.
  max_parallel_agents: 2
  # leader_and_gates: done when the leader says so AND every gate below passes.
  # leader: done when the leader says so; gate results are only reported.
  completion_policy: leader_and_gates
  # recover: a failed round (failing check, failed member) leads to a recovery round.
  # stop_on_failure: the team stops after the first failed round and reports it.
  stop_policy: recover

gates:
  # true: the leader writes a contract (goal, deliverables, acceptance criteria) before it
  # hands out work, and the result is checked against it. Default false.
  require_contract: false
  # Shell commands run in the project after each round; each must exit with status 0.
  # Example: ["cargo test", "npm run lint"]. Default: none.
  checks: []
  # Rules every task the leader hands out must meet, checked by the runtime.
  task_policy:
    # true: every task names the contract's acceptance criteria it serves, and the team
    # cannot finish until every criterion was served by a completed task. Needs
    # require_contract: true. Default false.
    require_criteria: false
    # Longest task in characters (100 to 100000); 0 = no bound. Default 0.
    max_task_chars: 0
  # true: members report what they leave open (team_follow_up); the team cannot finish while
  # an item is open, unless the leader defers it with a reason. Default false.
  follow_ups: false

transcript:
  # Show the messages members send each other. Default true.
  show_member_dialogue: true
  # Show members' tool calls in full (otherwise one line each). Default false.
  show_tool_details: false
  # Show members' thinking where the model provides it. Default false.
  show_thinking: false

# The members. Each is a folder agents/<name>/ with agent.yaml, system.md and an optional
# skills/ folder. Add a member by adding its folder and its name here.
agents:
  - leader
  - specialist
"#,
        name = quoted(name),
        display = quoted(display_name),
    );
    let member_yaml = |member: &str, display: &str, peers: &str, turns: u32| {
        format!(
            r#"# A member of the team (docs/teams.md). Unknown fields are errors.

# The member's id; must equal this folder's name.
name: {member}
# Shown in the transcript. Default: the name.
display_name: {display}
# The members this one may send messages to. Default: the entry agent talks with everyone,
# every other member with the entry agent only.
communicates_with: {peers}
# A model for this member only, e.g. a cheaper one for simple work. Default: the session's.
# model: your-model-name
# The tools this member may use: names or globs ("read_file", "web_*", "mcp__github__*").
# Default ["*"]: every tool of the session; the permission rules still apply.
tools: ["*"]
# Model turns this member may take on one task before it hands back what it has. Default 40.
max_turns_per_task: {turns}
# Skills of this member only: folder names under skills/ (each with a SKILL.md, as for
# project skills). Default: every skill in skills/.
private_skills: []
"#,
            member = quoted(member),
            display = quoted(display),
        )
    };
    vec![
        ("team.yaml", team_yaml),
        (
            "agents/leader/agent.yaml",
            member_yaml("leader", "Leader", "[specialist]", 40),
        ),
        (
            "agents/leader/system.md",
            "You lead this team. Restate the user's task as a short plan with concrete \
             deliverables, hand each piece to the member best suited for it with everything \
             they need to work alone, check what comes back against the plan, and answer the \
             user with the result, what was verified and what is still open.\n"
                .into(),
        ),
        (
            "agents/specialist/agent.yaml",
            member_yaml("specialist", "Specialist", "[leader]", 40),
        ),
        (
            "agents/specialist/system.md",
            "You carry out the tasks the leader hands you. Work in the project with the tools \
             you have, keep to the scope you were given, and report back: what you changed \
             (files and why), how you checked it, and anything you could not finish.\n"
                .into(),
        ),
        (
            "team-system.md",
            "# Team charter\n\nWhat this team is for and how it works, given to every \
             member. Describe the kind of tasks it takes and the standards it holds itself \
             to.\n"
                .into(),
        ),
        (
            "shared-prompt.md",
            "# Shared conventions\n\nRules every member follows: where files go, formats \
             for hand-offs, the project's coding standards.\n"
                .into(),
        ),
        (
            "completion-policy.md",
            "# Done means\n\n- Every deliverable of the plan exists and was checked.\n\
             - Every gate passes.\n- The leader's answer lists what was verified and what \
             is still open.\n"
                .into(),
        ),
    ]
}
