//! The connection task: owns the WebSocket client and the open session's [`SessionView`],
//! executes the app's [`Command`]s and reports back as [`ConnEvent`]s.
//!
//! Reconnect rule (docs/design.md#client-reconnect): when the connection drops, reconnect
//! with backoff for up to 30 s; resubscribe with `session.resume` from the last applied
//! seq, backfill with `session.events` (the view drops whatever arrives twice), then resend
//! every mutation that had no answer under its original request id — the backend treats a
//! repeated id as the same request, so nothing runs twice. Commands issued meanwhile wait
//! in a queue.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use lumina_client::protocol::methods::{
    self, SessionCreateParams, SessionInfo, SessionSubmitParams, SessionSubmitResult,
};
use lumina_client::protocol::{ErrorCode, EventFrame};
use lumina_client::{
    catch_up, Client, ClientError, Notification, Notifications, Offer, SessionView,
};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::app::{Command, ConnEvent, Msg};
use crate::backend::Connected;
use crate::headless::title_from_prompt;

mod reconnect;
mod skills;
mod team;

/// Opens a new connection (local: finds or restarts the backend; remote: the URL).
pub type Connector =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = anyhow::Result<Connected>> + Send>> + Send + Sync>;

/// Timing of the reconnect loop; `Default` is the documented behaviour.
#[derive(Debug, Clone)]
pub struct Timing {
    /// How long to keep trying before giving up (30 s).
    pub window: Duration,
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// Budget of one connect attempt.
    pub attempt_timeout: Duration,
    /// Calls that take longer count as a dead connection.
    pub call_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(30),
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
            attempt_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// A request that changes something, kept until answered so it can be resent.
#[derive(Debug, Clone)]
struct Mutation {
    id: String,
    method: &'static str,
    params: Value,
    retried: bool,
}

struct Session {
    id: String,
    view: SessionView,
}

/// The connection dropped (the reason is for people).
struct Lost(String);

enum Flow {
    Continue,
    Quit,
}

struct Conn {
    connector: Connector,
    timing: Timing,
    project_root: String,
    events: UnboundedSender<Msg>,
    client: Client,
    notes: Notifications,
    connected: bool,
    server: String,
    session: Option<Session>,
    pending: Vec<Mutation>,
    queued: VecDeque<Command>,
}

/// Runs until [`Command::Quit`] or until the app drops its command sender.
pub async fn run(
    connector: Connector,
    first: Connected,
    timing: Timing,
    project_root: String,
    mut commands: UnboundedReceiver<Command>,
    events: UnboundedSender<Msg>,
) {
    let server = first.client.url().to_string();
    let mut conn = Conn {
        connector,
        project_root,
        events,
        client: first.client.with_call_timeout(timing.call_timeout),
        timing,
        notes: first.notifications,
        connected: true,
        server,
        session: None,
        pending: Vec::new(),
        queued: VecDeque::new(),
    };
    loop {
        if !conn.connected {
            if let Flow::Quit = conn.reconnect(&mut commands).await {
                return;
            }
            continue;
        }
        if let Some(command) = conn.queued.pop_front() {
            if let Flow::Quit = conn.handle(command).await {
                return;
            }
            continue;
        }
        tokio::select! {
            command = commands.recv() => {
                let command = command.unwrap_or(Command::Quit { interrupt: None });
                if let Flow::Quit = conn.handle(command).await {
                    return;
                }
            }
            note = conn.notes.recv() => conn.on_note(note).await,
        }
    }
}

impl Conn {
    fn send(&self, event: ConnEvent) {
        // The app only stops listening when it quits.
        let _ = self.events.send(Msg::Conn(event));
    }

    fn lost(&mut self, reason: String) {
        if self.connected {
            self.connected = false;
            self.send(ConnEvent::Lost { reason });
        }
    }

    /// Sorts a call's error: connection trouble (retry later) or a real answer.
    fn classify(error: ClientError) -> Result<ClientError, Lost> {
        match error {
            ClientError::Closed => Err(Lost("the connection closed".into())),
            ClientError::Timeout => Err(Lost("the backend stopped answering".into())),
            other => Ok(other),
        }
    }

    async fn handle(&mut self, command: Command) -> Flow {
        let outcome = match command.clone() {
            Command::Submit {
                request_id,
                prompt,
                settings,
            } => self.submit(request_id, &prompt, settings).await,
            Command::Interrupt { run_id } => match &self.session {
                Some(session) => {
                    let params = methods::SessionInterruptParams {
                        session_id: session.id.clone(),
                        run_id,
                    };
                    self.mutate(methods::SESSION_INTERRUPT, new_id(), to_value(&params))
                        .await
                }
                None => Ok(()),
            },
            Command::Respond {
                request_id,
                decision,
                reason,
            } => match &self.session {
                Some(session) => {
                    let params = methods::PermissionRespondParams {
                        session_id: session.id.clone(),
                        request_id,
                        decision,
                        reason,
                    };
                    self.mutate(methods::PERMISSION_RESPOND, new_id(), to_value(&params))
                        .await
                }
                None => Ok(()),
            },
            Command::ListSessions => match self.client.session_list(false).await {
                Ok(list) => {
                    self.send(ConnEvent::Sessions(list));
                    Ok(())
                }
                Err(error) => Self::classify(error)
                    .map(|error| self.failed(None, format!("cannot list the sessions: {error}"))),
            },
            Command::McpStatus => match &self.session {
                Some(session) => match self.client.mcp_status(&session.id).await {
                    Ok(status) => {
                        self.send(ConnEvent::Mcp(status.servers));
                        Ok(())
                    }
                    Err(error) => Self::classify(error)
                        .map(|error| self.failed(None, format!("/mcp failed: {error}"))),
                },
                None => Ok(()),
            },
            Command::McpTrust(name) => match &self.session {
                Some(session) => match self.client.mcp_trust(&session.id, &name).await {
                    Ok(_) => {
                        self.send(ConnEvent::Notice(format!(
                            "trusted the MCP server `{name}`: its tools are offered from the next prompt on"
                        )));
                        Ok(())
                    }
                    Err(error) => Self::classify(error)
                        .map(|error| self.failed(None, format!("/mcp trust failed: {error}"))),
                },
                None => Ok(()),
            },
            Command::RetryDelegate { call_id } => {
                self.retry_delegate(call_id);
                Ok(())
            }
            Command::ListSkills => self.skill_list().await,
            Command::TeamList => self.team_list().await,
            Command::TeamEnter { team, task } => self.team_enter(&team, task).await,
            Command::TeamExit => self.team_exit().await,
            Command::TeamCreate { name, display_name } => {
                self.team_create(&name, &display_name).await
            }
            Command::Open(id) => self.open(&id).await,
            Command::NewSession => {
                self.session = None;
                Ok(())
            }
            Command::Reconnect => Ok(()),
            Command::Quit { interrupt } => {
                self.quit(interrupt).await;
                return Flow::Quit;
            }
        };
        if let Err(Lost(reason)) = outcome {
            // Not sent (or not answered): do it after the reconnect. Mutations already
            // pending are resent by `after_connect`, so only the others are queued.
            let pending = matches!(&command, Command::Submit { request_id, .. }
                if self.pending.iter().any(|m| m.id == *request_id));
            if !pending && !matches!(command, Command::Interrupt { .. } | Command::Respond { .. }) {
                self.queued.push_front(command);
            }
            self.lost(reason);
        }
        Flow::Continue
    }

    fn failed(&self, request_id: Option<String>, message: String) {
        self.send(ConnEvent::Failed {
            request_id,
            message,
        });
    }

    async fn submit(
        &mut self,
        request_id: String,
        prompt: &str,
        settings: Value,
    ) -> Result<(), Lost> {
        if self.session.is_none() {
            let params = SessionCreateParams {
                project_root: Some(self.project_root.clone()),
                title: Some(title_from_prompt(prompt)),
            };
            match self.client.session_create(&params).await {
                Ok(info) => self.subscribe(info).await?,
                Err(error) => {
                    let error = Self::classify(error)?;
                    self.failed(
                        Some(request_id),
                        format!("cannot create a session: {error}"),
                    );
                    return Ok(());
                }
            }
        }
        let Some(session) = &self.session else {
            return Ok(());
        };
        let params = SessionSubmitParams {
            session_id: session.id.clone(),
            idempotency_key: request_id.clone(),
            prompt: prompt.to_string(),
            settings,
            headless: false,
            mode: None,
        };
        self.mutate(methods::SESSION_SUBMIT, request_id, to_value(&params))
            .await
    }

    /// Sends a mutation and keeps it pending until it has an answer.
    async fn mutate(
        &mut self,
        method: &'static str,
        id: String,
        params: Value,
    ) -> Result<(), Lost> {
        let mutation = Mutation {
            id,
            method,
            params,
            retried: false,
        };
        self.pending.push(mutation.clone());
        self.execute(mutation).await
    }

    async fn execute(&mut self, mutation: Mutation) -> Result<(), Lost> {
        let result = self
            .client
            .call_raw(
                mutation.id.clone(),
                mutation.method,
                mutation.params.clone(),
            )
            .await;
        let result = match result {
            Ok(value) => Ok(value),
            Err(error) => Err(Self::classify(error)?),
        };
        self.pending.retain(|m| m.id != mutation.id);
        let is_submit = mutation.method == methods::SESSION_SUBMIT;
        match result {
            Ok(value) if is_submit => match serde_json::from_value::<SessionSubmitResult>(value) {
                Ok(result) => self.send(ConnEvent::Submitted {
                    request_id: mutation.id,
                    run_id: result.run_id,
                }),
                Err(error) => self.failed(
                    Some(mutation.id),
                    format!("unexpected answer to session.submit: {error}"),
                ),
            },
            Ok(_) => {}
            // A resent answer or interrupt whose subject is already settled: the events say
            // how it ended.
            Err(ClientError::Server(error))
                if mutation.retried
                    && !is_submit
                    && matches!(error.code, ErrorCode::NotFound | ErrorCode::Conflict) => {}
            Err(error) => {
                let what = match mutation.method {
                    methods::SESSION_SUBMIT => "the prompt was not accepted",
                    methods::PERMISSION_RESPOND => "the answer was not accepted",
                    _ => "the interrupt failed",
                };
                self.failed(is_submit.then_some(mutation.id), format!("{what}: {error}"));
            }
        }
        Ok(())
    }

    async fn open(&mut self, id: &str) -> Result<(), Lost> {
        match self.client.session_info(id).await {
            Ok(info) => self.subscribe(info.session).await,
            Err(ClientError::Server(error)) if error.code == ErrorCode::NotFound => {
                self.failed(None, format!("no session {id} (see /sessions)"));
                Ok(())
            }
            Err(error) => {
                let error = Self::classify(error)?;
                self.failed(None, format!("cannot open session {id}: {error}"));
                Ok(())
            }
        }
    }

    /// Subscribes to `info` from its start: the app rebuilds the transcript from seq 1.
    async fn subscribe(&mut self, info: SessionInfo) -> Result<(), Lost> {
        match self.client.session_resume(&info.id, 0).await {
            Ok(result) => {
                self.session = Some(Session {
                    id: info.id.clone(),
                    view: SessionView::new(0),
                });
                self.send(ConnEvent::Opened {
                    session: result.session,
                    pending_permissions: result.pending_permissions,
                });
                Ok(())
            }
            Err(error) => {
                let error = Self::classify(error)?;
                self.failed(None, format!("cannot open session {}: {error}", info.id));
                Ok(())
            }
        }
    }

    async fn on_note(&mut self, note: Option<Notification>) {
        match note {
            Some(Notification::Event(frame)) => {
                let Some(session) = &mut self.session else {
                    return;
                };
                if frame.session_id != session.id {
                    return;
                }
                let ready: Vec<EventFrame> = match session.view.offer(frame) {
                    Offer::Ready(frames) => frames,
                    Offer::Duplicate => return,
                    Offer::Gap { .. } => {
                        match catch_up(&self.client, &session.id, &mut session.view).await {
                            Ok(frames) => frames,
                            Err(error) => {
                                match Self::classify(error) {
                                    Ok(error) => self.send(ConnEvent::Notice(format!(
                                        "cannot fetch missed events: {error}"
                                    ))),
                                    Err(Lost(reason)) => self.lost(reason),
                                }
                                return;
                            }
                        }
                    }
                };
                if !ready.is_empty() {
                    self.send(ConnEvent::Events(ready));
                }
            }
            Some(Notification::Delta(delta)) => {
                if self
                    .session
                    .as_ref()
                    .is_some_and(|s| s.id == delta.session_id)
                {
                    self.send(ConnEvent::Delta(delta));
                }
            }
            Some(Notification::ProtocolError(error)) => self.send(ConnEvent::Notice(format!(
                "the backend reported a protocol error: {error}"
            ))),
            Some(Notification::Closed(reason)) => self.lost(reason),
            None => self.lost("the connection closed".into()),
        }
    }

    /// `delegate.retry` in a task of its own: the answer may take the backend's retry wait
    /// (about 15 s), and events must keep flowing meanwhile (the retry journals steps).
    fn retry_delegate(&self, call_id: String) {
        let Some(session) = &self.session else {
            return;
        };
        let params = methods::DelegateRetryParams {
            session_id: session.id.clone(),
            call_id: call_id.clone(),
        };
        let client = self.client.clone();
        let events = self.events.clone();
        tokio::spawn(async move {
            let event = match client.calls().delegate_retry(&params).await {
                Ok(result) => ConnEvent::DelegateRetried { call_id, result },
                Err(error) => ConnEvent::DelegateRetryFailed {
                    call_id,
                    message: error.to_string(),
                },
            };
            let _ = events.send(Msg::Conn(event));
        });
    }

    async fn quit(&mut self, interrupt: Option<String>) {
        if let (true, Some(run_id), Some(session)) = (self.connected, interrupt, &self.session) {
            // Leaving must not leave an agent running (and asking questions) unattended.
            let _ = self
                .client
                .with_call_timeout(Duration::from_secs(3))
                .session_interrupt(&session.id, Some(&run_id))
                .await;
        }
        self.client.close();
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn to_value<T: serde::Serialize>(params: &T) -> Value {
    serde_json::to_value(params).unwrap_or(Value::Null)
}
