//! glob and grep.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{error_text, ok_text, project, Project};

fn tree() -> Project {
    let p = project();
    p.write(".gitignore", "target/\n*.log\n");
    p.write("Cargo.toml", "[package]\nname = \"demo\"\n");
    p.write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    p.write(
        "src/util/mod.rs",
        "pub fn helper() -> u32 {\n    42 // hello again\n}\n",
    );
    p.write("docs/guide.md", "Say hello.\n");
    p.write(".github/ci.yml", "hello: ci\n");
    p.write(".git/config", "hello = git internals\n");
    p.write("target/debug/out.rs", "fn hello() {}\n");
    p.write("debug.log", "hello log\n");
    p.write("data.bin", b"hello\x00\x01binary");
    p
}

// ---- glob --------------------------------------------------------------------------------

#[tokio::test]
async fn glob_matches_relative_paths_and_respects_gitignore() {
    let p = tree();
    let out = p.call("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(ok_text(&out), "src/main.rs\nsrc/util/mod.rs\n");
    assert_eq!(out.metadata, json!({"count": 2, "truncated": false}));

    // `*` stays in one directory.
    let out = p.call("glob", json!({"pattern": "*.toml"})).await;
    assert_eq!(ok_text(&out), "Cargo.toml\n");
    let out = p.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(ok_text(&out), "src/main.rs\n");

    // Hidden files are found, `.git` and ignored files are not.
    let out = p.call("glob", json!({"pattern": "**/*"})).await;
    assert_eq!(
        ok_text(&out),
        ".github/ci.yml\n.gitignore\nCargo.toml\ndata.bin\ndocs/guide.md\nsrc/main.rs\nsrc/util/mod.rs\n"
    );

    // Leading `./` and absolute patterns inside the root are accepted.
    let out = p.call("glob", json!({"pattern": "./docs/*.md"})).await;
    assert_eq!(ok_text(&out), "docs/guide.md\n");
    let abs = format!("{}/docs/*.md", p.root.display());
    let out = p.call("glob", json!({"pattern": abs})).await;
    assert_eq!(ok_text(&out), "docs/guide.md\n");
}

#[tokio::test]
async fn glob_edge_cases() {
    let p = tree();
    let out = p.call("glob", json!({"pattern": "**/*.py"})).await;
    assert_eq!(ok_text(&out), "no files match **/*.py");
    let out = p.call("glob", json!({"pattern": "src/[a"})).await;
    assert!(
        error_text(&out).starts_with("invalid glob pattern:"),
        "{out:?}"
    );
    let out = p.call("glob", json!({"pattern": "../*"})).await;
    assert_eq!(
        error_text(&out),
        "glob patterns are relative to the project root: ../*"
    );
    let out = p.call("glob", json!({"pattern": "/etc/*"})).await;
    assert_eq!(
        error_text(&out),
        "glob patterns are relative to the project root: /etc/*"
    );
    let out = p.call("glob", json!({"pattern": 3})).await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for glob: field `pattern` must be a string, got an integer"
    );
}

#[tokio::test]
async fn glob_caps_results() {
    let p = project();
    for i in 0..1005 {
        p.write(&format!("f/{i:04}.txt"), "");
    }
    let out = p.call("glob", json!({"pattern": "f/*.txt"})).await;
    let text = ok_text(&out);
    assert_eq!(text.lines().count(), 1001);
    assert!(text.starts_with("f/0000.txt\n"));
    assert!(text.contains("f/0999.txt\n[truncated: showing the first 1000 of 1005 matches"));
    assert_eq!(out.metadata, json!({"count": 1005, "truncated": true}));
}

// ---- grep --------------------------------------------------------------------------------

#[tokio::test]
async fn grep_prints_path_line_text() {
    let p = tree();
    let out = p.call("grep", json!({"pattern": "hello"})).await;
    assert_eq!(
        ok_text(&out),
        ".github/ci.yml:1:hello: ci\n\
         docs/guide.md:1:Say hello.\n\
         src/main.rs:2:    println!(\"hello\");\n\
         src/util/mod.rs:2:    42 // hello again\n"
    );
    assert_eq!(
        out.metadata,
        json!({"matches": 4, "files": 4, "truncated": false})
    );
}

#[tokio::test]
async fn grep_filters_by_path_and_glob() {
    let p = tree();
    let out = p
        .call("grep", json!({"pattern": "hello", "glob": "*.rs"}))
        .await;
    assert_eq!(
        ok_text(&out),
        "src/main.rs:2:    println!(\"hello\");\nsrc/util/mod.rs:2:    42 // hello again\n"
    );
    let out = p
        .call("grep", json!({"pattern": "hello", "glob": "src/util/**"}))
        .await;
    assert_eq!(ok_text(&out), "src/util/mod.rs:2:    42 // hello again\n");
    let out = p
        .call("grep", json!({"pattern": "(?i)SAY", "path": "docs"}))
        .await;
    assert_eq!(ok_text(&out), "docs/guide.md:1:Say hello.\n");
    // A file named explicitly is searched even when ignored.
    let out = p
        .call("grep", json!({"pattern": "hello", "path": "debug.log"}))
        .await;
    assert_eq!(ok_text(&out), "debug.log:1:hello log\n");
    let out = p
        .call("grep", json!({"pattern": "^fn", "path": "src/main.rs"}))
        .await;
    assert_eq!(ok_text(&out), "src/main.rs:1:fn main() {\n");
}

#[tokio::test]
async fn grep_errors_and_no_matches() {
    let p = tree();
    let out = p.call("grep", json!({"pattern": "zzz"})).await;
    assert_eq!(ok_text(&out), "no matches for `zzz` in .\n");
    assert_eq!(out.metadata["matches"], json!(0));
    let out = p.call("grep", json!({"pattern": "("})).await;
    assert!(error_text(&out).starts_with("invalid regex:"), "{out:?}");
    let out = p.call("grep", json!({"pattern": "x", "path": "../"})).await;
    assert_eq!(error_text(&out), "path is outside the project root: ../");
    let out = p
        .call("grep", json!({"pattern": "x", "path": "nope"}))
        .await;
    assert_eq!(error_text(&out), "nope: no such file or directory");
    let out = p.call("grep", json!({"path": "src"})).await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for grep: missing required field `pattern`"
    );
}

#[tokio::test]
async fn grep_caps_matches_and_lines() {
    let p = project();
    let body: String = (0..600).map(|i| format!("match {i}\n")).collect();
    p.write("many.txt", body);
    p.write("wide.txt", format!("needle {}\n", "y".repeat(1000)));
    let out = p.call("grep", json!({"pattern": "^match"})).await;
    let text = ok_text(&out);
    assert_eq!(text.lines().count(), 501);
    assert!(text.ends_with(
        "many.txt:500:match 499\n[truncated: showing the first 500 matches; narrow the pattern, path or glob]\n"
    ));
    assert_eq!(out.metadata["truncated"], json!(true));

    let out = p.call("grep", json!({"pattern": "needle"})).await;
    assert!(
        ok_text(&out).ends_with("… [line truncated: 1007 chars]\n"),
        "{out:?}"
    );
}
