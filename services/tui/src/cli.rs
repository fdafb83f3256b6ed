//! Command-line arguments and their mapping onto settings layers.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use serde_json::{Map, Value};

/// Settings keys a `session.submit` may carry: the model settings and `permission_mode`.
/// Everything else (permissions rules, cluster wiring) stays with the backend's own layers.
pub const SUBMIT_KEYS: &[&str] = &[
    "api_key",
    "api_base_url",
    "api_model",
    "api_type",
    "max_tokens",
    "max_output_tokens",
    "fallback_api_enabled",
    "fallback_api_key",
    "fallback_api_base_url",
    "fallback_api_model",
    "fallback_api_type",
    "permission_mode",
];

/// `lumina`: the Lumina agent from the terminal.
///
/// The current directory is the project root. Without `-p` or `--list` it opens the
/// interactive terminal UI.
// No `Debug`: the struct holds the API key.
#[derive(Parser)]
#[command(name = "lumina", version, about, long_about = None)]
pub struct Cli {
    /// Run PROMPT once without the interactive UI and print the answer.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// How `-p` and `--list` print their results.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,

    /// List the sessions (id, last update, status, title).
    #[arg(long, conflicts_with_all = ["prompt", "resume"])]
    pub list: bool,

    /// Print a one-time sign-in link to the web console of the local backend (starting it
    /// when needed), or the console address of the remote one.
    #[arg(long, conflicts_with_all = ["prompt", "list", "resume"])]
    pub web: bool,

    /// With `--web`: open the link with xdg-open.
    #[arg(long, requires = "web")]
    pub open: bool,

    /// Continue the session ID (in the UI, or with `-p`).
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,

    /// Run the prompt as the agent team NAME (`-p` only; see `team.list`). The json output
    /// adds the team's members, gates and rounds.
    #[arg(long, value_name = "NAME", requires = "prompt")]
    pub team: Option<String>,

    /// API key of the model provider (setting `api_key`).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Base URL of the model API (setting `api_base_url`).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Model API wire format: anthropic, openai_compatible or auto (setting `api_type`).
    #[arg(long, value_name = "TYPE")]
    pub api_type: Option<String>,

    /// Model name (setting `api_model`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,

    /// Context window in tokens, used for accounting and compaction (setting `max_tokens`).
    #[arg(long, value_name = "TOKENS")]
    pub max_tokens: Option<u64>,

    /// How tool calls that need permission are handled (setting `permission_mode`).
    #[arg(long, value_enum, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,

    /// The AppRoot directory (default: $LUMINA_HOME, else ~/.lumina).
    #[arg(long, value_name = "DIR")]
    pub app_root: Option<PathBuf>,

    /// Print frame render times of the UI over a synthetic 10,000-event session and exit.
    #[arg(long, hide = true, conflicts_with_all = ["prompt", "list"])]
    pub bench_render: bool,
}

/// Output of `-p` and `--list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Streamed text for people.
    Text,
    /// One JSON object at the end.
    Json,
    /// Every frame as a JSON line, then the final object.
    StreamJson,
}

/// `--permission-mode` values; the strings are the canonical setting values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionMode {
    /// Ask before tools that need permission (denied in `-p`, where nobody can answer).
    Ask,
    /// Allow file edits without asking; ask for the rest.
    AcceptEdits,
    /// Allow everything that no deny rule forbids.
    Bypass,
}

impl PermissionMode {
    pub fn as_setting(self) -> &'static str {
        match self {
            PermissionMode::Ask => "ask",
            PermissionMode::AcceptEdits => "accept-edits",
            PermissionMode::Bypass => "bypass",
        }
    }
}

impl Cli {
    /// The command-line settings layer, keyed like settings.json.
    pub fn settings_layer(&self) -> Map<String, Value> {
        let mut layer = Map::new();
        let strings = [
            ("api_key", &self.api_key),
            ("api_base_url", &self.base_url),
            ("api_type", &self.api_type),
            ("api_model", &self.model),
        ];
        for (key, value) in strings {
            if let Some(value) = value {
                layer.insert(key.to_string(), Value::String(value.clone()));
            }
        }
        if let Some(max_tokens) = self.max_tokens {
            layer.insert("max_tokens".into(), Value::from(max_tokens));
        }
        if let Some(mode) = self.permission_mode {
            layer.insert("permission_mode".into(), mode.as_setting().into());
        }
        layer
    }
}

/// The `settings` sent with `session.submit`: the environment layer overlaid by the
/// command-line layer, restricted to [`SUBMIT_KEYS`]. A backend started earlier from another
/// shell thus runs this invocation's model and permission mode.
pub fn submit_settings(env_layer: &Map<String, Value>, cli_layer: &Map<String, Value>) -> Value {
    let mut merged = Map::new();
    for layer in [env_layer, cli_layer] {
        for (key, value) in layer {
            if SUBMIT_KEYS.contains(&key.as_str()) {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(merged)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("lumina").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn flags_map_to_setting_keys() {
        let cli = parse(&[
            "-p",
            "hi",
            "--api-key",
            "sk-test",
            "--base-url",
            "https://api.example.com",
            "--api-type",
            "anthropic",
            "--model",
            "m1",
            "--max-tokens",
            "1000",
            "--permission-mode",
            "accept-edits",
        ]);
        assert_eq!(
            Value::Object(cli.settings_layer()),
            json!({
                "api_key": "sk-test",
                "api_base_url": "https://api.example.com",
                "api_type": "anthropic",
                "api_model": "m1",
                "max_tokens": 1000,
                "permission_mode": "accept-edits",
            })
        );
    }

    #[test]
    fn absent_flags_add_nothing() {
        let cli = parse(&["-p", "hi"]);
        assert_eq!(cli.settings_layer(), Map::new());
        assert_eq!(cli.output_format, OutputFormat::Text);
        assert_eq!(cli.prompt.as_deref(), Some("hi"));
    }

    #[test]
    fn permission_modes_and_formats_parse() {
        assert_eq!(
            parse(&["--permission-mode", "bypass"]).settings_layer()["permission_mode"],
            json!("bypass")
        );
        assert_eq!(
            parse(&["--output-format", "stream-json", "-p", "x"]).output_format,
            OutputFormat::StreamJson
        );
        assert!(Cli::try_parse_from(["lumina", "--permission-mode", "yolo"]).is_err());
        assert!(Cli::try_parse_from(["lumina", "--list", "-p", "x"]).is_err());
    }

    #[test]
    fn submit_settings_overlay_cli_on_env_and_keep_only_model_keys() {
        let env = json!({
            "api_key": "sk-env",
            "api_model": "env-model",
            "fallback_api_enabled": true,
            "redis_url": "redis://secret@host",
            "shell_timeout_ms": 5,
        });
        let cli = parse(&["--model", "cli-model", "--permission-mode", "ask"]).settings_layer();
        let Value::Object(env) = env else {
            unreachable!()
        };
        assert_eq!(
            submit_settings(&env, &cli),
            json!({
                "api_key": "sk-env",
                "api_model": "cli-model",
                "fallback_api_enabled": true,
                "permission_mode": "ask",
            })
        );
    }
}
