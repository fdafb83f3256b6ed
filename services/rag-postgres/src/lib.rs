//! The PostgreSQL store of project-document RAG (docs/rag.md#storage), the cluster
//! profile's [`RagStore`]: one database holds the documents of many tenants' projects, in
//! tables of their own (`rag_files`, `rag_chunks`, `rag_vectors`, migration
//! `sql/postgres/0006_rag.sql`, applied by `lumina_journal::postgres::migrate`), apart from
//! the Memory Fabric's. A [`PgRag`] serves one tenant; every statement names the tenant and
//! the project, so tenants never meet.
//!
//! - Full text: a generated `tsvector` column (`english`: Snowball stemming, stopwords
//!   dropped) with a GIN index finds the chunks holding any query word; they are scored by
//!   BM25 as FTS5's `bm25()` computes it ([`fulltext`]). PostgreSQL's own `ts_rank` has no
//!   inverse document frequency, so it is not used.
//! - Dense: pgvector `vector`s per chunk and model, searched by exact cosine (`<=>`) over
//!   the project's rows — the same "few thousand chunks" footing as the SQLite store.
//! - Writes are plain transactions, not fenced: the index is derived from the project's
//!   files, ingestion is idempotent (content hashes), and a file's replacement locks its
//!   row first, so two instances ingesting the same project at once serialize per file.
#![warn(missing_docs)]

mod fulltext;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use lumina_rag::store::{check_chunks, check_project};
use lumina_rag::{Chunk, ChunkKey, ChunkVector, Error, FileRecord, RagStore, Result, StoredChunk};
use tokio_postgres::Row;
use tracing::instrument;

/// Maps driver errors to [`Error::Unavailable`] with what was being done. The driver's
/// messages never contain the connection URL.
trait PgResultExt<T> {
    fn pg(self, what: &str) -> Result<T>;
}

impl<T> PgResultExt<T> for std::result::Result<T, tokio_postgres::Error> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| {
            let detail = e
                .as_db_error()
                .map(|d| format!("{} ({})", d.message(), d.code().code()))
                .unwrap_or_else(|| e.to_string());
            Error::Unavailable(format!("postgres: {what}: {detail}"))
        })
    }
}

impl<T> PgResultExt<T> for std::result::Result<T, deadpool_postgres::PoolError> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| Error::Unavailable(format!("postgres: {what}: {e}")))
    }
}

fn int<T: TryInto<i64> + Copy + std::fmt::Display>(value: T, what: &str) -> Result<i64> {
    value
        .try_into()
        .map_err(|_| Error::Invalid(format!("{what} {value} is out of range")))
}

fn int32(value: u32, what: &str) -> Result<i32> {
    i32::try_from(value).map_err(|_| Error::Invalid(format!("{what} {value} is out of range")))
}

fn uint<S: Copy + std::fmt::Display, T: TryFrom<S>>(value: S, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| Error::Corrupt(format!("{what} {value} is out of range")))
}

fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A vector in pgvector's text form (`[1,2,3]`); non-finite components are refused (pgvector
/// stores neither NaN nor infinity).
fn vector_text(v: &[f32]) -> Result<String> {
    if let Some(x) = v.iter().find(|x| !x.is_finite()) {
        return Err(Error::Invalid(format!(
            "vector component {x} is not finite"
        )));
    }
    let parts: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
    Ok(format!("[{}]", parts.join(",")))
}

/// Settings of the PostgreSQL store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgRagOptions {
    /// The tenant whose projects this store reads and writes (never crossed).
    pub tenant: String,
    /// Pooled connections at most, for [`PgRag::connect`] (default 4).
    pub pool_size: usize,
    /// Connection timeout, for [`PgRag::connect`] (default 5 s).
    pub connect_timeout: Duration,
}

impl Default for PgRagOptions {
    fn default() -> Self {
        Self {
            tenant: "default".to_owned(),
            pool_size: 4,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// A [`RagStore`] over PostgreSQL for one tenant. Cheap to clone.
#[derive(Clone)]
pub struct PgRag {
    pool: Pool,
    tenant: String,
}

impl std::fmt::Debug for PgRag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRag")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl PgRag {
    /// A store over its own pool of connections to `url` (a migrated database). Connects
    /// lazily; the URL never appears in errors.
    pub fn connect(url: &str, options: PgRagOptions) -> Result<Self> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|_| Error::Invalid("postgres: invalid connection URL".into()))?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("lumina-rag");
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
        Ok(Self::from_pool(pool, &options.tenant))
    }

    /// A store over an existing pool (the cluster shares the journal's).
    pub fn from_pool(pool: Pool, tenant: &str) -> Self {
        Self {
            pool,
            tenant: tenant.to_owned(),
        }
    }

    /// The tenant this store serves.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// A connection, after checking the project id.
    async fn client(&self, project: &str) -> Result<Object> {
        check_project(project)?;
        self.pool.get().await.pg("get a connection")
    }
}

const FILE_COLUMNS: &str = "path, content_hash, format, bytes, chunks, ingested_at_ms";

fn file_record(r: &Row) -> Result<FileRecord> {
    let get = |e: tokio_postgres::Error| Error::Corrupt(format!("rag file row: {e}"));
    Ok(FileRecord {
        path: r.try_get(0).map_err(get)?,
        content_hash: r.try_get(1).map_err(get)?,
        format: r.try_get(2).map_err(get)?,
        bytes: uint::<i64, u64>(r.try_get(3).map_err(get)?, "file size")?,
        chunks: uint::<i32, u32>(r.try_get(4).map_err(get)?, "chunk count")?,
        ingested_at_ms: r.try_get(5).map_err(get)?,
    })
}

const CHUNK_COLUMNS: &str =
    "chunk_id, path, idx, start_byte, end_byte, line_start, line_end, tokens, text";

fn stored_chunk(r: &Row) -> Result<StoredChunk> {
    let get = |e: tokio_postgres::Error| Error::Corrupt(format!("rag chunk row: {e}"));
    Ok(StoredChunk {
        id: r.try_get(0).map_err(get)?,
        path: r.try_get(1).map_err(get)?,
        chunk: Chunk {
            index: uint::<i32, u32>(r.try_get(2).map_err(get)?, "chunk index")?,
            start: uint::<i64, usize>(r.try_get(3).map_err(get)?, "chunk start")?,
            end: uint::<i64, usize>(r.try_get(4).map_err(get)?, "chunk end")?,
            line_start: uint::<i32, u32>(r.try_get(5).map_err(get)?, "chunk line")?,
            line_end: uint::<i32, u32>(r.try_get(6).map_err(get)?, "chunk line")?,
            tokens: uint::<i32, u32>(r.try_get(7).map_err(get)?, "chunk tokens")?,
            text: r.try_get(8).map_err(get)?,
        },
    })
}

/// A (path, idx, score) row as a scored key.
fn scored_key(r: &Row, what: &str) -> Result<(ChunkKey, f64)> {
    let get = |e: tokio_postgres::Error| Error::Corrupt(format!("{what} row: {e}"));
    Ok((
        ChunkKey {
            path: r.try_get(0).map_err(get)?,
            index: uint::<i32, u32>(r.try_get(1).map_err(get)?, "chunk index")?,
        },
        r.try_get(2).map_err(get)?,
    ))
}

#[async_trait]
impl RagStore for PgRag {
    async fn files(&self, project: &str) -> Result<Vec<FileRecord>> {
        let c = self.client(project).await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM rag_files WHERE tenant = $1 AND project = $2 \
                     ORDER BY path"
                ),
                &[&self.tenant, &project],
            )
            .await
            .pg("list files")?;
        rows.iter().map(file_record).collect()
    }

    async fn file(&self, project: &str, path: &str) -> Result<Option<FileRecord>> {
        let c = self.client(project).await?;
        c.query_opt(
            &format!(
                "SELECT {FILE_COLUMNS} FROM rag_files \
                 WHERE tenant = $1 AND project = $2 AND path = $3"
            ),
            &[&self.tenant, &project, &path],
        )
        .await
        .pg("read file")?
        .as_ref()
        .map(file_record)
        .transpose()
    }

    #[instrument(skip_all, fields(tenant = %self.tenant, project = %project, path = %file.path, chunks = chunks.len()))]
    async fn put_file(&self, project: &str, file: &FileRecord, chunks: &[Chunk]) -> Result<()> {
        check_chunks(file, chunks)?;
        let mut idx = Vec::with_capacity(chunks.len());
        let (mut starts, mut ends) = (Vec::new(), Vec::new());
        let (mut line_starts, mut line_ends, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
        let mut texts = Vec::with_capacity(chunks.len());
        for c in chunks {
            idx.push(int32(c.index, "chunk index")?);
            starts.push(int(c.start, "chunk start")?);
            ends.push(int(c.end, "chunk end")?);
            line_starts.push(int32(c.line_start, "chunk line")?);
            line_ends.push(int32(c.line_end, "chunk line")?);
            tokens.push(int32(c.tokens, "chunk tokens")?);
            texts.push(c.text.as_str());
        }
        let mut c = self.client(project).await?;
        let tx = c.transaction().await.pg("begin put file")?;
        // The file row first: it locks the path, so concurrent replacements of one file (two
        // instances ingesting the project) take turns instead of colliding on chunk indexes.
        tx.execute(
            "INSERT INTO rag_files (tenant, project, path, content_hash, format, bytes, chunks, \
             ingested_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (tenant, project, path) DO UPDATE SET \
             content_hash = excluded.content_hash, format = excluded.format, \
             bytes = excluded.bytes, chunks = excluded.chunks, \
             ingested_at_ms = excluded.ingested_at_ms",
            &[
                &self.tenant,
                &project,
                &file.path,
                &file.content_hash,
                &file.format,
                &int(file.bytes, "file size")?,
                &int32(file.chunks, "chunk count")?,
                &file.ingested_at_ms,
            ],
        )
        .await
        .pg("write file")?;
        // Vectors go with their chunks (ON DELETE CASCADE).
        tx.execute(
            "DELETE FROM rag_chunks WHERE tenant = $1 AND project = $2 AND path = $3",
            &[&self.tenant, &project, &file.path],
        )
        .await
        .pg("delete old chunks")?;
        // One statement for all chunks.
        tx.execute(
            "INSERT INTO rag_chunks (tenant, project, path, idx, start_byte, end_byte, \
             line_start, line_end, tokens, text) \
             SELECT $1, $2, $3, * FROM unnest($4::int4[], $5::int8[], $6::int8[], \
             $7::int4[], $8::int4[], $9::int4[], $10::text[])",
            &[
                &self.tenant,
                &project,
                &file.path,
                &idx,
                &starts,
                &ends,
                &line_starts,
                &line_ends,
                &tokens,
                &texts,
            ],
        )
        .await
        .pg("write chunks")?;
        tx.commit().await.pg("commit put file")
    }

    async fn remove_file(&self, project: &str, path: &str) -> Result<bool> {
        let c = self.client(project).await?;
        // Chunks and vectors cascade.
        let removed = c
            .execute(
                "DELETE FROM rag_files WHERE tenant = $1 AND project = $2 AND path = $3",
                &[&self.tenant, &project, &path],
            )
            .await
            .pg("delete file")?;
        Ok(removed > 0)
    }

    async fn chunk(&self, project: &str, path: &str, index: u32) -> Result<Option<StoredChunk>> {
        let c = self.client(project).await?;
        let Ok(index) = i32::try_from(index) else {
            return Ok(None);
        };
        c.query_opt(
            &format!(
                "SELECT {CHUNK_COLUMNS} FROM rag_chunks \
                 WHERE tenant = $1 AND project = $2 AND path = $3 AND idx = $4"
            ),
            &[&self.tenant, &project, &path, &index],
        )
        .await
        .pg("read chunk")?
        .as_ref()
        .map(stored_chunk)
        .transpose()
    }

    async fn search_text(
        &self,
        project: &str,
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>> {
        let c = self.client(project).await?;
        fulltext::search(&**c, &self.tenant, project, terms, limit).await
    }

    async fn search_vector(
        &self,
        project: &str,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>> {
        check_project(project)?;
        if limit == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        let dims = int(query.len(), "vector dimensions")?;
        let query = vector_text(query)?;
        let c = self.client(project).await?;
        // Exact cosine over the project's vectors of this model (of the query's dimensions:
        // pgvector refuses to compare others). A zero vector's distance is NaN: similarity 0,
        // as the SQLite store scores it.
        let rows = c
            .query(
                "SELECT c.path, c.idx, \
                 COALESCE(NULLIF(1 - (v.embedding <=> $4::text::vector), 'NaN'), 0)::float8 AS s \
                 FROM rag_vectors v JOIN rag_chunks c ON c.chunk_id = v.chunk_id \
                 WHERE v.tenant = $1 AND v.project = $2 AND v.model = $3 \
                 AND vector_dims(v.embedding) = $5 \
                 ORDER BY s DESC, c.path, c.idx LIMIT $6",
                &[
                    &self.tenant,
                    &project,
                    &model,
                    &query,
                    &i32::try_from(dims).unwrap_or(i32::MAX),
                    &sql_limit(limit),
                ],
            )
            .await
            .pg("vector query")?;
        rows.iter().map(|r| scored_key(r, "vector")).collect()
    }

    async fn missing_vectors(
        &self,
        project: &str,
        model: &str,
        limit: usize,
    ) -> Result<Vec<StoredChunk>> {
        let c = self.client(project).await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {CHUNK_COLUMNS} FROM rag_chunks c \
                     WHERE c.tenant = $1 AND c.project = $2 AND NOT EXISTS \
                     (SELECT 1 FROM rag_vectors v WHERE v.chunk_id = c.chunk_id \
                      AND v.model = $3) \
                     ORDER BY path, idx LIMIT $4"
                ),
                &[&self.tenant, &project, &model, &sql_limit(limit)],
            )
            .await
            .pg("missing vectors")?;
        rows.iter().map(stored_chunk).collect()
    }

    async fn put_vectors(&self, project: &str, model: &str, vectors: &[ChunkVector]) -> Result<()> {
        let texts = vectors
            .iter()
            .map(|v| vector_text(&v.vector))
            .collect::<Result<Vec<_>>>()?;
        let ids: Vec<i64> = vectors.iter().map(|v| v.chunk_id).collect();
        let mut c = self.client(project).await?;
        let tx = c.transaction().await.pg("begin put vectors")?;
        // Only ids of this tenant's project that still exist take a vector; the rest (a file
        // re-ingested meanwhile, another project's ids) are ignored. A chunk named twice
        // takes its last vector.
        tx.execute(
            "INSERT INTO rag_vectors (chunk_id, model, tenant, project, embedding) \
             SELECT DISTINCT ON (c.chunk_id) c.chunk_id, $3, c.tenant, c.project, \
             n.embedding::vector \
             FROM unnest($4::int8[], $5::text[]) WITH ORDINALITY AS n (chunk_id, embedding, ord) \
             JOIN rag_chunks c ON c.chunk_id = n.chunk_id \
             WHERE c.tenant = $1 AND c.project = $2 \
             ORDER BY c.chunk_id, n.ord DESC \
             ON CONFLICT (chunk_id, model) DO UPDATE SET embedding = excluded.embedding",
            &[&self.tenant, &project, &model, &ids, &texts],
        )
        .await
        .pg("write vectors")?;
        tx.commit().await.pg("commit put vectors")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_pgvector_text() {
        assert_eq!(vector_text(&[1.0, -0.5, 0.25]).unwrap(), "[1,-0.5,0.25]");
        assert!(matches!(vector_text(&[f32::NAN]), Err(Error::Invalid(_))));
    }
}
