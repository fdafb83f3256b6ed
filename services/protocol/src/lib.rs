//! Wire protocol v3 between `lumina` clients and `lumina-backend`: JSON text frames on the
//! WebSocket endpoint `/v1/ws`. Types only — no I/O, no business logic. `docs/protocol.md`
//! is the prose version of this crate.

pub mod a2a;
pub mod audit;
pub mod confinement;
pub mod error;
pub mod event;
pub mod frame;
pub mod goal;
pub mod methods;
pub mod skill;
pub mod state;
pub mod table;
pub mod team;

pub use confinement::Confinement;
pub use error::{ErrorCode, ErrorObject};
pub use event::{Decision, DelegateStep, Event, SignInOutcome, TodoItem, ToolCallInfo, Usage};
pub use frame::{ClientFrame, DeltaFrame, EventFrame, ServerFrame};
pub use goal::{GoalBudgets, GoalState, GoalUsage};
pub use skill::SkillSource;
pub use state::{
    ApiType, ConfinementLevel, ProcessLimit, RunFailureCode, RunStatus, SessionStatus,
};
pub use table::{request, Method, Request, Route, Scope};
pub use team::{team_board_stream, team_member_stream, MemberStatus, TaskStatus};

/// The protocol version this crate describes.
pub const PROTOCOL_VERSION: u32 = 3;

/// Path of the WebSocket endpoint.
pub const WS_PATH: &str = "/v1/ws";

/// The stream name of a session's main conversation.
pub const MAIN_STREAM: &str = "main";

/// The stream of a sub-agent's run in its parent session's journal: `agent/<child_id>`.
pub fn agent_stream(child_id: &str) -> String {
    format!("agent/{child_id}")
}
