//! The seven browser tools: argument parsing, the session's browser, and the output the
//! model reads. The browser work itself is [`lumina_browser::Browser`]'s.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use lumina_browser::{Browser, Error as BrowserError, PageState, Target};
use serde::Deserialize;
use serde_json::{json, Value};

use super::BrowserTools;
use crate::builtin::args;
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

/// The tools' names, in registration order.
pub const NAMES: [&str; 7] = [
    "browser_open",
    "browser_click",
    "browser_type",
    "browser_select",
    "browser_extract",
    "browser_tabs",
    "browser_screenshot",
];

/// Screenshots go to `<results_dir>/<SCREENSHOT_DIR>/` (the session's artifacts).
pub const SCREENSHOT_DIR: &str = "artifacts";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Click,
    Type,
    Select,
    Extract,
    Tabs,
    Screenshot,
}

impl Kind {
    fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

struct BrowserTool {
    kind: Kind,
    kit: BrowserTools,
}

pub(super) fn all(kit: &BrowserTools) -> Vec<Arc<dyn Tool>> {
    [
        Kind::Open,
        Kind::Click,
        Kind::Type,
        Kind::Select,
        Kind::Extract,
        Kind::Tabs,
        Kind::Screenshot,
    ]
    .into_iter()
    .map(|kind| {
        Arc::new(BrowserTool {
            kind,
            kit: kit.clone(),
        }) as Arc<dyn Tool>
    })
    .collect()
}

fn target_schema() -> Value {
    json!({
        "selector": {"type": "string", "description": "CSS selector of the element (the first match is used)."},
        "ref": {"type": "integer", "minimum": 1, "description": "The element's ref from browser_extract (instead of selector)."}
    })
}

fn schema(kind: Kind) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required: Vec<&str> = Vec::new();
    let mut add = |name: &str, schema: Value| {
        properties.insert(name.to_string(), schema);
    };
    let target = || match target_schema() {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    match kind {
        Kind::Open => {
            add(
                "url",
                json!({"type": "string", "description": "An http:// or https:// URL of a public page."}),
            );
            add(
                "new_tab",
                json!({"type": "boolean", "description": "Open it in a new tab (default: the active tab)."}),
            );
            required.push("url");
        }
        Kind::Click => {
            for (k, v) in target() {
                add(&k, v);
            }
        }
        Kind::Type => {
            for (k, v) in target() {
                add(&k, v);
            }
            add(
                "text",
                json!({"type": "string", "description": "The text to type."}),
            );
            add(
                "clear",
                json!({"type": "boolean", "description": "Empty the field first (default true)."}),
            );
            add(
                "submit",
                json!({"type": "boolean", "description": "Press Enter afterwards (default false)."}),
            );
            required.push("text");
        }
        Kind::Select => {
            for (k, v) in target() {
                add(&k, v);
            }
            add(
                "option",
                json!({"type": "string", "description": "The option's value or its visible text."}),
            );
            required.push("option");
        }
        Kind::Extract => {
            add(
                "selector",
                json!({"type": "string", "description": "CSS selector to read only the matching elements (default: the whole page)."}),
            );
        }
        Kind::Tabs => {
            add(
                "action",
                json!({"type": "string", "enum": ["list", "switch", "close"], "description": "list (default), switch to a tab, or close one."}),
            );
            add(
                "tab",
                json!({"type": "integer", "minimum": 0, "description": "The tab number for switch and close."}),
            );
        }
        Kind::Screenshot => {
            add(
                "full_page",
                json!({"type": "boolean", "description": "The whole page instead of the visible part (default false)."}),
            );
        }
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn description(kind: Kind) -> &'static str {
    match kind {
        Kind::Open => "Open a public web page in a headless browser (the session's own, started on first use with an empty profile) and wait for it to load. Private, loopback and link-local addresses are refused, for the page and for everything it loads or connects to. Then read it with browser_extract and act with browser_click, browser_type and browser_select.",
        Kind::Click => "Click an element of the active tab (by CSS selector or by ref from browser_extract) with the mouse, and wait for a page it opens to load.",
        Kind::Type => "Type text into an input, text area or editable element of the active tab (by CSS selector or ref); optionally clear it first and press Enter afterwards to submit.",
        Kind::Select => "Choose an option of a <select> element of the active tab (by CSS selector or ref), by the option's value or visible text.",
        Kind::Extract => "Read the active tab: its URL, title and visible text (or only that of the elements a CSS selector matches), and its interactive elements with refs to use in browser_click, browser_type and browser_select.",
        Kind::Tabs => "List the browser's tabs, switch to one, or close one.",
        Kind::Screenshot => "Take a PNG screenshot of the active tab (visible part or full page); it is saved in the session's artifacts and its path returned.",
    }
}

#[derive(Deserialize)]
struct TargetArgs {
    selector: Option<String>,
    #[serde(rename = "ref")]
    reference: Option<u64>,
}

impl TargetArgs {
    fn target(&self, tool: &str) -> Result<Target, ToolOutput> {
        match (&self.selector, self.reference) {
            (Some(s), None) if !s.trim().is_empty() => Ok(Target::Css(s.clone())),
            (None, Some(n)) => Ok(Target::Ref(n)),
            (Some(_), Some(_)) => Err(ToolOutput::error(format!(
                "{tool}: give either `selector` or `ref`, not both"
            ))),
            _ => Err(ToolOutput::error(format!(
                "{tool}: give the element as `selector` (CSS) or `ref` (from browser_extract)"
            ))),
        }
    }
}

#[derive(Deserialize)]
struct OpenArgs {
    url: String,
    #[serde(default)]
    new_tab: bool,
}

#[derive(Deserialize)]
struct TypeArgs {
    #[serde(flatten)]
    target: TargetArgs,
    text: String,
    clear: Option<bool>,
    #[serde(default)]
    submit: bool,
}

#[derive(Deserialize)]
struct SelectArgs {
    #[serde(flatten)]
    target: TargetArgs,
    option: String,
}

#[derive(Deserialize)]
struct ExtractArgs {
    selector: Option<String>,
}

#[derive(Deserialize)]
struct TabsArgs {
    action: Option<String>,
    tab: Option<usize>,
}

#[derive(Deserialize)]
struct ScreenshotArgs {
    #[serde(default)]
    full_page: bool,
}

#[async_trait]
impl Tool for BrowserTool {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: self.kind.name().to_string(),
            description: description(self.kind).to_string(),
            input_schema: schema(self.kind),
            // Opening reaches the network (like web_fetch); clicking, typing and selecting
            // can submit forms: all asked in `ask` mode. The others only read.
            read_only: matches!(self.kind, Kind::Extract | Kind::Tabs | Kind::Screenshot),
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let work = self.run(ctx, args);
        tokio::select! {
            _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted"),
            out = work => match out {
                Ok(out) | Err(out) => out,
            },
        }
    }

    async fn preview(&self, _ctx: &ToolContext, args: &Value) -> Option<String> {
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let target = s("selector")
            .map(|sel| format!("`{sel}`"))
            .or_else(|| {
                args.get("ref")
                    .and_then(Value::as_u64)
                    .map(|n| format!("ref {n}"))
            })
            .unwrap_or_else(|| "?".into());
        match self.kind {
            Kind::Open => s("url").map(|u| format!("open {u}")),
            Kind::Click => Some(format!("click {target}")),
            Kind::Type => Some(format!(
                "type {:?} into {target}{}",
                s("text").unwrap_or_default(),
                if args.get("submit").and_then(Value::as_bool) == Some(true) {
                    ", then press Enter"
                } else {
                    ""
                }
            )),
            Kind::Select => Some(format!(
                "select {:?} in {target}",
                s("option").unwrap_or_default()
            )),
            Kind::Extract | Kind::Tabs | Kind::Screenshot => None,
        }
    }

    fn run_ended(&self, session_id: &str) {
        self.kit.release(session_id);
    }
}

impl BrowserTool {
    async fn run(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolOutput> {
        let name = self.kind.name();
        let schema = schema(self.kind);
        let failed = |e: BrowserError| ToolOutput::error(e.to_string());
        match self.kind {
            Kind::Open => {
                let a: OpenArgs = args::parse(name, &schema, args)?;
                let mut guard = self.kit.session(ctx, true).await?;
                let browser = running(&mut guard)?;
                let state = browser.open(&a.url, a.new_tab).await.map_err(failed)?;
                Ok(page_output(format!("Opened {}", state.url), &state))
            }
            Kind::Click => {
                let a: TargetArgs = args::parse(name, &schema, args)?;
                let target = a.target(name)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let (what, state) = running(&mut guard)?.click(&target).await.map_err(failed)?;
                Ok(page_output(format!("Clicked {what}"), &state))
            }
            Kind::Type => {
                let a: TypeArgs = args::parse(name, &schema, args)?;
                let target = a.target.target(name)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let (what, state) = running(&mut guard)?
                    .type_text(&target, &a.text, a.clear.unwrap_or(true), a.submit)
                    .await
                    .map_err(failed)?;
                let enter = if a.submit { " and pressed Enter" } else { "" };
                Ok(page_output(
                    format!(
                        "Typed {} characters into {what}{enter}",
                        a.text.chars().count()
                    ),
                    &state,
                ))
            }
            Kind::Select => {
                let a: SelectArgs = args::parse(name, &schema, args)?;
                let target = a.target.target(name)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let (selected, state) = running(&mut guard)?
                    .select(&target, &a.option)
                    .await
                    .map_err(failed)?;
                Ok(page_output(
                    format!(
                        "Selected {:?} (value {:?}) in {target}",
                        selected.label, selected.value
                    ),
                    &state,
                ))
            }
            Kind::Extract => {
                let a: ExtractArgs = args::parse(name, &schema, args)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let page = running(&mut guard)?
                    .extract(a.selector.as_deref())
                    .await
                    .map_err(failed)?;
                Ok(extract_output(&page, ctx.output_cap_bytes))
            }
            Kind::Tabs => {
                let a: TabsArgs = args::parse(name, &schema, args)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let browser = running(&mut guard)?;
                let action = a.action.as_deref().unwrap_or("list");
                let tab = || {
                    a.tab.ok_or_else(|| {
                        ToolOutput::error(format!("{name}: `{action}` needs `tab` (a tab number)"))
                    })
                };
                let header = match action {
                    "list" => String::new(),
                    "switch" => {
                        let state = browser.switch_tab(tab()?).await.map_err(failed)?;
                        format!("Switched to tab {}.\n", state.tab)
                    }
                    "close" => {
                        let index = tab()?;
                        browser.close_tab(index).await.map_err(failed)?;
                        format!("Closed tab {index}.\n")
                    }
                    other => {
                        return Err(ToolOutput::error(format!(
                            "{name}: unknown action `{other}` (list, switch or close)"
                        )))
                    }
                };
                let tabs = browser.tabs().await.map_err(failed)?;
                let mut out = header;
                for t in &tabs {
                    let mark = if t.active { " (active)" } else { "" };
                    let _ = writeln!(out, "[{}] {} — {:?}{mark}", t.index, t.url, t.title);
                }
                Ok(ToolOutput::ok(out.trim_end()).with_metadata(json!({ "tabs": tabs })))
            }
            Kind::Screenshot => {
                let a: ScreenshotArgs = args::parse(name, &schema, args)?;
                let mut guard = self.kit.session(ctx, false).await?;
                let browser = running(&mut guard)?;
                let png = browser.screenshot(a.full_page).await.map_err(failed)?;
                // What the picture shows, for its caption and alt text (the console's).
                let shown = browser
                    .tabs()
                    .await
                    .ok()
                    .and_then(|tabs| tabs.into_iter().find(|t| t.active));
                let dir = ctx.results_dir.join(SCREENSHOT_DIR);
                let path = dir.join(format!("screenshot-{}.png", file_safe(&ctx.call_id)));
                let written = async {
                    tokio::fs::create_dir_all(&dir).await?;
                    tokio::fs::write(&path, &png).await
                };
                written.await.map_err(|e| {
                    ToolOutput::error(format!(
                        "cannot save the screenshot to {}: {e}",
                        path.display()
                    ))
                })?;
                let size = png_size(&png)
                    .map(|(w, h)| format!("{w}×{h}, "))
                    .unwrap_or_default();
                Ok(ToolOutput::ok(format!(
                    "Saved a screenshot ({size}{} bytes) to {}",
                    png.len(),
                    path.display()
                ))
                .with_metadata(json!({
                    "artifact": {
                        "kind": "screenshot",
                        "path": path.display().to_string(),
                        "media_type": "image/png",
                        "bytes": png.len(),
                        "url": shown.as_ref().map(|t| t.url.as_str()),
                        "title": shown.as_ref().map(|t| t.title.as_str()),
                    }
                })))
            }
        }
    }
}

fn running(browser: &mut Option<Browser>) -> Result<&mut Browser, ToolOutput> {
    browser
        .as_mut()
        .ok_or_else(|| ToolOutput::error("no page is open: open one with browser_open first"))
}

/// The result of an action: what was done, where the tab is now, and what happened.
fn page_output(done: String, state: &PageState) -> ToolOutput {
    let mut out = format!(
        "{done}.\nTab {}: {} — {:?}",
        state.tab, state.url, state.title
    );
    if !state.blocked.is_empty() {
        let _ = write!(
            out,
            "\nBlocked {} request(s) or connection(s) (not sent; only public addresses may be reached):",
            state.blocked.len()
        );
        for b in state.blocked.iter().take(20) {
            let _ = write!(out, "\n- {}: {}", b.url, b.reason);
        }
    }
    for t in &state.new_tabs {
        let _ = write!(out, "\nOpened a new tab [{}]: {}", t.index, t.url);
    }
    for d in &state.dialogs {
        let _ = write!(out, "\nDismissed a dialog: {d}");
    }
    ToolOutput::ok(out).with_metadata(json!({
        "tab": state.tab,
        "url": state.url,
        "title": state.title,
        "blocked": state.blocked,
        "new_tabs": state.new_tabs,
        "dialogs": state.dialogs,
    }))
}

/// The page's text and its elements within `cap` bytes: the element list gets at most half.
fn extract_output(page: &lumina_browser::Extract, cap: usize) -> ToolOutput {
    let mut elements = String::new();
    let mut listed = 0;
    for e in &page.elements {
        let mut line = format!("[{}] {}", e.reference, e.kind);
        if !e.label.is_empty() {
            let _ = write!(line, " {:?}", e.label);
        }
        if let Some(name) = &e.name {
            let _ = write!(line, " name={name}");
        }
        if let Some(value) = &e.value {
            let _ = write!(line, " value={value:?}");
        }
        if let Some(href) = &e.href {
            let _ = write!(line, " → {href}");
        }
        if elements.len() + line.len() + 1 > cap / 2 {
            break;
        }
        elements.push_str(&line);
        elements.push('\n');
        listed += 1;
    }
    let head = format!("{} — {}\n\n", page.title, page.url);
    let budget = cap.saturating_sub(head.len() + elements.len() + 200);
    let (text, cut) = cut_at(&page.text, budget);
    let mut out = head;
    out.push_str(text);
    if cut {
        let _ = write!(out, "\n[text cut at {budget} bytes of {}]", page.text.len());
    }
    if page.elements.is_empty() {
        out.push_str("\n\nNo interactive elements.");
    } else {
        let _ = write!(
            out,
            "\n\nInteractive elements (use ref with browser_click, browser_type, browser_select):\n{}",
            elements.trim_end()
        );
        if listed < page.elements.len() {
            let _ = write!(out, "\n[{} more not shown]", page.elements.len() - listed);
        }
    }
    ToolOutput::ok(out).with_metadata(json!({
        "url": page.url,
        "title": page.title,
        "matched": page.matched,
        "truncated": cut,
        "elements": page.elements.len(),
    }))
}

/// `s` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn cut_at(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// A call id as a file name: letters, digits, `-` and `_` only.
fn file_safe(id: &str) -> String {
    let safe: String = id
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() {
        "call".into()
    } else {
        safe
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[..8] != b"\x89PNG\r\n\x1a\n" || &png[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(png[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(png[20..24].try_into().ok()?);
    Some((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn call_ids_become_safe_file_names() {
        assert_eq!(file_safe("toolu_01AbC-9"), "toolu_01AbC-9");
        assert_eq!(file_safe("../../etc/passwd"), "______etc_passwd");
        assert_eq!(file_safe(""), "call");
    }

    #[test]
    fn a_target_is_a_selector_or_a_ref() {
        let t = |v: Value| serde_json::from_value::<TargetArgs>(v).unwrap().target("t");
        assert_eq!(
            t(json!({"selector": "#a"})).unwrap(),
            Target::Css("#a".into())
        );
        assert_eq!(t(json!({"ref": 3})).unwrap(), Target::Ref(3));
        assert!(t(json!({"selector": "#a", "ref": 3}))
            .unwrap_err()
            .content
            .contains("not both"));
        assert!(t(json!({})).unwrap_err().content.contains("`selector`"));
    }

    #[test]
    fn reading_tools_are_read_only_and_acting_tools_ask() {
        let kit = BrowserTools::default();
        let read_only: Vec<(String, bool)> = kit
            .tools()
            .iter()
            .map(|t| (t.descriptor().name, t.descriptor().read_only))
            .collect();
        assert_eq!(
            read_only,
            vec![
                ("browser_open".to_string(), false),
                ("browser_click".to_string(), false),
                ("browser_type".to_string(), false),
                ("browser_select".to_string(), false),
                ("browser_extract".to_string(), true),
                ("browser_tabs".to_string(), true),
                ("browser_screenshot".to_string(), true),
            ]
        );
    }

    #[tokio::test]
    async fn a_missing_browser_is_an_error_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ToolContext::new(dir.path(), dir.path().join("results"), "s1", "c1");
        ctx.browser_executable = Some("/nonexistent/chromium".into());
        let kit = BrowserTools::default();
        let open = kit.tools().remove(0);
        let out = open
            .call(&ctx, json!({"url": "https://example.com/"}))
            .await;
        assert!(out.is_error);
        assert!(
            out.content.contains("/nonexistent/chromium")
                && out.content.contains("browser_executable"),
            "{}",
            out.content
        );
        // Nothing was left running for the session.
        assert_eq!(kit.profile_dir("s1").await, None);
        let read = kit.tools().remove(4).call(&ctx, json!({})).await;
        assert!(
            read.content.contains("open one with browser_open first"),
            "{read:?}"
        );
    }

    #[test]
    fn png_dimensions_are_read_from_the_header() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&1280u32.to_be_bytes());
        png.extend_from_slice(&800u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((1280, 800)));
        assert_eq!(png_size(b"GIF89a"), None);
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(cut_at("héllo", 2), ("h", true));
        assert_eq!(cut_at("hello", 10), ("hello", false));
    }
}
