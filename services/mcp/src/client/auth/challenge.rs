//! `WWW-Authenticate` parsing (RFC 9110 §11.6.1): a header value holds one or more
//! challenges, `scheme [token68 | #auth-param]`, where a parameter value is a token or a
//! quoted string with `\` escapes. Only the `Bearer` challenge matters here (RFC 6750 §3,
//! RFC 9728 §5.1): `resource_metadata`, `scope`, `error`, `error_description`.

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};

/// One challenge: its scheme (as written) and parameters (names lowercased).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    pub scheme: String,
    pub token68: Option<String>,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a `Bearer` challenge asks for. Every field is optional: a bare `401` is a challenge
/// with nothing in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BearerChallenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// The first `Bearer` challenge among all `WWW-Authenticate` headers (empty if none).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(parse)
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
            .map(|c| Self::from_challenge(&c))
            .unwrap_or_default()
    }

    pub fn from_challenge(c: &Challenge) -> Self {
        let get = |k: &str| c.param(k).filter(|v| !v.is_empty()).map(str::to_string);
        Self {
            resource_metadata: get("resource_metadata"),
            scope: get("scope"),
            error: get("error"),
            error_description: get("error_description"),
        }
    }

    /// The `scope` parameter split on spaces.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// `"a b  c"` → `["a", "b", "c"]`.
pub fn split_scopes(s: &str) -> Vec<String> {
    s.split_ascii_whitespace().map(str::to_string).collect()
}

/// Every challenge in one header value. Malformed input yields what could be read, never
/// a panic.
pub fn parse(header: &str) -> Vec<Challenge> {
    let mut p = Parser {
        s: header.as_bytes(),
        i: 0,
    };
    let mut out: Vec<Challenge> = Vec::new();
    loop {
        p.skip(|b| b == b',' || is_space(b));
        if p.eof() {
            break;
        }
        let Some(name) = p.token() else {
            p.i += 1; // not a token character: skip it
            continue;
        };
        let after_name = p.i;
        p.skip(is_space);
        if p.peek() == Some(b'=') && !out.is_empty() && !p.looks_like_token68_end() {
            p.i += 1; // '='
            p.skip(is_space);
            let value = if p.peek() == Some(b'"') {
                p.quoted()
            } else {
                p.token().unwrap_or_default()
            };
            if let Some(c) = out.last_mut() {
                c.params.push((name.to_ascii_lowercase(), value));
            }
            continue;
        }
        // A new challenge: `name` is its scheme, maybe followed by a token68.
        p.i = after_name;
        let mut challenge = Challenge {
            scheme: name,
            ..Challenge::default()
        };
        p.skip(is_space);
        let mark = p.i;
        if let Some(t68) = p.token68() {
            p.skip(is_space);
            if p.eof() || p.peek() == Some(b',') {
                challenge.token68 = Some(t68);
            } else {
                p.i = mark; // it was the first parameter's name
            }
        }
        out.push(challenge);
    }
    out
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn eof(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip(&mut self, pred: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&pred) {
            self.i += 1;
        }
    }

    fn take(&mut self, pred: impl Fn(u8) -> bool) -> Option<String> {
        let start = self.i;
        self.skip(pred);
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn token(&mut self) -> Option<String> {
        self.take(is_tchar)
    }

    /// A token68 (`1*tchar68 *"="`).
    fn token68(&mut self) -> Option<String> {
        let start = self.i;
        self.skip(is_token68_char);
        if self.i == start {
            return None;
        }
        self.skip(|b| b == b'=');
        Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// At an `=`: whether it only pads a token68 (`=` runs up to the end or a comma).
    fn looks_like_token68_end(&self) -> bool {
        let mut j = self.i;
        while self.s.get(j) == Some(&b'=') {
            j += 1;
        }
        while self.s.get(j).is_some_and(|b| is_space(*b)) {
            j += 1;
        }
        j >= self.s.len() || self.s[j] == b','
    }

    /// A quoted string starting at `"`; `\x` stands for `x`. An unterminated string runs
    /// to the end of the header.
    fn quoted(&mut self) -> String {
        self.i += 1; // opening quote
        let mut out = Vec::new();
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(next) = self.peek() {
                        out.push(next);
                        self.i += 1;
                    }
                }
                other => out.push(other),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn bearer(header: &str) -> BearerChallenge {
        let mut h = HeaderMap::new();
        h.insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_str(header).unwrap_or(HeaderValue::from_static("")),
        );
        BearerChallenge::from_headers(&h)
    }

    #[test]
    fn bearer_with_quoted_and_token_values() {
        let c = bearer(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write", error=insufficient_scope"#,
        );
        assert_eq!(
            c,
            BearerChallenge {
                resource_metadata: Some(
                    "https://mcp.example.com/.well-known/oauth-protected-resource".into()
                ),
                scope: Some("files:read files:write".into()),
                error: Some("insufficient_scope".into()),
                error_description: None,
            }
        );
        assert_eq!(c.scopes(), ["files:read", "files:write"]);
        assert!(c.is_insufficient_scope());
    }

    #[test]
    fn escapes_commas_and_spacing_inside_quotes() {
        let c = bearer(
            r#"Bearer   error="invalid_token" ,error_description = "say \"hi\", then \\ go" , scope="a,b""#,
        );
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.error_description.as_deref(),
            Some(r#"say "hi", then \ go"#)
        );
        assert_eq!(c.scope.as_deref(), Some("a,b"));
    }

    #[test]
    fn several_challenges_in_one_header() {
        let all = parse(r#"Basic realm="x", Bearer scope="s1", DPoP algs="ES256""#);
        let schemes: Vec<_> = all.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Basic", "Bearer", "DPoP"]);
        assert_eq!(all[0].param("REALM"), Some("x"));
        assert_eq!(
            bearer(r#"Basic realm="x", Bearer scope="s1""#)
                .scope
                .as_deref(),
            Some("s1")
        );
    }

    #[test]
    fn token68_and_case_insensitive_scheme() {
        let all = parse("Negotiate abc+/=, bearer");
        assert_eq!(all[0].token68.as_deref(), Some("abc+/="));
        assert_eq!(all[1].scheme, "bearer");
        assert_eq!(bearer("bearer"), BearerChallenge::default());
        assert_eq!(bearer("BEARER scope=x").scope.as_deref(), Some("x"));
    }

    #[test]
    fn malformed_input_never_panics() {
        for h in [
            "",
            ",,,",
            "=",
            "Bearer =",
            "Bearer scope=\"unterminated",
            "Bearer scope=\"a\\",
            "Bearer ,=,\"",
            "\"",
            "Bearer scope",
            "Bearer a=b=c",
            "Bearer é=ü",
        ] {
            let _ = parse(h);
        }
        assert_eq!(bearer("Bearer scope=\"open").scope.as_deref(), Some("open"));
        assert_eq!(bearer("Basic realm=x"), BearerChallenge::default());
    }
}
