//! Typed WebSocket client for wire protocol v3, shared by the `lumina` CLI/TUI, the load
//! generator and the tests.
//!
//! [`Client::connect`] performs the authenticated upgrade and starts one background task that
//! owns the socket: responses are routed to the waiting call by request id, pushed `event` and
//! `delta` frames (and error frames without an id) arrive on the [`Notifications`] receiver.
//! [`SessionView`] and [`catch_up`] implement the protocol's "exactly once, in order" rule
//! for durable events (gap ⇒ backfill with `session.events`).
//!
//! Only `ws://` URLs are supported for now: this build carries no TLS stack.

mod connection;
mod error;
mod methods;
mod view;

pub use connection::{Client, ConnectOptions, Notification, Notifications};
pub use error::{ClientError, Result};
pub use methods::Calls;
pub use view::{catch_up, Offer, SessionView};

/// Re-exported so users of the client need not depend on the protocol crate for the basics.
pub use lumina_protocol as protocol;
