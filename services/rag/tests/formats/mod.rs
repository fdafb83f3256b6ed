//! The generated PDF and .docx read back through lopdf and zip + quick-xml; the SQLite
//! database's place under the AppRoot and a reopened store.

use std::sync::Arc;

use lumina_config::AppRoot;
use lumina_rag::corpus;
use lumina_rag::extract::{extract, Format};
use lumina_rag::sqlite::SqliteRag;
use lumina_rag::{Rag, RagOptions, RagStore};
use pretty_assertions::assert_eq;

#[test]
fn generated_pdf_reads_back_line_by_line() {
    let lines: Vec<String> = (0..130)
        .map(|i| format!("Line {i} (with parentheses) and a back\\slash"))
        .collect();
    let bytes = corpus::pdf(&lines);
    let text = extract(Format::Pdf, &bytes, "x.pdf").unwrap();
    let got: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(got, lines.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn generated_docx_reads_back_paragraph_by_paragraph() {
    let paragraphs = vec![
        "Title & <subtitle>".to_string(),
        "First paragraph with \"quotes\".".to_string(),
        "Second.".to_string(),
    ];
    let bytes = corpus::docx(&paragraphs).unwrap();
    assert_eq!(&bytes[..2], b"PK");
    let text = extract(Format::Docx, &bytes, "x.docx").unwrap();
    assert_eq!(text, paragraphs.join("\n"));
}

#[tokio::test]
async fn the_database_lives_under_the_project_data_dir_and_survives_a_reopen() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("a.md"),
        "Kestrel nests on the north tower.",
    )
    .unwrap();
    let app_root = AppRoot::new(home.path());
    let store = Arc::new(SqliteRag::new(app_root.clone()));
    let rag = Rag::new(store.clone(), None, RagOptions::default());
    let report = rag.ingest(project.path(), &["a.md".into()]).await.unwrap();
    let db = app_root.rag_db(&report.project);
    assert_eq!(
        db,
        home.path()
            .join(format!("data/projects/{}/rag.sqlite", report.project))
    );
    assert!(db.is_file());
    // Nothing under the Memory Fabric's directory.
    assert!(!home.path().join("data/memory").exists());
    drop(rag);
    drop(store);
    let reopened = Rag::new(
        Arc::new(SqliteRag::new(app_root)),
        None,
        RagOptions::default(),
    );
    let hits = reopened
        .search(project.path(), "kestrel", 5)
        .await
        .unwrap()
        .hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].citation, "[a.md#chunk-1]");
    let again = reopened
        .ingest(project.path(), &["a.md".into()])
        .await
        .unwrap();
    assert_eq!((again.unchanged, again.chunks_written), (1, 0));
}

#[tokio::test]
async fn damaged_documents_are_skipped_and_reported() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let p = project.path();
    std::fs::write(p.join("bad.pdf"), b"%PDF-1.7 not really").unwrap();
    std::fs::write(p.join("bad.docx"), b"PK\x03\x04 truncated").unwrap();
    std::fs::write(p.join("latin1.txt"), b"caf\xe9").unwrap();
    std::fs::write(p.join("ok.md"), "fine").unwrap();
    std::fs::create_dir(p.join(".hidden")).unwrap();
    std::fs::write(p.join(".hidden/secret.md"), "hidden").unwrap();
    std::fs::write(p.join(".gitignore"), "ignored.md\n").unwrap();
    std::fs::write(p.join("ignored.md"), "ignored").unwrap();
    let store: Arc<dyn RagStore> = Arc::new(SqliteRag::new(AppRoot::new(home.path())));
    let rag = Rag::new(store.clone(), None, RagOptions::default());
    let report = rag.ingest(p, &[".".into()]).await.unwrap();
    assert_eq!(report.added, vec!["ok.md".to_string()]);
    let mut skipped: Vec<&str> = report.skipped.iter().map(|s| s.path.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, ["bad.docx", "bad.pdf", "latin1.txt"]);
    assert!(
        report
            .skipped
            .iter()
            .all(|s| s.reason.starts_with("cannot extract text from")),
        "{:?}",
        report.skipped
    );
    // A file named directly is ingested even when hidden.
    let direct = rag.ingest(p, &[".hidden/secret.md".into()]).await.unwrap();
    assert_eq!(direct.added, vec![".hidden/secret.md".to_string()]);
    // An unsupported file named directly is reported.
    std::fs::write(p.join("main.rs"), "fn main() {}").unwrap();
    let unsupported = rag.ingest(p, &["main.rs".into()]).await.unwrap();
    assert!(
        unsupported.skipped[0]
            .reason
            .starts_with("unsupported format"),
        "{:?}",
        unsupported.skipped
    );
}
