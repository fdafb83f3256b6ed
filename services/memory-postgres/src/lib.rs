//! The PostgreSQL store of the Memory Fabric (docs/design.md#memory-stores, cluster): one database holds the
//! Memory Fabric of many tenants, every table keyed by (tenant, space), created by
//! migration `sql/postgres/0002_memory.sql`, (semantic nodes, conflicts, compile state)
//! `0003_memory_semantic.sql` and (model outputs, event windows, graph edges)
//! `0004_memory_vectors_extra.sql`, applied by `lumina_journal::postgres::migrate`.
//!
//! - The ledger (`memory_evidence`) is immutable (a trigger refuses UPDATE, DELETE and
//!   TRUNCATE) and carries a generated `tsvector` column with a GIN index; with each
//!   generation's window `tsvector`s (`memory_windows`) it gives the full-text candidate
//!   list, BM25F as FTS5 scores it ([`fulltext`]).
//! - Index generations, build checkpoints and the published pointer live in
//!   `memory_generations`, `memory_checkpoints` and `memory_publication`; the job is the
//!   shared one (`lumina_memory::build`: resumable, atomically published,
//!   fingerprint-versioned) over this store's [`IndexBackend`](lumina_memory::build::IndexBackend).
//! - Dense vectors are pgvector `vector`s: exact cosine (over the in-memory snapshot)
//!   while a space has fewer indexed rows than [`PgMemoryOptions::exact_threshold`]
//!   (default 50,000), an HNSW index on `embedding::vector(N)` from then on. A model's
//!   token vectors are a column beside them; its learned sparse weights are postings
//!   (`memory_sparse_postings`); the vectors of an event's spans are its event windows
//!   (`memory_event_windows`, `halfvec`).
//! - The event/context/concept graph's edges are stored per generation
//!   (`memory_edges`).
//! - Semantic nodes, citations, conflicts, resolutions and the compile job's checkpoints
//!   and failures live in `memory_nodes`, `memory_node_cites`, `memory_conflicts`,
//!   `memory_resolutions`, `memory_compile_state` and `memory_compile_failures`
//!   (`semantic`); the job is the shared one (`lumina_memory::semantic`).
//! - Every write (ledger appends, index batches, semantic batches) first locks the space's
//!   fence row and is refused with [`Error::Fenced`] when a newer writer has written, as the
//!   journal.
//!
//! Index maintenance is serialized per process (an async lock); concurrent builders in
//! several processes stay correct (idempotent upserts, fenced batches) but may duplicate
//! work.
//!
//! The read path is the shared one, over the shared read view
//! (`lumina_memory::retrieve::view`: cached per space, refreshed with the rows indexed
//! since, one load at a time): its BM25F postings are derived from the indexed ledger rows
//! with the same analysis the SQLite index stores, so both backends run one pipeline over
//! identical inputs; this store loads the rows ([`view`]).
#![warn(missing_docs)]

mod build;
mod db;
mod fulltext;
mod index;
mod ledger;
mod lock;
mod semantic;
mod view;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tracing::instrument;

pub use self::db::redact_url;
use self::db::PgResultExt;
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

/// The default number of indexed rows in a space from which dense search uses HNSW.
pub const DEFAULT_EXACT_THRESHOLD: usize = 50_000;

/// Settings of the PostgreSQL store.
#[derive(Debug, Clone, PartialEq)]
pub struct PgMemoryOptions {
    /// The tenant whose spaces this store reads and writes (never crossed).
    pub tenant: String,
    /// This writer's fence (the cluster's lease epoch): writes are refused once a larger
    /// one has written to the space.
    pub fence: u64,
    /// Spaces with fewer indexed rows search vectors exactly; from this many on, through
    /// their HNSW index. Default [`DEFAULT_EXACT_THRESHOLD`].
    pub exact_threshold: usize,
    /// Index-time options (part of the fingerprint).
    pub index: IndexOptions,
    /// Query-time options.
    pub retrieval: RetrievalOptions,
    /// Batch size of the alignment job run by queries.
    pub build: BuildLimits,
    /// Pooled connections at most (default 8).
    pub pool_size: usize,
    /// Connection timeout (default 5 s).
    pub connect_timeout: Duration,
}

impl Default for PgMemoryOptions {
    fn default() -> Self {
        Self {
            tenant: "default".to_owned(),
            fence: 0,
            exact_threshold: DEFAULT_EXACT_THRESHOLD,
            index: IndexOptions::default(),
            retrieval: RetrievalOptions::default(),
            build: BuildLimits::default(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// A [`MemoryStore`] over PostgreSQL for one tenant. Cheap to clone.
#[derive(Clone)]
pub struct PgMemory {
    inner: Arc<Inner>,
    /// Query-time only (not part of the fingerprint).
    reranker: Option<Arc<dyn Reranker>>,
}

impl std::fmt::Debug for PgMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemory")
            .field("tenant", &self.inner.options.tenant)
            .field("fingerprint", &self.inner.fingerprint)
            .finish_non_exhaustive()
    }
}

struct Inner {
    pool: Pool,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    options: PgMemoryOptions,
    fingerprint: String,
    maintenance: tokio::sync::Mutex<()>,
    compile_locks: SpaceLocks,
    /// The read views, with the full-text statistics of their rows.
    views: ViewCache<Arc<fulltext::FulltextStats>>,
}

impl PgMemory {
    /// A store over a pool of connections to `url` (a migrated database). Connects
    /// lazily; the URL's password never appears in errors.
    pub fn connect(
        url: &str,
        options: PgMemoryOptions,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Result<Self> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(|_| {
            Error::Invalid(format!(
                "postgres: invalid connection URL {}",
                redact_url(url)
            ))
        })?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("lumina-memory");
        }
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(options.connect_timeout))
            .wait_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| Error::Unavailable(format!("postgres: cannot build the pool: {e}")))?;
        Ok(Self::from_pool(pool, options, embedder))
    }

    /// A store over an existing pool.
    pub fn from_pool(
        pool: Pool,
        options: PgMemoryOptions,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Self {
        let fingerprint = config_fingerprint(&options.index, embedder.as_deref());
        let views = ViewCache::new(options.index.window, options.retrieval.clone());
        Self {
            inner: Arc::new(Inner {
                pool,
                embedder,
                options,
                fingerprint,
                maintenance: tokio::sync::Mutex::new(()),
                compile_locks: SpaceLocks::default(),
                views,
            }),
            reranker: None,
        }
    }

    /// This store with `reranker` re-scoring the best candidates of every recall
    /// ([`lumina_memory::rerank`]; query-time only, no rebuild).
    pub fn with_reranker(mut self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        self.reranker = reranker;
        self
    }

    /// The tenant this store serves.
    pub fn tenant(&self) -> &str {
        &self.inner.options.tenant
    }

    /// The configuration fingerprint this store builds.
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// Whether dense search of `space` goes through its HNSW index (the published
    /// generation has one).
    pub async fn uses_hnsw(&self, space: &str) -> Result<bool> {
        let c = self.client().await?;
        let Some((generation, _)) = index::publication(&**c, self.tenant()).await? else {
            return Ok(false);
        };
        Ok(index::hnsw_index(&**c, self.tenant(), generation, space)
            .await?
            .is_some())
    }

    async fn client(&self) -> Result<Object> {
        self.inner.pool.get().await.pg("get a connection")
    }

    fn clear_views(&self) {
        self.inner.views.clear();
    }

    /// Creates the space's HNSW index once it has `rows >= exact_threshold` indexed rows
    /// with vectors.
    async fn ensure_hnsw(&self, generation: u64, space: &str, rows: u64) -> Result<()> {
        let Some(embedder) = &self.inner.embedder else {
            return Ok(());
        };
        if rows < self.inner.options.exact_threshold as u64 {
            return Ok(());
        }
        let mut c = self.client().await?;
        if index::hnsw_index(&**c, self.tenant(), generation, space)
            .await?
            .is_none()
        {
            index::create_hnsw(&mut c, self.tenant(), generation, space, embedder.dims()).await?;
            tracing::info!(
                tenant = self.tenant(),
                space,
                rows,
                "memory HNSW index built"
            );
        }
        Ok(())
    }
}

#[async_trait]
impl MemoryStore for PgMemory {
    #[instrument(skip_all, fields(tenant = %self.tenant(), rows = batch.len()))]
    async fn append(&self, batch: Vec<NewEvidence>) -> Result<Vec<Appended>> {
        let mut c = self.client().await?;
        ledger::append(&mut c, self.tenant(), self.inner.options.fence, &batch).await
    }

    async fn read(&self, space: &str, after_event_id: u64, limit: usize) -> Result<Vec<Evidence>> {
        let c = self.client().await?;
        Ok(
            ledger::read(&**c, self.tenant(), space, after_event_id, None, limit)
                .await?
                .into_iter()
                .map(|r| r.evidence)
                .collect(),
        )
    }

    async fn get(&self, space: &str, event_ids: &[u64]) -> Result<Vec<Evidence>> {
        let c = self.client().await?;
        Ok(ledger::get(&**c, self.tenant(), space, event_ids)
            .await?
            .into_iter()
            .map(|r| r.evidence)
            .collect())
    }

    async fn head(&self, space: &str) -> Result<LedgerHead> {
        let c = self.client().await?;
        ledger::head(&**c, self.tenant(), space).await
    }

    async fn spaces(&self) -> Result<Vec<String>> {
        let c = self.client().await?;
        ledger::spaces(&**c, self.tenant()).await
    }

    async fn status(&self, space: &str) -> Result<IndexStatus> {
        lumina_memory::build::status(self, space).await
    }

    #[instrument(skip_all, fields(tenant = %self.tenant()))]
    async fn sync(&self, limits: BuildLimits) -> Result<SyncReport> {
        lumina_memory::build::sync(self, limits).await
    }

    #[instrument(skip_all, fields(tenant = %self.tenant(), space = %query.space))]
    async fn recall(&self, query: &RecallQuery) -> Result<Recall> {
        if query.space.is_empty() || query.max_items == 0 {
            return Err(Error::Invalid(
                "a recall needs a space and max_items > 0".into(),
            ));
        }
        // 1. Alignment check, the read view and the full-text candidates, while 2. the model
        // encodes the query (on its own thread: CPU-bound).
        let lexical_query = retrieve::encode(&query.text);
        let o = &self.inner.options.retrieval;
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
            let view = &loaded.view;
            let c = self.client().await?;
            let fts = retrieve::fulltext_query(&query.text, &view.snap);
            let words = fulltext::query_words(&fts);
            let fulltext = fulltext::fulltext(
                &**c,
                self.tenant(),
                &fulltext::FulltextQuery {
                    generation: view.generation,
                    space: &query.space,
                    until: view.indexed.last_event_id,
                    words: &words,
                    stats: view.extra.bm25(),
                    window_weight: f64::from(o.window_weight),
                    limit: o.candidates,
                },
            )
            .await?;
            Ok::<_, Error>((aligned, loaded, fulltext))
        };
        let ((aligned, loaded, fulltext), model) = tokio::try_join!(
            recall_lexical,
            retrieve::model_encoding(self.inner.embedder.as_deref(), &query.text),
        )?;
        let encoded = lexical_query.with_model(model);
        // 3. Dense candidates through HNSW above the threshold (exact below: in `rank`).
        let view = loaded.view;
        let mut c = self.client().await?;
        let ann = match &encoded.dense {
            Some(v) if view.indexed.rows >= self.inner.options.exact_threshold as u64 => {
                match index::hnsw_index(&**c, self.tenant(), view.generation, &query.space).await? {
                    Some(_) => Some(
                        index::nearest(
                            &mut c,
                            self.tenant(),
                            view.generation,
                            &query.space,
                            v,
                            o.candidates,
                        )
                        .await?,
                    ),
                    None => None,
                }
            }
            _ => None,
        };
        drop(c);
        let stats = RecallStats {
            generation: view.generation,
            aligned_rows: aligned.rows,
            rebuilt: aligned.rebuilt,
            view: loaded.load,
            loaded_rows: loaded.rows,
            ..RecallStats::default()
        };
        let ranked = retrieve::rank(&view.snap, &encoded, &fulltext, ann.as_deref(), o, stats);
        Ok(retrieve::conclude(&view.snap, ranked, self.reranker.as_deref(), o, query).await)
    }

    #[instrument(skip_all, fields(tenant = %self.tenant(), space = %space))]
    async fn compile(
        &self,
        space: &str,
        model: &dyn SemanticModel,
        limits: CompileLimits,
    ) -> Result<CompileReport> {
        job::compile(self, space, model, limits).await
    }

    #[instrument(skip_all, fields(tenant = %self.tenant(), space = %space))]
    async fn reset_semantic(&self, space: &str) -> Result<()> {
        let _guard = self.inner.compile_locks.lock(space).await;
        self.reset_space(space).await
    }

    async fn semantic_status(&self, space: &str) -> Result<SemanticStatus> {
        let c = self.client().await?;
        semantic::semantic_status(&**c, self.tenant(), space).await
    }

    async fn nodes(&self, space: &str) -> Result<Vec<SemanticNode>> {
        let c = self.client().await?;
        semantic::load_nodes(&**c, self.tenant(), space, NodeFilter::All).await
    }

    async fn conflicts(&self, space: &str) -> Result<Vec<Conflict>> {
        let c = self.client().await?;
        semantic::load_conflicts(&**c, self.tenant(), space).await
    }
}

#[async_trait]
impl SemanticBackend for PgMemory {
    fn compile_locks(&self) -> &SpaceLocks {
        &self.inner.compile_locks
    }

    async fn compile_state(&self, space: &str) -> Result<CompileState> {
        let c = self.client().await?;
        semantic::compile_state(&**c, self.tenant(), space).await
    }

    async fn reset_space(&self, space: &str) -> Result<()> {
        let mut c = self.client().await?;
        semantic::reset(&mut c, self.tenant(), self.inner.options.fence, space).await
    }

    async fn current_nodes(&self, space: &str, limit: usize) -> Result<Vec<SemanticNode>> {
        let c = self.client().await?;
        semantic::load_nodes(&**c, self.tenant(), space, NodeFilter::Current(limit)).await
    }

    async fn node_group(&self, space: &str, keys: &[NodeKey]) -> Result<NodeGroup> {
        let c = self.client().await?;
        semantic::node_group(&**c, self.tenant(), space, keys).await
    }

    async fn commit_batch(&self, plan: &BatchPlan) -> Result<()> {
        let mut c = self.client().await?;
        semantic::commit_batch(&mut c, self.tenant(), self.inner.options.fence, plan).await
    }

    async fn record_failure(&self, failure: &FailureDraft) -> Result<BatchFailure> {
        let mut c = self.client().await?;
        semantic::record_failure(&mut c, self.tenant(), self.inner.options.fence, failure).await
    }
}
