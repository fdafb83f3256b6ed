//! Documents to text: which files RAG ingests ([`Format`]) and how each becomes the plain
//! text that is chunked and cited ([`extract`]).
//!
//! - `.txt .md .markdown .rst .json .csv .tsv`: the file's own UTF-8 text, unchanged, so a
//!   citation's byte and line span are the file's own.
//! - `.html .htm`: Markdown through `web_fetch`'s HTML5 converter
//!   ([`lumina_tools::builtin::html_to_markdown`]).
//! - `.pdf`: the text of each page by `lopdf` (streams inflate to at most
//!   [`PDF_MAX_STREAM_BYTES`]), pages separated by a blank line.
//! - `.docx`: `word/document.xml` from the zip (at most [`DOCX_MAX_XML_BYTES`] inflated),
//!   read by `quick-xml`: one line per paragraph, `<w:tab/>` as a tab, `<w:br/>` as a line
//!   break.
//!
//! The spans of the other formats are spans of this extracted text, which the store keeps
//! chunk by chunk (docs/rag.md#citations). Parsers see hostile input: every failure is an
//! [`Error::Extract`], never a panic (a panic inside a parser is caught and reported the
//! same way).

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::{Error, Result};

/// Bytes one PDF stream may inflate to.
pub const PDF_MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;
/// Bytes `word/document.xml` of a .docx may inflate to.
pub const DOCX_MAX_XML_BYTES: u64 = 64 * 1024 * 1024;

/// A supported document format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text, Markdown, reStructuredText, JSON, CSV, TSV: the file's text as is.
    Text,
    /// HTML, converted to Markdown.
    Html,
    /// PDF, the text of its pages.
    Pdf,
    /// Word (Office Open XML), the text of its paragraphs.
    Docx,
}

impl Format {
    /// The format of `path` by its extension (case-insensitive), `None` when unsupported.
    pub fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "txt" | "text" | "md" | "markdown" | "rst" | "json" | "csv" | "tsv" => Some(Self::Text),
            "html" | "htm" => Some(Self::Html),
            "pdf" => Some(Self::Pdf),
            "docx" => Some(Self::Docx),
            _ => None,
        }
    }

    /// Its name as stored and reported.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Html => "html",
            Self::Pdf => "pdf",
            Self::Docx => "docx",
        }
    }

    /// Whether a citation's span is a span of the file itself (not of extracted text).
    pub fn spans_are_file_spans(self) -> bool {
        self == Self::Text
    }
}

/// The extensions [`Format::of`] accepts, for messages and docs.
pub const EXTENSIONS: &[&str] = &[
    "txt", "text", "md", "markdown", "rst", "json", "csv", "tsv", "html", "htm", "pdf", "docx",
];

/// The text of a document. `shown` names it in errors (the project-relative path).
pub fn extract(format: Format, bytes: &[u8], shown: &str) -> Result<String> {
    let fail = |reason: Unreadable| Error::Extract {
        path: shown.to_string(),
        reason: reason.0,
    };
    let text = match format {
        Format::Text => utf8(bytes).map_err(fail)?,
        Format::Html => {
            let html = String::from_utf8_lossy(bytes);
            guarded(|| Ok(lumina_tools::builtin::html_to_markdown(&html, None))).map_err(fail)?
        }
        Format::Pdf => guarded(|| pdf_text(bytes)).map_err(fail)?,
        Format::Docx => guarded(|| docx_text(bytes)).map_err(fail)?,
    };
    Ok(text)
}

/// Why a document yields no text (becomes [`Error::Extract`]'s reason).
#[derive(Debug)]
struct Unreadable(String);

/// Runs a parser, turning a panic inside it into an error (parsers of hostile input).
fn guarded(parse: impl FnOnce() -> Result<String, Unreadable>) -> Result<String, Unreadable> {
    match catch_unwind(AssertUnwindSafe(parse)) {
        Ok(result) => result,
        Err(_) => Err(Unreadable("the parser failed on this file".into())),
    }
}

/// UTF-8 text (a leading byte-order mark dropped); anything else is refused, since spans
/// must be exact.
fn utf8(bytes: &[u8]) -> Result<String, Unreadable> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) if text.contains('\0') => Err(Unreadable("it looks like a binary file".into())),
        Ok(text) => Ok(text.to_string()),
        Err(err) => Err(Unreadable(format!("it is not UTF-8 text ({err})"))),
    }
}

fn pdf_text(bytes: &[u8]) -> Result<String, Unreadable> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(PDF_MAX_STREAM_BYTES),
        ..lopdf::LoadOptions::default()
    };
    let doc = lopdf::Document::load_mem_with_options(bytes, options)
        .map_err(|e| Unreadable(format!("not a readable PDF ({e})")))?;
    let mut pages = Vec::new();
    for number in doc.get_pages().keys() {
        match doc.extract_text_with_limit(&[*number], PDF_MAX_STREAM_BYTES) {
            Ok(text) => pages.push(normalize_pdf_page(&text)),
            Err(err) => {
                tracing::debug!(page = number, error = %err, "pdf page without text");
                pages.push(String::new());
            }
        }
    }
    let text = pages
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if text.trim().is_empty() {
        return Err(Unreadable(
            "the PDF has no extractable text (scanned images need OCR)".into(),
        ));
    }
    Ok(text)
}

/// A page's text with line ends normalized and trailing blanks trimmed.
fn normalize_pdf_page(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn docx_text(bytes: &[u8]) -> Result<String, Unreadable> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| Unreadable(format!("not a .docx (zip) file ({e})")))?;
    let entry = archive
        .by_name("word/document.xml")
        .map_err(|e| Unreadable(format!("no word/document.xml ({e})")))?;
    let mut xml = Vec::new();
    entry
        .take(DOCX_MAX_XML_BYTES + 1)
        .read_to_end(&mut xml)
        .map_err(|e| Unreadable(format!("cannot inflate word/document.xml ({e})")))?;
    if xml.len() as u64 > DOCX_MAX_XML_BYTES {
        return Err(Unreadable(format!(
            "word/document.xml inflates to more than {DOCX_MAX_XML_BYTES} bytes"
        )));
    }
    let xml = String::from_utf8(xml)
        .map_err(|e| Unreadable(format!("word/document.xml is not UTF-8 ({e})")))?;
    docx_xml_text(&xml)
}

/// The text of a WordprocessingML body: `w:t` runs, a tab per `w:tab`, a line break per
/// `w:br`/`w:cr`, a line per paragraph `w:p`.
fn docx_xml_text(xml: &str) -> Result<String, Unreadable> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = String::new();
    let mut paragraph = String::new();
    let mut in_text = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| Unreadable(format!("damaged word/document.xml ({e})")))?;
        match event {
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text = true,
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => {
                    out.push_str(paragraph.trim_end());
                    out.push('\n');
                    paragraph.clear();
                }
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" => paragraph.push('\t'),
                "br" | "cr" => paragraph.push('\n'),
                "p" => out.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => paragraph.push_str(&t.xml10_content()),
            Event::CData(t) if in_text => paragraph.push_str(&t.into_inner()),
            Event::GeneralRef(r) if in_text => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c),
                    Ok(None) => match r.as_ref() {
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "amp" => Some('&'),
                        "apos" => Some('\''),
                        "quot" => Some('"'),
                        _ => None,
                    },
                    Err(_) => None,
                };
                if let Some(c) = resolved {
                    paragraph.push(c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out.push_str(paragraph.trim_end());
    // Runs of empty paragraphs collapse into one blank line.
    let mut text = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        text.push_str(line);
        text.push('\n');
    }
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(Unreadable("the document has no text".into()));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::of(Path::new("a/README.MD")), Some(Format::Text));
        assert_eq!(Format::of(Path::new("x.tsv")), Some(Format::Text));
        assert_eq!(Format::of(Path::new("x.htm")), Some(Format::Html));
        assert_eq!(Format::of(Path::new("x.pdf")), Some(Format::Pdf));
        assert_eq!(Format::of(Path::new("x.docx")), Some(Format::Docx));
        assert_eq!(Format::of(Path::new("x.rs")), None);
        assert_eq!(Format::of(Path::new("Makefile")), None);
    }

    #[test]
    fn text_must_be_utf8() {
        assert_eq!(extract(Format::Text, b"\xEF\xBB\xBFhi", "a").unwrap(), "hi");
        let err = extract(Format::Text, b"\xff\xfe", "a.txt").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("cannot extract text from a.txt: it is not UTF-8"));
        assert!(extract(Format::Text, b"a\0b", "a.txt").is_err());
    }

    #[test]
    fn garbage_pdf_and_docx_are_errors_not_panics() {
        for format in [Format::Pdf, Format::Docx] {
            for bytes in [
                &b""[..],
                b"%PDF-1.4\n1 0 obj<<>>",
                b"PK\x03\x04garbage",
                &[0u8; 64],
            ] {
                assert!(extract(format, bytes, "f").is_err());
            }
        }
    }

    #[test]
    fn docx_paragraphs_tabs_breaks_and_entities() {
        let xml = r#"<?xml version="1.0"?><w:document xmlns:w="x"><w:body>
            <w:p><w:r><w:t>Hello</w:t></w:r><w:r><w:t xml:space="preserve"> world &amp; co</w:t></w:r></w:p>
            <w:p/><w:p/><w:p/>
            <w:p><w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c&#233;</w:t></w:r></w:p>
            </w:body></w:document>"#;
        assert_eq!(docx_xml_text(xml).unwrap(), "Hello world & co\n\na\tb\ncé");
    }

    #[test]
    fn html_becomes_markdown() {
        let text = extract(
            Format::Html,
            b"<html><body><h1>Title</h1><p>Some <b>bold</b> text.</p><script>x()</script></body></html>",
            "a.html",
        )
        .unwrap();
        assert!(text.contains("# Title"), "{text}");
        assert!(text.contains("Some bold text."), "{text}");
        assert!(!text.contains("x()"), "{text}");
    }
}
