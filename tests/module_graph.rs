//! The crate's top-level modules (`src/<name>.rs` or `src/<name>/`) depend
//! on each other without cycles: a module is read after the modules it
//! uses. The graph is read from the code's `crate::<module>` paths (`use`
//! lines and inline paths; comments, doc links and unit-test modules are
//! skipped).
//!
//! `cargo test --test tests module_graph -- --nocapture` prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its unit-test module and comment lines.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//"))
}

/// Every `crate::<name>` in `line`.
fn crate_paths(line: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // another name ending in `crate`, e.g. `my_crate::`
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        names.push(&rest[..len]);
    }
    names
}

fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let top_of = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).expect("under src/");
        let first = rel.components().next().expect("a path component");
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|p| top_of(p)).collect();
    let mut graph = Graph::new();
    for path in &files {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let from = top_of(path);
        let text = fs::read_to_string(path).expect("a readable source file");
        for line in code_lines(&text) {
            for to in crate_paths(line) {
                if to != from && modules.contains(to) {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .insert(to.to_string());
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        u: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, bool>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(u.to_string(), false);
        path.push(u.to_string());
        for v in graph.get(u).into_iter().flatten() {
            match state.get(v) {
                Some(false) => {
                    let at = path.iter().position(|p| p == v).expect("on the path");
                    let mut cycle = path[at..].to_vec();
                    cycle.push(v.clone());
                    return Some(cycle);
                }
                Some(true) => {}
                None => {
                    if let Some(c) = visit(v, graph, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(u.to_string(), true);
        None
    }
    let mut state = BTreeMap::new();
    for u in graph.keys() {
        if !state.contains_key(u)
            && let Some(c) = visit(u, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn crate_paths_are_read_from_code() {
    assert_eq!(
        crate_paths("use crate::model::{Model, ModelSpec}; let x = crate::rng::stream(1);"),
        ["model", "rng"]
    );
    // A macro body's `$crate::` path depends on that module too.
    assert_eq!(crate_paths("$crate::simd::level()"), ["simd"]);
    assert!(crate_paths("my_crate::simd::level()").is_empty());
    let text = "use crate::a::X;\n// see crate::b\n#[cfg(test)]\nmod tests {\n use crate::c;\n}\n";
    let seen: Vec<&str> = code_lines(text).flat_map(crate_paths).collect();
    assert_eq!(seen, ["a"]);
}

#[test]
fn find_cycle_finds_one() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn the_top_level_modules_form_a_dag() {
    let graph = module_graph();
    for (from, to) in &graph {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        println!("{from} -> {}", to.join(" "));
    }
    assert!(
        graph.contains_key("experiment"),
        "the graph was read: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the modules depend on each other in a cycle: {} (each uses the next through \
             `crate::`; move the shared part down, e.g. parsing into `scenario/`)",
            cycle.join(" -> ")
        );
    }
}
