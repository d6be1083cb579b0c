//! Keeps the library's layers honest: the README lists the modules of
//! `gossamer/src/` bottom up under "How it works", and a module may name only
//! the layers listed before it (plus the crate's `error` and `sync`
//! helpers, which sit below them all). This test reads every source file of
//! each layer, finds every path that leaves its layer (`crate::x`, a
//! `crate::{..}` group, or enough `super::` to reach the crate root), and
//! fails on any that points upward, naming the file and the path.
//!
//! A module's unit tests (`#[cfg(test)] mod tests { .. }` at the end of a
//! file, or a file named `tests.rs`, `*_tests.rs` or `*_test.rs`) are
//! exempt: like the integration tests, they may drive the whole crate.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Modules below every layer.
const BASE: &[&str] = &["error", "sync"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layers, bottom up, as the README's tree under "How it works" lists
/// them (lines of the form `  name/   what it holds`).
fn readme_layers() -> Vec<String> {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).expect("README.md");
    let start = readme.find("## How it works").expect("the README has a \"How it works\" section");
    let tree = &readme[start..];
    let tree = &tree[tree.find("gossamer/src/").expect("the layer tree under \"How it works\"")..];
    let tree = &tree[..tree.find("```").expect("the end of the layer tree")];
    tree.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("  ")?;
            let (name, _) = rest.split_once('/')?;
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')).then(|| name.to_string())
        })
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(path: &Path) -> bool {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    stem == "tests" || stem.ends_with("_tests") || stem.ends_with("_test")
}

/// The code of a file without comments, the contents of string and
/// character literals, and its trailing unit-test module.
fn code_of(text: &str) -> String {
    // Cut unit-test modules: a `#[cfg(..test..)]` attribute followed
    // (after other attributes) by an inline `mod`, up to the `}` at the
    // module's own indentation.
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if t.starts_with("#[cfg(") && t.contains("test") {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            if let Some(m) = lines.get(j).filter(|m| m.trim_start().starts_with("mod ") && m.trim_end().ends_with('{'))
            {
                let indent = &m[..m.len() - m.trim_start().len()];
                let close = format!("{indent}}}");
                i = (j + 1..lines.len()).find(|&k| lines[k].trim_end() == close).map_or(lines.len(), |k| k + 1);
                continue;
            }
        }
        kept.push(lines[i]);
        i += 1;
    }
    let text = kept.join("\n");

    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '"' => {
                // A string literal (raw strings in this crate hold no `"`).
                let mut escaped = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A character literal, or a lifetime (kept as it is).
                let mut look = chars.clone();
                let lit = matches!((look.next(), look.next()), (Some('\\'), _) | (Some(_), Some('\'')));
                if lit {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                    }
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first names after `crate::` (each name of a `crate::{..}` group)
/// and after `super::` chains that climb to the crate root, in `code` of the
/// module at `module_path` (`["runtime", "worker", "client"]`).
fn crate_roots(code: &str, module_path: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let boundary =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'$');
        if boundary && rest.starts_with("crate::") {
            let after = &rest[7..];
            if let Some(group) = after.strip_prefix('{') {
                let mut depth = 0;
                let mut item_start = true;
                for (k, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && (c.is_alphanumeric() || c == '_') => {
                            found.push(ident_at(&group[k..]).to_string());
                            item_start = false;
                        }
                        _ => {}
                    }
                }
            } else {
                found.push(ident_at(after).to_string());
            }
            i += 7;
            continue;
        }
        if boundary && rest.starts_with("super::") {
            let mut ups = 0;
            let mut r = rest;
            while let Some(next) = r.strip_prefix("super::") {
                ups += 1;
                r = next;
            }
            // `super` in `a/b/c.rs` (module a::b::c) is a::b; reaching the
            // crate root takes as many steps as the module is deep.
            if ups >= module_path.len() {
                found.push(ident_at(r).to_string());
            }
            i += 7 * ups;
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    found
}

/// The module path of a source file below `src/`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// What `lib.rs` makes of each name at the crate root: the layer a
/// re-export comes from, or `None` for an item defined in `lib.rs` itself.
fn root_names(layers: &[String]) -> BTreeMap<String, Option<String>> {
    let lib = code_of(&fs::read_to_string(src().join("lib.rs")).expect("lib.rs"));
    let mut names = BTreeMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let (public, body) = match stmt.find("use ") {
            Some(k) if stmt[..k].trim_end().starts_with("pub") || stmt[..k].trim().is_empty() => (true, &stmt[k + 4..]),
            _ => (false, ""),
        };
        if public && !body.is_empty() {
            let module = ident_at(body.trim_start_matches("crate::")).to_string();
            let layer = if layers.contains(&module) || BASE.contains(&module.as_str()) { Some(module) } else { None };
            let tail = body.rsplit("::").next().unwrap_or("");
            for name in tail.trim_matches(|c| c == '{' || c == '}' || char::is_whitespace(c)).split(',') {
                let name = name.trim();
                let name = name.rsplit(" as ").next().unwrap_or(name).trim();
                if !name.is_empty() {
                    names.insert(name.to_string(), layer.clone());
                }
            }
        }
        for kw in ["fn ", "struct ", "enum ", "static ", "const ", "macro_rules! "] {
            for (k, _) in stmt.match_indices(kw) {
                let name = ident_at(&stmt[k + kw.len()..]);
                if !name.is_empty() {
                    names.entry(name.to_string()).or_insert(None);
                }
            }
        }
    }
    names
}

#[test]
fn the_readme_lists_every_layer() {
    let layers = readme_layers();
    assert!(layers.len() >= 5, "the README's layer tree lists too few modules: {layers:?}");
    let mut dirs: Vec<String> = fs::read_dir(src())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            p.is_dir().then(|| p.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    dirs.sort();
    let mut listed = layers.clone();
    listed.sort();
    assert_eq!(dirs, listed, "every module directory of gossamer/src/ has one line in the README's layer tree");
}

#[test]
fn imports_point_only_downward() {
    let layers = readme_layers();
    let rank = |m: &str| layers.iter().position(|l| l == m);
    let roots = root_names(&layers);
    let mut files = Vec::new();
    sources(&src(), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let path = module_path(&rel);
        let Some(own) = path.first().and_then(|m| rank(m)) else { continue };
        if is_test_file(&rel) {
            continue;
        }
        let code = code_of(&fs::read_to_string(&file).unwrap());
        for name in crate_roots(&code, &path) {
            let target = if rank(&name).is_some() || BASE.contains(&name.as_str()) {
                Some(name.clone())
            } else {
                match roots.get(&name) {
                    Some(layer) => layer.clone(),
                    None => Some(format!("<unknown name `{name}` at the crate root>")),
                }
            };
            let fine = match &target {
                Some(t) if BASE.contains(&t.as_str()) => true,
                Some(t) => rank(t).is_some_and(|r| r <= own),
                None => false,
            };
            if !fine {
                let to = target.unwrap_or_else(|| "an item defined in lib.rs".to_string());
                wrong.push(format!("{} (layer {}) uses crate::{name} ({to})", rel.display(), layers[own]));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up the layer list of the README's \"How it works\" ({}):\n  {}\n\
         move the item down to the layer that needs it, or have the lower layer define a hook that the higher one \
         installs",
        layers.join(" < "),
        wrong.join("\n  ")
    );
}

#[test]
fn the_scanner_sees_paths_and_groups() {
    let code = code_of(
        "use crate::{rack::x, trust::{A, B}, error::E};\n// crate::objects in a comment\nlet s = \"crate::objects\";\n\
         fn f<'a>(c: char) { crate::runtime::y(); super::super::fabric::z(); }\n#[cfg(test)]\nmod tests {\n    use crate::objects;\n}\nuse crate::fiber;\n",
    );
    let path = vec!["channel".to_string(), "remote".to_string()];
    assert_eq!(crate_roots(&code, &path), ["rack", "trust", "error", "runtime", "fabric", "fiber"]);
}
