//! The `"oauth"` object of an HTTP server definition: pre-registered OAuth credentials and
//! extra scopes, `{"client_id"?, "client_secret"?, "scopes"?}`. Only `client_secret`
//! expands `${VAR}` (at connect time, like header values).

use serde_json::Value;

use super::{opt_str, str_list, ConfigError, DefError};
use crate::client::OAuthSettings;

/// The `"oauth"` object as written (`client_secret` unexpanded).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthSpec {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
}

impl OAuthSpec {
    /// The settings with `client_secret` expanded by `exp`.
    pub(super) fn resolve(
        &self,
        exp: &dyn Fn(&str) -> Result<String, ConfigError>,
    ) -> Result<OAuthSettings, ConfigError> {
        Ok(OAuthSettings {
            client_id: self.client_id.clone(),
            client_secret: match &self.client_secret {
                Some(s) => Some(lumina_config::Secret::new(exp(s)?)),
                None => None,
            },
            scopes: self.scopes.clone(),
        })
    }
}

/// `"oauth": {"client_id"?: string, "client_secret"?: string, "scopes"?: [string] | "a b"}`.
pub(super) fn parse_oauth(v: Option<&Value>) -> Result<Option<OAuthSpec>, DefError> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(DefError::OAuthNotAnObject),
    };
    let field = |k: &str| {
        opt_str(obj, k)
            .map_err(|_| DefError::NotAString(format!("oauth.{k}")))
            .map(|v| v.filter(|s| !s.is_empty()))
    };
    let scopes = match obj.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_ascii_whitespace().map(str::to_string).collect(),
        Some(Value::Array(_)) => {
            str_list(obj, "scopes").map_err(|_| DefError::OAuthScopesNotStrings)?
        }
        Some(_) => return Err(DefError::NotStrings("oauth.scopes".into())),
    };
    let spec = OAuthSpec {
        client_id: field("client_id")?,
        client_secret: field("client_secret")?,
        scopes,
    };
    if spec.client_secret.is_some() && spec.client_id.is_none() {
        return Err(DefError::OAuthSecretWithoutClientId);
    }
    Ok(Some(spec))
}

#[cfg(test)]
mod tests {
    use super::super::parse_def;
    use super::*;
    use crate::client::Endpoint;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn oauth_settings_parse_and_expand_only_the_secret() -> Result<(), Box<dyn std::error::Error>> {
        let def = parse_def(&json!({"url": "https://h/mcp", "oauth": {
            "client_id": "id-${NOT_EXPANDED}", "client_secret": "${SECRET}", "scopes": "a b"}}))?;
        let env = |k: &str| (k == "SECRET").then(|| "s3cret".to_string());
        let endpoint = def
            .resolve("srv", Path::new("/"), &env)
            .map_err(|e| e.to_string())?;
        let Endpoint::Http { oauth: Some(o), .. } = &endpoint else {
            return Err(format!("no oauth in {endpoint:?}").into());
        };
        assert_eq!(o.client_id.as_deref(), Some("id-${NOT_EXPANDED}"));
        assert_eq!(o.client_secret.as_ref().map(|s| s.expose()), Some("s3cret"));
        assert_eq!(o.scopes, ["a", "b"]);
        assert!(!format!("{endpoint:?}").contains("s3cret"));
        let missing = def.resolve("srv", Path::new("/"), &|_| None);
        assert!(matches!(missing, Err(ConfigError::Expand { .. })));
        for bad in [
            json!({"url": "https://h", "oauth": "x"}),
            json!({"url": "https://h", "oauth": {"client_id": 1}}),
            json!({"url": "https://h", "oauth": {"client_secret": "s"}}),
            json!({"url": "https://h", "oauth": {"scopes": [1]}}),
        ] {
            assert!(parse_def(&bad).is_err(), "{bad}");
        }
        Ok(())
    }
}
