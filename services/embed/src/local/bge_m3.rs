//! Local BGE-M3 with candle, as FlagEmbedding's `BGEM3` computes it: the dense vector is the
//! CLS token's last hidden state, L2-normalized; the learned sparse weights are
//! `relu(sparse_linear(hidden))` per token, the largest per vocabulary id, special tokens
//! and weights ≤ 0 left out; the multi-vector is `colbert_linear(hidden[1:])` over the real
//! tokens after CLS (the closing `</s>` included), each L2-normalized. CPU, f32.
//!
//! The model folder (`<AppRoot>/cache/models/bge-m3`) holds `config.json`, `tokenizer.json`
//! (Hugging Face tokenizers; its own padding and truncation are ignored: texts are cut here
//! to [`MAX_TOKENS`]), the encoder `model.safetensors` or `pytorch_model.bin`, and the heads
//! `colbert_linear.pt` and `sparse_linear.pt` as BAAI ships them (or `.safetensors`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{Device, Module};
use candle_nn::Linear;
use tokenizers::Tokenizer;

use super::bert::{l2_normalize, Hidden};
use super::checkpoint::{file_error, find, head, load_tokenizer, read_tensors};
use super::xlmr::{Xlmr, XlmrConfig};
use crate::select::BGE_M3_FILES;
use lumina_memory::embed::{EmbeddingProvider, Encoding, Outputs};
use lumina_memory::{Error, Result};

/// FlagEmbedding's `max_length` for passages (tokens, specials included).
pub const MAX_TOKENS: usize = 512;
/// Texts per forward pass at most (sorted by length to limit padding) ...
const MAX_BATCH: usize = 32;
/// ... and padded tokens per forward pass at most (attention is quadratic in length).
const TOKEN_BUDGET: usize = 8192;

/// The model folder's name under `<AppRoot>/cache/models`.
pub const MODEL_DIR_NAME: &str = crate::select::BGE_M3_DIR;

/// See the module docs.
#[derive(Clone)]
pub struct LocalBgeM3 {
    inner: Arc<Inner>,
    model_id: String,
    dims: usize,
}

struct Inner {
    encoder: Xlmr,
    colbert: Linear,
    sparse: Linear,
    tokenizer: Tokenizer,
    /// Ids never given a sparse weight: cls/bos, eos, pad, unk (sorted).
    specials: Vec<u32>,
    /// Tokens of text kept before the post-processor adds its specials.
    content_tokens: usize,
}

impl std::fmt::Debug for LocalBgeM3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBgeM3")
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

impl LocalBgeM3 {
    /// `<app_root>/cache/models/bge-m3`.
    pub fn default_dir(app_root: &Path) -> PathBuf {
        crate::select::bge_m3_dir(app_root)
    }

    /// Loads the model from `dir` (blocking: reads about 2.3 GB for the real model). A
    /// missing or unreadable file is an [`Error::Embedding`] naming it.
    pub fn load(dir: &Path) -> Result<Self> {
        let [config_file, tokenizer_file, weights, colbert, sparse] = BGE_M3_FILES;
        let config_path = find(dir, config_file)?;
        let bytes = std::fs::read(&config_path).map_err(|e| file_error(&config_path, e))?;
        let config: XlmrConfig =
            serde_json::from_slice(&bytes).map_err(|e| file_error(&config_path, e))?;
        let tokenizer_path = find(dir, tokenizer_file)?;
        let tokenizer = load_tokenizer(&tokenizer_path)?;
        if tokenizer.get_vocab_size(true) > config.bert.vocab_size {
            return Err(file_error(
                &tokenizer_path,
                format!(
                    "{} tokens, more than the model's vocab_size {}",
                    tokenizer.get_vocab_size(true),
                    config.bert.vocab_size
                ),
            ));
        }
        let added = tokenizer
            .get_post_processor()
            .map_or(0, |p| tokenizers::PostProcessor::added_tokens(p, false));
        if added == 0 {
            // The dense vector is the first token's: it must be `<s>`.
            let reason = "no post-processor adding <s> … </s>";
            return Err(file_error(&tokenizer_path, reason));
        }
        let max_tokens = MAX_TOKENS.min(config.max_positions());
        if max_tokens <= added {
            return Err(file_error(&config_path, "too few max_position_embeddings"));
        }
        let heads = config.bert.num_attention_heads;
        if heads == 0 || !config.bert.hidden_size.is_multiple_of(heads) {
            let reason = "hidden_size is not a multiple of num_attention_heads";
            return Err(file_error(&config_path, reason));
        }
        let weights_path = find(dir, weights)?;
        let device = Device::Cpu;
        let tensors = read_tensors(&weights_path, &device)?;
        let encoder =
            Xlmr::load(tensors, &config, &device).map_err(|e| file_error(&weights_path, e))?;
        let h = config.bert.hidden_size;
        let mut specials: Vec<u32> = ["<s>", "</s>", "<pad>", "<unk>"]
            .iter()
            .filter_map(|t| tokenizer.token_to_id(t))
            .chain(
                [config.bos_token_id, config.eos_token_id]
                    .into_iter()
                    .flatten(),
            )
            .chain([config.pad_token_id])
            .collect();
        specials.sort_unstable();
        specials.dedup();
        let inner = Inner {
            encoder,
            colbert: head(dir, colbert, h, h)?,
            sparse: head(dir, sparse, h, 1)?,
            tokenizer,
            specials,
            content_tokens: max_tokens - added,
        };
        Ok(Self {
            inner: Arc::new(inner),
            // As for MiniLM, the folder name pins the model and the suffix this
            // implementation's pooling, heads and precision.
            model_id: format!("{MODEL_DIR_NAME}/candle-f32-cls-l2+sparse+colbert"),
            dims: h,
        })
    }

    /// Token ids of `text` as the model sees it (specials included, at most
    /// [`MAX_TOKENS`]).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let tokenizer = &self.inner.tokenizer;
        let tokenizer_error = |e| Error::Embedding(format!("bge-m3 tokenizer: {e}"));
        let mut encoding = tokenizer.encode(text, false).map_err(tokenizer_error)?;
        encoding.truncate(
            self.inner.content_tokens,
            0,
            tokenizers::TruncationDirection::Right,
        );
        let encoding = tokenizer
            .post_process(encoding, None, true)
            .map_err(tokenizer_error)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Encodes `texts` (blocking); `heads` adds the sparse weights and token vectors.
    fn encode_blocking(&self, texts: &[String], heads: bool) -> Result<Vec<Encoding>> {
        let ids = texts
            .iter()
            .map(|t| self.tokenize(t))
            .collect::<Result<Vec<_>>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Encoding::default(); ids.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len()
                && end - start < MAX_BATCH
                && (end + 1 - start) * ids[order[end]].len() <= TOKEN_BUDGET
            {
                end += 1;
            }
            let chunk = &order[start..end];
            let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            let encodings = self
                .inner
                .run(&batch, heads)
                .map_err(|e| Error::Embedding(format!("bge-m3: {e}")))?;
            for (&i, encoding) in chunk.iter().zip(encodings) {
                out[i] = encoding;
            }
            start = end;
        }
        Ok(out)
    }

    async fn spawn(&self, texts: &[String], heads: bool) -> Result<Vec<Encoding>> {
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.encode_blocking(&texts, heads))
            .await
            .map_err(|e| Error::Embedding(format!("embedding worker failed: {e}")))?
    }
}

impl Inner {
    /// One forward pass over a batch of token id sequences.
    fn run(&self, batch: &[Vec<u32>], heads: bool) -> candle_core::Result<Vec<Encoding>> {
        let Some(Hidden { states, .. }) = self.encoder.forward(batch)? else {
            return Ok(vec![Encoding::default(); batch.len()]);
        };
        let (b, len, _) = states.dims3()?;
        let cls = states.narrow(1, 0, 1)?.squeeze(1)?;
        let dense: Vec<Vec<f32>> = l2_normalize(&cls)?.to_vec2()?;
        if !heads {
            return Ok(dense
                .into_iter()
                .map(|dense| Encoding {
                    dense,
                    ..Encoding::default()
                })
                .collect());
        }
        let weights: Vec<Vec<f32>> = self
            .sparse
            .forward(&states)?
            .relu()?
            .squeeze(2)?
            .to_vec2()?;
        let tokens: Vec<Vec<Vec<f32>>> = if len > 1 {
            let after_cls = states.narrow(1, 1, len - 1)?.contiguous()?;
            l2_normalize(&self.colbert.forward(&after_cls)?)?.to_vec3()?
        } else {
            vec![Vec::new(); b]
        };
        Ok(dense
            .into_iter()
            .zip(weights)
            .zip(tokens)
            .zip(batch)
            .map(|(((dense, weights), mut tokens), ids)| {
                tokens.truncate(ids.len().saturating_sub(1));
                Encoding {
                    dense,
                    sparse: sparse_weights(ids, &weights, &self.specials),
                    tokens,
                }
            })
            .collect())
    }
}

/// The largest positive weight per non-special id, sorted by id (FlagEmbedding's
/// `_process_token_weights`). `weights` may run past `ids` (padding): it is cut.
fn sparse_weights(ids: &[u32], weights: &[f32], specials: &[u32]) -> Vec<(u32, f32)> {
    let mut best = std::collections::BTreeMap::new();
    for (&id, &w) in ids.iter().zip(weights) {
        if specials.binary_search(&id).is_ok() || w.is_nan() || w <= 0.0 {
            continue;
        }
        let entry = best.entry(id).or_insert(w);
        *entry = entry.max(w);
    }
    best.into_iter().collect()
}

#[async_trait]
impl EmbeddingProvider for LocalBgeM3 {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let encodings = self.spawn(texts, false).await?;
        Ok(encodings.into_iter().map(|e| e.dense).collect())
    }

    fn outputs(&self) -> Outputs {
        Outputs {
            sparse: true,
            multivector: true,
        }
    }

    async fn encode(&self, texts: &[String]) -> Result<Vec<Encoding>> {
        self.spawn(texts, true).await
    }
}
