//! Rule matching: shell commands (prefix, exact, compound), paths and tool-name globs.

use std::os::unix::fs::symlink;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

// ---- shell rules -------------------------------------------------------------------------

#[test]
fn shell_prefix_rule_matches_on_word_boundaries() {
    let e = engine(&["shell(git status:*)"], &[]);
    for ok in [
        "git status",
        "git status --short",
        "  git   status   -s ",
        "git status -- 'a  b'",
    ] {
        assert_eq!(run_shell(&e, ok), ALLOW_RULE, "{ok:?}");
    }
    for ask in [
        "git statusx",
        "git stash",
        "git",
        "sudo git status",
        "echo git status",
    ] {
        assert_eq!(run_shell(&e, ask), Verdict::Ask, "{ask:?}");
    }
}

#[test]
fn shell_exact_rule() {
    let e = engine(&["shell(npm test)"], &[]);
    assert_eq!(run_shell(&e, "npm test"), ALLOW_RULE);
    assert_eq!(run_shell(&e, "  npm   test "), ALLOW_RULE);
    assert_eq!(run_shell(&e, "npm test --watch"), Verdict::Ask);
    assert_eq!(run_shell(&e, "npm tests"), Verdict::Ask);
}

#[test]
fn compound_commands_never_match_allow_rules() {
    let e = engine(&["shell(git status:*)", "shell(git status)"], &[]);
    for cmd in [
        "git status; rm -rf /",
        "git status && curl x",
        "git status || curl x",
        "git status | sh",
        "git status & rm -rf /",
        "git status $(rm -rf /)",
        "git status `rm -rf /`",
        "git status > /etc/passwd",
        "git status < /dev/zero",
        "git status\nrm -rf /",
        "git status\r\nrm -rf /",
        "git status -- \"$(curl evil)\"",
    ] {
        assert_eq!(run_shell(&e, cmd), Verdict::Ask, "{cmd:?}");
    }
}

#[test]
fn bare_shell_allow_rule_allows_any_command() {
    let e = engine(&["shell"], &[]);
    assert_eq!(run_shell(&e, "make && make install"), ALLOW_RULE);
    let e = engine(&["shell(*)"], &[]);
    assert_eq!(run_shell(&e, "ls | wc -l"), ALLOW_RULE);
}

#[test]
fn shell_deny_rules_look_inside_compound_commands() {
    let e = engine(&["shell"], &["shell(rm:*)", "shell(git push:*)"]);
    for cmd in [
        "rm -rf /",
        "ls; rm -rf /",
        "ls && rm -rf /",
        "ls || rm x",
        "echo $(rm x)",
        "echo `rm x`",
        "sudo rm -rf /",
        "FOO=1 rm x",
        "/bin/rm x",
        "bash -c \"rm -rf /\"",
        "sh -c 'ls; rm x'",
        "find . -name '*.o' | xargs rm",
        "r\\m -rf x",
        "if true; then rm x; fi",
        "(cd sub && rm x)",
        "git   push origin main",
        "ls\ngit push",
    ] {
        assert!(
            matches!(run_shell(&e, cmd), Verdict::Deny { .. }),
            "{cmd:?} should be denied"
        );
    }
    for cmd in [
        "rmdir x",
        "echo rm",
        "git pushd",
        "ls -la",
        "git status && git log",
    ] {
        assert_eq!(run_shell(&e, cmd), ALLOW_RULE, "{cmd:?}");
    }
}

#[test]
fn shell_rules_without_a_command_argument_do_not_match() {
    let e = engine(&["shell(ls)"], &["shell(rm:*)"]);
    assert_eq!(
        decide(&e, PermissionMode::Ask, &shell(), json!({})),
        Verdict::Ask
    );
    assert_eq!(
        decide(&e, PermissionMode::Ask, &shell(), json!({"command": 5})),
        Verdict::Ask
    );
}

// ---- path rules --------------------------------------------------------------------------

#[test]
fn path_rules_without_a_root_are_lexical() {
    let e = engine(&["write_file(src/**)", "edit_file(*.md)"], &[]);
    let w = |path: &str| {
        decide(
            &e,
            PermissionMode::Ask,
            &write_file(),
            json!({"path": path, "content": ""}),
        )
    };
    assert_eq!(w("src/a.rs"), ALLOW_RULE);
    assert_eq!(w("./src/deep/er/a.rs"), ALLOW_RULE);
    assert_eq!(w("src/../src/a.rs"), ALLOW_RULE);
    assert_eq!(w("tests/a.rs"), Verdict::Ask);
    assert_eq!(w("src/../tests/a.rs"), Verdict::Ask);
    assert_eq!(w("../other/src/a.rs"), Verdict::Ask);
    assert_eq!(w("/src/a.rs"), Verdict::Ask);
    let edit = tool("edit_file", false, true);
    let ed = |path: &str| decide(&e, PermissionMode::Ask, &edit, json!({"path": path}));
    assert_eq!(ed("README.md"), ALLOW_RULE);
    // `*` does not cross directories.
    assert_eq!(ed("docs/guide.md"), Verdict::Ask);
}

#[test]
fn path_rules_with_a_root_resolve_like_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    symlink(root.join(".env"), root.join("innocent.txt")).unwrap();
    let e = engine(
        &["write_file(src/**)"],
        &["read_file(.env)", "read_file(/etc/**)"],
    )
    .with_project_root(&root);

    let abs = root.join("src/new/file.rs");
    for path in ["src/a.rs", "./src/x/y.rs", abs.to_str().unwrap()] {
        assert_eq!(
            decide(
                &e,
                PermissionMode::Ask,
                &write_file(),
                json!({"path": path, "content": ""})
            ),
            ALLOW_RULE,
            "{path}"
        );
    }
    assert_eq!(
        decide(
            &e,
            PermissionMode::Ask,
            &write_file(),
            json!({"path": "../x/src/a", "content": ""})
        ),
        Verdict::Ask
    );
    let read = |path: &str| decide(&e, PermissionMode::Ask, &read_file(), json!({"path": path}));
    assert_eq!(read(".env"), denied_by("read_file(.env)"));
    // A symlink is judged by its target.
    assert_eq!(read("innocent.txt"), denied_by("read_file(.env)"));
    // Absolute rules see paths outside the root.
    assert_eq!(read("/etc/passwd"), denied_by("read_file(/etc/**)"));
    assert_eq!(
        read("../../../../../../etc/passwd"),
        denied_by("read_file(/etc/**)")
    );
    assert_eq!(read("src/lib.rs"), ALLOW_MODE);
}

#[test]
fn path_rules_need_a_path_argument() {
    let e = engine(&["write_file(src/**)"], &[]);
    assert_eq!(
        decide(
            &e,
            PermissionMode::Ask,
            &write_file(),
            json!({"content": ""})
        ),
        Verdict::Ask
    );
}

// ---- tool-name rules ---------------------------------------------------------------------

#[test]
fn tool_name_globs() {
    let e = engine(&["mcp__github__*", "read_file"], &["mcp__github__delete_*"]);
    let call = |name: &str| {
        decide(
            &e,
            PermissionMode::Ask,
            &tool(name, false, false),
            json!({}),
        )
    };
    assert_eq!(call("mcp__github__list_issues"), ALLOW_RULE);
    assert_eq!(call("mcp__gitlab__list_issues"), Verdict::Ask);
    assert_eq!(
        call("mcp__github__delete_repo"),
        denied_by("mcp__github__delete_*")
    );
    // A rule for one tool never matches another.
    assert_eq!(call("read_files"), Verdict::Ask);
}

// ---- web_fetch URL rules ----------------------------------------------------------------

fn fetch(e: &PermissionEngine, url: &str) -> Verdict {
    decide(
        e,
        PermissionMode::Ask,
        &tool("web_fetch", false, false),
        json!({ "url": url }),
    )
}

#[test]
fn url_rules_match_scheme_host_port_and_path() {
    let e = engine(&["web_fetch(https://docs.rs/*)"], &[]);
    for ok in [
        "https://docs.rs/",
        "https://docs.rs/serde/latest/serde/",
        "https://DOCS.rs/a?b=c",
        "https://docs.rs:443/x",
    ] {
        assert_eq!(fetch(&e, ok), ALLOW_RULE, "{ok}");
    }
    for ask in [
        "http://docs.rs/x",
        "https://docs.rs.evil.com/x",
        "https://evil.com/https://docs.rs/x",
        "https://a.docs.rs/x",
        "https://docs.rs:8443/x",
        "https://docs.rs@evil.com/x",
        "https://user:pw@docs.rs/x",
        "file:///etc/passwd",
        "not a url",
    ] {
        assert_eq!(fetch(&e, ask), Verdict::Ask, "{ask}");
    }
}

#[test]
fn subdomain_and_domain_rules() {
    let e = engine(&["web_fetch(https://*.github.io/*)"], &[]);
    assert_eq!(fetch(&e, "https://me.github.io/blog"), ALLOW_RULE);
    assert_eq!(fetch(&e, "https://github.io/blog"), Verdict::Ask);
    assert_eq!(fetch(&e, "https://evil.com/x.github.io/y"), Verdict::Ask);
    assert_eq!(fetch(&e, "https://evilgithub.io/"), Verdict::Ask);

    let e = engine(&["web_fetch(domain:rust-lang.org)"], &[]);
    assert_eq!(fetch(&e, "https://rust-lang.org/"), ALLOW_RULE);
    assert_eq!(fetch(&e, "http://doc.rust-lang.org/std/"), ALLOW_RULE);
    assert_eq!(fetch(&e, "https://notrust-lang.org/"), Verdict::Ask);
    assert_eq!(fetch(&e, "https://rust-lang.org.evil.com/"), Verdict::Ask);
}

#[test]
fn url_deny_rules_beat_allow_rules_and_see_through_credentials() {
    let e = engine(
        &["web_fetch"],
        &[
            "web_fetch(domain:evil.com)",
            "web_fetch(https://docs.rs/private/*)",
        ],
    );
    assert_eq!(fetch(&e, "https://ok.com/"), ALLOW_RULE);
    assert_eq!(
        fetch(&e, "https://user@evil.com/"),
        denied_by("web_fetch(domain:evil.com)")
    );
    assert_eq!(
        fetch(&e, "https://docs.rs/private/a/b"),
        denied_by("web_fetch(https://docs.rs/private/*)")
    );
}

#[test]
fn bad_url_rules_are_refused() {
    for rule in [
        "web_fetch(docs.rs/*)",
        "web_fetch(ftp://docs.rs/*)",
        "web_fetch(https://do*cs.rs/*)",
        "web_fetch(https://u@docs.rs/*)",
        "web_fetch(https://docs.rs:99999/*)",
        "web_fetch(domain:*.docs.rs)",
    ] {
        assert!(Rule::parse(rule).is_err(), "{rule}");
    }
}
