//! One permission rule, parsed once from its settings string.
//!
//! Grammar: `tool` or `tool(specifier)`. `tool` is a name or a name glob (`mcp__github__*`).
//! The specifier depends on the tool:
//! - `shell(git status:*)`: the command is `git status` or starts with `git status `;
//!   `shell(npm test)`: exactly that command (whitespace outside quotes normalized).
//! - any other tool, e.g. `write_file(src/**)`: a glob on the `path` argument, relative to the
//!   project root (`*` stays within a directory, `**` crosses them); a glob starting with `/`
//!   matches the absolute path instead.
//! - `web_fetch(https://docs.rs/*)`: a URL pattern on the `url` argument. Scheme and host
//!   match exactly (a leading `*.` in the host matches any subdomain, not the domain
//!   itself), the port is the scheme's default unless written, and the rest is a glob on the
//!   path and query in which `*` matches anything, `/` included. `web_fetch(domain:docs.rs)`
//!   matches any http(s) URL on `docs.rs` or a subdomain. A URL with credentials never
//!   matches an allow rule. `browser_open` takes the same patterns.
//! - `tool(*)` is the same as bare `tool`: any call.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;
use url::Url;

use super::shell_words;
use crate::error::{Error, Result};
use crate::paths;

/// The tool whose specifier is a command rather than a path.
const SHELL_TOOL: &str = "shell";
/// The tools whose specifier is a URL pattern (on their `url` argument).
const URL_TOOLS: &[&str] = &["web_fetch", "browser_open"];

/// Whether a rule is being checked to allow or to deny: allow rules fail closed on
/// compound shell commands, deny rules look inside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Allow,
    Deny,
}

#[derive(Debug, Clone)]
enum Spec {
    Any,
    ShellExact(String),
    ShellPrefix(String),
    Path {
        matcher: GlobMatcher,
        absolute: bool,
    },
    Domain(String),
    Url(UrlPattern),
}

/// `scheme://host[:port]/path-glob`.
#[derive(Debug, Clone)]
struct UrlPattern {
    scheme: String,
    /// Lowercase host; with `subdomains`, the suffix after `*.`.
    host: String,
    subdomains: bool,
    port: u16,
    rest: GlobMatcher,
}

/// A parsed permission rule.
#[derive(Debug, Clone)]
pub struct Rule {
    source: String,
    tool: GlobMatcher,
    spec: Spec,
}

impl Rule {
    /// Parses a rule string such as `shell(git status:*)` or `write_file(src/**)`.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidRule {
            rule: text.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid("the rule is empty"));
        }
        let (name, spec) = match trimmed.find('(') {
            None if trimmed.contains(')') => return Err(invalid("unbalanced `)`")),
            None => (trimmed, None),
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(invalid("expected `)` at the end"));
                };
                (trimmed[..open].trim(), Some(inner.trim()))
            }
        };
        if name.is_empty() {
            return Err(invalid("missing tool name"));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*' | '?'))
        {
            return Err(invalid(
                "a tool name may contain letters, digits, `_`, `-`, `.` and the wildcards `*` and `?`",
            ));
        }
        let tool = GlobBuilder::new(name)
            .build()
            .map_err(|e| invalid(&format!("bad tool name pattern: {e}")))?
            .compile_matcher();

        let spec = match spec {
            None | Some("*") => Spec::Any,
            Some("") => {
                return Err(invalid(
                    "empty parentheses; write the tool name alone to match any call",
                ))
            }
            Some(command) if name == SHELL_TOOL => parse_shell_spec(command).map_err(invalid)?,
            Some(pattern) if URL_TOOLS.contains(&name) => {
                parse_url_spec(pattern).map_err(|e| invalid(&e.to_string()))?
            }
            Some(glob) => {
                let glob = glob.strip_prefix("./").unwrap_or(glob);
                let matcher = GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| invalid(&format!("bad path glob: {e}")))?
                    .compile_matcher();
                Spec::Path {
                    matcher,
                    absolute: glob.starts_with('/'),
                }
            }
        };
        Ok(Self {
            source: trimmed.to_string(),
            tool,
            spec,
        })
    }

    /// The rule as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether this rule applies to a call of `tool` with `args`.
    pub(crate) fn matches(
        &self,
        tool: &str,
        args: &Value,
        root: Option<&Path>,
        purpose: Purpose,
    ) -> bool {
        if !self.tool.is_match(tool) {
            return false;
        }
        match &self.spec {
            Spec::Any => true,
            Spec::ShellExact(_) | Spec::ShellPrefix(_) => {
                let Some(command) = args.get("command").and_then(Value::as_str) else {
                    return false;
                };
                match purpose {
                    Purpose::Allow => {
                        !shell_words::is_compound(command)
                            && self.command_matches(&shell_words::normalize(command))
                    }
                    Purpose::Deny => shell_words::deny_candidates(command)
                        .iter()
                        .any(|candidate| self.command_matches(candidate)),
                }
            }
            Spec::Path { matcher, absolute } => {
                let Some(path) = args.get("path").and_then(Value::as_str) else {
                    return false;
                };
                let subject = PathSubject::new(path, root);
                let candidate = if *absolute {
                    subject.absolute
                } else {
                    subject.relative
                };
                candidate.is_some_and(|p| matcher.is_match(p))
            }
            Spec::Domain(_) | Spec::Url(_) => {
                let Some(url) = args
                    .get("url")
                    .and_then(Value::as_str)
                    .and_then(|u| Url::parse(u.trim()).ok())
                else {
                    return false;
                };
                if !matches!(url.scheme(), "http" | "https") {
                    return false;
                }
                let credentials = !url.username().is_empty() || url.password().is_some();
                if credentials && purpose == Purpose::Allow {
                    return false;
                }
                let host = url.host_str().unwrap_or("").to_ascii_lowercase();
                match &self.spec {
                    Spec::Domain(domain) => host_matches(&host, domain, true) || host == *domain,
                    Spec::Url(p) => {
                        let mut rest = url.path().to_string();
                        if let Some(query) = url.query() {
                            rest.push('?');
                            rest.push_str(query);
                        }
                        url.scheme() == p.scheme
                            && host_matches(&host, &p.host, p.subdomains)
                            && url.port_or_known_default() == Some(p.port)
                            && p.rest.is_match(&rest)
                    }
                    _ => false,
                }
            }
        }
    }

    fn command_matches(&self, normalized: &str) -> bool {
        match &self.spec {
            Spec::ShellExact(exact) => normalized == exact,
            Spec::ShellPrefix(prefix) => shell_words::has_prefix(normalized, prefix),
            Spec::Any | Spec::Path { .. } | Spec::Domain(_) | Spec::Url(_) => false,
        }
    }
}

fn parse_shell_spec(spec: &str) -> std::result::Result<Spec, &'static str> {
    const WILDCARD: &str =
        "wildcards in shell rules are only supported as a trailing `:*` (prefix match)";
    match spec.strip_suffix(":*") {
        Some(prefix) => {
            let prefix = shell_words::normalize(prefix);
            if prefix.is_empty() {
                Err("empty command prefix before `:*`")
            } else if prefix.contains('*') {
                Err(WILDCARD)
            } else {
                Ok(Spec::ShellPrefix(prefix))
            }
        }
        None if spec.contains('*') => Err(WILDCARD),
        None => Ok(Spec::ShellExact(shell_words::normalize(spec))),
    }
}

/// `host` is `pattern`, or with `subdomains` a subdomain of it (`a.docs.rs` for `docs.rs`).
fn host_matches(host: &str, pattern: &str, subdomains: bool) -> bool {
    if subdomains {
        host.strip_suffix(pattern)
            .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
    } else {
        host == pattern
    }
}

/// What is wrong with a `web_fetch` rule's URL pattern.
#[derive(Debug, thiserror::Error)]
enum UrlSpecError {
    #[error("`domain:` needs a plain host name such as `docs.rs`")]
    BadDomain,
    #[error("a web_fetch rule is a URL pattern (`https://docs.rs/*`) or `domain:docs.rs`")]
    NotAPattern,
    #[error("the scheme must be http or https")]
    BadScheme,
    #[error("a URL pattern may not contain credentials")]
    Credentials,
    #[error("unbalanced `[` in the host")]
    UnbalancedBracket,
    #[error("bad port `{0}`")]
    BadPort(String),
    #[error("wildcards in the host are only supported as a leading `*.`")]
    HostWildcard,
    #[error("bad path pattern: {0}")]
    BadPath(#[source] globset::Error),
}

/// `host[:port]` or `[v6]:port`.
fn split_port(authority: &str) -> std::result::Result<(&str, Option<u16>), UrlSpecError> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => (&authority[..=end], authority[end + 1..].strip_prefix(':')),
            None => return Err(UrlSpecError::UnbalancedBracket),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .map_err(|_| UrlSpecError::BadPort(p.to_string()))
        })
        .transpose()?;
    Ok((host, port))
}

fn parse_url_spec(spec: &str) -> std::result::Result<Spec, UrlSpecError> {
    if let Some(domain) = spec.strip_prefix("domain:") {
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        if domain.is_empty() || domain.contains(['/', '*', ':', '@']) {
            return Err(UrlSpecError::BadDomain);
        }
        return Ok(Spec::Domain(domain));
    }
    let Some((scheme, rest)) = spec.split_once("://") else {
        return Err(UrlSpecError::NotAPattern);
    };
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(UrlSpecError::BadScheme),
    };
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(UrlSpecError::Credentials);
    }
    let (host, port) = split_port(authority)?;
    let port = port.unwrap_or(default_port);
    let host = host.to_ascii_lowercase();
    let (host, subdomains) = match host.strip_prefix("*.") {
        Some(suffix) => (suffix.to_string(), true),
        None => (host, false),
    };
    if host.is_empty()
        || (host.contains(['*', '?']) || host.contains('[') && !host.starts_with('['))
    {
        return Err(UrlSpecError::HostWildcard);
    }
    let rest = GlobBuilder::new(path)
        .literal_separator(false)
        .build()
        .map_err(UrlSpecError::BadPath)?
        .compile_matcher();
    Ok(Spec::Url(UrlPattern {
        scheme,
        host,
        subdomains,
        port,
        rest,
    }))
}

/// The forms of a path argument rules are matched against.
struct PathSubject {
    /// Relative to the project root, when the path is inside it.
    relative: Option<PathBuf>,
    /// Absolute and normalized, when it can be determined.
    absolute: Option<PathBuf>,
}

impl PathSubject {
    fn new(input: &str, root: Option<&Path>) -> Self {
        let Some(root) = root else {
            // No root known: only purely lexical forms.
            let lexical = paths::lexical_normalize(Path::new(input));
            return if lexical.is_absolute() {
                Self {
                    relative: None,
                    absolute: Some(lexical),
                }
            } else if lexical.starts_with("..") {
                Self {
                    relative: None,
                    absolute: None,
                }
            } else {
                Self {
                    relative: Some(lexical),
                    absolute: None,
                }
            };
        };
        // Resolve exactly as the tool will, so a symlink to `.env` is judged as `.env`.
        match (paths::resolve(root, input), paths::canonical_root(root)) {
            (Ok(absolute), Ok(canonical)) => Self {
                relative: absolute
                    .strip_prefix(&canonical)
                    .ok()
                    .map(Path::to_path_buf),
                absolute: Some(absolute),
            },
            // Outside the root (the tool will refuse it anyway) or unresolvable: only rules
            // on absolute paths can say anything about it.
            _ => Self {
                relative: None,
                absolute: Some(paths::lexical_normalize(&root.join(input))),
            },
        }
    }
}
