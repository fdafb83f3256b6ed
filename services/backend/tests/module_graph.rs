//! The modules of `lumina-backend` depend on each other one way: no module reaches, through
//! `crate::…` paths, a module that reaches back to it (a module and its own children are one
//! node). docs/architecture.md draws the graph this test checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its files name as `crate::<module>`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap();
        let first = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let uses = graph.entry(module.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let before = text[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `lumina_crate::…` and the like
            }
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                uses.insert(name);
            }
        }
    }
    graph
}

/// A cycle through `start`, if any (depth-first over the graph).
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let node = path.last().unwrap().clone();
    for next in graph.get(&node).into_iter().flatten() {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(start.to_string());
            return Some(cycle);
        }
        if !path.contains(next) && graph.contains_key(next) {
            path.push(next.clone());
            if let Some(cycle) = cycle_from(graph, start, path) {
                return Some(cycle);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn backend_modules_have_no_import_circles() {
    let graph = graph();
    assert!(graph.contains_key("dispatch") && graph.contains_key("cluster"));
    for module in graph.keys() {
        let cycle = cycle_from(&graph, module, &mut vec![module.clone()]);
        assert!(
            cycle.is_none(),
            "import circle: {}",
            cycle.unwrap().join(" → ")
        );
    }
}

#[test]
fn the_check_finds_a_circle_when_there_is_one() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycle_from(&graph, "a", &mut vec!["a".to_string()]),
        Some(vec!["a".to_string(), "b".to_string(), "a".to_string()])
    );
}
