//! Model endpoint resolution and the messages for a missing model.

use lumina_config::{EndpointSettings, MissingModel, ModelSettings, Secret, Settings};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixture::Fixture;

fn settings_with(json: serde_json::Value) -> (Fixture, Settings) {
    let fx = Fixture::new();
    fx.user(json);
    let settings = fx.load(&[], json!({})).unwrap();
    (fx, settings)
}

#[test]
fn nothing_configured_names_every_variable() {
    let (fx, settings) = settings_with(json!({}));
    let err = settings.model_endpoints().unwrap_err();
    assert_eq!(
        err,
        MissingModel {
            missing: vec!["api_key", "api_base_url", "api_model"],
            settings_file: Some(fx.root.settings_file()),
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "no model configured: set LUMINA_API_KEY, LUMINA_API_BASE_URL and LUMINA_API_MODEL \
             (or api_key, api_base_url, api_model in {})",
            fx.root.settings_file().display()
        )
    );
}

#[test]
fn only_the_missing_pieces_are_named() {
    let (fx, settings) = settings_with(json!({"api_key": "k", "api_base_url": "  "}));
    assert_eq!(
        settings.model_endpoints().unwrap_err().to_string(),
        format!(
            "no model configured: set LUMINA_API_BASE_URL and LUMINA_API_MODEL \
             (or api_base_url, api_model in {})",
            fx.root.settings_file().display()
        )
    );
    let (fx, settings) = settings_with(json!({"api_key": "k", "api_base_url": "u"}));
    assert_eq!(
        settings.model_endpoints().unwrap_err().to_string(),
        format!(
            "no model configured: set LUMINA_API_MODEL (or api_model in {})",
            fx.root.settings_file().display()
        )
    );
    let no_file = Settings::default()
        .model_endpoints()
        .unwrap_err()
        .to_string();
    assert!(no_file.ends_with("in settings.json)"), "{no_file}");
}

#[test]
fn primary_only_and_disabled_fallback_is_ignored() {
    let (_fx, settings) = settings_with(json!({
        "api_key": "k1", "api_base_url": "https://a", "api_model": "m1", "api_type": "anthropic",
        "fallback_api_key": "k2", "fallback_api_base_url": "https://b", "fallback_api_model": "m2",
    }));
    assert_eq!(
        settings.model_endpoints().unwrap(),
        ModelSettings {
            primary: EndpointSettings {
                api_type: "anthropic".into(),
                base_url: "https://a".into(),
                model: "m1".into(),
                api_key: Secret::new("k1"),
            },
            fallback: None,
        }
    );
}

#[test]
fn enabled_fallback_inherits_the_primary_type() {
    let (_fx, settings) = settings_with(json!({
        "api_key": "k1", "api_base_url": "https://a", "api_model": "m1", "api_type": "openai",
        "fallback_api_enabled": true,
        "fallback_api_key": "k2", "fallback_api_base_url": "https://b", "fallback_api_model": "m2",
    }));
    assert_eq!(
        settings.model_endpoints().unwrap().fallback,
        Some(EndpointSettings {
            api_type: "openai_compatible".into(),
            base_url: "https://b".into(),
            model: "m2".into(),
            api_key: Secret::new("k2"),
        })
    );
}

#[test]
fn enabled_but_incomplete_fallback_is_reported() {
    let (fx, settings) = settings_with(json!({
        "api_key": "k1", "api_base_url": "https://a", "api_model": "m1",
        "fallback_api_enabled": true, "fallback_api_model": "m2",
    }));
    let err = settings.model_endpoints().unwrap_err();
    assert_eq!(
        err.missing,
        vec!["fallback_api_key", "fallback_api_base_url"]
    );
    assert_eq!(
        err.to_string(),
        format!(
            "fallback model enabled but incomplete: set LUMINA_FALLBACK_API_KEY and \
             LUMINA_FALLBACK_API_BASE_URL (or fallback_api_key, fallback_api_base_url in {}), \
             or set fallback_api_enabled to false",
            fx.root.settings_file().display()
        )
    );
}
