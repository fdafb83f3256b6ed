//! The built-in registry and the permission engine with the real descriptors.

use std::collections::HashSet;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use lumina_tools::builtin::ReadFile;
use lumina_tools::permission::{PermissionEngine, PermissionMode, PermissionRules, Verdict};
use lumina_tools::{builtin_registry, ToolRegistry};

#[test]
fn builtin_registry_has_every_tool_with_strict_schemas() {
    let registry = builtin_registry();
    assert_eq!(
        registry.names(),
        vec![
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "shell",
            "todo_write",
            "web_fetch",
            "web_search",
            "browser_open",
            "browser_click",
            "browser_type",
            "browser_select",
            "browser_extract",
            "browser_tabs",
            "browser_screenshot",
        ]
    );
    let flags: Vec<(String, bool, bool)> = registry
        .descriptors()
        .into_iter()
        .map(|d| (d.name, d.read_only, d.edits_files))
        .collect();
    let expected: Vec<(String, bool, bool)> = [
        ("read_file", true, false),
        ("write_file", false, true),
        ("edit_file", false, true),
        ("list_dir", true, false),
        ("glob", true, false),
        ("grep", true, false),
        ("shell", false, false),
        ("todo_write", false, false),
        ("web_fetch", false, false),
        ("web_search", true, false),
        ("browser_open", false, false),
        ("browser_click", false, false),
        ("browser_type", false, false),
        ("browser_select", false, false),
        ("browser_extract", true, false),
        ("browser_tabs", true, false),
        ("browser_screenshot", true, false),
    ]
    .into_iter()
    .map(|(n, r, e)| (n.to_string(), r, e))
    .collect();
    assert_eq!(flags, expected);

    for d in registry.descriptors() {
        let schema = &d.input_schema;
        assert_eq!(schema["type"], json!("object"), "{}", d.name);
        assert_eq!(schema["additionalProperties"], json!(false), "{}", d.name);
        let required = schema["required"].as_array().unwrap();
        // Tools whose every argument is optional (an element is a selector *or* a ref).
        let all_optional = [
            "browser_click",
            "browser_extract",
            "browser_tabs",
            "browser_screenshot",
        ];
        assert_eq!(
            required.is_empty(),
            all_optional.contains(&d.name.as_str()),
            "{}",
            d.name
        );
        for field in required {
            assert!(
                schema["properties"].get(field.as_str().unwrap()).is_some(),
                "{}: required field {field} has no property",
                d.name
            );
        }
        assert!(!d.description.is_empty());
    }
}

#[test]
fn register_replaces_a_tool_of_the_same_name() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ReadFile));
    registry.register(Arc::new(ReadFile));
    assert_eq!(registry.names(), vec!["read_file"]);
    assert!(registry.get("read_file").is_some());
    assert!(registry.get("nope").is_none());
}

#[test]
fn permission_decisions_for_the_builtin_tools() {
    let registry = builtin_registry();
    let engine = PermissionEngine::new(&PermissionRules {
        allow: vec![
            "shell(cargo test:*)".into(),
            "web_fetch(https://docs.rs/*)".into(),
            "browser_open(domain:docs.rs)".into(),
        ],
        deny: vec!["write_file(.env)".into()],
    })
    .unwrap();
    let grants = HashSet::new();
    let decide = |mode: PermissionMode, name: &str, args: Value| {
        let descriptor = registry.get(name).unwrap().descriptor();
        engine.decide(mode, &descriptor, &args, &grants)
    };
    let mode = Verdict::Allow { by: "mode" };
    let ask = PermissionMode::Ask;
    for name in ["read_file", "list_dir", "glob", "grep"] {
        assert_eq!(
            decide(ask, name, json!({"path": "x", "pattern": "x"})),
            mode,
            "{name}"
        );
    }
    assert_eq!(decide(ask, "todo_write", json!({"todos": []})), mode);
    assert_eq!(
        decide(ask, "write_file", json!({"path": "a", "content": ""})),
        Verdict::Ask
    );
    assert_eq!(decide(ask, "edit_file", json!({"path": "a"})), Verdict::Ask);
    assert_eq!(decide(ask, "shell", json!({"command": "ls"})), Verdict::Ask);
    assert_eq!(
        decide(ask, "shell", json!({"command": "cargo test -p x"})),
        Verdict::Allow { by: "rule" }
    );
    // The network is not read-only: fetching asks unless a URL rule allows it; searching the
    // operator's endpoint does not ask.
    assert_eq!(
        decide(ask, "web_fetch", json!({"url": "https://example.com/"})),
        Verdict::Ask
    );
    assert_eq!(
        decide(ask, "web_fetch", json!({"url": "https://docs.rs/tokio"})),
        Verdict::Allow { by: "rule" }
    );
    assert_eq!(decide(ask, "web_search", json!({"query": "x"})), mode);
    // The browser: opening asks like web_fetch (and takes its URL rules), acting on a page
    // asks like a write, reading it does not ask.
    assert_eq!(
        decide(ask, "browser_open", json!({"url": "https://example.com/"})),
        Verdict::Ask
    );
    assert_eq!(
        decide(ask, "browser_open", json!({"url": "https://docs.rs/tokio"})),
        Verdict::Allow { by: "rule" }
    );
    for name in ["browser_click", "browser_type", "browser_select"] {
        assert_eq!(decide(ask, name, json!({"ref": 1})), Verdict::Ask, "{name}");
        assert_eq!(
            decide(PermissionMode::AcceptEdits, name, json!({"ref": 1})),
            Verdict::Ask,
            "{name}"
        );
    }
    for name in ["browser_extract", "browser_tabs", "browser_screenshot"] {
        assert_eq!(decide(ask, name, json!({})), mode, "{name}");
    }
    let edits = PermissionMode::AcceptEdits;
    assert_eq!(decide(edits, "edit_file", json!({"path": "a"})), mode);
    assert_eq!(
        decide(edits, "shell", json!({"command": "ls"})),
        Verdict::Ask
    );
    assert_eq!(
        decide(edits, "web_fetch", json!({"url": "https://example.com/"})),
        Verdict::Ask
    );
    assert!(matches!(
        decide(
            PermissionMode::Bypass,
            "write_file",
            json!({"path": ".env", "content": ""})
        ),
        Verdict::Deny { .. }
    ));
}
