//! Local BGE-M3 (`embed::LocalBgeM3`) on a tiny generated checkpoint (no real weights here):
//! the three outputs' shapes and invariants, values against `transformers`' XLMRobertaModel
//! plus FlagEmbedding's heads, padding invariance, RoBERTa position numbering, the 512-token
//! cap, the file errors, and the selection's preference for BGE-M3 over MiniLM.

mod fixture;
mod select;

use lumina_embed::{EmbeddingProvider, Encoding, LocalBgeM3, Outputs};
use pretty_assertions::assert_eq;
use tempfile::TempDir;

use self::fixture::{id, Tiny, HIDDEN};

const TEXT: &str = "the cat sat on the mat";

fn model(tiny: Tiny) -> (TempDir, LocalBgeM3) {
    let dir = tempfile::tempdir().unwrap();
    fixture::write(dir.path(), &tiny);
    let model = LocalBgeM3::load(dir.path()).unwrap();
    (dir, model)
}

async fn encode(model: &LocalBgeM3, texts: &[&str]) -> Vec<Encoding> {
    let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    model.encode(&texts).await.unwrap()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// The largest absolute difference between two encodings of the same shape.
fn distance(a: &Encoding, b: &Encoding) -> f32 {
    assert_eq!(a.sparse.len(), b.sparse.len());
    assert_eq!(a.tokens.len(), b.tokens.len());
    let ids: Vec<u32> = a.sparse.iter().map(|e| e.0).collect();
    assert_eq!(ids, b.sparse.iter().map(|e| e.0).collect::<Vec<_>>());
    let pairs = a.dense.iter().zip(&b.dense);
    let sparse = a.sparse.iter().zip(&b.sparse).map(|(x, y)| (&x.1, &y.1));
    let tokens = a
        .tokens
        .iter()
        .zip(&b.tokens)
        .flat_map(|(x, y)| x.iter().zip(y));
    pairs
        .chain(sparse)
        .chain(tokens)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[tokio::test]
async fn gives_a_unit_dense_vector_sparse_weights_and_token_vectors() {
    let (_dir, model) = model(Tiny::default());
    assert_eq!(model.model_id(), "bge-m3/candle-f32-cls-l2+sparse+colbert");
    assert_eq!(model.dims(), HIDDEN);
    let outputs = Outputs {
        sparse: true,
        multivector: true,
    };
    assert_eq!(model.outputs(), outputs);
    // `<s> … </s>`, neither padded to 64 nor cut to 6 as the tokenizer file says.
    let ids = ["the", "cat", "sat", "on", "the", "mat"].map(id);
    assert_eq!(
        model.tokenize(TEXT).unwrap(),
        [vec![0], ids.to_vec(), vec![2]].concat()
    );

    let e = encode(&model, &[TEXT]).await.remove(0);
    assert_eq!(e.dense.len(), HIDDEN);
    assert!((norm(&e.dense) - 1.0).abs() < 1e-5);
    assert!(!e.sparse.is_empty());
    for pair in e.sparse.windows(2) {
        assert!(pair[0].0 < pair[1].0, "sorted, unique: {:?}", e.sparse);
    }
    for (token, weight) in &e.sparse {
        assert!(ids.contains(token) && *weight > 0.0, "{:?}", e.sparse);
    }
    // The real tokens after CLS, `</s>` included.
    assert_eq!(e.tokens.len(), ids.len() + 1);
    for t in &e.tokens {
        assert_eq!(t.len(), HIDDEN);
        assert!((norm(t) - 1.0).abs() < 1e-5);
    }

    let dense = model.embed(&[TEXT.to_owned()]).await.unwrap();
    assert_eq!(dense, [e.dense]);
    assert_eq!(model.encode(&[]).await.unwrap(), []);
}

#[tokio::test]
async fn sparse_weights_keep_one_entry_per_id_and_skip_specials() {
    let (_dir, model) = model(Tiny {
        sparse_bias: Some(0.25),
        ..Tiny::default()
    });
    // "7" is not in the vocabulary: `▁` then `<unk>`, which gets no weight.
    let text = "the dog the dog 7 the";
    let ids = model.tokenize(text).unwrap();
    assert!(ids.contains(&3), "{ids:?}");
    let e = encode(&model, &[text]).await.remove(0);
    let mut expected = vec![(4, 0.25), (id("the"), 0.25), (id("dog"), 0.25)];
    expected.sort_by_key(|e| e.0);
    assert_eq!(e.sparse, expected);

    let (_dir, model) = self::model(Tiny {
        sparse_bias: Some(-0.25),
        ..Tiny::default()
    });
    assert_eq!(encode(&model, &[text]).await[0].sparse, []);
}

#[tokio::test]
async fn padding_in_a_batch_changes_no_output() {
    let (_dir, model) = model(Tiny::default());
    let long = "the big red dog ran far on a mat and the cat sat on the ball ".repeat(6);
    let texts = [long.as_str(), TEXT, "a dog"];
    let batch = encode(&model, &texts).await;
    for (i, text) in texts.iter().enumerate() {
        let alone = encode(&model, &[text]).await.remove(0);
        let d = distance(&alone, &batch[i]);
        assert!(d < 1e-5, "{text:?} moved by {d} in a batch");
    }
    assert_eq!(
        batch[0].tokens.len(),
        model.tokenize(&long).unwrap().len() - 1
    );
}

#[tokio::test]
async fn positions_start_after_the_padding_id() {
    // Rows 0 and 1 (padding_idx) are never read for a real token: zero or huge, no change.
    let texts = [TEXT, "a big red ball"];
    let (_a, zero) = model(Tiny {
        low_positions: Some(0.0),
        ..Tiny::default()
    });
    let (_b, huge) = model(Tiny {
        low_positions: Some(1e3),
        ..Tiny::default()
    });
    let (zero, huge) = (encode(&zero, &texts).await, encode(&huge, &texts).await);
    for (a, b) in zero.iter().zip(&huge) {
        assert!(distance(a, b) < 1e-5);
    }
    // Row 2 is the first token's: moving it changes the outputs.
    let (_c, shifted) = model(Tiny {
        shift_first_position: 0.5,
        ..Tiny::default()
    });
    let shifted = encode(&shifted, &texts).await;
    assert!(distance(&zero[0], &shifted[0]) > 1e-3);
}

#[tokio::test]
async fn texts_are_cut_to_512_tokens_ending_with_eos() {
    let (_dir, model) = model(Tiny::default());
    let text = "the cat ".repeat(600);
    let ids = model.tokenize(&text).unwrap();
    assert_eq!(ids.len(), 512);
    assert_eq!(
        (ids[0], ids[509], ids[510], ids[511]),
        (0, id("the"), id("cat"), 2)
    );
    assert_eq!(encode(&model, &[&text]).await[0].tokens.len(), 511);
}

#[tokio::test]
async fn a_roberta_prefix_on_the_weights_is_accepted() {
    let (_a, plain) = model(Tiny::default());
    let (_b, prefixed) = model(Tiny {
        prefix: true,
        ..Tiny::default()
    });
    let (a, b) = (
        encode(&plain, &[TEXT]).await,
        encode(&prefixed, &[TEXT]).await,
    );
    assert_eq!(a, b);
}

/// Values from `transformers` 5.24 (torch 2.15, f32) on this checkpoint:
/// `XLMRobertaModel` then FlagEmbedding's BGE-M3 heads (see `write_fixture_for_reference`).
#[tokio::test]
async fn matches_transformers_on_the_tiny_checkpoint() {
    let (_dir, model) = model(Tiny::default());
    let e = encode(&model, &[TEXT]).await.remove(0);
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
    assert!(
        close(&e.dense[..4], &REFERENCE_DENSE),
        "{:?}",
        &e.dense[..4]
    );
    let sparse: Vec<f32> = e.sparse.iter().map(|s| s.1).collect();
    let ids: Vec<u32> = e.sparse.iter().map(|s| s.0).collect();
    assert_eq!(ids, REFERENCE_SPARSE_IDS);
    assert!(close(&sparse, &REFERENCE_SPARSE), "{:?}", e.sparse);
    assert!(
        close(&e.tokens[0][..4], &REFERENCE_TOKEN0),
        "{:?}",
        &e.tokens[0][..4]
    );
    let last = &e.tokens[e.tokens.len() - 1];
    assert!(close(&last[..4], &REFERENCE_EOS), "{:?}", &last[..4]);
}

const REFERENCE_DENSE: [f32; 4] = [-0.10203, -0.16208, 0.08198, -0.00309];
const REFERENCE_SPARSE_IDS: [u32; 5] = [5, 6, 7, 8, 9];
const REFERENCE_SPARSE: [f32; 5] = [1.0123, 0.28949, 0.66855, 1.41394, 1.90334];
const REFERENCE_TOKEN0: [f32; 4] = [0.232, 0.12856, 0.02123, -0.05524];
const REFERENCE_EOS: [f32; 4] = [0.18937, 0.16994, 0.05978, -0.05177];

#[test]
fn missing_or_broken_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    fixture::write(path, &Tiny::default());
    let error = || LocalBgeM3::load(path).unwrap_err().to_string();

    std::fs::remove_file(path.join("tokenizer.json")).unwrap();
    assert!(error().contains("tokenizer.json missing in"), "{}", error());
    std::fs::write(path.join("tokenizer.json"), "{").unwrap();
    assert!(error().contains("tokenizer.json:"), "{}", error());
    fixture::write(path, &Tiny::default());

    let weights = std::fs::read(path.join("model.safetensors")).unwrap();
    std::fs::write(
        path.join("model.safetensors"),
        &weights[..weights.len() / 2],
    )
    .unwrap();
    assert!(error().contains("model.safetensors:"), "{}", error());
    std::fs::remove_file(path.join("model.safetensors")).unwrap();
    assert!(
        error().contains("model.safetensors or pytorch_model.bin missing"),
        "{}",
        error()
    );
    fixture::write(path, &Tiny::default());

    std::fs::remove_file(path.join("colbert_linear.safetensors")).unwrap();
    assert!(error().contains("colbert_linear.safetensors or colbert_linear.pt missing"));
    std::fs::write(path.join("colbert_linear.pt"), "not a torch file").unwrap();
    assert!(error().contains("colbert_linear.pt:"), "{}", error());
    fixture::write(path, &Tiny::default());

    let config = std::fs::read_to_string(path.join("config.json")).unwrap();
    let config = config.replace("\"num_attention_heads\":4", "\"num_attention_heads\":0");
    std::fs::write(path.join("config.json"), config).unwrap();
    assert!(
        error().contains("config.json: hidden_size is not a multiple"),
        "{}",
        error()
    );
    std::fs::write(path.join("config.json"), "{\"hidden_size\": 32}").unwrap();
    assert!(error().contains("config.json:"), "{}", error());
}

/// Writes the checkpoint into `LUMINA_BGE_M3_FIXTURE_DIR` for the reference values, which
/// came from (`d` that folder, `ids` the tokenizer's, `h` the last hidden state):
///
/// ```text
/// model = transformers.XLMRobertaModel.from_pretrained(d).eval()
/// colbert = torch.nn.Linear(32, 32); colbert.load_state_dict(load_file(d + "/colbert_linear.safetensors"))
/// sparse = torch.nn.Linear(32, 1); sparse.load_state_dict(load_file(d + "/sparse_linear.safetensors"))
/// h = model(input_ids=torch.tensor([ids])).last_hidden_state
/// dense = F.normalize(h[:, 0], dim=-1)
/// weights = torch.relu(sparse(h)).squeeze(-1)     # max per id, ids 0-3 and weights <= 0 dropped
/// tokens = F.normalize(colbert(h[:, 1:]), dim=-1)
/// ```
#[test]
#[ignore = "writes the fixture for the reference values"]
fn write_fixture_for_reference() {
    let dir = std::env::var("LUMINA_BGE_M3_FIXTURE_DIR").unwrap();
    fixture::write(std::path::Path::new(&dir), &Tiny::default());
}

/// Prints the outputs of a BGE-M3 folder (`LUMINA_BGE_M3_DIR`: the real model, or the
/// fixture re-saved as torch files) for comparison with FlagEmbedding by hand.
#[tokio::test]
#[ignore = "needs a BGE-M3 folder in LUMINA_BGE_M3_DIR"]
async fn prints_a_bge_m3_folder() {
    let dir = std::env::var("LUMINA_BGE_M3_DIR").unwrap();
    let model = LocalBgeM3::load(std::path::Path::new(&dir)).unwrap();
    let e = encode(&model, &[TEXT]).await.remove(0);
    println!("ids {:?}", model.tokenize(TEXT).unwrap());
    println!("dense {:?} (dims {})", &e.dense[..4], e.dense.len());
    println!("sparse {:?}", e.sparse);
    let last = &e.tokens[e.tokens.len() - 1];
    println!(
        "tokens {} first {:?} last {:?}",
        e.tokens.len(),
        &e.tokens[0][..4],
        &last[..4]
    );
}
