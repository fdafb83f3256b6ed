//! MCP server definitions: project `<root>/.mcp.json` and user `<AppRoot>/config/mcp.json`,
//! both `{"mcpServers": {"<name>": {"command","args","env"} | {"url","headers","type","oauth"}}}`
//! where `"oauth": {"client_id", "client_secret"?, "scopes"?}` holds pre-registered OAuth
//! credentials (`client_secret` expands `${VAR}` like header values).
//!
//! Definitions are kept raw (unexpanded): `${VAR}` is only expanded by
//! [`ServerDef::resolve`] when connecting, and the expanded values go straight to the
//! transport — never into logs, errors or listings. A broken file is an error naming the
//! file; the other file's servers still load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumina_config::AppRoot;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::client::{Endpoint, HttpMode, ProtocolPref};
use crate::expand::{expand_vars, ExpandError};

mod oauth;
use oauth::parse_oauth;
pub use oauth::OAuthSpec;

/// Where a definition came from. Project servers need trust; user servers are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerSource {
    User,
    Project,
}

impl std::fmt::Display for ServerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerSource::User => "user",
            ServerSource::Project => "project",
        })
    }
}

/// How to reach a server, as written (unexpanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportSpec {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        mode: HttpMode,
        oauth: Option<OAuthSpec>,
    },
}

/// One server definition, raw. `Debug` shows raw strings only (`${VAR}` stays unexpanded).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerDef {
    pub transport: TransportSpec,
    pub protocol: ProtocolPref,
    pub disabled: bool,
    /// The JSON object as written; its canonical form is the trust fingerprint.
    raw: Value,
}

/// A named server and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub source: ServerSource,
    pub file: PathBuf,
    pub def: ServerDef,
}

/// A configuration problem. Never contains an expanded value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("invalid JSON in {}: {reason}", path.display())]
    Json { path: PathBuf, reason: String },
    #[error("{}: invalid MCP server name `{name}` (use letters, digits, `_` and `-`)", path.display())]
    InvalidName { path: PathBuf, name: String },
    #[error("{}: MCP server `{name}`: {reason}", path.display())]
    InvalidServer {
        path: PathBuf,
        name: String,
        reason: String,
    },
    #[error("MCP server `{server}`: {source}")]
    Expand { server: String, source: ExpandError },
}

/// Both files' servers (project wins on a name clash) and the problems found.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    pub servers: Vec<ServerConfig>,
    pub errors: Vec<ConfigError>,
}

/// `<project_root>/.mcp.json`.
pub fn project_config_file(project_root: &Path) -> PathBuf {
    project_root.join(".mcp.json")
}

/// `<AppRoot>/config/mcp.json`.
pub fn user_config_file(app_root: &AppRoot) -> PathBuf {
    app_root.config_dir().join("mcp.json")
}

/// Loads the user file then the project file; a project server replaces a user server of
/// the same name. Servers are sorted by name.
pub fn load(project_root: &Path, app_root: &AppRoot) -> LoadedConfig {
    let mut out = LoadedConfig::default();
    let mut by_name: BTreeMap<String, ServerConfig> = BTreeMap::new();
    for (file, source) in [
        (user_config_file(app_root), ServerSource::User),
        (project_config_file(project_root), ServerSource::Project),
    ] {
        for server in load_file(&file, source, &mut out.errors) {
            by_name.insert(server.name.clone(), server);
        }
    }
    out.servers = by_name.into_values().collect();
    out
}

/// One file's servers; a missing file has none.
pub fn load_file(
    path: &Path,
    source: ServerSource,
    errors: &mut Vec<ConfigError>,
) -> Vec<ServerConfig> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(ConfigError::Read {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
            return Vec::new();
        }
    };
    let json_err = |reason: String| ConfigError::Json {
        path: path.to_path_buf(),
        reason,
    };
    let root: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            errors.push(json_err(e.to_string()));
            return Vec::new();
        }
    };
    let servers = match root.get("mcpServers") {
        None => return Vec::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            errors.push(json_err("`mcpServers` must be an object".into()));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (name, raw) in servers {
        if !is_valid_name(name) {
            errors.push(ConfigError::InvalidName {
                path: path.to_path_buf(),
                name: name.clone(),
            });
            continue;
        }
        match parse_def(raw) {
            Ok(def) => out.push(ServerConfig {
                name: name.clone(),
                source,
                file: path.to_path_buf(),
                def,
            }),
            Err(reason) => errors.push(ConfigError::InvalidServer {
                path: path.to_path_buf(),
                name: name.clone(),
                reason: reason.to_string(),
            }),
        }
    }
    out
}

/// `[A-Za-z0-9_-]+`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What is wrong with a server definition (the `reason` of [`ConfigError::InvalidServer`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefError {
    #[error("a server definition must be an object")]
    NotAnObject,
    /// `key` is a field (`command`) or a dotted path (`oauth.client_id`).
    #[error("`{0}` must be a string")]
    NotAString(String),
    #[error("`{0}` must be an array of strings")]
    NotStrings(String),
    #[error("`{0}` values must be strings")]
    ValuesNotStrings(String),
    #[error("`{0}` must be an object of strings")]
    NotAnObjectOfStrings(String),
    #[error("unknown `protocol` `{0}` (use auto, 2025-11-25 or 2026-07-28)")]
    UnknownProtocol(String),
    #[error("`disabled` must be true or false")]
    DisabledNotABool,
    #[error("give either `command` or `url`, not both")]
    CommandAndUrl,
    #[error(
        "`type` `{0}` does not match the other fields (stdio needs `command`, http/sse need `url`)"
    )]
    TypeMismatch(String),
    #[error("unknown `type` `{0}` (use stdio, http or sse)")]
    UnknownType(String),
    #[error("needs `command` (stdio) or `url` (http)")]
    NoTransport,
    #[error("`oauth` must be an object")]
    OAuthNotAnObject,
    #[error("`oauth.scopes` must be strings")]
    OAuthScopesNotStrings,
    #[error("`oauth.client_secret` needs `oauth.client_id`")]
    OAuthSecretWithoutClientId,
}

/// Parses one definition object (also used by tests and callers building definitions).
pub fn parse_def(raw: &Value) -> Result<ServerDef, DefError> {
    let obj = raw.as_object().ok_or(DefError::NotAnObject)?;
    let kind = opt_str(obj, "type")?;
    let protocol = match opt_str(obj, "protocol")?.as_deref() {
        None | Some("auto") => ProtocolPref::Auto,
        Some(crate::version::STATELESS) => ProtocolPref::Stateless,
        Some(v) if crate::version::is_handshake(v) => ProtocolPref::Handshake,
        Some(v) => return Err(DefError::UnknownProtocol(v.to_string())),
    };
    let disabled = match obj.get("disabled") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(DefError::DisabledNotABool),
    };
    let command = opt_str(obj, "command")?;
    let url = opt_str(obj, "url")?;
    let transport = match (command, url, kind.as_deref()) {
        (Some(_), Some(_), _) => return Err(DefError::CommandAndUrl),
        (Some(command), None, None | Some("stdio")) => TransportSpec::Stdio {
            command,
            args: str_list(obj, "args")?,
            env: str_map(obj, "env")?,
        },
        (
            None,
            Some(url),
            kind @ (None | Some("http" | "streamable-http" | "streamableHttp" | "sse")),
        ) => TransportSpec::Http {
            url,
            headers: str_map(obj, "headers")?,
            mode: match kind {
                None => HttpMode::Auto,
                Some("sse") => HttpMode::LegacySse,
                Some(_) => HttpMode::Streamable,
            },
            oauth: parse_oauth(obj.get("oauth"))?,
        },
        (_, _, Some(k @ ("stdio" | "http" | "streamable-http" | "streamableHttp" | "sse"))) => {
            return Err(DefError::TypeMismatch(k.to_string()))
        }
        (_, _, Some(k)) => return Err(DefError::UnknownType(k.to_string())),
        (None, None, None) => return Err(DefError::NoTransport),
    };
    Ok(ServerDef {
        transport,
        protocol,
        disabled,
        raw: raw.clone(),
    })
}

impl ServerDef {
    /// sha256 (hex) of the canonical raw definition: a changed definition needs trust again.
    pub fn fingerprint(&self) -> String {
        hex::encode(Sha256::digest(canonical(&self.raw).as_bytes()))
    }

    /// What `/mcp` shows: the raw command line or URL, `${VAR}` unexpanded.
    pub fn display(&self) -> String {
        match &self.transport {
            TransportSpec::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            TransportSpec::Http { url, .. } => url.clone(),
        }
    }

    /// Expands `${VAR}` in env values, header values, args and the URL from `lookup`.
    /// Stdio servers run in `project_root`.
    pub fn resolve(
        &self,
        server: &str,
        project_root: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, ConfigError> {
        let exp = |s: &str| {
            expand_vars(s, lookup).map_err(|source| ConfigError::Expand {
                server: server.to_string(),
                source,
            })
        };
        Ok(match &self.transport {
            TransportSpec::Stdio { command, args, env } => Endpoint::Stdio {
                command: command.clone(),
                args: args.iter().map(|a| exp(a)).collect::<Result<_, _>>()?,
                env: env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), exp(v)?)))
                    .collect::<Result<_, ConfigError>>()?,
                cwd: Some(project_root.to_path_buf()),
            },
            TransportSpec::Http {
                url,
                headers,
                mode,
                oauth,
            } => {
                let expanded = exp(url)?;
                let url = url::Url::parse(&expanded).map_err(|e| ConfigError::InvalidServer {
                    path: PathBuf::new(),
                    name: server.to_string(),
                    reason: format!("invalid `url` `{url}`: {e}"),
                })?;
                Endpoint::Http {
                    url,
                    headers: headers
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), exp(v)?)))
                        .collect::<Result<_, ConfigError>>()?,
                    mode: *mode,
                    oauth: match oauth {
                        None => None,
                        Some(o) => Some(o.resolve(&exp)?),
                    },
                }
            }
        })
    }
}

pub(crate) fn opt_str(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, DefError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(DefError::NotAString(key.to_string())),
    }
}

pub(crate) fn str_list(obj: &Map<String, Value>, key: &str) -> Result<Vec<String>, DefError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| DefError::NotStrings(key.to_string())),
        Some(_) => Err(DefError::NotStrings(key.to_string())),
    }
}

fn str_map(obj: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, DefError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect::<Option<BTreeMap<_, _>>>()
            .ok_or_else(|| DefError::ValuesNotStrings(key.to_string())),
        Some(_) => Err(DefError::NotAnObjectOfStrings(key.to_string())),
    }
}

/// JSON with object keys sorted at every level (independent of serde_json's map order).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_both_shapes_and_rejects_bad_ones() {
        let def = parse_def(&json!({"command": "npx", "args": ["-y", "x"], "env": {"K": "${V}"}}));
        assert!(matches!(
            def,
            Ok(ServerDef {
                transport: TransportSpec::Stdio { .. },
                ..
            })
        ));
        let def = parse_def(&json!({"url": "http://h/sse", "type": "sse"}));
        assert!(matches!(
            def,
            Ok(ServerDef {
                transport: TransportSpec::Http {
                    mode: HttpMode::LegacySse,
                    ..
                },
                ..
            })
        ));
        assert!(parse_def(&json!({"type": "sse", "command": "x"})).is_err());
        assert!(parse_def(&json!({})).is_err());
        assert!(parse_def(&json!({"command": "x", "args": [1]})).is_err());
        assert!(parse_def(&json!({"command": "x", "protocol": "1999"})).is_err());
    }

    #[test]
    fn fingerprint_ignores_key_order_but_not_content() -> Result<(), DefError> {
        let a = parse_def(&json!({"command": "x", "args": ["1"]}))?;
        let b = parse_def(&json!({"args": ["1"], "command": "x"}))?;
        let c = parse_def(&json!({"command": "x", "args": ["2"]}))?;
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        Ok(())
    }

    #[test]
    fn names() {
        assert!(is_valid_name("a-B_9"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("a.b"));
    }
}
