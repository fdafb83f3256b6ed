//! Driver for the official MCP conformance suite's client mode
//! (`conformance client --command <this binary>`): the suite appends its test server's URL
//! as the last argument and names the scenario in `MCP_CONFORMANCE_SCENARIO`.
//!
//! The driver only sequences library calls — the same `ClientSession` code paths the
//! runtime uses: connect (auto era), list tools, call each tool once with arguments made
//! from its input schema, close. Exit 0 on success, 1 with one line on stderr on failure.
//!
//! Authorization (`auth/*` scenarios) is the library's OAuth with the non-interactive
//! [`HeadlessAgent`] (the suite's authorization server approves at once), the suite's
//! Client ID Metadata Document URL, and pre-registered credentials from
//! `MCP_CONFORMANCE_CONTEXT` (`client_id`, and `client_secret` or `private_key_pem` +
//! `signing_algorithm`) when the scenario gives them.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use lumina_config::Secret;
use lumina_mcp::client::auth::{HeadlessAgent, OAuth, OAuthConfig, PreRegistered, SigningKey};
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, HttpMode};
use serde_json::{Map, Value};

/// The client ID metadata document URL the suite's `auth/basic-cimd` scenario expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lumina-mcp-conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let url = std::env::args()
        .next_back()
        .ok_or_else(|| anyhow!("usage: lumina-mcp-conformance-client <url>"))?;
    let url = url::Url::parse(&url).map_err(|e| anyhow!("invalid server URL `{url}`: {e}"))?;
    if let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") {
        tracing::info!(scenario, "conformance scenario");
    }
    let auth = oauth(&url)?;
    let endpoint = Endpoint::http(url, HttpMode::Auto);
    let opts = ConnectOptions {
        label: "conformance".into(),
        auth: Some(auth),
        ..ConnectOptions::default()
    };
    let session = ClientSession::connect(&endpoint, &opts)
        .await
        .map_err(|e| anyhow!("connect failed: {e}"))?;
    println!("connected: protocol {}", session.protocol_version());
    let outcome = exercise(&session).await;
    session.close().await;
    outcome
}

/// OAuth for the scenario: headless agent, the suite's CIMD URL, context credentials.
fn oauth(url: &url::Url) -> Result<Arc<OAuth>> {
    let mut cfg = OAuthConfig::new(url.clone(), "conformance");
    cfg.client_name = "lumina-conformance".into();
    cfg.client_metadata_url = Some(CLIENT_METADATA_URL.into());
    if let Ok(raw) = std::env::var("MCP_CONFORMANCE_CONTEXT") {
        let ctx: Value = serde_json::from_str(&raw)
            .map_err(|e| anyhow!("invalid MCP_CONFORMANCE_CONTEXT: {e}"))?;
        let text = |k: &str| ctx.get(k).and_then(Value::as_str).map(str::to_string);
        let signing_key = text("private_key_pem").map(|pem| SigningKey {
            private_key_pem: Secret::new(pem),
            algorithm: text("signing_algorithm").unwrap_or_else(|| "ES256".into()),
        });
        cfg.client = text("client_id").map(|client_id| PreRegistered {
            client_id,
            client_secret: text("client_secret").map(Secret::new),
            signing_key,
        });
    }
    let agent = HeadlessAgent::new()?;
    Ok(OAuth::new(cfg, Some(Arc::new(agent)), None)?)
}

async fn exercise(session: &ClientSession) -> Result<()> {
    let tools = session
        .list_tools()
        .await
        .map_err(|e| anyhow!("tools/list failed: {e}"))?;
    println!("tools: {}", tools.len());
    for tool in tools {
        let args = example_arguments(&tool.input_schema);
        let result = session
            .call_tool(&tool.name, args, CALL_TIMEOUT, None)
            .await
            .map_err(|e| anyhow!("tools/call {} failed: {e}", tool.name))?;
        println!(
            "{}{}: {}",
            tool.name,
            if result.is_error { " (error)" } else { "" },
            lumina_mcp::result_text(&result)
        );
    }
    Ok(())
}

/// Arguments for a schema: numbers/integers 1, 2, 3…, strings "test", booleans true, the
/// first enum value or the default when given.
fn example_arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let mut n = 0;
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, prop) in props.into_iter().flatten() {
        let value = if let Some(d) = prop.get("default") {
            d.clone()
        } else if let Some(first) = prop
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            first.clone()
        } else {
            match prop.get("type").and_then(Value::as_str) {
                Some("number" | "integer") => {
                    n += 1;
                    Value::from(n)
                }
                Some("boolean") => Value::Bool(true),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(Map::new()),
                _ => Value::from("test"),
            }
        };
        args.insert(name.clone(), value);
    }
    Value::Object(args)
}
