//! `web_search{query}`: a query against the operator's SearxNG-compatible JSON endpoint
//! (`GET {web_search_url}/search?q=…&format=json`), answered as a numbered list of
//! results (title, URL, snippet).
//!
//! The endpoint comes from the `web_search_url` setting ([`crate::ToolContext`]); it is
//! chosen by the operator and may be internal, so it is not subject to `web_fetch`'s SSRF
//! rules. Without it the tool returns an error naming the setting.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use serde::Deserialize;
use serde_json::{json, Value};

use super::args;
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "web_search";
/// Results listed; SearxNG returns a few dozen.
pub const MAX_RESULTS: usize = 10;
const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;

/// Searches the web through the configured endpoint.
#[derive(Debug, Default, Clone, Copy)]
pub struct WebSearch;

#[derive(Debug, Deserialize)]
struct Args {
    query: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

#[derive(Debug, Deserialize)]
struct Response {
    results: Vec<SearchResult>,
}

#[derive(Debug, Deserialize)]
struct SearchResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: Option<String>,
}

#[async_trait]
impl Tool for WebSearch {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Search the web. Returns a numbered list of results with title, URL \
                          and snippet; read a result with web_fetch."
                .to_string(),
            input_schema: schema(),
            read_only: true,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args: Args = match args::parse(NAME, &schema(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        if args.query.trim().is_empty() {
            return ToolOutput::error("query must not be empty");
        }
        let Some(base) = ctx
            .web_search_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        else {
            return ToolOutput::error(
                "web_search is not configured: set `web_search_url` (settings.json or \
                 LUMINA_WEB_SEARCH_URL) to a SearxNG-compatible endpoint",
            );
        };
        tokio::select! {
            _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted"),
            out = search(base, args.query.trim(), ctx.output_cap_bytes) => match out {
                Ok(out) | Err(out) => out,
            },
        }
    }
}

/// The `web_search_url` setting does not parse.
#[derive(Debug, thiserror::Error)]
#[error("`web_search_url` is not a URL: {0}")]
struct NotAUrl(#[source] url::ParseError);

/// `{base}/search?q=…&format=json`; a base that already ends in `/search` is used as is.
fn search_url(base: &str, query: &str) -> Result<Url, NotAUrl> {
    let mut url = Url::parse(base).map_err(NotAUrl)?;
    if !url.path().trim_end_matches('/').ends_with("/search") {
        let path = format!("{}/search", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    Ok(url)
}

async fn search(base: &str, query: &str, cap: usize) -> Result<ToolOutput, ToolOutput> {
    let url = search_url(base, query).map_err(|e| ToolOutput::error(e.to_string()))?;
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| ToolOutput::error(format!("cannot build the HTTP client: {e}")))?;
    // Errors leave the URL out: it may carry credentials for the endpoint.
    let failed =
        |e: reqwest::Error| ToolOutput::error(format!("web search failed: {}", e.without_url()));
    let mut response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ToolOutput::error(format!(
            "web search failed: the endpoint answered HTTP {status}"
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ToolOutput::error(
                "web search failed: the endpoint's answer is larger than 2 MiB",
            ));
        }
        body.extend_from_slice(&chunk);
    }
    let parsed: Response = serde_json::from_slice(&body).map_err(|e| {
        ToolOutput::error(format!(
            "web search failed: the endpoint did not answer with SearxNG JSON ({e})"
        ))
    })?;
    let total = parsed.results.len();
    let content = format_results(query, &parsed.results, cap);
    Ok(ToolOutput::ok(content).with_metadata(json!({ "results": total })))
}

fn format_results(query: &str, results: &[SearchResult], cap: usize) -> String {
    if results.is_empty() {
        return format!("No results for \"{query}\".");
    }
    let mut out = format!("Results for \"{query}\":\n");
    for (i, result) in results.iter().take(MAX_RESULTS).enumerate() {
        let mut entry = format!("\n{}. {}\n   {}\n", i + 1, flat(&result.title), result.url);
        if let Some(snippet) = result
            .content
            .as_deref()
            .map(flat)
            .filter(|s| !s.is_empty())
        {
            entry.push_str(&format!("   {snippet}\n"));
        }
        if out.len() + entry.len() > cap {
            out.push_str("\n[more results left out]\n");
            break;
        }
        out.push_str(&entry);
    }
    out
}

fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_search_path_is_added_once() {
        for (base, want) in [
            ("http://s:8080", "http://s:8080/search?q=a+b&format=json"),
            ("http://s:8080/", "http://s:8080/search?q=a+b&format=json"),
            ("http://s/searx", "http://s/searx/search?q=a+b&format=json"),
            ("http://s/search", "http://s/search?q=a+b&format=json"),
        ] {
            assert_eq!(search_url(base, "a b").unwrap().as_str(), want, "{base}");
        }
        assert!(search_url("not a url", "x").is_err());
    }
}
