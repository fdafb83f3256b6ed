//! Request checks that come before the protocol: DNS-rebinding protection (`Host` and
//! `Origin` against an allow-list) and the JSON-RPC error responses of the transport.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lumina_mcp_proto::jsonrpc::{ErrorObject, Id, Message};

/// Implementation-defined JSON-RPC code for transport-level refusals (bad headers, session
/// problems, authentication).
pub const TRANSPORT_ERROR: i64 = -32000;

/// Which `Host`/`Origin` names the endpoint accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPolicy {
    /// Decide from the bound address: [`HostPolicy::Loopback`] on a loopback address,
    /// otherwise [`HostPolicy::Any`] (set an allow-list for public binds).
    Auto,
    /// `localhost`, `127.0.0.1` and `[::1]`, any port.
    Loopback,
    /// These host names (no port; IPv6 in brackets), case-insensitive, any port.
    Allow(Vec<String>),
    /// No check (the server sits behind something that does it).
    Any,
}

const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl HostPolicy {
    /// `Auto` made concrete for a listener bound to `addr`.
    pub fn resolve(&self, addr: std::net::SocketAddr) -> HostPolicy {
        match self {
            HostPolicy::Auto if addr.ip().is_loopback() => HostPolicy::Loopback,
            HostPolicy::Auto => HostPolicy::Any,
            other => other.clone(),
        }
    }

    fn allows(&self, host: &str) -> bool {
        match self {
            HostPolicy::Any => true,
            HostPolicy::Auto | HostPolicy::Loopback => {
                LOOPBACK.iter().any(|name| name.eq_ignore_ascii_case(host))
            }
            HostPolicy::Allow(names) => names.iter().any(|name| name.eq_ignore_ascii_case(host)),
        }
    }

    /// Ok, or why the request must be refused with 403.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        if *self == HostPolicy::Any {
            return Ok(());
        }
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or("missing Host header")?;
        if !self.allows(&hostname(host)) {
            return Err("Host header not allowed");
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().map_err(|_| "invalid Origin header")?;
            let authority = origin
                .split_once("://")
                .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
                .ok_or("Origin header not allowed")?;
            if !self.allows(&hostname(authority)) {
                return Err("Origin header not allowed");
            }
        }
        Ok(())
    }
}

/// `host[:port]` → `host` (keeps the brackets of an IPv6 literal).
fn hostname(authority: &str) -> String {
    let authority = authority.rsplit('@').next().unwrap_or(authority).trim();
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => authority[..=end].to_string(),
            None => authority.to_string(),
        }
    } else {
        authority.split(':').next().unwrap_or_default().to_string()
    }
}

/// A JSON-RPC error as an HTTP response.
pub(crate) fn rpc_error(status: StatusCode, id: Option<Id>, error: ErrorObject) -> Response {
    json_response(status, &Message::Error { id, error })
}

/// A transport refusal, turned into a response by the caller.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.status, &self.message)
    }
}

/// A transport refusal (no request id).
pub(crate) fn refuse(status: StatusCode, message: &str) -> Response {
    rpc_error(status, None, ErrorObject::new(TRANSPORT_ERROR, message))
}

pub(crate) fn json_response(status: StatusCode, message: &Message) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        message.to_line(),
    )
        .into_response()
}

/// Whether `Accept` admits `media` (absent or `*/*` admits everything).
pub(crate) fn accepts(headers: &HeaderMap, media: &str) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    accept.split(',').any(|part| {
        let essence = part.split(';').next().unwrap_or_default().trim();
        essence.eq_ignore_ascii_case(media) || essence == "*/*"
    })
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::HOST,
            HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("x")),
        );
        if let Some(origin) = origin {
            h.insert(
                header::ORIGIN,
                HeaderValue::from_str(origin).unwrap_or(HeaderValue::from_static("x")),
            );
        }
        h
    }

    #[test]
    fn loopback_policy_rejects_rebinding() {
        let p = HostPolicy::Loopback;
        assert_eq!(
            p.check(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))),
            Ok(())
        );
        assert_eq!(p.check(&headers("localhost", None)), Ok(()));
        assert_eq!(p.check(&headers("[::1]:9", Some("http://[::1]:9"))), Ok(()));
        assert!(p.check(&headers("evil.example.com", None)).is_err());
        assert!(p
            .check(&headers("127.0.0.1:1", Some("http://evil.example.com")))
            .is_err());
        assert!(p.check(&headers("127.0.0.1:1", Some("null"))).is_err());
        assert_eq!(HostPolicy::Any.check(&HeaderMap::new()), Ok(()));
    }
}
