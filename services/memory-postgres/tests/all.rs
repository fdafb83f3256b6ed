//! Integration tests of lumina-memory-postgres (module `postgres`: they need the testkit's
//! PostgreSQL server): the store conformance suite of `lumina-memory` against the
//! PostgreSQL store, then its own checks (tenants, fences, immutability in the database,
//! resumable builds, the HNSW threshold, the cluster-wide build lock).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod postgres;
