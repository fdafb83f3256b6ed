use std::collections::HashSet;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::*;

mod matching;

fn tool(name: &str, read_only: bool, edits_files: bool) -> ToolDescriptor {
    ToolDescriptor {
        name: name.to_string(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        read_only,
        edits_files,
    }
}

fn shell() -> ToolDescriptor {
    tool("shell", false, false)
}
fn write_file() -> ToolDescriptor {
    tool("write_file", false, true)
}
fn read_file() -> ToolDescriptor {
    tool("read_file", true, false)
}

fn engine(allow: &[&str], deny: &[&str]) -> PermissionEngine {
    PermissionEngine::new(&PermissionRules {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    })
    .unwrap()
}

fn no_grants() -> HashSet<(String, String)> {
    HashSet::new()
}

fn decide(
    engine: &PermissionEngine,
    mode: PermissionMode,
    t: &ToolDescriptor,
    args: Value,
) -> Verdict {
    engine.decide(mode, t, &args, &no_grants())
}

fn run_shell(engine: &PermissionEngine, command: &str) -> Verdict {
    decide(
        engine,
        PermissionMode::Ask,
        &shell(),
        json!({ "command": command }),
    )
}

const ALLOW_RULE: Verdict = Verdict::Allow { by: "rule" };
const ALLOW_MODE: Verdict = Verdict::Allow { by: "mode" };

fn denied_by(rule: &str) -> Verdict {
    Verdict::Deny {
        by: "rule",
        reason: format!("denied by rule `{rule}`"),
    }
}

// ---- modes -------------------------------------------------------------------------------

#[test]
fn mode_parses_every_spelling() {
    for (text, mode) in [
        ("ask", PermissionMode::Ask),
        ("accept-edits", PermissionMode::AcceptEdits),
        ("accept_edits", PermissionMode::AcceptEdits),
        ("acceptEdits", PermissionMode::AcceptEdits),
        ("bypass", PermissionMode::Bypass),
        ("bypassPermissions", PermissionMode::Bypass),
    ] {
        assert_eq!(text.parse::<PermissionMode>().unwrap(), mode, "{text}");
    }
    let err = "yolo".parse::<PermissionMode>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid permission mode `yolo` (expected ask, accept-edits or bypass)"
    );
}

#[test]
fn mode_displays_and_serializes_kebab_case() {
    assert_eq!(PermissionMode::AcceptEdits.to_string(), "accept-edits");
    assert_eq!(PermissionMode::Bypass.to_string(), "bypass");
    assert_eq!(PermissionMode::default(), PermissionMode::Ask);
    assert_eq!(
        serde_json::to_value(PermissionMode::AcceptEdits).unwrap(),
        json!("accept-edits")
    );
    let parsed: PermissionMode = serde_json::from_value(json!("acceptEdits")).unwrap();
    assert_eq!(parsed, PermissionMode::AcceptEdits);
    assert!(serde_json::from_value::<PermissionMode>(json!("nope")).is_err());
}

#[test]
fn modes_without_rules() {
    let e = PermissionEngine::default();
    let edit = json!({"path": "a.txt", "content": "x"});
    let ls = json!({"command": "ls"});
    // ask: read-only and todo_write run, everything else asks.
    assert_eq!(
        decide(&e, PermissionMode::Ask, &read_file(), json!({"path": "a"})),
        ALLOW_MODE
    );
    assert_eq!(
        decide(
            &e,
            PermissionMode::Ask,
            &tool("todo_write", false, false),
            json!({"todos": []})
        ),
        ALLOW_MODE
    );
    assert_eq!(
        decide(&e, PermissionMode::Ask, &write_file(), edit.clone()),
        Verdict::Ask
    );
    assert_eq!(
        decide(&e, PermissionMode::Ask, &shell(), ls.clone()),
        Verdict::Ask
    );
    // accept-edits: edits too, but not shell.
    assert_eq!(
        decide(&e, PermissionMode::AcceptEdits, &write_file(), edit.clone()),
        ALLOW_MODE
    );
    assert_eq!(
        decide(&e, PermissionMode::AcceptEdits, &shell(), ls.clone()),
        Verdict::Ask
    );
    assert_eq!(
        decide(
            &e,
            PermissionMode::AcceptEdits,
            &tool("mcp__x__y", false, false),
            json!({})
        ),
        Verdict::Ask
    );
    // bypass: everything.
    assert_eq!(decide(&e, PermissionMode::Bypass, &shell(), ls), ALLOW_MODE);
    assert_eq!(
        decide(&e, PermissionMode::Bypass, &write_file(), edit),
        ALLOW_MODE
    );
}

// ---- precedence --------------------------------------------------------------------------

#[test]
fn deny_rules_beat_grants_allow_rules_and_bypass() {
    let e = engine(&["shell"], &["shell(rm:*)"]);
    let args = json!({"command": "rm -rf build"});
    let grants = HashSet::from([("shell".to_string(), args_hash("shell", &args))]);
    for mode in [
        PermissionMode::Ask,
        PermissionMode::AcceptEdits,
        PermissionMode::Bypass,
    ] {
        assert_eq!(
            e.decide(mode, &shell(), &args, &grants),
            denied_by("shell(rm:*)")
        );
    }
    // Deny rules also apply to read-only and always-safe tools.
    let e = engine(&[], &["read_file(.env)", "todo_write"]);
    assert_eq!(
        decide(
            &e,
            PermissionMode::Bypass,
            &read_file(),
            json!({"path": ".env"})
        ),
        denied_by("read_file(.env)")
    );
    assert_eq!(
        decide(
            &e,
            PermissionMode::Ask,
            &tool("todo_write", false, false),
            json!({"todos": []})
        ),
        denied_by("todo_write")
    );
}

#[test]
fn session_grant_binds_to_the_exact_arguments() {
    let e = PermissionEngine::default();
    let args = json!({"command": "cargo test", "timeout_ms": 1000});
    let grants = HashSet::from([("shell".to_string(), args_hash("shell", &args))]);
    assert_eq!(
        e.decide(PermissionMode::Ask, &shell(), &args, &grants),
        Verdict::Allow {
            by: "session_grant"
        }
    );
    // Same keys in another order: same hash.
    let reordered: Value =
        serde_json::from_str(r#"{"timeout_ms":1000,"command":"cargo test"}"#).unwrap();
    assert_eq!(
        e.decide(PermissionMode::Ask, &shell(), &reordered, &grants),
        Verdict::Allow {
            by: "session_grant"
        }
    );
    // A changed argument, or the same arguments for another tool, need a new approval.
    let changed = json!({"command": "cargo test", "timeout_ms": 2000});
    assert_eq!(
        e.decide(PermissionMode::Ask, &shell(), &changed, &grants),
        Verdict::Ask
    );
    let other = tool("shell2", false, false);
    assert_eq!(
        e.decide(PermissionMode::Ask, &other, &args, &grants),
        Verdict::Ask
    );
}

#[test]
fn session_grant_is_reported_before_allow_rules() {
    let e = engine(&["shell"], &[]);
    let args = json!({"command": "ls"});
    let grants = HashSet::from([("shell".to_string(), args_hash("shell", &args))]);
    assert_eq!(
        e.decide(PermissionMode::Ask, &shell(), &args, &grants),
        Verdict::Allow {
            by: "session_grant"
        }
    );
    assert_eq!(
        e.decide(PermissionMode::Ask, &shell(), &args, &no_grants()),
        ALLOW_RULE
    );
}

#[test]
fn allow_rules_beat_the_mode() {
    let e = engine(&["write_file(src/**)"], &[]);
    assert_eq!(
        decide(
            &e,
            PermissionMode::Ask,
            &write_file(),
            json!({"path": "src/a.rs", "content": ""})
        ),
        ALLOW_RULE
    );
}

// ---- rule parsing ------------------------------------------------------------------------

#[test]
fn invalid_rules_are_reported() {
    for (rule, reason) in [
        ("", "the rule is empty"),
        ("shell(", "expected `)` at the end"),
        ("shell)", "unbalanced `)`"),
        (
            "shell()",
            "empty parentheses; write the tool name alone to match any call",
        ),
        ("(ls)", "missing tool name"),
        (
            "my tool",
            "a tool name may contain letters, digits, `_`, `-`, `.` and the wildcards `*` and `?`",
        ),
        ("shell(:*)", "empty command prefix before `:*`"),
        (
            "shell(ls *)",
            "wildcards in shell rules are only supported as a trailing `:*` (prefix match)",
        ),
    ] {
        match Rule::parse(rule) {
            Err(Error::InvalidRule {
                rule: r,
                reason: why,
            }) => {
                assert_eq!((r.as_str(), why.as_str()), (rule, reason));
            }
            other => panic!("{rule:?}: expected InvalidRule, got {other:?}"),
        }
    }
    assert!(Rule::parse("write_file(src/[)").is_err());
}

#[test]
fn build_keeps_valid_rules_and_reports_invalid_ones() {
    let rules = PermissionRules {
        allow: vec!["shell(ls)".into(), "shell()".into()],
        deny: vec!["bad name".into(), "shell(rm:*)".into()],
    };
    let (e, errors) = PermissionEngine::build(&rules);
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        vec![
            "invalid permission rule `shell()`: empty parentheses; write the tool name alone to match any call",
            "invalid permission rule `bad name`: a tool name may contain letters, digits, `_`, `-`, `.` and the wildcards `*` and `?`",
        ]
    );
    assert_eq!(run_shell(&e, "ls"), ALLOW_RULE);
    assert_eq!(run_shell(&e, "rm x"), denied_by("shell(rm:*)"));
    assert!(PermissionEngine::new(&rules).is_err());
}

#[test]
fn rules_deserialize_from_settings() {
    let rules: PermissionRules = serde_json::from_value(json!({"allow": ["read_file"]})).unwrap();
    assert_eq!(
        rules,
        PermissionRules {
            allow: vec!["read_file".into()],
            deny: vec![]
        }
    );
    assert_eq!(
        Rule::parse("  shell(git status:*)  ").unwrap().as_str(),
        "shell(git status:*)"
    );
}

// ---- args_hash ---------------------------------------------------------------------------

#[test]
fn canonical_json_sorts_keys_recursively_without_whitespace() {
    let value: Value = serde_json::from_str(
        r#"{ "b": [ {"z": 1, "a": null} , true ], "a": "x\"y", "c": {"y": 1.5, "x": -2} }"#,
    )
    .unwrap();
    assert_eq!(
        canonical_json(&value),
        r#"{"a":"x\"y","b":[{"a":null,"z":1},true],"c":{"x":-2,"y":1.5}}"#
    );
}

#[test]
fn args_hash_is_sha256_of_tool_nul_canonical_json() {
    let args = json!({"path": "a.txt", "content": "hi"});
    let mut h = Sha256::new();
    h.update(b"write_file\0{\"content\":\"hi\",\"path\":\"a.txt\"}");
    assert_eq!(args_hash("write_file", &args), hex::encode(h.finalize()));
    assert_eq!(args_hash("write_file", &args).len(), 64);
}

#[test]
fn args_hash_changes_with_tool_and_values_not_key_order() {
    let a: Value = serde_json::from_str(r#"{"x": 1, "y": {"p": [1, 2], "q": "s"}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"y": {"q": "s", "p": [1, 2]}, "x": 1}"#).unwrap();
    assert_eq!(args_hash("t", &a), args_hash("t", &b));
    assert_ne!(args_hash("t", &a), args_hash("u", &a));
    let c = json!({"x": 1, "y": {"p": [2, 1], "q": "s"}});
    assert_ne!(args_hash("t", &a), args_hash("t", &c));
    assert_ne!(
        args_hash("t", &json!({"x": 1})),
        args_hash("t", &json!({"x": "1"}))
    );
}
