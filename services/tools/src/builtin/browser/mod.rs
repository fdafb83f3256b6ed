//! The browser tools (docs/browser.md): `browser_open`, `browser_click`, `browser_type`,
//! `browser_select`, `browser_extract`, `browser_tabs`, `browser_screenshot`, over one
//! headless Chromium per session run ([`lumina_browser::Browser`]).
//!
//! [`BrowserTools`] holds the running browsers by session. `browser_open` starts the
//! session's browser (temporary profile, `browser_executable` or `PATH`); the runtime calls
//! [`crate::Tool::run_ended`] when a top-level run ends, which closes it (and its proxy) and
//! deletes the profile. [`UrlGuard`] is the browser's guard, `web_fetch`'s public-address
//! check with the same test-only exception: for every request's URL
//! ([`super::web_guard::vet`]) and for every connection the browser's proxy is asked to
//! open ([`super::web_guard::vet_host`]: resolved once, the vetted addresses the only ones
//! connected to).
//!
//! Permissions: opening a page reaches the network like `web_fetch` (asked in `ask` mode);
//! clicking, typing and selecting can submit forms and are asked like writes; extracting,
//! listing tabs and screenshots only read (the screenshot goes to the session's artifacts).

mod tools;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lumina_browser::{Browser, Connection, RequestGuard};
use tokio::sync::OwnedMutexGuard;

use super::web_guard::{vet, vet_host, Resolver, SystemResolver};
use crate::{Tool, ToolContext, ToolOutput};

pub use tools::{NAMES, SCREENSHOT_DIR};

/// The `web_fetch` guard as the browser's [`RequestGuard`]: http(s) and ws(s) requests go
/// to public addresses only (or the one test exception); `data:`, `blob:` and `about:`
/// URLs need no network; every other scheme (`file:`, `chrome:`, …) is refused. The
/// proxy's connections get the same address check, on the addresses it will connect to.
pub struct UrlGuard {
    resolver: Arc<dyn Resolver>,
    exception: Option<SocketAddr>,
}

#[async_trait]
impl RequestGuard for UrlGuard {
    async fn refusal(&self, url: &str) -> Option<String> {
        let parsed = match url::Url::parse(url) {
            Ok(parsed) => parsed,
            Err(e) => return Some(format!("invalid URL: {e}")),
        };
        match parsed.scheme() {
            "http" | "https" | "ws" | "wss" => vet(self.resolver.as_ref(), &parsed, self.exception)
                .await
                .err()
                .map(|refusal| refusal.0),
            "data" | "blob" | "about" => None,
            other => Some(format!(
                "`{other}:` URLs are not allowed (only http, https, ws and wss)"
            )),
        }
    }

    async fn connection(&self, host: &str, port: u16) -> Connection {
        // Chromium names the host as its URL had it: a name, or an address in text (IPv6
        // with or without brackets). Parsed as a URL's host, so every spelling of an
        // address (`127.1`, `0x7f.0.0.1`) is that address.
        let parsed = match host.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => url::Host::Ipv4(ip),
            Ok(IpAddr::V6(ip)) => url::Host::Ipv6(ip),
            Err(_) => match url::Host::parse(host) {
                Ok(parsed) => parsed,
                Err(e) => return Connection::Refused(format!("invalid host {host:?}: {e}")),
            },
        };
        let host = match &parsed {
            url::Host::Domain(name) => url::Host::Domain(name.as_str()),
            url::Host::Ipv4(ip) => url::Host::Ipv4(*ip),
            url::Host::Ipv6(ip) => url::Host::Ipv6(*ip),
        };
        match vet_host(self.resolver.as_ref(), host, port, self.exception).await {
            Ok(vetted) => Connection::To(vetted.addrs),
            Err(refusal) => Connection::Refused(refusal.0),
        }
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Browser>>>;

struct Kit {
    guard: Arc<UrlGuard>,
    sessions: Mutex<HashMap<String, Slot>>,
    /// Timeouts and window size; the executable comes from each call's context.
    options: lumina_browser::Options,
}

/// The browser tools and the browsers they run, one per session (until its run ends).
#[derive(Clone)]
pub struct BrowserTools {
    kit: Arc<Kit>,
}

impl Default for BrowserTools {
    fn default() -> Self {
        Self::new(Arc::new(SystemResolver))
    }
}

impl BrowserTools {
    pub fn new(resolver: Arc<dyn Resolver>) -> Self {
        Self::build(resolver, None, lumina_browser::Options::default())
    }

    fn build(
        resolver: Arc<dyn Resolver>,
        exception: Option<SocketAddr>,
        options: lumina_browser::Options,
    ) -> Self {
        Self {
            kit: Arc::new(Kit {
                guard: Arc::new(UrlGuard {
                    resolver,
                    exception,
                }),
                sessions: Mutex::default(),
                options,
            }),
        }
    }

    /// Tests only: the browser may load from exactly `addr` (address and port) although it
    /// is not public — `web_fetch`'s [`super::WebFetch::allow_private_target_for_tests`],
    /// for the browser. Every other private address stays refused. Call before the tools
    /// are handed out.
    pub fn allow_private_target_for_tests(self, addr: SocketAddr) -> Self {
        Self::build(
            self.kit.guard.resolver.clone(),
            Some(addr),
            self.kit.options.clone(),
        )
    }

    /// Replaces the timeouts, window size and profile location (the executable still comes
    /// from each call's `browser_executable`).
    pub fn with_options(self, options: lumina_browser::Options) -> Self {
        Self::build(
            self.kit.guard.resolver.clone(),
            self.kit.guard.exception,
            options,
        )
    }

    /// The seven tools, sharing this set of browsers.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        tools::all(self)
    }

    /// The guard every browser of these tools uses (its requests and its proxy's
    /// connections), with the test exception when one was set.
    pub fn guard(&self) -> Arc<UrlGuard> {
        self.kit.guard.clone()
    }

    /// Where the proxy of the session's running browser listens, if one runs.
    pub async fn proxy_addr(&self, session_id: &str) -> Option<SocketAddr> {
        let slot = self.slot(session_id, false)?;
        let browser = slot.lock().await;
        browser.as_ref().and_then(Browser::proxy_addr)
    }

    /// The temporary profile of the session's running browser, if one runs.
    pub async fn profile_dir(&self, session_id: &str) -> Option<PathBuf> {
        let slot = self.slot(session_id, false)?;
        let browser = slot.lock().await;
        browser.as_ref().map(|b| b.profile_dir().to_path_buf())
    }

    /// Closes the session's browser (its run ended) and deletes its profile; returns the
    /// profile's path when one was open.
    pub async fn close_session(&self, session_id: &str) -> Option<PathBuf> {
        let slot = self.take_slot(session_id)?;
        let browser = slot.lock().await.take()?;
        let path = browser.profile_dir().to_path_buf();
        if let Err(e) = browser.close().await {
            tracing::warn!(session_id, error = %e, "closing the browser");
        }
        Some(path)
    }

    /// [`Tool::run_ended`]: closes the session's browser in the background (dropping it
    /// synchronously when there is no runtime).
    pub(crate) fn release(&self, session_id: &str) {
        let Some(slot) = self.take_slot(session_id) else {
            return;
        };
        let session_id = session_id.to_string();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Some(browser) = slot.lock().await.take() {
                        if let Err(e) = browser.close().await {
                            tracing::warn!(session_id, error = %e, "closing the browser");
                        }
                    }
                });
            }
            Err(_) => {
                if let Ok(mut browser) = slot.try_lock() {
                    // Drop kills the process group and deletes the profile.
                    browser.take();
                }
            }
        }
    }

    fn slot(&self, session_id: &str, create: bool) -> Option<Slot> {
        let mut sessions = self.kit.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if create {
            Some(sessions.entry(session_id.to_string()).or_default().clone())
        } else {
            sessions.get(session_id).cloned()
        }
    }

    fn take_slot(&self, session_id: &str) -> Option<Slot> {
        self.kit
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id)
    }

    /// The session's browser, locked for one operation. `launch`: start one when none
    /// runs (or the previous one died); otherwise no browser is an error telling the model
    /// to open a page first.
    async fn session(
        &self,
        ctx: &ToolContext,
        launch: bool,
    ) -> Result<OwnedMutexGuard<Option<Browser>>, ToolOutput> {
        let no_page = || ToolOutput::error("no page is open: open one with browser_open first");
        let slot = self.slot(&ctx.session_id, launch).ok_or_else(no_page)?;
        let mut browser = slot.lock_owned().await;
        if let Some(running) = browser.as_mut() {
            if running.is_running() {
                return Ok(browser);
            }
            tracing::warn!(session_id = %ctx.session_id, "the session's browser exited; starting another");
            if let Some(dead) = browser.take() {
                let _ = dead.close().await;
            }
        }
        if !launch {
            return Err(no_page());
        }
        let options = lumina_browser::Options {
            executable: ctx.browser_executable.clone(),
            ..self.kit.options.clone()
        };
        let guard: Arc<dyn RequestGuard> = self.kit.guard.clone();
        match Browser::launch(options, guard).await {
            Ok(started) => {
                tracing::info!(session_id = %ctx.session_id, profile = %started.profile_dir().display(), "browser started");
                *browser = Some(started);
                Ok(browser)
            }
            Err(e) => Err(ToolOutput::error(e.to_string())),
        }
    }
}
