//! What each built-in slash command does. Commands whose backend part does not exist yet
//! say so in the transcript instead of pretending.

use super::app::{App, Command, Overlay, TeamTask};
use super::commands::Slash;
use super::transcript::{EntryKind, Level};

/// The permission modes `/permissions` accepts (the setting's canonical values).
pub const PERMISSION_MODES: &[&str] = &["ask", "accept-edits", "bypass"];

impl App {
    pub(crate) fn slash(&mut self, slash: Slash) -> Vec<Command> {
        match slash {
            Slash::Help => self.overlay = Some(Overlay::Help { scroll: 0 }),
            Slash::Sessions | Slash::Resume(None) => {
                self.overlay = Some(Overlay::Sessions {
                    items: None,
                    selected: 0,
                });
                return vec![Command::ListSessions];
            }
            Slash::Resume(Some(id)) => return vec![Command::Open(id)],
            Slash::New => {
                self.reset_session();
                self.notice(
                    Level::Info,
                    "new session: it is created with your first prompt",
                );
                return vec![Command::NewSession];
            }
            Slash::Model(None) => {
                let model = self.model.as_deref().unwrap_or("not known yet");
                self.notice(
                    Level::Info,
                    format!("model: {model} — `/model NAME` sets the model for the next prompts"),
                );
            }
            Slash::Model(Some(name)) => {
                self.notice(
                    Level::Info,
                    format!("the next prompts use the model {name}"),
                );
                self.model = Some(name.clone());
                self.model_override = Some(name);
            }
            Slash::Permissions(None) => {
                let mode = self
                    .effective_permission_mode()
                    .unwrap_or_else(|| "from settings (ask by default)".into());
                self.notice(
                    Level::Info,
                    format!(
                        "permission mode: {mode} — `/permissions ask|accept-edits|bypass` sets it \
                         for the next prompts"
                    ),
                );
            }
            Slash::Permissions(Some(mode)) => {
                if PERMISSION_MODES.contains(&mode.as_str()) {
                    self.notice(
                        Level::Info,
                        format!("the next prompts run with permission mode {mode}"),
                    );
                    self.permission_mode = Some(mode);
                } else {
                    self.notice(
                        Level::Error,
                        format!(
                            "unknown permission mode `{mode}`: use {}",
                            PERMISSION_MODES.join(", ")
                        ),
                    );
                }
            }
            Slash::Compact => self.not_yet(
                "/compact",
                "the backend has no method to compact on demand yet; it compacts automatically \
                 at 80% of the context window",
            ),
            Slash::Skills => return vec![Command::ListSkills],
            Slash::Mcp(arg) => return self.mcp(arg),
            Slash::Team(None) => {
                self.overlay = Some(Overlay::Teams {
                    items: None,
                    selected: 0,
                });
                return vec![Command::TeamList];
            }
            Slash::Team(Some(arg)) => return self.team(&arg),
            Slash::TeamOut => return vec![Command::TeamExit],
            Slash::NewTeam(None) => {
                self.notice(Level::Error, "usage: /NewTeam NAME [DISPLAY NAME]");
            }
            Slash::NewTeam(Some(arg)) => {
                let (name, title) = match arg.split_once(char::is_whitespace) {
                    Some((name, title)) => (name.to_string(), title.trim().to_string()),
                    None => (arg.clone(), arg),
                };
                return vec![Command::TeamCreate {
                    name,
                    display_name: title,
                }];
            }
            Slash::Exit => {
                self.quit = true;
                return vec![Command::Quit {
                    interrupt: self.run.as_ref().map(|r| r.run_id.clone()),
                }];
            }
            // Handled by `submit` (it is a prompt for the backend).
            Slash::Prompt(_) => {}
        }
        Vec::new()
    }

    fn mcp(&mut self, arg: Option<String>) -> Vec<Command> {
        if self.session.is_none() {
            self.notice(
                Level::Info,
                "no session yet: MCP servers belong to a session's project; send a prompt first",
            );
            return Vec::new();
        }
        let words: Vec<&str> = arg.as_deref().unwrap_or("").split_whitespace().collect();
        match words.as_slice() {
            [] => vec![Command::McpStatus],
            ["trust", name] => vec![Command::McpTrust(name.to_string())],
            _ => {
                self.notice(Level::Error, "usage: /mcp, or /mcp trust NAME");
                Vec::new()
            }
        }
    }

    /// `/Team NAME [TASK]` (and Enter in the team picker): enter the team, then run TASK
    /// like a prompt.
    pub(crate) fn team(&mut self, arg: &str) -> Vec<Command> {
        let (team, task) = match arg.split_once(char::is_whitespace) {
            Some((team, task)) => (team.to_string(), Some(task.trim().to_string())),
            None => (arg.to_string(), None),
        };
        let task = match task.filter(|t| !t.is_empty()) {
            None => None,
            Some(_) if self.run.is_some() || self.submitting.is_some() => {
                self.notice(
                    Level::Warning,
                    "a turn is still running: wait for it, then /Team again",
                );
                return Vec::new();
            }
            Some(prompt) => {
                let request_id = uuid::Uuid::new_v4().to_string();
                self.submitting = Some((request_id.clone(), prompt.clone()));
                self.transcript.follow();
                Some(TeamTask {
                    request_id,
                    prompt,
                    settings: self.submit_settings(),
                })
            }
        };
        vec![Command::TeamEnter { team, task }]
    }

    fn not_yet(&mut self, command: &str, why: &str) {
        self.transcript.push(EntryKind::Notice {
            level: Level::Warning,
            text: format!("{command} is not available yet: {why}"),
        });
    }
}
