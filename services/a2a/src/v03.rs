//! v0.3 compatibility (requests without `A2A-Version`): v0.3 params become v1.0 params
//! before the service sees them, and v1.0 results become v0.3 results on the way out
//! (`kind` members, kebab-case states, lower-case roles, `file` parts, `final` on status
//! events, `pushNotificationConfig` wrappers). The table is in `docs/a2a.md`.

use serde_json::{json, Map, Value};

use crate::jsonrpc::Method;
use crate::types::TaskState;

/// v0.3 params → v1.0 params.
pub fn params_in(method: Method, mut params: Map<String, Value>) -> Map<String, Value> {
    match method {
        Method::SendMessage | Method::SendStreamingMessage => {
            if let Some(message) = params.get_mut("message") {
                message_in(message);
            }
            if let Some(Value::Object(config)) = params.get_mut("configuration") {
                if let Some(blocking) = config.remove("blocking").and_then(|b| b.as_bool()) {
                    config.insert("returnImmediately".into(), Value::Bool(!blocking));
                }
                if let Some(push) = config.remove("pushNotificationConfig") {
                    config.insert("taskPushNotificationConfig".into(), push_config_in(push));
                }
            }
            params
        }
        Method::CreatePushConfig => {
            let task_id = params.remove("taskId").unwrap_or(Value::Null);
            let mut config = match params.remove("pushNotificationConfig") {
                Some(config) => push_config_in(config),
                None => json!({}),
            };
            config["taskId"] = task_id;
            match config {
                Value::Object(map) => map,
                _ => Map::new(),
            }
        }
        Method::GetPushConfig | Method::DeletePushConfig | Method::ListPushConfigs => {
            let mut out = Map::new();
            if let Some(task_id) = params.remove("id") {
                out.insert("taskId".into(), task_id);
            }
            if let Some(id) = params.remove("pushNotificationConfigId") {
                out.insert("id".into(), id);
            }
            out
        }
        _ => params,
    }
}

fn message_in(message: &mut Value) {
    let Value::Object(m) = message else { return };
    m.remove("kind");
    if let Some(role) = m.get("role").and_then(Value::as_str) {
        let role = match role {
            "user" => "ROLE_USER",
            "agent" => "ROLE_AGENT",
            other => other,
        }
        .to_owned();
        m.insert("role".into(), Value::String(role));
    }
    if let Some(Value::Array(parts)) = m.get_mut("parts") {
        for part in parts {
            part_in(part);
        }
    }
}

fn part_in(part: &mut Value) {
    let Value::Object(p) = part else { return };
    let kind = p.remove("kind");
    if kind.as_ref().and_then(Value::as_str) != Some("file") {
        return;
    }
    let Some(Value::Object(mut file)) = p.remove("file") else {
        return;
    };
    if let Some(bytes) = file.remove("bytes") {
        p.insert("raw".into(), bytes);
    }
    if let Some(uri) = file.remove("uri") {
        p.insert("url".into(), uri);
    }
    if let Some(name) = file.remove("name") {
        p.insert("filename".into(), name);
    }
    if let Some(media) = file.remove("mimeType") {
        p.insert("mediaType".into(), media);
    }
}

fn push_config_in(config: Value) -> Value {
    let Value::Object(mut c) = config else {
        return config;
    };
    if let Some(Value::Object(mut auth)) = c.remove("authentication") {
        let scheme = auth
            .remove("schemes")
            .and_then(|s| s.as_array().and_then(|a| a.first().cloned()))
            .unwrap_or(Value::String("Bearer".into()));
        let mut out = Map::new();
        out.insert("scheme".into(), scheme);
        if let Some(credentials) = auth.remove("credentials") {
            out.insert("credentials".into(), credentials);
        }
        c.insert("authentication".into(), Value::Object(out));
    }
    Value::Object(c)
}

/// A v1.0 result → the v0.3 result of `method`.
pub fn result_out(method: Method, result: Value) -> Value {
    match method {
        Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask => {
            event_out(result)
        }
        Method::GetTask | Method::CancelTask => task_out(result),
        Method::CreatePushConfig | Method::GetPushConfig => push_config_out(result),
        Method::ListPushConfigs => {
            let configs = result.get("configs").cloned().unwrap_or(json!([]));
            Value::Array(
                configs
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(push_config_out)
                    .collect(),
            )
        }
        Method::DeletePushConfig => Value::Null,
        Method::ListTasks | Method::GetExtendedAgentCard => result,
    }
}

/// One `SendMessageResponse` / `StreamResponse` (`{"task": …}`) → its v0.3 object.
fn event_out(event: Value) -> Value {
    let Value::Object(mut e) = event else {
        return event;
    };
    if let Some(task) = e.remove("task") {
        return task_out(task);
    }
    if let Some(message) = e.remove("message") {
        return message_out(message);
    }
    if let Some(Value::Object(mut update)) = e.remove("statusUpdate") {
        let state = update
            .get("status")
            .and_then(|s| s.get("state"))
            .cloned()
            .and_then(|s| serde_json::from_value::<TaskState>(s).ok());
        let last = state.is_some_and(|s| s.is_terminal() || s.is_interrupted());
        if let Some(status) = update.remove("status") {
            update.insert("status".into(), status_out(status));
        }
        update.insert("kind".into(), json!("status-update"));
        update.insert("final".into(), json!(last));
        return Value::Object(update);
    }
    if let Some(Value::Object(mut update)) = e.remove("artifactUpdate") {
        if let Some(artifact) = update.remove("artifact") {
            update.insert("artifact".into(), artifact_out(artifact));
        }
        update.insert("kind".into(), json!("artifact-update"));
        return Value::Object(update);
    }
    Value::Object(e)
}

fn task_out(task: Value) -> Value {
    let Value::Object(mut t) = task else {
        return task;
    };
    t.insert("kind".into(), json!("task"));
    if let Some(status) = t.remove("status") {
        t.insert("status".into(), status_out(status));
    }
    if let Some(Value::Array(history)) = t.remove("history") {
        t.insert(
            "history".into(),
            Value::Array(history.into_iter().map(message_out).collect()),
        );
    }
    if let Some(Value::Array(artifacts)) = t.remove("artifacts") {
        t.insert(
            "artifacts".into(),
            Value::Array(artifacts.into_iter().map(artifact_out).collect()),
        );
    }
    Value::Object(t)
}

fn status_out(status: Value) -> Value {
    let Value::Object(mut s) = status else {
        return status;
    };
    if let Some(state) = s
        .get("state")
        .cloned()
        .and_then(|v| serde_json::from_value::<TaskState>(v).ok())
    {
        s.insert("state".into(), json!(state.v03_name()));
    }
    if let Some(message) = s.remove("message") {
        s.insert("message".into(), message_out(message));
    }
    Value::Object(s)
}

fn message_out(message: Value) -> Value {
    let Value::Object(mut m) = message else {
        return message;
    };
    m.insert("kind".into(), json!("message"));
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    m.insert("role".into(), json!(role));
    if let Some(Value::Array(parts)) = m.remove("parts") {
        m.insert(
            "parts".into(),
            Value::Array(parts.into_iter().map(part_out).collect()),
        );
    }
    Value::Object(m)
}

fn artifact_out(artifact: Value) -> Value {
    let Value::Object(mut a) = artifact else {
        return artifact;
    };
    if let Some(Value::Array(parts)) = a.remove("parts") {
        a.insert(
            "parts".into(),
            Value::Array(parts.into_iter().map(part_out).collect()),
        );
    }
    Value::Object(a)
}

fn part_out(part: Value) -> Value {
    let Value::Object(mut p) = part else {
        return part;
    };
    let name = p.remove("filename");
    let media = p.remove("mediaType");
    let file = |key: &str, value: Value| {
        let mut file = Map::new();
        file.insert(key.into(), value);
        if let Some(name) = &name {
            file.insert("name".into(), name.clone());
        }
        if let Some(media) = &media {
            file.insert("mimeType".into(), media.clone());
        }
        Value::Object(file)
    };
    if let Some(raw) = p.remove("raw") {
        p.insert("kind".into(), json!("file"));
        p.insert("file".into(), file("bytes", raw));
    } else if let Some(url) = p.remove("url") {
        p.insert("kind".into(), json!("file"));
        p.insert("file".into(), file("uri", url));
    } else if p.contains_key("data") {
        p.insert("kind".into(), json!("data"));
    } else {
        p.insert("kind".into(), json!("text"));
    }
    Value::Object(p)
}

fn push_config_out(config: Value) -> Value {
    let Value::Object(mut c) = config else {
        return config;
    };
    let task_id = c.remove("taskId").unwrap_or(Value::Null);
    c.remove("tenant");
    if let Some(Value::Object(mut auth)) = c.remove("authentication") {
        let scheme = auth.remove("scheme").unwrap_or(json!("Bearer"));
        let mut out = Map::new();
        out.insert("schemes".into(), json!([scheme]));
        if let Some(credentials) = auth.remove("credentials") {
            out.insert("credentials".into(), credentials);
        }
        c.insert("authentication".into(), Value::Object(out));
    }
    json!({ "taskId": task_id, "pushNotificationConfig": Value::Object(c) })
}
