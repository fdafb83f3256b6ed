//! A headless Chromium driven over the Chrome DevTools Protocol (`chromiumoxide`), for the
//! browser tools (docs/browser.md). This crate owns one browser's life: the executable
//! lookup, a temporary profile per browser (deleted when it closes or is dropped), the
//! process (its own process group, killed with its children; a death signal if the backend
//! dies), the network guard, tabs, element references and the page operations.
//!
//! It does not decide which addresses may be reached; the caller's [`RequestGuard`] does,
//! at two points:
//!
//! - every request the browser makes — navigations, sub-resources, workers, redirects, in
//!   every tab — is paused at the browser level (`Fetch.enable` on the browser target) and
//!   continued only when the guard allows its URL ([`RequestGuard::refusal`]); otherwise it
//!   fails with `BlockedByClient`;
//! - every TCP connection the browser opens goes through [`Proxy`], an in-process SOCKS5
//!   proxy on a loopback port of its own (`fast-socks5` parses the protocol): the guard
//!   resolves the host once and vets every address ([`RequestGuard::connection`]), and the
//!   proxy connects to exactly those addresses. This covers what `Fetch` never sees
//!   (WebSockets, preconnects) and DNS rebinding (no second resolution by Chromium).
//!
//! Both kinds of refusal are listed in the next operation's [`PageState::blocked`].
//! Downloads are denied.

mod error;
mod events;
mod process;
mod proxy;
mod script;
mod session;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use error::{Error, Result};
pub use process::find_executable;
pub use proxy::Proxy;
pub use session::Browser;

/// Decides what the browser may reach. Every call has a timeout ([`Options::call_timeout`]);
/// a guard that times out refuses.
#[async_trait]
pub trait RequestGuard: Send + Sync + 'static {
    /// `None` when `url` may be requested, else why not (shown to the model). Asked for
    /// every request `Fetch` pauses.
    async fn refusal(&self, url: &str) -> Option<String>;

    /// Where a connection the browser wants to open to `host` (a name or an IP address, as
    /// Chromium asked the proxy) and `port` may go. Asked by [`Proxy`] for every TCP
    /// connection; the proxy connects only to the addresses returned, so the guard must
    /// resolve the name itself and vet every answer (no one resolves it again).
    async fn connection(&self, host: &str, port: u16) -> Connection;
}

/// A [`RequestGuard`]'s answer for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Connect to one of these addresses (tried in order), every one of them vetted.
    To(Vec<SocketAddr>),
    /// Refused, and why (shown to the model).
    Refused(String),
}

/// How a browser is started and how long its operations may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The Chromium binary (`browser_executable`). Default: none, `PATH` is searched.
    pub executable: Option<PathBuf>,
    /// Where the temporary profile is created. Default: none, the system's temp directory.
    pub profile_parent: Option<PathBuf>,
    /// Start-up until the DevTools endpoint is connected. Default: 30 s.
    pub launch_timeout: Duration,
    /// One DevTools call (and one guard decision). Default: 10 s.
    pub call_timeout: Duration,
    /// A navigation until its page has loaded. Default: 30 s.
    pub navigation_timeout: Duration,
    /// The window size in CSS pixels. Default: 1280 × 800.
    pub window: (u32, u32),
}

impl Default for Options {
    fn default() -> Self {
        Self {
            executable: None,
            profile_parent: None,
            launch_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(10),
            navigation_timeout: Duration::from_secs(30),
            window: (1280, 800),
        }
    }
}

/// Which element an operation acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A CSS selector; the first match is used.
    Css(String),
    /// A reference number from [`Browser::extract`]'s element list.
    Ref(u64),
}

impl Target {
    pub(crate) fn selector(&self) -> String {
        match self {
            Target::Css(selector) => selector.clone(),
            Target::Ref(n) => format!("[data-lumina-ref=\"{n}\"]"),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Css(selector) => write!(f, "`{selector}`"),
            Target::Ref(n) => write!(f, "ref {n}"),
        }
    }
}

/// A request or a connection the guard refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// The request's URL, or `host:port` for a connection the proxy refused.
    pub url: String,
    pub reason: String,
}

/// One tab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabInfo {
    pub index: usize,
    pub url: String,
    pub title: String,
    pub active: bool,
}

/// Where the active tab is after an operation, and what happened meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageState {
    pub tab: usize,
    pub url: String,
    pub title: String,
    /// Requests and connections refused since the previous operation.
    pub blocked: Vec<Blocked>,
    /// Tabs the page opened meanwhile (popups, `target=_blank`).
    pub new_tabs: Vec<TabInfo>,
    /// Dialogs (`alert`, `confirm`, `prompt`, `beforeunload`) dismissed meanwhile.
    pub dialogs: Vec<String>,
}

/// An interactive element listed by [`Browser::extract`]; `ref` addresses it in later calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Element {
    #[serde(rename = "ref")]
    pub reference: u64,
    /// `a`, `button`, `input[email]`, `select`, an ARIA role, …
    pub kind: String,
    pub label: String,
    #[serde(default)]
    pub name: Option<String>,
    /// The current value of inputs, text areas and selects (never of password fields).
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub href: Option<String>,
}

/// The text of a page (or of the elements a selector matched) and its interactive elements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extract {
    pub url: String,
    pub title: String,
    /// How many elements the selector matched (1 for the whole page).
    pub matched: usize,
    pub text: String,
    pub elements: Vec<Element>,
}

/// What a `<select>` was set to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selected {
    pub value: String,
    pub label: String,
}
