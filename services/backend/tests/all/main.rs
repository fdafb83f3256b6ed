//! Integration tests of `lumina-backend`: the local profile served in-process on port 0, real
//! WebSocket clients, real SQLite journals, the scripted model server. `crash` runs the real
//! binary and kills it.

mod agent;
mod bad_input;
mod crash;
mod delivery;
mod guidance;
mod permissions;
mod support;
