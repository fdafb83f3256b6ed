//! Answering a `401` (newer token, refresh, authorize) or a `403 insufficient_scope`
//! (step-up), and keeping tokens fresh. Authorizing itself is in `authorize.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::challenge::BearerChallenge;
use super::error::{clip, AuthError};
use super::registration::ClientInfo;
use super::token::{self, Grant, Tokens};
use super::{OAuth, Tries, MAX_STEP_UPS};

/// After a refresh failed for a network reason, wait this long before the next try.
const REFRESH_BACKOFF: Duration = Duration::from_secs(30);

pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl OAuth {
    /// A `401`: a newer token → retry; else refresh once, else authorize once.
    pub(crate) async fn on_unauthorized(
        self: &Arc<Self>,
        challenge: &BearerChallenge,
        sent: u64,
        tries: &mut Tries,
    ) -> Result<(), AuthError> {
        let _flow = self.flow.lock().await;
        if self.generation() != sent {
            return Ok(());
        }
        let _busy = self.busy_guard();
        let can_refresh = self.with_state(|s| {
            s.stored
                .tokens
                .as_ref()
                .is_some_and(|t| t.refresh_token.is_some())
        });
        if can_refresh && !tries.refreshed {
            tries.refreshed = true;
            match self.refresh().await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::debug!(server = %self.cfg.label, error = %e, "token refresh failed; authorizing again")
                }
            }
        }
        if tries.authorized {
            return Err(AuthError::failed(
                "the server still answers HTTP 401 Unauthorized with a new access token",
            ));
        }
        tries.authorized = true;
        self.authorize(challenge, None).await
    }

    /// A `403 insufficient_scope`: re-authorize with more scope, unless the token already
    /// has what is asked for or the step-up budget is spent.
    pub(crate) async fn on_insufficient_scope(
        self: &Arc<Self>,
        challenge: &BearerChallenge,
        sent: u64,
        tries: &mut Tries,
    ) -> Result<(), AuthError> {
        let _flow = self.flow.lock().await;
        if self.generation() != sent {
            return Ok(());
        }
        let required = challenge.scopes();
        let insufficient = || AuthError::InsufficientScope {
            required: clip(challenge.scope.as_deref().unwrap_or("(not named)")),
        };
        let granted = self
            .with_state(|s| s.stored.tokens.as_ref().map(|t| t.scopes.clone()))
            .unwrap_or_default();
        if required.is_empty() || required.iter().all(|r| granted.contains(r)) {
            return Err(insufficient());
        }
        if tries.step_ups >= MAX_STEP_UPS {
            return Err(insufficient());
        }
        tries.step_ups += 1;
        let _busy = self.busy_guard();
        tracing::info!(server = %self.cfg.label, scope = ?required, "mcp server asks for more scope; authorizing again");
        self.authorize(challenge, Some(union(&granted, &required)))
            .await
    }

    /// Refreshes before the request when the token is about to expire (errors are logged:
    /// the request then goes out with the old token and a `401` decides).
    pub(crate) async fn refresh_if_expiring(&self) {
        let due = |s: &super::State| {
            s.stored
                .tokens
                .as_ref()
                .is_some_and(|t| t.refresh_token.is_some() && t.refresh_due(now()))
                && s.refresh_backoff
                    .is_none_or(|until| Instant::now() >= until)
        };
        if !self.with_state(|s| due(s)) {
            return;
        }
        let _flow = self.flow.lock().await;
        if !self.with_state(|s| due(s)) {
            return; // someone else refreshed meanwhile
        }
        let _busy = self.busy_guard();
        if let Err(e) = self.refresh().await {
            tracing::info!(server = %self.cfg.label, error = %e, "refreshing the mcp access token failed");
        }
    }

    /// Exchanges the refresh token. A rejected refresh token is forgotten.
    async fn refresh(&self) -> Result<(), AuthError> {
        let (disc, client, tokens) = self.with_state(|s| {
            (
                s.stored.discovered.clone(),
                self.current_client(s),
                s.stored.tokens.clone(),
            )
        });
        let (Some(disc), Some(client), Some(tokens)) = (disc, client, tokens) else {
            return Err(AuthError::failed("nothing to refresh with"));
        };
        let Some(refresh_token) = &tokens.refresh_token else {
            return Err(AuthError::failed("no refresh token"));
        };
        let grant = Grant::Refresh { refresh_token };
        match token::request(&self.http, &disc, &client, grant, &tokens.scopes, now()).await {
            Ok(fresh) => {
                tracing::debug!(server = %self.cfg.label, "mcp access token refreshed");
                self.set_tokens(fresh);
                Ok(())
            }
            Err(failure) => {
                self.with_state(|s| {
                    if failure.rejected {
                        if let Some(t) = &mut s.stored.tokens {
                            t.refresh_token = None;
                        }
                    } else {
                        s.refresh_backoff = Some(Instant::now() + REFRESH_BACKOFF);
                    }
                });
                if failure.rejected {
                    self.persist();
                }
                Err(failure.error)
            }
        }
    }

    /// The client that holds the tokens: pre-registered from configuration, else the stored
    /// registration.
    pub(super) fn current_client(&self, s: &super::State) -> Option<ClientInfo> {
        let issuer = s.stored.discovered.as_ref().map(|d| d.issuer.as_str())?;
        match &self.cfg.client {
            Some(p) => Some(ClientInfo::pre_registered(p, issuer)),
            None => s.stored.client.clone(),
        }
    }

    pub(super) fn set_tokens(&self, tokens: Tokens) {
        let generation = self.with_state(|s| {
            s.stored.tokens = Some(tokens);
            s.refresh_backoff = None;
            s.sign_in_failure = None;
            s.generation += 1;
            s.generation
        });
        self.persist();
        self.changed.send_replace(generation);
    }
}

/// `a` followed by the items of `b` it lacks.
pub(super) fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for s in b {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}
