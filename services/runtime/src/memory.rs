//! Agent integration of the Memory Fabric (docs/design.md#memory-fabric): what the runtime
//! writes to the optional [`MemoryStore`] and how runs read from it.
//!
//! - **Write path** ([`MemorySink`]): every visible `message.user`, `message.assistant`
//!   (text) and `tool.completed` event of a session's main stream becomes evidence after
//!   its journal append, in the session's project space ([`project_space`]), with source
//!   id `<session_id>:<seq>` (idempotent), written in batches by the runtime's one
//!   [`writer::EvidenceWriter`] (a journal append never waits for it; a run's end and
//!   every reader flush it first). Failures are logged, never fail a run.
//! - **Tools**: `memory_search {query}` (recall in the project space) and
//!   `memory_remember {text}` (a `user-note` evidence row, source id
//!   `<session_id>:note:<uuid>`), run by the runtime itself; read-only for permissions and
//!   offered only when a store is configured.
//! - **Context** ([`recall_section`]): the first step of a top-level run recalls evidence of
//!   other sessions of the project for the prompt, within `memory_context_tokens`, and adds
//!   it to the system prompt as `# Memory (earlier evidence)`.
//! - **Semantic compile** ([`after_run`], [`Compiler`]): with `memory_compile` on, the end of
//!   a top-level run schedules the store's compile job for the project space in the
//!   background (debounced, one at a time per space), asking `memory_compile_model` (default:
//!   the session's model) through [`CompileModel`]. It never blocks a turn; failures are
//!   warnings.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use lumina_memory::{
    CompileLimits, MemoryStore, NewEvidence, Recall, RecallQuery, RecalledItem, SemanticModel,
};
use lumina_model::{ChatRequest, ContentBlock, Message, ModelClient, Role};
use lumina_protocol::{Event, EventFrame, MAIN_STREAM};
use lumina_tools::{ToolDescriptor, ToolOutput};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::error::ArgError;
use crate::run::RunContext;
use crate::settings::{RunSettings, SettingsError};

pub(crate) mod writer;

use writer::EvidenceWriter;

/// Recall in the project's memory.
pub const SEARCH_TOOL: &str = "memory_search";
/// Record a note in the project's memory.
pub const REMEMBER_TOOL: &str = "memory_remember";

/// Tool outputs longer than this are cut before they become evidence.
const TOOL_OUTPUT_CAP: usize = 4 * 1024;
/// Items a `memory_search` call returns at most, and its token budget.
const SEARCH_ITEMS: usize = 10;
const SEARCH_TOKENS: usize = 2_000;
/// Items the memory section of the system prompt holds at most.
const CONTEXT_ITEMS: usize = 10;

/// The memory space of a project: the first 16 hex characters of the sha256 of its
/// canonical root (sessions store the canonical root).
pub fn project_space(project_root: &Path) -> String {
    let digest = hex::encode(Sha256::digest(
        project_root.display().to_string().as_bytes(),
    ));
    digest.chars().take(16).collect()
}

/// A session's writer into the memory store.
#[derive(Clone)]
pub(crate) struct MemorySink {
    pub store: Arc<dyn MemoryStore>,
    pub space: String,
    /// The runtime's compile scheduler.
    pub compiler: Arc<Compiler>,
    /// The runtime's evidence writer (of the same store).
    pub writer: Arc<EvidenceWriter>,
}

impl MemorySink {
    /// Hands the visible events of freshly journaled frames to the evidence writer.
    /// Returns at once; never fails.
    pub fn record(&self, frames: &[Arc<EventFrame>]) {
        self.writer
            .send(frames.iter().filter_map(|f| self.evidence(f)).collect());
    }

    fn evidence(&self, frame: &EventFrame) -> Option<NewEvidence> {
        if frame.stream != MAIN_STREAM {
            return None;
        }
        let (actor, text) = match &frame.event {
            Event::MessageUser { text, .. } => ("user".to_string(), text.clone()),
            Event::MessageAssistant { text, .. } => ("assistant".to_string(), text.clone()),
            // Memory tools' results are memory already (or acknowledgements).
            Event::ToolCompleted { tool, .. } if tool == SEARCH_TOOL || tool == REMEMBER_TOOL => {
                return None
            }
            Event::ToolCompleted { tool, output, .. } => (format!("tool:{tool}"), cap(output)),
            _ => return None,
        };
        if text.trim().is_empty() {
            return None;
        }
        let seq = i64::try_from(frame.seq).unwrap_or(i64::MAX);
        Some(NewEvidence {
            space: self.space.clone(),
            context: frame.session_id.clone(),
            session_id: frame.session_id.clone(),
            actor,
            event_time_ms: frame.ts_ms,
            turn_order: seq,
            text,
            source_id: format!("{}:{}", frame.session_id, frame.seq),
            source_offset: seq,
        })
    }
}

/// `text` cut to [`TOOL_OUTPUT_CAP`] bytes at a character boundary.
fn cap(text: &str) -> String {
    if text.len() <= TOOL_OUTPUT_CAP {
        return text.to_string();
    }
    let mut end = TOOL_OUTPUT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [truncated]", &text[..end])
}

/// The memory tools as the model sees them.
pub(crate) fn descriptors() -> Vec<ToolDescriptor> {
    vec![
        ToolDescriptor {
            name: SEARCH_TOOL.into(),
            description: "Search this project's long-term memory (earlier sessions' messages, \
                tool results and notes). Returns matching evidence, each with its source id."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."}
                },
                "required": ["query"]
            }),
            read_only: true,
            edits_files: false,
        },
        ToolDescriptor {
            name: REMEMBER_TOOL.into(),
            description: "Record a note in this project's long-term memory, for later \
                sessions (a fact, a decision, a preference)."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The note, self-contained."}
                },
                "required": ["text"]
            }),
            read_only: true,
            edits_files: false,
        },
    ]
}

pub(crate) fn descriptor(name: &str) -> Option<ToolDescriptor> {
    descriptors().into_iter().find(|d| d.name == name)
}

fn string_arg(args: &Value, key: &'static str) -> Result<String, ArgError> {
    match args.get(key).and_then(Value::as_str).map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(ArgError::NotANonEmptyString(key)),
    }
}

/// Runs a memory tool call. Errors are tool results.
pub(crate) async fn call(ctx: &RunContext, name: &str, args: &Value) -> ToolOutput {
    let Some(sink) = ctx.session.memory() else {
        return ToolOutput::error("no memory store is configured");
    };
    match name {
        SEARCH_TOOL => {
            let query = match string_arg(args, "query") {
                Ok(q) => q,
                Err(problem) => return ToolOutput::error(problem.to_string()),
            };
            let recall = RecallQuery {
                max_items: SEARCH_ITEMS,
                token_budget: SEARCH_TOKENS,
                ..RecallQuery::new(&sink.space, query)
            };
            sink.writer.flush().await;
            match sink.store.recall(&recall).await {
                Ok(found) if found.items.is_empty() => ToolOutput::ok("No matching memory."),
                Ok(found) => ToolOutput::ok(lumina_memory::retrieve::render(&found)),
                Err(err) => ToolOutput::error(format!("memory search failed: {err}")),
            }
        }
        REMEMBER_TOOL => {
            let text = match string_arg(args, "text") {
                Ok(t) => t,
                Err(problem) => return ToolOutput::error(problem.to_string()),
            };
            let journal = ctx.session.journal();
            let session_id = journal.session_id().to_string();
            let seq = journal.with_projection(|p| p.head_seq).await;
            let seq = i64::try_from(seq).unwrap_or(i64::MAX);
            let source_id = format!("{session_id}:note:{}", uuid::Uuid::new_v4());
            let note = NewEvidence {
                space: sink.space.clone(),
                context: session_id.clone(),
                session_id,
                actor: "user-note".into(),
                event_time_ms: lumina_memory::now_ms(),
                turn_order: seq,
                text,
                source_id: source_id.clone(),
                source_offset: seq,
            };
            // After the turns before it, like every row of the session.
            sink.writer.flush().await;
            match sink.store.append(vec![note]).await {
                Ok(_) => ToolOutput::ok(format!("Remembered (source {source_id}).")),
                Err(err) => ToolOutput::error(format!("the note was not recorded: {err}")),
            }
        }
        other => ToolOutput::error(format!("unknown memory tool `{other}`")),
    }
}

/// The `# Memory (earlier evidence)` section for a run's first step and the recalled source
/// ids, or `None` when memory is off, nothing was found, or the recall failed (logged).
/// Evidence of the current session is left out: it is in the conversation already.
pub(crate) async fn recall_section(ctx: &RunContext, budget: u32) -> Option<(String, Vec<String>)> {
    let sink = ctx.session.memory()?;
    if budget == 0 || ctx.prompt.trim().is_empty() {
        return None;
    }
    let query = RecallQuery {
        // Room for this session's own items, which are dropped below.
        max_items: CONTEXT_ITEMS * 2,
        token_budget: usize::try_from(budget).unwrap_or(usize::MAX),
        ..RecallQuery::new(&sink.space, ctx.prompt.clone())
    };
    // Every turn that ended before this run started is recallable.
    sink.writer.flush().await;
    let recall: Recall = match sink.store.recall(&query).await {
        Ok(r) => r,
        Err(err) => {
            tracing::warn!(session_id = %ctx.session.id(), error = %err, "memory recall failed");
            return None;
        }
    };
    let session_id = ctx.session.id();
    let mut items: Vec<&RecalledItem> = recall
        .items
        .iter()
        .filter(|i| i.session_id != session_id)
        .take(CONTEXT_ITEMS)
        .collect();
    if items.is_empty() {
        return None;
    }
    let source_ids = items.iter().map(|i| i.source_id.clone()).collect();
    items.sort_by_key(|i| (i.event_time_ms, i.turn_order));
    let mut section = String::from(
        "\n\n# Memory (earlier evidence)\n\nExcerpts of earlier sessions in this project, \
         oldest first. They may be outdated; prefer the current conversation and files.\n",
    );
    for item in items {
        section.push_str(&format!(
            "\n[source {} · {} · {}] {}",
            item.source_id,
            lumina_memory::time::display(item.event_time_ms),
            item.actor,
            item.text
        ));
        // What the semantic compile knows about it: replaced or disputed statements.
        for c in recall
            .context
            .conflicts
            .iter()
            .filter(|c| c.event_id == item.event_id)
        {
            section.push_str(&format!(
                "\n  ({})",
                lumina_memory::retrieve::conflict_note(c)
            ));
        }
    }
    section.push('\n');
    Some((section, source_ids))
}

/// How long the compile waits after a run ends before it starts (runs ending meanwhile
/// join the same compile).
pub const COMPILE_DEBOUNCE: Duration = Duration::from_secs(2);

/// The system prompt of a compile request (the instructions are in the user message the
/// memory crate builds).
const COMPILE_SYSTEM: &str =
    "You extract grounded long-term memory from conversation evidence. Answer with JSON only.";

/// The compile job's model: one request per batch on the session's model client, streamed
/// but shown to nobody; its text is the answer.
pub struct CompileModel {
    client: ModelClient,
    model: String,
}

impl CompileModel {
    /// A compile model over `client`; `model` is its identity in the semantic fingerprint.
    pub fn new(client: ModelClient, model: String) -> Self {
        Self { client, model }
    }

    /// The client of a run's settings with `memory_compile_model` (when set) as the
    /// primary model.
    pub(crate) fn from_settings(settings: &RunSettings) -> Result<Self, SettingsError> {
        let mut settings = settings.clone();
        if let Some(model) = settings
            .settings
            .memory_compile_model
            .clone()
            .filter(|m| !m.trim().is_empty())
        {
            settings.settings.api_model = Some(model);
        }
        let client = settings.model_client()?;
        let model = client.primary().model.clone();
        Ok(Self::new(client, model))
    }
}

#[async_trait::async_trait]
impl SemanticModel for CompileModel {
    fn model_id(&self) -> &str {
        &self.model
    }

    async fn propose(&self, prompt: &str) -> lumina_memory::Result<String> {
        let request = ChatRequest {
            system: COMPILE_SYSTEM.to_string(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::Text {
                    text: prompt.to_string(),
                }],
            }],
            tools: Vec::new(),
        };
        // Nobody watches a compile: deltas are dropped and nothing cancels it.
        let cancel = CancellationToken::new();
        self.client
            .stream(&request, &cancel, &mut |_| {})
            .await
            .map(|response| response.text)
            .map_err(|e| lumina_memory::Error::Model(e.to_string()))
    }
}

/// A space's compile while it is scheduled or running.
struct SpaceCompile {
    /// The model of the latest request (settings may change between runs).
    model: Arc<dyn SemanticModel>,
    /// A run ended after this round's compile started: compile again.
    again: bool,
}

/// Runs the compile job in the background: per space at most one task, which waits
/// [`COMPILE_DEBOUNCE`], compiles, and compiles again while runs keep ending.
pub struct Compiler {
    debounce: Duration,
    limits: CompileLimits,
    spaces: StdMutex<HashMap<String, SpaceCompile>>,
}

impl Compiler {
    /// A scheduler whose compiles start `debounce` after the first request.
    pub fn new(debounce: Duration) -> Self {
        Self {
            debounce,
            limits: CompileLimits::default(),
            spaces: StdMutex::new(HashMap::new()),
        }
    }

    /// Whether a compile of `space` is scheduled or running.
    pub fn busy(&self, space: &str) -> bool {
        self.lock().contains_key(space)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SpaceCompile>> {
        self.spaces.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Schedules a compile of `space`; joins the one already scheduled or running.
    pub fn schedule(
        self: &Arc<Self>,
        store: Arc<dyn MemoryStore>,
        space: String,
        model: Arc<dyn SemanticModel>,
    ) {
        {
            let mut spaces = self.lock();
            if let Some(job) = spaces.get_mut(&space) {
                job.model = model;
                job.again = true;
                return;
            }
            spaces.insert(
                space.clone(),
                SpaceCompile {
                    model,
                    again: false,
                },
            );
        }
        let compiler = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(compiler.debounce).await;
                let model = {
                    let mut spaces = compiler.lock();
                    match spaces.get_mut(&space) {
                        Some(job) => {
                            job.again = false;
                            Arc::clone(&job.model)
                        }
                        None => return,
                    }
                };
                match store.compile(&space, model.as_ref(), compiler.limits).await {
                    Ok(report) => match &report.failed {
                        Some(failure) => tracing::warn!(
                            space = %space,
                            first_event_id = failure.first_event_id,
                            attempts = failure.attempts,
                            error = %failure.error,
                            "memory compile batch failed; retried after the next run"
                        ),
                        None => tracing::debug!(
                            space = %space,
                            batches = report.batches,
                            accepted = report.accepted,
                            rejected = report.rejected,
                            "memory compile done"
                        ),
                    },
                    Err(err) => {
                        tracing::warn!(space = %space, error = %err, "memory compile failed")
                    }
                }
                let mut spaces = compiler.lock();
                if !spaces.get(&space).is_some_and(|job| job.again) {
                    spaces.remove(&space);
                    return;
                }
            }
        });
    }
}

/// The end of a top-level run: schedules the semantic compile of the project space when
/// `memory_compile` is on and a store is configured. Never blocks, never fails.
pub(crate) fn after_run(ctx: &RunContext) {
    let Some(sink) = ctx.session.memory() else {
        return;
    };
    if !ctx.settings.settings.memory_compile {
        return;
    }
    match CompileModel::from_settings(&ctx.settings) {
        // The run flushed its evidence before its end was journaled.
        Ok(model) => {
            sink.compiler
                .schedule(Arc::clone(&sink.store), sink.space.clone(), Arc::new(model))
        }
        Err(err) => {
            tracing::warn!(session_id = %ctx.session.id(), error = %err, "memory compile skipped: no model")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_spaces_are_stable_and_distinct() {
        let a = project_space(Path::new("/work/a"));
        assert_eq!(a.len(), 16);
        assert_eq!(a, project_space(Path::new("/work/a")));
        assert_ne!(a, project_space(Path::new("/work/b")));
    }

    #[test]
    fn long_tool_outputs_are_capped_at_a_char_boundary() {
        let long = "é".repeat(TOOL_OUTPUT_CAP);
        let capped = cap(&long);
        assert!(capped.len() < TOOL_OUTPUT_CAP + 32);
        assert!(capped.ends_with("… [truncated]"));
        assert_eq!(cap("short"), "short");
    }

    #[tokio::test]
    async fn schedules_join_one_compile_per_space() {
        use lumina_memory::conformance::{profile_conversation, ScriptedModel};
        use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};

        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn MemoryStore> =
            Arc::new(SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap());
        store.append(profile_conversation("p")).await.unwrap();
        let model = Arc::new(ScriptedModel::new());
        let compiler = Arc::new(Compiler::new(Duration::from_millis(50)));
        for _ in 0..3 {
            compiler.schedule(Arc::clone(&store), "p".into(), model.clone());
        }
        assert!(compiler.busy("p"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while compiler.busy("p") && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!compiler.busy("p"));
        assert_eq!(model.prompts().len(), 1, "one compile for three schedules");
        assert_eq!(
            store.semantic_status("p").await.unwrap().last_event_id,
            store.head("p").await.unwrap().last_event_id
        );
    }
}
