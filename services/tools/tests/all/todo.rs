//! todo_write.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{error_text, ok_text, project};

#[tokio::test]
async fn todo_write_normalizes_and_summarizes() {
    let p = project();
    let out = p
        .call(
            "todo_write",
            json!({"todos": [
                {"content": "  Read the code ", "status": "completed", "id": "1"},
                {"content": "Write the fix", "status": "in_progress", "id": " 2 "},
                {"content": "Run the tests", "status": "pending"},
                {"content": "Ship", "status": "pending", "id": ""}
            ]}),
        )
        .await;
    assert_eq!(
        ok_text(&out),
        "task list updated: 4 tasks (1 completed, 1 in progress, 2 pending); now: Write the fix"
    );
    assert_eq!(
        out.metadata,
        json!({"todos": [
            {"content": "Read the code", "status": "completed", "id": "1"},
            {"content": "Write the fix", "status": "in_progress", "id": "2"},
            {"content": "Run the tests", "status": "pending"},
            {"content": "Ship", "status": "pending"}
        ]})
    );
}

#[tokio::test]
async fn todo_write_empty_list_clears() {
    let p = project();
    let out = p.call("todo_write", json!({"todos": []})).await;
    assert_eq!(
        ok_text(&out),
        "task list updated: 0 tasks (0 completed, 0 in progress, 0 pending)"
    );
    assert_eq!(out.metadata, json!({"todos": []}));
}

#[tokio::test]
async fn todo_write_validation_names_the_item() {
    let p = project();
    let cases = [
        (
            json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]}),
            "invalid arguments for todo_write: field `todos[1].status` must be one of \"pending\", \"in_progress\", \"completed\", got \"done\"",
        ),
        (
            json!({"todos": [{"status": "pending"}]}),
            "invalid arguments for todo_write: missing required field `todos[0].content`",
        ),
        (
            json!({"todos": [{"content": "  ", "status": "pending"}]}),
            "invalid arguments for todo_write: field `todos[0].content` must not be empty",
        ),
        (
            json!({"todos": [{"content": "a", "status": "pending", "id": "x"}, {"content": "b", "status": "pending", "id": "x"}]}),
            "invalid arguments for todo_write: duplicate id `x` at `todos[1]`",
        ),
        (
            json!({"todos": "read, then write"}),
            "invalid arguments for todo_write: field `todos` must be an array, got a string",
        ),
        (
            json!({"todos": [{"content": "a", "status": "pending", "priority": "high"}]}),
            "invalid arguments for todo_write: unknown field `todos[0].priority` (expected one of: content, id, status)",
        ),
    ];
    for (args, expected) in cases {
        let out = p.call("todo_write", args.clone()).await;
        assert_eq!(error_text(&out), expected, "{args}");
    }
}
