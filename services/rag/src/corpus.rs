//! A generated corpus with known answers, for the tests and `lumina-backend bench rag`
//! (docs/benchmarks.md): documents in every supported format (PDF and .docx written here,
//! byte by byte), filler prose that mentions every subject everywhere, and one planted fact
//! per question. A question's relevant chunks are those containing its fact sentence.
//!
//! Deterministic: the same `scale` writes the same bytes.

use std::io::Write;
use std::path::Path;

use crate::{Error, Result};

/// Subjects of the facts (each appears in filler across the corpus too).
const SUBJECTS: [&str; 10] = [
    "Orion", "Vega", "Lyra", "Draco", "Cygnus", "Perseus", "Auriga", "Carina", "Pavo", "Tucana",
];

const TEAMS: [&str; 10] = [
    "storage",
    "identity",
    "billing",
    "search",
    "edge",
    "payments",
    "telemetry",
    "release",
    "security",
    "data platform",
];

/// Kinds of fact: (fact template, question template). `{s}` is the subject, `{v}` a value.
const FACTS: [(&str, &str); 4] = [
    (
        "The {s} archive keeps nightly snapshots for {v} days before purging them.",
        "How many days does {s} keep its nightly snapshots?",
    ),
    (
        "Day-to-day operation of {s} belongs to the {v} team, who also carry its pager.",
        "Which team is responsible for operating {s} and its pager?",
    ),
    (
        "Clients reach the {s} gateway on TCP port {v} inside the private network.",
        "What TCP port does the {s} gateway use?",
    ),
    (
        "Signing keys for {s} are rotated every {v} weeks by an automated job.",
        "How often are the signing keys of {s} rotated?",
    ),
];

/// Filler vocabulary: generic operations prose.
const NOUNS: [&str; 24] = [
    "service",
    "deployment",
    "cluster",
    "dashboard",
    "runbook",
    "incident",
    "review",
    "budget",
    "migration",
    "schema",
    "queue",
    "cache",
    "replica",
    "pipeline",
    "alert",
    "audit",
    "policy",
    "backlog",
    "release",
    "endpoint",
    "ticket",
    "metric",
    "rollout",
    "quota",
];
const VERBS: [&str; 16] = [
    "tracks",
    "documents",
    "summarizes",
    "requires",
    "describes",
    "follows",
    "updates",
    "replaces",
    "monitors",
    "mentions",
    "reviews",
    "limits",
    "extends",
    "validates",
    "lists",
    "schedules",
];
const ADJECTIVES: [&str; 16] = [
    "quarterly",
    "regional",
    "internal",
    "shared",
    "legacy",
    "primary",
    "weekly",
    "manual",
    "automated",
    "critical",
    "minor",
    "external",
    "temporary",
    "stable",
    "new",
    "optional",
];

/// A question with its known answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question.
    pub question: String,
    /// The file holding the answer, relative to the corpus root.
    pub path: String,
    /// The fact sentence: a chunk is relevant when it contains it.
    pub fact: String,
}

impl Question {
    /// Whether a chunk of `path` with `text` holds the answer: the fact sentence, whatever
    /// the line wrapping of its format.
    pub fn answered_by(&self, path: &str, text: &str) -> bool {
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        path == self.path && words(text).contains(&words(&self.fact))
    }
}

/// What [`write`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    /// Files written, relative to the root.
    pub files: Vec<String>,
    /// The questions.
    pub questions: Vec<Question>,
}

/// A small deterministic generator (64-bit LCG).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let n = u64::try_from(items.len()).unwrap_or(1).max(1);
        let i = usize::try_from(self.next() % n).unwrap_or(0);
        items.get(i).copied().unwrap_or("")
    }

    fn sentence(&mut self) -> String {
        let subject = self.pick(&SUBJECTS);
        let mut s = format!(
            "The {} {} {} the {} {}",
            self.pick(&ADJECTIVES),
            self.pick(&NOUNS),
            self.pick(&VERBS),
            self.pick(&ADJECTIVES),
            self.pick(&NOUNS)
        );
        // One sentence in 32 names a subject: each appears across the corpus, not in every
        // chunk.
        match self.next() % 64 {
            0 => s.push_str(&format!(" of {subject}")),
            1 => s.push_str(&format!(" before the {subject} {}", self.pick(&NOUNS))),
            _ => s.push_str(&format!(
                " for the {} {}",
                self.pick(&NOUNS),
                self.pick(&NOUNS)
            )),
        }
        s.push('.');
        s
    }

    fn paragraph(&mut self, sentences: usize) -> String {
        (0..sentences)
            .map(|_| self.sentence())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// File extensions in rotation: every supported kind.
const KINDS: [&str; 10] = [
    "md", "txt", "rst", "html", "json", "csv", "tsv", "pdf", "docx", "md",
];

/// Writes the corpus under `root`: `scale` × 10 documents (each ≈ 2,500 tokens: 2–3 chunks;
/// two facts),
/// in every format, and `scale` × 20 questions (at most 40 distinct facts per scale unit).
pub fn write(root: &Path, scale: usize) -> Result<Corpus> {
    let scale = scale.max(1);
    let mut rng = Rng(0x5eed);
    let mut corpus = Corpus {
        files: Vec::new(),
        questions: Vec::new(),
    };
    let docs = 10 * scale;
    // Facts, two per document: (subject, kind, value).
    let mut facts = Vec::new();
    for f in 0..docs * 2 {
        // Kinds alternate; within a round of 40 every (subject, kind) pair occurs once.
        let kind = f % FACTS.len();
        let round = f / (SUBJECTS.len() * FACTS.len());
        let subject = SUBJECTS[(f / FACTS.len() + 3 * kind) % SUBJECTS.len()];
        let value = match kind {
            0 => format!("{}", 7 + (f * 13 + round) % 80),
            1 => TEAMS[(f * 7 + round) % TEAMS.len()].to_string(),
            2 => format!("{}", 7000 + (f * 37 + round * 11) % 900),
            _ => format!("{}", 2 + (f * 5 + round) % 20),
        };
        // Later rounds name a distinct subject variant so every fact stays unique.
        let subject = if round == 0 {
            subject.to_string()
        } else {
            format!("{subject}-{}", round + 1)
        };
        facts.push((subject, kind, value));
    }
    std::fs::create_dir_all(root.join("docs")).map_err(|source| Error::Io {
        path: root.to_path_buf(),
        source,
    })?;
    for d in 0..docs {
        let kind = KINDS[d % KINDS.len()];
        let rel = format!("docs/doc-{d:03}.{kind}");
        // Sections of filler; the two facts go into sections 2 and 6 (of 8).
        let mut sections: Vec<(String, String)> = (0..8)
            .map(|s| {
                (
                    format!("Section {} of document {d}", s + 1),
                    rng.paragraph(18),
                )
            })
            .collect();
        for (slot, fact_index) in [(1usize, d * 2), (5, d * 2 + 1)] {
            let (subject, k, value) = &facts[fact_index];
            let (fact_t, question_t) = FACTS[*k];
            let fact = fact_t.replace("{s}", subject).replace("{v}", value);
            let question = question_t.replace("{s}", subject);
            if let Some((_, body)) = sections.get_mut(slot) {
                // In the middle of the section's prose.
                let cut = body.len() / 2;
                let cut = body[cut..].find(". ").map_or(body.len(), |i| cut + i + 2);
                body.insert_str(cut, &format!("{fact} "));
            }
            corpus.questions.push(Question {
                question,
                path: rel.clone(),
                fact,
            });
        }
        let bytes = render(kind, d, &sections)?;
        let path = root.join(&rel);
        std::fs::write(&path, bytes).map_err(|source| Error::Io { path, source })?;
        corpus.files.push(rel);
    }
    Ok(corpus)
}

fn render(kind: &str, d: usize, sections: &[(String, String)]) -> Result<Vec<u8>> {
    let title = format!("Operations notes {d}");
    Ok(match kind {
        "md" => {
            let mut s = format!("# {title}\n");
            for (h, body) in sections {
                s.push_str(&format!("\n## {h}\n\n{body}\n"));
            }
            s.into_bytes()
        }
        "txt" => {
            let mut s = format!("{title}\n");
            for (h, body) in sections {
                s.push_str(&format!("\n{h}\n\n{}\n", wrap(body, 78).join("\n")));
            }
            s.into_bytes()
        }
        "rst" => {
            let mut s = format!("{title}\n{}\n", "=".repeat(title.len()));
            for (h, body) in sections {
                s.push_str(&format!("\n{h}\n{}\n\n{body}\n", "-".repeat(h.len())));
            }
            s.into_bytes()
        }
        "html" => {
            let mut s = format!(
                "<!doctype html><html><head><title>{title}</title><style>p {{ margin: 0 }}</style></head><body><h1>{title}</h1>"
            );
            for (h, body) in sections {
                s.push_str(&format!("<h2>{h}</h2><p>{body}</p>"));
            }
            s.push_str("<script>console.log('not text')</script></body></html>");
            s.into_bytes()
        }
        "json" => {
            let sections: Vec<serde_json::Value> = sections
                .iter()
                .map(|(h, body)| serde_json::json!({ "heading": h, "text": body }))
                .collect();
            serde_json::to_vec_pretty(&serde_json::json!({ "title": title, "sections": sections }))
                .map_err(|e| Error::Invalid(format!("corpus json: {e}")))?
        }
        "csv" | "tsv" => {
            let sep = if kind == "csv" { "," } else { "\t" };
            let mut s = format!("section{sep}note\n");
            for (h, body) in sections {
                for sentence in body.split_inclusive(". ") {
                    let sentence = sentence.trim();
                    if kind == "csv" {
                        s.push_str(&format!("{h}{sep}\"{}\"\n", sentence.replace('"', "\"\"")));
                    } else {
                        s.push_str(&format!("{h}{sep}{sentence}\n"));
                    }
                }
            }
            s.into_bytes()
        }
        "pdf" => {
            let mut lines = vec![title.clone(), String::new()];
            for (h, body) in sections {
                lines.push(h.clone());
                lines.extend(wrap(body, 90));
                lines.push(String::new());
            }
            pdf(&lines)
        }
        "docx" => {
            let mut paragraphs = vec![title.clone()];
            for (h, body) in sections {
                paragraphs.push(h.clone());
                paragraphs.push(body.clone());
            }
            docx(&paragraphs)?
        }
        _ => Vec::new(),
    })
}

/// Words of `text` in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A PDF 1.4 file showing `lines` in Helvetica (WinAnsi), 60 lines a page, each page's
/// content an uncompressed text object with one `Tj` per line and `T*` between lines.
pub fn pdf(lines: &[String]) -> Vec<u8> {
    let pages: Vec<&[String]> = lines.chunks(60).collect();
    let n = pages.len().max(1);
    // Objects: 1 catalog, 2 pages, 3 font, then per page: page, content.
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n)
                .map(|p| format!("{} 0 R", 4 + 2 * p))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    ];
    for (p, page) in pages.iter().enumerate() {
        let mut content = String::from("BT /F1 10 Tf 12 TL 50 760 Td\n");
        for line in page.iter() {
            let escaped = line
                .replace('\\', "\\\\")
                .replace('(', "\\(")
                .replace(')', "\\)");
            content.push_str(&format!("({escaped}) Tj T*\n"));
        }
        content.push_str("ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {} 0 R \
             /Resources << /Font << /F1 3 0 R >> >> >>",
            5 + 2 * p
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut out = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A minimal .docx (deflated zip: content types, package relationships, the document) with
/// one paragraph per entry of `paragraphs`.
pub fn docx(paragraphs: &[String]) -> Result<Vec<u8>> {
    let body: String = paragraphs
        .iter()
        .map(|p| {
            format!(
                "<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                xml_escape(p)
            )
        })
        .collect();
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
         <w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">\
         <w:body>{body}</w:body></w:document>"
    );
    let files = [
        (
            "[Content_Types].xml",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
             <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
             <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
             <Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>".to_string(),
        ),
        (
            "_rels/.rels",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
             <Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument\" Target=\"word/document.xml\"/></Relationships>".to_string(),
        ),
        ("word/document.xml", document),
    ];
    let zip_err = |e: zip::result::ZipError| Error::Invalid(format!("corpus docx: {e}"));
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in files {
        writer.start_file(name, options).map_err(zip_err)?;
        writer
            .write_all(text.as_bytes())
            .map_err(|e| Error::Invalid(format!("corpus docx: {e}")))?;
    }
    Ok(writer.finish().map_err(zip_err)?.into_inner())
}
