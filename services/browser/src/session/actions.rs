//! The page operations the tools call: open, click, type, select, extract, screenshot.
//! Each returns where the active tab is afterwards ([`PageState`]) or what it read.

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::error::CdpError;
use chromiumoxide::layout::Point;
use chromiumoxide::page::ScreenshotParams;
use serde::Deserialize;
use serde_json::json;

use super::Browser;
use crate::error::{Error, Result};
use crate::script;
use crate::{Extract, PageState, Selected, Target};

/// Characters of page text read at most (the tools cut further to their output cap).
const MAX_TEXT: usize = 1_000_000;
/// Interactive elements listed at most by one extract.
const MAX_ELEMENTS: usize = 300;

impl Browser {
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
                let blocked = self.take_blocked();
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
}
