//! Integration tests of `lumina-backend`: the local profile served in-process on port 0, real
//! WebSocket clients, real SQLite journals, the scripted model server. `crash` runs the real
//! binary and kills it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod a2a;
mod a2a_peers;
mod a2a_postgres;
mod a2a_sqlite;
mod agent;
mod audit;
mod bad_input;
mod browser;
mod cluster;
mod conversation;
mod crash;
mod delegate;
mod delegate_kill;
mod delegate_restart;
mod delivery;
mod extensions;
mod goal;
mod guidance;
mod limits;
mod locomo;
mod mcp_client;
mod mcp_server;
mod mcp_sign_in;
mod memory;
mod permissions;
mod rag;
mod shell_sandbox;
mod subagents;
mod support;
mod team;
mod team_remote;
