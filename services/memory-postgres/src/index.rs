//! Index state in PostgreSQL, per tenant: numbered generations with a published pointer,
//! per-space build checkpoints (the last ledger row and chain hash a generation covers),
//! dense vectors (pgvector) with an HNSW index per space above the exact-search
//! threshold, the model's learned sparse postings and token vectors, event windows (span
//! vectors, `halfvec`), graph edges, and the full-text window field (the query itself is in
//! `fulltext`).

use tokio_postgres::{Client, GenericClient};

use super::db::{check_fence, from_int, to_int, vector_text, PgResultExt};
use lumina_memory::embed::codec::{Quantized, VectorRow};
use lumina_memory::{now_ms, LedgerHead, Result};

/// The published (generation, fingerprint) of a tenant.
pub(crate) async fn publication(
    c: &impl GenericClient,
    tenant: &str,
) -> Result<Option<(u64, String)>> {
    let row = c
        .query_opt(
            "SELECT generation, fingerprint FROM memory_publication WHERE tenant = $1",
            &[&tenant],
        )
        .await
        .pg("read publication")?;
    row.map(|r| {
        Ok((
            from_int(r.try_get(0).pg("read publication")?, "generation")?,
            r.try_get(1).pg("read publication")?,
        ))
    })
    .transpose()
}

/// The generation being built, if any.
pub(crate) async fn building(
    c: &impl GenericClient,
    tenant: &str,
) -> Result<Option<(u64, String)>> {
    let row = c
        .query_opt(
            "SELECT generation, fingerprint FROM memory_generations \
             WHERE tenant = $1 AND state = 'building' ORDER BY generation DESC LIMIT 1",
            &[&tenant],
        )
        .await
        .pg("read building generation")?;
    row.map(|r| {
        Ok((
            from_int(r.try_get(0).pg("read generation")?, "generation")?,
            r.try_get(1).pg("read generation")?,
        ))
    })
    .transpose()
}

/// Registers a new generation for `fingerprint` and returns its number.
pub(crate) async fn create_generation(
    c: &impl GenericClient,
    tenant: &str,
    fingerprint: &str,
) -> Result<u64> {
    let g: i64 = c
        .query_one(
            "INSERT INTO memory_generations (tenant, generation, fingerprint, state, created_ms) \
             SELECT $1, COALESCE(max(generation), 0) + 1, $2, 'building', $3 \
             FROM memory_generations WHERE tenant = $1 RETURNING generation",
            &[&tenant, &fingerprint, &now_ms()],
        )
        .await
        .pg("create generation")?
        .try_get(0)
        .pg("create generation")?;
    from_int(g, "generation")
}

/// Deletes a generation's derived rows (vectors, checkpoints, HNSW indexes).
async fn clear_generation(c: &impl GenericClient, tenant: &str, g: i64) -> Result<()> {
    let names = c
        .query(
            "SELECT index_name FROM memory_hnsw WHERE tenant = $1 AND generation = $2",
            &[&tenant, &g],
        )
        .await
        .pg("list hnsw indexes")?;
    for row in names {
        let name: String = row.try_get(0).pg("read hnsw index")?;
        c.batch_execute(&format!("DROP INDEX IF EXISTS \"{name}\""))
            .await
            .pg("drop hnsw index")?;
    }
    for table in [
        "memory_hnsw",
        "memory_vectors",
        "memory_event_windows",
        "memory_edges",
        "memory_sparse_postings",
        "memory_windows",
        "memory_checkpoints",
    ] {
        c.execute(
            &format!("DELETE FROM {table} WHERE tenant = $1 AND generation = $2"),
            &[&tenant, &g],
        )
        .await
        .pg("clear generation")?;
    }
    Ok(())
}

/// Drops an unfinished generation.
pub(crate) async fn drop_generation(c: &mut Client, tenant: &str, generation: u64) -> Result<()> {
    let g = to_int(generation, "generation")?;
    let tx = c.transaction().await.pg("begin drop generation")?;
    clear_generation(&tx, tenant, g).await?;
    tx.execute(
        "DELETE FROM memory_generations WHERE tenant = $1 AND generation = $2",
        &[&tenant, &g],
    )
    .await
    .pg("drop generation")?;
    tx.commit().await.pg("commit drop generation")
}

/// Switches the published pointer to `generation` and retires (and clears) the others,
/// in one transaction.
pub(crate) async fn publish(
    c: &mut Client,
    tenant: &str,
    generation: u64,
    fingerprint: &str,
) -> Result<()> {
    let g = to_int(generation, "generation")?;
    let tx = c.transaction().await.pg("begin publish")?;
    let old = tx
        .query(
            "UPDATE memory_generations SET state = 'retired' \
             WHERE tenant = $1 AND generation <> $2 AND state <> 'retired' RETURNING generation",
            &[&tenant, &g],
        )
        .await
        .pg("retire generations")?;
    for row in old {
        clear_generation(&tx, tenant, row.try_get(0).pg("read generation")?).await?;
    }
    tx.execute(
        "UPDATE memory_generations SET state = 'published' WHERE tenant = $1 AND generation = $2",
        &[&tenant, &g],
    )
    .await
    .pg("mark published")?;
    tx.execute(
        "INSERT INTO memory_publication (tenant, generation, fingerprint) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant) DO UPDATE SET generation = excluded.generation, \
         fingerprint = excluded.fingerprint",
        &[&tenant, &g, &fingerprint],
    )
    .await
    .pg("publish")?;
    tx.commit().await.pg("commit publish")
}

/// A generation's checkpoint for a space (empty before its first batch).
pub(crate) async fn checkpoint(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
) -> Result<LedgerHead> {
    let row = c
        .query_opt(
            "SELECT last_event_id, chain, rows FROM memory_checkpoints \
             WHERE tenant = $1 AND generation = $2 AND space = $3",
            &[&tenant, &to_int(generation, "generation")?, &space],
        )
        .await
        .pg("read checkpoint")?;
    let Some(r) = row else {
        return Ok(LedgerHead::default());
    };
    Ok(LedgerHead {
        last_event_id: from_int(r.try_get(0).pg("read checkpoint")?, "event id")?,
        chain: r.try_get(1).pg("read checkpoint")?,
        rows: from_int(r.try_get(2).pg("read checkpoint")?, "rows")?,
    })
}

/// One indexed batch of a space: its rows' event ids and contexts, vectors and new
/// checkpoint.
pub(crate) struct Batch<'a> {
    pub generation: u64,
    pub space: &'a str,
    pub last: &'a LedgerHead,
    pub rows: Vec<(u64, String)>,
    /// The rows' graph edges: (event id, node key, kind).
    pub edges: Vec<(u64, String, i64)>,
    pub vectors: Vec<VectorRow>,
    /// The index window (turns on each side).
    pub window: usize,
}

/// Recomputes the full-text window of every indexed row within `window` turns of a new
/// row (in its context's order: turn order, event id), as the SQLite index does.
const REFRESH_WINDOWS: &str = "
WITH ctx AS (
    SELECT event_id, context, body,
           row_number() OVER (PARTITION BY context ORDER BY turn_order, event_id) AS rn
    FROM memory_evidence
    WHERE tenant = $1 AND space = $3 AND event_id <= $4 AND context = ANY($5)
),
fresh AS (SELECT context, rn FROM ctx WHERE event_id = ANY($6)),
affected AS (
    SELECT DISTINCT a.event_id, a.context, a.rn FROM ctx a
    JOIN fresh f ON f.context = a.context AND abs(f.rn - a.rn) <= $7
)
INSERT INTO memory_windows (tenant, generation, space, event_id, window_tsv)
SELECT $1, $2, $3, a.event_id,
       to_tsvector('english', COALESCE(string_agg(b.body, E'\n' ORDER BY b.rn), ''))
FROM affected a
LEFT JOIN ctx b ON b.context = a.context AND b.rn <> a.rn AND abs(b.rn - a.rn) <= $7
GROUP BY a.event_id
ON CONFLICT (tenant, generation, space, event_id)
DO UPDATE SET window_tsv = excluded.window_tsv";

/// Writes a batch's vectors and advances the checkpoint in one transaction, under the
/// writer's fence. Returns the space's indexed row count afterwards.
pub(crate) async fn apply_batch(
    c: &mut Client,
    tenant: &str,
    fence: u64,
    batch: Batch<'_>,
) -> Result<u64> {
    let g = to_int(batch.generation, "generation")?;
    let tx = c.transaction().await.pg("begin index batch")?;
    check_fence(&tx, tenant, batch.space, fence).await?;
    let insert = tx
        .prepare(
            "INSERT INTO memory_vectors \
             (tenant, generation, space, event_id, dims, embedding, tokens) \
             VALUES ($1, $2, $3, $4, $5, $6::text::vector, $7) ON CONFLICT DO NOTHING",
        )
        .await
        .pg("prepare vector insert")?;
    let insert_window = tx
        .prepare(
            "INSERT INTO memory_event_windows \
             (tenant, generation, space, event_id, span, embedding) \
             VALUES ($1, $2, $3, $4, $5, $6::text::halfvec) ON CONFLICT DO NOTHING",
        )
        .await
        .pg("prepare event window insert")?;
    let insert_posting = tx
        .prepare(
            "INSERT INTO memory_sparse_postings \
             (tenant, generation, space, term, event_id, weight) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .await
        .pg("prepare sparse posting insert")?;
    insert_edges(&tx, (tenant, g, batch.space), &batch.edges).await?;
    for v in &batch.vectors {
        let dims = i32::try_from(v.dense.len()).unwrap_or(i32::MAX);
        tx.execute(
            &insert,
            &[
                &tenant,
                &g,
                &batch.space,
                &to_int(v.event_id, "event id")?,
                &dims,
                &vector_text(&v.dense),
                &v.tokens.as_ref().map(Quantized::to_bytes),
            ],
        )
        .await
        .pg("insert vector")?;
        insert_sparse(&tx, &insert_posting, (tenant, g, batch.space), v).await?;
        insert_event_windows(&tx, &insert_window, (tenant, g, batch.space), v).await?;
    }
    if batch.window > 0 && !batch.rows.is_empty() {
        let mut contexts: Vec<&str> = batch.rows.iter().map(|(_, c)| c.as_str()).collect();
        contexts.sort_unstable();
        contexts.dedup();
        let ids: Vec<i64> = batch
            .rows
            .iter()
            .map(|(id, _)| to_int(*id, "event id"))
            .collect::<Result<_>>()?;
        tx.execute(
            REFRESH_WINDOWS,
            &[
                &tenant,
                &g,
                &batch.space,
                &to_int(batch.last.last_event_id, "event id")?,
                &contexts,
                &ids,
                &to_int(batch.window as u64, "window")?,
            ],
        )
        .await
        .pg("refresh windows")?;
    }
    tx.execute(
        "INSERT INTO memory_checkpoints (tenant, generation, space, last_event_id, chain, rows) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, generation, space) DO UPDATE SET \
         last_event_id = excluded.last_event_id, chain = excluded.chain, rows = excluded.rows",
        &[
            &tenant,
            &g,
            &batch.space,
            &to_int(batch.last.last_event_id, "event id")?,
            &batch.last.chain,
            &to_int(batch.last.rows, "rows")?,
        ],
    )
    .await
    .pg("advance checkpoint")?;
    tx.commit().await.pg("commit index batch")?;
    Ok(batch.last.rows)
}

/// The HNSW index of a space's vectors, if one was built.
pub(crate) async fn hnsw_index(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
) -> Result<Option<String>> {
    c.query_opt(
        "SELECT index_name FROM memory_hnsw WHERE tenant = $1 AND generation = $2 AND space = $3",
        &[&tenant, &to_int(generation, "generation")?, &space],
    )
    .await
    .pg("read hnsw index")?
    .map(|r| r.try_get(0))
    .transpose()
    .pg("read hnsw index")
}

/// Builds the HNSW index (cosine) of a space's `dims`-dimensional vectors: a partial
/// expression index on `embedding::vector(dims)` for this (tenant, generation, space).
/// The DDL is formatted by PostgreSQL itself (`format` with `%I` / `%L`), so tenant and
/// space names cannot break out of their literals.
pub(crate) async fn create_hnsw(
    c: &mut Client,
    tenant: &str,
    generation: u64,
    space: &str,
    dims: usize,
) -> Result<String> {
    let g = to_int(generation, "generation")?;
    let dims = i32::try_from(dims).unwrap_or(i32::MAX);
    let name = {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(format!("{tenant}\0{space}\0{generation}").as_bytes());
        format!("memory_hnsw_{}", &hex::encode(digest)[..20])
    };
    let tx = c.transaction().await.pg("begin create hnsw")?;
    let ddl: String = tx
        .query_one(
            "SELECT format('CREATE INDEX IF NOT EXISTS %I ON memory_vectors USING hnsw \
             ((embedding::vector(%s)) vector_cosine_ops) \
             WHERE tenant = %L AND generation = %s AND space = %L', \
             $1::text, $2::int, $3::text, $4::bigint, $5::text)",
            &[&name, &dims, &tenant, &g, &space],
        )
        .await
        .pg("format hnsw ddl")?
        .try_get(0)
        .pg("format hnsw ddl")?;
    tx.batch_execute(&ddl).await.pg("create hnsw index")?;
    tx.execute(
        "INSERT INTO memory_hnsw (tenant, generation, space, index_name) VALUES ($1, $2, $3, $4) \
         ON CONFLICT DO NOTHING",
        &[&tenant, &g, &space, &name],
    )
    .await
    .pg("record hnsw index")?;
    tx.commit().await.pg("commit create hnsw")?;
    Ok(name)
}

/// Writes an event's learned sparse weights as postings.
async fn insert_sparse(
    tx: &tokio_postgres::Transaction<'_>,
    insert: &tokio_postgres::Statement,
    (tenant, generation, space): (&str, i64, &str),
    v: &VectorRow,
) -> Result<()> {
    let Some(weights) = v.sparse.as_deref() else {
        return Ok(());
    };
    let event_id = to_int(v.event_id, "event id")?;
    for &(term, weight) in weights {
        tx.execute(
            insert,
            &[
                &tenant,
                &generation,
                &space,
                &i64::from(term),
                &event_id,
                &weight,
            ],
        )
        .await
        .pg("insert sparse posting")?;
    }
    Ok(())
}

/// Writes a batch's graph edges.
async fn insert_edges(
    tx: &tokio_postgres::Transaction<'_>,
    (tenant, generation, space): (&str, i64, &str),
    edges: &[(u64, String, i64)],
) -> Result<()> {
    let insert = tx
        .prepare(
            "INSERT INTO memory_edges (tenant, generation, space, event_id, node, kind) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .await
        .pg("prepare edge insert")?;
    for (event_id, node, kind) in edges {
        let kind = i16::try_from(*kind).unwrap_or(i16::MAX);
        tx.execute(
            &insert,
            &[
                &tenant,
                &generation,
                &space,
                &to_int(*event_id, "event id")?,
                node,
                &kind,
            ],
        )
        .await
        .pg("insert edge")?;
    }
    Ok(())
}

/// Writes an event's span vectors (`memory_event_windows`, `halfvec`).
async fn insert_event_windows(
    tx: &tokio_postgres::Transaction<'_>,
    insert: &tokio_postgres::Statement,
    (tenant, generation, space): (&str, i64, &str),
    v: &VectorRow,
) -> Result<()> {
    let Some(spans) = v.spans.as_ref().map(Quantized::vectors) else {
        return Ok(());
    };
    let event_id = to_int(v.event_id, "event id")?;
    for (i, span) in spans.iter().enumerate() {
        tx.execute(
            insert,
            &[
                &tenant,
                &generation,
                &space,
                &event_id,
                &i32::try_from(i).unwrap_or(i32::MAX),
                &vector_text(span),
            ],
        )
        .await
        .pg("insert event window")?;
    }
    Ok(())
}

/// Approximate nearest neighbours through the space's HNSW index: (event id, cosine
/// similarity), best first, at most `limit`.
pub(crate) async fn nearest(
    c: &mut Client,
    tenant: &str,
    generation: u64,
    space: &str,
    query: &[f32],
    limit: usize,
) -> Result<Vec<(u64, f32)>> {
    let dims = query.len();
    let tx = c.transaction().await.pg("begin nearest")?;
    // The index returns at most ef_search rows per scan.
    tx.batch_execute(&format!(
        "SET LOCAL hnsw.ef_search = {}",
        limit.clamp(40, 1000)
    ))
    .await
    .pg("set ef_search")?;
    let rows = tx
        .query(
            &format!(
                "SELECT event_id, 1 - (embedding::vector({dims}) <=> $4::text::vector({dims})) \
                 FROM memory_vectors WHERE tenant = $1 AND generation = $2 AND space = $3 \
                 ORDER BY embedding::vector({dims}) <=> $4::text::vector({dims}) LIMIT $5"
            ),
            &[
                &tenant,
                &to_int(generation, "generation")?,
                &space,
                &vector_text(query),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await
        .pg("nearest vectors")?;
    tx.commit().await.pg("commit nearest")?;
    rows.iter()
        .map(|r| {
            let id = from_int(r.try_get(0).pg("nearest row")?, "event id")?;
            let score: f64 = r.try_get(1).pg("nearest row")?;
            Ok((id, score as f32))
        })
        .collect()
}
