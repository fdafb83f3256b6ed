//! Strict JSON for token headers and claim sets: one object, nothing after it, and no
//! member name twice at any depth.
//!
//! serde_json keeps the last of duplicate members, which RFC 7519 §4 permits, but another
//! component in front of or behind us (a gateway, an audit log, the IdP's own tests) may keep
//! the first — and then `{"tenant":"acme","tenant":"other"}` means two different tenants to
//! two readers of the same signed token. Refusing duplicates (RFC 7515 §5.2 allows it; RFC 8725
//! §3.9 recommends treating ambiguity as failure) removes the parser differential. Names are
//! compared after unescaping, so `"tenant"` and `"\u0074enant"` are duplicates too.

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a document was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrictError {
    /// Not JSON, not an object, or bytes after the object.
    NotAnObject,
    /// Some object (at any depth) names a member twice.
    DuplicateMember,
}

/// Marker text of the serde error raised for a duplicate; serde errors are strings.
const DUPLICATE: &str = "lumina-auth: duplicate member";

/// Parses `bytes` as exactly one JSON object with unique member names throughout.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, StrictError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Strict::deserialize(&mut de).and_then(|strict| de.end().map(|()| strict));
    match parsed {
        Ok(Strict(Value::Object(map))) => Ok(map),
        Ok(_) => Err(StrictError::NotAnObject),
        Err(e) if e.to_string().starts_with(DUPLICATE) => Err(StrictError::DuplicateMember),
        Err(_) => Err(StrictError::NotAnObject),
    }
}

/// A `Value` whose objects were checked for duplicate names while parsing. serde_json's
/// recursion limit still applies (every nested value goes through `deserialize_any`).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Strict, E> {
        Number::from_f64(v)
            .map(|n| Strict(Value::Number(n)))
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Strict(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Strict, A::Error> {
        let mut map = Map::new();
        while let Some(name) = access.next_key::<String>()? {
            if map.contains_key(&name) {
                return Err(A::Error::custom(DUPLICATE));
            }
            let Strict(value) = access.next_value()?;
            map.insert(name, value);
        }
        Ok(Strict(Value::Object(map)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_parse_like_serde_json() {
        let text = r#"{"a":1,"b":[true,null,-2,1.5,"x"],"c":{"d":{}},"e":18446744073709551615}"#;
        assert_eq!(
            parse_object(text.as_bytes()).map(Value::Object),
            Ok(serde_json::from_str::<Value>(text).unwrap_or_default())
        );
        assert_eq!(parse_object(b" {} \n").map(Value::Object), Ok(json!({})));
    }

    #[test]
    fn duplicates_are_refused_at_any_depth_and_after_unescaping() {
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":{"b":1,"b":2}}"#,
            r#"{"x":[{"b":1,"b":2}]}"#,
        ] {
            assert_eq!(
                parse_object(text.as_bytes()),
                Err(StrictError::DuplicateMember),
                "{text}"
            );
        }
        assert!(
            parse_object(br#"{"a":{"a":1}}"#).is_ok(),
            "same name, two objects"
        );
    }

    #[test]
    fn anything_but_one_object_is_refused() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(300), "]".repeat(300));
        for text in [
            "",
            "[]",
            "\"s\"",
            "1",
            "null",
            "{",
            "{}{}",
            "{} x",
            "\u{feff}{}",
            "{\"a\":1e400}",
            deep.as_str(),
        ] {
            assert_eq!(
                parse_object(text.as_bytes()),
                Err(StrictError::NotAnObject),
                "{text:?}"
            );
        }
        assert_eq!(
            parse_object(b"{\"a\":\"\xff\"}"),
            Err(StrictError::NotAnObject)
        );
    }
}
