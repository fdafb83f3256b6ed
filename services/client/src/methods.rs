//! Typed helpers, one per method of `lumina_protocol::methods`.

use lumina_protocol::methods::{
    self, Ack, GoalRef, GoalResult, GoalResumeParams, GoalStartParams, HelloParams, HelloResult,
    McpStatusResult, McpTrustParams, PermissionRespondParams, SessionCreateParams,
    SessionEventsParams, SessionEventsResult, SessionInfo, SessionInfoResult,
    SessionInterruptParams, SessionInterruptResult, SessionListParams, SessionListResult,
    SessionRef, SessionResult, SessionResumeParams, SessionResumeResult, SessionSubmitParams,
    SessionSubmitResult,
};
use lumina_protocol::{Decision, PROTOCOL_VERSION};
use serde_json::Value;

use crate::{Client, Result};

impl Client {
    /// Version negotiation; offers [`PROTOCOL_VERSION`] and names this client.
    pub async fn hello(&self, client_name: &str) -> Result<HelloResult> {
        let params = HelloParams {
            protocols: vec![PROTOCOL_VERSION],
            client: Some(client_name.to_string()),
        };
        self.call(methods::HELLO, params).await
    }

    pub async fn session_create(&self, params: &SessionCreateParams) -> Result<SessionInfo> {
        let result: SessionResult = self.call(methods::SESSION_CREATE, params).await?;
        Ok(result.session)
    }

    pub async fn session_list(&self, include_archived: bool) -> Result<Vec<SessionInfo>> {
        let result: SessionListResult = self
            .call(
                methods::SESSION_LIST,
                SessionListParams { include_archived },
            )
            .await?;
        Ok(result.sessions)
    }

    pub async fn session_info(&self, session_id: &str) -> Result<SessionInfoResult> {
        self.call(methods::SESSION_INFO, session_ref(session_id))
            .await
    }

    /// Subscribes this connection to the session's events with `seq > after_seq`.
    pub async fn session_resume(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> Result<SessionResumeResult> {
        let params = SessionResumeParams {
            session_id: session_id.to_string(),
            after_seq,
        };
        self.call(methods::SESSION_RESUME, params).await
    }

    /// One page of durable events after `after_seq` (`limit` defaults to the server's 500).
    pub async fn session_events(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: Option<u32>,
    ) -> Result<SessionEventsResult> {
        let params = SessionEventsParams {
            session_id: session_id.to_string(),
            after_seq,
            limit,
        };
        self.call(methods::SESSION_EVENTS, params).await
    }

    /// Starts a run. Retrying with the same `idempotency_key` returns the original run.
    pub async fn session_submit(
        &self,
        params: &SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        self.call(methods::SESSION_SUBMIT, params).await
    }

    /// [`Client::session_submit`] under an explicit request id, for a retry after a reconnect.
    pub async fn session_submit_with_id(
        &self,
        request_id: String,
        params: &SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        self.call_with_id(request_id, methods::SESSION_SUBMIT, params)
            .await
    }

    /// Interrupts `run_id`, or whatever run is active when `None`.
    pub async fn session_interrupt(
        &self,
        session_id: &str,
        run_id: Option<&str>,
    ) -> Result<SessionInterruptResult> {
        let params = SessionInterruptParams {
            session_id: session_id.to_string(),
            run_id: run_id.map(str::to_string),
        };
        self.call(methods::SESSION_INTERRUPT, params).await
    }

    /// Archives the session. The result body is returned as sent (the protocol crate does
    /// not fix its shape yet).
    pub async fn session_archive(&self, session_id: &str) -> Result<Value> {
        self.call(methods::SESSION_ARCHIVE, session_ref(session_id))
            .await
    }

    /// Answers a pending permission request. The result body is returned as sent.
    pub async fn permission_respond(
        &self,
        session_id: &str,
        request_id: &str,
        decision: Decision,
        reason: Option<&str>,
    ) -> Result<Value> {
        let params = PermissionRespondParams {
            session_id: session_id.to_string(),
            request_id: request_id.to_string(),
            decision,
            reason: reason.map(str::to_string),
        };
        self.call(methods::PERMISSION_RESPOND, params).await
    }

    /// Starts a goal (goal mode); a retry with the same `idempotency_key` returns it.
    pub async fn goal_start(&self, params: &GoalStartParams) -> Result<GoalResult> {
        self.call(methods::GOAL_START, params).await
    }

    /// Pauses the session's running goal (or `goal_id`); returns once it is paused.
    pub async fn goal_pause(&self, session_id: &str, goal_id: Option<&str>) -> Result<GoalResult> {
        self.call(methods::GOAL_PAUSE, goal_ref(session_id, goal_id))
            .await
    }

    /// Resumes the session's paused goal (or `goal_id`) in a new run.
    pub async fn goal_resume(&self, params: &GoalResumeParams) -> Result<GoalResult> {
        self.call(methods::GOAL_RESUME, params).await
    }

    /// Cancels the session's unfinished goal (or `goal_id`).
    pub async fn goal_cancel(&self, session_id: &str, goal_id: Option<&str>) -> Result<GoalResult> {
        self.call(methods::GOAL_CANCEL, goal_ref(session_id, goal_id))
            .await
    }

    /// The MCP servers of the session's project and of the user (`/mcp`).
    pub async fn mcp_status(&self, session_id: &str) -> Result<McpStatusResult> {
        self.call(methods::MCP_STATUS, session_ref(session_id))
            .await
    }

    /// Trusts a project MCP server of the session's project.
    pub async fn mcp_trust(&self, session_id: &str, server: &str) -> Result<Ack> {
        let params = McpTrustParams {
            session_id: session_id.to_string(),
            server: server.to_string(),
        };
        self.call(methods::MCP_TRUST, params).await
    }
}

fn goal_ref(session_id: &str, goal_id: Option<&str>) -> GoalRef {
    GoalRef {
        session_id: session_id.to_string(),
        goal_id: goal_id.map(str::to_string),
    }
}

fn session_ref(session_id: &str) -> SessionRef {
    SessionRef {
        session_id: session_id.to_string(),
    }
}
