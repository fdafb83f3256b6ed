//! Hostile YAML: alias bombs, deep nesting, huge documents and garbage must end in a clear
//! error quickly, never a hang, a crash or a stack overflow.

use std::time::{Duration, Instant};

use lumina_team::{Issue, IssueKind as K};
use pretty_assertions::assert_eq;

use super::support::Fixture;

/// Loads a team whose `team.yaml` is `yaml` on a thread with a small stack, so unbounded
/// recursion shows up as a crash, and within a time limit.
fn load_team_yaml(yaml: String) -> Vec<Issue> {
    let started = Instant::now();
    let issues = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut f = Fixture::minimal("crew");
            f.set("team.yaml", &yaml);
            f.issues()
        })
        .unwrap()
        .join()
        .expect("the loader crashed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    issues
}

fn kinds(issues: &[Issue]) -> Vec<K> {
    issues.iter().map(|i| i.kind).collect()
}

#[test]
fn billion_laughs_hits_the_alias_budget() {
    let mut yaml = String::from("x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        yaml.push_str(&format!("x{i}: &a{i} [{refs}]\n"));
    }
    yaml.push_str("name: crew\nentry_agent: leader\nagents: *a9\n");
    let issues = load_team_yaml(yaml);
    assert_eq!(issues.len(), 1, "{issues:?}");
    // Unknown keys stop it first; either way it is one clear error about team.yaml.
    assert!(
        matches!(issues[0].kind, K::InputLimit | K::UnknownField),
        "{issues:?}"
    );
    assert_eq!(issues[0].file, std::path::PathBuf::from("team.yaml"));
}

#[test]
fn alias_expansion_inside_a_valid_field_is_bounded() {
    // Aliases where the schema accepts them: a list of strings built from one anchor.
    let refs = vec!["*m"; 2000].join(", ");
    let yaml = format!(
        "name: crew\nentry_agent: &m leader\ngates: {{checks: [{refs}]}}\nagents: [leader]\n"
    );
    let issues = load_team_yaml(yaml);
    assert_eq!(kinds(&issues), [K::InputLimit], "{issues:?}");
    assert!(issues[0].message.contains("aliases"), "{issues:?}");
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    for yaml in [
        format!("name: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)),
        format!("name: {}\n", "{a: ".repeat(50_000)),
        format!(
            "gates:\n{}",
            (0..20_000)
                .map(|depth| format!("{}- \n", " ".repeat(depth + 2)))
                .collect::<String>()
        ),
    ] {
        let issues = load_team_yaml(yaml.chars().take(250_000).collect());
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(
            matches!(issues[0].kind, K::WrongType | K::InputLimit | K::Syntax),
            "{issues:?}"
        );
    }
}

#[test]
fn many_nodes_hit_the_event_budget() {
    let agents = vec!["a"; 60_000].join(", ");
    let issues = load_team_yaml(format!(
        "name: crew\nentry_agent: leader\nagents: [{agents}]\n"
    ));
    assert_eq!(kinds(&issues), [K::InputLimit], "{issues:?}");
}

#[test]
fn huge_scalars_are_capped_by_the_file_limit_and_field_rules() {
    let issues = load_team_yaml(format!("name: {}\n", "n".repeat(300_000)));
    assert_eq!(kinds(&issues), [K::TooLarge]);
    let issues = load_team_yaml(format!(
        "name: crew\ndisplay_name: {}\nentry_agent: leader\nagents: [leader, worker, tester]\n",
        "d".repeat(200_000)
    ));
    assert_eq!(
        issues
            .iter()
            .map(|i| (i.field.as_deref(), i.kind))
            .collect::<Vec<_>>(),
        [(Some("display_name"), K::InvalidValue)]
    );
}

#[test]
fn several_documents_tags_and_nul_bytes_are_errors() {
    let yaml = "name: crew\nentry_agent: leader\nagents: [leader, worker, tester]\n---\nname: x\n";
    assert_eq!(kinds(&load_team_yaml(yaml.into())), [K::Syntax]);
    // Tags are not a way to reach files: `!include` is not enabled, so this is a string
    // (and not the team's name).
    let yaml =
        "name: !include /etc/passwd\nentry_agent: leader\nagents: [leader, worker, tester]\n";
    let issues = load_team_yaml(yaml.into());
    assert!(
        !issues.iter().any(|i| i.message.contains("root:")),
        "{issues:?}"
    );
    assert_eq!(issues.len(), 1, "{issues:?}");
    let yaml = "name: cr\0ew\nentry_agent: leader\nagents: [leader]\n";
    assert_eq!(load_team_yaml(yaml.into()).len(), 1);
}

#[test]
fn random_bytes_never_panic() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    println!("random_bytes_never_panic seed={seed}");
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let alphabet = b"ab: -[]{}&*!|>'\"#\n\t ,?%@`\\0123456789";
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fixture::minimal("crew");
    let dir = f.write(tmp.path());
    for round in 0..300 {
        let len = (next() % 400) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let r = next();
                if r % 7 == 0 {
                    (r >> 8) as u8
                } else {
                    alphabet[(r >> 8) as usize % alphabet.len()]
                }
            })
            .collect();
        f.set_bytes("agents/worker/agent.yaml", bytes.clone());
        std::fs::write(dir.join("agents/worker/agent.yaml"), &bytes).unwrap();
        let result = lumina_team::load_team_dir(&dir, lumina_team::TeamSource::Project);
        if let Err(e) = &result {
            assert!(!e.to_string().is_empty(), "round {round} seed {seed}");
        }
    }
}
