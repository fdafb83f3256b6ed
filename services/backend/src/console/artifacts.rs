//! `GET /console/api/sessions/{id}/artifacts/{name}`: a file a tool saved among a session's
//! artifacts — the browser's screenshots, `<tool-results>/<session>/artifacts/*.png` — for
//! the console's tool-call view (docs/console.md#artifacts).
//!
//! - **Who:** a bearer token (`Authorization`; in the cluster also the proxy header), else
//!   — local profile — the console cookie on a GET from the page itself
//!   ([`super::auth::same_loopback_get`]). The token needs the `read` scope.
//! - **Which session:** `session.info` through the profile for the caller decides, the same
//!   tenant check as every read: another tenant's session, like an unknown one, is 404.
//! - **Which file:** a plain name (`[A-Za-z0-9._-]`, no leading dot) of a known type (PNG
//!   only), whose canonical path is exactly `<tool-results>/<session>/artifacts/<name>`:
//!   no `..`, no separator, no symbolic link on the way; its content must start with the
//!   type's signature, so the `Content-Type` is true (the response also says `nosniff`).
//! - **Where:** this instance's disk. In the cluster the picture is on the instance that
//!   ran the tool; any other instance answers 404 (the page then says so).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lumina_protocol::methods::Identity;
use lumina_protocol::{Method, Scope};
use lumina_tools::builtin::SCREENSHOT_DIR;

use super::assets;
use crate::profile::AppState;

/// The route's path.
pub const ROUTE: &str = "/console/api/sessions/{id}/artifacts/{name}";

/// The largest artifact served (a full-page screenshot of a long page is a few MB).
const MAX_BYTES: u64 = 32 << 20;

/// The file types served: extension, media type, the content's first bytes.
const TYPES: &[(&str, &str, &[u8])] = &[(".png", "image/png", b"\x89PNG\r\n\x1a\n")];

pub(super) async fn artifact(
    State(state): State<Arc<AppState>>,
    UrlPath((id, name)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let Some(identity) = caller(&state, &headers).await else {
        state.metrics.ws_auth_failures.inc();
        return refused(StatusCode::UNAUTHORIZED);
    };
    if !Scope::Read.granted_by(&identity.scopes) {
        return refused(StatusCode::FORBIDDEN);
    }
    let (Some(session), Some((media_type, signature))) = (session_id(&id), file_type(&name)) else {
        return refused(StatusCode::NOT_FOUND);
    };
    let info = state
        .profile
        .call(
            &identity,
            Method::SessionInfo,
            serde_json::json!({ "session_id": session }),
        )
        .await;
    if info.is_err() {
        return refused(StatusCode::NOT_FOUND);
    }
    let Some(results) = state.profile.tool_results_dir() else {
        return refused(StatusCode::NOT_FOUND);
    };
    match read(&results, &session, &name, signature).await {
        Some(body) => {
            let mut response = body.into_response();
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
            assets::security_headers(headers);
            response
        }
        None => refused(StatusCode::NOT_FOUND),
    }
}

/// A bearer token (or the cluster's proxy header), else the local console's cookie.
async fn caller(state: &AppState, headers: &HeaderMap) -> Option<Identity> {
    if let Some((identity, _expires_at)) = state.profile.authenticate(headers).await {
        return Some(identity);
    }
    state.profile.console()?.authenticate_get(headers)
}

/// A session id is a UUID; its canonical form names the directory.
fn session_id(id: &str) -> Option<String> {
    uuid::Uuid::parse_str(id)
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// The media type and signature of a plain artifact file name, `None` for anything else.
fn file_type(name: &str) -> Option<(&'static str, &'static [u8])> {
    let plain = (1..=200).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if !plain {
        return None;
    }
    TYPES
        .iter()
        .find(|(extension, _, _)| name.len() > extension.len() && name.ends_with(extension))
        .map(|(_, media_type, signature)| (*media_type, *signature))
}

/// The file's bytes when it is a regular file at exactly
/// `<results>/<session>/artifacts/<name>` (canonically: no link leads elsewhere), at most
/// [`MAX_BYTES`], starting with `signature`.
async fn read(results: &Path, session: &str, name: &str, signature: &[u8]) -> Option<Vec<u8>> {
    let root = tokio::fs::canonicalize(results).await.ok()?;
    let expected = root.join(session).join(SCREENSHOT_DIR).join(name);
    let actual = tokio::fs::canonicalize(results.join(session).join(SCREENSHOT_DIR).join(name))
        .await
        .ok()?;
    if actual != expected {
        tracing::info!(
            session_id = session,
            "artifact refused: its path leads elsewhere"
        );
        return None;
    }
    let meta = tokio::fs::metadata(&actual).await.ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let bytes = tokio::fs::read(&actual).await.ok()?;
    bytes.starts_with(signature).then_some(bytes)
}

fn refused(status: StatusCode) -> Response {
    let text = status.canonical_reason().unwrap_or("refused");
    let mut response = (status, text).into_response();
    assets::security_headers(response.headers_mut());
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_a_known_type_are_served() {
        assert_eq!(
            file_type("screenshot-toolu_01.png").map(|t| t.0),
            Some("image/png")
        );
        for bad in [
            "",
            ".png",
            "..",
            "../x.png",
            "a/b.png",
            "a\\b.png",
            ".hidden.png",
            "x.png/",
            "x.PNG.txt",
            "x.txt",
            "x.svg",
            "x .png",
            "é.png",
            "x.png\0",
        ] {
            assert!(file_type(bad).is_none(), "{bad:?}");
        }
        assert!(file_type(&format!("{}.png", "a".repeat(300))).is_none());
        assert_eq!(session_id("nope"), None);
        assert_eq!(session_id("../../etc"), None);
        let id = uuid::Uuid::new_v4();
        assert_eq!(
            session_id(&id.simple().to_string()),
            Some(id.hyphenated().to_string())
        );
    }

    #[tokio::test]
    async fn a_file_is_read_only_where_it_belongs_and_only_with_its_signature() {
        let tmp = tempfile::tempdir().unwrap();
        let results = tmp.path().join("tool-results");
        let dir = results.join("s1").join(SCREENSHOT_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let png = b"\x89PNG\r\n\x1a\nrest".to_vec();
        std::fs::write(dir.join("a.png"), &png).unwrap();
        std::fs::write(dir.join("fake.png"), b"<svg onload=alert(1)>").unwrap();
        std::fs::write(tmp.path().join("secret.png"), &png).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.png"), dir.join("link.png")).unwrap();
        let sig = TYPES[0].2;
        assert_eq!(read(&results, "s1", "a.png", sig).await, Some(png));
        assert_eq!(read(&results, "s1", "fake.png", sig).await, None);
        assert_eq!(read(&results, "s1", "link.png", sig).await, None);
        assert_eq!(read(&results, "s1", "missing.png", sig).await, None);
        assert_eq!(read(&results, "s2", "a.png", sig).await, None);
        // A session's artifacts directory that is a link elsewhere is refused too.
        std::fs::create_dir_all(results.join("s3")).unwrap();
        std::os::unix::fs::symlink(&dir, results.join("s3").join(SCREENSHOT_DIR)).unwrap();
        assert_eq!(read(&results, "s3", "a.png", sig).await, None);
    }
}
