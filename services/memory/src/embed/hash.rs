//! Feature-hashing embeddings: each analyzed term (and term bigram) adds ±1 to a bucket
//! chosen by a hash. Deterministic, instant and model-free; it gives tests a real provider
//! and measures what "dense" adds beyond lexical matching with no semantic model at all.
//! With [`HashEmbeddings::with_outputs`] it also produces learned-sparse-shaped weights
//! (hashed term ids, `1 + ln tf`) and token vectors (one hashed unit vector per term), so
//! the stores' sparse and multi-vector paths are testable without model files.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{EmbeddingProvider, Encoding, Outputs};
use crate::{text, Result};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct HashEmbeddings {
    dims: usize,
    model_id: String,
    outputs: Outputs,
}

fn digest(feature: &str) -> [u8; 32] {
    Sha256::digest(feature.as_bytes()).into()
}

impl HashEmbeddings {
    /// A provider with `dims` buckets (at least 1).
    pub fn new(dims: usize) -> Self {
        let dims = dims.max(1);
        Self {
            dims,
            model_id: format!("hash-{}-{dims}", text::ANALYZER_VERSION),
            outputs: Outputs::default(),
        }
    }

    /// The same provider that also fills `outputs` in [`EmbeddingProvider::encode`] (a
    /// different model id: its index is a different one).
    pub fn with_outputs(dims: usize, outputs: Outputs) -> Self {
        let mut this = Self::new(dims);
        if outputs.sparse {
            this.model_id.push_str("+sparse");
        }
        if outputs.multivector {
            this.model_id.push_str("+tokens");
        }
        this.outputs = outputs;
        this
    }

    fn encoding(&self, input: &str) -> Encoding {
        let terms = text::terms(input);
        let mut sparse: Vec<(u32, f32)> = Vec::new();
        if self.outputs.sparse {
            let mut tf: std::collections::BTreeMap<u32, f32> = Default::default();
            for t in &terms {
                let h = digest(t);
                *tf.entry(u32::from_le_bytes([h[0], h[1], h[2], h[3]]) >> 12)
                    .or_default() += 1.0;
            }
            sparse = tf.into_iter().map(|(id, n)| (id, 1.0 + n.ln())).collect();
        }
        let tokens = if self.outputs.multivector {
            terms.iter().map(|t| self.vector(t)).collect()
        } else {
            Vec::new()
        };
        Encoding {
            dense: self.vector(input),
            sparse,
            tokens,
        }
    }

    fn vector(&self, input: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        let terms = text::terms(input);
        let bigrams = terms.windows(2).map(|w| format!("{} {}", w[0], w[1]));
        for feature in terms.iter().cloned().chain(bigrams) {
            let h = digest(&feature);
            let bucket = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
            let sign = if h[8] & 1 == 0 { 1.0 } else { -1.0 };
            v[(bucket % self.dims as u64) as usize] += sign;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

#[async_trait]
impl EmbeddingProvider for HashEmbeddings {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }

    fn outputs(&self) -> Outputs {
        self.outputs
    }

    async fn encode(&self, texts: &[String]) -> Result<Vec<Encoding>> {
        Ok(texts.iter().map(|t| self.encoding(t)).collect())
    }
}
