//! Targets `model_anthropic_sse` and `model_openai_sse`: a model API's streamed response.
//!
//! 1. `lumina_model::sse::SseDecoder` (public and pure): the input decoded in one piece must
//!    give the same events as the input fed in three pieces, at split points derived from
//!    the input (network chunking must not change what is decoded).
//! 2. The vendor stream parsers (Anthropic Messages events, OpenAI Chat Completions chunks)
//!    are private to `lumina-model`; their public entry point is `ModelClient::stream`. A
//!    loopback HTTP server in this process answers the request with the input as a
//!    `text/event-stream` body, no retries. Properties: no panic, no hang, and a completed
//!    turn's text is exactly the concatenation of the text deltas it emitted.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use lumina_config::Secret;
use lumina_model::sse::{SseDecoder, SseEvent};
use lumina_model::{
    ApiType, ChatRequest, ChatResponse, ContentBlock, Message, ModelClient, ModelEndpoint,
    ModelError, ModelOptions, Role, StreamDelta,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

/// Anthropic Messages API stream.
pub fn run_anthropic(data: &[u8]) {
    run(ApiType::Anthropic, data);
}

/// OpenAI-compatible Chat Completions stream.
pub fn run_openai(data: &[u8]) {
    run(ApiType::OpenaiCompatible, data);
}

fn run(api: ApiType, data: &[u8]) {
    split_invariance(data);
    through_the_client(api, data);
}

fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.push(chunk));
    }
    events.extend(decoder.finish());
    events
}

fn split_invariance(data: &[u8]) {
    let whole = decode(&[data]);
    let len = data.len();
    let (first, last) = match (data.first(), data.last()) {
        (Some(f), Some(l)) => (usize::from(*f), usize::from(*l)),
        _ => (0, 0),
    };
    let i = first.wrapping_mul(7919) % (len + 1);
    let j = i + last.wrapping_mul(104_729) % (len - i + 1);
    let pieces = decode(&[&data[..i], &data[i..j], &data[j..]]);
    assert_eq!(pieces, whole, "splitting at {i} and {j} changed the events");
}

struct Server {
    runtime: tokio::runtime::Runtime,
    base_url: String,
    body: Arc<Mutex<Vec<u8>>>,
    clients: Mutex<Vec<(ApiType, ModelClient)>>,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let body = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local addr: {e}"));
        let shared = Arc::clone(&body);
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared)));
            }
        });
        Server {
            runtime,
            base_url: format!("http://{addr}"),
            body,
            clients: Mutex::new(Vec::new()),
        }
    })
}

/// HTTP/1.1 keep-alive: every request is answered with the current body.
async fn serve(mut stream: tokio::net::TcpStream, body: Arc<Mutex<Vec<u8>>>) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let total = head_end + 4 + length;
        while buf.len() < total {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..total);
        let payload = body.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            payload.len()
        )
        .into_bytes();
        response.extend_from_slice(&payload);
        if stream.write_all(&response).await.is_err() {
            return;
        }
    }
}

fn client(server: &Server, api: ApiType) -> ModelClient {
    let mut clients = server.clients.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c)) = clients.iter().find(|(a, _)| *a == api) {
        return c.clone();
    }
    let endpoint = ModelEndpoint {
        api_type: api,
        base_url: server.base_url.clone(),
        model: "fuzz-model".into(),
        api_key: Secret::new("fuzz-key"),
    };
    let options = ModelOptions {
        max_output_tokens: 64,
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        max_retries: 0,
        max_backoff: Duration::from_millis(1),
    };
    let c =
        ModelClient::new(endpoint, None, options).unwrap_or_else(|e| panic!("model client: {e}"));
    clients.push((api, c.clone()));
    c
}

fn through_the_client(api: ApiType, data: &[u8]) {
    // The property is checked inside `stream`; the outcome is for the replay tests.
    let _ = stream(api, data);
}

/// Serves `data` as the response body and streams one turn from it; panics on a hang or
/// when a completed turn's text differs from its text deltas.
pub fn stream(api: ApiType, data: &[u8]) -> Result<ChatResponse, ModelError> {
    let server = server();
    *server.body.lock().unwrap_or_else(|p| p.into_inner()) = data.to_vec();
    let client = client(server, api);
    let request = ChatRequest {
        system: "fuzz".into(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: "hi".into() }],
        }],
        tools: vec![],
    };
    let cancel = CancellationToken::new();
    let mut text = String::new();
    let mut sink = |delta: StreamDelta| {
        if let StreamDelta::Text(t) = delta {
            text.push_str(&t);
        }
    };
    let outcome = server.runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            client.stream(&request, &cancel, &mut sink),
        )
        .await
    });
    let Ok(result) = outcome else {
        panic!("the model client hung on a complete response body");
    };
    if let Ok(response) = &result {
        assert_eq!(response.text, text, "the turn's text is its text deltas");
    }
    result
}
