//! The console's files, embedded with `include_str!` (no build step, nothing fetched at run
//! time), and the headers every console response carries.

use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY as CSP, CONTENT_TYPE, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// No inline script or style, nothing from elsewhere: scripts, styles and the WebSocket of
/// this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// One embedded file.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("assets/", $name)),
        }
    };
}

/// Every file of the console.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("connection.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("markdown.js", "text/javascript; charset=utf-8"),
    asset!("sessions.js", "text/javascript; charset=utf-8"),
    asset!("session.js", "text/javascript; charset=utf-8"),
    asset!("timeline.js", "text/javascript; charset=utf-8"),
    asset!("panels.js", "text/javascript; charset=utf-8"),
    asset!("team.js", "text/javascript; charset=utf-8"),
    asset!("teampicker.js", "text/javascript; charset=utf-8"),
    asset!("delegates.js", "text/javascript; charset=utf-8"),
    asset!("skills.js", "text/javascript; charset=utf-8"),
    asset!("peers.js", "text/javascript; charset=utf-8"),
];

/// Sets the security headers of every console response.
pub fn security_headers(headers: &mut HeaderMap) {
    headers.insert(CSP, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The file `name` with its headers: the page is never cached (it decides sign-in), the
/// scripts and styles are revalidated (they change with the binary).
pub fn serve(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        let mut response = (StatusCode::NOT_FOUND, "not found").into_response();
        security_headers(response.headers_mut());
        return response;
    };
    let cache = if name == "index.html" {
        "no-store"
    } else {
        "no-cache"
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    security_headers(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_asset_has_inline_script_or_style_or_html_injection() {
        for asset in ASSETS {
            let body = asset.body;
            if asset.name.ends_with(".html") {
                assert!(!body.contains("<script>"), "{}: inline script", asset.name);
                assert!(!body.contains("<style"), "{}: inline style", asset.name);
                assert!(!body.contains("style="), "{}: inline style", asset.name);
                assert!(!body.contains("http://") && !body.contains("https://"));
            }
            if asset.name.ends_with(".js") {
                // Model and tool text only ever reaches the page as text nodes.
                for sink in [
                    "innerHTML",
                    "outerHTML",
                    "insertAdjacentHTML",
                    "eval(",
                    "document.write",
                ] {
                    assert!(!body.contains(sink), "{} uses {sink}", asset.name);
                }
            }
        }
    }

    #[test]
    fn every_imported_module_is_served() {
        let mut imported = 0;
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for module in asset.body.split("from './").skip(1) {
                let name = module.split('\'').next().unwrap();
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} imports {name}, which is not embedded",
                    asset.name
                );
                imported += 1;
            }
        }
        assert!(imported > 5, "the scan found the imports");
    }
}
