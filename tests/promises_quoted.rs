//! The promises chapter (`src/guide/promises.rs`) against what quotes it and what it names:
//!
//! - every quote the fuzz models make, `guide::promises (rule): \"…\"` in `fuzz/src` and
//!   `fuzz/fuzz_targets`, is word for word in that rule's text (`...` marks a cut);
//! - every test a rule names as `file::function` exists: `tests/file.rs` (or
//!   `tests/*/file.rs`, or `loom-tests/tests/file.rs`) defines `fn function`.
//!
//! A rule reworded without its quote, or a test renamed without its rule, fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each rule's text, by name, with line breaks as spaces: the list items of the chapter
/// that start `- **name**:`.
fn rules() -> BTreeMap<String, String> {
    let text: Vec<String> = read(&root().join("src/guide/promises.rs"))
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.trim().to_owned())
        .collect();
    let mut rules = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text {
        if let Some(item) = line.strip_prefix("- **") {
            if let Some((name, rest)) = item.split_once("**:") {
                if let Some((n, t)) = current.take() {
                    rules.insert(n, t);
                }
                current = Some((name.to_owned(), rest.trim().to_owned()));
                continue;
            }
        }
        let ends = line.is_empty() || line.starts_with('#') || line.starts_with("- ");
        match (&mut current, ends) {
            (Some(_), true) => {
                let (n, t) = current.take().unwrap();
                rules.insert(n, t);
            }
            (Some((_, t)), false) => {
                t.push(' ');
                t.push_str(&line);
            }
            (None, _) => {}
        }
    }
    if let Some((n, t)) = current {
        rules.insert(n, t);
    }
    rules
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `(rule, quote)` for every `(rule): \"quote\"` on a line that names `guide::promises`.
fn quotes(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in src.lines().filter(|l| l.contains("guide::promises")) {
        let mut rest = line;
        while let Some(open) = rest.find('(') {
            rest = &rest[open + 1..];
            let Some(close) = rest.find("): \\\"") else {
                break;
            };
            let name = &rest[..close];
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                continue;
            }
            let body = &rest[close + "): \\\"".len()..];
            let end = body.find("\\\"").expect("a closing quote");
            out.push((name.to_owned(), body[..end].replace("\\\\", "\\")));
            rest = &body[end..];
        }
    }
    out
}

#[test]
fn every_fuzz_quote_is_its_rules_text() {
    let rules = rules();
    assert!(rules.len() >= 100, "found {} rules", rules.len());
    let mut problems = Vec::new();
    let mut count = 0;
    for dir in ["fuzz/src", "fuzz/fuzz_targets"] {
        for file in rust_files(&root().join(dir)) {
            for (name, quote) in quotes(&read(&file)) {
                count += 1;
                let Some(rule) = rules.get(&name) else {
                    problems.push(format!("{}: no rule named {name:?}", file.display()));
                    continue;
                };
                for part in quote.split("...").map(str::trim).filter(|p| !p.is_empty()) {
                    if !rule.contains(part) {
                        problems.push(format!(
                            "{}: rule {name:?} does not say {part:?}\n  it says: {rule}",
                            file.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(count >= 40, "found {count} quotes");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `file::function` names in backticks, where `function` is a lowercase identifier.
fn named_tests(rule: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, code) in rule.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let parts: Vec<&str> = code.split("::").collect();
        let ident = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if parts.len() >= 2 && parts[0] != "tollgate" && parts.iter().all(|p| ident(p)) {
            let function = parts[parts.len() - 1];
            if function.contains('_') {
                out.push((parts[parts.len() - 2].to_owned(), function.to_owned()));
            }
        }
    }
    out
}

#[test]
fn every_test_a_rule_names_exists() {
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    for dir in ["tests", "loom-tests/tests", "src"] {
        for file in rust_files(&root().join(dir)) {
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            sources.entry(stem).or_default().push_str(&read(&file));
        }
    }
    let mut problems = Vec::new();
    let mut count = 0;
    for (name, rule) in rules() {
        for (file, function) in named_tests(&rule) {
            count += 1;
            let defined = sources.get(&file).is_some_and(|s| {
                s.contains(&format!("fn {function}(")) || s.contains(&format!("fn {function}<"))
            });
            if !defined {
                problems.push(format!(
                    "rule {name:?} names {file}::{function}, which no test file defines"
                ));
            }
        }
    }
    assert!(count >= 100, "found {count} named tests");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
