//! Authorizing: discovery, scope selection, the client identity, then the authorization
//! code flow (PKCE `S256`, `state`, `resource`) through the user agent and the code
//! exchange — or, for a pre-registered confidential client whose authorization server only
//! offers it, the `client_credentials` grant.

use std::sync::Arc;

use url::Url;

use super::agent::Callback;
use super::challenge::BearerChallenge;
use super::discovery::{self, Discovered};
use super::error::{clip, AuthError};
use super::flow::{now, union};
use super::pkce::{random_token, Pkce};
use super::registration::{self, ClientInfo, ClientKind};
use super::token::{self, Grant};
use super::OAuth;

/// An authorization request on its way: what the token exchange needs afterwards.
struct Request {
    disc: Discovered,
    client: ClientInfo,
    redirect_uri: Url,
    pkce: Pkce,
    state: String,
    scopes: Vec<String>,
}

impl OAuth {
    /// Gets new tokens. `step_up`: the scopes to ask for (reusing the last discovery).
    pub(super) async fn authorize(
        self: &Arc<Self>,
        challenge: &BearerChallenge,
        step_up: Option<Vec<String>>,
    ) -> Result<(), AuthError> {
        if let Some(url) = self.pending_authorization() {
            return Err(self.pending_error(url));
        }
        let cached = self.with_state(|s| s.stored.discovered.clone());
        let disc = match (step_up.is_some(), cached) {
            (true, Some(d)) => d,
            // Stored with the tokens it produces (`finish`), so refreshes use the matching
            // token endpoint.
            _ => {
                let hint = challenge.resource_metadata.as_deref();
                discovery::discover(&self.http, &self.cfg.server_url, hint).await?
            }
        };
        let scopes = step_up.unwrap_or_else(|| self.select_scopes(challenge, &disc));
        if self.uses_client_credentials(&disc) {
            return self.client_credentials(disc, scopes).await;
        }
        let Some(agent) = self.agent.clone() else {
            return Err(AuthError::Needed(format!(
                "`{}` requires signing in (OAuth) and this client has no way to ask; sign in \
                 from an interactive Lumina session first",
                self.cfg.label
            )));
        };
        let previous = self.with_state(|s| {
            s.stored
                .client
                .as_ref()
                .and_then(|c| c.redirect_uris.first())
                .and_then(|u| Url::parse(u).ok())
        });
        let redirect = agent.prepare(previous.as_ref()).await?;
        let redirect_uri = redirect.redirect_uri().clone();
        let client = self.client_for(&disc, &redirect_uri).await?;
        let request = Request {
            disc,
            client,
            redirect_uri,
            pkce: Pkce::new(),
            state: random_token(24),
            scopes,
        };
        let url = authorization_url(&request)?;
        tracing::debug!(server = %self.cfg.label, client_id = %request.client.client_id, "starting the oauth authorization code flow");
        if !agent.interactive() {
            let callback = redirect.complete(&url).await?;
            return self.finish(request, callback).await;
        }
        // A person signs in: finish in the background; until then requests fail with the URL.
        let url_text = url.to_string();
        self.with_state(|s| {
            s.pending = Some(url_text.clone());
            s.sign_in_failure = None;
        });
        let cancel = self
            .cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let me = self.clone();
        tokio::spawn(async move {
            let outcome = tokio::select! {
                cb = redirect.complete(&url) => match cb {
                    Ok(cb) => me.finish(request, cb).await,
                    Err(e) => Err(e),
                },
                _ = cancel.cancelled() => Err(AuthError::Needed("the sign-in was cancelled".into())),
            };
            let failure = match outcome {
                Ok(()) => {
                    tracing::info!(server = %me.cfg.label, "mcp server authorized");
                    None
                }
                Err(e) => {
                    tracing::warn!(server = %me.cfg.label, error = %e, "mcp sign-in failed");
                    Some(e)
                }
            };
            me.with_state(|s| {
                s.pending = None;
                s.sign_in_failure = failure;
            });
            me.changed.send_modify(|g| *g += 1);
        });
        Err(self.pending_error(url_text))
    }

    fn pending_error(&self, url: String) -> AuthError {
        let minutes = self
            .agent
            .as_ref()
            .map(|a| a.timeout().as_secs().div_ceil(60))
            .unwrap_or(0);
        AuthError::Pending { url, minutes }
    }

    /// Scope selection (MCP "Scope Selection Strategy"): the challenge's `scope`, else the
    /// configured scopes, else the PRM's `scopes_supported`, else none; plus the configured
    /// scopes, plus `offline_access` when the authorization server lists it.
    fn select_scopes(&self, challenge: &BearerChallenge, disc: &Discovered) -> Vec<String> {
        let base = if challenge.scope.is_some() {
            challenge.scopes()
        } else if !self.cfg.scopes.is_empty() {
            self.cfg.scopes.clone()
        } else {
            disc.prm_scopes.clone().unwrap_or_default()
        };
        let mut scopes = union(&base, &self.cfg.scopes);
        let offline = "offline_access".to_string();
        let as_lists_offline = disc
            .metadata
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.contains(&offline));
        if !scopes.is_empty() && as_lists_offline && !scopes.contains(&offline) {
            scopes.push(offline);
        }
        scopes
    }

    /// Pre-registered, else a Client ID Metadata Document, else a stored or new dynamic
    /// registration.
    async fn client_for(
        &self,
        disc: &Discovered,
        redirect_uri: &Url,
    ) -> Result<ClientInfo, AuthError> {
        if let Some(p) = &self.cfg.client {
            return Ok(ClientInfo::pre_registered(p, &disc.issuer));
        }
        if let (true, Some(doc)) = (
            disc.metadata.client_id_metadata_document_supported,
            &self.cfg.client_metadata_url,
        ) {
            return Ok(ClientInfo::metadata_document(
                doc,
                &disc.issuer,
                redirect_uri,
            ));
        }
        let stored = self.with_state(|s| s.stored.client.clone());
        if let Some(c) = stored.filter(|c| c.reusable(&disc.issuer, redirect_uri, now())) {
            return Ok(c);
        }
        let c = registration::register(
            &self.http,
            &disc.metadata,
            &disc.issuer,
            redirect_uri,
            &self.cfg.client_name,
        )
        .await?;
        self.with_state(|s| s.stored.client = Some(c.clone()));
        self.persist();
        Ok(c)
    }

    /// Checks the authorization response and exchanges the code.
    async fn finish(&self, request: Request, callback: Callback) -> Result<(), AuthError> {
        if let Some(error) = &callback.error {
            let detail = callback
                .error_description
                .as_deref()
                .map(|d| format!(": {}", clip(d)))
                .unwrap_or_default();
            return Err(AuthError::failed(format!(
                "the authorization server did not authorize: {}{detail}",
                clip(error)
            )));
        }
        if callback.state.as_deref() != Some(request.state.as_str()) {
            return Err(AuthError::failed(
                "the authorization response's state does not match the request; ignored it",
            ));
        }
        let code = callback
            .code
            .as_deref()
            .ok_or_else(|| AuthError::failed("the authorization response has no code"))?;
        let grant = Grant::Code {
            code,
            redirect_uri: &request.redirect_uri,
            verifier: request.pkce.verifier(),
        };
        let tokens = token::request(
            &self.http,
            &request.disc,
            &request.client,
            grant,
            &request.scopes,
            now(),
        )
        .await
        .map_err(|f| f.error)?;
        self.with_state(|s| {
            s.stored.discovered = Some(request.disc);
            if request.client.kind != ClientKind::PreRegistered {
                s.stored.client = Some(request.client);
            }
        });
        self.set_tokens(tokens);
        Ok(())
    }

    /// The `client_credentials` extension: a pre-registered confidential client and an
    /// authorization server that does not offer the authorization code grant.
    fn uses_client_credentials(&self, disc: &Discovered) -> bool {
        let m = &disc.metadata;
        self.cfg
            .client
            .as_ref()
            .is_some_and(|c| c.client_secret.is_some() || c.signing_key.is_some())
            && !m.supports_grant("authorization_code")
            && m.grant_types_supported
                .as_ref()
                .is_some_and(|g| g.iter().any(|x| x == "client_credentials"))
    }

    async fn client_credentials(
        &self,
        disc: Discovered,
        scopes: Vec<String>,
    ) -> Result<(), AuthError> {
        let Some(p) = &self.cfg.client else {
            return Err(AuthError::failed("no client credentials configured"));
        };
        let client = ClientInfo::pre_registered(p, &disc.issuer);
        let grant = Grant::ClientCredentials;
        let tokens = token::request(&self.http, &disc, &client, grant, &scopes, now())
            .await
            .map_err(|f| f.error)?;
        self.with_state(|s| s.stored.discovered = Some(disc));
        self.set_tokens(tokens);
        Ok(())
    }
}

/// The authorization request URL (PKCE `S256`, `state`, RFC 8707 `resource`, `scope` only
/// when there are scopes).
fn authorization_url(r: &Request) -> Result<Url, AuthError> {
    let mut url = Url::parse(&r.disc.metadata.authorization_endpoint)
        .map_err(|e| AuthError::failed(format!("invalid authorization endpoint: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &r.client.client_id)
            .append_pair("redirect_uri", r.redirect_uri.as_str())
            .append_pair("code_challenge", r.pkce.challenge())
            .append_pair("code_challenge_method", Pkce::METHOD)
            .append_pair("state", &r.state)
            .append_pair("resource", &r.disc.resource);
        if !r.scopes.is_empty() {
            q.append_pair("scope", &r.scopes.join(" "));
        }
    }
    Ok(url)
}
