//! `lumina-backend bench …`: the measurements behind `docs/benchmarks.md`. Benchmarks are
//! commands, not tests: nothing here gates CI.

pub mod a2a;
pub mod conversation;
pub mod locomo;
pub mod rag;
pub mod recall;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use lumina_client::{Client, Notification};
use lumina_config::{AppRoot, Env};
use lumina_journal::sqlite::SqliteJournal;
use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::{Event, WS_PATH};

use crate::local::{self, LocalOptions};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// SQLite journal: single append, batched append and replay throughput.
    Journal {
        #[arg(long, default_value_t = 100_000)]
        events: usize,
        #[arg(long, default_value_t = 100)]
        batch: usize,
        #[arg(long, default_value_t = 200)]
        payload_bytes: usize,
        /// Directory for the database (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Measure the fenced PostgreSQL journal at this URL instead of SQLite (the schema
        /// is migrated first).
        #[arg(long)]
        postgres_url: Option<String>,
    },
    /// Memory Fabric retrieval on LoCoMo: R@k, recall_any@k, latency, ingestion.
    Memory {
        /// Dataset format (only `locomo`).
        #[arg(long, default_value = "locomo")]
        dataset: String,
        /// The conversations (`locomo-*.json`).
        #[arg(long)]
        data: PathBuf,
        /// The question relevance file (`locomo-*.qrels.jsonl`).
        #[arg(long)]
        qrels: PathBuf,
        /// Memory store: `sqlite`, or `postgres` (needs --postgres-url).
        #[arg(long, default_value = "sqlite")]
        store: String,
        /// PostgreSQL (with pgvector) for `--store postgres`; the schema is migrated first.
        #[arg(long)]
        postgres_url: Option<String>,
        /// `--store postgres`: spaces with this many indexed rows or more search their
        /// vectors through an HNSW index instead of exactly (default 50,000, the product's).
        #[arg(long)]
        exact_threshold: Option<usize>,
        /// Cut-offs, comma-separated.
        #[arg(long, default_value = "1,5,10,25,50")]
        k: String,
        /// Also write the report as JSON here.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Embeddings: `auto` (the product's selection: the remote model when
        /// memory_bge_base_url is set, else the installed local model, else none), `local`,
        /// `remote` or `none`. Default: the settings' `memory_embeddings` (`auto`). A
        /// reranker configured in settings.json is used as in the product.
        #[arg(long)]
        embeddings: Option<String>,
        /// The AppRoot whose settings and installed model are used (default: $LUMINA_HOME
        /// or ~/.lumina). The benchmark's own store is always a temporary one.
        #[arg(long)]
        app_root: Option<PathBuf>,
    },
    /// Memory Fabric recall per turn in a long-lived project space (SQLite, or PostgreSQL
    /// with --postgres-url): each turn remembers two messages and recalls.
    Recall {
        /// Remembered messages in the space before the measured turns.
        #[arg(long, default_value_t = 5_000)]
        rows: usize,
        /// Measured turns (two messages each).
        #[arg(long, default_value_t = 200)]
        turns: usize,
        /// Sessions the messages are spread over.
        #[arg(long, default_value_t = 50)]
        sessions: usize,
        /// PostgreSQL (with pgvector) instead of SQLite; the schema is migrated first.
        #[arg(long)]
        postgres_url: Option<String>,
        /// Open a new store for every recall, so each builds its read view from every row
        /// (the cost of a turn before incremental refresh).
        #[arg(long)]
        cold: bool,
    },
    /// The Conversation API over HTTP: first-chunk latency through execute/stream and
    /// `/messages` page latency in a long conversation (a local backend in-process; the
    /// model at --model-url, e.g. `lumina-scripted-model`).
    Conversation {
        /// The model endpoint (Anthropic Messages format).
        #[arg(long)]
        model_url: String,
        /// Streamed turns measured for the first chunk.
        #[arg(long, default_value_t = 200)]
        streams: usize,
        /// Messages in the paged conversation (built through execute/sync, two per turn).
        #[arg(long, default_value_t = 10_000)]
        messages: usize,
        /// Page sizes to walk the conversation with, comma-separated.
        #[arg(long, default_value = "50,200")]
        page_sizes: String,
    },
    /// The A2A endpoint over HTTP: SendStreamingMessage → first streamed event and status
    /// latency, and GetTask throughput (a local backend in-process; the model at
    /// --model-url, e.g. `lumina-scripted-model`).
    A2a {
        /// The model endpoint (Anthropic Messages format).
        #[arg(long)]
        model_url: String,
        /// Streamed messages (each a new context), one after another.
        #[arg(long, default_value_t = 200)]
        messages: usize,
        /// GetTask requests in all, over the tasks the messages created.
        #[arg(long, default_value_t = 20_000)]
        gets: usize,
        /// Concurrent GetTask clients.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// historyLength of each GetTask.
        #[arg(long, default_value_t = 10)]
        history_length: u32,
    },
    /// Project-document RAG on the generated corpus (every format, known answers):
    /// recall@k of full text and of full text + embeddings, ingestion and search timing.
    Rag {
        /// Corpus size: 10 documents and 20 questions per unit.
        #[arg(long, default_value_t = 5)]
        scale: usize,
        /// Cut-offs, comma-separated (at most 20).
        #[arg(long, default_value = "1,5,10")]
        k: String,
        /// Embeddings for the fused run: `auto`, `local`, `remote` or `none` as for
        /// `bench memory` (the product's selection from the AppRoot's settings), or `hash`
        /// (the model-free feature-hashing stand-in, 256 dimensions).
        #[arg(long, default_value = "auto")]
        embeddings: String,
        /// The AppRoot whose settings and installed model are used (default: $LUMINA_HOME
        /// or ~/.lumina). The benchmark's own store is always a temporary one.
        #[arg(long)]
        app_root: Option<PathBuf>,
        /// Also write the report as JSON here.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Fusion parameters (default: the product's, `lumina_rag::RagOptions::default`).
        #[arg(long)]
        rrf_k: Option<f64>,
        /// See --rrf-k: the dense list's weight.
        #[arg(long)]
        dense_weight: Option<f64>,
        /// See --rrf-k: candidates per retriever.
        #[arg(long)]
        candidates: Option<usize>,
    },
    /// Journal-append-to-client latency over WebSocket with many concurrent sessions.
    Latency {
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        #[arg(long, default_value_t = 100)]
        events_per_session: usize,
    },
}

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Journal {
            events,
            batch,
            payload_bytes,
            dir,
            postgres_url,
        } => {
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().to_path_buf());
            let store: Arc<dyn lumina_journal::JournalStore> = match postgres_url {
                Some(url) => {
                    let pg = lumina_journal::postgres::PgJournal::connect(&url, 4)?;
                    pg.migrate().await?;
                    Arc::new(pg)
                }
                None => Arc::new(SqliteJournal::open(
                    dir.join("sessions"),
                    lumina_journal::bench::BENCH_TENANT,
                )?),
            };
            let report = lumina_journal::bench::run(store, events, batch, payload_bytes).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        BenchCommand::Rag {
            scale,
            k,
            embeddings,
            app_root,
            output,
            rrf_k,
            dense_weight,
            candidates,
        } => {
            let defaults = lumina_rag::RagOptions::default();
            let options = lumina_rag::RagOptions {
                rrf_k: rrf_k.unwrap_or(defaults.rrf_k),
                dense_weight: dense_weight.unwrap_or(defaults.dense_weight),
                candidates: candidates.unwrap_or(defaults.candidates),
                ..defaults
            };
            let ks: Vec<usize> = k
                .split(',')
                .map(|v| v.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .context("--k")?;
            let embedder: Option<Arc<dyn lumina_memory::embed::EmbeddingProvider>> =
                if embeddings == "hash" {
                    Some(Arc::new(lumina_memory::embed::HashEmbeddings::new(256)))
                } else {
                    memory_models(app_root, Some(embeddings)).await?.0
                };
            let report = rag::run(scale, &ks, embedder, options).await?;
            let json = serde_json::to_string_pretty(&report)?;
            if let Some(path) = output {
                std::fs::write(&path, &json)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            println!("{json}");
            Ok(())
        }
        BenchCommand::Memory {
            dataset,
            data,
            qrels,
            store,
            postgres_url,
            exact_threshold,
            k,
            output,
            embeddings,
            app_root,
        } => {
            anyhow::ensure!(
                dataset == "locomo",
                "unknown dataset `{dataset}` (only `locomo`)"
            );
            let mut options = locomo::BenchOptions::new(data, qrels);
            match store.as_str() {
                "sqlite" => {}
                "postgres" => {
                    let url = postgres_url.context("--store postgres needs --postgres-url")?;
                    let pg = lumina_journal::postgres::PgJournal::connect(&url, 2)?;
                    pg.migrate().await.context("migrating the database")?;
                    options.postgres_url = Some(url);
                }
                other => anyhow::bail!("--store {other}: use sqlite or postgres"),
            }
            if let Some(threshold) = exact_threshold {
                anyhow::ensure!(
                    options.postgres_url.is_some(),
                    "--exact-threshold applies to --store postgres"
                );
                options.exact_threshold = threshold;
            }
            let (embedder, reranker) = memory_models(app_root, embeddings).await?;
            options.embedder = embedder;
            options.reranker = reranker;
            options.ks = k
                .split(',')
                .map(|v| v.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .context("--k takes comma-separated numbers, e.g. 1,5,10")?;
            let report = locomo::bench_locomo(options).await?;
            println!("{report}");
            if let Some(path) = output {
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Ok(())
        }
        BenchCommand::Recall {
            rows,
            turns,
            sessions,
            postgres_url,
            cold,
        } => {
            if let Some(url) = &postgres_url {
                let pg = lumina_journal::postgres::PgJournal::connect(url, 2)?;
                pg.migrate().await.context("migrating the database")?;
            }
            let report = recall::run(recall::RecallBench {
                postgres_url,
                rows,
                turns,
                sessions,
                cold,
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        BenchCommand::Conversation {
            model_url,
            streams,
            messages,
            page_sizes,
        } => {
            let page_sizes = page_sizes
                .split(',')
                .map(|v| v.trim().parse::<u32>())
                .collect::<Result<_, _>>()
                .context("--page-sizes takes comma-separated numbers, e.g. 50,200")?;
            let report = conversation::run(conversation::ConversationBench {
                model_url,
                streams,
                messages,
                page_sizes,
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        BenchCommand::A2a {
            model_url,
            messages,
            gets,
            concurrency,
            history_length,
        } => {
            let report = a2a::run(a2a::A2aBench {
                model_url,
                messages,
                gets,
                concurrency,
                history_length,
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        BenchCommand::Latency {
            sessions,
            events_per_session,
        } => latency(sessions, events_per_session).await,
    }
}

/// The embedder and reranker the product would use with this AppRoot's settings, the
/// mode overridden by `embeddings` (as the command-line layer).
async fn memory_models(
    app_root: Option<PathBuf>,
    embeddings: Option<String>,
) -> anyhow::Result<(
    Option<Arc<dyn lumina_memory::embed::EmbeddingProvider>>,
    Option<Arc<dyn lumina_memory::rerank::Reranker>>,
)> {
    let env = Env::from_process();
    let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
    let mut cli = serde_json::Map::new();
    if let Some(mode) = embeddings {
        cli.insert("memory_embeddings".into(), serde_json::Value::String(mode));
    }
    let settings = lumina_config::load(&app_root, None, &env, &cli).context("--embeddings")?;
    let models = settings.memory_models();
    let root = app_root.path().to_path_buf();
    let selection = {
        let models = models.clone();
        tokio::task::spawn_blocking(move || lumina_embed::select(&models, &root))
            .await
            .context("selecting the embedding model")?
    };
    match (&selection.provider, &selection.message) {
        (Some(p), _) => eprintln!("embeddings: {} ({} dimensions)", p.model_id(), p.dims()),
        (None, Some((_, message))) => eprintln!("embeddings: none ({message})"),
        (None, None) => eprintln!("embeddings: none"),
    }
    Ok((selection.provider, lumina_memory::rerank::select(&models)))
}

/// Starts a local backend in-process, subscribes one WebSocket client per session, appends
/// events through each session's journal writer and measures append-start → client-receipt.
async fn latency(sessions: usize, per_session: usize) -> anyhow::Result<()> {
    let served = Served::start(None).await?;
    let url = format!("ws://{}{}", served.addr, WS_PATH);
    let runtime = served
        .state
        .runtime()
        .context("the latency bench runs the local profile")?
        .clone();
    let project_root = served.project.path().display().to_string();

    let starts: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let mut receivers = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..sessions {
        let info = runtime
            .create_session(SessionCreateParams {
                project_root: Some(project_root.clone()),
                title: Some("bench".into()),
            })
            .await?;
        let (client, mut notes) = Client::connect(&url, Some(&served.token)).await?;
        let resumed = client.session_resume(&info.id, 0).await?;
        let head = resumed.head_seq;
        let starts_rx = starts.clone();
        receivers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_session);
            while latencies.len() < per_session {
                match notes.recv().await {
                    Some(Notification::Event(frame)) if frame.seq > head => {
                        if let Event::Warning { message, .. } = &frame.event {
                            let started =
                                starts_rx.lock().ok().and_then(|m| m.get(message).copied());
                            if let Some(started) = started {
                                latencies.push(started.elapsed());
                            }
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            drop(client);
            latencies
        }));
        writers.push(runtime.session(&info.id).await?);
    }
    let wall = Instant::now();
    let mut tasks = Vec::new();
    for (s, session) in writers.into_iter().enumerate() {
        let starts = starts.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_session {
                let message = format!("bench-{s}-{i}");
                if let Ok(mut m) = starts.lock() {
                    m.insert(message.clone(), Instant::now());
                }
                session
                    .journal()
                    .append(vec![Event::Warning {
                        code: "bench".into(),
                        message,
                        run_id: None,
                    }])
                    .await?;
                // Spread the load like real sessions do (a few events per model step).
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await.context("writer task")??;
    }
    let mut all: Vec<Duration> = Vec::new();
    for r in receivers {
        all.extend(r.await.context("receiver task")?);
    }
    let elapsed = wall.elapsed();
    served.stop().await;
    let report = serde_json::json!({
        "sessions": sessions,
        "events_per_session": per_session,
        "events_received": all.len(),
        "events_per_second": all.len() as f64 / elapsed.as_secs_f64(),
        "latency_ms": percentiles(&mut all),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// p50, p99 and max of `samples`, in milliseconds (zeros when there are none).
pub fn percentiles(samples: &mut [Duration]) -> serde_json::Value {
    samples.sort();
    let pct = |p: f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[idx].as_secs_f64() * 1000.0
    };
    serde_json::json!({ "p50": pct(0.50), "p99": pct(0.99), "max": pct(1.0) })
}

/// A local backend served in-process on a loopback port, in a temporary AppRoot that is
/// also its project; its model, when given, is the Anthropic-format server at that URL (the
/// scripted model server for a figure without model time).
struct Served {
    addr: std::net::SocketAddr,
    token: String,
    state: Arc<crate::profile::AppState>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    project: tempfile::TempDir,
}

impl Served {
    async fn start(model_url: Option<&str>) -> anyhow::Result<Served> {
        let project = tempfile::tempdir()?;
        let env = Env::from_pairs(
            model_url
                .map(|url| {
                    [
                        ("LUMINA_API_BASE_URL", url),
                        ("LUMINA_API_KEY", "bench-key"),
                        ("LUMINA_API_MODEL", "bench-model"),
                        ("LUMINA_API_TYPE", "anthropic"),
                    ]
                })
                .into_iter()
                .flatten(),
        );
        let backend = local::build(&LocalOptions {
            app_root: AppRoot::new(project.path().join("app")),
            env,
            port: 0,
            project_root: project.path().to_path_buf(),
            allow_loopback_agents: false,
        })
        .await?;
        let state = backend.state.clone();
        let server = tokio::spawn(crate::server::serve(backend.listener, state.clone()));
        Ok(Served {
            addr: backend.addr,
            token: backend.token,
            state,
            server,
            project,
        })
    }

    async fn stop(self) {
        self.state.shutdown.cancel();
        let _ = self.server.await;
    }
}

/// An HTTP client that sends the backend's token (marked sensitive) and `headers` with
/// every request.
fn bearer_client(
    token: &str,
    mut headers: reqwest::header::HeaderMap,
) -> anyhow::Result<reqwest::Client> {
    let mut bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))?;
    bearer.set_sensitive(true);
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    Ok(reqwest::Client::builder()
        .default_headers(headers)
        .build()?)
}

/// The response, or its status and body as the error.
async fn ok(response: reqwest::Response) -> anyhow::Result<reqwest::Response> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    anyhow::bail!("HTTP {status}: {body}")
}
