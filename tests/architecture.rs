//! The architecture as a test: no import cycles between the modules of any folder of `src/`
//! (docs/design/STYLE.md: layers, each using only those below it), and the trusted checker crate
//! depends on nothing of the rest.
//!
//! A module's dependencies are the `crate::...` and `super::...` paths its code names (test
//! modules and comments left out). Between two modules, the edge is drawn between their
//! ancestors that are siblings (children of the same folder), so a cycle anywhere shows up as a
//! cycle among the modules of one folder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module path of a source file (`src/synth/steps/mod.rs` -> `synth::steps`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file without comments and without its test module (which clippy keeps last).
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    body.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The module paths named in `code`, resolved against the module `at`.
fn references(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    for (i, _) in code.match_indices("crate::") {
        let mut path = Vec::new();
        let mut rest = &code[i + "crate::".len()..];
        loop {
            let name = ident(rest);
            if name.is_empty() || !name.starts_with(|c: char| c.is_lowercase()) {
                break;
            }
            rest = &rest[name.len()..];
            path.push(name);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(path);
    }
    for (i, _) in code.match_indices("super::") {
        if code[..i].ends_with("::") {
            continue; // `super::super::` is handled at its first `super`
        }
        let mut base: Vec<String> = at.to_vec();
        let mut rest = &code[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let name = ident(rest);
        if !name.is_empty() && name.starts_with(|c: char| c.is_lowercase()) {
            base.push(name);
        }
        out.push(base);
    }
    out
}

/// The sibling edge between two module paths: the children of their common ancestor on the
/// way to each (`None` when one contains the other, or both are the same).
fn sibling_edge(from: &[String], to: &[String]) -> Option<(String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common >= from.len() || common >= to.len() {
        return None;
    }
    let parent = from[..common].join("::");
    let name = |m: &str| if parent.is_empty() { m.to_string() } else { format!("{parent}::{m}") };
    Some((name(&from[common]), name(&to[common])))
}

/// The dependency graph between sibling modules of a crate's `src/`.
fn sibling_graph(files: &[(Vec<String>, String)]) -> Graph {
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = Graph::new();
    for (module, text) in files {
        for mut target in references(&code_of(text), module) {
            // A path names items inside modules: keep its longest prefix that is a module.
            while !target.is_empty() && !known.contains(&target) {
                target.pop();
            }
            if let Some((a, b)) = sibling_edge(module, &target) {
                graph.entry(a).or_default().insert(b);
            }
        }
    }
    graph
}

/// A cycle of the graph, if it has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(n: &str, graph: &Graph, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|x| x == m).expect("on the stack");
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Every `.rs` file under `dir`, with its module path relative to `dir`; files that are test
/// modules of their parent (`tests.rs`) are left out.
fn sources(dir: &Path) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((module_of(path.strip_prefix(dir).unwrap()), text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_module_depends_on_itself_through_its_siblings() {
    let files = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(files.len() > 40, "found only {} source files", files.len());
    let graph = sibling_graph(&files);
    // The layers of docs/design/STYLE.md that must hold whatever else changes.
    for (low, high) in [("topology", "collective"), ("collective", "schedule"), ("schedule", "verify"), ("verify", "synth"), ("synth", "cli")] {
        assert!(!graph.get(low).is_some_and(|d| d.contains(high)), "{low} must not depend on {high}");
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!("an import cycle between modules: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_checker_crate_stands_alone() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("checker/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).expect("a dependencies table");
    let names: Vec<&str> = deps.lines().filter_map(|l| l.split('=').next()).map(str::trim).filter(|n| !n.is_empty() && !n.starts_with('#')).collect();
    assert_eq!(names, ["num-bigint", "num-rational", "num-traits", "serde", "serde_json"], "the trusted base grew a dependency");
    for (_, text) in sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("checker/src")) {
        assert!(!text.contains("collsched::"), "the checker names the main crate");
    }
}

#[test]
fn the_analysis_finds_a_planted_cycle() {
    let file = |m: &str, text: &str| (m.split("::").map(str::to_string).collect::<Vec<_>>(), text.to_string());
    let files = vec![
        file("a", "use crate::b::f;"),
        file("b", "mod c;"),
        file("b::c", "fn g() { super::super::a::h() }"),
        file("d", "// crate::a only in a comment\n"),
        file("e", "fn x() {}\n#[cfg(test)]\nmod tests {\n use crate::a::y;\n}"),
    ];
    let graph = sibling_graph(&files);
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "a".into()]));
    assert!(!graph.contains_key("d") && !graph.contains_key("e"), "{graph:?}");
    let acyclic = vec![file("a", "use crate::b::f;"), file("b", "pub fn f() {}")];
    assert_eq!(find_cycle(&sibling_graph(&acyclic)), None);
}
