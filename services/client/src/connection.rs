//! The connection: authenticated upgrade, the socket task, request/response routing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lumina_protocol::{ClientFrame, DeltaFrame, ErrorObject, EventFrame, ServerFrame};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::http::{header::AUTHORIZATION, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::{debug, warn};

use crate::{ClientError, Result};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Reply = oneshot::Sender<Result<Value>>;

/// How long the socket task waits for the server's close frame after sending its own.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Something the server pushed that is not the answer to a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// A durable event of a subscribed session.
    Event(EventFrame),
    /// Ephemeral streamed text.
    Delta(DeltaFrame),
    /// An error frame with a null id (the server could not read a request's id).
    ProtocolError(ErrorObject),
    /// The connection ended; the reason is for people. Always the last notification.
    Closed(String),
}

/// The receiving end of a connection's notifications. Unbounded on purpose: the socket task
/// must never block on a slow consumer, or responses behind a burst of events would stall
/// and a caller awaiting a call before draining notifications would deadlock.
pub type Notifications = mpsc::UnboundedReceiver<Notification>;

/// Connection options; `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Default time a call waits for its response (60 s).
    pub call_timeout: Duration,
    /// Time allowed for TCP connect plus the HTTP upgrade (10 s).
    pub connect_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A connected client. Cheap to clone; all clones share the connection, which is closed
/// when the last clone is dropped (or by [`Client::close`]).
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    call_timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.shared.url)
            .field("call_timeout", &self.call_timeout)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Owned by the clients only: dropping the last one drops `outgoing`, which tells the socket
/// task to close the connection.
struct Shared {
    url: String,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    state: Arc<State>,
}

enum Outgoing {
    Text(String),
    Close,
}

/// Shared between the clients and the socket task.
struct State {
    /// `None` once the connection is closed: nothing can wait on a dead connection.
    pending: Mutex<Option<HashMap<String, Reply>>>,
    notifications: mpsc::UnboundedSender<Notification>,
}

impl State {
    fn pending(&self) -> MutexGuard<'_, Option<HashMap<String, Reply>>> {
        // A poisoned map is still a valid map: every critical section is a single insert,
        // remove or take.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self, notification: Notification) {
        // A dropped receiver only means nobody is interested.
        let _ = self.notifications.send(notification);
    }

    fn complete(&self, id: &str, outcome: Result<Value>) -> bool {
        let reply = self.pending().as_mut().and_then(|map| map.remove(id));
        match reply {
            Some(reply) => {
                let _ = reply.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Fails every waiting call with `Closed` (by dropping its sender) and announces the end.
    fn shut_down(&self, reason: String) {
        let waiting = self.pending().take();
        if let Some(waiting) = waiting {
            debug!(waiting = waiting.len(), %reason, "connection closed");
            drop(waiting);
            self.notify(Notification::Closed(reason));
        }
    }

    fn dispatch(&self, text: &str) {
        match serde_json::from_str::<ServerFrame>(text) {
            Ok(ServerFrame::Response { id, result }) => {
                if !self.complete(&id, Ok(result)) {
                    debug!(%id, "response for a call nobody waits for (timed out or cancelled)");
                }
            }
            Ok(ServerFrame::Error {
                id: Some(id),
                error,
            }) => {
                if !self.complete(&id, Err(ClientError::Server(error))) {
                    debug!(%id, "error for a call nobody waits for (timed out or cancelled)");
                }
            }
            Ok(ServerFrame::Error { id: None, error }) => {
                self.notify(Notification::ProtocolError(error))
            }
            Ok(ServerFrame::Event(frame)) => self.notify(Notification::Event(frame)),
            Ok(ServerFrame::Delta(frame)) => self.notify(Notification::Delta(frame)),
            Err(error) => self.dispatch_undecodable(text, error),
        }
    }

    /// A frame that is not a valid `ServerFrame`. If it names a waiting call, fail that call
    /// rather than letting it run into its timeout.
    fn dispatch_undecodable(&self, text: &str, error: serde_json::Error) {
        let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let Some(id) = value.get("id").and_then(Value::as_str) else {
            warn!(%error, "ignoring an undecodable frame from the server");
            return;
        };
        // docs/design.md#protocol writes responses without the `type` tag; accept that too.
        let outcome = if value.get("type").is_none() {
            if let Some(result) = value.get("result") {
                Ok(result.clone())
            } else if let Some(Ok(error)) = value
                .get("error")
                .map(|e| serde_json::from_value::<ErrorObject>(e.clone()))
            {
                Err(ClientError::Server(error))
            } else {
                Err(ClientError::Decode(format!("malformed response: {error}")))
            }
        } else {
            Err(ClientError::Decode(format!("malformed response: {error}")))
        };
        if !self.complete(id, outcome) {
            warn!(%error, %id, "ignoring an undecodable frame from the server");
        }
    }
}

/// Removes the pending entry when a call ends for any reason (answer, timeout, cancellation).
struct PendingCall {
    state: Arc<State>,
    id: String,
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if let Some(map) = self.state.pending().as_mut() {
            map.remove(&self.id);
        }
    }
}

impl Client {
    /// Connects to `url` (`ws://host:port/v1/ws`), sending `Authorization: Bearer <bearer>`
    /// when given. Returns the client and the receiver of pushed notifications.
    pub async fn connect(url: &str, bearer: Option<&str>) -> Result<(Client, Notifications)> {
        Self::connect_with(url, bearer, ConnectOptions::default()).await
    }

    /// [`Client::connect`] with explicit options.
    pub async fn connect_with(
        url: &str,
        bearer: Option<&str>,
        options: ConnectOptions,
    ) -> Result<(Client, Notifications)> {
        let shown = display_url(url);
        // Without a TLS stack tungstenite would open the TCP connection before noticing.
        if url
            .get(..6)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("wss://"))
        {
            return Err(connect_error(
                &shown,
                bearer.is_some(),
                WsError::Url(UrlError::TlsFeatureNotEnabled),
            ));
        }
        let mut request = url
            .into_client_request()
            .map_err(|error| connect_error(&shown, bearer.is_some(), error))?;
        if let Some(token) = bearer {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ClientError::Connect(
                    "the bearer token contains characters that cannot be sent in an HTTP header"
                        .into(),
                )
            })?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let connecting = tokio_tungstenite::connect_async_with_config(request, None, true);
        let (socket, _response) = tokio::time::timeout(options.connect_timeout, connecting)
            .await
            .map_err(|_| {
                ClientError::Connect(format!(
                    "timed out after {:?} connecting to {shown}",
                    options.connect_timeout
                ))
            })?
            .map_err(|error| connect_error(&shown, bearer.is_some(), error))?;

        let (notify_tx, notify_rx) = mpsc::unbounded_channel();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            pending: Mutex::new(Some(HashMap::new())),
            notifications: notify_tx,
        });
        tokio::spawn(run_socket(socket, out_rx, Arc::clone(&state)));
        debug!(url = %shown, "connected");
        let client = Client {
            shared: Arc::new(Shared {
                url: shown,
                outgoing: out_tx,
                state,
            }),
            call_timeout: options.call_timeout,
        };
        Ok((client, notify_rx))
    }

    /// The server URL (without credentials or query), for messages.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// The timeout applied to each call made through this handle.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// A handle on the same connection whose calls use `timeout`.
    pub fn with_call_timeout(&self, timeout: Duration) -> Client {
        Client {
            shared: Arc::clone(&self.shared),
            call_timeout: timeout,
        }
    }

    /// True once the connection has ended; every further call fails with `Closed`.
    pub fn is_closed(&self) -> bool {
        self.shared.state.pending().is_none()
    }

    /// Starts a clean close of the connection. Calls in flight fail with `Closed`.
    pub fn close(&self) {
        let _ = self.shared.outgoing.send(Outgoing::Close);
    }

    /// Sends `method` with `params` under the request id `id` and waits for the result.
    /// Reusing the id of an earlier mutation after a reconnect makes the retry idempotent.
    pub async fn call_raw(&self, id: String, method: &str, params: Value) -> Result<Value> {
        let (reply_tx, reply_rx) = oneshot::channel();
        {
            let mut pending = self.shared.state.pending();
            let Some(map) = pending.as_mut() else {
                return Err(ClientError::Closed);
            };
            if map.contains_key(&id) {
                return Err(ClientError::InvalidRequest(format!(
                    "a call with id {id} is already in flight"
                )));
            }
            map.insert(id.clone(), reply_tx);
        }
        let guard = PendingCall {
            state: Arc::clone(&self.shared.state),
            id,
        };
        let frame = ClientFrame {
            id: guard.id.clone(),
            method: method.to_string(),
            params,
        };
        let text = serde_json::to_string(&frame)
            .map_err(|error| ClientError::InvalidRequest(error.to_string()))?;
        self.shared
            .outgoing
            .send(Outgoing::Text(text))
            .map_err(|_| ClientError::Closed)?;
        let outcome = match tokio::time::timeout(self.call_timeout, reply_rx).await {
            Err(_) => Err(ClientError::Timeout),
            Ok(Err(_)) => Err(ClientError::Closed),
            Ok(Ok(outcome)) => outcome,
        };
        drop(guard);
        outcome
    }

    /// A typed call under a fresh UUID v4 request id.
    pub async fn call<P, R>(&self, method: &str, params: P) -> Result<R>
    where
        P: Serialize,
        R: DeserializeOwned,
    {
        self.call_with_id(uuid::Uuid::new_v4().to_string(), method, params)
            .await
    }

    /// A typed call under an explicit request id (see [`Client::call_raw`]).
    pub async fn call_with_id<P, R>(&self, id: String, method: &str, params: P) -> Result<R>
    where
        P: Serialize,
        R: DeserializeOwned,
    {
        let params = serde_json::to_value(params)
            .map_err(|error| ClientError::InvalidRequest(error.to_string()))?;
        let result = self.call_raw(id, method, params).await?;
        serde_json::from_value(result)
            .map_err(|error| ClientError::Decode(format!("result of {method}: {error}")))
    }
}

/// The socket task: the only owner of the WebSocket.
async fn run_socket(
    mut socket: Socket,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
    state: Arc<State>,
) {
    let reason = loop {
        tokio::select! {
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Text(text))) => state.dispatch(text.as_str()),
                Some(Ok(Message::Binary(_))) => warn!("ignoring a binary frame from the server"),
                Some(Ok(Message::Close(frame))) => {
                    break match frame {
                        Some(frame) if !frame.reason.is_empty() => {
                            format!("closed by the server: {}", frame.reason.as_str())
                        }
                        Some(frame) => format!("closed by the server (code {})", frame.code),
                        None => "closed by the server".to_string(),
                    };
                }
                // Pings are answered by tungstenite itself.
                Some(Ok(_)) => {}
                Some(Err(error)) => break format!("connection lost: {error}"),
                None => break "connection closed".to_string(),
            },
            out = outgoing.recv() => match out {
                Some(Outgoing::Text(text)) => {
                    if let Err(error) = socket.send(Message::text(text)).await {
                        break format!("connection lost: {error}");
                    }
                }
                Some(Outgoing::Close) | None => {
                    // Fail the waiting calls now; then finish the close handshake politely.
                    state.shut_down("closed by the client".to_string());
                    let _ = tokio::time::timeout(CLOSE_GRACE, async {
                        let _ = socket.close(None).await;
                        while let Some(Ok(_)) = socket.next().await {}
                    })
                    .await;
                    break "closed by the client".to_string();
                }
            },
        }
    };
    state.shut_down(reason);
}

/// `url` without user info and query string, so that credentials never reach a message.
pub(crate) fn display_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or(url);
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(slash) => rest.split_at(slash),
                None => (rest, ""),
            };
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => without_query.to_string(),
    }
}

fn connect_error(shown: &str, sent_token: bool, error: WsError) -> ClientError {
    match error {
        WsError::Http(response) if response.status() == StatusCode::UNAUTHORIZED => {
            let detail = response
                .body()
                .as_deref()
                .and_then(|body| std::str::from_utf8(body).ok())
                .map(str::trim)
                .filter(|body| !body.is_empty() && body.len() <= 200)
                .map(|body| format!(": {body}"))
                .unwrap_or_default();
            let hint = if sent_token {
                "the bearer token was rejected"
            } else {
                "no bearer token was sent"
            };
            ClientError::Unauthorized(format!(
                "{shown} refused the connection (HTTP 401 Unauthorized; {hint}){detail}"
            ))
        }
        WsError::Http(response) => ClientError::Connect(format!(
            "{shown} refused the WebSocket upgrade (HTTP {})",
            response.status()
        )),
        WsError::Url(UrlError::TlsFeatureNotEnabled) => ClientError::Connect(format!(
            "cannot connect to {shown}: wss:// needs TLS, which this build does not include; use ws://"
        )),
        WsError::Url(error) => ClientError::Connect(format!("invalid server URL {shown}: {error}")),
        WsError::Io(error) => ClientError::Connect(format!("cannot connect to {shown}: {error}")),
        error => ClientError::Connect(format!("cannot connect to {shown}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_url_strips_credentials_and_query() {
        assert_eq!(
            display_url("ws://user:secret@127.0.0.1:9/v1/ws?token=abc"),
            "ws://127.0.0.1:9/v1/ws"
        );
        assert_eq!(display_url("ws://host:1"), "ws://host:1");
        assert_eq!(display_url("not a url"), "not a url");
    }
}
