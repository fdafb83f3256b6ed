//! The method table: every protocol method declared once — its wire name, params and result
//! types, the scope its token needs, and where it runs. The server's dispatcher, the cluster
//! gateway's routing and scope checks, `lumina-client`'s typed calls and the method table of
//! `docs/protocol.md` (checked by a test) all come from [`for_each_method!`].
//!
//! Adding a method is one entry here plus its handler: the dispatcher's `match` on
//! [`Method`] has no wildcard, so the build fails until the method is handled.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The scope a bearer token needs for a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Any authenticated connection.
    Public,
    /// `lumina:session:read`.
    Read,
    /// `lumina:session:write`.
    Write,
    /// `lumina:admin`.
    Admin,
}

impl Scope {
    /// The scope string in a token's `scope` claim (`""` for [`Scope::Public`]).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Public => "",
            Scope::Read => "lumina:session:read",
            Scope::Write => "lumina:session:write",
            Scope::Admin => "lumina:admin",
        }
    }

    /// The name `docs/protocol.md` uses (`—`, `read`, `write`, `admin`).
    pub const fn doc_name(self) -> &'static str {
        match self {
            Scope::Public => "—",
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Whether `scopes` (a token's) grant this one.
    pub fn granted_by(self, scopes: &[String]) -> bool {
        self == Scope::Public || scopes.iter().any(|s| s == self.as_str())
    }
}

/// Where a method runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// The connection itself answers it (negotiation, subscriptions).
    Connection,
    /// The instance the connection is on, about itself (`admin.*`).
    Instance,
    /// The instance that received it, which becomes the new session's owner.
    Any,
    /// Any instance, from the durable store (reads that need no owner).
    Store,
    /// The session's owner (mutations, and reads of the owner's in-memory state); another
    /// instance forwards it there.
    Owner,
}

impl Route {
    /// The name `docs/protocol.md` uses in its "runs on" column.
    pub const fn doc_name(self) -> &'static str {
        match self {
            Route::Connection => "connection",
            Route::Instance => "instance",
            Route::Any => "any",
            Route::Store => "store",
            Route::Owner => "owner",
        }
    }
}

/// A method as a type: its params and result. The markers in [`request`] implement it, so a
/// typed call reads `client.request::<request::SessionSubmit>(&params)`.
pub trait Request {
    /// The method.
    const METHOD: Method;
    /// What the client sends.
    type Params: Serialize + DeserializeOwned + Send + Sync;
    /// What the server answers.
    type Result: Serialize + DeserializeOwned + Send;
}

/// Calls `$callback!` with every entry of the table:
/// `Variant fn_name "wire.name" (Params) -> Result, Scope, Route, "summary";`.
/// Other crates generate their per-method code from it (the client's typed calls).
#[macro_export]
macro_rules! for_each_method {
    ($callback:ident) => {
        $callback! {
            Hello hello "hello" ($crate::methods::HelloParams) -> $crate::methods::HelloResult,
                Public, Connection, "version negotiation";
            SessionCreate session_create "session.create" ($crate::methods::SessionCreateParams)
                -> $crate::methods::SessionResult, Write, Any, "creates a session";
            SessionList session_list "session.list" ($crate::methods::SessionListParams)
                -> $crate::methods::SessionListResult, Read, Store, "lists the tenant's sessions";
            SessionInfo session_info "session.info" ($crate::methods::SessionRef)
                -> $crate::methods::SessionInfoResult, Read, Store, "a session with its owner";
            SessionResume session_resume "session.resume" ($crate::methods::SessionResumeParams)
                -> $crate::methods::SessionResumeResult, Read, Connection,
                "subscribes the connection to a session's events";
            SessionEvents session_events "session.events" ($crate::methods::SessionEventsParams)
                -> $crate::methods::SessionEventsResult, Read, Store, "a page of durable events";
            SessionSubmit session_submit "session.submit" ($crate::methods::SessionSubmitParams)
                -> $crate::methods::SessionSubmitResult, Write, Owner,
                "starts a run, queues a follow-up or steers";
            SessionInterrupt session_interrupt "session.interrupt"
                ($crate::methods::SessionInterruptParams) -> $crate::methods::SessionInterruptResult,
                Write, Owner, "interrupts the active or a queued run";
            SessionArchive session_archive "session.archive" ($crate::methods::SessionRef)
                -> $crate::methods::Ack, Write, Owner, "archives an idle session";
            PermissionRespond permission_respond "permission.respond"
                ($crate::methods::PermissionRespondParams) -> $crate::methods::Ack, Write, Owner,
                "answers a permission request";
            GoalStart goal_start "goal.start" ($crate::methods::GoalStartParams)
                -> $crate::methods::GoalResult, Write, Owner, "starts a goal";
            GoalPause goal_pause "goal.pause" ($crate::methods::GoalRef)
                -> $crate::methods::GoalResult, Write, Owner, "pauses a goal";
            GoalResume goal_resume "goal.resume" ($crate::methods::GoalResumeParams)
                -> $crate::methods::GoalResult, Write, Owner, "resumes a paused goal";
            GoalCancel goal_cancel "goal.cancel" ($crate::methods::GoalRef)
                -> $crate::methods::GoalResult, Write, Owner, "cancels a goal";
            McpStatus mcp_status "mcp.status" ($crate::methods::SessionRef)
                -> $crate::methods::McpStatusResult, Read, Owner,
                "the session's MCP servers as its owner runs them";
            McpTrust mcp_trust "mcp.trust" ($crate::methods::McpTrustParams)
                -> $crate::methods::Ack, Write, Owner, "trusts a project MCP server";
            DelegateRetry delegate_retry "delegate.retry" ($crate::methods::DelegateRetryParams)
                -> $crate::methods::DelegateRetryResult, Write, Owner,
                "retries an `a2a_delegate` call parked while its agent was unreachable";
            TeamList team_list "team.list" ($crate::methods::TeamListParams)
                -> $crate::methods::TeamListResult, Read, Any,
                "the agent teams (with a session: its project's too)";
            TeamEnter team_enter "team.enter" ($crate::methods::TeamEnterParams)
                -> $crate::methods::TeamEnterResult, Write, Owner,
                "the session works as an agent team";
            TeamExit team_exit "team.exit" ($crate::methods::TeamExitParams)
                -> $crate::methods::TeamExitResult, Write, Owner,
                "the session leaves its agent team";
            TeamCreate team_create "team.create" ($crate::methods::TeamCreateParams)
                -> $crate::methods::TeamCreateResult, Write, Any,
                "creates a user team from the template";
            SkillList skill_list "skill.list" ($crate::methods::SkillListParams)
                -> $crate::methods::SkillListResult, Read, Any,
                "the skills a prompt can invoke (with a session: its project's too)";
            AdminShutdown admin_shutdown "admin.shutdown" ($crate::methods::Empty)
                -> $crate::methods::Ack, Admin, Instance, "stops the instance";
            AdminDrain admin_drain "admin.drain" ($crate::methods::Empty)
                -> $crate::methods::DrainResult, Admin, Instance,
                "hands the instance's sessions to the others";
            ConsoleTicket console_ticket "console.ticket" ($crate::methods::Empty)
                -> $crate::methods::ConsoleTicketResult, Admin, Instance,
                "mints a one-time sign-in link for the web console";
            AuditList audit_list "audit.list" ($crate::methods::AuditListParams)
                -> $crate::methods::AuditListResult, Admin, Store,
                "the tenant's permission decisions, newest first";
            A2aPeers a2a_peers "a2a.peers" ($crate::methods::A2aPeersParams)
                -> $crate::methods::A2aPeersResult, Read, Any,
                "the A2A agents this deployment may delegate to, with their cards and reachability";
        }
    };
}

macro_rules! define_methods {
    ($($variant:ident $fn_name:ident $name:literal ($params:ty) -> $result:ty,
        $scope:ident, $route:ident, $summary:literal;)*) => {
        /// Every method of the protocol.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $(#[doc = $summary] $variant,)*
        }

        impl Method {
            /// Every method, in the table's order.
            pub const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The wire name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => $name,)*
                }
            }

            /// The method a wire name names.
            pub fn from_name(name: &str) -> Option<Method> {
                match name {
                    $($name => Some(Method::$variant),)*
                    _ => None,
                }
            }

            /// The scope its caller's token needs.
            pub const fn scope(self) -> Scope {
                match self {
                    $(Method::$variant => Scope::$scope,)*
                }
            }

            /// Where it runs.
            pub const fn route(self) -> Route {
                match self {
                    $(Method::$variant => Route::$route,)*
                }
            }

            /// One line on what it does.
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Method::$variant => $summary,)*
                }
            }
        }

        /// One marker type per method, implementing [`Request`].
        pub mod request {
            $(
                #[doc = $summary]
                #[derive(Debug, Clone, Copy)]
                pub struct $variant;

                impl super::Request for $variant {
                    const METHOD: super::Method = super::Method::$variant;
                    type Params = $params;
                    type Result = $result;
                }
            )*
        }
    };
}

for_each_method!(define_methods);

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for method in Method::ALL {
            assert_eq!(Method::from_name(method.name()), Some(*method));
            assert!(seen.insert(method.name()), "{method} twice");
        }
        assert_eq!(Method::from_name("no.such"), None);
    }
}
