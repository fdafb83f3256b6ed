//! Ingestion: paths (files or directories inside the project) into the store, by content
//! hash (docs/rag.md#incremental-updates).
//!
//! For each supported file: SHA-256 of its bytes; equal to the stored hash → nothing else
//! happens (no parsing, chunking, embedding or write); otherwise it is extracted, chunked
//! and its chunks replace the stored ones in one transaction. Files stored under an
//! ingested directory (or named directly) that no longer exist are removed. Directories are
//! walked `.gitignore`-aware, hidden entries skipped, symlinks not followed. With an
//! embedder, chunks without a vector of its model get one afterwards (a failure there is
//! reported and retried by the next ingestion; full text works regardless).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunk;
use crate::extract::{self, Format};
use crate::store::{ChunkVector, FileRecord};
use crate::{Error, Rag, Result};

/// A file ingestion left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The path as given or found, relative to the project root when inside it.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What one ingestion did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// The project id.
    pub project: String,
    /// Supported files looked at.
    pub files_seen: usize,
    /// Files stored for the first time.
    pub added: Vec<String>,
    /// Files whose content changed: their chunks were replaced.
    pub updated: Vec<String>,
    /// Files whose hash matched: nothing was done.
    pub unchanged: usize,
    /// Files removed from the store because they no longer exist (or no longer yield text).
    pub removed: Vec<String>,
    /// Files left out.
    pub skipped: Vec<Skipped>,
    /// Chunks written.
    pub chunks_written: usize,
    /// Vectors written.
    pub vectors_written: usize,
    /// Why vectors could not be computed (full text still works).
    pub embedding_error: Option<String>,
    /// More than `max_files` files were found; the rest were not looked at.
    pub truncated: bool,
}

/// `path` relative to `root`, `/`-separated; `None` when outside or not UTF-8.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// Whether stored path `stored` lies under the directory `dir` (`""` = the root).
fn under(dir: &str, stored: &str) -> bool {
    dir.is_empty()
        || stored
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn walk(dir: &Path) -> ignore::Walk {
    ignore::WalkBuilder::new(dir)
        .hidden(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

/// What a walk found: supported files (absolute, relative) and what it skipped.
#[derive(Default)]
struct Found {
    files: Vec<(PathBuf, String)>,
    skipped: Vec<Skipped>,
    truncated: bool,
}

impl Rag {
    /// Ingests `inputs` (paths relative to `project_root` or absolute inside it; files or
    /// directories; `"."` is the whole project). See the module docs.
    pub async fn ingest(&self, project_root: &Path, inputs: &[String]) -> Result<IngestReport> {
        if inputs.is_empty() {
            return Err(Error::Invalid(
                "give at least one path (a file or a directory; \".\" is the whole project)".into(),
            ));
        }
        let (project, root) = Self::project(project_root)?;
        let lock = self.project_lock(&project);
        let _serialized = lock.lock().await;
        let mut report = IngestReport {
            project: project.clone(),
            ..IngestReport::default()
        };
        let stored: Vec<FileRecord> = self.store.files(&project).await?;
        let mut found = Found::default();
        // Stored paths that should exist if they still do: under a walked directory, or
        // named directly.
        let mut expected: BTreeSet<String> = BTreeSet::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for input in inputs {
            let path = lumina_tools::paths::resolve(&root, input)?;
            let Some(rel) = relative(&root, &path) else {
                found.skipped.push(Skipped {
                    path: input.clone(),
                    reason: "the path is not valid UTF-8".into(),
                });
                continue;
            };
            let meta = std::fs::metadata(&path);
            match meta {
                Ok(m) if m.is_dir() => {
                    expected.extend(
                        stored
                            .iter()
                            .filter(|f| under(&rel, &f.path))
                            .map(|f| f.path.clone()),
                    );
                    self.collect(&root, &path, &mut found);
                }
                Ok(_) => {
                    expected.insert(rel.clone());
                    if Format::of(&path).is_none() {
                        found.skipped.push(Skipped {
                            path: rel,
                            reason: format!(
                                "unsupported format (supported: .{})",
                                extract::EXTENSIONS.join(" .")
                            ),
                        });
                    } else {
                        found.files.push((path, rel));
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    // Gone: whatever was stored for it (a file, or a directory's files) goes.
                    let before = expected.len();
                    expected.extend(
                        stored
                            .iter()
                            .filter(|f| f.path == rel || under(&rel, &f.path))
                            .map(|f| f.path.clone()),
                    );
                    if expected.len() == before && !stored.iter().any(|f| f.path == rel) {
                        found.skipped.push(Skipped {
                            path: rel,
                            reason: "no such file or directory".into(),
                        });
                    }
                }
                Err(source) => return Err(Error::Io { path, source }),
            }
        }
        report.truncated = found.truncated;
        report.skipped.append(&mut found.skipped);
        for (path, rel) in found.files {
            if !seen.insert(rel.clone()) {
                continue;
            }
            report.files_seen += 1;
            let previous = stored.iter().find(|f| f.path == rel);
            self.ingest_file(&project, &path, &rel, previous, &mut report)
                .await?;
        }
        // Stored files that should have been seen and were not: deleted, renamed, now
        // ignored or hidden. A truncated walk saw too little to tell, so it removes nothing.
        if !report.truncated {
            for gone in expected.difference(&seen) {
                if self.store.remove_file(&project, gone).await? {
                    report.removed.push(gone.clone());
                }
            }
        }
        if let Some(embedder) = &self.embedder {
            self.embed_missing(&project, embedder.as_ref(), &mut report)
                .await;
        }
        tracing::info!(
            project = %project,
            seen = report.files_seen,
            added = report.added.len(),
            updated = report.updated.len(),
            unchanged = report.unchanged,
            removed = report.removed.len(),
            chunks = report.chunks_written,
            "rag ingestion done"
        );
        Ok(report)
    }

    /// Supported files under `dir`, in name order.
    fn collect(&self, root: &Path, dir: &Path, found: &mut Found) {
        for entry in walk(dir) {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    found.skipped.push(Skipped {
                        path: relative(root, dir).unwrap_or_default(),
                        reason: format!("cannot walk: {err}"),
                    });
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.into_path();
            if Format::of(&path).is_none() {
                continue;
            }
            let Some(rel) = relative(root, &path) else {
                continue;
            };
            if found.files.len() >= self.options.max_files {
                found.truncated = true;
                return;
            }
            found.files.push((path, rel));
        }
    }

    /// One supported file: unchanged → nothing; else extract, chunk, replace.
    async fn ingest_file(
        &self,
        project: &str,
        path: &Path,
        rel: &str,
        previous: Option<&FileRecord>,
        report: &mut IngestReport,
    ) -> Result<()> {
        let skip = |report: &mut IngestReport, reason: String| {
            report.skipped.push(Skipped {
                path: rel.to_string(),
                reason,
            })
        };
        let size = match tokio::fs::metadata(path).await {
            Ok(m) => m.len(),
            Err(err) => {
                skip(report, format!("cannot read: {err}"));
                return Ok(());
            }
        };
        if size > self.options.max_file_bytes {
            skip(
                report,
                format!(
                    "larger than {} bytes ({size} bytes)",
                    self.options.max_file_bytes
                ),
            );
            return Ok(());
        }
        let bytes = match tokio::fs::read(path).await {
            Ok(bytes) => bytes,
            Err(err) => {
                skip(report, format!("cannot read: {err}"));
                return Ok(());
            }
        };
        let hash = hex::encode(Sha256::digest(&bytes));
        if previous.is_some_and(|p| p.content_hash == hash) {
            report.unchanged += 1;
            return Ok(());
        }
        let Some(format) = Format::of(path) else {
            return Ok(());
        };
        let options = self.options.chunk;
        let shown = rel.to_string();
        let extracted = tokio::task::spawn_blocking(move || {
            extract::extract(format, &bytes, &shown).map(|text| chunk::chunk(&text, options))
        })
        .await
        .map_err(|e| Error::Extract {
            path: rel.to_string(),
            reason: format!("the extraction task failed: {e}"),
        });
        let chunks = match extracted {
            Ok(Ok(chunks)) => chunks,
            Ok(Err(err)) | Err(err) => {
                // What was stored for an older version no longer describes the file.
                if previous.is_some() && self.store.remove_file(project, rel).await? {
                    report.removed.push(rel.to_string());
                }
                skip(report, err.to_string());
                return Ok(());
            }
        };
        let record = FileRecord {
            path: rel.to_string(),
            content_hash: hash,
            format: format.as_str().to_string(),
            bytes: size,
            chunks: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            ingested_at_ms: lumina_memory::now_ms(),
        };
        self.store.put_file(project, &record, &chunks).await?;
        report.chunks_written += chunks.len();
        if previous.is_some() {
            report.updated.push(rel.to_string());
        } else {
            report.added.push(rel.to_string());
        }
        Ok(())
    }

    /// Vectors for every chunk without one of the embedder's model, in batches.
    async fn embed_missing(
        &self,
        project: &str,
        embedder: &dyn lumina_memory::embed::EmbeddingProvider,
        report: &mut IngestReport,
    ) {
        let model = embedder.model_id().to_string();
        let batch = self.options.embed_batch.max(1);
        let mut attempted = std::collections::HashSet::new();
        loop {
            let pending = match self.store.missing_vectors(project, &model, batch).await {
                Ok(pending) => pending,
                Err(err) => {
                    report.embedding_error = Some(err.to_string());
                    return;
                }
            };
            if pending.is_empty() {
                return;
            }
            // A chunk offered twice was not stored the first time: stop rather than spin.
            if !pending.iter().all(|c| attempted.insert(c.id)) {
                report.embedding_error = Some("the store did not keep the vectors".into());
                return;
            }
            let texts: Vec<String> = pending.iter().map(|c| c.chunk.text.clone()).collect();
            let vectors = match embedder.embed(&texts).await {
                Ok(v) if v.len() == texts.len() => v,
                Ok(v) => {
                    report.embedding_error = Some(format!(
                        "the embedder returned {} vectors for {} texts",
                        v.len(),
                        texts.len()
                    ));
                    return;
                }
                Err(err) => {
                    tracing::warn!(project = %project, error = %err, "rag embeddings failed; full text only");
                    report.embedding_error = Some(err.to_string());
                    return;
                }
            };
            let rows: Vec<ChunkVector> = pending
                .iter()
                .zip(vectors)
                .map(|(c, vector)| ChunkVector {
                    chunk_id: c.id,
                    vector,
                })
                .collect();
            if let Err(err) = self.store.put_vectors(project, &model, &rows).await {
                report.embedding_error = Some(err.to_string());
                return;
            }
            report.vectors_written += rows.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_directory() {
        assert!(under("", "a.md"));
        assert!(under("docs", "docs/a.md"));
        assert!(!under("docs", "docs2/a.md"));
        assert!(!under("docs", "docs"));
    }
}
