//! Well-known URLs and resource identifiers: where Protected Resource Metadata (RFC 9728
//! §3.1) and authorization server metadata (RFC 8414 §3.1, OpenID Connect Discovery) live,
//! in the MCP spec's order, and how a PRM `resource` relates to the server's URL.

use url::Url;

use super::error::AuthError;

/// `scheme://host[:port]` of `url` (no credentials, path, query or fragment).
pub(crate) fn origin(url: &Url) -> Result<Url, AuthError> {
    Url::parse(&url.origin().ascii_serialization())
        .map_err(|_| AuthError::failed(format!("{url} has no usable origin")))
}

fn at_origin(origin: &Url, path: &str) -> Option<Url> {
    let base = origin.as_str().trim_end_matches('/');
    Url::parse(&format!("{base}{path}")).ok()
}

/// Where to look for the Protected Resource Metadata without a `resource_metadata` hint:
/// path-based first, then the root.
pub fn protected_resource_metadata_urls(server: &Url) -> Vec<Url> {
    let Ok(o) = origin(server) else {
        return Vec::new();
    };
    let path = server.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.extend(at_origin(
            &o,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    out.extend(at_origin(&o, "/.well-known/oauth-protected-resource"));
    out
}

/// Where to look for an issuer's metadata, in the MCP spec's priority order.
pub fn authorization_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let Ok(o) = origin(issuer) else {
        return Vec::new();
    };
    let path = issuer.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            "/.well-known/oauth-authorization-server".to_string(),
            "/.well-known/openid-configuration".to_string(),
        ]
    } else {
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ]
    };
    candidates.iter().filter_map(|p| at_origin(&o, p)).collect()
}

/// The server's URL as an RFC 8707 resource: no query or fragment, no lone trailing `/`.
pub fn canonical_resource(server: &Url) -> String {
    let mut u = server.clone();
    u.set_query(None);
    u.set_fragment(None);
    let _ = u.set_username("");
    let _ = u.set_password(None);
    let s = u.to_string();
    if u.path() == "/" {
        s.trim_end_matches('/').to_string()
    } else {
        s
    }
}

/// Whether a PRM `resource` covers `server`: same origin, and its path is a prefix of the
/// server's path at a segment boundary.
pub fn resource_matches(server: &Url, resource: &str) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != server.origin() || r.fragment().is_some() {
        return false;
    }
    let want = r.path().trim_end_matches('/');
    let have = server.path().trim_end_matches('/');
    have == want || have.starts_with(&format!("{want}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(v: Vec<Url>) -> Vec<String> {
        v.into_iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn prm_urls_path_first_then_root() {
        let s = Url::parse("https://Example.com:8443/public/mcp/?x=1#f").unwrap();
        assert_eq!(
            urls(protected_resource_metadata_urls(&s)),
            [
                "https://example.com:8443/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com:8443/.well-known/oauth-protected-resource",
            ]
        );
        let root = Url::parse("https://user:pw@example.com/").unwrap();
        assert_eq!(
            urls(protected_resource_metadata_urls(&root)),
            ["https://example.com/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn as_metadata_urls_follow_the_spec_order() {
        let with_path = Url::parse("https://auth.example.com/tenant1/").unwrap();
        assert_eq!(
            urls(authorization_server_metadata_urls(&with_path)),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let bare = Url::parse("https://auth.example.com").unwrap();
        assert_eq!(
            urls(authorization_server_metadata_urls(&bare)),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn resources_match_by_origin_and_path_prefix() {
        let s = Url::parse("https://mcp.example.com/server/mcp").unwrap();
        assert!(resource_matches(&s, "https://mcp.example.com/server/mcp"));
        assert!(resource_matches(&s, "https://mcp.example.com/server/mcp/"));
        assert!(resource_matches(&s, "https://mcp.example.com"));
        assert!(resource_matches(&s, "https://MCP.example.com/server"));
        assert!(!resource_matches(&s, "https://mcp.example.com/serv"));
        assert!(!resource_matches(&s, "https://evil.example.com/server/mcp"));
        assert!(!resource_matches(&s, "http://mcp.example.com/server/mcp"));
        assert!(!resource_matches(&s, "not a url"));
        assert_eq!(
            canonical_resource(&Url::parse("HTTPS://MCP.example.com/?q#f").unwrap()),
            "https://mcp.example.com"
        );
        assert_eq!(
            canonical_resource(&Url::parse("https://mcp.example.com/mcp?k=v").unwrap()),
            "https://mcp.example.com/mcp"
        );
    }
}
