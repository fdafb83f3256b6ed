//! Selection with a `cache/models/bge-m3` folder: preferred over the installed MiniLM, and
//! a broken or incomplete one falls back to MiniLM (or lexical) with a warning naming it.

use std::path::Path;

use lumina_config::{MemoryEmbeddings, MemoryModels};
use lumina_embed::{self as embed, Level, Source, LOCAL_MODEL_FILES};
use pretty_assertions::assert_eq;

use super::fixture::{self, Tiny};

const MINILM: &str = "all-MiniLM-L6-v2/candle-f32-mean-l2";
const BGE_M3: &str = "bge-m3/candle-f32-cls-l2+sparse+colbert";

fn models(embeddings: MemoryEmbeddings) -> MemoryModels {
    MemoryModels {
        embeddings,
        ..MemoryModels::default()
    }
}

/// Links the real MiniLM files (see `tests/local`) into the AppRoot.
fn install_minilm(app_root: &Path) {
    let dir = embed::local_model_dir(app_root);
    std::fs::create_dir_all(&dir).unwrap();
    let source = crate::local::model_dir();
    for file in LOCAL_MODEL_FILES {
        std::os::unix::fs::symlink(source.join(file), dir.join(file)).unwrap();
    }
}

fn chosen(mode: MemoryEmbeddings, root: &Path) -> (Option<String>, Option<(Level, String)>) {
    let selection = embed::select(&models(mode), root);
    let id = selection.provider.as_ref().map(|p| p.model_id().to_owned());
    if id.is_some() {
        assert_eq!(selection.source, Source::Local);
    }
    (id, selection.message)
}

#[test]
fn a_complete_bge_m3_folder_is_preferred_over_minilm() {
    let root = tempfile::tempdir().unwrap();
    install_minilm(root.path());
    fixture::write(&embed::bge_m3_dir(root.path()), &Tiny::default());
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Local] {
        let selection = embed::select(&models(mode), root.path());
        assert_eq!(selection.source, Source::Local);
        assert_eq!(selection.message, None);
        let provider = selection.provider.unwrap();
        assert_eq!(provider.model_id(), BGE_M3);
        assert!(provider.outputs().sparse && provider.outputs().multivector);
    }
}

#[test]
fn bge_m3_alone_is_used_without_minilm() {
    let root = tempfile::tempdir().unwrap();
    fixture::write(&embed::bge_m3_dir(root.path()), &Tiny::default());
    assert_eq!(
        chosen(MemoryEmbeddings::Auto, root.path()),
        (Some(BGE_M3.to_owned()), None)
    );
}

#[test]
fn a_broken_bge_m3_falls_back_to_minilm_with_a_warning_naming_the_folder() {
    let root = tempfile::tempdir().unwrap();
    install_minilm(root.path());
    let dir = embed::bge_m3_dir(root.path());
    fixture::write(&dir, &Tiny::default());
    std::fs::write(dir.join("model.safetensors"), "truncated").unwrap();
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Local] {
        let (id, message) = chosen(mode, root.path());
        assert_eq!(id.as_deref(), Some(MINILM));
        let (level, text) = message.unwrap();
        assert_eq!(level, Level::Warn);
        assert!(
            text.contains(&format!(
                "the BGE-M3 model in {} did not load",
                dir.display()
            )) && text.contains("model.safetensors")
                && text.contains("using all-MiniLM-L6-v2 instead"),
            "{text}"
        );
    }
}

#[test]
fn an_incomplete_bge_m3_folder_is_named_and_minilm_used() {
    let root = tempfile::tempdir().unwrap();
    install_minilm(root.path());
    let dir = embed::bge_m3_dir(root.path());
    fixture::write(&dir, &Tiny::default());
    std::fs::remove_file(dir.join("sparse_linear.safetensors")).unwrap();
    let (id, message) = chosen(MemoryEmbeddings::Auto, root.path());
    assert_eq!(id.as_deref(), Some(MINILM));
    let (level, text) = message.unwrap();
    assert_eq!(level, Level::Warn);
    assert!(
        text.contains("is incomplete (sparse_linear.safetensors or sparse_linear.pt missing)"),
        "{text}"
    );
}

#[test]
fn a_broken_bge_m3_without_minilm_is_lexical_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = embed::bge_m3_dir(root.path());
    fixture::write(&dir, &Tiny::default());
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    for mode in [MemoryEmbeddings::Auto, MemoryEmbeddings::Local] {
        let (id, message) = chosen(mode, root.path());
        assert_eq!(id, None);
        let (level, text) = message.unwrap();
        assert_eq!(level, Level::Warn);
        assert!(
            text.contains("config.json") && text.contains("the local model is not installed"),
            "{text}"
        );
    }
}
