//! The protocol core, shared by every transport: one request in, one response out (or none
//! when the client cancelled it), notifications and the client's answers routed to the
//! session.

use std::sync::Arc;
use std::time::Duration;

use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Id, Message};
use lumina_mcp_proto::version;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::context::{AuthValue, ContextParts, LogFilter, Outlet, RequestContext};
use crate::handler::Handler;
use crate::session::{Negotiated, Session};
use crate::stateless::{self, Era};
use crate::types::{Features, Implementation, LogLevel};

/// How long a cancelled request's handler may take to wind down (it sees the token) before
/// its future is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

pub(crate) struct Core {
    handler: Arc<dyn Handler>,
    features: Features,
    info: Implementation,
}

/// Forwards notifications but refuses server→client requests (stateless revision).
struct NoRequests(Arc<dyn Outlet>);

impl Outlet for NoRequests {
    fn send(&self, message: Message) {
        self.0.send(message)
    }
    fn close_stream(&self) {
        self.0.close_stream()
    }
    fn can_request(&self) -> bool {
        false
    }
}

impl Core {
    pub(crate) fn new(handler: Arc<dyn Handler>) -> Arc<Self> {
        let features = handler.features();
        let info = handler.server_info();
        Arc::new(Self {
            handler,
            features,
            info,
        })
    }

    /// Whether this server answers `method` (in the stateless revision when `stateless`).
    pub(crate) fn knows(&self, method: &str, stateless: bool) -> bool {
        let f = self.features;
        let shared = match method {
            "server/discover" => true,
            "tools/list" | "tools/call" => f.tools,
            "resources/list" | "resources/templates/list" | "resources/read" => f.resources,
            "prompts/list" | "prompts/get" => f.prompts,
            "completion/complete" => f.completions,
            _ => false,
        };
        shared
            || (!stateless
                && match method {
                    "initialize" | "ping" => true,
                    "logging/setLevel" => f.logging,
                    "resources/subscribe" | "resources/unsubscribe" => f.resource_subscriptions,
                    _ => false,
                })
    }

    /// Serves one request. `None` when it was cancelled: no response is sent then.
    pub(crate) async fn request(
        &self,
        session: &Arc<Session>,
        id: Id,
        method: &str,
        params: Option<Value>,
        outlet: Arc<dyn Outlet>,
        auth: Option<AuthValue>,
    ) -> Option<Message> {
        tracing::debug!(%id, method, "mcp request");
        let era = stateless::era(params.as_ref());
        if let Era::Unsupported(requested) = &era {
            session.end(&id);
            return Some(error(id, stateless::unsupported_version(requested)));
        }
        let cancel = session.begin(&id);
        let ctx = match era {
            Era::Stateless => {
                let meta = stateless::request_meta(params.as_ref());
                RequestContext::new(ContextParts {
                    request_id: id.clone(),
                    progress_token: progress_token(params.as_ref()),
                    cancel: cancel.clone(),
                    outlet: Arc::new(NoRequests(outlet)),
                    peer: session.peer.clone(),
                    log_filter: LogFilter::Request(meta.log_level),
                    client_capabilities: meta.client_capabilities,
                    client_info: meta.client_info,
                    protocol_version: version::STATELESS.to_string(),
                    stateless: true,
                    auth,
                })
            }
            _ => {
                let negotiated = session.negotiated().unwrap_or_default();
                RequestContext::new(ContextParts {
                    request_id: id.clone(),
                    progress_token: progress_token(params.as_ref()),
                    cancel: cancel.clone(),
                    outlet,
                    peer: session.peer.clone(),
                    log_filter: LogFilter::Session(session.log_level.clone()),
                    client_capabilities: negotiated.client_capabilities,
                    client_info: negotiated.client_info,
                    protocol_version: negotiated.protocol_version,
                    stateless: false,
                    auth,
                })
            }
        };
        let work = self.serve(session, method, params, ctx);
        tokio::pin!(work);
        let outcome = tokio::select! {
            outcome = &mut work => Some(outcome),
            _ = cancel.cancelled() => None,
        };
        let outcome = match outcome {
            Some(outcome) => Some(outcome),
            None => tokio::time::timeout(CANCEL_GRACE, &mut work).await.ok(),
        };
        session.end(&id);
        if cancel.is_cancelled() {
            tracing::debug!(%id, method, "request cancelled; no response");
            return None;
        }
        Some(match outcome {
            Some(Ok(result)) => Message::Response { id, result },
            Some(Err(e)) => error(id, e),
            None => error(id, ErrorObject::new(code::INTERNAL_ERROR, "no result")),
        })
    }

    async fn serve(
        &self,
        session: &Session,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        if method == "server/discover" {
            let result =
                stateless::discover(self.features.capabilities(), self.handler.instructions());
            return Ok(stateless::decorate(method, result, &self.info));
        }
        if ctx.is_stateless() {
            if stateless::is_removed(method) {
                return Err(method_not_found(method));
            }
            let result = self.invoke(method, params.as_ref(), &ctx).await?;
            return Ok(stateless::decorate(method, result, &self.info));
        }
        match method {
            "initialize" => Ok(self.initialize(session, params.as_ref())),
            "ping" => Ok(json!({})),
            _ if session.negotiated().is_none() => Err(ErrorObject::new(
                code::INVALID_REQUEST,
                "the session is not initialized: send initialize first",
            )),
            "logging/setLevel" if self.features.logging => {
                let level = params
                    .as_ref()
                    .and_then(|p| p.get("level"))
                    .and_then(LogLevel::parse)
                    .ok_or_else(|| invalid_params("`level` must be a log level"))?;
                *session
                    .log_level
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(level);
                Ok(json!({}))
            }
            "resources/subscribe" if self.features.resource_subscriptions => {
                let uri = str_param(params.as_ref(), "uri")?;
                self.handler.subscribe(uri, &ctx).await?;
                Ok(json!({}))
            }
            "resources/unsubscribe" if self.features.resource_subscriptions => {
                let uri = str_param(params.as_ref(), "uri")?;
                self.handler.unsubscribe(uri, &ctx).await?;
                Ok(json!({}))
            }
            _ => self.invoke(method, params.as_ref(), &ctx).await,
        }
    }

    fn initialize(&self, session: &Session, params: Option<&Value>) -> Value {
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Answer the client's revision when we speak it, else our latest handshake one.
        let protocol_version = if version::is_handshake(requested) {
            requested
        } else {
            version::LATEST_HANDSHAKE
        };
        session.set_negotiated(Negotiated {
            protocol_version: protocol_version.to_string(),
            client_capabilities: params
                .and_then(|p| p.get("capabilities"))
                .cloned()
                .unwrap_or_else(|| json!({})),
            client_info: params.and_then(|p| p.get("clientInfo")).cloned(),
        });
        tracing::info!(protocol_version, requested, "mcp session initialized");
        let mut result = json!({
            "protocolVersion": protocol_version,
            "capabilities": self.features.capabilities(),
            "serverInfo": self.info,
        });
        if let (Some(text), Some(map)) = (self.handler.instructions(), result.as_object_mut()) {
            map.insert("instructions".into(), Value::from(text));
        }
        result
    }

    /// The feature methods both revisions share.
    async fn invoke(
        &self,
        method: &str,
        params: Option<&Value>,
        ctx: &RequestContext,
    ) -> Result<Value, ErrorObject> {
        let f = self.features;
        let h = &self.handler;
        match method {
            "tools/list" if f.tools => to_value(json!({ "tools": h.list_tools(ctx).await? })),
            "tools/call" if f.tools => {
                let name = str_param(params, "name")?;
                let arguments = object_param(params, "arguments")?;
                let tools = h.list_tools(ctx).await?;
                if !tools.iter().any(|tool| tool.name == name) {
                    return Err(invalid_params(&format!("unknown tool: {name}")));
                }
                to_value(h.call_tool(name, arguments, ctx.clone()).await?)
            }
            "resources/list" if f.resources => {
                to_value(json!({ "resources": h.list_resources(ctx).await? }))
            }
            "resources/templates/list" if f.resources => {
                to_value(json!({ "resourceTemplates": h.list_resource_templates(ctx).await? }))
            }
            "resources/read" if f.resources => {
                let uri = str_param(params, "uri")?;
                to_value(json!({ "contents": h.read_resource(uri, ctx).await? }))
            }
            "prompts/list" if f.prompts => {
                to_value(json!({ "prompts": h.list_prompts(ctx).await? }))
            }
            "prompts/get" if f.prompts => {
                let name = str_param(params, "name")?;
                let arguments = object_param(params, "arguments")?;
                to_value(h.get_prompt(name, arguments, ctx).await?)
            }
            "completion/complete" if f.completions => {
                let reference = params
                    .and_then(|p| p.get("ref"))
                    .ok_or_else(|| invalid_params("missing `ref`"))?;
                let argument = params
                    .and_then(|p| p.get("argument"))
                    .ok_or_else(|| invalid_params("missing `argument`"))?;
                let context = params.and_then(|p| p.get("context"));
                let completion = h.complete(reference, argument, context, ctx).await?;
                to_value(json!({ "completion": completion }))
            }
            _ => Err(method_not_found(method)),
        }
    }

    /// A client notification.
    pub(crate) async fn notification(
        &self,
        session: &Session,
        method: &str,
        params: Option<&Value>,
    ) {
        match method {
            "notifications/initialized" => tracing::debug!("client initialized"),
            "notifications/cancelled" => {
                let id = params
                    .and_then(|p| p.get("requestId"))
                    .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok());
                if let Some(id) = id {
                    let running = session.cancel(&id);
                    tracing::debug!(%id, running, "client cancelled a request");
                }
            }
            _ => self.handler.on_notification(method, params).await,
        }
    }

    /// The client's answer to a server→client request.
    pub(crate) fn response(&self, session: &Session, id: &Id, outcome: Result<Value, ErrorObject>) {
        if !session.peer.complete(id, outcome) {
            tracing::debug!(%id, "response to no pending request (late or unknown)");
        }
    }
}

fn error(id: Id, error: ErrorObject) -> Message {
    Message::Error {
        id: Some(id),
        error,
    }
}

pub(crate) fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(
        code::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
    )
}

fn invalid_params(message: &str) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, message)
}

fn to_value(value: impl Serialize) -> Result<Value, ErrorObject> {
    serde_json::to_value(value)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, format!("unserializable result: {e}")))
}

fn str_param<'a>(params: Option<&'a Value>, key: &str) -> Result<&'a str, ErrorObject> {
    params
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params(&format!("`{key}` must be a string")))
}

fn object_param(params: Option<&Value>, key: &str) -> Result<Map<String, Value>, ErrorObject> {
    match params.and_then(|p| p.get(key)) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(invalid_params(&format!("`{key}` must be an object"))),
    }
}

fn progress_token(params: Option<&Value>) -> Option<Value> {
    stateless::meta(params)?
        .get("progressToken")
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}
