//! The architecture, checked: every source file opens with `//!`, no module
//! names a module of a layer above its own (ARCHITECTURE.md, "Layers"), and
//! no two files import each other, directly or around a loop.
//!
//! The check reads `src/` as text, like rust-analyzer's `tidy.rs`: a
//! reference is a path outside a `//` comment, so a doc link to a higher
//! layer is allowed and a `use`, a path in code or a `pub use` is not. A
//! path is resolved to the module it names: `crate::a::b`, `super::b` and
//! `self::b` from the file's own module, and `b::c` where the file declares
//! `mod b;`; a file's `#[cfg(test)]` module is read as `module::tests`.
//! The loop check leaves that module out: a test may use a sibling's
//! helpers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first. A module may use its own layer and the ones
/// below; `lib.rs` and `main.rs` sit above everything.
const LAYERS: &[&[&str]] = &[
    &[
        "error", "checksum", "money", "time", "token", "labels", "threads", "direct", "durable", "prefetch", "parts",
        "parquet",
    ],
    &["records"],
    &["intern", "aggregate"],
    &["store"],
    &["dataset"],
    &["query", "summary"],
    &["report", "resources", "server", "generate", "fuzzing"],
    &["cli"],
];

/// References that break the order today, as (module, module it uses above
/// its layer). The test fails when one disappears too, so this list only
/// shrinks and always says the truth.
const KNOWN: &[(&str, &str)] = &[];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("src is readable").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` -> `["a", "b"]`; `src/a/mod.rs` -> `["a"]`.
fn module_path(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src()).expect("under src");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// Every module path named in code (not in `//` comments) by `module`'s
/// file, resolved from the crate root, `use` groups expanded:
/// `crate::a::{b, c::d}` names `a::b` and `a::c::d`. The file's text from
/// its `#[cfg(test)]` module on is read as that module's (`module::tests`),
/// or left out with `tests` false.
fn references(module: &[String], text: &str, tests: bool) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let (code, test_code) = text.split_at(text.find("#[cfg(test)]").unwrap_or(text.len()));
    scan(module, code, &mut found);
    if tests {
        let inner: Vec<String> = module.iter().cloned().chain(["tests".to_owned()]).collect();
        scan(&inner, test_code, &mut found);
    }
    found.retain(|p| !p.is_empty());
    found
}

/// Adds the paths `text` names from inside `module` to `found`.
fn scan(module: &[String], text: &str, found: &mut Vec<Vec<String>>) {
    let code: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let children = child_modules(&code);
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let word: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let before = code[..at].chars().last();
        let starts_path = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':');
        if word.is_empty() {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        at += word.len();
        let Some(after) = code[at..].strip_prefix("::") else { continue };
        if !starts_path {
            continue;
        }
        match word.as_str() {
            "crate" => tree(after, Vec::new(), found),
            "self" => tree(after, module.to_vec(), found),
            "super" => {
                let (mut up, mut after) = (1, after);
                while let Some(next) = after.strip_prefix("super::") {
                    (up, after) = (up + 1, next);
                }
                tree(after, module[..module.len().saturating_sub(up)].to_vec(), found);
            }
            name if children.contains(name) => tree(&code[at - name.len()..], module.to_vec(), found),
            _ => {}
        }
    }
}

/// The modules a file declares in files of their own (`mod name;`).
fn child_modules(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = match line.strip_prefix("pub") {
                Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or(rest, |(_, rest)| rest),
                Some(rest) => rest,
                None => line,
            };
            let name = line.trim_start().strip_prefix("mod ")?.strip_suffix(';')?.trim();
            Some(name.to_owned())
        })
        .collect()
}

/// Reads one use-tree at the start of `text` under `prefix`.
fn tree(text: &str, mut prefix: Vec<String>, found: &mut Vec<Vec<String>>) {
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        tree(&group[start..i], prefix.clone(), found);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        tree(&group[start..i], prefix.clone(), found);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // Module names are lower case: a type, trait or constant ends the path.
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) || name == "self" {
            break;
        }
        prefix.push(name.clone());
        match rest[name.len()..].strip_prefix("::") {
            Some(next) => rest = next.trim_start(),
            None => break,
        }
    }
    found.push(prefix);
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(files.len() > 40, "found only {} files under src", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        assert!(text.starts_with("//!"), "{}: the first line is not a `//!` module doc", file.display());
    }
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut violations: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in &files {
        let module = module_path(file);
        let top = &module[0];
        if module.len() == 1 && (top == "lib" || top == "main") {
            continue; // the crate root and the binary sit above every layer
        }
        let own =
            layer_of(top).unwrap_or_else(|| panic!("{}: module `{top}` has no layer in this test", file.display()));
        let text = std::fs::read_to_string(file).expect("readable");
        for reference in references(&module, &text, true) {
            let used = &reference[0];
            let Some(theirs) = layer_of(used) else {
                panic!("{}: `crate::{used}` is not a module with a layer", file.display());
            };
            if theirs > own {
                let relative = file.strip_prefix(src()).expect("under src").display().to_string();
                violations.entry((top.clone(), used.clone())).or_default().push(relative);
            }
        }
    }
    let new: Vec<_> =
        violations.iter().filter(|((own, used), _)| !KNOWN.contains(&(own.as_str(), used.as_str()))).collect();
    assert!(new.is_empty(), "modules using a layer above their own (see ARCHITECTURE.md): {new:?}");
    let gone: Vec<_> =
        KNOWN.iter().filter(|(own, used)| !violations.contains_key(&(own.to_string(), used.to_string()))).collect();
    assert!(gone.is_empty(), "fixed, remove from KNOWN: {gone:?}");
}

#[test]
fn no_file_imports_form_a_cycle() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files.iter().map(|f| (module_path(f), f.clone())).collect();
    // A reference points at the deepest file its path names. References to
    // a file's own ancestors (a folder's `mod.rs`, re-exporting its
    // children) are how a module reaches its siblings' shared items, not an
    // edge between two files.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).expect("readable");
        for reference in references(module, &text, false) {
            let target = (1..=reference.len()).rev().map(|n| reference[..n].to_vec()).find(|p| modules.contains_key(p));
            let Some(target) = target else { continue };
            if &target == module || module.starts_with(&target) {
                continue;
            }
            edges.entry(module.clone()).or_default().insert(target);
        }
    }
    // Depth-first search for a back edge.
    fn visit(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = stack.iter().position(|n| n == node) {
            let cycle: Vec<String> = stack[at..].iter().chain([node]).map(|m| m.join("::")).collect();
            panic!("files import each other: {}", cycle.join(" -> "));
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, stack, done);
        }
        stack.pop();
        done.insert(node.clone());
    }
    let mut done = BTreeSet::new();
    for module in modules.keys() {
        visit(module, &edges, &mut Vec::new(), &mut done);
    }
}
