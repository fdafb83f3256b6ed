//! Sign-ins a person has yet to complete, for callers that wait for them (a run that
//! needs the server's tools): which servers of a project wait for a browser, at which
//! authorization URL, and how a sign-in ended. The flow itself runs in the server's
//! [`OAuth`](crate::client::auth::OAuth) (`auth.rs` reconnects the slot when it brings
//! tokens); this only observes it.

use std::path::Path;
use std::time::Duration;

use super::McpManager;
use crate::client::auth::AuthError;

/// Waited for past the user agent's own limit, so its timeout (not ours) ends the flow.
const GRACE: Duration = Duration::from_secs(5);

/// A server of the project that waits for a person to open `url` and sign in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSignIn {
    pub server: String,
    /// The authorization URL (no secret: the PKCE verifier and the client secret never
    /// appear in it).
    pub url: String,
}

/// How a sign-in ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInEnd {
    /// Tokens arrived; the server reconnects.
    SignedIn,
    /// Nobody completed it in time (`auth_timeout`).
    TimedOut,
    /// It ended without tokens: the reason (an OAuth error code, a refused exchange, a
    /// cancelled flow), never a token or a secret.
    Failed(String),
}

impl McpManager {
    /// The project's usable servers whose sign-in waits for a person, by name. Reads the
    /// slots as the last [`Self::tools`] left them (it starts the sign-ins).
    pub fn pending_sign_ins(&self, project_root: &Path) -> Vec<PendingSignIn> {
        let project = self.project(project_root);
        let slots = project.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .filter(|slot| slot.usable())
            .filter_map(|slot| {
                let url = slot.current_oauth()?.pending_authorization()?;
                Some(PendingSignIn {
                    server: slot.name().to_owned(),
                    url,
                })
            })
            .collect()
    }

    /// Waits until the sign-in of `server` ends, at most the manager's `auth_timeout` (and
    /// a few seconds' grace). A server with no sign-in under way ends at once: signed in
    /// when it holds tokens.
    pub async fn wait_sign_in(&self, project_root: &Path, server: &str) -> SignInEnd {
        let slot = {
            let project = self.project(project_root);
            let slots = project.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.get(server).cloned()
        };
        let Some(auth) = slot.and_then(|s| s.current_oauth()) else {
            return SignInEnd::Failed(format!("`{server}` has no sign-in under way"));
        };
        // Subscribed before looking, so an end between the two is not missed.
        let mut changes = auth.subscribe();
        let deadline = tokio::time::Instant::now() + self.inner.opts.auth_timeout + GRACE;
        while auth.pending_authorization().is_some() {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Err(_) => return SignInEnd::TimedOut,
                Ok(Err(_)) => return SignInEnd::Failed("the sign-in was abandoned".into()),
                Ok(Ok(())) => {}
            }
        }
        match auth.sign_in_error() {
            Some(AuthError::SignInTimedOut { .. }) => SignInEnd::TimedOut,
            Some(error) => SignInEnd::Failed(error.to_string()),
            None if auth.is_authorized() => SignInEnd::SignedIn,
            None => SignInEnd::Failed("the sign-in ended without tokens".into()),
        }
    }
}
