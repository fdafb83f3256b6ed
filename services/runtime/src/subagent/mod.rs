//! Sub-agents: the `agent{prompt, description?, tools?}` tool starts a child agent with an
//! isolated context — its own history (only its prompt) and a system prompt saying it is a
//! sub-agent — the parent's settings (permission mode and rules included) and a subset of
//! the parent's tools. Its final text is the tool's result.
//!
//! - Journal: `agent.started` / `agent.completed` (or `agent.interrupted`) on the main
//!   stream; the child's run on the child stream `agent/<child_id>` (`run.started` with
//!   `run_id = child_id`, `message.user`, steps, tools, the terminal event).
//! - Limits (settings, read at the call): at most `subagent_max_parallel` sub-agents running
//!   in a session, depth at most `subagent_max_depth`, at most `subagent_max_total` started
//!   by one top-level run and all its descendants (its "agent tree"). A call beyond a limit
//!   gets an error result naming the limit; nothing waits for a slot.
//! - Tools: by default every tool of the parent, `agent` only while the child may still
//!   have children of its own (depth below the maximum); `tools` narrows that to names the
//!   parent has. A child at the maximum depth that calls `agent` anyway gets the depth
//!   limit error.

mod child;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use lumina_tools::ToolDescriptor;
use serde_json::{json, Value};

pub(crate) use child::run_child;

use crate::error::ArgError;
use crate::goal::goal_complete_descriptor;
use crate::run::RunContext;
use crate::session::Session;
use crate::settings::RunSettings;

/// The name of the sub-agent tool.
pub const AGENT_TOOL: &str = "agent";

/// Counters shared by a top-level run and all its descendants.
#[derive(Debug, Default)]
pub(crate) struct AgentTree {
    started: AtomicU32,
}

/// Where a run sits in its agent tree.
#[derive(Debug, Clone)]
pub(crate) struct AgentScope {
    /// 0 for a top-level run.
    pub depth: u32,
    pub tree: Arc<AgentTree>,
    /// The tools it may use; `None` = every tool.
    pub tools: Option<Vec<String>>,
    /// The parent's one-line description of the task (sub-agents only).
    pub description: Option<String>,
}

impl AgentScope {
    pub(crate) fn root() -> Self {
        Self {
            depth: 0,
            tree: Arc::new(AgentTree::default()),
            tools: None,
            description: None,
        }
    }

    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// A reserved sub-agent slot: counts against the session's parallel limit until dropped,
/// and against the tree's total once [`Slot::commit`]ted (a call that never starts its
/// child gives its share back).
pub(crate) struct Slot {
    session: Arc<Session>,
    tree: Arc<AgentTree>,
    committed: bool,
}

impl Slot {
    pub(crate) fn commit(&mut self) {
        self.committed = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.session.agents_live().fetch_sub(1, Ordering::SeqCst);
        if !self.committed {
            self.tree.started.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The sub-agent limit that refused an `agent` call; the message is its tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LimitReached {
    #[error(
        "sub-agent limit reached: subagent_max_depth = {max} (this agent is at depth {depth}, \
         so it cannot start another); do the task yourself"
    )]
    Depth { max: u32, depth: u32 },
    #[error(
        "sub-agent limit reached: subagent_max_total = {max} (this task has started that many \
         sub-agents already); do the rest yourself"
    )]
    Total { max: u32 },
    #[error(
        "sub-agent limit reached: subagent_max_parallel = {max} (that many sub-agents are \
         running in this session); wait for them or do this yourself"
    )]
    Parallel { max: u32 },
}

/// Reserves a slot for a sub-agent of `ctx`, or names the limit that refuses it.
pub(crate) fn reserve(ctx: &RunContext, settings: &RunSettings) -> Result<Slot, LimitReached> {
    let s = &settings.settings;
    let depth = ctx.agent.depth + 1;
    if depth > s.subagent_max_depth {
        return Err(LimitReached::Depth {
            max: s.subagent_max_depth,
            depth: ctx.agent.depth,
        });
    }
    let max_total = s.subagent_max_total;
    let tree = ctx.agent.tree.clone();
    if tree
        .started
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max_total).then_some(n + 1)
        })
        .is_err()
    {
        return Err(LimitReached::Total { max: max_total });
    }
    let max_parallel = s.subagent_max_parallel;
    if ctx
        .session
        .agents_live()
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max_parallel).then_some(n + 1)
        })
        .is_err()
    {
        tree.started.fetch_sub(1, Ordering::SeqCst);
        return Err(LimitReached::Parallel { max: max_parallel });
    }
    Ok(Slot {
        session: ctx.session.clone(),
        tree,
        committed: false,
    })
}

/// The tools `ctx` offers the model, in registry order, then `agent` and `goal_complete`.
pub(crate) fn offered_tools(ctx: &RunContext, settings: &RunSettings) -> Vec<ToolDescriptor> {
    let mut tools: Vec<ToolDescriptor> = ctx
        .session
        .tools()
        .descriptors()
        .into_iter()
        .chain(crate::mcp::tools(ctx).iter().map(|t| t.descriptor()))
        .filter(|d| ctx.agent.allows(&d.name))
        .collect();
    if ctx.agent.allows(AGENT_TOOL) && ctx.agent.depth < settings.settings.subagent_max_depth {
        tools.push(descriptor());
    }
    if ctx.goal_turns().is_some() {
        tools.push(goal_complete_descriptor());
    }
    if let Some(team) = &ctx.team {
        tools.extend(crate::team::tools::descriptors(team));
    }
    if crate::delegate::offered(&settings.settings)
        && ctx.agent.allows(crate::delegate::DELEGATE_TOOL)
    {
        tools.push(crate::delegate::descriptor(&settings.settings));
    }
    if ctx.session.memory().is_some() {
        tools.extend(
            crate::memory::descriptors()
                .into_iter()
                .filter(|d| ctx.agent.allows(&d.name)),
        );
    }
    tools
}

/// The `agent` tool as the model sees it.
pub(crate) fn descriptor() -> ToolDescriptor {
    ToolDescriptor {
        name: AGENT_TOOL.into(),
        description: "Delegate one self-contained task to a sub-agent with a fresh, empty \
            context; its final answer comes back as this tool's result. It does not see this \
            conversation, so `prompt` must say everything it needs. Several `agent` calls in \
            one message run in parallel. `tools` limits it to some of your tools (default: \
            all of them)."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The complete task."},
                "description": {"type": "string", "description": "A few words naming the task."},
                "tools": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Names of the tools it may use."
                }
            },
            "required": ["prompt"]
        }),
        // Starting a child changes nothing by itself; its own calls ask for permission.
        read_only: true,
        edits_files: false,
    }
}

/// Arguments of an `agent` call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentArgs {
    pub prompt: String,
    pub description: Option<String>,
    pub tools: Option<Vec<String>>,
}

pub(crate) fn parse_args(args: &Value) -> Result<AgentArgs, ArgError> {
    let prompt = args
        .get("prompt")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .ok_or(ArgError::Required("prompt"))?;
    let description = match args.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(ArgError::NotAString("description")),
    };
    let tools = match args.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or(ArgError::NotToolNames("tools"))?,
        ),
        Some(_) => return Err(ArgError::NotToolNames("tools")),
    };
    Ok(AgentArgs {
        prompt: prompt.to_string(),
        description,
        tools,
    })
}

/// The system prompt's section for a sub-agent.
pub(crate) fn system_section(scope: &AgentScope, max_depth: u32) -> String {
    let task = scope
        .description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    format!(
        "\n# Sub-agent\nYou are a sub-agent (depth {} of at most {max_depth}) started by another \
         agent for one task{task}. You do not see that agent's conversation: what you know is \
         the task in the first user message and what your tools show you. Work with your \
         tools, then end with one final message that stands on its own: it is returned to the \
         other agent as the result of its `agent` call.\n",
        scope.depth
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_arguments_are_checked() {
        let args = parse_args(&json!({"prompt": " look ", "tools": ["read_file"]})).unwrap();
        assert_eq!(
            args,
            AgentArgs {
                prompt: "look".into(),
                description: None,
                tools: Some(vec!["read_file".into()]),
            }
        );
        assert!(parse_args(&json!({"prompt": ""})).is_err());
        assert!(parse_args(&json!({"prompt": "x", "tools": "read_file"})).is_err());
        assert!(parse_args(&json!({"prompt": "x", "tools": [1]})).is_err());
    }

    #[test]
    fn a_tool_subset_allows_only_its_names() {
        let mut scope = AgentScope::root();
        assert!(scope.allows("shell") && scope.allows(AGENT_TOOL));
        scope.tools = Some(vec!["read_file".into()]);
        assert!(scope.allows("read_file"));
        assert!(!scope.allows("shell") && !scope.allows(AGENT_TOOL));
    }
}
