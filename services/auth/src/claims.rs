//! The verified identity ([`Principal`]), scope names, and the claim rules applied after the
//! signature has been checked.
//!
//! Claim validation is a pure function of the payload, the expectations and `now`, so the
//! time rules are unit-tested without minting tokens.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{loggable, AuthError};

/// Read sessions (list, attach, replay).
pub const SCOPE_READ: &str = "lumina:session:read";
/// Create sessions and submit to them.
pub const SCOPE_WRITE: &str = "lumina:session:write";
/// `admin.drain`, `admin.shutdown` and other operator actions.
pub const SCOPE_ADMIN: &str = "lumina:admin";

/// Longest accepted `sub`: it is logged and stored with sessions.
const MAX_SUB_LEN: usize = 256;
/// Longest accepted `tenant`.
const MAX_TENANT_LEN: usize = 128;

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Principal {
    /// The `sub` claim.
    pub sub: String,
    /// The `tenant` claim: the isolation boundary for sessions and memory.
    pub tenant: String,
    /// From `scope` (space-separated) and/or `scp` (array), deduplicated, in token order.
    pub scopes: Vec<String>,
    /// The `exp` claim, unix seconds.
    pub expires_at: i64,
}

impl Principal {
    /// Whether the token granted `scope` (exact match; scopes do not imply each other).
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// What the verifier requires of every token.
pub(crate) struct Expectations<'a> {
    pub issuer: &'a str,
    pub audience: &'a str,
    pub leeway_secs: i64,
}

/// Applies the claim rules to a signature-checked payload.
pub(crate) fn validate(
    claims: &Map<String, Value>,
    expect: &Expectations<'_>,
    now: i64,
) -> Result<Principal, AuthError> {
    // Time first: an expired token is the common case and the cheapest to explain in logs.
    let exp = numeric_date(claims, "exp")?.ok_or(AuthError::MissingClaim("exp"))?;
    if now >= exp.saturating_add(expect.leeway_secs) {
        return Err(AuthError::Expired { exp, now });
    }
    if let Some(nbf) = numeric_date(claims, "nbf")? {
        if now.saturating_add(expect.leeway_secs) < nbf {
            return Err(AuthError::NotYetValid { nbf, now });
        }
    }
    // `iat` decides nothing here, but a token whose registered claims have the wrong types
    // is not one the IdP meant to issue.
    numeric_date(claims, "iat")?;

    match claims.get("iss") {
        None => return Err(AuthError::MissingClaim("iss")),
        Some(Value::String(iss)) if iss == expect.issuer => {}
        Some(Value::String(iss)) => return Err(AuthError::WrongIssuer(loggable(iss))),
        Some(_) => return Err(AuthError::InvalidClaim("iss")),
    }

    // RFC 7519 §4.1.3: a string or an array of strings; ours must be among them.
    let aud_ok = match claims.get("aud") {
        None => return Err(AuthError::MissingClaim("aud")),
        Some(Value::String(aud)) => aud == expect.audience,
        Some(Value::Array(auds)) => {
            if auds.iter().any(|a| !a.is_string()) {
                return Err(AuthError::InvalidClaim("aud"));
            }
            auds.iter().any(|a| a.as_str() == Some(expect.audience))
        }
        Some(_) => return Err(AuthError::InvalidClaim("aud")),
    };
    if !aud_ok {
        return Err(AuthError::WrongAudience);
    }

    let sub = required_string(claims, "sub")?;
    if sub.len() > MAX_SUB_LEN || sub.chars().any(char::is_control) {
        return Err(AuthError::InvalidClaim("sub"));
    }
    let tenant = required_string(claims, "tenant")?;
    if !is_valid_tenant(tenant) {
        return Err(AuthError::InvalidClaim("tenant"));
    }

    // A token that grants no Lumina scope could only open a connection and say `hello`;
    // it is refused at the door instead (least privilege, and no idle sockets for it).
    let scopes = scopes(claims)?;
    if !scopes
        .iter()
        .any(|s| [SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN].contains(&s.as_str()))
    {
        return Err(AuthError::MissingScope);
    }

    Ok(Principal {
        sub: sub.to_owned(),
        tenant: tenant.to_owned(),
        scopes,
        expires_at: exp,
    })
}

/// Tenants name storage namespaces (Redis keys, PostgreSQL rows, memory directories), so
/// they are restricted to characters that cannot escape a key or path segment.
pub(crate) fn is_valid_tenant(tenant: &str) -> bool {
    !tenant.is_empty()
        && tenant.len() <= MAX_TENANT_LEN
        && !tenant.starts_with('.')
        && tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

fn required_string<'a>(
    claims: &'a Map<String, Value>,
    name: &'static str,
) -> Result<&'a str, AuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Err(AuthError::MissingClaim(name)),
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(AuthError::InvalidClaim(name)),
    }
}

/// A NumericDate (RFC 7519 §2): integer or fractional seconds; fractions are truncated
/// toward the past, which only ever makes `exp` stricter.
fn numeric_date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<i64>, AuthError> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let Value::Number(n) = value else {
        return Err(AuthError::InvalidClaim(name));
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    match n.as_f64() {
        // The bound keeps the cast exact-enough and far from i64 overflow.
        Some(f) if f.is_finite() && f.abs() < 1e15 => Ok(Some(f.floor() as i64)),
        _ => Err(AuthError::InvalidClaim(name)),
    }
}

/// `scope` is the OAuth convention (space-separated string); `scp` is used by several IdPs,
/// as an array (Okta) or as a string (Entra ID). Both are accepted and merged.
fn scopes(claims: &Map<String, Value>) -> Result<Vec<String>, AuthError> {
    let mut out: Vec<String> = Vec::new();
    for name in ["scope", "scp"] {
        let mut push = |s: &str| {
            if !out.iter().any(|have| have == s) {
                out.push(s.to_owned());
            }
        };
        match claims.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => s.split_whitespace().for_each(&mut push),
            Some(Value::Array(items)) => {
                for item in items {
                    let Value::String(s) = item else {
                        return Err(AuthError::InvalidClaim(name));
                    };
                    s.split_whitespace().for_each(&mut push);
                }
            }
            Some(_) => return Err(AuthError::InvalidClaim(name)),
        }
    }
    Ok(out)
}

/// Unix seconds now; a clock before 1970 reads as 0, which only makes tokens look newer
/// than they are until `exp` is compared, so it cannot extend a token's life.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const NOW: i64 = 1_700_000_000;

    fn expect() -> Expectations<'static> {
        Expectations {
            issuer: "https://issuer.test",
            audience: "lumina",
            leeway_secs: 30,
        }
    }

    fn base() -> Value {
        json!({
            "iss": "https://issuer.test", "aud": "lumina", "sub": "alice",
            "tenant": "acme", "exp": NOW + 60, "scope": "lumina:session:read",
        })
    }

    fn check(v: Value) -> Result<Principal, AuthError> {
        let Value::Object(map) = v else {
            panic!("claims must be an object")
        };
        validate(&map, &expect(), NOW)
    }

    fn with(key: &str, value: Value) -> Value {
        let mut v = base();
        v[key] = value;
        v
    }

    fn without(key: &str) -> Value {
        let mut v = base();
        v.as_object_mut().map(|m| m.remove(key));
        v
    }

    #[test]
    fn valid_claims_give_a_principal() {
        assert_eq!(
            check(base()),
            Ok(Principal {
                sub: "alice".into(),
                tenant: "acme".into(),
                scopes: vec![SCOPE_READ.into()],
                expires_at: NOW + 60,
            })
        );
    }

    #[test]
    fn exp_is_honoured_with_leeway() {
        assert!(check(with("exp", json!(NOW - 29))).is_ok());
        assert_eq!(
            check(with("exp", json!(NOW - 30))),
            Err(AuthError::Expired {
                exp: NOW - 30,
                now: NOW
            })
        );
        assert_eq!(
            check(with("exp", json!(NOW as f64 + 10.7))).map(|p| p.expires_at),
            Ok(NOW + 10)
        );
        assert_eq!(
            check(with("exp", json!("soon"))),
            Err(AuthError::InvalidClaim("exp"))
        );
        assert_eq!(check(without("exp")), Err(AuthError::MissingClaim("exp")));
    }

    #[test]
    fn nbf_is_honoured_with_leeway() {
        assert!(check(with("nbf", json!(NOW + 30))).is_ok());
        assert_eq!(
            check(with("nbf", json!(NOW + 31))),
            Err(AuthError::NotYetValid {
                nbf: NOW + 31,
                now: NOW
            })
        );
    }

    #[test]
    fn issuer_and_audience_must_match() {
        assert!(matches!(
            check(with("iss", json!("evil"))),
            Err(AuthError::WrongIssuer(_))
        ));
        assert_eq!(check(without("iss")), Err(AuthError::MissingClaim("iss")));
        assert_eq!(
            check(with("aud", json!("other"))),
            Err(AuthError::WrongAudience)
        );
        assert!(check(with("aud", json!(["other", "lumina"]))).is_ok());
        assert_eq!(
            check(with("aud", json!(["other"]))),
            Err(AuthError::WrongAudience)
        );
        assert_eq!(
            check(with("aud", json!([1]))),
            Err(AuthError::InvalidClaim("aud"))
        );
        assert_eq!(check(without("aud")), Err(AuthError::MissingClaim("aud")));
    }

    #[test]
    fn sub_and_tenant_are_mandatory_and_sane() {
        assert_eq!(check(without("sub")), Err(AuthError::MissingClaim("sub")));
        assert_eq!(
            check(without("tenant")),
            Err(AuthError::MissingClaim("tenant"))
        );
        assert_eq!(
            check(with("tenant", json!(""))),
            Err(AuthError::InvalidClaim("tenant"))
        );
        assert_eq!(
            check(with("tenant", json!("a/b"))),
            Err(AuthError::InvalidClaim("tenant"))
        );
        assert_eq!(
            check(with("tenant", json!(".."))),
            Err(AuthError::InvalidClaim("tenant"))
        );
        assert_eq!(
            check(with("tenant", json!(7))),
            Err(AuthError::InvalidClaim("tenant"))
        );
        assert_eq!(
            check(with("sub", json!("a\nb"))),
            Err(AuthError::InvalidClaim("sub"))
        );
    }

    #[test]
    fn scopes_merge_scope_and_scp() {
        let mut v = with("scope", json!("a  lumina:admin b a"));
        v["scp"] = json!(["b", "c"]);
        assert_eq!(
            check(v).map(|p| p.scopes),
            Ok(vec!["a".into(), SCOPE_ADMIN.into(), "b".into(), "c".into()])
        );
        assert_eq!(
            check(with("scp", json!("x y"))).map(|p| p.scopes.len()),
            Ok(3)
        );
        assert_eq!(
            check(with("scp", json!([1]))),
            Err(AuthError::InvalidClaim("scp"))
        );
        let mut only_scp = without("scope");
        only_scp["scp"] = json!([SCOPE_WRITE]);
        assert_eq!(
            check(only_scp).map(|p| p.scopes),
            Ok(vec![SCOPE_WRITE.into()])
        );
    }

    #[test]
    fn a_token_must_grant_a_lumina_scope() {
        assert_eq!(check(without("scope")), Err(AuthError::MissingScope));
        assert_eq!(
            check(with("scope", json!(" "))),
            Err(AuthError::MissingScope)
        );
        assert_eq!(
            check(with("scope", json!("openid lumina:session"))),
            Err(AuthError::MissingScope)
        );
        assert_eq!(check(with("scp", json!([]))).map(|p| p.scopes.len()), Ok(1));
    }

    #[test]
    fn iat_must_be_a_numeric_date_when_present() {
        assert!(check(with("iat", json!(NOW))).is_ok());
        assert!(check(with("iat", json!(NOW as f64 + 0.5))).is_ok());
        assert_eq!(
            check(with("iat", json!("now"))),
            Err(AuthError::InvalidClaim("iat"))
        );
    }

    #[test]
    fn has_scope_is_exact() {
        let p =
            check(with("scope", json!("lumina:session:write"))).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.has_scope(SCOPE_WRITE));
        assert!(!p.has_scope(SCOPE_READ));
        assert!(!p.has_scope("lumina:session"));
    }
}
