//! Integration tests of lumina-rag-postgres (module `postgres`: they need the testkit's
//! PostgreSQL server): the store conformance suite of `lumina-rag` against the PostgreSQL
//! store, then its own checks (tenants, the schema's cascades, concurrent replacement).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod postgres;
