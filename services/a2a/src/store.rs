//! The task store contract: tasks and their push-notification configs, scoped to the
//! principal that created them (another principal's task is simply absent). One in-memory
//! implementation here; durable ones live with the code that owns the storage (the backend's
//! journal-backed store) and run the same [`conformance`] suite.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::types::{Task, TaskPushNotificationConfig};

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
pub mod conformance {
    use super::*;
    use crate::types::{TaskState, TaskStatus};

    fn task(id: &str, context: &str) -> Task {
        Task {
            id: id.into(),
            context_id: context.into(),
            status: TaskStatus::now(TaskState::Submitted, None),
            artifacts: Vec::new(),
            history: Vec::new(),
            metadata: None,
        }
    }

    /// Panics (it is a test suite) on the first broken rule.
    pub async fn run(store: &dyn TaskStore) {
        let a = task("t-a", "ctx-1");
        store
            .save("alice", &a)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let loaded = store
            .load("alice", "t-a")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            loaded.as_ref().map(|r| &r.task),
            Some(&a),
            "a saved task loads"
        );
        let other = store
            .load("bob", "t-a")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(other, None, "another principal's task is absent");

        let first = loaded.map(|r| r.updated_micros).unwrap_or_default();
        let mut b = task("t-b", "ctx-2");
        store
            .save("alice", &b)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        b.status = TaskStatus::now(TaskState::Completed, None);
        store
            .save("alice", &b)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let reloaded = store
            .load("alice", "t-b")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let reloaded = reloaded.unwrap_or_else(|| panic!("t-b vanished"));
        assert_eq!(
            reloaded.task.status.state,
            TaskState::Completed,
            "save replaces"
        );
        assert!(reloaded.updated_micros > first, "update times increase");

        let all = store
            .list("alice", None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.len(), 2);
        let ctx = store
            .list("alice", Some("ctx-2"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ctx.len(), 1);
        let none = store
            .list("bob", None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(none.is_empty());

        let config = TaskPushNotificationConfig {
            tenant: None,
            id: Some("c1".into()),
            task_id: Some("t-a".into()),
            url: "https://example.com/hook".into(),
            token: Some("tok".into()),
            authentication: None,
        };
        store
            .save_push_config("alice", &config)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let configs = store
            .push_configs("alice", "t-a")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(configs, vec![config.clone()]);
        let foreign = store
            .push_configs("bob", "t-a")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(foreign.is_empty());
        let gone = store.delete_push_config("alice", "t-a", "c1").await;
        assert_eq!(gone.ok(), Some(true));
        let again = store.delete_push_config("alice", "t-a", "c1").await;
        assert_eq!(again.ok(), Some(false));
    }
}
