//! `index.sqlite`: derived indexes in numbered generations (write path steps 5–6), and,
//! attached as `retrieval`, the embedding model's own file `retrieval-<model>.sqlite`.
//!
//! Every generation has its own tables (`g<N>_docs`, `g<N>_fts`, `g<N>_edges`; with a
//! model `retrieval.g<N>_vectors`). BM25F postings are not stored: the view derives them
//! from the docs' terms ([`crate::view`]). A rebuild fills a new generation
//! while queries keep reading the published one, then [`IndexDb::publish`] switches the
//! `publication` pointer in one transaction and drops the old tables. Per space,
//! `checkpoints` records the last ledger row (and its chain hash) a generation covers;
//! each batch commits together with its checkpoint, so an interrupted build resumes where
//! it stopped. A batch's vectors are committed first, in their own transaction (SQLite
//! commits the files of one WAL transaction one after the other, not atomically), and
//! written again, replacing, when a crash made the batch run twice.

use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::db::{from_sql_int, open, to_sql_int, DbResultExt};
use super::windows::refresh_windows;
use lumina_memory::build::LedgerRow;
use lumina_memory::derive::{derive, edges};
use lumina_memory::embed::codec::{sparse_bytes, Quantized, VectorRow};
use lumina_memory::{now_ms, Error, LedgerHead, Result};

const META_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS publication (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    generation  INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS generations (
    generation  INTEGER PRIMARY KEY,
    fingerprint TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('building', 'published', 'retired')),
    created_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    generation    INTEGER NOT NULL,
    space         TEXT    NOT NULL,
    last_event_id INTEGER NOT NULL,
    chain         TEXT    NOT NULL,
    rows          INTEGER NOT NULL,
    PRIMARY KEY (generation, space)
);
";

/// Full-text column weights: the event's own text, then its window.
pub(crate) const FTS_BODY_WEIGHT: f64 = 1.0;

pub(super) fn table(generation: u64, name: &str) -> String {
    format!("g{generation}_{name}")
}

fn generation_schema(g: u64) -> String {
    format!(
        "
CREATE TABLE g{g}_docs (
    event_id   INTEGER PRIMARY KEY,
    space      TEXT    NOT NULL,
    context    TEXT    NOT NULL,
    turn_order INTEGER NOT NULL,
    body       TEXT    NOT NULL,
    terms      TEXT    NOT NULL,
    body_len   INTEGER NOT NULL,
    window_len INTEGER NOT NULL
);
CREATE INDEX g{g}_docs_order ON g{g}_docs (space, context, turn_order, event_id);
CREATE VIRTUAL TABLE g{g}_fts USING fts5(
    body, window, space UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE g{g}_edges (
    space  TEXT    NOT NULL,
    src    INTEGER NOT NULL,
    dst    TEXT    NOT NULL,
    kind   INTEGER NOT NULL,
    PRIMARY KEY (space, src, dst, kind)
) WITHOUT ROWID;
"
    )
}

/// The vectors of a generation, in the attached model file.
fn vectors_schema(g: u64) -> String {
    format!(
        "
CREATE TABLE IF NOT EXISTS retrieval.g{g}_vectors (
    event_id INTEGER PRIMARY KEY,
    space    TEXT    NOT NULL,
    vector   BLOB    NOT NULL,
    sparse   BLOB,
    tokens   BLOB,
    spans    BLOB
);
"
    )
}

/// `retrieval.g<N>_vectors`.
pub(super) fn vectors_table(generation: u64) -> String {
    format!("retrieval.{}", table(generation, "vectors"))
}

/// The file name of a model's vectors: `retrieval-<model id>-<dims>.sqlite`, the id's
/// characters outside `[A-Za-z0-9._-]` replaced by `-`.
pub(crate) fn retrieval_file_name(model_id: &str, dims: usize) -> String {
    let slug: String = model_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("retrieval-{slug}-{dims}.sqlite")
}

/// The open index file.
pub(crate) struct IndexDb {
    pub(super) conn: Connection,
    /// Whether a model's `retrieval-<model>.sqlite` is attached (the store has a model).
    pub(super) vectors: bool,
}

impl IndexDb {
    /// Opens `index.sqlite` at `path`, attaching the model's vector file `retrieval` when
    /// the store has a model.
    pub fn open(path: &Path, retrieval: Option<&Path>) -> Result<Self> {
        let conn = open(path)?;
        conn.execute_batch(META_SCHEMA).db("create index schema")?;
        conn.execute_batch(super::semantic::SEMANTIC_SCHEMA)
            .db("create semantic schema")?;
        if let Some(file) = retrieval {
            let file = file
                .to_str()
                .ok_or_else(|| Error::Invalid(format!("{} is not a UTF-8 path", file.display())))?;
            conn.execute("ATTACH DATABASE ?1 AS retrieval", [file])
                .db("attach the model's vector file")?;
            conn.query_row("PRAGMA retrieval.journal_mode = WAL", [], |r| {
                r.get::<_, String>(0)
            })
            .db("enable wal on the vector file")?;
        }
        Ok(Self {
            conn,
            vectors: retrieval.is_some(),
        })
    }

    /// The published generation and its fingerprint.
    pub fn publication(&self) -> Result<Option<(u64, String)>> {
        self.conn
            .query_row(
                "SELECT generation, fingerprint FROM publication WHERE id = 1",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
            .db("read publication")?
            .map(|(g, f)| Ok((from_sql_int(g, "generation")?, f)))
            .transpose()
    }

    /// The generation being built, if any, and its fingerprint.
    pub fn building(&self) -> Result<Option<(u64, String)>> {
        self.conn
            .query_row(
                "SELECT generation, fingerprint FROM generations WHERE state = 'building' \
                 ORDER BY generation DESC LIMIT 1",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
            .db("read building generation")?
            .map(|(g, f)| Ok((from_sql_int(g, "generation")?, f)))
            .transpose()
    }

    /// Creates the tables of a new generation (numbered after every earlier one).
    pub fn create_generation(&mut self, fingerprint: &str) -> Result<u64> {
        let vectors = self.vectors;
        let tx = self.begin()?;
        let last: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(generation), 0) FROM generations",
                [],
                |r| r.get(0),
            )
            .db("read generations")?;
        let generation = from_sql_int(last, "generation")? + 1;
        tx.execute_batch(&generation_schema(generation))
            .db("create generation tables")?;
        if vectors {
            tx.execute_batch(&vectors_schema(generation))
                .db("create vector table")?;
        }
        tx.execute(
            "INSERT INTO generations (generation, fingerprint, state, created_ms) \
             VALUES (?1, ?2, 'building', ?3)",
            params![to_sql_int(generation, "generation")?, fingerprint, now_ms()],
        )
        .db("record generation")?;
        tx.commit().db("commit new generation")?;
        Ok(generation)
    }

    /// Switches the publication pointer to `generation` in one transaction, then drops the
    /// tables of every other generation.
    pub fn publish(&mut self, generation: u64, fingerprint: &str) -> Result<()> {
        let g = to_sql_int(generation, "generation")?;
        let tx = self.begin()?;
        tx.execute(
            "INSERT INTO publication (id, generation, fingerprint) VALUES (1, ?1, ?2) \
             ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, \
             fingerprint = excluded.fingerprint",
            params![g, fingerprint],
        )
        .db("switch publication")?;
        tx.execute(
            "UPDATE generations SET state = CASE WHEN generation = ?1 THEN 'published' \
             ELSE 'retired' END",
            [g],
        )
        .db("update generation states")?;
        tx.commit().db("commit publication")?;
        let retired: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare("SELECT generation FROM generations WHERE state = 'retired'")
                .db("prepare retired")?;
            let rows = stmt.query_map([], |r| r.get(0)).db("list retired")?;
            rows.collect::<rusqlite::Result<_>>().db("read retired")?
        };
        for old in retired {
            self.drop_generation(from_sql_int(old, "generation")?)?;
        }
        Ok(())
    }

    /// Drops a generation's tables and bookkeeping (an abandoned or retired build).
    pub fn drop_generation(&mut self, generation: u64) -> Result<()> {
        let g = to_sql_int(generation, "generation")?;
        let vectors = self.vectors;
        let tx = self.begin()?;
        // `postings`: generations built before postings were derived in the view had one.
        for name in ["docs", "postings", "fts", "edges"] {
            tx.execute_batch(&format!("DROP TABLE IF EXISTS {}", table(generation, name)))
                .db("drop generation table")?;
        }
        if vectors {
            tx.execute_batch(&format!(
                "DROP TABLE IF EXISTS {}",
                vectors_table(generation)
            ))
            .db("drop vector table")?;
        }
        tx.execute("DELETE FROM checkpoints WHERE generation = ?1", [g])
            .db("drop checkpoints")?;
        tx.execute("DELETE FROM generations WHERE generation = ?1", [g])
            .db("drop generation")?;
        tx.commit().db("commit drop generation")
    }

    /// The ledger position a generation covers for a space.
    pub fn checkpoint(&self, generation: u64, space: &str) -> Result<LedgerHead> {
        self.conn
            .prepare_cached(
                "SELECT last_event_id, chain, rows FROM checkpoints \
                 WHERE generation = ?1 AND space = ?2",
            )
            .db("prepare checkpoint")?
            .query_row(params![to_sql_int(generation, "generation")?, space], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .optional()
            .db("read checkpoint")?
            .map(|(id, chain, rows)| {
                Ok(LedgerHead {
                    last_event_id: from_sql_int(id, "event id")?,
                    chain,
                    rows: from_sql_int(rows, "rows")?,
                })
            })
            .unwrap_or_else(|| Ok(LedgerHead::default()))
    }

    pub(super) fn begin(&mut self) -> Result<Transaction<'_>> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("begin index transaction")
    }

    /// Writes (or, for a batch that runs again after a crash, replaces) a batch's vectors,
    /// committed before the batch itself (see the module docs).
    fn insert_vectors(
        &mut self,
        generation: u64,
        space: &str,
        vectors: &[VectorRow],
    ) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        if !self.vectors {
            return Err(Error::Invalid("vectors for a store without a model".into()));
        }
        let tx = self.begin()?;
        for v in vectors {
            let blob: Vec<u8> = v.dense.iter().flat_map(|x| x.to_le_bytes()).collect();
            tx.execute(
                &format!(
                    "INSERT OR REPLACE INTO {} (event_id, space, vector, sparse, tokens, spans) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    vectors_table(generation)
                ),
                params![
                    to_sql_int(v.event_id, "event id")?,
                    space,
                    blob,
                    v.sparse.as_deref().map(sparse_bytes),
                    v.tokens.as_ref().map(Quantized::to_bytes),
                    v.spans.as_ref().map(Quantized::to_bytes)
                ],
            )
            .db("insert vector")?;
        }
        tx.commit().db("commit vectors")
    }

    /// Indexes a batch of ledger rows of one space (in event id order, all after the
    /// generation's checkpoint) and advances the checkpoint, in one transaction.
    pub fn apply_batch(
        &mut self,
        generation: u64,
        space: &str,
        rows: &[LedgerRow],
        vectors: &[VectorRow],
        window: usize,
    ) -> Result<()> {
        let Some(last) = rows.last() else {
            return Ok(());
        };
        let before = self.checkpoint(generation, space)?;
        self.insert_vectors(generation, space, vectors)?;
        let tx = self.begin()?;
        let g = generation;
        let mut contexts = BTreeSet::new();
        for row in rows {
            let e = &row.evidence;
            let id = to_sql_int(e.event_id, "event id")?;
            let doc = derive(e);
            tx.execute(
                &format!(
                    "INSERT INTO {} (event_id, space, context, turn_order, body, terms, \
                     body_len, window_len) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)",
                    table(g, "docs")
                ),
                params![
                    id,
                    space,
                    e.row.context,
                    e.row.turn_order,
                    doc.body,
                    doc.terms.join(" "),
                    doc.terms.len() as i64
                ],
            )
            .db("insert doc")?;
            tx.execute(
                &format!(
                    "INSERT INTO {} (rowid, body, window, space) VALUES (?1, ?2, '', ?3)",
                    table(g, "fts")
                ),
                params![id, doc.body, space],
            )
            .db("insert full text")?;
            for (dst, kind) in edges(e, &doc) {
                tx.execute(
                    &format!(
                        "INSERT OR IGNORE INTO {} (space, src, dst, kind) VALUES (?1, ?2, ?3, ?4)",
                        table(g, "edges")
                    ),
                    params![space, id, dst, kind],
                )
                .db("insert edge")?;
            }
            contexts.insert((e.row.context.clone(), e.row.turn_order, id));
        }
        refresh_windows(&tx, g, space, &contexts, window)?;
        tx.execute(
            "INSERT INTO checkpoints (generation, space, last_event_id, chain, rows) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (generation, space) DO UPDATE SET \
             last_event_id = excluded.last_event_id, chain = excluded.chain, rows = excluded.rows",
            params![
                to_sql_int(g, "generation")?,
                space,
                to_sql_int(last.evidence.event_id, "event id")?,
                last.chain,
                to_sql_int(before.rows + rows.len() as u64, "rows")?
            ],
        )
        .db("advance checkpoint")?;
        tx.commit().db("commit index batch")
    }

    /// Top `limit` full-text matches of an FTS5 query in a space: (event id, score), best
    /// first, score higher-is-better (FTS5's bm25 negated).
    pub fn fulltext(
        &self,
        generation: u64,
        space: &str,
        fts_query: &str,
        window_weight: f64,
        limit: usize,
    ) -> Result<Vec<(u64, f32)>> {
        if fts_query.is_empty() {
            return Ok(Vec::new());
        }
        let fts = table(generation, "fts");
        let sql = format!(
            "SELECT rowid, bm25({fts}, {FTS_BODY_WEIGHT:.3}, {window_weight:.3}, 0.0) AS s \
             FROM {fts} WHERE {fts} MATCH ?1 AND space = ?2 ORDER BY s LIMIT ?3"
        );
        let mut stmt = self.conn.prepare_cached(&sql).db("prepare full text")?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![fts_query, space, limit], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?))
            })
            .db("full text query")?;
        rows.map(|r| {
            let (id, score) = r.db("full text row")?;
            Ok((from_sql_int(id, "event id")?, -score as f32))
        })
        .collect()
    }
}
