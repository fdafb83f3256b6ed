//! `gates.task_policy` and `gates.follow_ups`: off by default, used as written, and every
//! broken value an issue naming `team.yaml` and the field.

use lumina_team::{IssueKind as K, TaskPolicy};
use pretty_assertions::assert_eq;

use super::support::{at, Fixture};

const TEAM: &str = "team.yaml";

fn with_gates(gates: &str) -> Fixture {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        &format!(
            "name: crew\nentry_agent: leader\nagents: [leader, worker, tester]\ngates:\n{gates}"
        ),
    );
    f
}

#[test]
fn the_new_gates_are_off_unless_given() {
    let (_tmp, team) = with_gates("  require_contract: true\n").load();
    let gates = team.unwrap().gates;
    assert_eq!(gates.task_policy, TaskPolicy::default());
    assert!(!gates.task_policy.is_on());
    assert!(!gates.follow_ups);

    let (_tmp, team) = with_gates(
        "  require_contract: true\n  follow_ups: true\n  task_policy:\n    require_criteria: true\n    max_task_chars: 100\n",
    )
    .load();
    let gates = team.unwrap().gates;
    assert_eq!(
        gates.task_policy,
        TaskPolicy {
            require_criteria: true,
            max_task_chars: 100
        }
    );
    assert!(gates.follow_ups);
    // A bound alone is a policy too, and needs no contract.
    let (_tmp, team) = with_gates("  task_policy: {max_task_chars: 100000}\n").load();
    assert!(team.unwrap().gates.task_policy.is_on());
}

#[test]
fn broken_gate_settings_name_file_and_field() {
    assert_eq!(
        with_gates("  task_policy: {require_criteria: true}\n").problems(),
        [at(
            TEAM,
            "gates.task_policy.require_criteria",
            K::InvalidValue
        )]
    );
    let issues =
        with_gates("  require_contract: true\n  task_policy: {max_task_chars: 99}\n").issues();
    assert_eq!(
        issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        [
            "team.yaml: gates.task_policy.max_task_chars: 99: must be 0 (no bound) or between 100 \
          and 100000"
        ]
    );
    assert_eq!(
        with_gates("  task_policy: {max_task_chars: 100001}\n").problems(),
        [at(
            TEAM,
            "gates.task_policy.max_task_chars",
            K::InvalidValue
        )]
    );
    assert_eq!(
        with_gates("  task_policy: {max_task_chars: -1}\n").problems(),
        [at(TEAM, "gates.task_policy.max_task_chars", K::WrongType)]
    );
    assert_eq!(
        with_gates("  task_policy: {require_criteria: yes}\n").problems(),
        [at(TEAM, "gates.task_policy.require_criteria", K::WrongType)]
    );
    assert_eq!(
        with_gates("  task_policy: {roles: [backend]}\n").problems(),
        [at(TEAM, "gates.task_policy.roles", K::UnknownField)]
    );
    assert_eq!(
        with_gates("  task_policy: strict\n").problems(),
        [at(TEAM, "gates.task_policy", K::WrongType)]
    );
    assert_eq!(
        with_gates("  follow_ups: always\n").problems(),
        [at(TEAM, "gates.follow_ups", K::WrongType)]
    );
    assert_eq!(
        with_gates("  follow_up: true\n").problems(),
        [at(TEAM, "gates.follow_up", K::UnknownField)]
    );
}
