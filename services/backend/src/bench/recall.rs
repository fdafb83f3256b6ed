//! `lumina-backend bench recall`: the per-turn cost of Memory Fabric recall in a long-lived
//! project space, as the runtime pays it. The space is first filled with `rows` remembered
//! messages over `sessions` sessions (contexts) and indexed; then every turn remembers two
//! messages in one session (sessions in turn, so most land between other sessions' turns in
//! context order) and recalls with the turn's question. A recall's time includes indexing
//! the turn's two rows and bringing the space's read view up to date. With `cold`, every
//! recall goes through a newly opened store (nothing cached), so it builds its view from
//! every row: what each turn paid before views were refreshed incrementally.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use lumina_memory::{BuildLimits, MemoryStore, NewEvidence, RecallQuery, ViewLoad};
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use serde_json::{json, Value};

use super::percentiles;

const SPACE: &str = "bench-project";

/// What to measure.
pub struct RecallBench {
    /// PostgreSQL (migrated) instead of SQLite.
    pub postgres_url: Option<String>,
    /// Rows in the space before the measured turns.
    pub rows: usize,
    /// Measured turns.
    pub turns: usize,
    /// Sessions the rows and turns are spread over.
    pub sessions: usize,
    /// A newly opened store for every recall.
    pub cold: bool,
}

const WORDS: &[&str] = &[
    "deploy",
    "cluster",
    "budget",
    "report",
    "deadline",
    "invoice",
    "schema",
    "migration",
    "garden",
    "tomato",
    "violin",
    "concert",
    "train",
    "Lisbon",
    "hiking",
    "weather",
    "kitten",
    "sourdough",
    "starter",
    "sailing",
    "Croatia",
    "dentist",
    "meeting",
    "review",
    "release",
    "branch",
    "latency",
    "database",
    "index",
    "cache",
    "query",
    "vector",
    "token",
    "session",
    "project",
    "customer",
    "contract",
    "holiday",
    "birthday",
    "recipe",
    "bicycle",
    "repair",
];

/// A deterministic message: a dozen to two dozen words, some from a long tail.
fn message(seed: u64) -> String {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 33
    };
    let n = 12 + next() % 12;
    let mut words = Vec::with_capacity(n as usize);
    for i in 0..n {
        if next() % 4 == 0 {
            words.push(format!("item{}", next() % 5_000));
        } else {
            words.push(WORDS[(next() % WORDS.len() as u64) as usize].to_owned());
        }
        if i % 9 == 8 {
            words.push("and then.".to_owned());
        }
    }
    words.join(" ")
}

fn row(seq: usize, session: usize, turn: usize) -> NewEvidence {
    let context = format!(
        "session-{:08x}",
        (session as u64).wrapping_mul(2_654_435_761) % (1 << 32)
    );
    NewEvidence {
        space: SPACE.into(),
        context: context.clone(),
        session_id: context,
        actor: if seq.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        }
        .into(),
        event_time_ms: 1_700_000_000_000 + seq as i64 * 30_000,
        turn_order: turn as i64,
        text: message(seq as u64),
        source_id: format!("m{seq}"),
        source_offset: seq as i64,
    }
}

pub async fn run(b: RecallBench) -> anyhow::Result<Value> {
    ensure!(
        b.sessions > 0 && b.turns > 0,
        "--sessions and --turns must be at least 1"
    );
    let tmp = tempfile::tempdir()?;
    let tenant = format!("bench-{}", lumina_memory::now_ms());
    let open = || -> anyhow::Result<Arc<dyn MemoryStore>> {
        Ok(match &b.postgres_url {
            Some(url) => {
                let options = PgMemoryOptions {
                    tenant: tenant.clone(),
                    pool_size: 4,
                    ..PgMemoryOptions::default()
                };
                Arc::new(PgMemory::connect(url, options, None)?)
            }
            None => Arc::new(SqliteMemory::open(
                tmp.path(),
                SqliteOptions::default(),
                None,
            )?),
        })
    };
    let store = open()?;
    // Per session: the next turn order.
    let mut turns = vec![0usize; b.sessions];
    let mut seq = 0usize;
    let mut next_row = |session: usize| {
        let r = row(seq, session, turns[session]);
        seq += 1;
        turns[session] += 1;
        r
    };
    let filled = Instant::now();
    let mut batch = Vec::new();
    for i in 0..b.rows {
        batch.push(next_row(i / 2 % b.sessions));
        if batch.len() == 500 {
            store.append(std::mem::take(&mut batch)).await?;
        }
    }
    store.append(batch).await?;
    store.sync(BuildLimits::default()).await?;
    let fill_secs = filled.elapsed().as_secs_f64();
    let started = Instant::now();
    store.recall(&RecallQuery::new(SPACE, message(1))).await?;
    let first_recall = started.elapsed();

    let mut times: Vec<Duration> = Vec::with_capacity(b.turns);
    let (mut loaded, mut refreshed, mut built) = (0u64, 0usize, 0usize);
    for i in 0..b.turns {
        let session = i % b.sessions;
        let question = next_row(session);
        let text = question.text.clone();
        store.append(vec![question, next_row(session)]).await?;
        let recaller = if b.cold { open()? } else { Arc::clone(&store) };
        let t0 = Instant::now();
        let recall = recaller.recall(&RecallQuery::new(SPACE, &text)).await?;
        times.push(t0.elapsed());
        loaded += recall.stats.loaded_rows;
        match recall.stats.view {
            ViewLoad::Refreshed => refreshed += 1,
            ViewLoad::Built => built += 1,
            ViewLoad::Cached => {}
        }
    }
    let tenth = (b.turns / 10).max(1);
    let mut first = times[..tenth].to_vec();
    let mut last = times[b.turns - tenth..].to_vec();
    Ok(json!({
        "store": if b.postgres_url.is_some() { "postgres" } else { "sqlite" },
        "cold": b.cold,
        "rows_before": b.rows,
        "rows_after": seq,
        "sessions": b.sessions,
        "turns": b.turns,
        "fill_and_index_s": fill_secs,
        "first_recall_ms": first_recall.as_secs_f64() * 1000.0,
        "recall_ms": percentiles(&mut times),
        "recall_ms_first_tenth": percentiles(&mut first),
        "recall_ms_last_tenth": percentiles(&mut last),
        "views_refreshed": refreshed,
        "views_built": built,
        "loaded_rows_per_turn": loaded as f64 / b.turns as f64,
    }))
}
