//! End-to-end tests of the web console in a real headless Chromium, driven over CDP
//! (`cdp.rs`), against an in-process local backend (the real binary in `restart.rs`) and the
//! scripted model server. They need Chromium (scripts/setup installs it) and fail saying so
//! when it is missing. `agent_browser` is the agent's side: the browser tools run by the
//! backend, and their screenshot in the console.

mod a11y;
mod agent_browser;
pub(crate) mod cdp;
mod console;
mod delegate;
mod delegate_retry;
mod flows;
mod peers;
mod restart;
mod skills_budgets;
mod team;

/// Where the tests put their screenshots: `$LUMINA_CONSOLE_SCREENSHOTS` (the pictures in
/// docs/console/ are refreshed with `LUMINA_CONSOLE_SCREENSHOTS=docs/console`, a path relative
/// to the repository), else a folder under the system's temporary directory, so a test run
/// never rewrites tracked files.
pub fn shots() -> std::path::PathBuf {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = match std::env::var_os("LUMINA_CONSOLE_SCREENSHOTS") {
        Some(dir) => root.join(dir),
        None => std::env::temp_dir().join("lumina-console-screenshots"),
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
