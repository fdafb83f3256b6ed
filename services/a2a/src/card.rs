//! The Agent Card, generated from one capability catalog: the executor's skills, the
//! media types it takes, and what this server supports (streaming, push notifications, an
//! extended card). Served with an `ETag`, `Last-Modified` and `Cache-Control`. When the
//! server listens on every interface but would advertise a loopback URL, the card says so
//! in `warnings` and names the setting that fixes it (`docs/a2a.md`).

use std::net::SocketAddr;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One skill of the card (`AgentSkill`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    pub version: String,
    pub capabilities: AgentCapabilities,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub security_schemes: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<serde_json::Value>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    /// Lumina's addition: configuration problems a client should know about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What goes into the card besides the executor's catalog.
#[derive(Debug, Clone)]
pub struct CardOptions {
    pub name: String,
    pub description: String,
    pub version: String,
    /// The JSON-RPC endpoint's URL as clients reach it.
    pub url: String,
    /// Where the server listens (for the 0.0.0.0-but-loopback warning).
    pub listen: Option<SocketAddr>,
    /// The setting that sets `url` (named in the warning).
    pub url_setting: String,
    pub input_modes: Vec<String>,
    pub output_modes: Vec<String>,
    pub push_notifications: bool,
    /// The JSON-RPC endpoint needs `Authorization: Bearer`.
    pub bearer_auth: bool,
    pub streaming: bool,
}

/// The card as served: the document, its bytes, validators and the media types it takes.
#[derive(Debug, Clone)]
pub struct CardDocument {
    pub card: AgentCard,
    pub body: bytes::Bytes,
    pub etag: String,
    pub last_modified: String,
}

impl CardDocument {
    pub fn build(options: &CardOptions, skills: Vec<AgentSkill>) -> Self {
        let mut warnings = Vec::new();
        if let Some(listen) = options.listen {
            if listen.ip().is_unspecified() && advertises_loopback(&options.url) {
                warnings.push(format!(
                    "the server listens on {listen} but advertises {}: clients on other machines cannot reach it; set {} to the public URL",
                    options.url, options.url_setting
                ));
                tracing::warn!(url = %options.url, listen = %listen, setting = %options.url_setting, "a2a card advertises a loopback url while listening on every interface");
            }
        }
        let mut security_schemes = serde_json::Map::new();
        let mut security_requirements = Vec::new();
        if options.bearer_auth {
            security_schemes.insert(
                "bearer".into(),
                serde_json::json!({ "httpAuthSecurityScheme": { "scheme": "Bearer", "bearerFormat": "JWT" } }),
            );
            security_requirements
                .push(serde_json::json!({ "schemes": { "bearer": { "list": [] } } }));
        }
        let card = AgentCard {
            name: options.name.clone(),
            description: options.description.clone(),
            supported_interfaces: vec![AgentInterface {
                url: options.url.clone(),
                protocol_binding: "JSONRPC".into(),
                protocol_version: "1.0".into(),
            }],
            provider: Some(AgentProvider {
                organization: "Lumina".into(),
                url: "https://github.com/lumina".into(),
            }),
            version: options.version.clone(),
            capabilities: AgentCapabilities {
                streaming: options.streaming,
                push_notifications: options.push_notifications,
                extended_agent_card: false,
            },
            security_schemes,
            security_requirements,
            default_input_modes: options.input_modes.clone(),
            default_output_modes: options.output_modes.clone(),
            skills,
            warnings,
        };
        let body = bytes::Bytes::from(serde_json::to_vec_pretty(&card).unwrap_or_default());
        let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&body))[..32]);
        Self {
            card,
            body,
            etag,
            last_modified: httpdate::fmt_http_date(SystemTime::now()),
        }
    }

    /// Whether a part of this media type is accepted (`type/*` and `*/*` match).
    pub fn accepts(&self, media_type: &str) -> bool {
        let media_type = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        self.card.default_input_modes.iter().any(|mode| {
            let mode = mode.to_ascii_lowercase();
            mode == media_type
                || mode == "*/*"
                || mode
                    .strip_suffix("/*")
                    .is_some_and(|prefix| media_type.split('/').next() == Some(prefix))
        })
    }
}

fn advertises_loopback(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    }
}
