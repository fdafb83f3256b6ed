#![allow(clippy::unwrap_used, clippy::expect_used)]

//! docs/protocol.md's method table and the protocol's method table agree: the same methods,
//! scopes and routes, in the same order.

use lumina_protocol::Method;

/// `(method, scope, runs on)` of every row of the "## Methods" table.
fn documented() -> Vec<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## Methods\n")
        .nth(1)
        .expect("docs/protocol.md has a `## Methods` section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| method |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_start_matches("| ").trim_matches('`');
            (name.to_owned(), cells[1].to_owned(), cells[2].to_owned())
        })
        .collect()
}

#[test]
fn docs_protocol_md_lists_every_method_with_its_scope_and_route() {
    let table: Vec<(String, String, String)> = Method::ALL
        .iter()
        .map(|m| {
            (
                m.name().to_owned(),
                m.scope().doc_name().to_owned(),
                m.route().doc_name().to_owned(),
            )
        })
        .collect();
    pretty_assertions::assert_eq!(documented(), table);
}
