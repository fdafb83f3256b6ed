//! A BERT encoder in candle (post-LayerNorm blocks, erf GELU): the architecture of
//! all-MiniLM-L6-v2 (absolute positions) and, with RoBERTa's position numbering, of
//! XLM-RoBERTa (`xlmr`). [`Bert::forward`] gives the last hidden state; [`Bert::embed`] is
//! MiniLM's sentence vector: mean pooling over real tokens and L2 normalization, matching
//! sentence-transformers' `Transformer → Pooling → Normalize`.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden width.
    pub hidden_size: usize,
    /// Encoder blocks.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Feed-forward width.
    pub intermediate_size: usize,
    /// Positions.
    pub max_position_embeddings: usize,
    /// Segment types.
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// How tokens are numbered for the position embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// 0, 1, 2, … (BERT); padding is id 0.
    Absolute,
    /// RoBERTa's numbering around its padding id: `padding_idx + n` for the n-th token
    /// (from 1) that is not `padding_idx`, `padding_idx` for padding, so the first token is
    /// at `padding_idx + 1`.
    AfterPadding(u32),
}

/// The last hidden state of a padded batch.
pub struct Hidden {
    /// `[batch, len, hidden]`, right-padded to the longest sequence.
    pub states: Tensor,
    /// `[batch, len]`: 1 for real tokens, 0 for padding (f32).
    pub mask: Tensor,
}

/// The encoder.
pub struct Bert {
    words: Embedding,
    positions: Embedding,
    types: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    numbering: Positions,
    device: Device,
}

impl Bert {
    /// Builds the encoder from weights named as in the Hugging Face checkpoint, numbering
    /// positions as `numbering` says.
    pub fn load(vb: VarBuilder, c: &BertConfig, numbering: Positions) -> candle_core::Result<Self> {
        let h = c.hidden_size;
        if c.num_attention_heads == 0 || !h.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!("hidden_size {h} is not a multiple of num_attention_heads");
        }
        let e = vb.pp("embeddings");
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let a = l.pp("attention");
                Ok(Layer {
                    query: linear(h, h, a.pp("self.query"))?,
                    key: linear(h, h, a.pp("self.key"))?,
                    value: linear(h, h, a.pp("self.value"))?,
                    attention_out: linear(h, h, a.pp("output.dense"))?,
                    attention_norm: layer_norm(h, c.layer_norm_eps, a.pp("output.LayerNorm"))?,
                    intermediate: linear(h, c.intermediate_size, l.pp("intermediate.dense"))?,
                    output: linear(c.intermediate_size, h, l.pp("output.dense"))?,
                    output_norm: layer_norm(h, c.layer_norm_eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Self {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            types: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: layer_norm(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            heads: c.num_attention_heads,
            head_dim: h / c.num_attention_heads,
            numbering,
            device: vb.device().clone(),
        })
    }

    /// Sentence vectors of a batch of token id sequences (padded here): mean of the last
    /// hidden states over real tokens, L2-normalized. Returns `[batch, hidden]`.
    pub fn embed(&self, batch: &[Vec<u32>]) -> candle_core::Result<Vec<Vec<f32>>> {
        let Some(Hidden { states, mask }) = self.forward(batch)? else {
            return Ok(vec![Vec::new(); batch.len()]);
        };
        let summed = states.broadcast_mul(&mask.unsqueeze(2)?)?.sum(1)?;
        let counts = mask.sum_keepdim(1)?.clamp(1e-9, f64::MAX)?;
        l2_normalize(&summed.broadcast_div(&counts)?)?.to_vec2()
    }

    /// The last hidden state of a batch of token id sequences (right-padded here; padding
    /// changes no real token's state). `None` when the batch or every sequence is empty.
    pub fn forward(&self, batch: &[Vec<u32>]) -> candle_core::Result<Option<Hidden>> {
        let (b, len) = (batch.len(), batch.iter().map(Vec::len).max().unwrap_or(0));
        if b == 0 || len == 0 {
            return Ok(None);
        }
        let pad = match self.numbering {
            Positions::Absolute => 0,
            Positions::AfterPadding(padding_idx) => padding_idx,
        };
        let mut ids = vec![pad; b * len];
        let mut mask = vec![0f32; b * len];
        let mut positions = Vec::with_capacity(b * len);
        for (i, seq) in batch.iter().enumerate() {
            ids[i * len..i * len + seq.len()].copy_from_slice(seq);
            mask[i * len..i * len + seq.len()]
                .iter_mut()
                .for_each(|m| *m = 1.0);
            positions.extend(self.position_ids(&ids[i * len..(i + 1) * len]));
        }
        let ids = Tensor::from_vec(ids, (b, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (b, len), &self.device)?;
        let positions = Tensor::from_vec(positions, (b, len), &self.device)?;
        let types = Tensor::zeros((b, len), DType::U32, &self.device)?;
        let x = (self.words.forward(&ids)?
            + self.positions.forward(&positions)?
            + self.types.forward(&types)?)?;
        let mut x = self.norm.forward(&x)?;
        // Padding gets a large negative attention bias so softmax ignores it.
        let bias = ((mask.clone() - 1.0)? * 1e4)?.reshape((b, 1, 1, len))?;
        for layer in &self.layers {
            x = self.block(layer, &x, &bias, b, len)?;
        }
        Ok(Some(Hidden { states: x, mask }))
    }

    /// Position ids of one padded row (as `transformers` computes them from the ids).
    fn position_ids(&self, row: &[u32]) -> Vec<u32> {
        match self.numbering {
            Positions::Absolute => (0..row.len() as u32).collect(),
            Positions::AfterPadding(padding_idx) => {
                let mut seen = 0;
                row.iter()
                    .map(|&id| {
                        if id == padding_idx {
                            padding_idx
                        } else {
                            seen += 1;
                            padding_idx + seen
                        }
                    })
                    .collect()
            }
        }
    }

    fn block(
        &self,
        l: &Layer,
        x: &Tensor,
        bias: &Tensor,
        b: usize,
        len: usize,
    ) -> candle_core::Result<Tensor> {
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((b, len, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(l.query.forward(x)?)?;
        let k = split(l.key.forward(x)?)?;
        let v = split(l.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context =
            probs
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((b, len, self.heads * self.head_dim))?;
        let attended = l
            .attention_norm
            .forward(&(l.attention_out.forward(&context)? + x)?)?;
        let hidden = l.intermediate.forward(&attended)?.gelu_erf()?;
        l.output_norm
            .forward(&(l.output.forward(&hidden)? + &attended)?)
    }
}

/// `x / max(‖x‖, 1e-12)` along the last dimension (torch's `F.normalize`).
pub fn l2_normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let norm = x
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12, f64::MAX)?;
    x.broadcast_div(&norm)
}
