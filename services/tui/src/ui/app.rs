//! The application state and its one entry point, [`App::update`]: every input — a key, a
//! paste, a clock tick, something from the connection — goes in as a [`Msg`], and what the
//! connection task must do comes out as [`Command`]s. No terminal, socket or clock is
//! touched here, so tests drive the whole UI by feeding messages and rendering into a
//! `TestBackend`.

use std::collections::{HashMap, HashSet};

use crossterm::event::KeyEvent;
use lumina_client::protocol::methods::{
    DelegateRetryResult, McpServerStatus, SessionInfo, TeamInfo,
};
use lumina_client::protocol::{Decision, DeltaFrame, EventFrame};
use serde_json::Value;

use super::editor::Editor;
use super::transcript::{EntryKind, Level, Transcript};

/// Everything that can happen to the app.
// Messages are moved once through a channel and consumed; boxing the large variant would
// only add an allocation per event batch.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    /// The terminal was resized (only a redraw is needed).
    Resize,
    /// The wall clock (Unix ms); drives the spinner, elapsed times and timeouts.
    Tick(i64),
    /// The project's file list arrived (for `@` completion).
    Files(Vec<String>),
    Conn(ConnEvent),
}

/// What the connection task reports.
#[derive(Debug, Clone)]
pub enum ConnEvent {
    /// Connected (again) and, when a session is open, resubscribed and backfilled.
    Connected {
        server: String,
    },
    /// The connection dropped; reconnecting starts.
    Lost {
        reason: String,
    },
    /// A reconnect attempt failed; the next one follows.
    Retrying {
        attempt: u32,
        remaining_secs: u64,
        error: String,
    },
    /// Reconnecting failed for 30 s; waits for [`Command::Reconnect`].
    GaveUp {
        reason: String,
    },
    /// A session was opened (created or resumed from its start): the transcript restarts.
    Opened {
        session: SessionInfo,
        pending_permissions: Vec<EventFrame>,
    },
    /// The open session was resubscribed after a reconnect.
    Resumed {
        pending_permissions: Vec<EventFrame>,
    },
    /// Durable events of the open session, exactly once and in order.
    Events(Vec<EventFrame>),
    Delta(DeltaFrame),
    Sessions(Vec<SessionInfo>),
    /// The teams `/Team` can enter.
    Teams(Vec<TeamInfo>),
    /// The open session's MCP servers (`/mcp`).
    Mcp(Vec<McpServerStatus>),
    /// The answer to [`Command::RetryDelegate`]: where the call stands.
    DelegateRetried {
        call_id: String,
        result: DelegateRetryResult,
    },
    /// [`Command::RetryDelegate`] failed (the connection, a refusal): why, for people.
    DelegateRetryFailed {
        call_id: String,
        message: String,
    },
    Submitted {
        request_id: String,
        run_id: String,
    },
    /// A command failed; `request_id` names the submit when it was one.
    Failed {
        request_id: Option<String>,
        message: String,
    },
    Notice(String),
}

/// What the app asks the connection task to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Submit a prompt (creating the session first when none is open). `request_id` is
    /// both the request id and the idempotency key, so a retry after a reconnect is safe.
    Submit {
        request_id: String,
        prompt: String,
        settings: Value,
    },
    Interrupt {
        run_id: Option<String>,
    },
    Respond {
        request_id: String,
        decision: Decision,
        reason: Option<String>,
    },
    ListSessions,
    /// `team.list` (`/Team`, for the picker).
    TeamList,
    /// `team.enter` (`/Team NAME [TASK]`), creating the session first when none is open;
    /// then the task, if any, is submitted.
    TeamEnter {
        team: String,
        task: Option<TeamTask>,
    },
    /// `team.exit` (`/TeamOut`).
    TeamExit,
    /// `team.create` (`/NewTeam NAME [DISPLAY NAME]`).
    TeamCreate {
        name: String,
        display_name: String,
    },
    /// `mcp.status` of the open session.
    McpStatus,
    /// `skill.list` (`/skills`), with the open session's project skills.
    ListSkills,
    /// `mcp.trust` of a project server of the open session.
    McpTrust(String),
    /// `delegate.retry` of a delegation parked while its A2A agent is unreachable.
    RetryDelegate {
        call_id: String,
    },
    Open(String),
    NewSession,
    Reconnect,
    /// Stop: interrupt `interrupt` (the active run) first when set.
    Quit {
        interrupt: Option<String>,
    },
}

/// A prompt `/Team NAME TASK` submits once the session is in the team.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamTask {
    pub request_id: String,
    pub prompt: String,
    pub settings: Value,
}

/// Fixed facts from the command line.
#[derive(Debug, Clone, Default)]
pub struct AppOptions {
    /// Shown in the status line (the project directory's name).
    pub project: String,
    /// The model named by flags or settings, until a run reports its own.
    pub model: Option<String>,
    /// The `settings` member sent with every submit (flags and environment).
    pub settings: Value,
    pub history: Vec<String>,
}

/// The connection as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnState {
    Connected,
    Reconnecting {
        reason: String,
        attempt: u32,
        remaining_secs: u64,
    },
    Disconnected {
        reason: String,
    },
}

/// A modal screen over the transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help {
        scroll: u16,
    },
    /// `None` while the list is loading.
    Sessions {
        items: Option<Vec<SessionInfo>>,
        selected: usize,
    },
    /// The team picker (`/Team`); `None` while the list is loading.
    Teams {
        items: Option<Vec<TeamInfo>>,
        selected: usize,
    },
}

/// A permission request waiting for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPermission {
    pub request_id: String,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub preview: Option<String>,
}

/// The permission dialog's own state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionUi {
    pub selected: usize,
    /// The reason being typed after choosing "deny".
    pub reason: Option<String>,
    pub scroll: u16,
}

/// The completion popup above the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Popup {
    pub kind: PopupKind,
    /// (inserted text, description)
    pub items: Vec<(String, String)>,
    pub selected: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopupKind {
    Command,
    File,
}

/// The session shown.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMeta {
    pub id: String,
    pub title: String,
}

/// The run in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub run_id: String,
    pub started_ms: i64,
}

/// A tool call in progress, for the activity line.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningTool {
    pub call_id: String,
    pub tool: String,
    pub summary: String,
    pub started_ms: i64,
}

/// The whole UI state.
#[derive(Debug, Clone)]
pub struct App {
    pub options: AppOptions,
    pub transcript: Transcript,
    pub editor: Editor,
    pub popup: Option<Popup>,
    /// The popup was closed with Esc; it stays closed until the text changes.
    pub popup_dismissed: Option<String>,
    pub overlay: Option<Overlay>,
    pub permissions: Vec<PendingPermission>,
    pub permission_ui: PermissionUi,
    pub conn: ConnState,
    pub session: Option<SessionMeta>,
    pub run: Option<ActiveRun>,
    /// A submit sent but not yet answered: (request id, prompt).
    pub submitting: Option<(String, String)>,
    pub model: Option<String>,
    pub model_override: Option<String>,
    pub permission_mode: Option<String>,
    /// Input + output tokens of the session.
    pub tokens: u64,
    /// (context tokens, max tokens) of the last step.
    pub context: Option<(u64, u64)>,
    pub running_tools: Vec<RunningTool>,
    /// Delegations waiting for an unreachable A2A agent (Ctrl-R retries them).
    pub parked: super::delegates::Parked,
    /// The model is streaming reasoning (not shown) rather than text.
    pub thinking: bool,
    pub files: Vec<String>,
    pub now_ms: i64,
    /// When Ctrl-C was pressed once (a second press within 2 s quits).
    pub quit_armed_at: Option<i64>,
    pub quit: bool,
    /// The terminal should be fully repainted (Ctrl-L).
    pub clear_screen: bool,
    /// Prompts submitted since the last call to [`App::take_new_history`].
    pub new_history: Vec<String>,
    // Reducer bookkeeping: which entry a step, tool call or request belongs to.
    pub(crate) assistant_entries: HashMap<(String, u32), usize>,
    pub(crate) tool_entries: HashMap<String, usize>,
    pub(crate) request_calls: HashMap<String, String>,
    /// Steps whose deltas are no longer trusted (a reconnect lost some): wait for the
    /// durable message.
    pub(crate) stale_steps: HashSet<(String, u32)>,
    pub(crate) finished_steps: HashSet<(String, u32)>,
    /// Runs that ended (a late `session.submit` answer must not restart the spinner).
    pub(crate) finished_runs: HashSet<String>,
    /// Requests answered here (so a resume listing them again does not reopen the dialog).
    pub(crate) answered: HashSet<String>,
    pub(crate) selected_tool: Option<usize>,
    /// The team's `transcript` choices while the session is in one.
    pub(crate) team_transcript: Option<super::team::TeamTranscript>,
}

impl App {
    pub fn new(options: AppOptions) -> Self {
        let editor = Editor::new(options.history.clone());
        let model = options.model.clone();
        Self {
            options,
            transcript: Transcript::default(),
            editor,
            popup: None,
            popup_dismissed: None,
            overlay: None,
            permissions: Vec::new(),
            permission_ui: PermissionUi::default(),
            conn: ConnState::Connected,
            session: None,
            run: None,
            submitting: None,
            model,
            model_override: None,
            permission_mode: None,
            tokens: 0,
            team_transcript: None,
            context: None,
            running_tools: Vec::new(),
            parked: Default::default(),
            thinking: false,
            files: Vec::new(),
            now_ms: 0,
            quit_armed_at: None,
            quit: false,
            clear_screen: false,
            new_history: Vec::new(),
            assistant_entries: HashMap::new(),
            tool_entries: HashMap::new(),
            request_calls: HashMap::new(),
            stale_steps: HashSet::new(),
            finished_steps: HashSet::new(),
            finished_runs: HashSet::new(),
            answered: HashSet::new(),
            selected_tool: None,
        }
    }

    /// Applies one message; returns what the connection task must do.
    pub fn update(&mut self, msg: Msg) -> Vec<Command> {
        match msg {
            Msg::Key(key) => self.on_key(key),
            Msg::Paste(text) => {
                self.on_paste(&text);
                Vec::new()
            }
            Msg::Resize => Vec::new(),
            Msg::Tick(now_ms) => {
                self.now_ms = now_ms;
                if self
                    .quit_armed_at
                    .is_some_and(|at| now_ms - at > super::keys::QUIT_WINDOW_MS)
                {
                    self.quit_armed_at = None;
                }
                Vec::new()
            }
            Msg::Files(files) => {
                self.files = files;
                Vec::new()
            }
            Msg::Conn(event) => {
                self.on_conn(event);
                Vec::new()
            }
        }
    }

    /// True while something moves on screen (the spinner), so the loop keeps drawing.
    pub fn animating(&self) -> bool {
        self.run.is_some() || self.submitting.is_some()
    }

    /// Prompts submitted since the last call, for the history file.
    pub fn take_new_history(&mut self) -> Vec<String> {
        std::mem::take(&mut self.new_history)
    }

    /// Adds a notice to the transcript.
    pub fn notice(&mut self, level: Level, text: impl Into<String>) {
        self.transcript.push(EntryKind::Notice {
            level,
            text: text.into(),
        });
    }

    /// The settings for the next submit: the command line's, then `/model` and
    /// `/permissions` overrides.
    pub fn submit_settings(&self) -> Value {
        let mut settings = match &self.options.settings {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        if let Some(model) = &self.model_override {
            settings.insert("api_model".into(), Value::String(model.clone()));
        }
        if let Some(mode) = &self.permission_mode {
            settings.insert("permission_mode".into(), Value::String(mode.clone()));
        }
        Value::Object(settings)
    }

    /// The permission mode the next submit uses, as far as this client knows.
    pub fn effective_permission_mode(&self) -> Option<String> {
        self.permission_mode.clone().or_else(|| {
            self.options
                .settings
                .get("permission_mode")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    }
}
