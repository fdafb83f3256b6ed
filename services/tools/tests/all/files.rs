//! read_file, write_file, edit_file and list_dir.

use std::os::unix::fs::{symlink, PermissionsExt};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{error_text, ok_text, project};

// ---- read_file ---------------------------------------------------------------------------

#[tokio::test]
async fn read_file_numbers_lines_like_cat_n() {
    let p = project();
    p.write("a.txt", "alpha\nbeta\r\ngamma");
    let out = p.call("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(
        ok_text(&out),
        "     1\talpha\n     2\tbeta\n     3\tgamma\n"
    );
    assert_eq!(
        out.metadata,
        json!({"path": "a.txt", "start_line": 1, "end_line": 3, "truncated": false})
    );
}

#[tokio::test]
async fn read_file_offset_and_limit_page_through() {
    let p = project();
    p.write("a.txt", "1\n2\n3\n4\n5\n");
    let out = p
        .call(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(
        ok_text(&out),
        "     2\t2\n     3\t3\n[showing lines 2-3; the file continues: read again with offset=4]\n"
    );
    assert_eq!(out.metadata["truncated"], json!(true));
    let out = p
        .call("read_file", json!({"path": "a.txt", "offset": 5}))
        .await;
    assert_eq!(ok_text(&out), "     5\t5\n");
    let out = p
        .call("read_file", json!({"path": "a.txt", "offset": 9}))
        .await;
    assert_eq!(
        error_text(&out),
        "offset 9 is past the end of a.txt (5 lines)"
    );
}

#[tokio::test]
async fn read_file_default_limit_is_2000_lines() {
    let p = project();
    let body: String = (1..=2100).map(|i| format!("{i}\n")).collect();
    p.write("big.txt", body);
    let out = p.call("read_file", json!({"path": "big.txt"})).await;
    let text = ok_text(&out);
    assert!(text.contains("  2000\t2000\n"));
    assert!(!text.contains("\t2001\n"));
    assert!(text.ends_with("read again with offset=2001]\n"), "{text}");
}

#[tokio::test]
async fn read_file_caps_long_lines_and_total_bytes() {
    let p = project();
    p.write("long.txt", format!("{}\nshort\n", "x".repeat(5000)));
    let out = p.call("read_file", json!({"path": "long.txt"})).await;
    let text = ok_text(&out);
    assert!(text.contains("… [line truncated: 5000 chars]\n"), "{text}");
    assert!(text.contains("     2\tshort\n"));

    let mut p = project();
    p.ctx.output_cap_bytes = 40;
    p.write("a.txt", "line one\nline two\nline three\nline four\n");
    let out = p.call("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(
        ok_text(&out),
        "     1\tline one\n     2\tline two\n[showing lines 1-2 (output size limit); the file continues: read again with offset=3]\n"
    );
}

#[tokio::test]
async fn read_file_refusals() {
    let p = project();
    p.write("bin.dat", b"\x7fELF\x00\x01\x02");
    p.write("empty.txt", "");
    std::fs::create_dir_all(p.root.join("dir")).unwrap();
    std::fs::write(p.outside().join("secret"), "s").unwrap();
    symlink(p.outside().join("secret"), p.root.join("link")).unwrap();

    let cases = [
        (
            json!({"path": "bin.dat"}),
            "bin.dat looks like a binary file (7 bytes); read_file only shows text",
        ),
        (
            json!({"path": "dir"}),
            "dir is a directory; use list_dir to see its entries",
        ),
        (
            json!({"path": "missing.txt"}),
            "missing.txt: no such file or directory",
        ),
        (
            json!({"path": "../outside/secret"}),
            "path is outside the project root: ../outside/secret",
        ),
        (
            json!({"path": "link"}),
            "path is outside the project root: link",
        ),
        (
            json!({}),
            "invalid arguments for read_file: missing required field `path`",
        ),
        (
            json!({"path": "a", "offset": "3"}),
            "invalid arguments for read_file: field `offset` must be an integer, got a string",
        ),
        (
            json!({"path": "a", "limit": 0}),
            "invalid arguments for read_file: field `limit` must be at least 1, got 0",
        ),
    ];
    for (args, expected) in cases {
        let out = p.call("read_file", args.clone()).await;
        assert_eq!(error_text(&out), expected, "{args}");
    }
    let out = p.call("read_file", json!({"path": "empty.txt"})).await;
    assert_eq!(ok_text(&out), "empty.txt is empty");
}

// ---- write_file --------------------------------------------------------------------------

#[tokio::test]
async fn write_file_creates_parents_and_reports_a_diff() {
    let p = project();
    let out = p
        .call(
            "write_file",
            json!({"path": "a/b/new.txt", "content": "one\ntwo\n"}),
        )
        .await;
    assert_eq!(ok_text(&out), "created a/b/new.txt (8 bytes, 2 lines)");
    assert_eq!(p.read("a/b/new.txt"), "one\ntwo\n");
    assert_eq!(
        out.metadata,
        json!({
            "path": "a/b/new.txt",
            "created": true,
            "bytes": 8,
            "diff": "--- /dev/null\n+++ b/a/b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n",
        })
    );
}

#[tokio::test]
async fn write_file_overwrites_atomically_and_keeps_permissions() {
    let p = project();
    p.write("run.sh", "echo old\n");
    std::fs::set_permissions(
        p.root.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let args = json!({"path": "run.sh", "content": "echo new\n"});
    let expected_diff = "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo old\n+echo new\n";

    // The preview shows the diff and writes nothing.
    assert_eq!(
        p.preview("write_file", &args).await.as_deref(),
        Some(expected_diff)
    );
    assert_eq!(p.read("run.sh"), "echo old\n");

    let out = p.call("write_file", args).await;
    assert_eq!(ok_text(&out), "updated run.sh (9 bytes, 1 lines)");
    assert_eq!(out.metadata["diff"], json!(expected_diff));
    assert_eq!(out.metadata["created"], json!(false));
    assert_eq!(p.read("run.sh"), "echo new\n");
    let mode = std::fs::metadata(p.root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(&p.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["run.sh"]);
}

#[tokio::test]
async fn write_file_refuses_escapes_and_directories() {
    let p = project();
    let outside = p.outside();
    symlink(&outside, p.root.join("escape")).unwrap();
    std::fs::create_dir_all(p.root.join("dir")).unwrap();
    for (path, expected) in [
        ("../x.txt", "path is outside the project root: ../x.txt"),
        (
            "escape/x.txt",
            "path is outside the project root: escape/x.txt",
        ),
        (
            "/tmp/lumina-should-not-exist.txt",
            "path is outside the project root: /tmp/lumina-should-not-exist.txt",
        ),
        ("dir", "dir is a directory"),
    ] {
        let out = p
            .call("write_file", json!({"path": path, "content": "x"}))
            .await;
        assert_eq!(error_text(&out), expected);
    }
    assert!(!outside.join("x.txt").exists());
    let out = p.call("write_file", json!({"path": "a.txt"})).await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for write_file: missing required field `content`"
    );
    assert_eq!(
        p.preview("write_file", &json!({"path": "../x", "content": ""}))
            .await,
        None
    );
}

// ---- edit_file ---------------------------------------------------------------------------

#[tokio::test]
async fn edit_file_replaces_a_unique_string() {
    let p = project();
    p.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    let args = json!({"path": "src/lib.rs", "old_string": "fn b()", "new_string": "fn beta()"});
    let expected_diff =
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn beta() {}\n";
    assert_eq!(
        p.preview("edit_file", &args).await.as_deref(),
        Some(expected_diff)
    );
    assert_eq!(p.read("src/lib.rs"), "fn a() {}\nfn b() {}\n");

    let out = p.call("edit_file", args).await;
    assert_eq!(ok_text(&out), "edited src/lib.rs (1 replacement)");
    assert_eq!(
        out.metadata,
        json!({"path": "src/lib.rs", "replacements": 1, "diff": expected_diff})
    );
    assert_eq!(p.read("src/lib.rs"), "fn a() {}\nfn beta() {}\n");
}

#[tokio::test]
async fn edit_file_requires_uniqueness_unless_replace_all() {
    let p = project();
    p.write("a.txt", "x = 1\nx = 2\nx = 3\n");
    let out = p
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x =", "new_string": "y ="}),
        )
        .await;
    assert_eq!(
        error_text(&out),
        "old_string found 3 times in a.txt; include more surrounding context to make it unique, or set replace_all to true"
    );
    assert_eq!(p.read("a.txt"), "x = 1\nx = 2\nx = 3\n");

    let out = p
        .call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x =", "new_string": "y =", "replace_all": true}),
        )
        .await;
    assert_eq!(ok_text(&out), "edited a.txt (3 replacements)");
    assert_eq!(p.read("a.txt"), "y = 1\ny = 2\ny = 3\n");
}

#[tokio::test]
async fn edit_file_errors() {
    let p = project();
    p.write("a.txt", "hello\n");
    p.write("latin1.txt", b"caf\xe9\n");
    let cases = [
        (
            json!({"path": "a.txt", "old_string": "nope", "new_string": "x"}),
            "old_string not found in a.txt; read the file and copy the text exactly, including whitespace",
        ),
        (
            json!({"path": "a.txt", "old_string": "hello", "new_string": "hello"}),
            "old_string and new_string are identical; nothing to change",
        ),
        (
            json!({"path": "a.txt", "old_string": "", "new_string": "x"}),
            "old_string must not be empty; use write_file to create a file",
        ),
        (
            json!({"path": "missing.txt", "old_string": "a", "new_string": "b"}),
            "missing.txt: no such file or directory",
        ),
        (
            json!({"path": "latin1.txt", "old_string": "caf", "new_string": "x"}),
            "latin1.txt is not valid UTF-8; cannot edit it",
        ),
        (
            json!({"path": "../a.txt", "old_string": "a", "new_string": "b"}),
            "path is outside the project root: ../a.txt",
        ),
        (
            json!({"path": "a.txt", "old_string": "hello", "new_string": 1}),
            "invalid arguments for edit_file: field `new_string` must be a string, got an integer",
        ),
        (
            json!({"path": "a.txt", "old_string": "hello", "new_string": "x", "replace_all": "yes"}),
            "invalid arguments for edit_file: field `replace_all` must be a boolean, got a string",
        ),
    ];
    for (args, expected) in cases {
        let out = p.call("edit_file", args.clone()).await;
        assert_eq!(error_text(&out), expected, "{args}");
    }
    assert_eq!(p.read("a.txt"), "hello\n");
}

// ---- list_dir ----------------------------------------------------------------------------

#[tokio::test]
async fn list_dir_sorts_and_marks_directories() {
    let p = project();
    p.write("b.txt", "");
    p.write(".hidden", "");
    p.write("src/main.rs", "");
    p.write("A.md", "");
    symlink(p.root.join("src"), p.root.join("src-link")).unwrap();
    symlink("b.txt", p.root.join("b-link")).unwrap();
    let out = p.call("list_dir", json!({"path": "."})).await;
    assert_eq!(
        ok_text(&out),
        format!(
            ".hidden\nA.md\nb-link -> b.txt\nb.txt\nsrc/\nsrc-link/ -> {}\n",
            p.root.join("src").display()
        )
    );
    assert_eq!(out.metadata["count"], json!(6));

    let out = p.call("list_dir", json!({"path": "src"})).await;
    assert_eq!(ok_text(&out), "main.rs\n");
}

#[tokio::test]
async fn list_dir_errors_and_empty() {
    let p = project();
    p.write("file.txt", "");
    std::fs::create_dir_all(p.root.join("empty")).unwrap();
    let out = p.call("list_dir", json!({"path": "empty"})).await;
    assert_eq!(ok_text(&out), "empty is empty");
    let out = p.call("list_dir", json!({"path": "nope"})).await;
    assert_eq!(error_text(&out), "nope: no such file or directory");
    let out = p.call("list_dir", json!({"path": "file.txt"})).await;
    assert!(
        error_text(&out).starts_with("cannot list file.txt:"),
        "{out:?}"
    );
    let out = p.call("list_dir", json!({"path": ".."})).await;
    assert_eq!(error_text(&out), "path is outside the project root: ..");
    let out = p.call("list_dir", json!({"path": "."  , "x": 1})).await;
    assert_eq!(
        error_text(&out),
        "invalid arguments for list_dir: unknown field `x` (expected one of: path)"
    );
}
