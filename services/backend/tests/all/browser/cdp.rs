//! A small Chrome DevTools Protocol client over tokio-tungstenite (already in the tree;
//! a CDP crate would add far more to the build than these few calls need): it starts
//! headless Chromium, opens pages in fresh browser contexts, evaluates script, waits for
//! conditions and takes screenshots.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The browser binary: `$LUMINA_BROWSER_EXECUTABLE`, else `chromium`, `chromium-browser` or
/// `google-chrome` on `PATH`. Panics with what to install when there is none.
pub fn browser_executable() -> PathBuf {
    if let Some(path) = std::env::var_os("LUMINA_BROWSER_EXECUTABLE") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the browser tests need Chromium: run scripts/setup (apt-get install -y chromium) or \
         set LUMINA_BROWSER_EXECUTABLE; skip them with `--skip browser::`"
    );
}

pub struct Browser {
    child: tokio::process::Child,
    out: mpsc::UnboundedSender<Message>,
    waiters: Waiters,
    next_id: AtomicU64,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn launch() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(browser_executable())
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--window-size=1280,800",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser_executable().display()));
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let endpoint = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.split("DevTools listening on ").nth(1) {
                    return url.trim().to_string();
                }
            }
            panic!("chromium exited without a DevTools endpoint");
        })
        .await
        .expect("chromium did not print its DevTools endpoint within 30 s");
        // Keep draining stderr so the browser never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (ws, _) = tokio_tungstenite::connect_async(endpoint.as_str())
            .await
            .unwrap();
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Waiters = Arc::default();
        let reader_waiters = waiters.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(value) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = value.get("id").and_then(Value::as_u64) {
                    if let Some(tx) = reader_waiters.lock().unwrap().remove(&id) {
                        let _ = tx.send(value);
                    }
                }
            }
        });
        Browser {
            child,
            out,
            waiters,
            next_id: AtomicU64::new(1),
            _profile: profile,
        }
    }

    /// One CDP command (`session` for a page's commands); panics on a protocol error.
    pub async fn send(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap().insert(id, tx);
        self.out
            .send(Message::Text(message.to_string().into()))
            .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("CDP {method} got no answer"))
            .unwrap();
        if let Some(error) = reply.get("error") {
            panic!("CDP {method} failed: {error}");
        }
        reply["result"].clone()
    }

    /// A new tab in a fresh browser context (its own cookies).
    pub async fn page(&self) -> Page<'_> {
        let context = self
            .send(None, "Target.createBrowserContext", json!({}))
            .await;
        let target = self
            .send(
                None,
                "Target.createTarget",
                json!({ "url": "about:blank", "browserContextId": context["browserContextId"] }),
            )
            .await;
        let attached = self
            .send(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        let page = Page {
            browser: self,
            session: attached["sessionId"].as_str().unwrap().to_string(),
        };
        page.send("Page.enable", json!({})).await;
        page.viewport(1280, 800, false).await;
        page
    }

    pub async fn close(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

pub struct Page<'a> {
    browser: &'a Browser,
    session: String,
}

impl Page<'_> {
    pub async fn send(&self, method: &str, params: Value) -> Value {
        self.browser.send(Some(&self.session), method, params).await
    }

    pub async fn viewport(&self, width: u32, height: u32, mobile: bool) {
        self.send(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        )
        .await;
    }

    pub async fn goto(&self, url: &str) {
        self.send("Page.navigate", json!({ "url": url })).await;
    }

    pub async fn reload(&self) {
        self.send("Page.reload", json!({ "ignoreCache": true }))
            .await;
    }

    /// The value of a script expression (promises awaited).
    pub async fn eval(&self, expression: &str) -> Value {
        let result = self
            .send(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        if let Some(exception) = result.get("exceptionDetails") {
            return json!({ "exception": exception });
        }
        result["result"]["value"].clone()
    }

    /// Waits (15 s) until `condition` is truthy; panics with the page's text otherwise.
    pub async fn wait_for(&self, condition: &str) {
        self.wait_for_within(condition, Duration::from_secs(15))
            .await;
    }

    /// Waits up to `limit` until `condition` is truthy; panics with the page's text
    /// otherwise.
    pub async fn wait_for_within(&self, condition: &str, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        let probe = format!(
            "(() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})()"
        );
        loop {
            if self.eval(&probe).await == json!(true) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let text = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await;
                panic!("timed out waiting for `{condition}`; the page says:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn text(&self, selector: &str) -> String {
        let value = self
            .eval(&format!(
                "(document.querySelector({}) || {{}}).textContent || ''",
                json!(selector)
            ))
            .await;
        value.as_str().unwrap_or_default().to_string()
    }

    pub async fn click(&self, selector: &str) {
        let clicked = self
            .eval(&format!(
                "(() => {{ const el = document.querySelector({}); if (!el) return false; el.click(); return true; }})()",
                json!(selector)
            ))
            .await;
        assert_eq!(clicked, json!(true), "no element {selector} to click");
    }

    /// Focuses `selector` and types `text` as keyboard input.
    pub async fn type_into(&self, selector: &str, text: &str) {
        self.eval(&format!(
            "document.querySelector({}).focus()",
            json!(selector)
        ))
        .await;
        self.send("Input.insertText", json!({ "text": text })).await;
    }

    /// The serious and critical axe-core violations on the page, one line each
    /// (`rule: targets`). axe-core comes from `$LUMINA_TOOLS_DIR/browser` (scripts/setup).
    pub async fn axe_violations(&self) -> Vec<String> {
        let tools = std::env::var_os("LUMINA_TOOLS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp/lumina-tools"));
        let axe = tools.join("browser/node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&axe).unwrap_or_else(|e| {
            panic!(
                "the accessibility check needs axe-core at {} ({e}): run scripts/setup",
                axe.display()
            )
        });
        if self.eval("typeof window.axe").await != json!("object") {
            self.eval(&source).await;
        }
        let found = self
            .eval(
                "axe.run(document, { resultTypes: ['violations'] }).then(r => r.violations \
                 .filter(v => v.impact === 'serious' || v.impact === 'critical') \
                 .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target.join(' ')).join(', ')}`))",
            )
            .await;
        let list = found
            .as_array()
            .unwrap_or_else(|| panic!("axe did not run: {found}"));
        list.iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let shot = self
            .send("Page.captureScreenshot", json!({ "format": "png" }))
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}
