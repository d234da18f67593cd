//! The modules of `src/` form layers: no module reaches, through the paths
//! it names (`crate::…`, `super::…`), back to itself. Modules are compared
//! with their siblings: at the top, a directory `src/X/` (nested ones
//! included) counts as the module X, so `src/py/` is one module there; inside
//! `src/py/`, `green` and `runtime` (and `lock`, the file with its folder)
//! are modules of their own, and so on down. A module naming an item of its
//! parent, or the parent naming its child, is no circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate's root: `["py", "lock", "hold"]`.
type ModPath = Vec<String>;

/// Every source file and the module it is.
fn files() -> Vec<(ModPath, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut dirs = vec![(src, Vec::new())];
    while let Some((dir, at)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let inner = [at.clone(), vec![stem.clone()]].concat();
            if path.is_dir() {
                dirs.push((path, inner));
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module =
                    if (at.is_empty() && stem == "lib") || stem == "mod" { at.clone() } else { inner };
                found.push((module, path));
            }
        }
    }
    found
}

/// The module paths a line of code names: each `crate::a::b` or
/// `super::a` (also inside one level of `{…}`), resolved from `module`, up to
/// its first name that is not a module's (an upper-case type, a function:
/// cut later, to the modules that exist).
fn named(module: &[String], code: &str) -> Vec<ModPath> {
    let mut out = Vec::new();
    let mut starts: Vec<usize> = code.match_indices("crate::").map(|(i, _)| i).collect();
    starts.extend(code.match_indices("super::").map(|(i, _)| i));
    starts.sort_unstable();
    for start in starts {
        let before = &code[..start];
        if before.ends_with("super::") || before.ends_with("::") {
            continue; // the rest of a path counted from its start
        }
        let mut rest = &code[start..];
        let mut base: ModPath = Vec::new();
        if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
        } else {
            base = module.to_vec();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
        }
        let heads: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group.split(['}', ',']).map(str::trim).collect(),
            None => vec![rest],
        };
        for head in heads {
            let mut path = base.clone();
            for segment in head.split("::") {
                let ident: String =
                    segment.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if ident.is_empty() || ident.chars().any(char::is_uppercase) || ident == "self" {
                    break;
                }
                path.push(ident);
                if segment.len() != path.last().unwrap().len() {
                    break;
                }
            }
            out.push(path);
        }
    }
    out
}

/// For each parent module, the dependencies among its children: `child ->
/// sibling` whenever something in `child` (or below it) names `sibling` (or
/// something below it).
fn dependencies() -> BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> {
    let files = files();
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut deps: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for target in named(module, code) {
                let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == module.len() || common == target.len() {
                    continue; // itself, a child of it, or a parent of it
                }
                let (parent, from, to) = (module[..common].to_vec(), &module[common], &target[..=common]);
                if !modules.contains(to) {
                    continue; // an item of the parent, not a module
                }
                let siblings = deps.entry(parent).or_default();
                siblings.entry(from.clone()).or_default().insert(to[common].clone());
            }
        }
    }
    deps
}

/// A cycle through `start`, as the list of modules on it, if there is one.
fn cycle_from(deps: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in deps.get(&at).into_iter().flatten() {
            if next == start {
                return Some([path.clone(), vec![start.to_string()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

#[test]
fn no_module_imports_itself_back() {
    let deps = dependencies();
    let top = &deps[&Vec::new()];
    assert!(top.contains_key("transport") && top["handle"].contains("client"), "parsed: {top:?}");
    let py = &deps[&vec!["py".to_string()]];
    assert!(py["lock"].contains("runtime") && py["green"].contains("task"), "parsed: {py:?}");
    let mut cycles = Vec::new();
    for (parent, siblings) in &deps {
        for start in siblings.keys() {
            if let Some(cycle) = cycle_from(siblings, start) {
                let at =
                    if parent.is_empty() { "src".to_string() } else { format!("src/{}", parent.join("/")) };
                cycles.push(format!("{at}: {}", cycle.join(" -> ")));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles among modules:\n{}", cycles.join("\n"));
}

/// The top-level modules from the bottom up, as docs/design.md ("Layers")
/// describes them: each names only those before it.
const LAYERS: &[&str] = &[
    "error",
    "support",
    "keys",
    "transport",
    "scripts",
    "primitive",
    "quorum",
    "client",
    "handle",
    "ops",
    "py",
];

#[test]
fn each_layer_names_only_those_below_it() {
    let deps = dependencies();
    let mut upward = Vec::new();
    for (from, tos) in &deps[&Vec::new()] {
        let at = LAYERS.iter().position(|l| l == from).unwrap_or_else(|| panic!("src/{from} is in no layer"));
        for to in tos {
            let below =
                LAYERS.iter().position(|l| l == to).unwrap_or_else(|| panic!("src/{to} is in no layer"));
            if below >= at {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(upward.is_empty(), "modules naming a layer above them:\n{}", upward.join("\n"));
}
