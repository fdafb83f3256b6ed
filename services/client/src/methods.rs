//! Typed calls. [`Calls`] has one method per entry of the protocol's method table
//! (generated from `lumina_protocol::for_each_method!`, so a new method is callable the
//! moment it is declared); the helpers on [`Client`] below wrap the common ones in the
//! shapes the CLI and the tests use.

use lumina_protocol::methods::{
    Ack, GoalRef, GoalResult, GoalResumeParams, GoalStartParams, HelloParams, HelloResult,
    McpStatusResult, McpTrustParams, PermissionRespondParams, SessionCreateParams,
    SessionEventsParams, SessionEventsResult, SessionInfo, SessionInfoResult,
    SessionInterruptParams, SessionInterruptResult, SessionListParams, SessionRef,
    SessionResumeParams, SessionResumeResult, SessionSubmitParams, SessionSubmitResult,
};
use lumina_protocol::{Decision, Request, PROTOCOL_VERSION};

use crate::{Client, Result};

/// The typed calls of one [`Client`]: `client.calls().session_submit(&params)`.
#[derive(Clone, Copy)]
pub struct Calls<'a> {
    client: &'a Client,
}

macro_rules! typed_calls {
    ($($variant:ident $fn_name:ident $name:literal ($params:ty) -> $result:ty,
        $scope:ident, $route:ident, $summary:literal;)*) => {
        impl Calls<'_> {
            $(
                #[doc = concat!("`", $name, "`: ", $summary, ".")]
                pub async fn $fn_name(&self, params: &$params) -> Result<$result> {
                    self.client
                        .request::<lumina_protocol::request::$variant>(params)
                        .await
                }
            )*
        }
    };
}

lumina_protocol::for_each_method!(typed_calls);

impl Client {
    /// The call of method `R` (see [`lumina_protocol::request`]) under a fresh request id.
    pub async fn request<R: Request>(&self, params: &R::Params) -> Result<R::Result> {
        self.call(R::METHOD.name(), params).await
    }

    /// One typed call per protocol method.
    pub fn calls(&self) -> Calls<'_> {
        Calls { client: self }
    }

    /// Version negotiation; offers [`PROTOCOL_VERSION`] and names this client.
    pub async fn hello(&self, client_name: &str) -> Result<HelloResult> {
        let params = HelloParams {
            protocols: vec![PROTOCOL_VERSION],
            client: Some(client_name.to_string()),
        };
        self.calls().hello(&params).await
    }

    pub async fn session_create(&self, params: &SessionCreateParams) -> Result<SessionInfo> {
        Ok(self.calls().session_create(params).await?.session)
    }

    pub async fn session_list(&self, include_archived: bool) -> Result<Vec<SessionInfo>> {
        let params = SessionListParams { include_archived };
        Ok(self.calls().session_list(&params).await?.sessions)
    }

    pub async fn session_info(&self, session_id: &str) -> Result<SessionInfoResult> {
        self.calls().session_info(&session_ref(session_id)).await
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
        self.calls().session_resume(&params).await
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
        self.calls().session_events(&params).await
    }

    /// Starts a run. Retrying with the same `idempotency_key` returns the original run.
    pub async fn session_submit(
        &self,
        params: &SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        self.calls().session_submit(params).await
    }

    /// [`Client::session_submit`] under an explicit request id, for a retry after a reconnect.
    pub async fn session_submit_with_id(
        &self,
        request_id: String,
        params: &SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        let method = <lumina_protocol::request::SessionSubmit as Request>::METHOD;
        self.call_with_id(request_id, method.name(), params).await
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
        self.calls().session_interrupt(&params).await
    }

    /// Archives the session.
    pub async fn session_archive(&self, session_id: &str) -> Result<Ack> {
        self.calls().session_archive(&session_ref(session_id)).await
    }

    /// Answers a pending permission request.
    pub async fn permission_respond(
        &self,
        session_id: &str,
        request_id: &str,
        decision: Decision,
        reason: Option<&str>,
    ) -> Result<Ack> {
        let params = PermissionRespondParams {
            session_id: session_id.to_string(),
            request_id: request_id.to_string(),
            decision,
            reason: reason.map(str::to_string),
        };
        self.calls().permission_respond(&params).await
    }

    /// Starts a goal (goal mode); a retry with the same `idempotency_key` returns it.
    pub async fn goal_start(&self, params: &GoalStartParams) -> Result<GoalResult> {
        self.calls().goal_start(params).await
    }

    /// Pauses the session's running goal (or `goal_id`); returns once it is paused.
    pub async fn goal_pause(&self, session_id: &str, goal_id: Option<&str>) -> Result<GoalResult> {
        self.calls()
            .goal_pause(&goal_ref(session_id, goal_id))
            .await
    }

    /// Resumes the session's paused goal (or `goal_id`) in a new run.
    pub async fn goal_resume(&self, params: &GoalResumeParams) -> Result<GoalResult> {
        self.calls().goal_resume(params).await
    }

    /// Cancels the session's unfinished goal (or `goal_id`).
    pub async fn goal_cancel(&self, session_id: &str, goal_id: Option<&str>) -> Result<GoalResult> {
        self.calls()
            .goal_cancel(&goal_ref(session_id, goal_id))
            .await
    }

    /// The MCP servers of the session's project and of the user (`/mcp`).
    pub async fn mcp_status(&self, session_id: &str) -> Result<McpStatusResult> {
        self.calls().mcp_status(&session_ref(session_id)).await
    }

    /// Trusts a project MCP server of the session's project.
    pub async fn mcp_trust(&self, session_id: &str, server: &str) -> Result<Ack> {
        let params = McpTrustParams {
            session_id: session_id.to_string(),
            server: server.to_string(),
        };
        self.calls().mcp_trust(&params).await
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
