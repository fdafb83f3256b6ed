//! Keys and pastes → state changes and commands. Routing goes from the most modal layer
//! down: Ctrl-C, the permission dialog, an overlay (help, sessions), the completion popup,
//! global keys (interrupt, scrolling, tool expansion, retrying a parked delegation), and
//! finally the editor.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use lumina_client::protocol::Decision;

use super::app::{App, Command, ConnState, Overlay, Popup, PopupKind};
use super::commands::{self, Slash};
use super::files;
use super::transcript::{EntryKind, Level};

/// A second Ctrl-C within this window quits.
pub const QUIT_WINDOW_MS: i64 = 2000;
/// Entries shown by the completion popup.
const POPUP_ITEMS: usize = 8;
/// Prompts longer than this go to the history file as typed (with paste placeholders).
const HISTORY_TEXT_MAX: usize = 10_000;
/// Lines the permission preview scrolls per key.
const PREVIEW_STEP: u16 = 10;

impl App {
    pub(crate) fn on_key(&mut self, key: KeyEvent) -> Vec<Command> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        if !self.permissions.is_empty() {
            return self.permission_key(key);
        }
        if self.overlay.is_some() {
            return self.overlay_key(key);
        }
        if self.popup.is_some() {
            if let Some(commands) = self.popup_key(key) {
                return commands;
            }
        }
        let commands = self.main_key(key);
        self.refresh_popup();
        commands
    }

    pub(crate) fn on_paste(&mut self, text: &str) {
        if let Some(reason) = &mut self.permission_ui.reason {
            reason.push_str(&text.replace(['\r', '\n'], " "));
        } else if self.permissions.is_empty() && self.overlay.is_none() {
            self.editor.paste(text);
            self.refresh_popup();
        }
    }

    fn quit_commands(&mut self) -> Vec<Command> {
        self.quit = true;
        vec![Command::Quit {
            interrupt: self.run.as_ref().map(|r| r.run_id.clone()),
        }]
    }

    fn ctrl_c(&mut self) -> Vec<Command> {
        if self.quit_armed_at.is_some() {
            return self.quit_commands();
        }
        self.quit_armed_at = Some(self.now_ms);
        self.editor.clear();
        self.popup = None;
        Vec::new()
    }

    fn permission_key(&mut self, key: KeyEvent) -> Vec<Command> {
        if let Some(reason) = &mut self.permission_ui.reason {
            match key.code {
                KeyCode::Enter => {
                    let reason = reason.trim().to_string();
                    return self.answer(Decision::Deny, (!reason.is_empty()).then_some(reason));
                }
                KeyCode::Esc => self.permission_ui.reason = None,
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    reason.push(c)
                }
                _ => {}
            }
            return Vec::new();
        }
        let ui = &mut self.permission_ui;
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => ui.selected = ui.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') | KeyCode::Tab => {
                ui.selected = (ui.selected + 1).min(2)
            }
            KeyCode::PageUp => ui.scroll = ui.scroll.saturating_sub(PREVIEW_STEP),
            KeyCode::PageDown => ui.scroll = ui.scroll.saturating_add(PREVIEW_STEP),
            KeyCode::Char('1') | KeyCode::Char('y') => {
                return self.answer(Decision::AllowOnce, None)
            }
            KeyCode::Char('2') | KeyCode::Char('a') => {
                return self.answer(Decision::AllowSession, None)
            }
            KeyCode::Char('3') | KeyCode::Char('n') => ui.reason = Some(String::new()),
            KeyCode::Enter => match ui.selected {
                0 => return self.answer(Decision::AllowOnce, None),
                1 => return self.answer(Decision::AllowSession, None),
                _ => ui.reason = Some(String::new()),
            },
            KeyCode::Esc => return self.answer(Decision::Deny, None),
            _ => {}
        }
        Vec::new()
    }

    fn answer(&mut self, decision: Decision, reason: Option<String>) -> Vec<Command> {
        if self.permissions.is_empty() {
            return Vec::new();
        }
        let request = self.permissions.remove(0);
        self.permission_ui = Default::default();
        self.answered.insert(request.request_id.clone());
        vec![Command::Respond {
            request_id: request.request_id,
            decision,
            reason,
        }]
    }

    fn overlay_key(&mut self, key: KeyEvent) -> Vec<Command> {
        match &mut self.overlay {
            Some(Overlay::Help { scroll }) => match key.code {
                KeyCode::Up => *scroll = scroll.saturating_sub(1),
                KeyCode::Down => *scroll = scroll.saturating_add(1),
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::PageDown => *scroll = scroll.saturating_add(10),
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') | KeyCode::Char('?') => {
                    self.overlay = None
                }
                _ => {}
            },
            Some(Overlay::Sessions { items, selected }) => {
                let count = items.as_ref().map_or(0, Vec::len);
                match key.code {
                    KeyCode::Up => *selected = selected.saturating_sub(1),
                    KeyCode::Down => *selected = (*selected + 1).min(count.saturating_sub(1)),
                    KeyCode::Esc | KeyCode::Char('q') => self.overlay = None,
                    KeyCode::Enter => {
                        let id = items
                            .as_ref()
                            .and_then(|items| items.get(*selected))
                            .map(|s| s.id.clone());
                        self.overlay = None;
                        if let Some(id) = id {
                            if self.session.as_ref().map(|s| &s.id) != Some(&id) {
                                return vec![Command::Open(id)];
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some(Overlay::Teams { items, selected }) => {
                let count = items.as_ref().map_or(0, Vec::len);
                match key.code {
                    KeyCode::Up => *selected = selected.saturating_sub(1),
                    KeyCode::Down => *selected = (*selected + 1).min(count.saturating_sub(1)),
                    KeyCode::Esc | KeyCode::Char('q') => self.overlay = None,
                    KeyCode::Enter => {
                        let Some(team) = items
                            .as_ref()
                            .and_then(|items| items.get(*selected))
                            .cloned()
                        else {
                            return Vec::new();
                        };
                        if let Some(error) = team.error {
                            let text = format!("the team {} cannot be used: {error}", team.name);
                            self.notice(Level::Error, text);
                            return Vec::new();
                        }
                        self.overlay = None;
                        return self.team(&team.name);
                    }
                    _ => {}
                }
            }
            None => {}
        }
        Vec::new()
    }

    /// Keys the popup takes; `None` lets the key through to the editor.
    fn popup_key(&mut self, key: KeyEvent) -> Option<Vec<Command>> {
        let popup = self.popup.as_mut()?;
        if !key.modifiers.is_empty() && key.modifiers != KeyModifiers::SHIFT {
            return None;
        }
        match key.code {
            KeyCode::Up => popup.selected = popup.selected.saturating_sub(1),
            KeyCode::Down => popup.selected = (popup.selected + 1).min(popup.items.len() - 1),
            KeyCode::Esc => {
                self.popup = None;
                self.popup_dismissed = Some(self.editor.raw_text());
            }
            KeyCode::Tab => self.accept_popup(),
            KeyCode::Enter => {
                let run_now = popup.kind == PopupKind::Command
                    && commands::COMMANDS
                        .iter()
                        .find(|c| {
                            Some(format!("/{}", c.name))
                                == popup.items.get(popup.selected).map(|i| i.0.clone())
                        })
                        .is_some_and(|c| c.args.is_empty() || c.args.starts_with('['));
                self.accept_popup();
                if run_now {
                    return Some(self.submit());
                }
            }
            _ => return None,
        }
        Some(Vec::new())
    }

    fn accept_popup(&mut self) {
        let Some(popup) = self.popup.take() else {
            return;
        };
        let Some((text, _)) = popup.items.get(popup.selected) else {
            return;
        };
        match popup.kind {
            PopupKind::Command => self.editor.set_text(&format!("{text} ")),
            PopupKind::File if text.ends_with('/') => {
                self.editor.replace_token(&format!("@{text}"))
            }
            PopupKind::File => self.editor.replace_token(&format!("@{text} ")),
        }
        self.refresh_popup();
    }

    /// Recomputes the completion popup from the editor's text.
    pub(crate) fn refresh_popup(&mut self) {
        let raw = self.editor.raw_text();
        if self.popup_dismissed.as_deref() == Some(raw.as_str()) {
            self.popup = None;
            return;
        }
        self.popup_dismissed = None;
        let (kind, items): (PopupKind, Vec<(String, String)>) =
            if raw.starts_with('/') && !raw.contains(char::is_whitespace) {
                let items = commands::complete(&raw[1..])
                    .into_iter()
                    .map(|c| {
                        let args = if c.args.is_empty() {
                            String::new()
                        } else {
                            format!("{} ", c.args)
                        };
                        (format!("/{}", c.name), format!("{args}— {}", c.help))
                    })
                    .collect();
                (PopupKind::Command, items)
            } else {
                let (_, token) = self.editor.current_token();
                match token.strip_prefix('@') {
                    Some(query) => {
                        let items = files::matches(&self.files, query, POPUP_ITEMS)
                            .into_iter()
                            .map(|p| (p.to_string(), String::new()))
                            .collect();
                        (PopupKind::File, items)
                    }
                    None => (PopupKind::File, Vec::new()),
                }
            };
        if items.is_empty() {
            self.popup = None;
            return;
        }
        let selected = match &self.popup {
            Some(old) if old.kind == kind => old.selected.min(items.len() - 1),
            _ => 0,
        };
        self.popup = Some(Popup {
            kind,
            items,
            selected,
        });
    }

    fn main_key(&mut self, key: KeyEvent) -> Vec<Command> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let editor = &mut self.editor;
        match key.code {
            KeyCode::Esc => return self.interrupt(),
            KeyCode::PageUp => self.transcript.page_up(),
            KeyCode::PageDown => self.transcript.page_down(),
            KeyCode::Home if ctrl => self.transcript.scroll_to_top(),
            KeyCode::End if ctrl => self.transcript.follow(),
            KeyCode::Up if shift => self.transcript.scroll_up(3),
            KeyCode::Down if shift => self.transcript.scroll_down(3),
            KeyCode::Up if alt => self.select_tool(-1),
            KeyCode::Down if alt => self.select_tool(1),
            KeyCode::Char('o') if ctrl => self.toggle_tool(),
            KeyCode::Char('l') if ctrl => self.clear_screen = true,
            KeyCode::Char('r') if ctrl => match self.conn {
                ConnState::Disconnected { .. } => return vec![Command::Reconnect],
                ConnState::Connected => return self.retry_delegations(),
                ConnState::Reconnecting { .. } => {}
            },
            KeyCode::Enter if shift || alt => editor.newline(),
            KeyCode::Char('j') if ctrl => editor.newline(),
            KeyCode::Enter => {
                // A trailing backslash asks for a newline (terminals without Shift+Enter).
                let (row, col) = editor.cursor();
                if editor.lines()[row].ends_with('\\') && col == editor.lines()[row].chars().count()
                {
                    editor.backspace();
                    editor.newline();
                } else {
                    return self.submit();
                }
            }
            // At the first (last) line, Up (Down) walks the history.
            KeyCode::Up => _ = editor.up() || editor.history_prev(),
            KeyCode::Down => _ = editor.down() || editor.history_next(),
            KeyCode::Left if ctrl || alt => editor.word_left(),
            KeyCode::Right if ctrl || alt => editor.word_right(),
            KeyCode::Left => editor.left(),
            KeyCode::Right => editor.right(),
            KeyCode::Home => editor.home(),
            KeyCode::End => editor.end(),
            KeyCode::Char('a') if ctrl => editor.home(),
            KeyCode::Char('e') if ctrl => editor.end(),
            KeyCode::Char('b') if alt => editor.word_left(),
            KeyCode::Char('f') if alt => editor.word_right(),
            KeyCode::Char('u') if ctrl => editor.kill_to_start(),
            KeyCode::Char('k') if ctrl => editor.kill_to_end(),
            KeyCode::Char('w') if ctrl => editor.delete_word_back(),
            KeyCode::Backspace if ctrl || alt => editor.delete_word_back(),
            KeyCode::Backspace => editor.backspace(),
            KeyCode::Delete => editor.delete(),
            KeyCode::Char('d') if ctrl => {
                if editor.is_empty() {
                    return self.quit_commands();
                }
                editor.delete();
            }
            KeyCode::Char(c) if !ctrl => editor.insert_char(c),
            KeyCode::Tab => editor.insert_str("  "),
            _ => {}
        }
        Vec::new()
    }

    fn interrupt(&mut self) -> Vec<Command> {
        if self.run.is_none() && self.submitting.is_none() {
            return Vec::new();
        }
        self.notice(Level::Info, "interrupting…");
        vec![Command::Interrupt {
            run_id: self.run.as_ref().map(|r| r.run_id.clone()),
        }]
    }

    fn tool_indices(&self) -> Vec<usize> {
        self.transcript
            .kinds()
            .enumerate()
            .filter(|(_, k)| matches!(k, EntryKind::Tool(_)))
            .map(|(i, _)| i)
            .collect()
    }

    fn set_selected(&mut self, index: Option<usize>) {
        for i in [self.selected_tool, index].into_iter().flatten() {
            let on = Some(i) == index;
            if let Some(EntryKind::Tool(tool)) = self.transcript.get_mut(i) {
                tool.selected = on;
            }
        }
        self.selected_tool = index;
    }

    /// Alt-Up / Alt-Down: moves the tool-call selection and brings it into view.
    fn select_tool(&mut self, step: isize) {
        let tools = self.tool_indices();
        let Some(&last) = tools.last() else { return };
        let next = match self
            .selected_tool
            .and_then(|s| tools.iter().position(|&t| t == s))
        {
            None => last,
            Some(pos) => {
                let pos = pos.saturating_add_signed(step).min(tools.len() - 1);
                tools[pos]
            }
        };
        self.set_selected(Some(next));
        self.transcript.reveal(next);
    }

    /// Ctrl-O: expands or collapses the selected tool call (the last one if none is).
    fn toggle_tool(&mut self) {
        let Some(index) = self
            .selected_tool
            .or_else(|| self.tool_indices().last().copied())
        else {
            return;
        };
        if let Some(EntryKind::Tool(tool)) = self.transcript.get_mut(index) {
            tool.expanded = !tool.expanded;
        }
        if self.selected_tool.is_some() {
            self.transcript.reveal(index);
        }
    }

    /// Enter: runs a slash command or submits the prompt.
    pub(crate) fn submit(&mut self) -> Vec<Command> {
        let raw = self.editor.raw_text();
        let text = self.editor.text();
        if text.trim().is_empty() {
            return Vec::new();
        }
        self.popup = None;
        match commands::parse(&raw) {
            Some(Slash::Prompt(_)) => self.submit_prompt(text),
            Some(slash) => {
                self.remember(&raw, &text);
                self.editor.clear();
                self.slash(slash)
            }
            None => self.submit_prompt(text),
        }
    }

    fn remember(&mut self, raw: &str, text: &str) {
        let entry = if text.len() <= HISTORY_TEXT_MAX {
            text
        } else {
            raw
        };
        self.editor.push_history(entry);
        self.new_history.push(entry.to_string());
    }

    fn submit_prompt(&mut self, text: String) -> Vec<Command> {
        if self.conn != ConnState::Connected {
            self.notice(
                Level::Warning,
                "not connected: your prompt is kept and can be sent once the connection is back",
            );
            return Vec::new();
        }
        if self.run.is_some() || self.submitting.is_some() {
            self.notice(
                Level::Warning,
                "a turn is still running: wait for it or press Esc to interrupt it (your prompt is kept)",
            );
            return Vec::new();
        }
        let raw = self.editor.raw_text();
        self.remember(&raw, &text);
        self.editor.clear();
        let request_id = uuid::Uuid::new_v4().to_string();
        self.submitting = Some((request_id.clone(), text.clone()));
        self.transcript.follow();
        vec![Command::Submit {
            request_id,
            prompt: text,
            settings: self.submit_settings(),
        }]
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
