//! No file imports itself back: in every library crate of the workspace, the files' references to
//! one another (`crate::a::b` and `super::sibling` paths outside comments) form no cycle. A file's
//! references to the modules above it (its parent, as a `tests.rs` uses `super::*`) do not count:
//! a module and the files it declares are one unit. Binaries are wiring and are not looked at.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModulePath = Vec<String>;

/// Every module file under `src`, by its module path (`lib.rs` is the empty path).
fn modules(src: &Path) -> BTreeMap<ModulePath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if dir != src || path.file_name().is_some_and(|n| n != "bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src").with_extension("");
            let mut segments: ModulePath = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            match segments.last().map(String::as_str) {
                Some("main") if segments.len() == 1 => continue,
                Some("lib") if segments.len() == 1 => segments.clear(),
                Some("mod") => {
                    segments.pop();
                }
                _ => {}
            }
            found.insert(segments, path);
        }
    }
    found
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths written at the start of `text` (a `{ a::b, c }` group gives one path each).
fn paths_at(text: &str) -> Vec<ModulePath> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            return group[..end]
                .split(',')
                .flat_map(|entry| paths_at(entry.trim()))
                .map(|tail| segments.iter().cloned().chain(tail).collect())
                .collect();
        }
        let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        segments.push(rest[..len].to_owned());
        rest = &rest[len..];
        let Some(after) = rest.strip_prefix("::") else { break };
        rest = after;
    }
    vec![segments]
}

/// Every `crate::` and `super::` path in `text` outside comment lines, made absolute from
/// `module`, the module the text belongs to.
fn references(text: &str, module: &ModulePath) -> Vec<ModulePath> {
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::").chain(line.match_indices("super::")) {
            if line[..at].chars().next_back().is_some_and(is_ident) || line[..at].ends_with("::") {
                continue;
            }
            let mut base = module.clone();
            let mut rest = &line[at..];
            if rest.starts_with("crate::") {
                base.clear();
                rest = &rest["crate::".len()..];
            } else {
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after;
                }
            }
            found.extend(
                paths_at(rest)
                    .into_iter()
                    .map(|tail| base.iter().cloned().chain(tail).collect()),
            );
        }
    }
    found
}

/// The module a path names: its longest prefix that is a module file.
fn target<'a>(path: &ModulePath, modules: &'a BTreeMap<ModulePath, PathBuf>) -> Option<&'a ModulePath> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// Each module's references to the other modules, leaving out its own and its ancestors.
fn graph(src: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let modules = modules(src);
    modules
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(file).expect("read");
            let edges = references(&text, module)
                .iter()
                .filter_map(|path| target(path, &modules))
                .filter(|t| !module.starts_with(t))
                .cloned()
                .collect();
            (module.clone(), edges)
        })
        .collect()
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn cycle(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Option<Vec<ModulePath>> {
    fn visit(
        node: &ModulePath,
        graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        done: &mut BTreeSet<ModulePath>,
        path: &mut Vec<ModulePath>,
    ) -> Option<Vec<ModulePath>> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut found = path[start..].to_vec();
            found.push(node.clone());
            return Some(found);
        }
        if !done.insert(node.clone()) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

fn shown(cycle: &[ModulePath]) -> String {
    cycle.iter().map(|m| m.join("::")).collect::<Vec<_>>().join(" -> ")
}

#[test]
fn no_library_file_imports_itself_back() {
    let root = kubevirt_tests::repo_root();
    let mut crates = 0;
    for entry in std::fs::read_dir(&root).expect("repo").flatten() {
        let src = entry.path().join("src");
        if !src.join("lib.rs").is_file() || !entry.path().join("Cargo.toml").is_file() {
            continue;
        }
        crates += 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(found) = cycle(&graph(&src)) {
            panic!("{name}: {}", shown(&found));
        }
    }
    assert!(crates >= 10, "found {crates} library crates");
}

#[test]
fn a_cycle_between_sibling_files_is_found_and_a_child_using_its_parent_is_not() {
    let dir = tempfile::tempdir().expect("dir");
    let src = dir.path();
    std::fs::create_dir(src.join("a")).expect("mkdir");
    let files = [
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "mod tests;\npub struct A;\n"),
        ("a/tests.rs", "use super::*;\nuse crate::b::B;\n"),
        (
            "b.rs",
            "// crate::c::C in a comment counts for nothing\npub struct B;\n",
        ),
        ("c.rs", "use crate::{a::A, b::B};\n"),
    ];
    for (file, text) in files {
        std::fs::write(src.join(file), text).expect("write");
    }
    assert_eq!(cycle(&graph(src)), None);
    std::fs::write(src.join("b.rs"), "use super::c::C;\npub struct B;\n").expect("write");
    let found = cycle(&graph(src)).expect("a cycle");
    assert_eq!(shown(&found), "b -> c -> b");
}
