//! A slot's authorization: every HTTP server without its own `Authorization` header gets an
//! [`OAuth`] (kept while its URL and `"oauth"` settings stay the same) with the token file
//! under the AppRoot and, when `interactive_auth` is on, the loopback sign-in agent. A
//! watcher reconnects the slot as soon as a sign-in it was waiting for completes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::slot::{trim, ServerSlot};
use super::ServerState;
use crate::client::auth::{
    AuthError, LoopbackAgent, OAuth, OAuthConfig, PreRegistered, TokenStore, UserAgent,
};
use crate::client::Endpoint;

impl ServerSlot {
    pub(super) fn current_oauth(&self) -> Option<Arc<OAuth>> {
        self.oauth.lock().ok().and_then(|o| o.clone())
    }

    /// "needs authorization: open …" while a person has yet to sign in.
    pub(super) fn pending_sign_in(&self) -> Option<String> {
        let url = self.current_oauth()?.pending_authorization()?;
        let minutes = self.opts.auth_timeout.as_secs().div_ceil(60);
        Some(AuthError::Pending { url, minutes }.to_string())
    }

    /// The authorization to connect `endpoint` with (`None`: stdio, or an HTTP server
    /// configured with an explicit `Authorization` header).
    pub(super) fn oauth_for(&self, endpoint: &Endpoint) -> Option<Arc<OAuth>> {
        let Endpoint::Http {
            url,
            headers,
            oauth,
            ..
        } = endpoint
        else {
            return None;
        };
        if headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            return None;
        }
        let mut cfg = OAuthConfig::new(url.clone(), self.name());
        if let Some(o) = oauth {
            cfg.client = o.client_id.clone().map(|client_id| PreRegistered {
                client_id,
                client_secret: o.client_secret.clone(),
                signing_key: None,
            });
            cfg.scopes = o.scopes.clone();
        }
        cfg.client_metadata_url = self.opts.client_metadata_url.clone();
        let mut current = self.oauth.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = current.as_ref() {
            let c = existing.config();
            if c.server_url == cfg.server_url && c.client == cfg.client && c.scopes == cfg.scopes {
                return Some(existing.clone());
            }
            existing.cancel_pending();
        }
        let agent: Option<Arc<dyn UserAgent>> = if self.opts.interactive_auth {
            Some(Arc::new(
                LoopbackAgent::new(self.name()).with_timeout(self.opts.auth_timeout),
            ))
        } else {
            None
        };
        let store = TokenStore::for_server(&self.opts.app_root, url);
        match OAuth::new(cfg, agent, Some(store)) {
            Ok(auth) => {
                self.watch(&auth);
                *current = Some(auth.clone());
                Some(auth)
            }
            Err(e) => {
                tracing::warn!(server = %self.name(), error = %e, "mcp oauth unavailable");
                None
            }
        }
    }

    /// While the slot waits for a sign-in: reconnects it when the sign-in brought tokens,
    /// or shows why it ended without (the next use of the server starts a new one).
    fn watch(&self, auth: &Arc<OAuth>) {
        let mut changes = auth.subscribe();
        let me = self.me.clone();
        let weak_auth = Arc::downgrade(auth);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let (Some(slot), Some(auth)) = (me.upgrade(), weak_auth.upgrade()) else {
                    return;
                };
                if !slot.auth_blocked.load(Ordering::Acquire) || !slot.usable() {
                    continue;
                }
                if let Some(why) = auth.sign_in_failure() {
                    slot.set_view(ServerState::Failed(trim(&why)), None);
                } else if auth.pending_authorization().is_none() {
                    tracing::debug!(server = %slot.name(), "mcp sign-in completed; reconnecting");
                    let _ = slot.tools().await;
                }
            }
        });
    }
}
