//! BERT's uncased WordPiece tokenization for all-MiniLM-L6-v2, by the Hugging Face
//! `tokenizers` crate: the pipeline of the model's `tokenizer.json` (`BertNormalizer`:
//! clean text, space out CJK ideographs, strip accents, lowercase; `BertPreTokenizer`;
//! `WordPiece` with `##` continuations and `[UNK]` for words over 100 characters; `[CLS]` …
//! `[SEP]`), built over the folder's `vocab.txt`. That file is the one the model folder is
//! required to hold; `tokenizer.json` is optional there and pads and truncates to a fixed
//! 128 tokens. The special tokens are not matched in the text (`[SEP]` written in a memory
//! is tokenized as the characters it is), as the hand-written tokenizer this replaced did.

use std::path::Path;

use tokenizers::models::wordpiece::WordPiece as WordPieceModel;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{Encoding, Tokenizer, TruncationDirection};

use lumina_memory::{Error, Result};

/// Words longer than this many characters become `[UNK]` (as in the model's tokenizer).
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece tokenizer and its special tokens.
pub struct WordPiece {
    tokenizer: Tokenizer,
    /// `[CLS]`.
    pub cls: u32,
    /// `[SEP]`.
    pub sep: u32,
}

impl std::fmt::Debug for WordPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordPiece")
            .field("vocab", &self.tokenizer.get_vocab_size(false))
            .finish_non_exhaustive()
    }
}

fn tokenizer_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Embedding(format!("{}: {e}", path.display()))
}

impl WordPiece {
    /// Loads `vocab.txt` (one token per line; the line number is the id).
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_vocab(&std::fs::read(path)?).map_err(|e| match e {
            Error::Embedding(e) => tokenizer_error(path, e),
            e => e,
        })
    }

    /// The tokenizer over a `vocab.txt`'s bytes.
    fn from_vocab(bytes: &[u8]) -> Result<Self> {
        let error = |e: Box<dyn std::error::Error + Send + Sync>| Error::Embedding(e.to_string());
        let vocab = WordPieceModel::read_bytes(bytes).map_err(error)?;
        let id = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| Error::Embedding(format!("vocabulary has no {t}")))
        };
        id("[UNK]")?;
        let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
        let model = WordPieceModel::builder()
            .vocab(vocab)
            .unk_token("[UNK]".to_owned())
            .continuing_subword_prefix("##".to_owned())
            .max_input_chars_per_word(MAX_WORD_CHARS)
            .build()
            .map_err(error)?;
        let mut tokenizer = Tokenizer::new(model);
        // clean_text, handle_chinese_chars, strip_accents (None: as lowercase), lowercase.
        tokenizer
            .with_normalizer(Some(BertNormalizer::new(true, true, None, true)))
            .map_err(error)?;
        tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
        tokenizer.with_post_processor(Some(BertProcessing::new(
            ("[SEP]".to_owned(), sep),
            ("[CLS]".to_owned(), cls),
        )));
        Ok(Self {
            tokenizer,
            cls,
            sep,
        })
    }

    /// Token ids of `text`: `[CLS]`, at most `max_len - 2` word pieces, `[SEP]`.
    pub fn encode(&self, text: &str, max_len: usize) -> Result<Vec<u32>> {
        Ok(self.encoding(text, max_len)?.get_ids().to_vec())
    }

    /// The whole encoding of `text` (ids, attention mask, offsets), cut as in
    /// [`Self::encode`].
    pub fn encoding(&self, text: &str, max_len: usize) -> Result<Encoding> {
        let error = |e| Error::Embedding(format!("MiniLM tokenizer: {e}"));
        let mut encoding = self.tokenizer.encode(text, false).map_err(error)?;
        encoding.truncate(max_len.saturating_sub(2), 0, TruncationDirection::Right);
        self.tokenizer
            .post_process(encoding, None, true)
            .map_err(error)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n,\nworld\n!\nit\n'\ns\ncafe\n—\ntime\n\
                         …\nun\n##believ\n##able\n[\n]\nsep\n北\n京\na";

    fn tokens(wp: &WordPiece, text: &str, max_len: usize) -> Vec<String> {
        let vocab: Vec<&str> = VOCAB.lines().collect();
        wp.encode(text, max_len)
            .unwrap()
            .iter()
            .map(|&id| vocab[id as usize].to_owned())
            .collect()
    }

    #[test]
    fn normalizes_and_splits_like_bert() {
        let wp = WordPiece::from_vocab(VOCAB.as_bytes()).unwrap();
        assert_eq!((wp.cls, wp.sep), (2, 3));
        assert_eq!(
            tokens(&wp, "Héllo, WORLD!\tIt's  café—time…", 256),
            [
                "[CLS]", "hello", ",", "world", "!", "it", "'", "s", "cafe", "—", "time", "…",
                "[SEP]"
            ]
        );
        // Word pieces, unknown words, CJK ideographs one by one, specials spelt out in
        // the text are text, control characters are dropped.
        assert_eq!(
            tokens(&wp, "Unbelievable unknown 北京 [SEP]\u{0}\u{200b}", 256),
            ["[CLS]", "un", "##believ", "##able", "[UNK]", "北", "京", "[", "sep", "]", "[SEP]"]
        );
        assert_eq!(tokens(&wp, "", 256), ["[CLS]", "[SEP]"]);
        assert_eq!(
            tokens(&wp, &"a".repeat(101), 256),
            ["[CLS]", "[UNK]", "[SEP]"]
        );
    }

    #[test]
    fn cuts_to_max_len_with_the_specials() {
        let wp = WordPiece::from_vocab(VOCAB.as_bytes()).unwrap();
        assert_eq!(
            tokens(&wp, "unbelievable hello world", 4),
            ["[CLS]", "un", "##believ", "[SEP]"]
        );
        let encoding = wp.encoding(&"hello ".repeat(300), 256).unwrap();
        assert_eq!(encoding.len(), 256);
        assert!(encoding.get_attention_mask().iter().all(|&m| m == 1));
        assert_eq!(encoding.get_ids()[255], wp.sep);
        assert!(WordPiece::from_vocab(b"[PAD]\n[CLS]\n[SEP]\n").is_err());
    }
}
