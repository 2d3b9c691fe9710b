//! No import cycle between the modules of any folder, in any crate of the
//! workspace: each module can be read knowing only the ones below it, and
//! a folder's files stand in layers as the crate's top-level modules do.
//!
//! A module refers to another through a `crate::`, `super::` or `self::`
//! path (in a `use` tree or in code), or a `use` of a child module by its
//! name, outside comments, strings and `#[cfg(test)]` items. A path naming
//! an item a module imports (`use child::Item;` in a `mod.rs`, then
//! `super::Item` in a sibling) refers to the module the item comes from.
//! Two modules in the same folder depend on each other when any file under
//! one refers to any module under the other; a folder's own `mod.rs` stands
//! above its files and is not one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["mesh", "mac", "csma"]`.
type ModPath = Vec<String>;

/// A folder (a module path) → its modules → the modules of the same folder
/// they refer to, with the first place each reference is made.
type FolderGraphs = BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>>;

/// The source of one module, reduced to tokens.
struct Module {
    path: ModPath,
    file: PathBuf,
    /// (token, line) with comments, strings and test-only items removed.
    tokens: Vec<(String, usize)>,
}

/// Source text → identifier and punctuation tokens with their lines;
/// comments, string and character literals and whitespace dropped.
fn tokenize(text: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == 'r' && (at(i + 1) == '"' || (at(i + 1) == '#' && !is_ident(at(i + 2)))) {
            // A raw string: r"..." or r#"..."#.
            let mut hashes = 0;
            i += 1;
            while at(i) == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                line += usize::from(at(i) == '\n');
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while is_ident(at(i)) {
                    i += 1;
                }
            }
        } else if is_ident(c) {
            let start = i;
            while is_ident(at(i)) {
                i += 1;
            }
            tokens.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(("::".into(), line));
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push((c.to_string(), line));
            i += 1;
        }
    }
    tokens
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Drops each item marked `#[cfg(test)]` (up to its `;` or its closing
/// brace) and returns the names of the modules so marked (`mod tests;`).
fn drop_test_items(tokens: &mut Vec<(String, usize)>) -> BTreeSet<String> {
    let mut test_mods = BTreeSet::new();
    let mut kept = Vec::with_capacity(tokens.len());
    let mut i = 0;
    let text = |i: usize| tokens.get(i).map_or("", |t: &(String, usize)| t.0.as_str());
    while i < tokens.len() {
        let is_cfg_test = text(i) == "#"
            && text(i + 1) == "["
            && text(i + 2) == "cfg"
            && text(i + 3) == "("
            && text(i + 4) == "test"
            && text(i + 5) == ")"
            && text(i + 6) == "]";
        if !is_cfg_test {
            kept.push(tokens[i].clone());
            i += 1;
            continue;
        }
        i += 7;
        let mut depth = 0usize;
        while i < tokens.len() {
            match text(i) {
                "mod" if depth == 0 && text(i + 2) == ";" => {
                    test_mods.insert(text(i + 1).to_string());
                }
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                ";" if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    *tokens = kept;
    test_mods
}

/// Every module of the crate whose sources are under `src` (the library:
/// `lib.rs` and the files it declares; a binary's `main.rs` is left out),
/// without the modules that exist only under `#[cfg(test)]`.
fn crate_modules(src: &Path) -> Vec<Module> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let mut modules = Vec::new();
    let mut test_only: BTreeSet<ModPath> = BTreeSet::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let mut path: ModPath = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_str().expect("a UTF-8 name").to_string())
            .collect();
        if path == ["main"] || path.first().is_some_and(|p| p == "bin") {
            continue;
        }
        if path.last().is_some_and(|l| l == "mod" || l == "lib") {
            path.pop();
        }
        let text = fs::read_to_string(&file).expect("readable source");
        let mut tokens = tokenize(&text);
        for name in drop_test_items(&mut tokens) {
            let mut child = path.clone();
            child.push(name);
            test_only.insert(child);
        }
        modules.push(Module { path, file, tokens });
    }
    modules.retain(|m| !test_only.iter().any(|t| m.path.starts_with(t)));
    modules
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .expect("readable dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// One path a module names: its segments (starting `crate`, `super`,
/// `self` or a plain name) and the line it is on.
struct Reference {
    segments: Vec<String>,
    line: usize,
    /// The name it is imported as, for `use` trees (`None` for globs and
    /// paths in code).
    alias: Option<String>,
}

/// The paths of the `use` tree starting at `tokens[*i]`, each under
/// `prefix`; leaves `*i` after the tree.
fn use_tree(
    tokens: &[(String, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<Reference>,
) {
    let text = |i: usize| tokens.get(i).map_or("", |t: &(String, usize)| t.0.as_str());
    let mut segments = prefix.to_vec();
    let line = tokens.get(*i).map_or(0, |t| t.1);
    if text(*i) == "::" {
        *i += 1;
    }
    loop {
        match text(*i) {
            "{" => {
                *i += 1;
                while text(*i) != "}" && *i < tokens.len() {
                    use_tree(tokens, i, &segments, out);
                    if text(*i) == "," {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "*" => {
                *i += 1;
                out.push(Reference {
                    segments,
                    line,
                    alias: None,
                });
                return;
            }
            name if name.chars().next().is_some_and(is_ident) => {
                if name == "self" && !segments.is_empty() && segments.len() == prefix.len() {
                    // `a::{self, ...}`: `a` itself.
                } else {
                    segments.push(name.to_string());
                }
                *i += 1;
                if text(*i) == "::" {
                    *i += 1;
                    continue;
                }
                let alias = if text(*i) == "as" {
                    *i += 2;
                    text(*i - 1).to_string()
                } else {
                    segments.last().cloned().unwrap_or_default()
                };
                out.push(Reference {
                    segments,
                    line,
                    alias: Some(alias),
                });
                return;
            }
            _ => return,
        }
    }
}

/// The paths a module names: its `use` trees, and the `crate::`,
/// `super::` and `self::` paths in its code.
fn references(module: &Module) -> Vec<Reference> {
    let tokens = &module.tokens;
    let text = |i: usize| tokens.get(i).map_or("", |t: &(String, usize)| t.0.as_str());
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if text(i) == "use" {
            i += 1;
            use_tree(tokens, &mut i, &[], &mut out);
            continue;
        }
        let starts_path = matches!(text(i), "crate" | "super" | "self")
            && text(i + 1) == "::"
            && (i == 0 || text(i - 1) != "::");
        if starts_path {
            let line = tokens[i].1;
            let mut segments = vec![text(i).to_string()];
            i += 1;
            while text(i) == "::" && text(i + 1).chars().next().is_some_and(is_ident) {
                segments.push(text(i + 1).to_string());
                i += 2;
            }
            out.push(Reference {
                segments,
                line,
                alias: None,
            });
            continue;
        }
        i += 1;
    }
    out
}

/// `segments` named from `module` → the same path from the crate root,
/// or `None` for a path into another crate.
fn absolute(module: &ModPath, segments: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut path = module.clone();
    let mut rest = segments;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            path.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                path.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module named plainly; anything else is another crate.
            let mut child = module.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
        }
        None => return None,
    }
    path.extend(rest.iter().cloned());
    Some(path)
}

/// The module an absolute path refers to: its longest prefix that is a
/// module, followed through the imports of that module when the next
/// segment is a name it imports.
fn target(
    path: &[String],
    modules: &BTreeSet<ModPath>,
    imports: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    depth: usize,
) -> ModPath {
    let len = (0..=path.len())
        .rev()
        .find(|&n| modules.contains(&path[..n].to_vec()))
        .unwrap_or(0);
    let module = path[..len].to_vec();
    if depth < 8 {
        if let Some(via) = path
            .get(len)
            .and_then(|name| imports.get(&module)?.get(name))
        {
            let mut followed = via.clone();
            followed.extend(path[len + 1..].iter().cloned());
            return target(&followed, modules, imports, depth + 1);
        }
    }
    module
}

/// Every folder of the crate under `src` → its modules → the modules of
/// the same folder they refer to.
fn folder_graphs(src: &Path) -> FolderGraphs {
    let modules = crate_modules(src);
    let known: BTreeSet<ModPath> = modules.iter().map(|m| m.path.clone()).collect();
    let mut imports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
    let mut all_refs = Vec::new();
    for module in &modules {
        let refs = references(module);
        for r in &refs {
            let (Some(alias), Some(abs)) = (&r.alias, absolute(&module.path, &r.segments, &known))
            else {
                continue;
            };
            if abs.starts_with(&module.path)
                && abs.len() == module.path.len() + 1
                && known.contains(&abs)
            {
                // `mod.rs` naming its own child needs no following.
                continue;
            }
            imports
                .entry(module.path.clone())
                .or_default()
                .insert(alias.clone(), abs);
        }
        all_refs.push(refs);
    }
    let mut graphs = FolderGraphs::new();
    // Every folder's modules appear, referring to others or not.
    for path in &known {
        if let Some((name, folder)) = path.split_last() {
            graphs
                .entry(folder.to_vec())
                .or_default()
                .entry(name.clone())
                .or_default();
        }
    }
    let root = src.parent().unwrap_or(src);
    for (module, refs) in modules.iter().zip(all_refs) {
        for r in refs {
            let Some(abs) = absolute(&module.path, &r.segments, &known) else {
                continue;
            };
            let to = target(&abs, &known, &imports, 0);
            let from = &module.path;
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                let place = format!(
                    "{}:{}",
                    module
                        .file
                        .strip_prefix(root)
                        .unwrap_or(&module.file)
                        .display(),
                    r.line
                );
                graphs
                    .entry(from[..common].to_vec())
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .entry(to[common].clone())
                    .or_insert(place);
            }
        }
    }
    graphs
}

/// A cycle through `start`, if there is one.
fn cycle_from<V>(
    graph: &BTreeMap<String, BTreeMap<String, V>>,
    start: &str,
) -> Option<Vec<String>> {
    fn walk<V>(
        graph: &BTreeMap<String, BTreeMap<String, V>>,
        node: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(node).into_iter().flat_map(|deps| deps.keys()) {
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

/// Each cycle of the crate's folders, with where each step is made.
fn cycles(crate_name: &str, graphs: &FolderGraphs) -> Vec<String> {
    let mut found = Vec::new();
    let mut reported: BTreeSet<(ModPath, BTreeSet<String>)> = BTreeSet::new();
    for (folder, graph) in graphs {
        for module in graph.keys() {
            let Some(cycle) = cycle_from(graph, module) else {
                continue;
            };
            let members: BTreeSet<String> = cycle.iter().cloned().collect();
            if !reported.insert((folder.clone(), members)) {
                continue;
            }
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
                .collect();
            let folder = if folder.is_empty() {
                "the crate root".to_string()
            } else {
                folder.join("/")
            };
            found.push(format!("{crate_name}, {folder}: {}", steps.join(", ")));
        }
    }
    found
}

fn workspace_crates() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources: Vec<PathBuf> = fs::read_dir(&crates)
        .expect("readable crates dir")
        .map(|e| e.expect("entry").path().join("src"))
        .filter(|src| src.join("lib.rs").is_file())
        .collect();
    sources.sort();
    sources
}

#[test]
fn no_folder_of_any_crate_has_an_import_cycle() {
    let crates = workspace_crates();
    let names: Vec<String> = crates
        .iter()
        .map(|c| {
            c.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(
        names.contains(&"sim".to_string()) && names.contains(&"emu".to_string()),
        "sees the workspace's crates: {names:?}"
    );
    let mut found = Vec::new();
    for (src, name) in crates.iter().zip(&names) {
        found.extend(cycles(name, &folder_graphs(src)));
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_simulator_graph_sees_folders_and_references() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graphs = folder_graphs(&src);
    let top = &graphs[&vec![]];
    assert!(top.len() > 10, "found the top-level modules: {top:?}");
    assert!(top["sim"].contains_key("link"), "sees references: {top:?}");
    let mac = &graphs[&vec!["mesh".to_string(), "mac".to_string()]];
    assert!(
        mac["csma"].contains_key("rdc"),
        "sees `super::` paths: {mac:?}"
    );
    assert!(
        !mac.contains_key("tests") && !mac.contains_key("testbed"),
        "leaves test-only modules out: {mac:?}"
    );
}

/// Writes `files` (path under `src` → text) into a fresh directory.
fn fake_crate(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let src = std::env::temp_dir()
        .join(format!("rtolab-layering-{}-{name}", std::process::id()))
        .join("src");
    let _ = fs::remove_dir_all(&src);
    for (path, text) in files {
        let file = src.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
    }
    src
}

#[test]
fn a_cycle_inside_a_folder_is_found() {
    let src = fake_crate(
        "folder",
        &[
            ("lib.rs", "pub mod a;\n"),
            ("a/mod.rs", "pub mod x;\npub mod y;\nuse y::Thing;\n"),
            // x reaches y through the item its parent imports from y.
            ("a/x.rs", "use super::Thing;\npub struct Other;\n"),
            ("a/y.rs", "pub struct Thing(crate::a::x::Other);\n"),
        ],
    );
    let found = cycles("fake", &folder_graphs(&src));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("fake, a: x -> y (src/a/x.rs:1)"),
        "{found:?}"
    );
    let _ = fs::remove_dir_all(src.parent().unwrap());
}

#[test]
fn references_in_comments_strings_and_tests_are_not_dependencies() {
    let src = fake_crate(
        "quiet",
        &[
            ("lib.rs", "pub mod a;\npub mod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
            (
                "b.rs",
                "// crate::a::A\n/* crate::a::A */\npub const S: &str = \"crate::a::A\";\n\
                 pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
            ),
        ],
    );
    let graphs = folder_graphs(&src);
    assert!(graphs[&vec![]]["a"].contains_key("b"), "{graphs:?}");
    assert!(cycles("fake", &graphs).is_empty(), "{graphs:?}");
    let _ = fs::remove_dir_all(src.parent().unwrap());
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeMap<String, ()>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, deps)| {
        (
            m.to_string(),
            deps.into_iter().map(|d| (d.to_string(), ())).collect(),
        )
    })
    .collect();
    assert_eq!(
        cycle_from(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(cycle_from(&graph, "d"), None);
}
