//! The local SQLite store of the Memory Fabric (docs/design.md#memory-stores):
//! `<AppRoot>/data/memory/fabric/ledger.sqlite` (evidence), `index.sqlite` (derived indexes
//! in generations, and the semantic nodes, conflicts and compile state of `semantic`) and,
//! with an embedding model, `retrieval-<model>.sqlite` (that model's vectors per
//! generation, attached to the index connection). One connection per file (the index's with
//! the model file attached) behind a mutex; all SQLite work runs on tokio's blocking pool.
//! Index maintenance (catch-up and rebuilds, the core's job `lumina_memory::build` over this
//! store's [`IndexBackend`](lumina_memory::build::IndexBackend)) is serialized by an async
//! lock; queries that find the index aligned never take it. The read path is the shared
//! one, over the shared read view (`lumina_memory::retrieve::view`: cached per space,
//! refreshed with the rows indexed since, one load at a time); this store loads the rows
//! ([`view`]).
#![warn(missing_docs)]

mod build;
mod db;
mod index;
mod ledger;
mod semantic;
mod view;
mod windows;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tracing::instrument;

use self::index::IndexDb;
use self::ledger::LedgerDb;
use lumina_memory::derive::{config_fingerprint, IndexOptions};
use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::rerank::Reranker;
use lumina_memory::retrieve::view::ViewCache;
use lumina_memory::retrieve::{self, RetrievalOptions};
use lumina_memory::semantic::job::{
    self, CompileState, FailureDraft, NodeFilter, SemanticBackend, SpaceLocks,
};
use lumina_memory::semantic::plan::{BatchPlan, NodeGroup};
use lumina_memory::semantic::{BatchFailure, NodeKey};
use lumina_memory::{
    Appended, BuildLimits, CompileLimits, CompileReport, Conflict, Error, Evidence, IndexStatus,
    LedgerHead, MemoryStore, NewEvidence, Recall, RecallQuery, RecallStats, Result, SemanticModel,
    SemanticNode, SemanticStatus, SyncReport,
};

/// Settings of the SQLite store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SqliteOptions {
    /// Index-time options (part of the fingerprint).
    pub index: IndexOptions,
    /// Query-time options.
    pub retrieval: RetrievalOptions,
    /// Batch size of the alignment job run by queries.
    pub build: BuildLimits,
}

/// A [`MemoryStore`] over two SQLite files. Cheap to clone.
#[derive(Clone)]
pub struct SqliteMemory {
    inner: Arc<Inner>,
    /// Query-time only (not part of the fingerprint).
    reranker: Option<Arc<dyn Reranker>>,
}

impl std::fmt::Debug for SqliteMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteMemory")
            .field("dir", &self.inner.dir)
            .field("fingerprint", &self.inner.fingerprint)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    dir: PathBuf,
    ledger: Mutex<LedgerDb>,
    index: Mutex<IndexDb>,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    options: SqliteOptions,
    fingerprint: String,
    maintenance: tokio::sync::Mutex<()>,
    compile_locks: SpaceLocks,
    /// The read views.
    views: ViewCache<()>,
}

/// A panic while a connection was locked leaves nothing half-done (an open transaction
/// rolls back when it drops), so poisoned locks are taken over.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn ledger(&self) -> MutexGuard<'_, LedgerDb> {
        lock(&self.ledger)
    }

    fn index(&self) -> MutexGuard<'_, IndexDb> {
        lock(&self.index)
    }
}

impl SqliteMemory {
    /// The folder of the store's files under an AppRoot: `<root>/data/memory/fabric`.
    pub fn fabric_dir(app_root: &Path) -> PathBuf {
        app_root.join("data").join("memory").join("fabric")
    }

    /// Opens (creating when missing) the store under `app_root`. `embedder` adds dense
    /// vectors; its model id and dimensions become part of the fingerprint.
    pub fn open(
        app_root: &Path,
        options: SqliteOptions,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Result<Self> {
        let dir = Self::fabric_dir(app_root);
        std::fs::create_dir_all(&dir)?;
        let ledger = LedgerDb::open(&dir.join("ledger.sqlite"))?;
        let retrieval = embedder
            .as_ref()
            .map(|e| dir.join(index::retrieval_file_name(e.model_id(), e.dims())));
        let index = IndexDb::open(&dir.join("index.sqlite"), retrieval.as_deref())?;
        let fingerprint = config_fingerprint(&options.index, embedder.as_deref());
        let views = ViewCache::new(options.index.window, options.retrieval.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                ledger: Mutex::new(ledger),
                index: Mutex::new(index),
                embedder,
                options,
                fingerprint,
                maintenance: tokio::sync::Mutex::new(()),
                compile_locks: SpaceLocks::default(),
                views,
            }),
            reranker: None,
        })
    }

    /// This store with `reranker` re-scoring the best candidates of every recall
    /// ([`lumina_memory::rerank`]; query-time only, no rebuild).
    pub fn with_reranker(mut self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        self.reranker = reranker;
        self
    }

    /// Whether dense vectors are built (an embedding provider is configured).
    pub fn has_embedder(&self) -> bool {
        self.inner.embedder.is_some()
    }

    /// The ledger file.
    pub fn ledger_path(&self) -> PathBuf {
        self.inner.dir.join("ledger.sqlite")
    }

    /// The index file.
    pub fn index_path(&self) -> PathBuf {
        self.inner.dir.join("index.sqlite")
    }

    /// The model's vector file (`retrieval-<model>.sqlite`), when the store has a model.
    pub fn retrieval_path(&self) -> Option<PathBuf> {
        self.inner.embedder.as_ref().map(|e| {
            self.inner
                .dir
                .join(index::retrieval_file_name(e.model_id(), e.dims()))
        })
    }

    /// The configuration fingerprint this store builds.
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    async fn blocking<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|e| Error::Unavailable(format!("memory worker failed: {e}")))?
    }
}

#[async_trait]
impl MemoryStore for SqliteMemory {
    #[instrument(skip_all, fields(rows = batch.len()))]
    async fn append(&self, batch: Vec<NewEvidence>) -> Result<Vec<Appended>> {
        self.blocking(move |inner| inner.ledger().append(&batch))
            .await
    }

    async fn read(&self, space: &str, after_event_id: u64, limit: usize) -> Result<Vec<Evidence>> {
        let space = space.to_owned();
        self.blocking(move |inner| {
            Ok(inner
                .ledger()
                .read(&space, after_event_id, limit)?
                .into_iter()
                .map(|r| r.evidence)
                .collect())
        })
        .await
    }

    async fn get(&self, space: &str, event_ids: &[u64]) -> Result<Vec<Evidence>> {
        let (space, ids) = (space.to_owned(), event_ids.to_vec());
        self.blocking(move |inner| {
            Ok(inner
                .ledger()
                .get(&space, &ids)?
                .into_iter()
                .map(|r| r.evidence)
                .collect())
        })
        .await
    }

    async fn head(&self, space: &str) -> Result<LedgerHead> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.ledger().head(&space))
            .await
    }

    async fn spaces(&self) -> Result<Vec<String>> {
        self.blocking(|inner| inner.ledger().spaces()).await
    }

    async fn status(&self, space: &str) -> Result<IndexStatus> {
        lumina_memory::build::status(self, space).await
    }

    #[instrument(skip_all)]
    async fn sync(&self, limits: BuildLimits) -> Result<SyncReport> {
        lumina_memory::build::sync(self, limits).await
    }

    #[instrument(skip_all, fields(space = %query.space))]
    async fn recall(&self, query: &RecallQuery) -> Result<Recall> {
        if query.space.is_empty() || query.max_items == 0 {
            return Err(Error::Invalid(
                "a recall needs a space and max_items > 0".into(),
            ));
        }
        // 1. Alignment check (catches up or rebuilds when needed), the read view and the
        // full-text candidates, while 2. the model encodes the query (both CPU-bound, on
        // their own threads).
        let lexical_query = retrieve::encode(&query.text);
        let text = query.text.clone();
        let space = query.space.clone();
        let recall_lexical = async {
            let aligned = lumina_memory::build::align(self, &query.space).await?;
            let loaded = self
                .inner
                .views
                .view(
                    &view::Source(self),
                    &query.space,
                    aligned.generation,
                    &aligned.indexed,
                )
                .await?;
            let generation = loaded.view.generation;
            let fts = retrieve::fulltext_query(&text, &loaded.view.snap);
            let fulltext = self
                .blocking(move |inner| {
                    let o = &inner.options.retrieval;
                    inner.index().fulltext(
                        generation,
                        &space,
                        &fts,
                        f64::from(o.window_weight),
                        o.candidates,
                    )
                })
                .await?;
            Ok::<_, Error>((aligned, loaded, fulltext))
        };
        let ((aligned, loaded, fulltext), model) = tokio::try_join!(
            recall_lexical,
            retrieve::model_encoding(self.inner.embedder.as_deref(), &query.text),
        )?;
        let encoded = lexical_query.with_model(model);
        let snap = loaded.view.snap;
        let stats = RecallStats {
            generation: loaded.view.generation,
            aligned_rows: aligned.rows,
            rebuilt: aligned.rebuilt,
            view: loaded.load,
            loaded_rows: loaded.rows,
            ..RecallStats::default()
        };
        // 3. Candidate recall through span scoring (`rank`), on a blocking thread.
        let view = Arc::clone(&snap);
        let ranked = self
            .blocking(move |inner| {
                let o = &inner.options.retrieval;
                Ok(retrieve::rank(&view, &encoded, &fulltext, None, o, stats))
            })
            .await?;
        Ok(retrieve::conclude(
            &snap,
            ranked,
            self.reranker.as_deref(),
            &self.inner.options.retrieval,
            query,
        )
        .await)
    }

    #[instrument(skip_all, fields(space = %space))]
    async fn compile(
        &self,
        space: &str,
        model: &dyn SemanticModel,
        limits: CompileLimits,
    ) -> Result<CompileReport> {
        job::compile(self, space, model, limits).await
    }

    #[instrument(skip_all, fields(space = %space))]
    async fn reset_semantic(&self, space: &str) -> Result<()> {
        let _guard = self.inner.compile_locks.lock(space).await;
        self.reset_space(space).await
    }

    async fn semantic_status(&self, space: &str) -> Result<SemanticStatus> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().semantic_status(&space))
            .await
    }

    async fn nodes(&self, space: &str) -> Result<Vec<SemanticNode>> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().load_nodes(&space, NodeFilter::All))
            .await
    }

    async fn conflicts(&self, space: &str) -> Result<Vec<Conflict>> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().load_conflicts(&space))
            .await
    }
}

#[async_trait]
impl SemanticBackend for SqliteMemory {
    fn compile_locks(&self) -> &SpaceLocks {
        &self.inner.compile_locks
    }

    async fn compile_state(&self, space: &str) -> Result<CompileState> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().compile_state(&space))
            .await
    }

    async fn reset_space(&self, space: &str) -> Result<()> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().reset_semantic(&space))
            .await
    }

    async fn current_nodes(&self, space: &str, limit: usize) -> Result<Vec<SemanticNode>> {
        let space = space.to_owned();
        self.blocking(move |inner| inner.index().load_nodes(&space, NodeFilter::Current(limit)))
            .await
    }

    async fn node_group(&self, space: &str, keys: &[NodeKey]) -> Result<NodeGroup> {
        let (space, keys) = (space.to_owned(), keys.to_vec());
        self.blocking(move |inner| inner.index().node_group(&space, &keys))
            .await
    }

    async fn commit_batch(&self, plan: &BatchPlan) -> Result<()> {
        let plan = plan.clone();
        self.blocking(move |inner| inner.index().commit_batch(&plan))
            .await
    }

    async fn record_failure(&self, failure: &FailureDraft) -> Result<BatchFailure> {
        let failure = failure.clone();
        self.blocking(move |inner| inner.index().record_failure(&failure))
            .await
    }
}
