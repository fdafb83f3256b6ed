//! The rerank extension of the read path (docs/design.md#embeddings-and-rerank): a
//! cross-encoder behind an HTTP endpoint re-scores the pipeline's best candidates before
//! evidence selection.
//!
//! Wire format: `POST {base}/rerank` with `{"model", "query", "documents": [...],
//! "top_n"}` and a bearer key; the answer is `{"results": [{"index", "relevance_score"}]}`
//! (Jina, Cohere, vLLM, TEI-style) or `{"data": [{"index", "score"}]}` (the `/reranks`
//! shape; `output.results` is accepted too). Alibaba Bailian's OpenAI-compatible base
//! `…/compatible-mode/v1` has its rerank endpoint at `…/compatible-api/v1/reranks`; such
//! a base URL is normalized to it ([`rerank_url`]).
//!
//! Reranking is query-time only: it is not part of the retrieval fingerprint, and a
//! failure or timeout (2 s by default) keeps the un-reranked order with a warning — it
//! never fails a recall.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lumina_config::{MemoryModels, Secret};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Re-scores documents against a query.
#[async_trait]
pub trait Reranker: Send + Sync + 'static {
    /// The model's name (for reports; not part of any fingerprint).
    fn model(&self) -> &str;

    /// How many of the best candidates to re-score.
    fn top_n(&self) -> usize;

    /// `(index into documents, relevance)` for the documents the reranker scored, in any
    /// order; documents it left out keep their place after the scored ones.
    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<(usize, f32)>>;
}

/// Settings of a [`RemoteReranker`].
#[derive(Debug, Clone)]
pub struct RerankOptions {
    /// The API base, e.g. `https://api.example.com/v1` (see [`rerank_url`]).
    pub base_url: String,
    /// The bearer token (never logged, never in errors).
    pub api_key: Option<Secret>,
    /// The model name sent with each request.
    pub model: String,
    /// Candidates re-scored per query. Default 20.
    pub top_n: usize,
    /// Per-request timeout. Default 2 s.
    pub timeout: Duration,
}

impl RerankOptions {
    /// Options with the default `top_n` (20) and timeout (2 s).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            top_n: 20,
            timeout: Duration::from_secs(2),
        }
    }
}

/// The endpoint for a base URL: `{base}/rerank`; a Bailian `…/compatible-mode/v1` (or
/// `…/compatible-api/v1`) base gives `…/compatible-api/v1/reranks`; a base that already
/// ends in `/rerank` or `/reranks` is used as it is.
pub fn rerank_url(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    if base.ends_with("/rerank") || base.ends_with("/reranks") {
        return base.to_owned();
    }
    for prefix in ["/compatible-mode/v1", "/compatible-api/v1"] {
        if let Some(host) = base.strip_suffix(prefix) {
            return format!("{host}/compatible-api/v1/reranks");
        }
    }
    format!("{base}/rerank")
}

/// An HTTP reranker (see the module docs). `Debug` redacts the key.
#[derive(Debug, Clone)]
pub struct RemoteReranker {
    options: RerankOptions,
    url: String,
    http: reqwest::Client,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    top_n: usize,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Option<Vec<Scored>>,
    #[serde(default)]
    data: Option<Vec<Scored>>,
    #[serde(default)]
    output: Option<Output>,
}

#[derive(Deserialize)]
struct Output {
    results: Vec<Scored>,
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    #[serde(default)]
    relevance_score: Option<f32>,
    #[serde(default)]
    score: Option<f32>,
}

impl RemoteReranker {
    /// A client for `options` (no request is made until [`Reranker::rerank`]).
    pub fn new(options: RerankOptions) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| Error::Rerank(format!("http client: {e}")))?;
        Ok(Self {
            url: rerank_url(&options.base_url),
            options,
            http,
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `text` with the API key (should an endpoint echo it) replaced.
    fn scrub(&self, text: &str) -> String {
        match &self.options.api_key {
            Some(key) if !key.expose().is_empty() => text.replace(key.expose(), "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

#[async_trait]
impl Reranker for RemoteReranker {
    fn model(&self) -> &str {
        &self.options.model
    }

    fn top_n(&self) -> usize {
        self.options.top_n.max(1)
    }

    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<(usize, f32)>> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let mut req = self.http.post(&self.url).json(&Request {
            model: &self.options.model,
            query,
            documents,
            top_n: documents.len(),
        });
        if let Some(key) = &self.options.api_key {
            req = req.bearer_auth(key.expose());
        }
        let resp = req.send().await.map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else {
                "failed"
            };
            Error::Rerank(format!(
                "request {kind}: {}",
                self.scrub(&e.without_url().to_string())
            ))
        })?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let body: String = self.scrub(&body).chars().take(300).collect();
            return Err(Error::Rerank(format!("status {status}: {body}")));
        }
        let parsed: Response = resp.json().await.map_err(|e| {
            Error::Rerank(format!(
                "bad response: {}",
                self.scrub(&e.without_url().to_string())
            ))
        })?;
        let scored = parsed
            .results
            .or(parsed.data)
            .or(parsed.output.map(|o| o.results))
            .ok_or_else(|| Error::Rerank("bad response: no `results` or `data`".into()))?;
        if scored.is_empty() {
            return Err(Error::Rerank("bad response: no scores".into()));
        }
        scored
            .into_iter()
            .map(|s| {
                let score = s.relevance_score.or(s.score).ok_or_else(|| {
                    Error::Rerank(
                        "bad response: an item without `relevance_score` or `score`".into(),
                    )
                })?;
                if s.index >= documents.len() {
                    return Err(Error::Rerank(format!(
                        "bad response: index {} for {} documents",
                        s.index,
                        documents.len()
                    )));
                }
                Ok((s.index, score))
            })
            .collect()
    }
}

/// The reranker the settings ask for: `None` without `memory_reranker_base_url`, or (with
/// a warning naming the setting) when it is not a usable URL.
pub fn select(models: &MemoryModels) -> Option<Arc<dyn Reranker>> {
    let base_url = models.reranker_base_url.as_deref()?;
    if let Err(reason) = crate::endpoint::check_http_url(base_url) {
        tracing::warn!("memory_reranker_base_url is not usable ({reason}): recall is not reranked");
        return None;
    }
    let options = RerankOptions {
        api_key: models.reranker_api_key.clone(),
        top_n: models.reranker_top_n.max(1),
        ..RerankOptions::new(base_url, &models.reranker_model)
    };
    match RemoteReranker::new(options) {
        Ok(reranker) => {
            tracing::info!(
                model = reranker.model(),
                top_n = reranker.top_n(),
                "memory reranker enabled"
            );
            Some(Arc::new(reranker))
        }
        Err(err) => {
            tracing::warn!("memory_reranker_base_url: the reranker did not start ({err})");
            None
        }
    }
}
