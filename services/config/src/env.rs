//! A snapshot of the process environment, so that settings resolution is a pure function
//! of its inputs and tests never touch the real environment.

use std::collections::BTreeMap;

/// Environment variables captured once. Debug prints only the variable names: the values
/// include API keys and database URLs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The current process environment. Variables whose name or value is not valid
    /// UTF-8 are left out (no setting could use them).
    pub fn from_process() -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Self { vars }
    }

    /// An environment made of exactly these variables (for tests and embedding).
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let vars = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self { vars }
    }

    /// This snapshot with `name` set to `value` (e.g. the cluster profile pinning
    /// `LUMINA_SESSION_RUNTIME_BACKEND` for its runtimes).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// The raw value of `name`, if set (possibly empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The value of `name` with surrounding whitespace removed; `None` when unset or
    /// blank, because an empty `export LUMINA_X=` means "not set" to most people.
    pub fn get_nonempty(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_is_unset_and_debug_hides_values() {
        let env = Env::from_pairs([("A", "  x "), ("B", "  "), ("SECRET", "sk-1")]);
        assert_eq!(env.get_nonempty("A"), Some("x"));
        assert_eq!(env.get_nonempty("B"), None);
        assert_eq!(env.get("B"), Some("  "));
        assert_eq!(env.get_nonempty("C"), None);
        let debug = format!("{env:?}");
        assert!(!debug.contains("sk-1"), "{debug}");
        assert!(debug.contains("SECRET"), "{debug}");
    }
}
