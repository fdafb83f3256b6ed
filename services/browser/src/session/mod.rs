//! [`Browser`]: one Chromium process with its temporary profile, its network guard (the
//! request interception and the proxy), its tabs and the page operations the tools call.
//!
//! The module is split by concern: `launch` (the command line, the DevTools connection),
//! `intercept` (the `Fetch` check of every request), `actions` (open, click, type, select,
//! extract, screenshot), `tabs` (adoption, switching, the state after an operation) and
//! `page` (scripts in the page and waiting for it). This file holds the life cycle: start,
//! install, close.

mod actions;
mod intercept;
mod launch;
mod page;
mod tabs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    CloseParams, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::fetch::{
    EnableParams, EventRequestPaused, RequestPattern,
};
use chromiumoxide::error::CdpError;
use chromiumoxide::Page;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::events::Shared;
use crate::proxy::Proxy;
use crate::{process, Options, RequestGuard};

struct Tab {
    page: Page,
    /// Dismisses the tab's dialogs (an open `alert` would block every script call).
    dialogs: JoinHandle<()>,
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.dialogs.abort();
    }
}

/// A running headless Chromium. Closing it ([`Browser::close`]) or dropping it kills the
/// process group, stops its proxy and deletes the temporary profile.
pub struct Browser {
    cdp: Arc<chromiumoxide::Browser>,
    child: tokio::process::Child,
    /// The process group to kill; `None` once killed.
    pgid: Option<u32>,
    profile: Option<tempfile::TempDir>,
    profile_path: PathBuf,
    /// Every connection the browser opens goes through it; `None` once stopped.
    proxy: Option<Proxy>,
    tasks: Vec<JoinHandle<()>>,
    events: Shared,
    tabs: Vec<Tab>,
    active: usize,
    options: Options,
    guard: Arc<dyn RequestGuard>,
}

impl Browser {
    /// Starts the proxy, then Chromium with a fresh temporary profile connecting only
    /// through it, connects to it and installs the request interception (every request
    /// asks `guard`) and the download ban.
    pub async fn launch(options: Options, guard: Arc<dyn RequestGuard>) -> Result<Browser> {
        let executable =
            process::find_executable(options.executable.as_deref(), std::env::var_os("PATH"))?;
        let parent = options
            .profile_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&parent).map_err(Error::Profile)?;
        let profile = tempfile::Builder::new()
            .prefix("lumina-browser-")
            .tempdir_in(&parent)
            .map_err(Error::Profile)?;
        let profile_path = profile.path().to_path_buf();
        let proxy = Proxy::start(guard.clone(), options.call_timeout)
            .await
            .map_err(Error::Proxy)?;
        let args = launch::chromium_args(&options, &profile_path, proxy.addr());
        let mut child = process::spawn(&executable, &args).map_err(|source| Error::Spawn {
            path: executable.clone(),
            source,
        })?;
        let pgid = child.id();
        // From here every failure kills the process group (the Drop of the half-built
        // browser would not exist yet).
        let started = launch::start(&executable, &options, &mut child).await;
        let (cdp, handler) = match started {
            Ok(connected) => connected,
            Err(err) => {
                if let Some(pgid) = pgid {
                    process::kill_group(pgid);
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                return Err(err);
            }
        };
        let cdp = Arc::new(cdp);
        let events: Shared = Arc::default();
        let mut browser = Browser {
            cdp,
            child,
            pgid,
            profile: Some(profile),
            profile_path,
            proxy: Some(proxy),
            tasks: vec![handler],
            events,
            tabs: Vec::new(),
            active: 0,
            options,
            guard,
        };
        browser.install().await?;
        let page = browser
            .call("opening the first tab", browser.cdp.new_page("about:blank"))
            .await?;
        browser.adopt(page);
        Ok(browser)
    }

    /// Request interception on the browser target (all tabs, frames and workers) and no
    /// downloads.
    async fn install(&mut self) -> Result<()> {
        let guard = self.guard.clone();
        let paused = self
            .call(
                "listening for requests",
                self.cdp.event_listener::<EventRequestPaused>(),
            )
            .await?;
        let cdp = self.cdp.clone();
        let events = self.events.clone();
        let timeout = self.options.call_timeout;
        self.tasks.push(tokio::spawn(intercept::intercept(
            cdp, paused, guard, events, timeout,
        )));
        let enable = EnableParams::builder()
            .pattern(RequestPattern::builder().url_pattern("*").build())
            .build();
        self.call("enabling request interception", self.cdp.execute(enable))
            .await?;
        let deny = SetDownloadBehaviorParams::new(SetDownloadBehaviorBehavior::Deny);
        self.call("turning downloads off", self.cdp.execute(deny))
            .await?;
        Ok(())
    }

    /// The temporary profile directory (deleted when the browser closes).
    pub fn profile_dir(&self) -> &Path {
        &self.profile_path
    }

    /// Where the browser's proxy listens (`None` once closed).
    pub fn proxy_addr(&self) -> Option<std::net::SocketAddr> {
        self.proxy.as_ref().map(Proxy::addr)
    }

    /// Whether the browser process still runs.
    pub fn is_running(&mut self) -> bool {
        self.pgid.is_some() && matches!(self.child.try_wait(), Ok(None))
    }

    /// Closes the browser: asks it to quit, kills its process group, waits for it, stops
    /// the proxy and deletes the profile. Returns the profile's path (now gone).
    pub async fn close(mut self) -> Result<PathBuf> {
        let quit = self.cdp.execute(CloseParams::default());
        let _ = tokio::time::timeout(Duration::from_secs(2), quit).await;
        self.kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.tabs.clear();
        if let Some(proxy) = self.proxy.take() {
            proxy.stop().await;
        }
        let path = self.profile_path.clone();
        if let Some(profile) = self.profile.take() {
            if let Err(first) = profile.close() {
                // A process that was still exiting may have written meanwhile: once more.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if path.exists() {
                    std::fs::remove_dir_all(&path).map_err(|_| Error::Profile(first))?;
                }
            }
        }
        Ok(path)
    }

    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            process::kill_group(pgid);
        }
    }

    /// Awaits a DevTools call with the call timeout.
    async fn call<T>(
        &self,
        what: &'static str,
        fut: impl std::future::Future<Output = std::result::Result<T, CdpError>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.call_timeout, fut).await {
            Ok(result) => result.map_err(Error::cdp(what)),
            Err(_) => Err(Error::Timeout {
                what,
                after: self.options.call_timeout,
            }),
        }
    }
}

impl Drop for Browser {
    /// Kills the process group and stops the proxy (its task is aborted); the profile
    /// directory goes with the `TempDir`.
    fn drop(&mut self) {
        self.kill();
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.tabs.clear();
        self.proxy.take();
    }
}
