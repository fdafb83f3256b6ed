//! What a [`Handler`](crate::Handler) serves ([`Features`], from which the advertised
//! capabilities are derived). The MCP wire types themselves live in `lumina-mcp-proto`.

use serde_json::Value;

pub use lumina_mcp_proto::{
    CallToolResult, Completion, Content, GetPromptResult, Implementation, LogLevel, Prompt,
    PromptArgument, PromptMessage, Resource, ResourceContents, ResourceTemplate, Role, Tool,
};

/// Which optional features a handler serves. The advertised capabilities are derived from
/// it, and requests for an undeclared feature are answered with "method not found".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub tools: bool,
    pub resources: bool,
    /// `resources/subscribe` and `resources/unsubscribe` (needs `resources`).
    pub resource_subscriptions: bool,
    pub prompts: bool,
    pub completions: bool,
    pub logging: bool,
}

impl Default for Features {
    /// Tools and logging.
    fn default() -> Self {
        Self {
            tools: true,
            resources: false,
            resource_subscriptions: false,
            prompts: false,
            completions: false,
            logging: true,
        }
    }
}

impl Features {
    /// Everything.
    pub fn all() -> Self {
        Self {
            tools: true,
            resources: true,
            resource_subscriptions: true,
            prompts: true,
            completions: true,
            logging: true,
        }
    }

    /// The `capabilities` object of `initialize` and `server/discover`.
    pub fn capabilities(&self) -> Value {
        let mut caps = serde_json::Map::new();
        if self.tools {
            caps.insert("tools".into(), serde_json::json!({ "listChanged": false }));
        }
        if self.resources {
            caps.insert(
                "resources".into(),
                serde_json::json!({ "subscribe": self.resource_subscriptions, "listChanged": false }),
            );
        }
        if self.prompts {
            caps.insert(
                "prompts".into(),
                serde_json::json!({ "listChanged": false }),
            );
        }
        if self.completions {
            caps.insert("completions".into(), serde_json::json!({}));
        }
        if self.logging {
            caps.insert("logging".into(), serde_json::json!({}));
        }
        Value::Object(caps)
    }
}
