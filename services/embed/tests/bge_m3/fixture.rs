//! A tiny BGE-M3 checkpoint (XLM-R shaped: hidden 32, 2 layers, 4 heads, a 44-piece
//! Unigram vocabulary) with deterministic pseudo-random weights, written as the real model
//! folder is laid out.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use serde_json::json;

pub const HIDDEN: usize = 32;
const LAYERS: usize = 2;
const INTERMEDIATE: usize = 64;
pub const POSITIONS: usize = 514;
pub const PAD: u32 = 1;

/// Specials as in XLM-R (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3), then `▁`, whole words,
/// the letters, and `<mask>` last.
pub const WORDS: [&str; 12] = [
    "the", "cat", "sat", "on", "mat", "dog", "ran", "far", "a", "big", "red", "ball",
];

pub fn vocab() -> Vec<String> {
    let mut v: Vec<String> = ["<s>", "<pad>", "</s>", "<unk>", "▁"]
        .map(String::from)
        .to_vec();
    v.extend(WORDS.iter().map(|w| format!("▁{w}")));
    v.extend(('a'..='z').map(String::from));
    v.push("<mask>".into());
    v
}

/// The id of `▁word`.
pub fn id(word: &str) -> u32 {
    let piece = format!("▁{word}");
    vocab().iter().position(|p| *p == piece).unwrap() as u32
}

/// What varies between the checkpoints of a test.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tiny {
    /// Names under `roberta.` (as task checkpoints have them).
    pub prefix: bool,
    /// Fills position rows 0 and 1 (below the first real position, 2) with this value.
    pub low_positions: Option<f32>,
    /// Adds this to position row 2 (the first token's).
    pub shift_first_position: f32,
    /// A sparse head with zero weights and this bias (so every token weighs relu(bias)).
    pub sparse_bias: Option<f32>,
}

/// Uniform values in [-scale, scale) from a seed derived from `name` (xorshift64*).
fn values(name: &str, n: usize, scale: f32) -> Vec<f32> {
    let mut state = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    (0..n)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let r = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32;
            (r * 2.0 - 1.0) * scale
        })
        .collect()
}

fn tensor(name: &str, shape: &[usize], scale: f32, offset: f32) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<f32> = values(name, n, scale).iter().map(|x| x + offset).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

fn encoder(tiny: &Tiny) -> HashMap<String, Tensor> {
    let mut t = HashMap::new();
    let mut put = |name: String, shape: &[usize], scale: f32, offset: f32| {
        let value = tensor(&name, shape, scale, offset);
        t.insert(name, value);
    };
    let (h, i) = (HIDDEN, INTERMEDIATE);
    put(
        "embeddings.word_embeddings.weight".into(),
        &[vocab().len(), h],
        0.5,
        0.0,
    );
    put(
        "embeddings.token_type_embeddings.weight".into(),
        &[1, h],
        0.5,
        0.0,
    );
    put("embeddings.LayerNorm.weight".into(), &[h], 0.1, 1.0);
    put("embeddings.LayerNorm.bias".into(), &[h], 0.1, 0.0);
    // Unused by BGE-M3 (and by the encoder): present in the real checkpoint.
    put("pooler.dense.weight".into(), &[h, h], 0.3, 0.0);
    put("pooler.dense.bias".into(), &[h], 0.1, 0.0);
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}.");
        for name in ["self.query", "self.key", "self.value", "output.dense"] {
            put(format!("{p}attention.{name}.weight"), &[h, h], 0.3, 0.0);
            put(format!("{p}attention.{name}.bias"), &[h], 0.1, 0.0);
        }
        put(format!("{p}intermediate.dense.weight"), &[i, h], 0.3, 0.0);
        put(format!("{p}intermediate.dense.bias"), &[i], 0.1, 0.0);
        put(format!("{p}output.dense.weight"), &[h, i], 0.3, 0.0);
        put(format!("{p}output.dense.bias"), &[h], 0.1, 0.0);
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            put(format!("{p}{norm}.weight"), &[h], 0.1, 1.0);
            put(format!("{p}{norm}.bias"), &[h], 0.1, 0.0);
        }
    }
    let mut positions = values("embeddings.position_embeddings.weight", POSITIONS * h, 0.5);
    if let Some(value) = tiny.low_positions {
        positions[..2 * h].iter_mut().for_each(|x| *x = value);
    }
    // Alternating signs: LayerNorm would cancel a uniform shift.
    for (d, x) in positions[2 * h..3 * h].iter_mut().enumerate() {
        *x += if d % 2 == 0 { 1.0 } else { -1.0 } * tiny.shift_first_position;
    }
    let positions = Tensor::from_vec(positions, (POSITIONS, h), &Device::Cpu).unwrap();
    t.insert("embeddings.position_embeddings.weight".into(), positions);
    let prefix = if tiny.prefix { "roberta." } else { "" };
    t.into_iter()
        .map(|(k, v)| (format!("{prefix}{k}"), v))
        .collect()
}

fn head(name: &str, out: usize, bias: Option<f32>) -> HashMap<String, Tensor> {
    let (weight, bias) = match bias {
        None => (
            tensor(&format!("{name}.weight"), &[out, HIDDEN], 0.3, 0.0),
            tensor(&format!("{name}.bias"), &[out], 0.1, 0.0),
        ),
        Some(b) => (
            Tensor::zeros((out, HIDDEN), candle_core::DType::F32, &Device::Cpu).unwrap(),
            Tensor::from_vec(vec![b; out], out, &Device::Cpu).unwrap(),
        ),
    };
    HashMap::from([("weight".to_owned(), weight), ("bias".to_owned(), bias)])
}

fn config() -> serde_json::Value {
    json!({
        "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta",
        "vocab_size": vocab().len(), "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
        "num_attention_heads": 4, "intermediate_size": INTERMEDIATE, "hidden_act": "gelu",
        "max_position_embeddings": POSITIONS, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
        "pad_token_id": PAD, "bos_token_id": 0, "eos_token_id": 2,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "position_embedding_type": "absolute", "initializer_range": 0.02
    })
}

/// A Unigram tokenizer with the XLM-R post-processor (`<s> $A </s>`). Its own padding
/// (to 64) and truncation (to 6) must be ignored by the model.
fn tokenizer() -> serde_json::Value {
    let vocab: Vec<_> = vocab()
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let score = if i < 4 || p == "<mask>" {
                0.0
            } else if p.starts_with('▁') && p.len() > 3 {
                -2.0
            } else {
                -5.0
            };
            json!([p, score])
        })
        .collect();
    let added: Vec<_> = ["<s>", "<pad>", "</s>", "<unk>"]
        .iter()
        .enumerate()
        .chain([(vocab.len() - 1, &"<mask>")])
        .map(|(id, content)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": *content == "<mask>",
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let special = |t: &str| json!({"SpecialToken": {"id": t, "type_id": 0}});
    let sequence = |s: &str| json!({"Sequence": {"id": s, "type_id": 0}});
    json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 6, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"},
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("<s>"), sequence("A"), special("</s>")],
            "pair": [special("<s>"), sequence("A"), special("</s>"), special("</s>"), sequence("B"), special("</s>")],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}
            }
        },
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
        "model": {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": false}
    })
}

/// Writes the model folder into `dir` (created if needed).
pub fn write(dir: &Path, tiny: &Tiny) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config().to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer().to_string()).unwrap();
    candle_core::safetensors::save(&encoder(tiny), dir.join("model.safetensors")).unwrap();
    let colbert = head("colbert_linear", HIDDEN, None);
    candle_core::safetensors::save(&colbert, dir.join("colbert_linear.safetensors")).unwrap();
    let sparse = head("sparse_linear", 1, tiny.sparse_bias);
    candle_core::safetensors::save(&sparse, dir.join("sparse_linear.safetensors")).unwrap();
}
