//! `docs/errors.md` has exactly one section per [`ErrorCode`]: a heading with the code's
//! wire name, then its cause, what to do and whether it is retryable. Fails when a variant
//! has no section, when a section names no variant, and — at compile time — when a variant
//! is added to the enum without being added to the list below.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use lumina_protocol::ErrorCode;

/// Every variant, from one list that feeds both the returned array and a `match` with no
/// wildcard arm: a new variant makes that match non-exhaustive, so this file stops
/// compiling until the variant is listed here (and then the doc test below asks for its
/// section).
macro_rules! every_variant {
    ($($variant:ident),+ $(,)?) => {{
        fn exhaustive(code: ErrorCode) {
            match code {
                $(ErrorCode::$variant)|+ => {}
            }
        }
        let all = [$(ErrorCode::$variant),+];
        all.iter().copied().for_each(exhaustive);
        all
    }};
}

fn every_code() -> Vec<ErrorCode> {
    every_variant![
        ParseError,
        InvalidUtf8,
        FrameTooLarge,
        UnknownMethod,
        InvalidParams,
        UnsupportedVersion,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        Fenced,
        Unavailable,
        Draining,
        RateLimited,
        NotImplemented,
        Internal,
    ]
    .to_vec()
}

/// The name a code has on the wire, from its serde form.
fn wire_name(code: ErrorCode) -> String {
    match serde_json::to_value(code).unwrap() {
        serde_json::Value::String(name) => name,
        other => panic!("{code:?} serializes as {other}, not as a string"),
    }
}

/// One `## ` section of the page: its heading and its body.
struct Section {
    heading: String,
    body: String,
}

fn sections() -> Vec<Section> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/errors.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut sections: Vec<Section> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(heading) = line.strip_prefix("## ") {
                sections.push(Section {
                    heading: heading.trim().to_owned(),
                    body: String::new(),
                });
                continue;
            }
        }
        if let Some(section) = sections.last_mut() {
            section.body.push_str(line);
            section.body.push('\n');
        }
    }
    sections
}

/// The code a heading names: the heading must be exactly `` `wire_name` ``.
fn heading_code(heading: &str) -> Result<(String, ErrorCode), String> {
    let name = heading
        .strip_prefix('`')
        .and_then(|h| h.strip_suffix('`'))
        .filter(|name| !name.is_empty() && !name.contains('`'))
        .ok_or_else(|| format!("heading `## {heading}` is not a code in backticks"))?;
    serde_json::from_value::<ErrorCode>(serde_json::Value::String(name.to_owned()))
        .map(|code| (name.to_owned(), code))
        .map_err(|_| format!("section `## {heading}` names no ErrorCode variant"))
}

#[test]
fn wire_names_are_the_serde_names_and_round_trip() {
    for code in every_code() {
        let name = wire_name(code);
        assert_eq!(name, code.as_str(), "{code:?}: serde and as_str() disagree");
        let back: ErrorCode = serde_json::from_value(serde_json::Value::String(name)).unwrap();
        assert_eq!(back, code);
    }
}

#[test]
fn every_code_has_one_section_and_every_section_names_a_code() {
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for section in sections() {
        match heading_code(&section.heading) {
            Ok((name, code)) => {
                if !documented.insert(wire_name(code)) {
                    problems.push(format!("`{name}` has more than one section"));
                }
                for part in ["**Cause.**", "**What to do.**", "**Retryable.**"] {
                    if !section.body.contains(part) {
                        problems.push(format!("the section of `{name}` has no {part}"));
                    }
                }
            }
            Err(problem) => problems.push(problem),
        }
    }
    for code in every_code() {
        let name = wire_name(code);
        if !documented.contains(&name) {
            problems.push(format!(
                "{code:?} (`{name}`) has no section in docs/errors.md"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/errors.md is out of step with ErrorCode:\n- {}",
        problems.join("\n- ")
    );
}
