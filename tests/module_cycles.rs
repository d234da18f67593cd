//! The modules of `src/` form layers: no module reaches, through the
//! `crate::` paths it names, back to itself. A directory `src/X/` (nested
//! ones included) counts as the module X, so `src/py/` is one module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module and the modules it names (`crate::name` anywhere outside comments).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            let mut dirs = vec![path];
            while let Some(dir) = dirs.pop() {
                for inner in std::fs::read_dir(&dir).unwrap() {
                    let inner = inner.unwrap().path();
                    if inner.is_dir() {
                        dirs.push(inner);
                    } else {
                        files.push((stem.clone(), inner));
                    }
                }
            }
        } else if stem != "lib" && path.extension().is_some_and(|e| e == "rs") {
            files.push((stem, path));
        }
    }
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let named = deps.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split(['}', ',']).map(str::trim).collect(),
                    None => vec![rest],
                };
                for name in names {
                    let ident: String =
                        name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !ident.is_empty() && ident != module && ident.chars().all(|c| !c.is_uppercase()) {
                        named.insert(ident);
                    }
                }
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
    assert!(deps.contains_key("client") && deps["lock"].contains("deployment"), "parsed: {deps:?}");
    let cycles: Vec<String> =
        deps.keys().filter_map(|m| cycle_from(&deps, m)).map(|c| c.join(" -> ")).collect();
    assert!(cycles.is_empty(), "import cycles among src/ modules:\n{}", cycles.join("\n"));
}
