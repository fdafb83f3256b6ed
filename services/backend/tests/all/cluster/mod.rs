//! The cluster profile with real processes: PostgreSQL + pgvector and Redis started by the
//! test kit, N `lumina-backend cluster serve` instances, JWTs from `cluster init-local`.

mod a2a;
mod audit;
mod auth;
mod bench;
mod clients;
mod config;
mod console;
mod conversation;
mod failover;
mod memory;
mod memory_compile;
mod peers;
mod rag;
mod routing;
mod support;
mod takeover;
mod team;
mod team_distributed;
mod traces;
