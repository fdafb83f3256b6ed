//! The deprecated HTTP+SSE transport (2024-11-05): GET the URL for an SSE stream whose first
//! `endpoint` event names the POST URL (relative to the base); every server message then
//! arrives on that stream as a `message` event, and POSTs are only acknowledged. With an
//! [`OAuth`], the GET and every POST carry the bearer token (see `http.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use tokio::task::JoinHandle;
use url::Url;

use super::auth::{self, OAuth};
use super::headers::header_map;
use super::sse_body::{is_event_stream, is_message_event, SseBody};
use super::transport::{Inbound, InboundTx, Transport, TransportKind};
use crate::jsonrpc::Message;
use crate::Error;

/// How long the server has to name its POST endpoint.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct LegacySse {
    client: reqwest::Client,
    post_url: Url,
    headers: HeaderMap,
    reader: Mutex<Option<JoinHandle<()>>>,
    auth: Option<Arc<OAuth>>,
}

impl LegacySse {
    /// Opens the SSE stream and waits for the `endpoint` event.
    pub async fn connect(
        client: reqwest::Client,
        url: Url,
        headers: &[(String, String)],
        inbound: InboundTx,
        label: String,
        auth: Option<Arc<OAuth>>,
    ) -> Result<Self, Error> {
        let headers = header_map(headers)?;
        let build = || {
            client
                .get(url.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
        };
        let resp = auth::send(auth.as_ref(), build).await?;
        if !resp.status().is_success() {
            return Err(Error::HttpStatus {
                status: resp.status().as_u16(),
                rpc: None,
            });
        }
        if !is_event_stream(&resp) {
            return Err(Error::Protocol(
                "the server's GET reply is not an SSE stream (not an HTTP+SSE server)".into(),
            ));
        }
        let mut body = SseBody::new(resp);
        let post_url = tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint(&mut body, &url))
            .await
            .map_err(|_| Error::Protocol("the SSE stream sent no `endpoint` event".into()))??;
        let reader = tokio::spawn(read_stream(body, inbound, label));
        Ok(Self {
            client,
            post_url,
            headers,
            reader: Mutex::new(Some(reader)),
            auth,
        })
    }
}

#[async_trait]
impl Transport for LegacySse {
    fn kind(&self) -> TransportKind {
        TransportKind::Sse
    }

    fn auth_time(&self) -> Duration {
        self.auth
            .as_ref()
            .map(|a| a.busy_time())
            .unwrap_or_default()
    }

    async fn send(&self, msg: &Message) -> Result<(), Error> {
        let body = msg.to_line();
        let build = || {
            self.client
                .post(self.post_url.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
        };
        let resp = auth::send(self.auth.as_ref(), build).await?;
        if !resp.status().is_success() {
            return Err(Error::HttpStatus {
                status: resp.status().as_u16(),
                rpc: None,
            });
        }
        Ok(())
    }

    async fn close(&self) {
        if let Some(task) = self.reader.lock().ok().and_then(|mut r| r.take()) {
            task.abort();
        }
    }
}

/// Reads events until `endpoint`; the POST URL must stay on the server's origin (the
/// configured headers, possibly credentials, are sent there).
async fn endpoint(body: &mut SseBody, base: &Url) -> Result<Url, Error> {
    while let Some(ev) = body.next().await? {
        if ev.event.as_deref() != Some("endpoint") {
            continue;
        }
        let url = base
            .join(ev.data.trim())
            .map_err(|e| Error::Protocol(format!("invalid `endpoint` event: {e}")))?;
        if url.origin() != base.origin() {
            return Err(Error::Protocol(
                "the `endpoint` event points to another origin".into(),
            ));
        }
        return Ok(url);
    }
    Err(Error::Closed(
        "the SSE stream ended before the `endpoint` event".into(),
    ))
}

async fn read_stream(mut body: SseBody, inbound: InboundTx, label: String) {
    let reason = loop {
        match body.next().await {
            Ok(Some(ev)) if is_message_event(&ev) => match Message::parse(&ev.data) {
                Ok(msg) => {
                    if inbound.send(Inbound::Message(msg)).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::warn!(
                    server = %label, error = %e, "ignoring malformed sse message from mcp server"
                ),
            },
            Ok(Some(_)) => {}
            Ok(None) => break "the server closed the SSE stream".to_string(),
            Err(e) => break format!("the SSE stream broke: {e}"),
        }
    };
    tracing::debug!(server = %label, reason, "mcp sse stream ended");
    let _ = inbound.send(Inbound::Closed(reason)).await;
}
