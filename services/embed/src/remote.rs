//! The remote OpenAI-compatible embeddings client: `POST {base_url}/embeddings` with
//! `{"model", "input": [...]}`, answer `{"data": [{"index", "embedding"}]}`.

use std::time::Duration;

use async_trait::async_trait;
use lumina_config::Secret;
use serde::{Deserialize, Serialize};

use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::{Error, Result};

/// Settings of a remote provider.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// The API base, e.g. `https://api.openai.com/v1` (no trailing `/embeddings`).
    pub base_url: String,
    /// The bearer token, if the endpoint needs one (never logged, never fingerprinted).
    pub api_key: Option<Secret>,
    /// The model name sent with each request.
    pub model: String,
    /// The vectors' dimensions (checked on every answer).
    pub dims: usize,
    /// Texts per request. Default 64.
    pub batch: usize,
    /// Per-request timeout. Default 60 s.
    pub timeout: Duration,
}

impl RemoteOptions {
    /// Options with the default batch size and timeout.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dims: usize) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dims,
            batch: 64,
            timeout: Duration::from_secs(60),
        }
    }
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct RemoteEmbeddings {
    options: RemoteOptions,
    url: String,
    model_id: String,
    http: reqwest::Client,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl RemoteEmbeddings {
    /// A client for `options` (no request is made until [`EmbeddingProvider::embed`]).
    pub fn new(options: RemoteOptions) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| Error::Embedding(format!("http client: {e}")))?;
        let base = options.base_url.trim_end_matches('/');
        Ok(Self {
            url: format!("{base}/embeddings"),
            // The endpoint's host is not part of the id: the same model served elsewhere
            // gives the same vectors. The key never is.
            model_id: format!("openai-compatible:{}", options.model),
            options,
            http,
        })
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut req = self.http.post(&self.url).json(&Request {
            model: &self.options.model,
            input: texts,
        });
        if let Some(key) = &self.options.api_key {
            req = req.bearer_auth(key.expose());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| Error::Embedding(format!("request failed: {}", e.without_url())))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            // An endpoint may echo the credentials it refused.
            let body = match &self.options.api_key {
                Some(key) if !key.expose().is_empty() => body.replace(key.expose(), "[redacted]"),
                _ => body,
            };
            let body: String = body.chars().take(300).collect();
            return Err(Error::Embedding(format!("status {status}: {body}")));
        }
        let mut parsed: Response = resp
            .json()
            .await
            .map_err(|e| Error::Embedding(format!("bad response: {}", e.without_url())))?;
        if parsed.data.len() != texts.len() {
            return Err(Error::Embedding(format!(
                "{} vectors for {} texts",
                parsed.data.len(),
                texts.len()
            )));
        }
        if parsed.data.iter().all(|d| d.index.is_some()) {
            parsed.data.sort_by_key(|d| d.index);
        }
        let mut out = Vec::with_capacity(texts.len());
        for item in parsed.data {
            if item.embedding.len() != self.options.dims {
                return Err(Error::Embedding(format!(
                    "vector of {} dimensions, expected {}",
                    item.embedding.len(),
                    self.options.dims
                )));
            }
            out.push(item.embedding);
        }
        Ok(out)
    }
}

#[async_trait]
impl EmbeddingProvider for RemoteEmbeddings {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dims(&self) -> usize {
        self.options.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.options.batch.max(1)) {
            out.extend(self.request(chunk).await?);
        }
        Ok(out)
    }
}
