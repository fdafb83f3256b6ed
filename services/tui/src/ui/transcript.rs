//! The visible conversation: an append-mostly list of entries, each rendered once per width
//! and cached, and a scroll position that is an (entry, line) anchor rather than an absolute
//! line number. Nothing ever needs the height of the whole transcript, so a 10,000-event
//! session costs the same per frame as a short one: only the entries on screen (and those
//! scrolled across) are ever wrapped.

use lumina_client::protocol::TodoItem;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use serde_json::Value;

use super::render::entries;

/// One block of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    User {
        text: String,
        skill: Option<String>,
    },
    Assistant {
        text: String,
        /// Still receiving deltas.
        streaming: bool,
    },
    Tool(ToolEntry),
    Tasks(Vec<TodoItem>),
    Notice {
        level: Level,
        text: String,
    },
    /// Secondary information (other streams, unknown kinds, compaction) as one dim line.
    Dim(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub state: ToolState,
    pub output: String,
    /// The unified diff of a file edit (`tool.completed` metadata).
    pub diff: Option<String>,
    pub exit_code: Option<i64>,
    /// A file the call saved among the session's artifacts (`tool.completed` metadata
    /// `artifact`: the browser's screenshots).
    pub artifact: Option<ToolArtifact>,
    /// How the permission question was settled, when there was one.
    pub permission: Option<String>,
    pub expanded: bool,
    pub selected: bool,
}

/// `metadata.artifact` of a tool result: what it is and where it was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolArtifact {
    /// `screenshot`, …
    pub kind: String,
    pub path: String,
}

impl ToolArtifact {
    /// From a result's metadata, when it names an artifact with a path.
    pub fn from_metadata(metadata: &Value) -> Option<Self> {
        let artifact = metadata.get("artifact")?;
        let path = artifact.get("path")?.as_str()?.to_string();
        let kind = artifact
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("artifact")
            .to_string();
        Some(Self { kind, path })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    Running,
    Succeeded,
    Failed,
    Interrupted(String),
}

impl ToolEntry {
    pub fn new(call_id: &str, tool: &str, arguments: Value) -> Self {
        Self {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            arguments,
            state: ToolState::Running,
            output: String::new(),
            diff: None,
            exit_code: None,
            artifact: None,
            permission: None,
            expanded: false,
            selected: false,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    kind: EntryKind,
    /// Lines wrapped for `cache_width`; `None` after a change.
    cache: Option<(u16, Vec<Line<'static>>)>,
}

/// Where the viewport is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scroll {
    /// Glued to the bottom: new output stays visible.
    Follow,
    /// The top row of the viewport shows line `line` of entry `entry`.
    At { entry: usize, line: usize },
}

/// The conversation with its render cache and scroll state.
#[derive(Debug, Clone)]
pub struct Transcript {
    entries: Vec<Entry>,
    scroll: Scroll,
    /// The size of the last render; scrolling between renders uses it.
    viewport: (u16, u16),
}

impl Default for Transcript {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            scroll: Scroll::Follow,
            viewport: (80, 20),
        }
    }
}

impl Transcript {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.scroll = Scroll::Follow;
    }

    pub fn push(&mut self, kind: EntryKind) -> usize {
        self.entries.push(Entry { kind, cache: None });
        self.entries.len() - 1
    }

    pub fn get(&self, index: usize) -> Option<&EntryKind> {
        self.entries.get(index).map(|e| &e.kind)
    }

    /// Mutable access; the entry will be re-rendered.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut EntryKind> {
        self.entries.get_mut(index).map(|e| {
            e.cache = None;
            &mut e.kind
        })
    }

    pub fn kinds(&self) -> impl DoubleEndedIterator<Item = &EntryKind> + '_ {
        self.entries.iter().map(|e| &e.kind)
    }

    pub fn scroll(&self) -> Scroll {
        self.scroll
    }

    pub fn is_following(&self) -> bool {
        self.scroll == Scroll::Follow
    }

    /// Rendered lines of entry `index` at `width` (rendered now if not cached).
    fn lines(&mut self, index: usize, width: u16) -> &[Line<'static>] {
        let entry = &mut self.entries[index];
        let fresh = matches!(&entry.cache, Some((w, _)) if *w == width);
        if !fresh {
            let lines = entries::render(&entry.kind, usize::from(width));
            entry.cache = Some((width, lines));
        }
        match &entry.cache {
            Some((_, lines)) => lines,
            None => &[],
        }
    }

    fn height(&mut self, index: usize, width: u16) -> usize {
        self.lines(index, width).len()
    }

    /// The top of the viewport when glued to the bottom.
    fn bottom_top(&mut self, width: u16, height: usize) -> (usize, usize) {
        let mut need = height;
        let mut i = self.entries.len();
        while i > 0 {
            i -= 1;
            let h = self.height(i, width);
            if h >= need {
                return (i, h - need);
            }
            need -= h;
        }
        (0, 0)
    }

    /// The top of the viewport for the current scroll state; falls back to following when
    /// an anchor no longer has a screenful below it.
    fn top(&mut self, width: u16, height: usize) -> (usize, usize) {
        let Scroll::At { entry, line } = self.scroll else {
            return self.bottom_top(width, height);
        };
        if entry >= self.entries.len() {
            self.scroll = Scroll::Follow;
            return self.bottom_top(width, height);
        }
        let line = line.min(self.height(entry, width).saturating_sub(1));
        let mut available = self.height(entry, width) - line;
        let mut j = entry + 1;
        while available < height && j < self.entries.len() {
            available += self.height(j, width);
            j += 1;
        }
        if available < height {
            self.scroll = Scroll::Follow;
            return self.bottom_top(width, height);
        }
        self.scroll = Scroll::At { entry, line };
        (entry, line)
    }

    /// Scrolls up by `n` lines (leaves follow mode).
    pub fn scroll_up(&mut self, n: usize) {
        let (width, height) = self.viewport;
        let (mut entry, mut line) = self.top(width, usize::from(height));
        let mut n = n;
        while n > 0 {
            if line >= n {
                line -= n;
                break;
            }
            n -= line;
            line = 0;
            if entry == 0 {
                break;
            }
            entry -= 1;
            line = self.height(entry, width);
        }
        self.scroll = Scroll::At { entry, line };
    }

    /// Scrolls down by `n` lines; reaching the bottom resumes following.
    pub fn scroll_down(&mut self, n: usize) {
        if self.is_following() {
            return;
        }
        let (width, height) = self.viewport;
        let (mut entry, mut line) = self.top(width, usize::from(height));
        let mut n = n;
        while n > 0 && entry < self.entries.len() {
            let h = self.height(entry, width);
            if line + n < h {
                line += n;
                n = 0;
            } else {
                n -= h - line;
                entry += 1;
                line = 0;
            }
        }
        self.scroll = Scroll::At { entry, line };
        self.top(width, usize::from(height));
    }

    pub fn page_up(&mut self) {
        self.scroll_up(usize::from(self.viewport.1.saturating_sub(2)).max(1));
    }

    pub fn page_down(&mut self) {
        self.scroll_down(usize::from(self.viewport.1.saturating_sub(2)).max(1));
    }

    pub fn scroll_to_top(&mut self) {
        self.scroll = Scroll::At { entry: 0, line: 0 };
    }

    pub fn follow(&mut self) {
        self.scroll = Scroll::Follow;
    }

    /// Brings entry `index` into view (its first line at the top unless already visible).
    pub fn reveal(&mut self, index: usize) {
        let (width, height) = self.viewport;
        let (top_entry, top_line) = self.top(width, usize::from(height));
        let mut rows = 0usize;
        let mut e = top_entry;
        let mut line = top_line;
        while e < self.entries.len() && rows < usize::from(height) {
            if e == index {
                return;
            }
            rows += self.height(e, width) - line;
            line = 0;
            e += 1;
        }
        self.scroll = Scroll::At {
            entry: index,
            line: 0,
        };
    }

    /// Draws the visible part into `area` of `buf`. Returns the index of the first entry
    /// shown and whether content exists below the viewport.
    pub fn render(&mut self, area: Rect, buf: &mut Buffer) -> (usize, bool) {
        self.viewport = (area.width, area.height);
        if area.width == 0 || area.height == 0 || self.entries.is_empty() {
            return (0, false);
        }
        let height = usize::from(area.height);
        let (first, mut line) = self.top(area.width, height);
        let mut row = 0usize;
        let mut entry = first;
        while row < height && entry < self.entries.len() {
            let lines = self.lines(entry, area.width);
            for l in lines.iter().skip(line) {
                if row >= height {
                    break;
                }
                let y = area.y + u16::try_from(row).unwrap_or(u16::MAX);
                buf.set_line(area.x, y, l, area.width);
                row += 1;
            }
            line = 0;
            entry += 1;
        }
        let more_below = !self.is_following() && (entry < self.entries.len() || row >= height);
        (first, more_below)
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
