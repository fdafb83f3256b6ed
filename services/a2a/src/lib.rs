//! Lumina as an A2A v1.0 agent (with v0.3 compatibility): the wire types, the JSON-RPC 2.0
//! envelope and method table, the spec's errors, the [`Executor`] trait (what runs a task),
//! the [`TaskStore`] contract, push-notification delivery through `web_fetch`'s SSRF guard,
//! the Agent Card, and the axum router; and the client side: [`client::A2aClient`] (card
//! cache, JSON-RPC calls, signed with `lumina-peer`) and [`delegate`] (following a remote
//! task to its end for `a2a_delegate` and remote team members). The backend plugs in its agent runtime as the
//! executor; `lumina-backend a2a tck-fixture` plugs in [`fixture::TckFixture`].
//! Documentation: `docs/a2a.md`; spec digest: `docs/specs/a2a.md`.

pub mod card;
pub mod client;
pub mod delegate;
pub mod error;
pub mod executor;
pub mod fixture;
pub mod http;
pub mod jsonrpc;
mod ops;
pub mod outbound;
pub mod params;
pub mod push;
pub mod service;
pub mod store;
pub mod time;
pub mod types;
pub mod v03;

pub use card::{AgentCard, AgentSkill, CardDocument, CardOptions};
pub use client::{A2aClient, ClientError, ClientOptions, Target};
pub use error::{Error, Result};
pub use executor::{EventSink, Executor, ExecutorError, RequestContext};
pub use http::{router, Authenticator, OpenAccess, Principal, Unauthenticated, CARD_PATH};
pub use outbound::{GuardError, OutboundGuard};
pub use push::{PushError, PushOptions, PushSender};
pub use service::{A2aService, EventStream};
pub use store::{MemoryTaskStore, TaskRecord, TaskStore};
