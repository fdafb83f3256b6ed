//! The web console (docs/console.md): the browser view of a backend. Its static files are
//! embedded in the binary (`assets/`, plain ES modules and CSS, no build step) and served
//! at `/` with a strict Content-Security-Policy; the page speaks protocol v3 over the same
//! WebSocket as every other client (`/v1/ws`), so there is no second API. Sign-in: the
//! local profile exchanges a one-time ticket for a session cookie (`auth.rs`, kept across
//! restarts by `sessions.rs`); the cluster
//! page holds a pasted JWT in memory and offers it as a WebSocket subprotocol
//! (`bearer_from_subprotocol`). The one HTTP read besides the files is a session's artifacts
//! (`artifacts.rs`: the browser's screenshots, shown in the tool-call view).

mod artifacts;
mod assets;
mod auth;
mod sessions;

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

pub use assets::{Asset, ASSETS, CONTENT_SECURITY_POLICY};
pub use auth::{
    clear_cookie, cookie_value, same_loopback_origin, set_cookie, ConsoleAuth, COOKIE_NAME,
    SESSION_TTL, TICKET_TTL,
};

use crate::profile::AppState;

/// The subprotocol the console asks for; the server selects it, so browsers accept the
/// upgrade.
pub const SUBPROTOCOL: &str = "lumina.v3";
/// Prefix of the subprotocol entry that carries a bearer token (a JWT's characters are all
/// valid in a subprotocol name).
pub const BEARER_SUBPROTOCOL_PREFIX: &str = "bearer.";

/// The console's routes: the page, its files, sign-in and sign-out, and a session's
/// artifacts (`artifacts.rs`).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(page))
        .route("/console/login", get(login))
        .route("/console/logout", post(logout))
        .route("/console/{file}", get(asset))
        .route(artifacts::ROUTE, get(artifacts::artifact))
}

/// The bearer token a browser offered as the subprotocol `bearer.<token>` (browsers cannot
/// set `Authorization` on a WebSocket).
pub fn bearer_from_subprotocol(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|p| p.trim().strip_prefix(BEARER_SUBPROTOCOL_PREFIX))
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
}

async fn page() -> Response {
    assets::serve("index.html")
}

async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    assets::serve(&file)
}

#[derive(Deserialize)]
struct LoginQuery {
    #[serde(default)]
    ticket: String,
}

/// `/console/login?ticket=…`: a valid ticket becomes a session cookie and the browser goes
/// to `/` (so the ticket leaves the address bar); anything else goes to the sign-in page.
async fn login(
    State(state): State<Arc<AppState>>,
    query: Result<Query<LoginQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let ticket = query.map(|q| q.0.ticket).unwrap_or_default();
    let session = state
        .profile
        .console()
        .and_then(|console| console.redeem(ticket.trim()));
    let Some(session) = session else {
        tracing::info!("console sign-in refused: unknown, used or expired ticket");
        return redirect("/?signin=refused", None);
    };
    tracing::info!("console signed in");
    redirect("/", Some(set_cookie(&session)))
}

/// `POST /console/logout`: ends the cookie's session (same-origin requests only).
async fn logout(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if !same_loopback_origin(&headers) {
        return StatusCode::FORBIDDEN.into_response();
    }
    if let (Some(console), Some(session)) = (state.profile.console(), cookie_value(&headers)) {
        console.revoke(session);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&clear_cookie()) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

fn redirect(to: &'static str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(LOCATION, HeaderValue::from_static(to));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    assets::security_headers(headers);
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_subprotocol_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("lumina.v3, bearer.eyJ.abc-_.x"),
        );
        assert_eq!(
            bearer_from_subprotocol(&headers).as_deref(),
            Some("eyJ.abc-_.x")
        );
        headers.insert(
            axum::http::header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("lumina.v3, bearer."),
        );
        assert_eq!(bearer_from_subprotocol(&headers), None);
        assert_eq!(bearer_from_subprotocol(&HeaderMap::new()), None);
    }
}
