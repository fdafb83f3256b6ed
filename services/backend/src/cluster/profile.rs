//! The cluster instance as a server [`Profile`]: JWT authentication, routing by the method
//! table, subscriptions from PostgreSQL, drain and readiness.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderName};
use lumina_protocol::methods::{DrainResult, Identity, SessionResumeParams};
use lumina_protocol::{ErrorObject, Method};
use serde_json::Value;

use super::Node;
use crate::execute::Reply;
use crate::profile::{Profile, Subscription};

/// [`Profile`] over a [`Node`].
pub struct ClusterProfile(pub Arc<Node>);

#[async_trait]
impl Profile for ClusterProfile {
    async fn authenticate(&self, headers: &HeaderMap) -> Option<(Identity, Option<i64>)> {
        self.0.authenticate(headers).await
    }

    async fn call(&self, identity: &Identity, method: Method, params: Value) -> Reply {
        self.0.route(identity, method, params).await
    }

    async fn subscribe(
        &self,
        identity: &Identity,
        params: &SessionResumeParams,
    ) -> Result<Subscription, ErrorObject> {
        self.0.subscribe(identity, params).await
    }

    async fn drain(&self) -> Result<DrainResult, ErrorObject> {
        self.0.drain().await
    }

    fn shutdown(&self) {
        self.0.begin_shutdown();
    }

    async fn readiness(&self) -> (bool, Value) {
        self.0.readiness().await
    }

    fn sync_metrics(&self) {
        self.0.sync_metrics();
    }

    fn tool_results_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.0.tool_results_dir())
    }
}

/// The JWT a request presents: `Authorization: Bearer …` (the console's subprotocol bearer
/// arrives there too), else — only when `proxy_header` is configured — the header an
/// authenticating reverse proxy set, bare or as `Bearer …` (docs/console.md#sign-in). Any
/// other header is ignored, whatever it carries.
pub(super) fn presented_jwt<'h>(
    headers: &'h HeaderMap,
    proxy_header: Option<&HeaderName>,
) -> Option<&'h str> {
    let bearer = |value: &'h str| {
        value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
    };
    if let Some(value) = headers.get(AUTHORIZATION) {
        return bearer(value.to_str().ok()?);
    }
    let value = headers.get(proxy_header?)?.to_str().ok()?.trim();
    // The proxy adds the header to every request of a signed-in browser, like a cookie: a
    // WebSocket another site opens must not ride on it.
    if !same_origin_or_none(headers) {
        tracing::info!("proxy-header jwt refused: the upgrade comes from another origin");
        return None;
    }
    Some(bearer(value).unwrap_or(value)).filter(|token| !token.is_empty())
}

/// Whether the request has no `Origin` (not a browser) or one whose host and port are the
/// request's `Host`.
fn same_origin_or_none(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority);
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_proxy_header_counts_only_when_configured() {
        let proxy = HeaderName::from_static("x-forwarded-access-token");
        let forged = headers(&[("x-forwarded-access-token", "eyJ.forged.jwt")]);
        assert_eq!(presented_jwt(&forged, None), None);
        assert_eq!(
            presented_jwt(&forged, Some(&HeaderName::from_static("x-other"))),
            None
        );
        assert_eq!(presented_jwt(&forged, Some(&proxy)), Some("eyJ.forged.jwt"));
        let prefixed = headers(&[("x-forwarded-access-token", "Bearer eyJ.a.b")]);
        assert_eq!(presented_jwt(&prefixed, Some(&proxy)), Some("eyJ.a.b"));
        let empty = headers(&[("x-forwarded-access-token", " ")]);
        assert_eq!(presented_jwt(&empty, Some(&proxy)), None);
    }

    #[test]
    fn a_proxy_header_counts_only_on_a_same_origin_upgrade() {
        let proxy = HeaderName::from_static("x-forwarded-access-token");
        let own = headers(&[
            ("x-forwarded-access-token", "eyJ.a.b"),
            ("host", "lumina.example"),
            ("origin", "https://lumina.example"),
        ]);
        assert_eq!(presented_jwt(&own, Some(&proxy)), Some("eyJ.a.b"));
        let foreign = headers(&[
            ("x-forwarded-access-token", "eyJ.a.b"),
            ("host", "lumina.example"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(presented_jwt(&foreign, Some(&proxy)), None);
        let no_host = headers(&[
            ("x-forwarded-access-token", "eyJ.a.b"),
            ("origin", "https://lumina.example"),
        ]);
        assert_eq!(presented_jwt(&no_host, Some(&proxy)), None);
    }

    #[test]
    fn authorization_comes_first() {
        let proxy = HeaderName::from_static("x-forwarded-access-token");
        let both = headers(&[
            ("authorization", "Bearer eyJ.pasted.jwt"),
            ("x-forwarded-access-token", "eyJ.proxy.jwt"),
        ]);
        assert_eq!(presented_jwt(&both, Some(&proxy)), Some("eyJ.pasted.jwt"));
        let basic = headers(&[("authorization", "Basic abc")]);
        assert_eq!(presented_jwt(&basic, None), None);
    }
}
