//! The agent runtime: sessions over a durable journal, the agent loop, context compilation
//! and compaction, permissions, sub-agents (`agent` tool), delegation to remote A2A agents
//! (`a2a_delegate`, remote team members), goal mode, agent teams, and crash recovery. Transport-free: the backend's WebSocket
//! server, the CLI and tests all drive it through [`Runtime`] and [`Session`].

mod audit;
pub mod context;
pub mod delegate;
mod error;
pub mod goal;
pub mod hooks;
pub mod journal;
pub mod mcp;
mod mcp_sign_in;
pub mod memory;
pub mod projection;
mod queue;
pub mod recovery;
mod run;
pub mod session;
pub mod settings;
mod subagent;
pub mod team;
mod tool_call;
pub mod trust;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lumina_config::{AppRoot, Env};
use lumina_journal::{now_ms, Fence, JournalStore, SessionKey, SessionRecord};
use lumina_protocol::methods::{SessionCreateParams, SessionInfo};
use lumina_protocol::{Event, SessionStatus};
use lumina_tools::ToolRegistry;
use tokio::sync::Mutex;

pub use error::{Error, Result};
pub use journal::{Outbound, SessionJournal};
pub use session::Session;

/// How a runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub app_root: AppRoot,
    /// Environment snapshot used for the settings' env layer.
    pub env: Env,
    /// Tenant whose sessions this runtime serves (local profile: `local`).
    pub tenant: String,
    /// Project root for sessions created without one.
    pub default_project_root: PathBuf,
}

/// Decides whether this instance may write a session, and with which fencing token.
/// Local profile: [`AlwaysOwned`]; cluster profile: a Redis lease whose token is minted on
/// every acquisition.
#[async_trait::async_trait]
pub trait Ownership: Send + Sync + 'static {
    /// The fence to write `session_id` with, acquiring ownership when needed. Fails when this
    /// instance may not own the session (draining, or another instance holds it).
    async fn acquire(&self, session_id: &str) -> Result<Fence>;

    /// Called when the runtime stops writing a session (eviction, archive).
    async fn release(&self, _session_id: &str) {}

    /// Whether ownership taken with `fence` is still held now (checked, without I/O,
    /// before an open session is used again). `false` makes the runtime drop the open
    /// session and acquire afresh: a lease lost and not yet acted on must not let the
    /// next request run on the old owner state.
    fn holds(&self, _session_id: &str, _fence: Fence) -> bool {
        true
    }
}

/// The local profile's in-process lease: always held, one constant fence.
pub struct AlwaysOwned(pub Fence);

#[async_trait::async_trait]
impl Ownership for AlwaysOwned {
    async fn acquire(&self, _session_id: &str) -> Result<Fence> {
        Ok(self.0)
    }
}

/// Told about every session a runtime opens for writing (the cluster relays its events and
/// deltas to other instances).
pub trait SessionObserver: Send + Sync + 'static {
    fn opened(&self, session: &Arc<Session>);
}

/// State every session of a runtime shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub app_root: AppRoot,
    pub env: Env,
    pub tools: ToolRegistry,
    /// The Memory Fabric store (local profile: SQLite under the AppRoot; cluster: PostgreSQL
    /// per tenant) and its one evidence writer.
    pub memory: Option<(
        Arc<dyn lumina_memory::MemoryStore>,
        Arc<memory::writer::EvidenceWriter>,
    )>,
    /// Background semantic compiles of the memory store (`memory_compile`).
    pub compiler: Arc<memory::Compiler>,
    /// The MCP servers of the user and of each project (`crate::mcp`).
    pub mcp: Option<lumina_mcp::McpManager>,
    /// The A2A client of `a2a_delegate` and remote team members (its card cache is shared).
    pub a2a: lumina_a2a::A2aClient,
    /// Where team member tasks run (cluster with `team_distributed`); `None`: here.
    pub placement: Option<Arc<dyn team::MemberPlacement>>,
}

impl Shared {
    /// The memory writer of a session of the project at `project_root`, when the runtime
    /// has a store.
    pub(crate) fn memory_sink(&self, project_root: &str) -> Option<memory::MemorySink> {
        self.memory
            .clone()
            .map(|(store, writer)| memory::MemorySink {
                store,
                space: memory::project_space(Path::new(project_root)),
                compiler: self.compiler.clone(),
                writer,
            })
    }
}

/// Cheap to clone; all clones share the open sessions.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
    options: Arc<RuntimeOptions>,
    store: Arc<dyn JournalStore>,
    ownership: Arc<dyn Ownership>,
    observer: Option<Arc<dyn SessionObserver>>,
    sessions: Arc<Mutex<HashMap<String, Arc<Session>>>>,
}

impl Runtime {
    pub fn new(
        options: RuntimeOptions,
        store: Arc<dyn JournalStore>,
        tools: ToolRegistry,
        ownership: Arc<dyn Ownership>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                app_root: options.app_root.clone(),
                env: options.env.clone(),
                tools,
                memory: None,
                compiler: Arc::new(memory::Compiler::new(memory::COMPILE_DEBOUNCE)),
                mcp: None,
                a2a: lumina_a2a::A2aClient::default(),
                placement: None,
            }),
            options: Arc::new(options),
            store,
            ownership,
            observer: None,
            sessions: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Adds an observer of opened sessions.
    pub fn with_observer(mut self, observer: Arc<dyn SessionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Gives the runtime's sessions a Memory Fabric store: visible events become evidence,
    /// runs get the `memory_search`/`memory_remember` tools and recalled context. Call it
    /// before opening sessions.
    pub fn with_memory(mut self, memory: Arc<dyn lumina_memory::MemoryStore>) -> Self {
        let mut shared = (*self.shared).clone();
        let writer = Arc::new(memory::writer::EvidenceWriter::new(Arc::clone(&memory)));
        shared.memory = Some((memory, writer));
        self.shared = Arc::new(shared);
        self
    }

    /// Gives the runtime's runs the tools of MCP servers (`crate::mcp`). Call it before
    /// opening sessions.
    pub fn with_mcp(mut self, mcp: lumina_mcp::McpManager) -> Self {
        let mut shared = (*self.shared).clone();
        shared.mcp = Some(mcp);
        self.shared = Arc::new(shared);
        self
    }

    /// Gives `a2a_delegate` and remote team members this A2A client (e.g. one allowing
    /// loopback agents, in tests). Call it before opening sessions.
    pub fn with_a2a_client(mut self, client: lumina_a2a::A2aClient) -> Self {
        let mut shared = (*self.shared).clone();
        shared.a2a = client;
        self.shared = Arc::new(shared);
        self
    }

    /// The A2A client of `a2a_delegate` and remote team members (its card cache is shared
    /// with every clone).
    pub fn a2a_client(&self) -> &lumina_a2a::A2aClient {
        &self.shared.a2a
    }

    /// The settings a run in the project of `session_id` (else `project_root`, else none)
    /// starts from: the layered files and the environment, without a submit's overrides.
    pub async fn listing_settings(
        &self,
        session_id: Option<&str>,
        project_root: Option<&str>,
    ) -> Result<lumina_config::Settings> {
        let project = self.listing_project(session_id, project_root).await?;
        lumina_config::load(
            &self.options.app_root,
            project.as_deref(),
            &self.options.env,
            &Default::default(),
        )
        .map_err(|e| Error::Settings(settings::SettingsError::Load(e)))
    }

    /// Runs agent teams' member tasks where `placement` says (another cluster instance,
    /// docs/teams.md#distributed-members). Call it before opening sessions.
    pub fn with_member_placement(mut self, placement: Arc<dyn team::MemberPlacement>) -> Self {
        let mut shared = (*self.shared).clone();
        shared.placement = Some(placement);
        self.shared = Arc::new(shared);
        self
    }

    /// The MCP manager, when the runtime has one.
    pub fn mcp(&self) -> Option<&lumina_mcp::McpManager> {
        self.shared.mcp.as_ref()
    }

    pub fn tenant(&self) -> &str {
        &self.options.tenant
    }

    pub fn store(&self) -> &Arc<dyn JournalStore> {
        &self.store
    }

    fn key(&self, session_id: &str) -> SessionKey {
        SessionKey::new(&self.options.tenant, session_id)
    }

    /// Opens every session whose projection says a run was in flight, so that crash recovery
    /// closes it before anyone lists or resumes it. Returns how many sessions were opened.
    pub async fn recover_all(&self) -> Result<usize> {
        let records = self
            .store
            .list_sessions(&self.options.tenant, false)
            .await?;
        let mut opened = 0;
        for record in records {
            let status = record.summary.get("status").and_then(|s| s.as_str());
            if status.map(SessionStatus::from) != Some(SessionStatus::Idle) {
                match self.session(&record.session_id).await {
                    Ok(_) => opened += 1,
                    Err(err) => {
                        tracing::warn!(session_id = %record.session_id, error = %err, "recovery could not open session")
                    }
                }
            }
        }
        Ok(opened)
    }

    /// Creates a session rooted at `project_root` (or the default root).
    pub async fn create_session(&self, params: SessionCreateParams) -> Result<SessionInfo> {
        let root = params
            .project_root
            .map(PathBuf::from)
            .unwrap_or_else(|| self.options.default_project_root.clone());
        let root = canonical_dir(&root)?;
        let session_id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let title = params.title.unwrap_or_default();
        let record = SessionRecord {
            tenant: self.options.tenant.clone(),
            session_id: session_id.clone(),
            title: title.clone(),
            project_root: root.display().to_string(),
            created_at_ms: now,
            updated_at_ms: now,
            archived: false,
            summary: serde_json::Value::Null,
        };
        let fence = self.ownership.acquire(&session_id).await?;
        self.store.create_session(&record, fence).await?;
        let session = self.session(&session_id).await?;
        session
            .journal()
            .append(vec![Event::SessionCreated {
                title,
                project_root: root.display().to_string(),
            }])
            .await?;
        self.session_start_hooks(&session).await?;
        session.info().await
    }

    /// Runs the `session_start` hooks of a new session. Settings that do not load skip them
    /// (the first submit reports the problem).
    async fn session_start_hooks(&self, session: &Session) -> Result<()> {
        let settings = match lumina_config::load(
            &self.options.app_root,
            Some(session.project_root()),
            &self.options.env,
            &Default::default(),
        ) {
            Ok(settings) => settings,
            Err(err) => {
                tracing::warn!(session_id = %session.id(), error = %err, "session_start hooks skipped: settings do not load");
                return Ok(());
            }
        };
        let (set, _) = hooks::HookSet::from_settings(&settings.hooks);
        let scope = hooks::HookScope {
            journal: session.journal(),
            stream: lumina_protocol::MAIN_STREAM,
            project_root: session.project_root(),
            run_id: None,
            call_id: None,
            tool: None,
            cancel: None,
        };
        hooks::run_hooks(
            &set,
            hooks::HookEvent::SessionStart,
            &scope,
            serde_json::json!({ "source": "create" }),
        )
        .await?;
        Ok(())
    }

    /// The project a listing is for: the session's, else `project_root` (an existing
    /// directory), else none.
    async fn listing_project(
        &self,
        session_id: Option<&str>,
        project_root: Option<&str>,
    ) -> Result<Option<PathBuf>> {
        match (session_id, project_root) {
            (Some(id), _) => self
                .store
                .session(&self.options.tenant, id)
                .await?
                .map(|r| Some(PathBuf::from(r.project_root)))
                .ok_or_else(|| Error::SessionNotFound(id.to_string())),
            (None, Some(root)) => canonical_dir(Path::new(root)).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// `team.list`: the user's and built-in teams, and the project's (of `session_id`, else
    /// `project_root`).
    pub async fn list_teams(
        &self,
        session_id: Option<&str>,
        project_root: Option<&str>,
    ) -> Result<lumina_protocol::methods::TeamListResult> {
        let project = self.listing_project(session_id, project_root).await?;
        Ok(team::list_teams(&self.options.app_root, project.as_deref()))
    }

    /// `skill.list`: the user's and built-in skills, and the project's (of `session_id`,
    /// else `project_root`): the discovery a run in that project does.
    pub async fn list_skills(
        &self,
        session_id: Option<&str>,
        project_root: Option<&str>,
    ) -> Result<lumina_protocol::methods::SkillListResult> {
        use lumina_protocol::methods::{SkillInfo, SkillListResult};
        use lumina_skills::{SkillCatalog, SkillLocation};
        let app = &self.options.app_root;
        let mut locations = Vec::new();
        if let Some(project) = self.listing_project(session_id, project_root).await? {
            locations.push((SkillLocation::Project, project.join("skills")));
            locations.push((
                SkillLocation::ProjectPrivate,
                project.join(".Lumina").join("PROJECT_SKILLS"),
            ));
        }
        locations.push((SkillLocation::User, app.user_skills_dir()));
        locations.push((SkillLocation::Builtin, app.builtin_skills_dir()));
        let catalog = SkillCatalog::from_locations(&locations);
        let shadows = |name: &str| {
            catalog
                .conflicts
                .iter()
                .find(|c| c.name == name)
                .map_or(0, |c| u32::try_from(c.shadowed.len()).unwrap_or(u32::MAX))
        };
        Ok(SkillListResult {
            skills: catalog
                .skills
                .iter()
                .map(|skill| SkillInfo {
                    name: skill.name.clone(),
                    description: skill.description.clone(),
                    source: skill_source(skill.location),
                    shadows: shadows(&skill.name),
                })
                .collect(),
            errors: catalog.errors.clone(),
        })
    }

    /// `team.create`: a new user team from the `/NewTeam` template.
    pub fn create_team(
        &self,
        params: &lumina_protocol::methods::TeamCreateParams,
    ) -> Result<lumina_protocol::methods::TeamCreateResult> {
        team::create_team(&self.options.app_root, &params.name, &params.display_name)
    }

    /// Sessions of this tenant, newest first.
    pub async fn list_sessions(&self, include_archived: bool) -> Result<Vec<SessionInfo>> {
        let records = self
            .store
            .list_sessions(&self.options.tenant, include_archived)
            .await?;
        Ok(records.iter().map(projection::session_info).collect())
    }

    /// The open session, opening (and recovering) it on first use. Opening acquires
    /// ownership; a session whose writer was fenced is reopened with a fresh fence.
    pub async fn session(&self, session_id: &str) -> Result<Arc<Session>> {
        let mut sessions = self.sessions.lock().await;
        if let Some(session) = sessions.get(session_id) {
            let fenced = session.is_fenced();
            if !fenced && self.ownership.holds(session_id, session.journal().fence()) {
                return Ok(session.clone());
            }
            // Fenced out, or its lease was lost (the loss may not have been acted on yet):
            // stop the old owner state before taking the session again.
            session.mark_fenced();
            session.cancel_all();
            sessions.remove(session_id);
            if fenced {
                // A newer owner's fence refused our writes: whatever lease we still believe
                // we hold is stale, so let go of it before asking again.
                self.ownership.release(session_id).await;
            }
        }
        let key = self.key(session_id);
        let record = self
            .store
            .session(&key.tenant, session_id)
            .await?
            .ok_or_else(|| Error::SessionNotFound(session_id.to_string()))?;
        let fence = self.ownership.acquire(session_id).await?;
        let memory = self.shared.memory_sink(&record.project_root);
        let journal = SessionJournal::open(self.store.clone(), key, fence)
            .await?
            .with_memory(memory);
        if !record.archived {
            recovery::close_open_work(&journal).await?;
        }
        let session = Arc::new(Session::new(
            journal,
            PathBuf::from(&record.project_root),
            self.shared.clone(),
        ));
        if !record.archived {
            // A team round open before a crash resumes first; then follow-ups queued before
            // a crash or a hand-over start, in order.
            session.resume_team().await;
            session.resume_queued().await;
        }
        sessions.insert(session_id.to_string(), session.clone());
        if let Some(observer) = &self.observer {
            observer.opened(&session);
        }
        Ok(session)
    }

    /// Archives a session: stops its run, journals `session.archived`, moves it away.
    pub async fn archive(&self, session_id: &str) -> Result<()> {
        let session = self.session(session_id).await?;
        if session.journal().with_projection(|p| p.archived).await {
            return Ok(());
        }
        let queued = session
            .journal()
            .with_projection(|p| !p.queued.is_empty())
            .await;
        if session.is_running() || queued {
            return Err(Error::Busy(session_id.to_string()));
        }
        session
            .journal()
            .append(vec![Event::SessionArchived {}])
            .await?;
        self.sessions.lock().await.remove(session_id);
        self.store
            .archive(&self.key(session_id), session.journal().fence())
            .await?;
        self.ownership.release(session_id).await;
        Ok(())
    }

    /// Stops writing a session at once: cancels its run and forgets its in-memory state
    /// (a lost lease, or a hand-over during drain). Returns whether it was open.
    pub async fn evict(&self, session_id: &str) -> bool {
        self.evict_fenced_at(session_id, Fence::MAX).await
    }

    /// Stops writing a session like [`Runtime::evict`], but only while it is open with a
    /// fence no newer than `fence`: the loss of an old lease, noticed late, must not stop
    /// the work of a session taken again since (with a higher fence). Returns whether it
    /// was evicted.
    pub async fn evict_fenced_at(&self, session_id: &str, fence: Fence) -> bool {
        let mut sessions = self.sessions.lock().await;
        let stale = sessions
            .get(session_id)
            .is_some_and(|session| session.journal().fence() <= fence);
        if !stale {
            return false;
        }
        match sessions.remove(session_id) {
            Some(session) => {
                session.mark_fenced();
                session.cancel_all();
                true
            }
            None => false,
        }
    }

    /// Ids of the sessions open on this runtime.
    pub async fn open_session_ids(&self) -> Vec<String> {
        self.sessions.lock().await.keys().cloned().collect()
    }

    /// Waits (bounded) until no run is in flight; false on timeout.
    pub async fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.any_running().await {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        true
    }

    /// Cancels every running run (shutdown).
    pub async fn cancel_all(&self) {
        for session in self.sessions.lock().await.values() {
            session.cancel_all();
        }
    }

    /// How many of this runtime's sessions have a run running: an active run whose terminal
    /// event is not journaled yet. A run that has journaled its end no longer counts, though
    /// its task is still winding down (the next queued run, the session's dispatch lock): a
    /// client that saw `run.completed` and submits at once is not refused for it.
    pub async fn running_sessions(&self) -> usize {
        let active: Vec<(Arc<Session>, String)> = self
            .sessions
            .lock()
            .await
            .values()
            .filter_map(|s| s.active_run_id().map(|run| (s.clone(), run)))
            .collect();
        let mut running = 0;
        for (session, run) in active {
            if session
                .journal()
                .with_projection(|p| p.open_runs.contains_key(&run))
                .await
            {
                running += 1;
            }
        }
        running
    }

    /// Whether any session has a run in flight.
    pub async fn any_running(&self) -> bool {
        self.sessions.lock().await.values().any(|s| s.is_running())
    }
}

fn canonical_dir(path: &Path) -> Result<PathBuf> {
    let canonical = path
        .canonicalize()
        .map_err(|_| Error::BadProjectRoot(path.display().to_string()))?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(Error::BadProjectRoot(path.display().to_string()))
    }
}

/// A skill's location as the protocol names it.
fn skill_source(location: lumina_skills::SkillLocation) -> lumina_protocol::SkillSource {
    use lumina_protocol::SkillSource;
    use lumina_skills::SkillLocation;
    match location {
        SkillLocation::Project => SkillSource::Project,
        SkillLocation::ProjectPrivate => SkillSource::ProjectPrivate,
        SkillLocation::User => SkillSource::User,
        SkillLocation::Builtin => SkillSource::Builtin,
    }
}
