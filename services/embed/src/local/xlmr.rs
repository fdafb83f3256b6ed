//! XLM-RoBERTa (BGE-M3's encoder) in candle: the BERT blocks of [`super::bert`] with
//! RoBERTa's position numbering (the first token at `padding_idx + 1`), one token type and
//! the checkpoint's LayerNorm epsilon. Weights are named as in the Hugging Face
//! `XLMRobertaModel` checkpoint (`embeddings.word_embeddings.weight`,
//! `encoder.layer.N...`), optionally under a `roberta.` prefix (as in the task models'
//! checkpoints); the pooler, if present, is not used.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::Deserialize;

use super::bert::{Bert, BertConfig, Hidden, Positions};

/// The fields of an XLM-RoBERTa `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct XlmrConfig {
    /// The BERT-shaped fields (sizes, layers, heads, epsilon).
    #[serde(flatten)]
    pub bert: BertConfig,
    /// The padding id, which also anchors the position numbering (1 in XLM-R).
    #[serde(default = "default_pad")]
    pub pad_token_id: u32,
    /// The sequence start (`<s>`, also the CLS token) id, when the config names it.
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// The sequence end (`</s>`) id, when the config names it.
    #[serde(default)]
    pub eos_token_id: Option<u32>,
}

fn default_pad() -> u32 {
    1
}

impl XlmrConfig {
    /// The longest sequence (specials included) the position table can number.
    pub fn max_positions(&self) -> usize {
        self.bert
            .max_position_embeddings
            .saturating_sub(self.pad_token_id as usize + 1)
    }
}

/// The encoder.
pub struct Xlmr {
    bert: Bert,
}

impl Xlmr {
    /// Builds the encoder from the checkpoint's tensors (any float type; computed in f32).
    pub fn load(
        tensors: HashMap<String, Tensor>,
        config: &XlmrConfig,
        device: &Device,
    ) -> candle_core::Result<Self> {
        let prefixed = tensors.contains_key("roberta.embeddings.word_embeddings.weight");
        let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
        let vb = if prefixed { vb.pp("roberta") } else { vb };
        let numbering = Positions::AfterPadding(config.pad_token_id);
        Ok(Self {
            bert: Bert::load(vb, &config.bert, numbering)?,
        })
    }

    /// The last hidden state of a batch of token id sequences (see [`Bert::forward`]).
    pub fn forward(&self, batch: &[Vec<u32>]) -> candle_core::Result<Option<Hidden>> {
        self.bert.forward(batch)
    }
}
