//! Scripts in the page and waiting for it: each of [`crate::script`]'s functions runs with
//! a JSON argument and a timeout; after an action the page is watched until it settles.

use std::time::{Duration, Instant};

use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::error::CdpError;
use chromiumoxide::Page;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Browser;
use crate::error::{Error, Result};
use crate::script;

/// How long after an action a navigation may take to start before the action counts as
/// one that did not navigate.
const SETTLE_QUIET: Duration = Duration::from_millis(400);

impl Browser {
    pub(super) async fn mark(&self, page: &Page) -> Result<String> {
        self.script(page, script::MARK, Value::Null).await
    }

    /// After an action: returns at once when the document is unchanged for
    /// [`SETTLE_QUIET`]; when a navigation replaced it, waits (up to the navigation
    /// timeout) until the new document has loaded.
    pub(super) async fn settle(&self, page: &Page, mark: &str) {
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
    pub(super) async fn script<T: DeserializeOwned>(
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
}
