//! Shared setup: endpoints pointing at scripted servers, fast retry options, a runner that
//! collects deltas.

use std::time::Duration;

use lumina_config::Secret;
use lumina_model::{
    ApiType, ChatRequest, ChatResponse, ContentBlock, Message, ModelClient, ModelEndpoint,
    ModelError, ModelOptions, Role, StreamDelta,
};
use lumina_testkit::ScriptedModelServer;
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "sk-test-very-secret-0123456789";

pub fn endpoint(server: &ScriptedModelServer, api: ApiType) -> ModelEndpoint {
    ModelEndpoint {
        api_type: api,
        base_url: server.base_url(),
        model: match api {
            ApiType::Anthropic => "claude-scripted".into(),
            _ => "gpt-scripted".into(),
        },
        api_key: Secret::new(KEY),
    }
}

/// Tiny backoff so retry tests run in milliseconds; server-sent delays still apply.
pub fn fast_options() -> ModelOptions {
    ModelOptions {
        max_output_tokens: 512,
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        max_retries: 2,
        max_backoff: Duration::from_millis(5),
    }
}

pub fn client(
    primary: ModelEndpoint,
    fallback: Option<ModelEndpoint>,
    options: ModelOptions,
) -> ModelClient {
    ModelClient::new(primary, fallback, options).unwrap()
}

pub fn user(text: &str) -> ChatRequest {
    ChatRequest {
        system: "You are a test.".into(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }],
        tools: vec![],
    }
}

pub struct Run {
    pub deltas: Vec<StreamDelta>,
    pub result: Result<ChatResponse, ModelError>,
}

impl Run {
    pub fn text_deltas(&self) -> Vec<String> {
        self.deltas
            .iter()
            .filter_map(|d| match d {
                StreamDelta::Text(t) => Some(t.clone()),
                StreamDelta::Thinking(_) => None,
            })
            .collect()
    }
}

pub async fn run(client: &ModelClient, req: &ChatRequest) -> Run {
    let cancel = CancellationToken::new();
    let mut deltas = Vec::new();
    let mut sink = |d: StreamDelta| deltas.push(d);
    let result = client.stream(req, &cancel, &mut sink).await;
    Run { deltas, result }
}

/// Generates one `#[tokio::test]` per API type for each scenario function `f(ApiType)`.
#[macro_export]
macro_rules! both_apis {
    ($($name:ident),* $(,)?) => {
        mod anthropic {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(lumina_model::ApiType::Anthropic).await
                }
            )*
        }
        mod openai {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(lumina_model::ApiType::OpenaiCompatible).await
                }
            )*
        }
    };
}
