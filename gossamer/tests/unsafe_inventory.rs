//! Keeps the README's inventory of `unsafe` code honest: every source file
//! of the library that holds `unsafe` code has a row in the table under
//! "Where `unsafe` lives", and every row names a file that still does.
//! (That each `unsafe` block states its invariant in a `// SAFETY:` comment
//! is checked by clippy's `undocumented_unsafe_blocks`, denied in `lib.rs`.)

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

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

/// True when `code` has an `unsafe` block, function, impl or trait outside
/// comments and string literals (a rough but sufficient lexer: line
/// comments are cut, and the word must be followed by one of those forms).
fn has_unsafe(code: &str) -> bool {
    code.lines().any(|line| {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("unsafe") {
            let before = rest[..i].chars().last();
            let after = rest[i + 6..].trim_start();
            let word_start = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '"'));
            if word_start
                && (after.starts_with('{')
                    || after.starts_with("fn")
                    || after.starts_with("impl")
                    || after.starts_with("extern"))
            {
                return true;
            }
            rest = &rest[i + 6..];
        }
        false
    })
}

/// The file paths named in the first column of the inventory table.
fn inventory(readme: &str) -> BTreeSet<String> {
    let start = readme.find("### Where `unsafe` lives").expect("README has no section \"### Where `unsafe` lives\"");
    let section = &readme[start..];
    let section = &section[..section[4..].find("\n#").map_or(section.len(), |i| i + 4)];
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l[3..].split('`').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_file_with_unsafe_code_is_in_the_readme_inventory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("../README.md")).expect("read README.md");
    let listed = inventory(&readme);
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let with_unsafe: BTreeSet<String> = files
        .iter()
        .filter(|p| has_unsafe(&fs::read_to_string(p).expect("read source")))
        .map(|p| p.strip_prefix(root.join("src")).unwrap().to_string_lossy().replace('\\', "/"))
        .collect();
    let missing: Vec<_> = with_unsafe.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&with_unsafe).collect();
    assert!(missing.is_empty(), "files with unsafe code missing from the README's inventory: {missing:?}");
    assert!(stale.is_empty(), "README inventory rows for files without unsafe code (or that do not exist): {stale:?}");
}

#[test]
fn the_lexer_sees_unsafe_code_and_not_words() {
    assert!(has_unsafe("    unsafe { x }"));
    assert!(has_unsafe("pub(crate) unsafe fn f() {}"));
    assert!(has_unsafe("unsafe impl Send for X {}"));
    assert!(!has_unsafe("// unsafe { x }"));
    assert!(!has_unsafe("let not_unsafe = 1; // an unsafe word"));
    assert!(!has_unsafe("/// the unsafe code of the module"));
}
