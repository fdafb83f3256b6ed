//! The `Fetch` check: every request the browser makes pauses (`Fetch.enable` with the
//! pattern `*` on the browser target) until the guard decides its URL. It checks the scheme
//! (`file:`, `chrome:` and the like never reach the proxy) and names refused URLs; the
//! proxy ([`crate::Proxy`]) checks the addresses actually connected to.

use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EventRequestPaused, FailRequestParams,
};
use chromiumoxide::cdp::browser_protocol::network::ErrorReason;
use futures::StreamExt;

use crate::events::{lock, note_blocked, Shared};
use crate::{Blocked, RequestGuard};

/// Decides every paused request: continue when the guard allows its URL, else fail it
/// with `BlockedByClient` and record it. Decisions run concurrently.
pub(super) async fn intercept(
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
                    note_blocked(
                        &mut lock(&events).blocked,
                        Blocked {
                            url: url.clone(),
                            reason,
                        },
                    );
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
