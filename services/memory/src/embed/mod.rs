//! Embedding providers: the [`EmbeddingProvider`] contract, the remote OpenAI-compatible
//! client ([`RemoteEmbeddings`]), a deterministic feature-hashing provider
//! ([`HashEmbeddings`], no model files; for tests and as a lexical-dense stand-in), and,
//! behind the `local-embeddings` feature, local all-MiniLM-L6-v2 inference; and
//! [`select()`], the choice among them from the settings.
//!
//! A provider's [`model_id`](EmbeddingProvider::model_id) and dimensions are part of the
//! retrieval fingerprint, so vectors of different models are never mixed; credentials
//! never are.

mod hash;
#[cfg(feature = "local-embeddings")]
pub mod local;
mod remote;
mod select;

pub use hash::HashEmbeddings;
#[cfg(feature = "local-embeddings")]
pub use local::LocalMiniLm;
pub use remote::{RemoteEmbeddings, RemoteOptions};
pub(crate) use select::check_http_url;
pub use select::{
    local_model_dir, local_model_installed, select, Level, Selection, Source, LOCAL_MODEL_DIR,
    LOCAL_MODEL_FILES,
};

use async_trait::async_trait;

use crate::Result;

/// Turns texts into vectors.
#[async_trait]
pub trait EmbeddingProvider: Send + Sync + 'static {
    /// A stable id of the model and its preprocessing (it versions stored vectors).
    fn model_id(&self) -> &str;

    /// Dimensions of every vector.
    fn dims(&self) -> usize;

    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}
