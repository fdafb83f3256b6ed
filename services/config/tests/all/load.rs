//! Layer precedence, parsing and the rules about which layer may set what.

use lumina_config::{env_layer, Env, Error, Permissions, Secret, Settings};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixture::Fixture;

#[test]
fn missing_files_give_the_compiled_defaults() {
    let fx = Fixture::new();
    let settings = fx.load(&[], json!({})).unwrap();
    assert_eq!(settings, fx.defaults());
    assert_eq!(settings.api_type, "auto");
    assert_eq!(settings.max_tokens, 200_000);
    assert_eq!(settings.max_frame_bytes, 4 * 1024 * 1024);
}

#[test]
fn each_layer_beats_the_ones_below() {
    let fx = Fixture::new();
    fx.user(json!({
        "api_model": "from-user",
        "max_tokens": 1,
        "shell_timeout_ms": 1,
        "model_max_retries": 1,
        "tool_output_cap_bytes": 1,
    }))
    .project_defaults(json!({
        "max_tokens": 2,
        "shell_timeout_ms": 2,
        "model_max_retries": 2,
        "tool_output_cap_bytes": 2,
    }));
    let env = [
        ("LUMINA_SHELL_TIMEOUT_MS", "3"),
        ("LUMINA_MODEL_MAX_RETRIES", "3"),
        ("LUMINA_TOOL_OUTPUT_CAP_BYTES", "3"),
    ];
    let settings = fx.load(&env, json!({"tool_output_cap_bytes": 4})).unwrap();
    let want = Settings {
        api_model: Some("from-user".into()),
        max_tokens: 2,
        shell_timeout_ms: 3,
        model_max_retries: 3,
        tool_output_cap_bytes: 4,
        ..fx.defaults()
    };
    assert_eq!(settings, want);
}

#[test]
fn null_resets_a_lower_layer_to_the_default() {
    let fx = Fixture::new();
    fx.user(json!({"api_model": "m", "max_tokens": 5}));
    let settings = fx
        .load(&[], json!({"api_model": null, "max_tokens": null}))
        .unwrap();
    assert_eq!(settings, fx.defaults());
}

#[test]
fn permissions_merge_deeply_and_deny_rules_accumulate() {
    let fx = Fixture::new();
    fx.user(json!({"permissions": {"allow": ["read_file"], "deny": ["shell(rm *)"]}}))
        .project_defaults(json!({"permissions": {"deny": ["web_fetch"]}}));
    let env = [(
        "LUMINA_PERMISSIONS",
        r#"{"deny": ["shell(rm *)", "mcp__x"]}"#,
    )];
    let settings = fx
        .load(
            &env,
            json!({"permissions": {"allow": ["glob"], "deny": null}}),
        )
        .unwrap();
    assert_eq!(
        settings.permissions,
        Permissions {
            allow: vec!["glob".into()],
            deny: vec!["shell(rm *)".into(), "web_fetch".into(), "mcp__x".into()],
        }
    );
}

#[test]
fn lumina_variables_win_over_llm_variables() {
    let env = Env::from_pairs([
        ("LUMINA_API_KEY", "lumina-key"),
        ("LLM_API_KEY", "llm-key"),
        ("LLM_API_MODEL", "llm-model"),
        ("LUMINA_API_BASE_URL", "  "), // blank: falls through to LLM_
        ("LLM_API_BASE_URL", "https://llm.example"),
        ("LLM_MAX_TOKENS", "1000000"),
        ("LLM_API_TYPE", "OpenAI"),
        ("LLM_PERMISSION_MODE", "bypass"), // not a model setting: ignored
        ("LUMINA_HOME", "/somewhere"),     // not a setting
    ]);
    let layer = env_layer(&env).unwrap();
    assert_eq!(
        serde_json::Value::Object(layer),
        json!({
            "api_key": "lumina-key",
            "api_model": "llm-model",
            "api_base_url": "https://llm.example",
            "max_tokens": 1_000_000,
            "api_type": "openai_compatible",
        })
    );
}

#[test]
fn env_strings_are_parsed_by_the_setting_type() {
    let fx = Fixture::new();
    let env = [
        ("LUMINA_FALLBACK_API_ENABLED", "yes"),
        ("LUMINA_COMPACTION_THRESHOLD", "0.5"),
        ("LUMINA_MAX_FRAME_BYTES", " 1024 "),
        ("LUMINA_PERMISSION_MODE", "accept-edits"),
        ("LUMINA_REDIS_URL", "redis://:pw@r:6379"),
        ("LUMINA_CLUSTER_ID", "prod"),
    ];
    let settings = fx.load(&env, json!({})).unwrap();
    let want = Settings {
        fallback_api_enabled: true,
        compaction_threshold: 0.5,
        max_frame_bytes: 1024,
        permission_mode: "accept-edits".into(),
        redis_url: Some(Secret::new("redis://:pw@r:6379")),
        cluster_id: Some("prod".into()),
        ..fx.defaults()
    };
    assert_eq!(settings, want);
}

fn env_error(var: &str, value: &str) -> String {
    let err = env_layer(&Env::from_pairs([(var, value)])).unwrap_err();
    assert!(matches!(err, Error::InvalidEnv { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(!msg.contains(value), "echoed the value: {msg}");
    msg
}

#[test]
fn env_type_errors_name_the_variable_and_the_expected_type() {
    assert_eq!(
        env_error("LUMINA_MAX_TOKENS", "lots"),
        "environment variable LUMINA_MAX_TOKENS must be a whole number from 0 to 18446744073709551615"
    );
    assert_eq!(
        env_error("LLM_MAX_OUTPUT_TOKENS", "99999999999"),
        "environment variable LLM_MAX_OUTPUT_TOKENS must be a whole number from 0 to 4294967295"
    );
    assert_eq!(
        env_error("LUMINA_FALLBACK_API_ENABLED", "maybe"),
        "environment variable LUMINA_FALLBACK_API_ENABLED must be true or false"
    );
    assert_eq!(
        env_error("LUMINA_COMPACTION_THRESHOLD", "1.5"),
        "environment variable LUMINA_COMPACTION_THRESHOLD must be a number greater than 0 and at most 1"
    );
    assert_eq!(
        env_error("LUMINA_API_TYPE", "gemini"),
        "environment variable LUMINA_API_TYPE must be one of anthropic, openai_compatible, auto"
    );
    assert!(env_error("LUMINA_PERMISSIONS", "nope").contains("`allow` and `deny`"));
}

#[test]
fn file_type_errors_name_the_file_and_key_but_not_the_value() {
    let fx = Fixture::new();
    fx.user(json!({"max_tokens": "sk-looks-secret"}));
    let msg = fx.load(&[], json!({})).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: setting `max_tokens` must be a whole number from 0 to 18446744073709551615",
            fx.root.settings_file().display()
        )
    );

    let fx = Fixture::new();
    fx.project_defaults(json!({"session_runtime_backend": "k8s"}));
    let msg = fx.load(&[], json!({})).unwrap_err().to_string();
    assert!(
        msg.contains(
            "defaults.json: setting `session_runtime_backend` must be one of local, cluster"
        ),
        "{msg}"
    );

    let fx = Fixture::new();
    let msg = fx.load(&[], json!({"api_key": 5})).unwrap_err().to_string();
    assert_eq!(msg, "command line: setting `api_key` must be a string");
}

#[test]
fn malformed_json_names_the_file_and_position_without_values() {
    let fx = Fixture::new();
    let path = fx.root.settings_file();
    Fixture::write(
        &path,
        "{\n  \"api_key\": \"sk-secret-1\",\n  \"max_tokens\": \n}",
    );
    let err = fx.load(&[], json!({})).unwrap_err();
    assert!(matches!(err, Error::Malformed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: malformed JSON: ", path.display())),
        "{msg}"
    );
    assert!(msg.contains("line 4 column 1"), "{msg}");
    assert!(!msg.contains("sk-secret"), "{msg}");

    Fixture::write(&path, "[1, 2]");
    let msg = fx.load(&[], json!({})).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: expected a JSON object of settings at the top level",
            path.display()
        )
    );

    let fx = Fixture::new();
    let project_file = lumina_config::project_defaults_file(&fx.project);
    Fixture::write(&project_file, "{\"max_tokens\": 1,}");
    let msg = fx.load(&[], json!({})).unwrap_err().to_string();
    assert!(
        msg.starts_with(&project_file.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("line 1 column 18"), "{msg}");
}

#[test]
fn memory_model_keys_come_only_from_user_settings() {
    let fx = Fixture::new();
    fx.user(json!({"memory_bge_model": "BAAI/bge-m3", "memory_reranker_enabled": true}))
        .project_defaults(
            json!({"memory_bge_model": "project-model", "memory_bge_base_url": "http://evil"}),
        );
    let env = [("LUMINA_MEMORY_BGE_MODEL", "env-model")];
    let settings = fx
        .load(&env, json!({"memory_reranker_enabled": false}))
        .unwrap();
    assert_eq!(
        serde_json::Value::Object(settings.extra.clone()),
        json!({"memory_bge_model": "BAAI/bge-m3", "memory_reranker_enabled": true})
    );
    let file = fx.root.settings_file();
    let project = lumina_config::project_defaults_file(&fx.project);
    assert_eq!(
        settings.warnings,
        vec![
            format!("ignored `memory_bge_base_url` from {}: memory-model settings are read only from {}", project.display(), file.display()),
            format!("ignored `memory_bge_model` from {}: memory-model settings are read only from {}", project.display(), file.display()),
            format!("ignored `memory_reranker_enabled` from command line: memory-model settings are read only from {}", file.display()),
        ]
    );
}

#[test]
fn project_defaults_cannot_set_secrets_endpoints_or_loosen_permissions() {
    let fx = Fixture::new();
    fx.user(json!({"permission_mode": "accept-edits", "api_base_url": "https://mine"}))
        .project_defaults(json!({
            "api_key": "sk-from-repo",
            "api_base_url": "https://attacker",
            "postgres_url": "postgres://x",
            "permission_mode": "bypass",
            "permissions": {"allow": ["shell"], "deny": ["web_fetch"]},
            "api_model": "project-model",
        }));
    let settings = fx.load(&[], json!({})).unwrap();
    let project = lumina_config::project_defaults_file(&fx.project);
    let want = Settings {
        api_base_url: Some("https://mine".into()),
        api_model: Some("project-model".into()),
        permission_mode: "accept-edits".into(),
        permissions: Permissions {
            allow: vec![],
            deny: vec!["web_fetch".into()],
        },
        warnings: vec![
            format!("ignored `api_key` from {}: secrets come only from user settings, environment or flags", project.display()),
            format!("ignored `postgres_url` from {}: secrets come only from user settings, environment or flags", project.display()),
            format!("ignored `api_base_url` from {}: a project may not choose where the user's API key is sent", project.display()),
            format!("ignored `permission_mode` from {}: a project may only set it to `ask`", project.display()),
            format!("ignored `permissions.allow` from {}: a project may only add deny rules", project.display()),
        ],
        ..fx.defaults()
    };
    assert_eq!(settings, want);

    // Tightening is allowed.
    fx.project_defaults(json!({"permission_mode": "ask"}));
    assert_eq!(fx.load(&[], json!({})).unwrap().permission_mode, "ask");
}

#[test]
fn unknown_keys_are_kept_and_choices_normalized() {
    let fx = Fixture::new();
    fx.user(json!({"future_knob": {"a": 1}, "api_type": " Anthropic "}));
    let settings = fx
        .load(&[], json!({"permission_mode": "acceptEdits"}))
        .unwrap();
    assert_eq!(settings.extra.get("future_knob"), Some(&json!({"a": 1})));
    assert_eq!(settings.api_type, "anthropic");
    assert_eq!(settings.permission_mode, "accept-edits");
}

#[test]
fn debug_never_prints_secrets() {
    let fx = Fixture::new();
    fx.user(json!({
        "api_key": "sk-primary",
        "fallback_api_key": "sk-fallback",
        "redis_url": "redis://:redispw@r",
        "postgres_url": "postgres://u:pgpw@p/db",
        "memory_bge_api_key": "sk-memory",
        "api_model": "visible-model",
    }));
    let settings = fx.load(&[], json!({})).unwrap();
    let debug = format!("{settings:?} {settings:#?}");
    for secret in ["sk-primary", "sk-fallback", "redispw", "pgpw", "sk-memory"] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
    assert!(debug.contains("visible-model"));
    assert!(
        debug.contains("memory_bge_api_key"),
        "extra keys are listed by name"
    );
    assert_eq!(
        settings.api_key.as_ref().map(Secret::expose),
        Some("sk-primary")
    );
}
