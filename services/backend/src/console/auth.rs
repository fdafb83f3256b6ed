//! The console's sign-in (docs/console.md#sign-in), local profile: a single-use ticket with a
//! short TTL (minted by `console.ticket`, the link `lumina --web` prints) is exchanged at
//! `/console/login` for an HttpOnly, SameSite=Strict session cookie. The WebSocket upgrade
//! accepts that cookie only from a loopback `Host` whose `Origin` is the same page, so another
//! site cannot ride on it. The bearer token itself never reaches the browser. Sessions live in
//! `sessions.rs`: in memory, and for the local profile in the AppRoot too, so a restarted
//! backend keeps signed-in pages signed in.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::HeaderMap;
use lumina_protocol::methods::{ConsoleTicketResult, Identity};

use super::sessions::Sessions;
use crate::auth::local_identity;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "lumina_console";
/// How long a ticket may wait to be used.
pub const TICKET_TTL: Duration = Duration::from_secs(120);
/// How long a console session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Bounds on what is held, so a flood of tickets cannot grow memory without end.
const MAX_TICKETS: usize = 64;
const MAX_SESSIONS: usize = 256;

/// Tickets (in memory: a restarted backend forgets them) and cookie sessions.
pub struct ConsoleAuth {
    tickets: Mutex<HashMap<String, Instant>>,
    sessions: Sessions,
}

fn lock(map: &Mutex<HashMap<String, Instant>>) -> MutexGuard<'_, HashMap<String, Instant>> {
    map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// 256 random bits, hex.
fn random_id() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// Drops expired entries, then the oldest ones beyond `cap - 1` (room for one more).
fn prune(map: &mut HashMap<String, Instant>, cap: usize) {
    let now = Instant::now();
    map.retain(|_, expires| *expires > now);
    while map.len() >= cap {
        let oldest = map
            .iter()
            .min_by_key(|(_, expires)| **expires)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(key) => map.remove(&key),
            None => break,
        };
    }
}

impl Default for ConsoleAuth {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsoleAuth {
    /// Sessions that end with the process.
    pub fn new() -> Self {
        Self {
            tickets: Mutex::new(HashMap::new()),
            sessions: Sessions::in_memory(MAX_SESSIONS),
        }
    }

    /// Sessions also kept in `file` (0600; digests and expiry only), so a backend restarted
    /// on the same AppRoot accepts the cookies of the one before it until they expire.
    pub fn persistent(file: PathBuf) -> Self {
        Self {
            tickets: Mutex::new(HashMap::new()),
            sessions: Sessions::persistent(file, MAX_SESSIONS),
        }
    }

    /// A fresh single-use ticket.
    pub fn mint_ticket(&self) -> ConsoleTicketResult {
        let ticket = random_id();
        let mut tickets = lock(&self.tickets);
        prune(&mut tickets, MAX_TICKETS);
        tickets.insert(ticket.clone(), Instant::now() + TICKET_TTL);
        let ttl_ms = i64::try_from(TICKET_TTL.as_millis()).unwrap_or(i64::MAX);
        ConsoleTicketResult {
            login_path: format!("/console/login?ticket={ticket}"),
            expires_at_ms: lumina_journal::now_ms().saturating_add(ttl_ms),
        }
    }

    /// Uses up `ticket`: the new session's cookie value, or `None` for an unknown, used or
    /// expired ticket.
    pub fn redeem(&self, ticket: &str) -> Option<String> {
        let expires = lock(&self.tickets).remove(ticket)?;
        if expires <= Instant::now() {
            return None;
        }
        let session = random_id();
        self.sessions.insert(&session, SESSION_TTL);
        Some(session)
    }

    /// Ends the session of a cookie value (sign out).
    pub fn revoke(&self, session: &str) {
        self.sessions.remove(session);
    }

    /// The local identity for an upgrade carrying a live session cookie from the console's
    /// own origin.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        if !same_loopback_origin(headers) {
            return None;
        }
        let session = cookie_value(headers)?;
        self.sessions.is_live(session).then(local_identity)
    }

    /// The local identity for a GET of the console's own data (an artifact's image): a live
    /// session cookie and a loopback `Host` ([`same_loopback_get`]). An `<img>` request
    /// carries no `Origin`, so this cannot be [`Self::authenticate`]'s check; a browser
    /// that says where the request comes from must say this page.
    pub fn authenticate_get(&self, headers: &HeaderMap) -> Option<Identity> {
        if !same_loopback_get(headers) {
            return None;
        }
        let session = cookie_value(headers)?;
        self.sessions.is_live(session).then(local_identity)
    }

    /// Whether `headers` carry a live session cookie (no origin check: for page loads).
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        cookie_value(headers).is_some_and(|s| self.sessions.is_live(s))
    }
}

impl crate::profile::ConsoleSignIn for ConsoleAuth {
    fn mint_ticket(&self) -> ConsoleTicketResult {
        ConsoleAuth::mint_ticket(self)
    }

    fn redeem(&self, ticket: &str) -> Option<String> {
        ConsoleAuth::redeem(self, ticket)
    }

    fn revoke(&self, session: &str) {
        ConsoleAuth::revoke(self, session)
    }

    fn authenticate_get(&self, headers: &HeaderMap) -> Option<Identity> {
        ConsoleAuth::authenticate_get(self, headers)
    }
}

/// The `Set-Cookie` value for a session (no `Max-Age`: it ends with the browser, and the
/// server forgets it after [`SESSION_TTL`]).
pub fn set_cookie(session: &str) -> String {
    format!("{COOKIE_NAME}={session}; Path=/; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that removes the cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE_NAME}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The console cookie's value among the request's cookies.
pub fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// `Host` is a loopback name with a port and `Origin` is exactly `http://` + that host: the
/// page was loaded from this backend (a DNS-rebinding page has another `Host`, and a
/// cross-site page another `Origin`).
pub fn same_loopback_origin(headers: &HeaderMap) -> bool {
    let (Some(host), Some(origin)) = (
        loopback_host(headers),
        headers.get(ORIGIN).and_then(|v| v.to_str().ok()),
    ) else {
        return false;
    };
    origin.strip_prefix("http://") == Some(host)
}

/// A GET the page itself makes (an `<img>`, a `fetch`): `Host` is a loopback name with a
/// port; `Origin`, when sent, is `http://` + that host; `Sec-Fetch-Site`, when sent, is
/// `same-origin` (or `none`: the user opened the URL). `SameSite=Strict` keeps the cookie
/// from other sites, but another port of 127.0.0.1 is the same site: `Sec-Fetch-Site:
/// same-site` is what refuses another local server's page. A DNS-rebinding page has
/// another `Host`.
pub fn same_loopback_get(headers: &HeaderMap) -> bool {
    let Some(host) = loopback_host(headers) else {
        return false;
    };
    let origin_ok = match headers.get(ORIGIN) {
        None => true,
        Some(origin) => origin
            .to_str()
            .is_ok_and(|o| o.strip_prefix("http://") == Some(host)),
    };
    let site_ok = match headers.get(SEC_FETCH_SITE) {
        None => true,
        // `none`: the user opened the URL (the image in a new tab), no page asked for it.
        Some(site) => matches!(site.as_bytes(), b"same-origin" | b"none"),
    };
    origin_ok && site_ok
}

const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// `Host` when it is a loopback name with a port (`127.0.0.1:…`, `localhost:…`, `[::1]:…`).
fn loopback_host(headers: &HeaderMap) -> Option<&str> {
    let host = headers.get(HOST).and_then(|v| v.to_str().ok())?;
    ["127.0.0.1:", "localhost:", "[::1]:"]
        .iter()
        .any(|prefix| host.strip_prefix(prefix).is_some_and(is_port))
        .then_some(host)
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_ticket_is_single_use_and_its_cookie_needs_the_same_origin() {
        let auth = ConsoleAuth::new();
        let minted = auth.mint_ticket();
        let ticket = minted.login_path.split('=').nth(1).unwrap();
        assert!(auth.redeem("nope").is_none());
        let session = auth.redeem(ticket).unwrap();
        assert!(auth.redeem(ticket).is_none(), "a ticket works once");
        let cookie = format!("other=1; {COOKIE_NAME}={session}");
        let good = headers(&[
            ("host", "127.0.0.1:4100"),
            ("origin", "http://127.0.0.1:4100"),
            ("cookie", &cookie),
        ]);
        assert!(auth.authenticate(&good).is_some());
        for bad in [
            headers(&[("host", "127.0.0.1:4100"), ("cookie", &cookie)]),
            headers(&[
                ("host", "127.0.0.1:4100"),
                ("origin", "http://evil.example"),
                ("cookie", &cookie),
            ]),
            headers(&[
                ("host", "evil.example:4100"),
                ("origin", "http://evil.example:4100"),
                ("cookie", &cookie),
            ]),
            headers(&[
                ("host", "127.0.0.1:4100"),
                ("origin", "http://127.0.0.1:4100"),
                ("cookie", "lumina_console=wrong"),
            ]),
        ] {
            assert!(auth.authenticate(&bad).is_none(), "{bad:?}");
        }
        auth.revoke(&session);
        assert!(auth.authenticate(&good).is_none());
    }

    #[test]
    fn an_image_request_needs_the_cookie_a_loopback_host_and_no_foreign_site() {
        let auth = ConsoleAuth::new();
        let ticket = auth.mint_ticket().login_path;
        let session = auth.redeem(ticket.split('=').nth(1).unwrap()).unwrap();
        let cookie = format!("{COOKIE_NAME}={session}");
        for (ok, request) in [
            (
                true,
                headers(&[("host", "127.0.0.1:4100"), ("cookie", &cookie)]),
            ),
            (
                true,
                headers(&[
                    ("host", "localhost:4100"),
                    ("sec-fetch-site", "same-origin"),
                    ("origin", "http://localhost:4100"),
                    ("cookie", &cookie),
                ]),
            ),
            (
                false,
                headers(&[
                    ("host", "127.0.0.1:4100"),
                    ("sec-fetch-site", "cross-site"),
                    ("cookie", &cookie),
                ]),
            ),
            (
                false,
                headers(&[
                    ("host", "127.0.0.1:4100"),
                    ("sec-fetch-site", "same-site"),
                    ("cookie", &cookie),
                ]),
            ),
            (
                true,
                headers(&[
                    ("host", "[::1]:4100"),
                    ("sec-fetch-site", "none"),
                    ("cookie", &cookie),
                ]),
            ),
            (
                false,
                headers(&[
                    ("host", "127.0.0.1:4100"),
                    ("origin", "http://evil.example"),
                    ("cookie", &cookie),
                ]),
            ),
            (
                false,
                headers(&[("host", "evil.example:4100"), ("cookie", &cookie)]),
            ),
            (
                false,
                headers(&[("host", "127.0.0.1:4100"), ("cookie", "lumina_console=x")]),
            ),
            (false, headers(&[("host", "127.0.0.1:4100")])),
        ] {
            assert_eq!(auth.authenticate_get(&request).is_some(), ok, "{request:?}");
        }
    }

    #[test]
    fn a_restarted_backend_accepts_the_cookie_until_sign_out() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("console-sessions.json");
        let before = ConsoleAuth::persistent(file.clone());
        let ticket = before.mint_ticket().login_path;
        let session = before.redeem(ticket.split('=').nth(1).unwrap()).unwrap();
        let cookie = format!("{COOKIE_NAME}={session}");
        let request = headers(&[
            ("host", "127.0.0.1:4100"),
            ("origin", "http://127.0.0.1:4100"),
            ("cookie", &cookie),
        ]);
        drop(before);
        let after = ConsoleAuth::persistent(file.clone());
        assert!(after.authenticate(&request).is_some());
        assert!(
            after.redeem(ticket.split('=').nth(1).unwrap()).is_none(),
            "tickets do not survive"
        );
        after.revoke(&session);
        assert!(ConsoleAuth::persistent(file)
            .authenticate(&request)
            .is_none());
    }

    #[test]
    fn tickets_are_bounded() {
        let auth = ConsoleAuth::new();
        for _ in 0..(MAX_TICKETS * 2) {
            auth.mint_ticket();
        }
        assert!(lock(&auth.tickets).len() <= MAX_TICKETS);
    }
}
