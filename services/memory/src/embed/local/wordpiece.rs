//! BERT's uncased WordPiece tokenizer (the `BertNormalizer` + `BertPreTokenizer` +
//! `WordPiece` pipeline of all-MiniLM-L6-v2's `tokenizer.json`), written out so the
//! local provider needs no tokenizer library. Checked token for token against the
//! reference tokenizer on the LoCoMo texts (see the crate's tests).

use std::collections::HashMap;
use std::path::Path;

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use crate::{Error, Result};

/// Words longer than this many characters become `[UNK]` (as in the reference).
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary and its special tokens.
#[derive(Debug)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    /// `[CLS]`.
    pub cls: u32,
    /// `[SEP]`.
    pub sep: u32,
}

impl WordPiece {
    /// Loads `vocab.txt` (one token per line; the line number is the id).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)?;
        let vocab: HashMap<String, u32> = text
            .lines()
            .enumerate()
            .map(|(i, t)| (t.to_owned(), i as u32))
            .collect();
        let id = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| Error::Embedding(format!("vocabulary has no {t}")))
        };
        Ok(Self {
            unk: id("[UNK]")?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            vocab,
        })
    }

    /// Token ids of `text`: `[CLS]`, at most `max_len - 2` word pieces, `[SEP]`.
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        'words: for word in pre_tokenize(&normalize(text)) {
            for id in self.word_pieces(&word) {
                if ids.len() + 1 >= max_len {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first split of one word; `[UNK]` when a piece is missing.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                let piece = if start == 0 {
                    word[from..to].to_owned()
                } else {
                    format!("##{}", &word[from..to])
                };
                if let Some(&id) = self.vocab.get(&piece) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => out.push(id),
                None => return vec![self.unk],
            }
            start = end;
        }
        out
    }
}

/// `BertNormalizer` with clean_text, handle_chinese_chars, lowercase and (implied by
/// lowercase) accent stripping.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_chinese(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else if c.is_whitespace() {
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned
        .nfd()
        .filter(|&c| !is_combining_mark(c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// `BertPreTokenizer`: split on whitespace, and every punctuation character alone.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_whitespace() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        } else if is_punctuation(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Control characters other than the whitespace ones (Unicode Cc and Cf).
fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    c.is_control()
        || matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
            | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// ASCII symbols count as punctuation in BERT, plus Unicode punctuation (P*) in the
/// blocks where it occurs in practice.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c,
            '\u{a1}' | '\u{a7}' | '\u{ab}' | '\u{b6}' | '\u{b7}' | '\u{bb}' | '\u{bf}'
            | '\u{37e}' | '\u{387}' | '\u{55a}'..='\u{55f}' | '\u{589}' | '\u{58a}'
            | '\u{5be}' | '\u{5c0}' | '\u{5c3}' | '\u{5c6}' | '\u{5f3}' | '\u{5f4}'
            | '\u{609}' | '\u{60a}' | '\u{60c}' | '\u{60d}' | '\u{61b}' | '\u{61e}' | '\u{61f}'
            | '\u{66a}'..='\u{66d}' | '\u{6d4}' | '\u{964}' | '\u{965}' | '\u{970}'
            | '\u{e4f}' | '\u{e5a}' | '\u{e5b}'
            | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{2043}' | '\u{2045}'..='\u{2051}'
            | '\u{2053}'..='\u{205e}' | '\u{207d}' | '\u{207e}' | '\u{208d}' | '\u{208e}'
            | '\u{2308}'..='\u{230b}' | '\u{2329}' | '\u{232a}' | '\u{2768}'..='\u{2775}'
            | '\u{27c5}' | '\u{27c6}' | '\u{27e6}'..='\u{27ef}' | '\u{2983}'..='\u{2998}'
            | '\u{29d8}'..='\u{29db}' | '\u{29fc}' | '\u{29fd}' | '\u{2cf9}'..='\u{2cfc}'
            | '\u{2cfe}' | '\u{2cff}' | '\u{2e00}'..='\u{2e2e}' | '\u{2e30}'..='\u{2e4f}'
            | '\u{3001}'..='\u{3003}' | '\u{3008}'..='\u{3011}' | '\u{3014}'..='\u{301f}'
            | '\u{3030}' | '\u{303d}' | '\u{30a0}' | '\u{30fb}'
            | '\u{fe10}'..='\u{fe19}' | '\u{fe30}'..='\u{fe52}' | '\u{fe54}'..='\u{fe61}'
            | '\u{fe63}' | '\u{fe68}' | '\u{fe6a}' | '\u{fe6b}'
            | '\u{ff01}'..='\u{ff03}' | '\u{ff05}'..='\u{ff0a}' | '\u{ff0c}'..='\u{ff0f}'
            | '\u{ff1a}' | '\u{ff1b}' | '\u{ff1f}' | '\u{ff20}' | '\u{ff3b}'..='\u{ff3d}'
            | '\u{ff3f}' | '\u{ff5b}' | '\u{ff5d}' | '\u{ff5f}'..='\u{ff65}')
}

/// The CJK ideograph blocks BERT pads with spaces.
fn is_chinese(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_splits_like_bert() {
        assert_eq!(
            pre_tokenize(&normalize("Héllo, WORLD!\tIt's  café—time…")),
            ["hello", ",", "world", "!", "it", "'", "s", "cafe", "—", "time", "…"]
        );
    }
}
