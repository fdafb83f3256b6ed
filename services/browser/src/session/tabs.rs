//! Tabs: the pages our tabs opened are adopted (popups, `target=_blank`), closed ones
//! dropped, and the state after an operation says where the active tab is and what
//! happened meanwhile (refusals, new tabs, dismissed dialogs).

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::page::{
    EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::Page;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use super::{Browser, Tab};
use crate::error::{Error, Result};
use crate::events::{lock, note_blocked, Shared};
use crate::script;
use crate::{Blocked, PageState, TabInfo};

impl Browser {
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

    pub(super) fn adopt(&mut self, page: Page) {
        let dialogs = tokio::spawn(dismiss_dialogs(page.clone(), self.events.clone()));
        self.tabs.push(Tab { page, dialogs });
    }

    pub(super) fn page(&self) -> Result<&Page> {
        self.tabs
            .get(self.active)
            .map(|t| &t.page)
            .ok_or(Error::NoSuchTab {
                index: self.active,
                open: self.tabs.len(),
            })
    }

    pub(super) fn check_tab(&self, index: usize) -> Result<()> {
        if index < self.tabs.len() {
            Ok(())
        } else {
            Err(Error::NoSuchTab {
                index,
                open: self.tabs.len(),
            })
        }
    }

    pub(super) fn tab_ids(&self) -> Vec<String> {
        self.tabs
            .iter()
            .map(|t| t.page.target_id().as_ref().to_string())
            .collect()
    }

    /// Drops tabs that closed and adopts pages our tabs opened (popups, `target=_blank`),
    /// in the order they appear. A browser whose process died is [`Error::Gone`].
    pub(super) async fn sync_tabs(&mut self) -> Result<()> {
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

    pub(super) async fn tab_info(&self, index: usize) -> TabInfo {
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
    pub(super) async fn prepare(&mut self) -> Result<Page> {
        self.sync_tabs().await?;
        Ok(self.page()?.clone())
    }

    /// The active tab's state, with what happened since the previous operation; `before`
    /// are the tab ids before the operation (the others are new).
    pub(super) async fn state(&mut self, before: Vec<String>) -> Result<PageState> {
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
        let blocked = self.take_blocked();
        let dialogs = std::mem::take(&mut lock(&self.events).dialogs);
        Ok(PageState {
            tab: self.active,
            url: info.url,
            title: info.title,
            blocked,
            new_tabs,
            dialogs,
        })
    }

    /// The requests `Fetch` refused and the connections the proxy refused since the
    /// previous operation.
    pub(super) fn take_blocked(&self) -> Vec<Blocked> {
        let mut blocked = std::mem::take(&mut lock(&self.events).blocked);
        if let Some(proxy) = &self.proxy {
            for refused in proxy.take_refused() {
                note_blocked(&mut blocked, refused);
            }
        }
        blocked
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
