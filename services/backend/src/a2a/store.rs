//! The local profile's durable A2A task store: SQLite next to the session journal
//! (`<AppRoot>/data/sessions/a2a.sqlite`), so tasks and push configs survive a restart. The
//! task's progress itself comes from the session journal (the executor's `refresh`).
//! One connection behind a lock: a compare-and-set (`save_applied`) is one `UPDATE … WHERE`
//! on it. Passes `lumina_a2a::store::conformance` (`run` and `race`).

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use lumina_a2a::store::{TaskRecord, TaskStore};
use lumina_a2a::types::{Task, TaskPushNotificationConfig};
use lumina_a2a::Error;
use rusqlite::{params, Connection, OptionalExtension};

pub struct SqliteTaskStore {
    conn: Mutex<Connection>,
}

fn store_err(e: impl std::fmt::Display) -> Error {
    Error::Store(e.to_string())
}

impl SqliteTaskStore {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let conn = Connection::open(path).map_err(store_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS a2a_tasks (
                 owner TEXT NOT NULL, id TEXT NOT NULL, context_id TEXT NOT NULL,
                 updated_micros INTEGER NOT NULL, task TEXT NOT NULL,
                 PRIMARY KEY (owner, id));
             CREATE INDEX IF NOT EXISTS a2a_tasks_context ON a2a_tasks (owner, context_id);
             CREATE TABLE IF NOT EXISTS a2a_push_configs (
                 owner TEXT NOT NULL, task_id TEXT NOT NULL, id TEXT NOT NULL,
                 seq INTEGER NOT NULL, config TEXT NOT NULL,
                 PRIMARY KEY (owner, task_id, id));",
        )
        .map_err(store_err)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>, Error> {
        self.conn
            .lock()
            .map_err(|_| Error::Store("a2a store lock poisoned".into()))
    }
}

fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(store_err)
}

#[async_trait]
impl TaskStore for SqliteTaskStore {
    async fn load(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>, Error> {
        let conn = self.conn()?;
        let row: Option<(String, i64)> = conn
            .query_row(
                "SELECT task, updated_micros FROM a2a_tasks WHERE owner = ?1 AND id = ?2",
                params![owner, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(store_err)?;
        row.map(|(task, updated_micros)| {
            Ok(TaskRecord {
                task: decode(&task)?,
                updated_micros,
            })
        })
        .transpose()
    }

    async fn save(&self, owner: &str, task: &Task) -> Result<(), Error> {
        let text = serde_json::to_string(task).map_err(store_err)?;
        let conn = self.conn()?;
        let last: i64 = conn
            .query_row(
                "SELECT COALESCE(MAX(updated_micros), 0) FROM a2a_tasks",
                [],
                |r| r.get(0),
            )
            .map_err(store_err)?;
        let now = lumina_a2a::time::now_micros().max(last + 1);
        conn.execute(
            "INSERT INTO a2a_tasks (owner, id, context_id, updated_micros, task)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (owner, id) DO UPDATE SET context_id = ?3, updated_micros = ?4, task = ?5",
            params![owner, task.id, task.context_id, now, text],
        )
        .map_err(store_err)?;
        Ok(())
    }

    async fn save_applied(&self, owner: &str, task: &Task, expected: u64) -> Result<bool, Error> {
        let text = serde_json::to_string(task).map_err(store_err)?;
        let expected = i64::try_from(expected).map_err(store_err)?;
        let conn = self.conn()?;
        let last: i64 = conn
            .query_row(
                "SELECT COALESCE(MAX(updated_micros), 0) FROM a2a_tasks",
                [],
                |r| r.get(0),
            )
            .map_err(store_err)?;
        let now = lumina_a2a::time::now_micros().max(last + 1);
        // The compare-and-set: the stored task's applied seq (metadata `lumina.lastSeq`,
        // `lumina_a2a::store::applied_seq`) is still the expected one, and it is not
        // terminal.
        let n = conn
            .execute(
                "UPDATE a2a_tasks SET context_id = ?3, updated_micros = ?4, task = ?5
                  WHERE owner = ?1 AND id = ?2
                    AND COALESCE(json_extract(task, '$.metadata.lumina.lastSeq'), 0) = ?6
                    AND json_extract(task, '$.status.state') NOT IN
                        ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED',
                         'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')",
                params![owner, task.id, task.context_id, now, text, expected],
            )
            .map_err(store_err)?;
        Ok(n == 1)
    }

    async fn list(&self, owner: &str, context_id: Option<&str>) -> Result<Vec<TaskRecord>, Error> {
        let conn = self.conn()?;
        let mut statement = conn
            .prepare(
                "SELECT task, updated_micros FROM a2a_tasks
                 WHERE owner = ?1 AND (?2 IS NULL OR context_id = ?2)",
            )
            .map_err(store_err)?;
        let rows = statement
            .query_map(params![owner, context_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(store_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (task, updated_micros) = row.map_err(store_err)?;
            out.push(TaskRecord {
                task: decode(&task)?,
                updated_micros,
            });
        }
        Ok(out)
    }

    async fn save_push_config(
        &self,
        owner: &str,
        config: &TaskPushNotificationConfig,
    ) -> Result<(), Error> {
        let text = serde_json::to_string(config).map_err(store_err)?;
        let task_id = config.task_id.clone().unwrap_or_default();
        let id = config.id.clone().unwrap_or_default();
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO a2a_push_configs (owner, task_id, id, seq, config)
             VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(seq), 0) + 1 FROM a2a_push_configs), ?4)
             ON CONFLICT (owner, task_id, id) DO UPDATE SET config = ?4",
            params![owner, task_id, id, text],
        )
        .map_err(store_err)?;
        Ok(())
    }

    async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, Error> {
        let conn = self.conn()?;
        let mut statement = conn
            .prepare(
                "SELECT config FROM a2a_push_configs WHERE owner = ?1 AND task_id = ?2 ORDER BY seq",
            )
            .map_err(store_err)?;
        let rows = statement
            .query_map(params![owner, task_id], |r| r.get::<_, String>(0))
            .map_err(store_err)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(decode(&row.map_err(store_err)?)?);
        }
        Ok(out)
    }

    async fn delete_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> Result<bool, Error> {
        let conn = self.conn()?;
        let n = conn
            .execute(
                "DELETE FROM a2a_push_configs WHERE owner = ?1 AND task_id = ?2 AND id = ?3",
                params![owner, task_id, id],
            )
            .map_err(store_err)?;
        Ok(n > 0)
    }
}
