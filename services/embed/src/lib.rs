//! The embedding models of the Memory Fabric (docs/design.md#embeddings-and-rerank): the
//! remote OpenAI-compatible client ([`RemoteEmbeddings`]), and, behind the
//! `local-embeddings` feature, local BGE-M3 and all-MiniLM-L6-v2 inference with candle
//! ([`local`]); and [`select()`], the choice among them from the settings.
//!
//! Every model implements the core's [`EmbeddingProvider`] contract (`lumina-memory`,
//! which knows no concrete model): a provider's
//! [`model_id`](EmbeddingProvider::model_id) and dimensions are part of the retrieval
//! fingerprint, so vectors of different models are never mixed; credentials never are.
//! The deterministic feature-hashing provider ([`HashEmbeddings`]) stays in the core,
//! where the conformance suite uses it; it is re-exported here.
#![warn(missing_docs)]

#[cfg(feature = "local-embeddings")]
pub mod local;
mod remote;
mod select;

#[cfg(feature = "local-embeddings")]
pub use local::{LocalBgeM3, LocalMiniLm};
pub use lumina_memory::embed::{EmbeddingProvider, Encoding, HashEmbeddings, Outputs};
pub use remote::{RemoteEmbeddings, RemoteOptions};
pub use select::{
    bge_m3_dir, bge_m3_missing, local_model_dir, local_model_installed, select, Level, Selection,
    Source, BGE_M3_DIR, BGE_M3_FILES, LOCAL_MODEL_DIR, LOCAL_MODEL_FILES,
};
