//! The built-in tools (docs/design.md#tools), one module each, and [`builtin_registry`].
//!
//! Every tool parses its arguments through [`args::parse`] (so a bad argument becomes an
//! error output naming the field) and confines paths with [`crate::paths`].

mod args;
mod browser;
mod edit_file;
mod fsutil;
mod glob;
mod grep;
mod html_text;
mod list_dir;
pub mod process_group;
mod read_file;
mod shell;
mod shell_output;
mod todo_write;
mod walk;
mod web_fetch;
mod web_guard;
mod web_search;
mod write_file;

use std::sync::Arc;

/// Argument parsing with messages that name the field, for tools of other crates too.
pub use args::parse as parse_args;
pub use browser::{BrowserTools, UrlGuard, NAMES as BROWSER_TOOLS, SCREENSHOT_DIR};
pub use edit_file::EditFile;
pub use glob::{Glob, MAX_RESULTS as GLOB_MAX_RESULTS};
pub use grep::{Grep, MAX_MATCHES as GREP_MAX_MATCHES};
pub use html_text::html_to_markdown;
pub use list_dir::{ListDir, MAX_ENTRIES as LIST_DIR_MAX_ENTRIES};
pub use read_file::{ReadFile, DEFAULT_LIMIT as READ_FILE_DEFAULT_LIMIT, MAX_LINE_CHARS};
pub use shell::Shell;
pub use todo_write::{Todo, TodoStatus, TodoWrite};
pub use web_fetch::{FetchLimits, WebFetch};
pub use web_guard::{refusal_reason, Refusal, Resolver, StaticResolver, SystemResolver};
pub use web_search::{WebSearch, MAX_RESULTS as WEB_SEARCH_MAX_RESULTS};
pub use write_file::WriteFile;

use crate::ToolRegistry;

/// A registry with every built-in tool of this crate (`memory_*`, `agent` and MCP tools
/// live elsewhere and are registered by the runtime). `web_fetch` and the browser tools use
/// the system resolver.
pub fn builtin_registry() -> ToolRegistry {
    builtin_registry_with(WebFetch::default(), &BrowserTools::default())
}

/// [`builtin_registry`] with the given `web_fetch` and browser tools: for tests whose
/// backend must reach their own loopback server (`allow_private_target_for_tests` on both).
/// No setting, environment variable or flag leads here; production builds
/// [`builtin_registry`].
pub fn builtin_registry_with(web_fetch: WebFetch, browser: &BrowserTools) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ReadFile));
    registry.register(Arc::new(WriteFile));
    registry.register(Arc::new(EditFile));
    registry.register(Arc::new(ListDir));
    registry.register(Arc::new(Glob));
    registry.register(Arc::new(Grep));
    registry.register(Arc::new(Shell));
    registry.register(Arc::new(TodoWrite));
    registry.register(Arc::new(web_fetch));
    registry.register(Arc::new(WebSearch));
    for tool in browser.tools() {
        registry.register(tool);
    }
    registry
}
