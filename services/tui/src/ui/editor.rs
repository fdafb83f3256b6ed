//! The prompt editor: multi-line text with a cursor, prompt history, and large pastes folded
//! into a placeholder (`[Pasted text #1 +120 lines]`) that is expanded on submit, so a pasted
//! log does not turn the input box into a wall of text.

use super::wrap::char_width;

/// A paste larger than this (characters or lines) is folded into a placeholder.
const FOLD_CHARS: usize = 1000;
const FOLD_LINES: usize = 10;
/// History entries kept in memory.
const HISTORY_MAX: usize = 500;

#[derive(Debug, Clone, Default)]
pub struct Editor {
    lines: Vec<String>,
    row: usize,
    /// Cursor column, in characters.
    col: usize,
    pastes: Vec<(String, String)>,
    paste_counter: usize,
    history: Vec<String>,
    /// Index into `history` while browsing it.
    history_pos: Option<usize>,
    /// What was typed before browsing the history started.
    draft: String,
}

/// The editor laid out for a width: visual rows and the cursor's (column, row) on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visual {
    pub rows: Vec<String>,
    pub cursor: (usize, usize),
}

fn byte_at(line: &str, col: usize) -> usize {
    line.char_indices()
        .nth(col)
        .map(|(i, _)| i)
        .unwrap_or(line.len())
}

impl Editor {
    pub fn new(history: Vec<String>) -> Self {
        Self {
            lines: vec![String::new()],
            history,
            ..Self::default()
        }
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// The text as typed (placeholders not expanded).
    pub fn raw_text(&self) -> String {
        self.lines.join("\n")
    }

    /// The text to submit: placeholders replaced by what was pasted.
    pub fn text(&self) -> String {
        let mut text = self.raw_text();
        for (placeholder, content) in &self.pastes {
            text = text.replace(placeholder, content);
        }
        text
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    pub fn clear(&mut self) {
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.pastes.clear();
        self.history_pos = None;
    }

    /// Replaces the content; the cursor goes to the end.
    pub fn set_text(&mut self, text: &str) {
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.pastes.clear();
        self.insert_str(text);
    }

    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// Records a submitted prompt (consecutive duplicates are kept once).
    pub fn push_history(&mut self, text: &str) {
        if text.trim().is_empty() || self.history.last().map(String::as_str) == Some(text) {
            return;
        }
        self.history.push(text.to_string());
        if self.history.len() > HISTORY_MAX {
            let excess = self.history.len() - HISTORY_MAX;
            self.history.drain(..excess);
        }
        self.history_pos = None;
    }

    fn line(&self) -> &str {
        &self.lines[self.row]
    }

    fn line_len(&self) -> usize {
        self.line().chars().count()
    }

    pub fn insert_char(&mut self, c: char) {
        let at = byte_at(&self.lines[self.row], self.col);
        self.lines[self.row].insert(at, c);
        self.col += 1;
    }

    /// Inserts text that may hold newlines (CR-LF and CR count as newlines).
    pub fn insert_str(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            for c in part.chars() {
                if c == '\t' {
                    self.insert_str_plain("    ");
                } else if !c.is_control() {
                    self.insert_char(c);
                }
            }
        }
    }

    fn insert_str_plain(&mut self, s: &str) {
        for c in s.chars() {
            self.insert_char(c);
        }
    }

    /// A bracketed paste: large ones become a placeholder. Terminals (and tmux) often send
    /// line ends as CR, so every spelling counts as a newline.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let text = text.as_str();
        let line_count = text.lines().count();
        if text.chars().count() > FOLD_CHARS || line_count > FOLD_LINES {
            self.paste_counter += 1;
            let placeholder = format!("[Pasted text #{} +{line_count} lines]", self.paste_counter);
            self.insert_str_plain(&placeholder);
            self.pastes.push((placeholder, text.to_string()));
        } else {
            self.insert_str(text);
        }
    }

    pub fn newline(&mut self) {
        let at = byte_at(&self.lines[self.row], self.col);
        let rest = self.lines[self.row].split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let at = byte_at(&self.lines[self.row], self.col - 1);
            self.lines[self.row].remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.line_len();
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        if self.col < self.line_len() {
            let at = byte_at(&self.lines[self.row], self.col);
            self.lines[self.row].remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.line_len();
        }
    }

    pub fn right(&mut self) {
        if self.col < self.line_len() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// Moves up a line; false when already on the first line (the caller may then browse
    /// the history).
    pub fn up(&mut self) -> bool {
        if self.row == 0 {
            return false;
        }
        self.row -= 1;
        self.col = self.col.min(self.line_len());
        true
    }

    pub fn down(&mut self) -> bool {
        if self.row + 1 >= self.lines.len() {
            return false;
        }
        self.row += 1;
        self.col = self.col.min(self.line_len());
        true
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = self.line_len();
    }

    pub fn word_left(&mut self) {
        let chars: Vec<char> = self.line().chars().collect();
        let mut col = self.col;
        while col > 0 && chars[col - 1].is_whitespace() {
            col -= 1;
        }
        while col > 0 && !chars[col - 1].is_whitespace() {
            col -= 1;
        }
        if col == self.col && self.row > 0 {
            self.left();
        } else {
            self.col = col;
        }
    }

    pub fn word_right(&mut self) {
        let chars: Vec<char> = self.line().chars().collect();
        let mut col = self.col;
        while col < chars.len() && chars[col].is_whitespace() {
            col += 1;
        }
        while col < chars.len() && !chars[col].is_whitespace() {
            col += 1;
        }
        if col == self.col {
            self.right();
        } else {
            self.col = col;
        }
    }

    /// Ctrl-W: deletes the word before the cursor (at a line start: joins the lines).
    pub fn delete_word_back(&mut self) {
        if self.col == 0 {
            self.backspace();
            return;
        }
        let chars: Vec<char> = self.line().chars().collect();
        let end = self.col.min(chars.len());
        let mut col = end;
        while col > 0 && chars[col - 1].is_whitespace() {
            col -= 1;
        }
        while col > 0 && !chars[col - 1].is_whitespace() {
            col -= 1;
        }
        let from = byte_at(&self.lines[self.row], col);
        let to = byte_at(&self.lines[self.row], end);
        self.lines[self.row].replace_range(from..to, "");
        self.col = col;
    }

    /// Ctrl-U: deletes from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let at = byte_at(&self.lines[self.row], self.col);
        self.lines[self.row].replace_range(..at, "");
        self.col = 0;
    }

    /// Ctrl-K: deletes from the cursor to the end of the line.
    pub fn kill_to_end(&mut self) {
        let at = byte_at(&self.lines[self.row], self.col);
        self.lines[self.row].truncate(at);
    }

    /// Up at the first line: the previous history entry. False when there is none.
    pub fn history_prev(&mut self) -> bool {
        let pos = match self.history_pos {
            None if self.history.is_empty() => return false,
            None => {
                self.draft = self.raw_text();
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(pos) => pos - 1,
        };
        self.history_pos = Some(pos);
        let text = self.history[pos].clone();
        self.replace_keeping_history(&text);
        // Further Ups keep walking back: start on the first line.
        self.row = 0;
        self.col = self.line_len();
        true
    }

    /// Down at the last line: the next history entry, then the draft.
    pub fn history_next(&mut self) -> bool {
        let Some(pos) = self.history_pos else {
            return false;
        };
        if pos + 1 < self.history.len() {
            self.history_pos = Some(pos + 1);
            let text = self.history[pos + 1].clone();
            self.replace_keeping_history(&text);
        } else {
            self.history_pos = None;
            let draft = std::mem::take(&mut self.draft);
            self.replace_keeping_history(&draft);
        }
        true
    }

    fn replace_keeping_history(&mut self, text: &str) {
        let pos = self.history_pos;
        self.set_text(text);
        self.history_pos = pos;
    }

    /// The word being typed: its start column and text (from the last whitespace before the
    /// cursor up to the cursor).
    pub fn current_token(&self) -> (usize, String) {
        let chars: Vec<char> = self.line().chars().collect();
        let mut start = self.col.min(chars.len());
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        (
            start,
            chars[start..self.col.min(chars.len())].iter().collect(),
        )
    }

    /// Replaces the current token (see [`Editor::current_token`]) with `replacement`.
    pub fn replace_token(&mut self, replacement: &str) {
        let (start, _) = self.current_token();
        let from = byte_at(&self.lines[self.row], start);
        let to = byte_at(&self.lines[self.row], self.col);
        self.lines[self.row].replace_range(from..to, replacement);
        self.col = start + replacement.chars().count();
    }

    /// Lays the text out in rows of at most `width` cells (hard wrap: the cursor maps to
    /// exactly one cell).
    pub fn visual(&self, width: usize) -> Visual {
        let width = width.max(2);
        let mut rows = Vec::new();
        let mut cursor = (0, 0);
        for (r, line) in self.lines.iter().enumerate() {
            let mut row = String::new();
            let mut used = 0;
            for (c_index, c) in line.chars().enumerate() {
                let w = char_width(c);
                if used + w > width {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                if r == self.row && c_index == self.col {
                    cursor = (used, rows.len());
                }
                row.push(c);
                used += w;
            }
            if r == self.row && self.col >= line.chars().count() {
                if used >= width {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                cursor = (used, rows.len());
            }
            rows.push(row);
        }
        Visual { rows, cursor }
    }
}

#[cfg(test)]
#[path = "editor_tests.rs"]
mod tests;
