//! The Memory Fabric's model settings (docs/design.md#memory-model-settings):
//! `memory_embeddings` and the memory-model keys only the user's settings.json may set,
//! typed by [`Settings::memory_models`].

use serde_json::Value;

use crate::{Secret, Settings};

/// `memory_embeddings`: where the Memory Fabric's dense vectors come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MemoryEmbeddings {
    /// The remote model when `memory_bge_base_url` is set, else the local model when its
    /// files are installed, else none.
    #[default]
    Auto,
    /// The local all-MiniLM-L6-v2 in `<AppRoot>/cache/models/all-MiniLM-L6-v2`.
    Local,
    /// The OpenAI-compatible `memory_bge_*` endpoint.
    Remote,
    /// No embeddings: lexical recall only.
    None,
}

impl MemoryEmbeddings {
    /// The setting's canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Local => "local",
            Self::Remote => "remote",
            Self::None => "none",
        }
    }
}

impl std::str::FromStr for MemoryEmbeddings {
    type Err = crate::InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match crate::keys::check_value(
            "memory_embeddings",
            crate::keys::Kind::Str,
            Value::String(s.to_string()),
        )?
        .as_str()
        {
            Some("local") => Ok(Self::Local),
            Some("remote") => Ok(Self::Remote),
            Some("none") => Ok(Self::None),
            _ => Ok(Self::Auto),
        }
    }
}

/// The Memory Fabric's model settings, typed: `memory_embeddings` (any layer) and the
/// memory-model keys `memory_bge_*` / `memory_reranker_*`, which only the user's
/// settings.json may set (docs/design.md#memory-model-settings). Built by
/// [`Settings::memory_models`]. `Debug` redacts the keys.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryModels {
    /// `memory_embeddings`. Default: `auto`.
    pub embeddings: MemoryEmbeddings,
    /// `memory_bge_base_url`: base URL of an OpenAI-compatible embeddings API (the client
    /// posts to `{base}/embeddings`), e.g. `https://api.example.com/v1`. Default: none.
    pub bge_base_url: Option<String>,
    /// `memory_bge_api_key`: its bearer token. Default: none (no `Authorization` header).
    pub bge_api_key: Option<Secret>,
    /// `memory_bge_model`: the model name sent with each request. Default: `BAAI/bge-m3`.
    pub bge_model: String,
    /// `memory_bge_dimensions`: the vectors' dimensions (checked on every answer; part of
    /// the retrieval fingerprint with the model name). Default: 1024 (BGE-M3's).
    pub bge_dimensions: usize,
    /// `memory_reranker_base_url`: base URL of a rerank API; when set, the read path's
    /// best candidates are re-scored by `POST {base}/rerank` (Alibaba Bailian's
    /// `…/compatible-mode/v1` becomes `…/compatible-api/v1/reranks`). Default: none (no
    /// reranking).
    pub reranker_base_url: Option<String>,
    /// `memory_reranker_api_key`: its bearer token. Default: none.
    pub reranker_api_key: Option<Secret>,
    /// `memory_reranker_model`: the model name sent with each request.
    /// Default: `BAAI/bge-reranker-v2-m3`.
    pub reranker_model: String,
    /// `memory_reranker_top_n`: how many of the best candidates are re-scored (at least 1).
    /// Default: 20.
    pub reranker_top_n: usize,
    /// Memory-model values that were ignored (wrong type) and why; callers log them.
    pub warnings: Vec<String>,
}

impl Default for MemoryModels {
    fn default() -> Self {
        Self {
            embeddings: MemoryEmbeddings::Auto,
            bge_base_url: None,
            bge_api_key: None,
            bge_model: "BAAI/bge-m3".into(),
            bge_dimensions: 1024,
            reranker_base_url: None,
            reranker_api_key: None,
            reranker_model: "BAAI/bge-reranker-v2-m3".into(),
            reranker_top_n: 20,
            warnings: Vec::new(),
        }
    }
}

impl Settings {
    /// The Memory Fabric's model settings: `memory_embeddings` plus the memory-model keys
    /// of the user's settings.json (kept in [`Settings::extra`] by [`crate::load`]). A
    /// value of the wrong type is ignored with a warning naming the key, never its value;
    /// blank strings count as unset.
    pub fn memory_models(&self) -> MemoryModels {
        let mut out = MemoryModels {
            embeddings: self.memory_embeddings.parse().unwrap_or_default(),
            ..MemoryModels::default()
        };
        let file = self
            .settings_file
            .as_ref()
            .map_or_else(|| "settings.json".to_string(), |p| p.display().to_string());
        for &(key, kind) in crate::keys::MEMORY_MODEL_KEYS {
            let Some(raw) = self.extra.get(key) else {
                continue;
            };
            let value = match crate::keys::check_value(key, kind, raw.clone()) {
                Ok(value) => value,
                Err(expected) => {
                    out.warnings.push(format!(
                        "ignored `{key}` from {file}: it must be {expected}"
                    ));
                    continue;
                }
            };
            let text = value.as_str().map(str::trim).filter(|t| !t.is_empty());
            let number = value.as_u64().and_then(|n| usize::try_from(n).ok());
            if number == Some(0) {
                out.warnings.push(format!(
                    "ignored `{key}` from {file}: it must be at least 1"
                ));
            }
            let number = number.filter(|n| *n > 0);
            match key {
                "memory_bge_base_url" => out.bge_base_url = text.map(str::to_string),
                "memory_bge_api_key" => out.bge_api_key = text.map(Secret::new),
                "memory_bge_model" => {
                    if let Some(t) = text {
                        out.bge_model = t.to_string();
                    }
                }
                "memory_bge_dimensions" => {
                    if let Some(n) = number {
                        out.bge_dimensions = n;
                    }
                }
                "memory_reranker_base_url" => out.reranker_base_url = text.map(str::to_string),
                "memory_reranker_api_key" => out.reranker_api_key = text.map(Secret::new),
                "memory_reranker_model" => {
                    if let Some(t) = text {
                        out.reranker_model = t.to_string();
                    }
                }
                "memory_reranker_top_n" => {
                    if let Some(n) = number {
                        out.reranker_top_n = n;
                    }
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use std::path::PathBuf;

    use super::*;
    use crate::{load, AppRoot, Env};

    fn load_with(user: Value, env: &[(&str, &str)], cli: Value) -> Settings {
        let tmp = tempfile::tempdir().unwrap();
        let root = AppRoot::new(tmp.path());
        std::fs::create_dir_all(root.settings_file().parent().unwrap()).unwrap();
        std::fs::write(root.settings_file(), user.to_string()).unwrap();
        let Value::Object(cli) = cli else {
            panic!("cli must be an object")
        };
        let mut settings = load(&root, None, &Env::from_pairs(env.iter().copied()), &cli).unwrap();
        settings.settings_file = Some(PathBuf::from("settings.json"));
        settings
    }

    #[test]
    fn memory_models_default_to_auto_without_endpoints() {
        let models = load_with(json!({}), &[], json!({})).memory_models();
        assert_eq!(models, MemoryModels::default());
        assert_eq!(models.embeddings, MemoryEmbeddings::Auto);
        assert_eq!(models.reranker_top_n, 20);
    }

    #[test]
    fn memory_models_come_typed_from_user_settings_only() {
        let settings = load_with(
            json!({
                "memory_embeddings": "Remote",
                "memory_bge_base_url": " https://embed.example/v1 ",
                "memory_bge_api_key": "sk-embed-secret",
                "memory_bge_model": "text-embedding-v4",
                "memory_bge_dimensions": 512,
                "memory_reranker_base_url": "https://rerank.example/v1",
                "memory_reranker_api_key": "sk-rerank-secret",
                "memory_reranker_model": "qwen3-rerank",
                "memory_reranker_top_n": 8,
            }),
            // The environment may choose the mode, never an endpoint.
            &[
                ("LUMINA_MEMORY_EMBEDDINGS", "none"),
                ("LUMINA_MEMORY_BGE_BASE_URL", "http://evil"),
            ],
            json!({}),
        );
        let models = settings.memory_models();
        assert_eq!(
            models,
            MemoryModels {
                embeddings: MemoryEmbeddings::None,
                bge_base_url: Some("https://embed.example/v1".into()),
                bge_api_key: Some(Secret::new("sk-embed-secret")),
                bge_model: "text-embedding-v4".into(),
                bge_dimensions: 512,
                reranker_base_url: Some("https://rerank.example/v1".into()),
                reranker_api_key: Some(Secret::new("sk-rerank-secret")),
                reranker_model: "qwen3-rerank".into(),
                reranker_top_n: 8,
                warnings: vec![],
            }
        );
        let debug = format!("{models:?} {settings:?}");
        assert!(!debug.contains("sk-embed-secret") && !debug.contains("sk-rerank-secret"));
    }

    #[test]
    fn bad_memory_model_values_are_ignored_with_a_warning() {
        let settings = load_with(
            json!({
                "memory_bge_dimensions": "big",
                "memory_reranker_top_n": 0,
                "memory_bge_api_key": 42,
                "memory_bge_base_url": "",
            }),
            &[],
            json!({"memory_embeddings": "off"}),
        );
        let models = settings.memory_models();
        assert_eq!(models.embeddings, MemoryEmbeddings::None);
        assert_eq!(models.bge_dimensions, 1024);
        assert_eq!(models.reranker_top_n, 20);
        assert_eq!(models.bge_base_url, None);
        assert_eq!(models.bge_api_key, None);
        assert_eq!(
            models.warnings,
            vec![
                "ignored `memory_bge_api_key` from settings.json: it must be a string".to_string(),
                format!(
                    "ignored `memory_bge_dimensions` from settings.json: it must be a whole number from 0 to {}",
                    usize::MAX
                ),
                "ignored `memory_reranker_top_n` from settings.json: it must be at least 1"
                    .to_string(),
            ]
        );
        assert!("sometimes".parse::<MemoryEmbeddings>().is_err());
    }
}
