//! `lumina-backend`: the agent runtime's server. This crate wires concrete parts together
//! (SQLite journal for the local profile), serves protocol v3 over WebSocket, and owns the
//! process concerns: the endpoint file, signals, logging, benchmarks.

pub mod a2a;
pub mod audit;
pub mod auth;
pub mod bench;
pub mod cluster;
pub mod conn;
pub mod console;
pub mod conversation;
pub mod dispatch;
pub mod doctor;
pub mod endpoint;
pub mod execute;
pub mod hot_window;
pub mod limits;
pub mod local;
pub mod mcp;
pub mod mcp_server;
pub mod memory_setup;
pub mod metered;
pub mod metrics;
pub mod peers;
pub mod profile;
pub mod server;
pub mod telemetry;
pub mod ws;
