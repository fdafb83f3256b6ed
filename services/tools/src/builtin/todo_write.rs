//! `todo_write{todos}`: the agent's task list. The tool only validates and normalizes; the
//! runtime turns `metadata.todos` into a `task.updated` event. It changes no files and runs
//! no commands, so the permission engine allows it without asking
//! ([`crate::permission::ALWAYS_SAFE_TOOLS`]).

use std::collections::HashSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{args, fsutil};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "todo_write";

/// Replaces the session's task list.
#[derive(Debug, Default, Clone, Copy)]
pub struct TodoWrite;

/// One task; serializes like `lumina_protocol::TodoItem` (`id` omitted when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Deserialize)]
struct Args {
    todos: Vec<Todo>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The complete task list (it replaces the previous one).",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What to do, imperative and specific."},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "id": {"type": "string", "description": "Stable identifier (optional)."}
                    },
                    "required": ["content", "status"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["todos"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for TodoWrite {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Replace the task list for this session: use it to plan multi-step \
                          work and show progress. Send the whole list each time; keep one task \
                          in_progress while working on it and mark tasks completed as soon as \
                          they are done."
                .to_string(),
            input_schema: schema(),
            read_only: false,
            edits_files: false,
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> ToolOutput {
        fsutil::flatten(run(args))
    }
}

fn run(args: Value) -> Result<ToolOutput, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    let mut seen = HashSet::new();
    let mut todos = Vec::with_capacity(args.todos.len());
    for (i, todo) in args.todos.into_iter().enumerate() {
        let content = todo.content.trim().to_string();
        if content.is_empty() {
            return Err(ToolOutput::error(format!(
                "invalid arguments for {NAME}: field `todos[{i}].content` must not be empty"
            )));
        }
        let id = todo
            .id
            .map(|id| id.trim().to_string())
            .filter(|id| !id.is_empty());
        if let Some(id) = &id {
            if !seen.insert(id.clone()) {
                return Err(ToolOutput::error(format!(
                    "invalid arguments for {NAME}: duplicate id `{id}` at `todos[{i}]`"
                )));
            }
        }
        todos.push(Todo {
            content,
            status: todo.status,
            id,
        });
    }

    let count = |status| todos.iter().filter(|t| t.status == status).count();
    let (pending, in_progress, completed) = (
        count(TodoStatus::Pending),
        count(TodoStatus::InProgress),
        count(TodoStatus::Completed),
    );
    let mut summary = format!(
        "task list updated: {} tasks ({completed} completed, {in_progress} in progress, {pending} pending)",
        todos.len()
    );
    if let Some(current) = todos.iter().find(|t| t.status == TodoStatus::InProgress) {
        summary.push_str(&format!("; now: {}", current.content));
    }
    let todos = serde_json::to_value(&todos)
        .map_err(|e| ToolOutput::error(format!("cannot encode the task list: {e}")))?;
    Ok(ToolOutput::ok(summary).with_metadata(json!({ "todos": todos })))
}
