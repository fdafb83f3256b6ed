//! `rag_ingest` and `rag_search` as the agent loop calls them: outputs, metadata, citations
//! and clear errors for invalid arguments.

use std::sync::Arc;

use lumina_config::AppRoot;
use lumina_rag::sqlite::SqliteRag;
use lumina_rag::tools::{tools, INGEST_TOOL, SEARCH_TOOL};
use lumina_rag::{Rag, RagOptions};
use lumina_tools::{Tool, ToolContext};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Setup {
    ingest: Arc<dyn Tool>,
    search: Arc<dyn Tool>,
    ctx: ToolContext,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn setup() -> Setup {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(project.path()).unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\nThe heron project stores its tiles in the blue bucket.\n",
    )
    .unwrap();
    let rag = Arc::new(Rag::new(
        Arc::new(SqliteRag::new(AppRoot::new(home.path()))),
        None,
        RagOptions::default(),
    ));
    let [ingest, search] = tools(rag);
    let ctx = ToolContext::new(&root, home.path().join("results"), "s1", "c1");
    Setup {
        ingest,
        search,
        ctx,
        _dirs: (home, project),
    }
}

#[tokio::test]
async fn descriptors_are_read_only() {
    let s = setup();
    for (tool, name) in [(&s.ingest, INGEST_TOOL), (&s.search, SEARCH_TOOL)] {
        let d = tool.descriptor();
        assert_eq!(d.name, name);
        assert!(d.read_only && !d.edits_files);
    }
}

#[tokio::test]
async fn ingest_then_search_cites_the_chunk() {
    let s = setup();
    let none = s.search.call(&s.ctx, json!({"query": "heron"})).await;
    assert!(!none.is_error);
    assert!(
        none.content.contains("call rag_ingest first"),
        "{}",
        none.content
    );

    let out = s.ingest.call(&s.ctx, json!({"paths": ["docs"]})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "Indexed 1 document(s): 1 added, 0 updated, 0 unchanged, 0 removed; 1 chunk(s) written."
    );
    assert_eq!(out.metadata["added"], json!(["docs/guide.md"]));

    let found = s
        .search
        .call(
            &s.ctx,
            json!({"query": "where are heron tiles stored?", "k": 3}),
        )
        .await;
    assert!(!found.is_error, "{}", found.content);
    assert!(
        found
            .content
            .contains("[docs/guide.md#chunk-1] lines 1-3 (bytes 0-63 of the file)\n# Guide"),
        "{}",
        found.content
    );
    assert_eq!(
        found.metadata["hits"][0]["citation"],
        "[docs/guide.md#chunk-1]"
    );
    assert_eq!(found.metadata["hits"][0]["start"], 0);

    let again = s
        .ingest
        .call(&s.ctx, json!({"paths": ["docs/guide.md"]}))
        .await;
    assert_eq!(
        again.content,
        "Indexed 1 document(s): 0 added, 0 updated, 1 unchanged, 0 removed; 0 chunk(s) written."
    );
    let miss = s.search.call(&s.ctx, json!({"query": "zeppelin"})).await;
    assert_eq!(
        miss.content,
        "No passage matches \"zeppelin\" in the 1 indexed document(s)."
    );
}

#[tokio::test]
async fn invalid_arguments_are_clear_errors() {
    let s = setup();
    let cases = [
        (&s.ingest, json!({}), "invalid arguments for rag_ingest: missing required field `paths`"),
        (&s.ingest, json!({"paths": "docs"}), "invalid arguments for rag_ingest: field `paths` must be an array, got a string"),
        (&s.ingest, json!({"paths": []}), "rag_ingest failed: invalid request: give at least one path (a file or a directory; \".\" is the whole project)"),
        (&s.ingest, json!({"paths": ["../../etc"]}), "rag_ingest failed: path is outside the project root: ../../etc"),
        (&s.search, json!({"query": "  "}), "rag_search failed: invalid request: the query is empty"),
        (&s.search, json!({"query": "x", "k": 0}), "invalid arguments for rag_search: field `k` must be at least 1, got 0"),
        (&s.search, json!({"query": "x", "k": 21}), "invalid arguments for rag_search: field `k` must be at most 20, got 21"),
        (&s.search, json!({"query": "x", "extra": 1}), "invalid arguments for rag_search: unknown field `extra` (expected one of: k, query)"),
    ];
    for (tool, args, message) in cases {
        let out = tool.call(&s.ctx, args.clone()).await;
        assert!(out.is_error, "{args}");
        assert_eq!(out.content, message, "{args}");
    }
}
