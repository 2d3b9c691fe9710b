//! The simulator's top-level modules form no import cycle: each can be read
//! knowing only the ones below it. A reference from one module to another
//! is any `crate::<module>` path outside comments and unit tests, or a name
//! in a `use crate::{...}` group.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Top-level module → the top-level modules it refers to.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(src).expect("under src");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("a file name")
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" {
            continue;
        }
        let text = fs::read_to_string(file).expect("readable source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = graph.entry(top.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // Only the first names of a one-line group; multi-line
                    // groups are written one path per module by rustfmt.
                    for item in group.split([',', '}']) {
                        let name: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() {
                            deps.insert(name);
                        }
                    }
                } else {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    deps.insert(name);
                }
            }
        }
        deps.remove(&top);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    graph
}

fn collect_rs(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(node).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    let mut seen = BTreeSet::new();
    walk(graph, start, start, &mut path, &mut seen).then_some(path)
}

#[test]
fn simulator_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.len() > 10, "found the modules: {graph:?}");
    assert!(graph["sim"].contains("link"), "sees references: {graph:?}");
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, deps)| (m.to_string(), deps.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        cycle_from(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(cycle_from(&graph, "d"), None);
}
