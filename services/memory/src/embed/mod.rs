//! Embedding providers as the read path and the index job see them: the
//! [`EmbeddingProvider`] contract, the vector codec ([`codec`]: quantized rows as the
//! stores keep them) and a deterministic feature-hashing provider ([`HashEmbeddings`], no
//! model files; for tests and as a lexical-dense stand-in, used by the conformance suite).
//! The real models (the remote OpenAI-compatible client, local BGE-M3 and
//! all-MiniLM-L6-v2 with candle) and their selection from the settings live in
//! `lumina-embed`, which depends on this crate.
//!
//! A provider's [`model_id`](EmbeddingProvider::model_id) and dimensions are part of the
//! retrieval fingerprint, so vectors of different models are never mixed; credentials
//! never are.

pub mod codec;
mod hash;

pub use hash::HashEmbeddings;

use async_trait::async_trait;

use crate::Result;

/// What a provider produces besides its dense vector (part of the fingerprint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outputs {
    /// Learned sparse weights per vocabulary id (BGE-M3's lexical weights).
    pub sparse: bool,
    /// Token-level vectors for multi-vector (MaxSim) scoring, `dims` each unless
    /// `token_dims` says otherwise.
    pub multivector: bool,
}

/// Everything a provider gives for one text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoding {
    /// The dense vector (`dims` values).
    pub dense: Vec<f32>,
    /// Learned sparse weights: (vocabulary id, weight > 0), each id once, sorted by id.
    /// Empty unless the provider's [`Outputs::sparse`].
    pub sparse: Vec<(u32, f32)>,
    /// Unit-length token vectors, in token order (specials excluded). Empty unless the
    /// provider's [`Outputs::multivector`].
    pub tokens: Vec<Vec<f32>>,
}

/// Turns texts into vectors.
#[async_trait]
pub trait EmbeddingProvider: Send + Sync + 'static {
    /// A stable id of the model and its preprocessing (it versions stored vectors).
    fn model_id(&self) -> &str;

    /// Dimensions of every vector.
    fn dims(&self) -> usize;

    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;

    /// What [`encode`](Self::encode) fills besides the dense vector. Default: nothing.
    fn outputs(&self) -> Outputs {
        Outputs::default()
    }

    /// One encoding per text, in order: the dense vector plus the [`Outputs`] the provider
    /// has. The default wraps [`embed`](Self::embed).
    async fn encode(&self, texts: &[String]) -> Result<Vec<Encoding>> {
        Ok(self
            .embed(texts)
            .await?
            .into_iter()
            .map(|dense| Encoding {
                dense,
                ..Encoding::default()
            })
            .collect())
    }
}
