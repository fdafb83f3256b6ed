//! The full-screen terminal UI (`lumina` without `-p`).
//!
//! Shape: a pure state machine ([`app::App`], fed [`app::Msg`]s, returning
//! [`app::Command`]s) that [`render::draw`] paints; a connection task
//! ([`connection::run`]) that executes commands over `lumina-client` and reports
//! [`app::ConnEvent`]s; and this module's loop, which wires them to the real terminal
//! ([`terminal`]), a clock tick and the prompt history file.

pub mod app;
pub mod bench;
pub mod commands;
pub mod connection;
pub mod delegates;
pub mod editor;
pub mod files;
pub mod highlight;
mod keys;
pub mod markdown;
mod permissions;
mod reducer;
pub mod render;
mod slash;
mod team;
pub mod terminal;
pub mod theme;
pub mod transcript;
pub mod wrap;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use self::app::{App, AppOptions, Command, Msg};
use self::connection::{Connector, Timing};
use self::transcript::Level;
use crate::backend::Connected;

/// Frame pacing: events are coalesced and drawn at most this often (keys draw at once).
const FRAME: Duration = Duration::from_millis(50);
/// Messages applied before a frame is drawn, so a burst cannot starve the screen.
const BATCH: usize = 2000;
/// How long quitting waits for the connection task (it interrupts a running turn).
const QUIT_GRACE: Duration = Duration::from_secs(4);
/// History entries loaded from the file.
const HISTORY_LOAD: usize = 500;

/// Everything the UI needs from the command line.
pub struct Setup {
    pub options: AppOptions,
    pub connector: Connector,
    pub first: Connected,
    pub project_root: PathBuf,
    pub resume: Option<String>,
    pub history_file: Option<PathBuf>,
    pub notices: Vec<(Level, String)>,
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Runs the UI until the user quits. Returns the id of the session shown last.
pub async fn run(setup: Setup) -> anyhow::Result<Option<String>> {
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel::<Msg>();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel::<Command>();
    let mut app = App::new(setup.options);
    app.update(Msg::Tick(now_ms()));
    for (level, text) in setup.notices {
        app.notice(level, text);
    }
    {
        let tx = msg_tx.clone();
        let root = setup.project_root.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Msg::Files(files::index(&root)));
        });
    }
    let conn_task = tokio::spawn(connection::run(
        setup.connector,
        setup.first,
        Timing::default(),
        setup.project_root.display().to_string(),
        cmd_rx,
        msg_tx.clone(),
    ));
    if let Some(id) = setup.resume {
        let _ = cmd_tx.send(Command::Open(id));
    }

    let (mut terminal, guard) = terminal::enter()?;
    let stop = Arc::new(AtomicBool::new(false));
    let input = terminal::spawn_input(msg_tx.clone(), Arc::clone(&stop));
    drop(msg_tx);
    let mut ticker = tokio::time::interval(FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let outcome: anyhow::Result<()> = async {
        loop {
            let mut draw_now = false;
            tokio::select! {
                msg = msg_rx.recv() => {
                    let Some(msg) = msg else { break };
                    let mut count = 0;
                    let mut next = Some(msg);
                    while let Some(msg) = next.take() {
                        draw_now |= matches!(msg, Msg::Key(_) | Msg::Paste(_) | Msg::Resize);
                        for command in app.update(msg) {
                            let _ = cmd_tx.send(command);
                        }
                        count += 1;
                        if count < BATCH {
                            next = msg_rx.try_recv().ok();
                        }
                    }
                    dirty = true;
                }
                _ = ticker.tick() => {
                    app.update(Msg::Tick(now_ms()));
                    draw_now = dirty || app.animating() || app.quit_armed_at.is_some()
                        || app.conn != app::ConnState::Connected;
                }
            }
            append_history(setup.history_file.as_deref(), &app.take_new_history());
            if app.quit {
                break;
            }
            if app.clear_screen {
                app.clear_screen = false;
                terminal.clear()?;
                draw_now = true;
            }
            if draw_now {
                terminal.draw(|frame| render::draw(&mut app, frame))?;
                dirty = false;
            }
        }
        Ok(())
    }
    .await;
    stop.store(true, Ordering::SeqCst);
    drop(guard);
    let _ = input.join();
    if !app.quit {
        let _ = cmd_tx.send(Command::Quit { interrupt: None });
    }
    let _ = tokio::time::timeout(QUIT_GRACE, conn_task).await;
    outcome?;
    Ok(app.session.map(|s| s.id))
}

/// Loads the newest prompts of the history file (one JSON string per line).
pub fn load_history(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut history: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<String>(line).ok())
        .collect();
    let excess = history.len().saturating_sub(HISTORY_LOAD);
    history.drain(..excess);
    history
}

/// Appends prompts to the history file (mode 0600: prompts can hold secrets). Failures only
/// cost the history, so they are ignored.
fn append_history(path: Option<&Path>, entries: &[String]) {
    let Some(path) = path else { return };
    if entries.is_empty() {
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
    else {
        return;
    };
    for entry in entries {
        if let Ok(line) = serde_json::to_string(entry) {
            let _ = writeln!(file, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/prompt-history.jsonl");
        append_history(Some(&path), &["one".into(), "two\nlines".into()]);
        append_history(Some(&path), &["three".into()]);
        assert_eq!(load_history(&path), vec!["one", "two\nlines", "three"]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
