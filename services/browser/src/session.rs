//! [`Browser`]: one Chromium process with its temporary profile, its request interception,
//! its tabs and the page operations the tools call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::{
    CloseParams, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams, EventRequestPaused, FailRequestParams, RequestPattern,
};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::network::ErrorReason;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::error::CdpError;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::layout::Point;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::process;
use crate::script;
use crate::{Blocked, Extract, Options, PageState, RequestGuard, Selected, TabInfo, Target};

/// How long after an action a navigation may take to start before the action counts as
/// one that did not navigate.
const SETTLE_QUIET: Duration = Duration::from_millis(400);
/// Characters of page text read at most (the tools cut further to their output cap).
const MAX_TEXT: usize = 1_000_000;
/// Interactive elements listed at most by one extract.
const MAX_ELEMENTS: usize = 300;

/// Refused requests and dismissed dialogs since the last operation.
#[derive(Default)]
struct Events {
    blocked: Vec<Blocked>,
    dialogs: Vec<String>,
}

type Shared = Arc<Mutex<Events>>;

fn lock(events: &Shared) -> std::sync::MutexGuard<'_, Events> {
    events.lock().unwrap_or_else(|p| p.into_inner())
}

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
/// process group and deletes the temporary profile.
pub struct Browser {
    cdp: Arc<chromiumoxide::Browser>,
    child: tokio::process::Child,
    /// The process group to kill; `None` once killed.
    pgid: Option<u32>,
    profile: Option<tempfile::TempDir>,
    profile_path: PathBuf,
    tasks: Vec<JoinHandle<()>>,
    events: Shared,
    tabs: Vec<Tab>,
    active: usize,
    options: Options,
    guard: Arc<dyn RequestGuard>,
}

impl Browser {
    /// Starts Chromium with a fresh temporary profile, connects to it and installs the
    /// request interception (every request asks `guard`) and the download ban.
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
        let args = chromium_args(&options, &profile_path);
        let mut child = process::spawn(&executable, &args).map_err(|source| Error::Spawn {
            path: executable.clone(),
            source,
        })?;
        let pgid = child.id();
        // From here every failure kills the process group (the Drop of the half-built
        // browser would not exist yet).
        let started = start(&executable, &options, &mut child).await;
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
        self.tasks
            .push(tokio::spawn(intercept(cdp, paused, guard, events, timeout)));
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

    /// Whether the browser process still runs.
    pub fn is_running(&mut self) -> bool {
        self.pgid.is_some() && matches!(self.child.try_wait(), Ok(None))
    }

    /// Opens `url` in the active tab (or a new one) and waits for it to load. The URL must
    /// be http(s) and allowed by the guard; sub-resources the guard refuses are listed in
    /// the result.
    pub async fn open(&mut self, url: &str, new_tab: bool) -> Result<PageState> {
        let parsed = url::Url::parse(url.trim()).map_err(|e| Error::InvalidUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Refused {
                url: url.to_string(),
                reason: "only http:// and https:// URLs can be opened".into(),
            });
        }
        let url = parsed.to_string();
        let verdict = tokio::time::timeout(self.options.call_timeout, self.guard.refusal(&url))
            .await
            .unwrap_or_else(|_| Some("checking its address timed out".into()));
        if let Some(reason) = verdict {
            return Err(Error::Refused { url, reason });
        }
        self.sync_tabs().await?;
        if new_tab {
            let page = self
                .call("opening a tab", self.cdp.new_page("about:blank"))
                .await?;
            self.adopt(page);
            self.active = self.tabs.len() - 1;
        }
        let page = self.page()?.clone();
        let goto = page.goto(url.as_str());
        match tokio::time::timeout(self.options.navigation_timeout, goto).await {
            Err(_) => {
                return Err(Error::Timeout {
                    what: "loading the page",
                    after: self.options.navigation_timeout,
                })
            }
            Ok(Err(CdpError::ChromeMessage(reason))) => {
                // A navigation the guard stopped (the page or a redirect) says why.
                let blocked = std::mem::take(&mut lock(&self.events).blocked);
                let reason = if blocked.is_empty() {
                    reason
                } else {
                    let list: Vec<String> = blocked
                        .iter()
                        .map(|b| format!("{} ({})", b.url, b.reason))
                        .collect();
                    format!("{reason}: blocked {}", list.join(", "))
                };
                return Err(Error::Navigation { url, reason });
            }
            Ok(Err(source)) => {
                return Err(Error::Cdp {
                    what: "loading the page",
                    source,
                })
            }
            Ok(Ok(_)) => {}
        }
        self.state(Vec::new()).await
    }

    /// Clicks an element (a real mouse click at its centre, after scrolling it into view)
    /// and waits for a navigation it starts.
    pub async fn click(&mut self, target: &Target) -> Result<(String, PageState)> {
        let page = self.prepare().await?;
        let before = self.tab_ids();
        let mark = self.mark(&page).await?;
        #[derive(Deserialize)]
        struct Clicked {
            x: Option<f64>,
            y: Option<f64>,
            what: String,
            covered: Option<String>,
        }
        let clicked: Clicked = self
            .script(
                &page,
                &script::click(),
                json!({ "selector": target.selector() }),
            )
            .await?;
        let what = match (clicked.x, clicked.y, clicked.covered) {
            (Some(x), Some(y), _) => {
                self.call("clicking", page.click(Point { x, y })).await?;
                clicked.what
            }
            (_, _, Some(covered)) => format!(
                "{} (covered by {covered}; clicked through the DOM instead)",
                clicked.what
            ),
            _ => clicked.what,
        };
        self.settle(&page, &mark).await;
        let state = self.state(before).await?;
        Ok((what, state))
    }

    /// Types `text` into an element (focused first; `clear` empties it), then presses
    /// Enter when `submit`, and waits for a navigation that starts.
    pub async fn type_text(
        &mut self,
        target: &Target,
        text: &str,
        clear: bool,
        submit: bool,
    ) -> Result<(String, PageState)> {
        let page = self.prepare().await?;
        let before = self.tab_ids();
        let mark = self.mark(&page).await?;
        #[derive(Deserialize)]
        struct Focused {
            what: String,
        }
        let focused: Focused = self
            .script(
                &page,
                &script::focus(),
                json!({ "selector": target.selector(), "clear": clear }),
            )
            .await?;
        if !text.is_empty() {
            self.call("typing", page.execute(InsertTextParams::new(text)))
                .await?;
        }
        if submit {
            for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
                let mut key = DispatchKeyEventParams::builder()
                    .r#type(kind.clone())
                    .key("Enter")
                    .code("Enter")
                    .windows_virtual_key_code(13)
                    .native_virtual_key_code(13);
                if kind == DispatchKeyEventType::KeyDown {
                    key = key.text("\r");
                }
                let key = key.build().map_err(Error::Page)?;
                self.call("pressing Enter", page.execute(key)).await?;
            }
        }
        self.settle(&page, &mark).await;
        let state = self.state(before).await?;
        Ok((focused.what, state))
    }

    /// Chooses an option of a `<select>` by value or visible text and fires `input` and
    /// `change`.
    pub async fn select(&mut self, target: &Target, option: &str) -> Result<(Selected, PageState)> {
        let page = self.prepare().await?;
        let before = self.tab_ids();
        let mark = self.mark(&page).await?;
        let selected: Selected = self
            .script(
                &page,
                &script::select(),
                json!({ "selector": target.selector(), "option": option }),
            )
            .await?;
        self.settle(&page, &mark).await;
        let state = self.state(before).await?;
        Ok((selected, state))
    }

    /// The text of the active tab's page (or of the elements `selector` matches) and its
    /// visible interactive elements with their references.
    pub async fn extract(&mut self, selector: Option<&str>) -> Result<Extract> {
        let page = self.prepare().await?;
        self.script(
            &page,
            script::EXTRACT,
            json!({ "selector": selector, "max_text": MAX_TEXT, "max_elements": MAX_ELEMENTS }),
        )
        .await
    }

    /// The open tabs.
    pub async fn tabs(&mut self) -> Result<Vec<TabInfo>> {
        self.sync_tabs().await?;
        let mut tabs = Vec::with_capacity(self.tabs.len());
        for index in 0..self.tabs.len() {
            tabs.push(self.tab_info(index).await);
        }
        Ok(tabs)
    }

    /// Makes tab `index` the active one.
    pub async fn switch_tab(&mut self, index: usize) -> Result<PageState> {
        self.sync_tabs().await?;
        self.check_tab(index)?;
        self.active = index;
        let page = self.page()?.clone();
        self.call("activating the tab", page.bring_to_front())
            .await?;
        self.state(Vec::new()).await
    }

    /// Closes tab `index`; the last tab is replaced by a blank one.
    pub async fn close_tab(&mut self, index: usize) -> Result<PageState> {
        self.sync_tabs().await?;
        self.check_tab(index)?;
        let tab = self.tabs.remove(index);
        let page = tab.page.clone();
        drop(tab);
        self.call("closing the tab", page.close()).await?;
        if self.tabs.is_empty() {
            let page = self
                .call("opening a tab", self.cdp.new_page("about:blank"))
                .await?;
            self.adopt(page);
        }
        if self.active >= index && self.active > 0 {
            self.active -= 1;
        }
        self.active = self.active.min(self.tabs.len() - 1);
        self.state(Vec::new()).await
    }

    /// A PNG of the active tab's viewport, or of the whole page.
    pub async fn screenshot(&mut self, full_page: bool) -> Result<Vec<u8>> {
        let page = self.prepare().await?;
        let params = ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .full_page(full_page)
            .build();
        self.call("taking the screenshot", page.screenshot(params))
            .await
    }

    /// Closes the browser: asks it to quit, kills its process group, waits for it and
    /// deletes the profile. Returns the profile's path (now gone).
    pub async fn close(mut self) -> Result<PathBuf> {
        let quit = self.cdp.execute(CloseParams::default());
        let _ = tokio::time::timeout(Duration::from_secs(2), quit).await;
        self.kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.tabs.clear();
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

    // ---- tabs ----

    fn adopt(&mut self, page: Page) {
        let dialogs = tokio::spawn(dismiss_dialogs(page.clone(), self.events.clone()));
        self.tabs.push(Tab { page, dialogs });
    }

    fn page(&self) -> Result<&Page> {
        self.tabs
            .get(self.active)
            .map(|t| &t.page)
            .ok_or(Error::NoSuchTab {
                index: self.active,
                open: self.tabs.len(),
            })
    }

    fn check_tab(&self, index: usize) -> Result<()> {
        if index < self.tabs.len() {
            Ok(())
        } else {
            Err(Error::NoSuchTab {
                index,
                open: self.tabs.len(),
            })
        }
    }

    fn tab_ids(&self) -> Vec<String> {
        self.tabs
            .iter()
            .map(|t| t.page.target_id().as_ref().to_string())
            .collect()
    }

    /// Drops tabs that closed and adopts pages our tabs opened (popups, `target=_blank`),
    /// in the order they appear. A browser whose process died is [`Error::Gone`].
    async fn sync_tabs(&mut self) -> Result<()> {
        if !self.is_running() {
            return Err(Error::Gone);
        }
        let pages = self.call("listing tabs", self.cdp.pages()).await?;
        let live: Vec<String> = pages
            .iter()
            .map(|p| p.target_id().as_ref().to_string())
            .collect();
        let active_id = self.tab_ids().get(self.active).cloned();
        self.tabs
            .retain(|t| live.contains(&t.page.target_id().as_ref().to_string()));
        for page in pages {
            let known = self.tab_ids();
            let id = page.target_id().as_ref().to_string();
            let opened_by_ours = page
                .opener_id()
                .as_ref()
                .is_some_and(|opener| known.contains(&opener.as_ref().to_string()));
            if !known.contains(&id) && opened_by_ours {
                self.adopt(page);
            }
        }
        if self.tabs.is_empty() {
            let page = self
                .call("opening a tab", self.cdp.new_page("about:blank"))
                .await?;
            self.adopt(page);
        }
        self.active = active_id
            .and_then(|id| self.tab_ids().iter().position(|t| *t == id))
            .unwrap_or(self.tabs.len() - 1);
        Ok(())
    }

    async fn tab_info(&self, index: usize) -> TabInfo {
        #[derive(Deserialize, Default)]
        struct Location {
            url: String,
            title: String,
        }
        let location = match self.tabs.get(index) {
            Some(tab) => self
                .script::<Location>(&tab.page, script::LOCATION, Value::Null)
                .await
                .unwrap_or_default(),
            None => Location::default(),
        };
        TabInfo {
            index,
            url: location.url,
            title: location.title,
            active: index == self.active,
        }
    }

    /// The active page, with the tabs brought up to date first.
    async fn prepare(&mut self) -> Result<Page> {
        self.sync_tabs().await?;
        Ok(self.page()?.clone())
    }

    /// The active tab's state, with what happened since the previous operation; `before`
    /// are the tab ids before the operation (the others are new).
    async fn state(&mut self, before: Vec<String>) -> Result<PageState> {
        self.sync_tabs().await?;
        let info = self.tab_info(self.active).await;
        let mut new_tabs = Vec::new();
        if !before.is_empty() {
            for (index, id) in self.tab_ids().into_iter().enumerate() {
                if !before.contains(&id) {
                    new_tabs.push(self.tab_info(index).await);
                }
            }
        }
        let events = std::mem::take(&mut *lock(&self.events));
        Ok(PageState {
            tab: self.active,
            url: info.url,
            title: info.title,
            blocked: events.blocked,
            new_tabs,
            dialogs: events.dialogs,
        })
    }

    // ---- scripts and waiting ----

    async fn mark(&self, page: &Page) -> Result<String> {
        self.script(page, script::MARK, Value::Null).await
    }

    /// After an action: returns at once when the document is unchanged for
    /// [`SETTLE_QUIET`]; when a navigation replaced it, waits (up to the navigation
    /// timeout) until the new document has loaded.
    async fn settle(&self, page: &Page, mark: &str) {
        let start = Instant::now();
        let short = Duration::from_millis(1_000).min(self.options.call_timeout);
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let state = tokio::time::timeout(
                short,
                self.script::<(Option<String>, String, String, String)>(
                    page,
                    script::STATE,
                    Value::Null,
                ),
            )
            .await;
            if let Ok(Ok((current, ready, _, _))) = state {
                let same = current.as_deref() == Some(mark);
                if !same && ready == "complete" {
                    return;
                }
                if same && start.elapsed() >= SETTLE_QUIET {
                    return;
                }
            }
            // An error means the context went away: a navigation is under way.
            if start.elapsed() >= self.options.navigation_timeout {
                tracing::debug!("page did not settle within the navigation timeout");
                return;
            }
        }
    }

    /// Runs one of [`script`]'s functions with `argument` in `page`; an `{error}` result or
    /// an exception is [`Error::Page`].
    async fn script<T: DeserializeOwned>(
        &self,
        page: &Page,
        function: &str,
        argument: Value,
    ) -> Result<T> {
        let mut params = EvaluateParams::new(script::call(function, &argument));
        params.await_promise = Some(true);
        params.return_by_value = Some(true);
        let evaluated =
            tokio::time::timeout(self.options.call_timeout, page.evaluate_expression(params))
                .await
                .map_err(|_| Error::Timeout {
                    what: "running a script in the page",
                    after: self.options.call_timeout,
                })?;
        let value = match evaluated {
            Ok(result) => result.value().cloned().unwrap_or(Value::Null),
            Err(CdpError::JavascriptException(details)) => {
                let message = details
                    .exception
                    .as_ref()
                    .and_then(|e| e.description.clone())
                    .unwrap_or_else(|| details.text.clone());
                let first = message.lines().next().unwrap_or_default();
                return Err(Error::Page(first.trim_start_matches("Error: ").to_string()));
            }
            Err(source) => {
                return Err(Error::Cdp {
                    what: "running a script in the page",
                    source,
                })
            }
        };
        if let Some(error) = value.get("error").and_then(Value::as_str) {
            return Err(Error::Page(error.to_string()));
        }
        serde_json::from_value(value)
            .map_err(|e| Error::Page(format!("unexpected answer from the page: {e}")))
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
    /// Kills the process group; the profile directory goes with the `TempDir`.
    fn drop(&mut self) {
        self.kill();
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.tabs.clear();
    }
}

/// The command line: headless, the temporary profile, a DevTools endpoint on a free
/// loopback port, and everything that would make requests of its own (updates, sync,
/// metrics, safe browsing, translation) off. WebRTC may not send UDP past the proxy
/// settings, i.e. not at all.
fn chromium_args(options: &Options, profile: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--headless=new",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-component-extensions-with-background-pages",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,InterestFeedContentSuggestions",
        "--metrics-recording-only",
        "--no-pings",
        "--password-store=basic",
        "--use-mock-keychain",
        "--mute-audio",
        "--hide-scrollbars",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Chromium's own sandbox cannot run as root.
    if process::running_as_root() {
        args.push("--no-sandbox".into());
    }
    args.push(format!(
        "--window-size={},{}",
        options.window.0, options.window.1
    ));
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push("about:blank".into());
    args
}

/// Reads the DevTools endpoint from stderr, connects and spawns the protocol handler.
async fn start(
    executable: &Path,
    options: &Options,
    child: &mut tokio::process::Child,
) -> Result<(chromiumoxide::Browser, JoinHandle<()>)> {
    let failed = |detail: String| Error::Start {
        path: executable.to_path_buf(),
        detail,
    };
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| failed("no stderr pipe".into()))?;
    let mut lines = BufReader::new(stderr).lines();
    let mut seen: Vec<String> = Vec::new();
    let endpoint = tokio::time::timeout(options.launch_timeout, async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    if let Some(url) = line.split("DevTools listening on ").nth(1) {
                        return Ok(url.trim().to_string());
                    }
                    if seen.len() == 8 {
                        seen.remove(0);
                    }
                    seen.push(line);
                }
                Ok(None) | Err(_) => {
                    return Err(format!(
                        "it exited before opening its DevTools endpoint; its last output: {}",
                        seen.join(" | ")
                    ))
                }
            }
        }
    })
    .await;
    let endpoint = match endpoint {
        Ok(Ok(url)) => url,
        Ok(Err(detail)) => return Err(failed(detail)),
        Err(_) => {
            return Err(failed(format!(
                "no DevTools endpoint within {} s",
                options.launch_timeout.as_secs()
            )))
        }
    };
    // Keep draining stderr so the browser never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(line, "chromium");
        }
    });
    let config = HandlerConfig {
        request_timeout: options.call_timeout,
        viewport: None,
        ..HandlerConfig::default()
    };
    let connect = chromiumoxide::Browser::connect_with_config(endpoint, config);
    let (cdp, mut handler) = match tokio::time::timeout(options.launch_timeout, connect).await {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => return Err(failed(format!("cannot connect to DevTools: {e}"))),
        Err(_) => return Err(failed("connecting to DevTools timed out".into())),
    };
    let handler = tokio::spawn(async move {
        while let Some(event) = handler.next().await {
            if let Err(e) = event {
                tracing::debug!(error = %e, "devtools handler");
            }
        }
    });
    Ok((cdp, handler))
}

/// Decides every paused request: continue when the guard allows its URL, else fail it
/// with `BlockedByClient` and record it. Decisions run concurrently.
async fn intercept(
    cdp: Arc<chromiumoxide::Browser>,
    mut paused: chromiumoxide::listeners::EventStream<EventRequestPaused>,
    guard: Arc<dyn RequestGuard>,
    events: Shared,
    timeout: Duration,
) {
    while let Some(event) = paused.next().await {
        let cdp = cdp.clone();
        let guard = guard.clone();
        let events = events.clone();
        tokio::spawn(async move {
            let url = event.request.url.clone();
            let refusal = tokio::time::timeout(timeout, guard.refusal(&url))
                .await
                .unwrap_or_else(|_| Some("checking its address timed out".into()));
            let id = event.request_id.clone();
            let sent = match refusal {
                None => tokio::time::timeout(timeout, cdp.execute(ContinueRequestParams::new(id)))
                    .await
                    .map(|r| r.map(|_| ())),
                Some(reason) => {
                    tracing::info!(url, reason, "browser request blocked");
                    lock(&events).blocked.push(Blocked {
                        url: url.clone(),
                        reason,
                    });
                    let fail = FailRequestParams::new(id, ErrorReason::BlockedByClient);
                    tokio::time::timeout(timeout, cdp.execute(fail))
                        .await
                        .map(|r| r.map(|_| ()))
                }
            };
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(url, error = %e, "answering a paused request"),
                Err(_) => tracing::debug!(url, "answering a paused request timed out"),
            }
        });
    }
}

/// Dismisses every JavaScript dialog of `page` and records its message.
async fn dismiss_dialogs(page: Page, events: Shared) {
    let Ok(mut dialogs) = page.event_listener::<EventJavascriptDialogOpening>().await else {
        return;
    };
    while let Some(dialog) = dialogs.next().await {
        lock(&events)
            .dialogs
            .push(format!("{:?}: {}", dialog.r#type, dialog.message));
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            page.execute(HandleJavaScriptDialogParams::new(false)),
        )
        .await;
    }
}
