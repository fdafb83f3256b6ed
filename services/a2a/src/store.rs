//! The task store contract: tasks and their push-notification configs, scoped to the
//! principal that created them (another principal's task is simply absent). One in-memory
//! implementation here; durable ones live with the code that owns the storage (the backend's
//! SQLite and PostgreSQL stores) and run the same [`conformance`] suite.
//!
//! A task's *applied seq* ([`applied_seq`]) says how far an executor that feeds the task from
//! an ordered source (the backend's session journal) has applied it. Writes of the service
//! compare and set it ([`TaskStore::save_applied`]), so when several processes apply the same
//! source event only one of them writes it.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::types::{Task, TaskPushNotificationConfig};

/// Where the applied seq is kept: the task's metadata `lumina.lastSeq` (the SQL stores name
/// the same path in their statements).
const APPLIED_SEQ_POINTER: &str = "/lumina/lastSeq";

/// The task's applied seq: its metadata `lumina.lastSeq`, 0 when absent.
pub fn applied_seq(task: &Task) -> u64 {
    task.metadata
        .as_ref()
        .and_then(|m| m.pointer(APPLIED_SEQ_POINTER))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Sets the task's applied seq (creating `metadata.lumina` when needed).
pub fn set_applied_seq(task: &mut Task, seq: u64) {
    let metadata = task
        .metadata
        .get_or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let lumina = metadata
        .entry("lumina")
        .or_insert_with(|| Value::Object(Map::new()));
    if !lumina.is_object() {
        *lumina = Value::Object(Map::new());
    }
    if let Some(lumina) = lumina.as_object_mut() {
        lumina.insert("lastSeq".into(), seq.into());
    }
}

/// A stored task and when it last changed (microseconds since the epoch), which orders
/// `ListTasks`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task: Task,
    pub updated_micros: i64,
}

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// The task `id` of `owner`, or `None` (unknown or another principal's).
    async fn load(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>>;
    /// Inserts or replaces the task; its update time becomes now.
    async fn save(&self, owner: &str, task: &Task) -> Result<()>;
    /// Replaces the stored task with `task` only while its [`applied_seq`] is still
    /// `expected` and it is not terminal — one atomic step (a compare-and-set: one statement
    /// with a row condition), so of two writers that loaded the same task only the first
    /// gets through; its update time becomes now. Whether it replaced (`false` also for an
    /// unknown task).
    async fn save_applied(&self, owner: &str, task: &Task, expected: u64) -> Result<bool>;
    /// Every task of `owner` in `context_id` (all contexts when `None`).
    async fn list(&self, owner: &str, context_id: Option<&str>) -> Result<Vec<TaskRecord>>;
    /// Inserts or replaces a config (its `id` and `task_id` are set).
    async fn save_push_config(
        &self,
        owner: &str,
        config: &TaskPushNotificationConfig,
    ) -> Result<()>;
    /// The configs of a task, oldest first.
    async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>>;
    /// Removes a config; whether it existed.
    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> Result<bool>;
}

type Key = (String, String);

/// Tasks in memory (the TCK fixture, tests).
#[derive(Default)]
pub struct MemoryTaskStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    tasks: HashMap<Key, TaskRecord>,
    configs: HashMap<Key, Vec<TaskPushNotificationConfig>>,
    clock: i64,
}

impl MemoryTaskStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, MemoryInner>> {
        self.inner
            .lock()
            .map_err(|_| Error::Store("memory store lock poisoned".into()))
    }
}

fn key(owner: &str, id: &str) -> Key {
    (owner.to_owned(), id.to_owned())
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn load(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>> {
        Ok(self.lock()?.tasks.get(&key(owner, id)).cloned())
    }

    async fn save(&self, owner: &str, task: &Task) -> Result<()> {
        let mut inner = self.lock()?;
        // Strictly increasing, so two saves in one microsecond still order.
        inner.clock = crate::time::now_micros().max(inner.clock + 1);
        let record = TaskRecord {
            task: task.clone(),
            updated_micros: inner.clock,
        };
        inner.tasks.insert(key(owner, &task.id), record);
        Ok(())
    }

    async fn save_applied(&self, owner: &str, task: &Task, expected: u64) -> Result<bool> {
        let mut inner = self.lock()?;
        let current = inner.tasks.get(&key(owner, &task.id));
        if !current
            .is_some_and(|r| applied_seq(&r.task) == expected && !r.task.status.state.is_terminal())
        {
            return Ok(false);
        }
        inner.clock = crate::time::now_micros().max(inner.clock + 1);
        let record = TaskRecord {
            task: task.clone(),
            updated_micros: inner.clock,
        };
        inner.tasks.insert(key(owner, &task.id), record);
        Ok(true)
    }

    async fn list(&self, owner: &str, context_id: Option<&str>) -> Result<Vec<TaskRecord>> {
        Ok(self
            .lock()?
            .tasks
            .iter()
            .filter(|((o, _), r)| o == owner && context_id.is_none_or(|c| r.task.context_id == c))
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn save_push_config(
        &self,
        owner: &str,
        config: &TaskPushNotificationConfig,
    ) -> Result<()> {
        let task_id = config.task_id.clone().unwrap_or_default();
        let mut inner = self.lock()?;
        let list = inner.configs.entry(key(owner, &task_id)).or_default();
        match list.iter_mut().find(|c| c.id == config.id) {
            Some(existing) => *existing = config.clone(),
            None => list.push(config.clone()),
        }
        Ok(())
    }

    async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>> {
        Ok(self
            .lock()?
            .configs
            .get(&key(owner, task_id))
            .cloned()
            .unwrap_or_default())
    }

    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> Result<bool> {
        let mut inner = self.lock()?;
        let Some(list) = inner.configs.get_mut(&key(owner, task_id)) else {
            return Ok(false);
        };
        let before = list.len();
        list.retain(|c| c.id.as_deref() != Some(id));
        Ok(list.len() != before)
    }
}

/// The store contract as a suite: every implementation runs it unchanged.
pub mod conformance;
