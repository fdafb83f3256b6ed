//! The cluster profile's A2A task store: PostgreSQL (`sql/postgres/0007_a2a.sql`), the
//! database every instance shares, so any instance answers for any task and tasks survive
//! restarts and failovers. Keyed by owner (`<tenant>/<subject>`) like the SQLite store.
//! A compare-and-set (`save_applied`: a journal event applied once across instances) is one
//! `UPDATE … WHERE`. Passes `lumina_a2a::store::conformance` (`run` and `race`).

use async_trait::async_trait;
use lumina_a2a::store::{TaskRecord, TaskStore};
use lumina_a2a::types::{Task, TaskPushNotificationConfig};
use lumina_a2a::Error;
use lumina_journal::postgres::deadpool_postgres::{Object, Pool};
use lumina_journal::postgres::tokio_postgres::Row;
use serde_json::Value;

/// Tasks and push configs in the cluster's PostgreSQL. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PgTaskStore {
    pool: Pool,
}

fn store_err(context: &str, e: impl std::fmt::Display) -> Error {
    Error::Store(format!("a2a store: {context}: {e}"))
}

impl PgTaskStore {
    /// A store over the journal's pool (the schema is applied by `lumina-backend migrate`).
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }

    async fn conn(&self) -> Result<Object, Error> {
        self.pool
            .get()
            .await
            .map_err(|e| store_err("no database connection", e))
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| store_err("stored JSON", e))
}

fn record(row: &Row) -> Result<TaskRecord, Error> {
    let task: Value = row.try_get(0).map_err(|e| store_err("read task", e))?;
    let updated_micros: i64 = row.try_get(1).map_err(|e| store_err("read task", e))?;
    Ok(TaskRecord {
        task: decode(task)?,
        updated_micros,
    })
}

#[async_trait]
impl TaskStore for PgTaskStore {
    async fn load(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT task, updated_micros FROM a2a_tasks WHERE owner = $1 AND id = $2",
                &[&owner, &id],
            )
            .await
            .map_err(|e| store_err("load", e))?;
        row.as_ref().map(record).transpose()
    }

    async fn save(&self, owner: &str, task: &Task) -> Result<(), Error> {
        let value = serde_json::to_value(task).map_err(|e| store_err("encode task", e))?;
        let now = lumina_a2a::time::now_micros();
        let conn = self.conn().await?;
        // Strictly after the owner's last update, so two saves in one microsecond (or on
        // two instances with skewed clocks) still order. A terminal task is final: the
        // save of a writer that loaded it earlier (another instance applying the same
        // journal) cannot bring it back.
        conn.execute(
            "INSERT INTO a2a_tasks (owner, id, context_id, updated_micros, task)
             VALUES ($1, $2, $3,
                     GREATEST($4, (SELECT COALESCE(MAX(updated_micros), 0) + 1
                                   FROM a2a_tasks WHERE owner = $1)),
                     $5)
             ON CONFLICT (owner, id) DO UPDATE
                SET context_id = EXCLUDED.context_id,
                    updated_micros = EXCLUDED.updated_micros,
                    task = EXCLUDED.task
              WHERE a2a_tasks.task -> 'status' ->> 'state' NOT IN
                    ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED',
                     'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')",
            &[&owner, &task.id, &task.context_id, &now, &value],
        )
        .await
        .map_err(|e| store_err("save", e))?;
        Ok(())
    }

    async fn save_applied(&self, owner: &str, task: &Task, expected: u64) -> Result<bool, Error> {
        let value = serde_json::to_value(task).map_err(|e| store_err("encode task", e))?;
        let expected = i64::try_from(expected).map_err(|e| store_err("applied seq", e))?;
        let now = lumina_a2a::time::now_micros();
        let conn = self.conn().await?;
        // One statement, so the row condition and the write are atomic: of two instances
        // updating the same row at once, the second waits for the first to commit and then
        // finds the condition false (READ COMMITTED re-checks it on the new row version).
        // The condition: the stored applied seq (metadata `lumina.lastSeq`,
        // `lumina_a2a::store::applied_seq`) is still the expected one, and the task is not
        // terminal.
        let n = conn
            .execute(
                "UPDATE a2a_tasks
                    SET context_id = $3,
                        updated_micros = GREATEST($4, (SELECT COALESCE(MAX(updated_micros), 0) + 1
                                                       FROM a2a_tasks WHERE owner = $1)),
                        task = $5
                  WHERE owner = $1 AND id = $2
                    AND COALESCE((task #>> '{metadata,lumina,lastSeq}')::BIGINT, 0) = $6
                    AND task -> 'status' ->> 'state' NOT IN
                        ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED',
                         'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')",
                &[&owner, &task.id, &task.context_id, &now, &value, &expected],
            )
            .await
            .map_err(|e| store_err("save applied", e))?;
        Ok(n == 1)
    }

    async fn list(&self, owner: &str, context_id: Option<&str>) -> Result<Vec<TaskRecord>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT task, updated_micros FROM a2a_tasks
                 WHERE owner = $1 AND ($2::TEXT IS NULL OR context_id = $2)",
                &[&owner, &context_id],
            )
            .await
            .map_err(|e| store_err("list", e))?;
        rows.iter().map(record).collect()
    }

    async fn save_push_config(
        &self,
        owner: &str,
        config: &TaskPushNotificationConfig,
    ) -> Result<(), Error> {
        let value = serde_json::to_value(config).map_err(|e| store_err("encode config", e))?;
        let task_id = config.task_id.clone().unwrap_or_default();
        let id = config.id.clone().unwrap_or_default();
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO a2a_push_configs (owner, task_id, id, config) VALUES ($1, $2, $3, $4)
             ON CONFLICT (owner, task_id, id) DO UPDATE SET config = EXCLUDED.config",
            &[&owner, &task_id, &id, &value],
        )
        .await
        .map_err(|e| store_err("save push config", e))?;
        Ok(())
    }

    async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT config FROM a2a_push_configs WHERE owner = $1 AND task_id = $2 ORDER BY seq",
                &[&owner, &task_id],
            )
            .await
            .map_err(|e| store_err("push configs", e))?;
        rows.iter()
            .map(|row| {
                let value: Value = row
                    .try_get(0)
                    .map_err(|e| store_err("read push config", e))?;
                decode(value)
            })
            .collect()
    }

    async fn delete_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "DELETE FROM a2a_push_configs WHERE owner = $1 AND task_id = $2 AND id = $3",
                &[&owner, &task_id, &id],
            )
            .await
            .map_err(|e| store_err("delete push config", e))?;
        Ok(n > 0)
    }
}
