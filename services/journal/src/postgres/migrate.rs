//! The PostgreSQL schema: ordered migrations from `sql/postgres/` embedded in the binary,
//! applied by [`migrate`] (`lumina-backend migrate`) and checked by [`schema_version`]
//! (`/readyz`).
//!
//! Each file runs in its own transaction that first takes a transaction-scoped advisory
//! lock, so any number of instances may call [`migrate`] at once: one applies a file, the
//! others wait, then see it recorded and skip it. A failed file rolls back whole.

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::error::PgResultExt;
use crate::Result;

/// One embedded migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its version, the number the file name starts with.
    pub version: i32,
    /// The file name under `sql/postgres/`.
    pub name: &'static str,
    /// The SQL.
    pub sql: &'static str,
}

/// Every migration, in order. Append only: an applied file is never edited.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_journal.sql",
        sql: include_str!("../../../../sql/postgres/0001_journal.sql"),
    },
    Migration {
        version: 2,
        name: "0002_memory.sql",
        sql: include_str!("../../../../sql/postgres/0002_memory.sql"),
    },
    Migration {
        version: 3,
        name: "0003_memory_semantic.sql",
        sql: include_str!("../../../../sql/postgres/0003_memory_semantic.sql"),
    },
    Migration {
        version: 4,
        name: "0004_memory_vectors_extra.sql",
        sql: include_str!("../../../../sql/postgres/0004_memory_vectors_extra.sql"),
    },
    Migration {
        version: 5,
        name: "0005_permission_audit.sql",
        sql: include_str!("../../../../sql/postgres/0005_permission_audit.sql"),
    },
    Migration {
        version: 6,
        name: "0006_rag.sql",
        sql: include_str!("../../../../sql/postgres/0006_rag.sql"),
    },
    Migration {
        version: 7,
        name: "0007_a2a.sql",
        sql: include_str!("../../../../sql/postgres/0007_a2a.sql"),
    },
];

/// The schema version this build reads and writes (the last entry of [`MIGRATIONS`]).
pub const SCHEMA_VERSION: i32 = 7;

/// The `pg_advisory_xact_lock` key serializing migrations ("Lumina" in ASCII).
pub const MIGRATION_LOCK_KEY: i64 = 0x4c75_6d69_6e61;

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationReport {
    /// Versions this call applied, in order (empty when the schema was current).
    pub applied: Vec<i32>,
    /// The schema version after the call.
    pub version: i32,
}

/// The bootstrap statement: the version table must exist before the first file can be
/// checked. Run under the advisory lock, so concurrent bootstraps cannot race on it.
const CREATE_VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER     PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// Applies the pending [`MIGRATIONS`] in order, each in its own transaction under the
/// migration advisory lock. Idempotent and safe to run concurrently from many instances.
/// Fails with [`crate::Error::Corrupt`] when the database is at a newer version than this
/// build knows.
pub async fn migrate(client: &mut Client) -> Result<MigrationReport> {
    let mut applied = Vec::new();
    for migration in MIGRATIONS {
        let tx = client.transaction().await.pg("migrate: begin")?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
            .await
            .pg("migrate: take the migration lock")?;
        tx.batch_execute(CREATE_VERSION_TABLE)
            .await
            .pg("migrate: create schema_version")?;
        let current: Option<i32> = tx
            .query_one("SELECT max(version) FROM schema_version", &[])
            .await
            .pg("migrate: read schema version")?
            .try_get(0)
            .pg("migrate: read schema version")?;
        check_known(current)?;
        // By presence, not by the maximum: a version merged in below an applied one (two
        // branches' migrations) is still applied.
        let present: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM schema_version WHERE version = $1)",
                &[&migration.version],
            )
            .await
            .pg("migrate: read schema version")?
            .try_get(0)
            .pg("migrate: read schema version")?;
        if present {
            // Applied earlier (maybe by a concurrent instance): nothing to do.
            continue;
        }
        tracing::info!(
            version = migration.version,
            file = migration.name,
            "applying migration"
        );
        tx.batch_execute(migration.sql)
            .await
            .pg(&format!("migrate: apply {}", migration.name))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&migration.version],
        )
        .await
        .pg("migrate: record version")?;
        tx.commit().await.pg("migrate: commit")?;
        applied.push(migration.version);
    }
    let version = schema_version(client).await?.unwrap_or(0);
    Ok(MigrationReport { applied, version })
}

/// The database's schema version: `None` before the first migration (no `schema_version`
/// table). `/readyz` compares it with [`SCHEMA_VERSION`].
pub async fn schema_version(client: &Client) -> Result<Option<i32>> {
    let exists: bool = client
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await
        .pg("read schema version")?
        .try_get(0)
        .pg("read schema version")?;
    if !exists {
        return Ok(None);
    }
    client
        .query_one("SELECT max(version) FROM schema_version", &[])
        .await
        .pg("read schema version")?
        .try_get(0)
        .pg("read schema version")
}

/// A database migrated by a newer build must not be written by this one.
fn check_known(version: Option<i32>) -> Result<()> {
    match version {
        Some(v) if v > SCHEMA_VERSION => Err(crate::Error::Corrupt(format!(
            "database schema version {v} is newer than this build's {SCHEMA_VERSION}"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_ordered_and_end_at_schema_version() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
        assert_eq!(versions.last(), Some(&SCHEMA_VERSION));
        for m in MIGRATIONS {
            assert!(
                m.name.starts_with(&format!("{:04}_", m.version)),
                "{} does not start with its version",
                m.name
            );
        }
    }
}
