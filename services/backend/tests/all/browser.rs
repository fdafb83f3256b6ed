//! End-to-end tests of the web console in a real headless Chromium, driven over CDP
//! (`cdp.rs`), against an in-process local backend and the scripted model server. They
//! need Chromium (scripts/setup installs it) and fail saying so when it is missing.

mod a11y;
mod cdp;
mod console;
mod flows;
