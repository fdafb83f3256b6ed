//! Which embedding provider a store gets, from the settings (`memory_embeddings` and the
//! user's `memory_bge_*`): the one selection the product and the benchmark share.
//!
//! Locally, BGE-M3 (the reference model; its files placed in `<AppRoot>/cache/models/bge-m3`)
//! is preferred over all-MiniLM-L6-v2; a BGE-M3 folder that is incomplete or does not load is
//! a warning naming the folder, and MiniLM is used when installed.
//!
//! A provider that is configured but cannot be used (an invalid URL, unreadable model
//! files) is a warning naming the setting, and the store runs lexical-only: memory never
//! stops the backend. Local models are loaded here (about 90 MB read for MiniLM, 2.3 GB
//! for BGE-M3: call from a blocking context).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lumina_config::{MemoryEmbeddings, MemoryModels};

use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::endpoint::check_http_url;

use crate::{RemoteEmbeddings, RemoteOptions};

/// The local model's folder name under `<AppRoot>/cache/models`.
pub const LOCAL_MODEL_DIR: &str = "all-MiniLM-L6-v2";

/// Files the local model needs (the tokenizer is `vocab.txt`; `tokenizer.json` is not
/// read: its fixed 128-token padding and truncation are not what the model was trained
/// with, see `local`).
pub const LOCAL_MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "vocab.txt"];

/// BGE-M3's folder name under `<AppRoot>/cache/models`.
pub const BGE_M3_DIR: &str = "bge-m3";

/// Files BGE-M3 needs: each entry lists accepted names, the first present is read.
pub const BGE_M3_FILES: [&[&str]; 5] = [
    &["config.json"],
    &["tokenizer.json"],
    &["model.safetensors", "pytorch_model.bin"],
    &["colbert_linear.safetensors", "colbert_linear.pt"],
    &["sparse_linear.safetensors", "sparse_linear.pt"],
];

/// Where the selection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The `memory_bge_*` endpoint.
    Remote,
    /// A local model: BGE-M3 when placed, else all-MiniLM-L6-v2 (the provider's
    /// `model_id` says which).
    Local,
    /// None: lexical recall only.
    None,
}

/// How a message of the selection should be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Expected (nothing configured, or turned off).
    Info,
    /// Something configured could not be used.
    Warn,
}

/// The outcome of [`select`].
#[derive(Clone)]
pub struct Selection {
    /// The provider, when one is usable.
    pub provider: Option<Arc<dyn EmbeddingProvider>>,
    /// Where it came from.
    pub source: Source,
    /// What to tell the user (already logged by [`select`]); never holds a key.
    pub message: Option<(Level, String)>,
}

impl std::fmt::Debug for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selection")
            .field("model_id", &self.provider.as_ref().map(|p| p.model_id()))
            .field("source", &self.source)
            .field("message", &self.message)
            .finish()
    }
}

/// `<app_root>/cache/models/all-MiniLM-L6-v2`.
pub fn local_model_dir(app_root: &Path) -> PathBuf {
    app_root.join("cache").join("models").join(LOCAL_MODEL_DIR)
}

/// Whether every file the local model needs is in `dir`.
pub fn local_model_installed(dir: &Path) -> bool {
    LOCAL_MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// `<app_root>/cache/models/bge-m3`.
pub fn bge_m3_dir(app_root: &Path) -> PathBuf {
    app_root.join("cache").join("models").join(BGE_M3_DIR)
}

/// The [`BGE_M3_FILES`] entries with no file in `dir` (alternatives joined by " or ").
pub fn bge_m3_missing(dir: &Path) -> Vec<String> {
    BGE_M3_FILES
        .iter()
        .filter(|names| !names.iter().any(|f| dir.join(f).is_file()))
        .map(|names| names.join(" or "))
        .collect()
}

/// Chooses the provider (see the module docs) and logs the outcome's message.
pub fn select(models: &MemoryModels, app_root: &Path) -> Selection {
    let selection = choose(models, app_root);
    match &selection.message {
        Some((Level::Warn, message)) => tracing::warn!("{message}"),
        Some((Level::Info, message)) => tracing::info!("{message}"),
        None => {}
    }
    if let Some(p) = &selection.provider {
        tracing::info!(
            model = p.model_id(),
            dims = p.dims(),
            "memory embeddings enabled"
        );
    }
    selection
}

fn choose(models: &MemoryModels, app_root: &Path) -> Selection {
    let dir = local_model_dir(app_root);
    let placed = bge_m3_dir(app_root).exists() || local_model_installed(&dir);
    match models.embeddings {
        MemoryEmbeddings::None => none(
            Level::Info,
            "memory embeddings are off (memory_embeddings = none): recall is lexical only".into(),
        ),
        MemoryEmbeddings::Remote => match models.bge_base_url {
            Some(_) => remote(models),
            None => none(
                Level::Warn,
                "memory_embeddings = remote but memory_bge_base_url is not set in the user \
                 settings.json: recall is lexical only"
                    .into(),
            ),
        },
        MemoryEmbeddings::Local => local(app_root),
        MemoryEmbeddings::Auto if models.bge_base_url.is_some() => remote(models),
        MemoryEmbeddings::Auto if placed => local(app_root),
        MemoryEmbeddings::Auto => none(
            Level::Info,
            format!(
                "no memory embedding model: recall is lexical only (place BGE-M3 in {}, or \
                 install the local model into {} with `lumina-backend memory install-model`, \
                 or set memory_bge_base_url)",
                bge_m3_dir(app_root).display(),
                dir.display()
            ),
        ),
    }
}

fn none(level: Level, message: String) -> Selection {
    Selection {
        provider: None,
        source: Source::None,
        message: Some((level, message)),
    }
}

fn remote(models: &MemoryModels) -> Selection {
    let Some(base_url) = models.bge_base_url.as_deref() else {
        return none(Level::Warn, "memory_bge_base_url is not set".into());
    };
    // The URL itself is not repeated: it may carry credentials.
    if let Err(reason) = check_http_url(base_url) {
        return none(
            Level::Warn,
            format!(
                "memory_bge_base_url is not usable ({reason}): recall is lexical only until \
                 it is fixed"
            ),
        );
    }
    let options = RemoteOptions {
        api_key: models.bge_api_key.clone(),
        ..RemoteOptions::new(base_url, &models.bge_model, models.bge_dimensions)
    };
    match RemoteEmbeddings::new(options) {
        Ok(provider) => Selection {
            provider: Some(Arc::new(provider)),
            source: Source::Remote,
            message: None,
        },
        Err(err) => none(
            Level::Warn,
            format!("memory_bge_base_url: the embeddings client did not start ({err}): recall is lexical only"),
        ),
    }
}

/// Why the local MiniLM model cannot be used.
#[cfg(feature = "local-embeddings")]
#[derive(Debug, thiserror::Error)]
enum LocalModelProblem {
    #[error("the local model is not installed ({missing} missing in {})", dir.display())]
    NotInstalled { missing: String, dir: PathBuf },
    #[error("the local model in {} did not load ({source})", dir.display())]
    Load {
        dir: PathBuf,
        source: lumina_memory::Error,
    },
}

/// BGE-M3 when its folder is complete and loads, else MiniLM (with a warning about BGE-M3
/// when its folder exists).
#[cfg(feature = "local-embeddings")]
fn local(app_root: &Path) -> Selection {
    let bge = bge_m3_dir(app_root);
    let missing = bge_m3_missing(&bge);
    let problem = if !bge.exists() {
        None
    } else if !missing.is_empty() {
        Some(format!(
            "the BGE-M3 folder {} is incomplete ({} missing)",
            bge.display(),
            missing.join(", ")
        ))
    } else {
        match crate::LocalBgeM3::load(&bge) {
            Ok(model) => return local_provider(Arc::new(model), None),
            Err(err) => Some(format!(
                "the BGE-M3 model in {} did not load ({err})",
                bge.display()
            )),
        }
    };
    let minilm = minilm(&local_model_dir(app_root));
    match (problem, minilm) {
        (None, Ok(model)) => local_provider(model, None),
        (None, Err(reason)) => none(
            Level::Warn,
            format!(
                "memory_embeddings: {reason}: recall is lexical only; run `lumina-backend \
                 memory install-model`"
            ),
        ),
        (Some(problem), Ok(model)) => local_provider(
            model,
            Some(format!(
                "memory_embeddings: {problem}: using {LOCAL_MODEL_DIR} instead"
            )),
        ),
        (Some(problem), Err(reason)) => none(
            Level::Warn,
            format!("memory_embeddings: {problem}, and {reason}: recall is lexical only"),
        ),
    }
}

#[cfg(feature = "local-embeddings")]
fn local_provider(provider: Arc<dyn EmbeddingProvider>, warning: Option<String>) -> Selection {
    Selection {
        provider: Some(provider),
        source: Source::Local,
        message: warning.map(|w| (Level::Warn, w)),
    }
}

/// all-MiniLM-L6-v2 from `dir`, or why not.
#[cfg(feature = "local-embeddings")]
fn minilm(dir: &Path) -> Result<Arc<dyn EmbeddingProvider>, LocalModelProblem> {
    let missing: Vec<&str> = LOCAL_MODEL_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(LocalModelProblem::NotInstalled {
            missing: missing.join(", "),
            dir: dir.to_path_buf(),
        });
    }
    match crate::LocalMiniLm::load(dir) {
        Ok(model) => Ok(Arc::new(model)),
        Err(source) => Err(LocalModelProblem::Load {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

#[cfg(not(feature = "local-embeddings"))]
fn local(app_root: &Path) -> Selection {
    none(
        Level::Warn,
        format!(
            "memory_embeddings: this build has no local model support (feature \
             local-embeddings), so the models in {} are not used: recall is lexical only",
            app_root.join("cache").join("models").display()
        ),
    )
}
