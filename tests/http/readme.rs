//! The guide's middleware chapter (`src/guide/middleware.rs`, once the README's middleware
//! section) against the examples it points at (issue 20, item 12): every crate an example
//! or a code block names must be one the chapter tells users to add
//! (`axum::http::StatusCode`, never `http::StatusCode` when `http` is not in the
//! dependency block). This crate's own build cannot catch that: here `http` is a
//! dependency (feature `tower`), so `examples/axum.rs` compiled with a path a user's
//! project would reject.

use std::collections::BTreeSet;
use std::path::Path;

/// Names every Rust file may use without a dependency.
const BUILTIN: &[&str] = &[
    "std", "core", "alloc", "crate", "self", "super", "u8", "u16", "u32", "u64", "u128", "usize",
    "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64", "bool", "char", "str",
];

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown of a guide chapter: its `//!` lines without the comment marker (and the one
/// space after it), as rustdoc reads them.
fn chapter(relative: &str) -> String {
    read(relative)
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The guide's chapters, as (path, Markdown).
fn chapters() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/guide");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| format!("src/guide/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|p| p.ends_with(".rs"))
        .map(|p| {
            let text = chapter(&p);
            (p, text)
        })
        .collect();
    out.sort();
    out
}

/// The fenced code blocks of `text` whose info string starts with `lang`, in order, with
/// their offsets.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find("```") {
        let open = at + open;
        let info_end = open + text[open..].find('\n').expect("fence line");
        let info = &text[open + 3..info_end];
        let close = info_end + text[info_end..].find("\n```").expect("closing fence");
        if info.split(',').next() == Some(lang) {
            out.push((open, &text[info_end + 1..close]));
        }
        at = close + 4;
    }
    out
}

/// A `[dependencies]` block: the crate names (as Rust spells them) and tollgate's features.
struct Deps {
    crates: BTreeSet<String>,
    tollgate_features: Vec<String>,
}

fn deps(toml: &str) -> Deps {
    let mut crates = BTreeSet::new();
    let mut tollgate_features = Vec::new();
    for line in toml.lines() {
        let line = line.split('#').next().unwrap().trim();
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim().replace('-', "_");
        if name == "tollgate" {
            if let Some(list) = value.split("features").nth(1) {
                let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
                tollgate_features = list
                    .split(',')
                    .map(|f| f.trim().trim_matches('"').to_owned())
                    .filter(|f| !f.is_empty())
                    .collect();
            }
        }
        crates.insert(name);
    }
    Deps {
        crates,
        tollgate_features,
    }
}

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Other(char),
}

/// Rust source as identifiers, `::` and other characters, without comments, string and
/// character literals.
fn tokens(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_string = |mut i: usize| {
        // At the opening quote; returns the index after the closing one.
        i += 1;
        while b[i] != '"' {
            i += if b[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i = skip_string(i);
        } else if (c == 'r' || c == 'b')
            && matches!(next, Some('"' | '#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // r"..", r#".."#, b"..", br".."
            let mut j = i + 1;
            let mut hashes = 0;
            while b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if b[j] != '"' {
                out.push(Tok::Ident(c.to_string()));
                i += 1;
                continue;
            }
            if c == 'b' && hashes == 0 {
                i = skip_string(j);
                continue;
            }
            j += 1;
            loop {
                if b[j] == '"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    break;
                }
                j += 1;
            }
            i = j + 1 + hashes;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'); otherwise a lifetime.
            if next == Some('\\') {
                i += 2;
                while b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Tok::Other(c));
            }
            i += 1;
        }
    }
    out
}

/// The first segments of every path in `src` (the crates it names), minus the names its
/// `use` items bring into scope (`use axum::http;` then `http::StatusCode` names axum).
fn crate_roots(src: &str) -> BTreeSet<String> {
    let toks = tokens(src);
    let mut roots = BTreeSet::new();
    let mut local = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Ident("use".into()) || toks[i] == Tok::Ident("mod".into()) {
            let is_use = toks[i] == Tok::Ident("use".into());
            let start = i + 1;
            let ends_item = |t: &Tok| match t {
                Tok::Other(';') => true,
                Tok::Other('{') => !is_use,
                _ => false,
            };
            let end = start
                + toks[start..]
                    .iter()
                    .position(ends_item)
                    .expect("end of item");
            let item = &toks[start..end];
            if !is_use {
                if let Some(Tok::Ident(name)) = item.first() {
                    local.insert(name.clone());
                }
                i = end;
                continue;
            }
            let first = item.iter().position(|t| *t != Tok::PathSep).unwrap();
            if let Tok::Ident(root) = &item[first] {
                roots.insert(root.clone());
            }
            for (k, t) in item.iter().enumerate() {
                let Tok::Ident(name) = t else { continue };
                let after = item.get(k + 1);
                let imported = k > 0 && item[k - 1] == Tok::Ident("as".into())
                    || !matches!(after, Some(Tok::PathSep) | Some(Tok::Ident(_)));
                if imported && name != "self" {
                    local.insert(name.clone());
                }
            }
            i = end;
            continue;
        }
        if let (Tok::Ident(name), Some(Tok::PathSep)) = (&toks[i], toks.get(i + 1)) {
            // Not `a::b` past its root, `.method::<T>` or `function::<T>` (a turbofish).
            let inner = i > 0 && matches!(toks[i - 1], Tok::PathSep | Tok::Other('.'));
            let turbofish = toks.get(i + 2) == Some(&Tok::Other('<'));
            if !inner && !turbofish && name.starts_with(|c: char| c.is_lowercase()) {
                roots.insert(name.clone());
            }
        }
        i += 1;
    }
    roots.retain(|r| !local.contains(r) && !BUILTIN.contains(&r.as_str()));
    roots
}

/// A word of prose without the punctuation around it (`` `axum` ``, `grpc).`).
fn word(w: Option<&str>) -> &str {
    w.unwrap_or_default()
        .trim_matches(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
}

/// `what`'s crates that `deps` does not add.
fn undeclared(what: &str, src: &str, deps: &Deps) -> Vec<String> {
    crate_roots(src)
        .into_iter()
        .filter(|r| !deps.crates.contains(r))
        .map(|r| format!("{what} names `{r}::`, which the chapter's dependency block does not add"))
        .collect()
}

#[test]
fn examples_and_blocks_use_only_the_crates_the_readme_adds() {
    let text = chapter("src/guide/middleware.rs");
    let middleware = text.as_str();
    let tomls: Vec<(usize, Deps)> = blocks(middleware, "toml")
        .into_iter()
        .map(|(at, t)| (at, deps(t)))
        .collect();
    assert!(
        !tomls.is_empty(),
        "no dependency block in the middleware chapter"
    );
    let mut problems = Vec::new();

    // Each code block against the dependency block before it.
    for (at, code) in blocks(middleware, "rust") {
        let Some((_, d)) = tomls.iter().rev().find(|(t, _)| *t < at) else {
            problems.push("a rust block comes before any dependency block".to_owned());
            continue;
        };
        problems.extend(undeclared("the middleware chapter's rust block", code, d));
    }

    // Each `cargo run --example NAME --features F` against the nearest block before it
    // that enables F (an example's own block follows the others).
    let mut examples = 0;
    for (at, _) in middleware.match_indices("cargo run --example ") {
        let line = &middleware[at + "cargo run --example ".len()..];
        let mut words = line.split_whitespace();
        let name = word(words.next());
        assert_eq!(words.next(), Some("--features"), "{line}");
        let feature = word(words.next());
        let Some((_, d)) = tomls
            .iter()
            .rev()
            .find(|(t, d)| *t < at && d.tollgate_features.iter().any(|f| f == feature))
        else {
            problems.push(format!(
                "examples/{name}.rs: no dependency block enables tollgate's {feature:?} feature"
            ));
            continue;
        };
        let src = read(&format!("examples/{name}.rs"));
        problems.extend(undeclared(&format!("examples/{name}.rs"), &src, d));
        examples += 1;
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        examples >= 3,
        "the chapter points at the axum, grpc and llm_budget examples"
    );
}

#[test]
fn the_checker_sees_what_a_user_project_would_reject() {
    let src = r#"
        use std::net::{IpAddr, SocketAddr};
        use axum::http;
        use tollgate::http::{ClientIp, MissingKey};
        // http_body::Body in a comment is not a path
        #[tokio::main]
        async fn main() {
            let _ = http::StatusCode::OK;
            let s = "bytes::Bytes in a string is not a path";
            let c = ':';
            let _ = <u8 as Into<u32>>::into(1);
            let _ = hyper::Request::new(());
            let _ = "1".parse::<u8>().ok().map(Some::<u8>);
            let _ = app.into_make_service_with_connect_info::<SocketAddr>();
        }
    "#;
    let roots: Vec<String> = crate_roots(src).into_iter().collect();
    assert_eq!(roots, ["axum", "hyper", "tokio", "tollgate"]);
    let d = deps("tollgate = { path = \"..\", features = [\"axum\"] }\naxum = \"0.8\"\ntokio-stream = \"0.1\"");
    assert_eq!(d.tollgate_features, ["axum"]);
    assert!(d.crates.contains("tokio_stream"));
    assert_eq!(
        crate_roots("fn f() { http::StatusCode::OK; }")
            .into_iter()
            .collect::<Vec<_>>(),
        ["http"]
    );
}

/// Every Rust block of the README and of the guide compiles when pasted into a `main.rs`
/// (issue 20, item 10): a whole program with its `fn main`, no lines hidden from the reader
/// (`# ...`), which rustdoc compiles but a reader never sees.
#[test]
fn every_rust_block_of_the_readme_and_the_guide_is_a_whole_program() {
    let mut docs = vec![("README.md".to_owned(), read("README.md"))];
    docs.extend(chapters());
    assert!(docs.len() >= 10, "found {} documents", docs.len());
    let mut problems = Vec::new();
    let mut count = 0;
    for (path, text) in &docs {
        for (at, code) in blocks(text, "rust") {
            count += 1;
            let line = text[..at].lines().count() + 1;
            if !code.lines().any(|l| {
                l.trim_start().starts_with("fn main") || l.trim_start().starts_with("async fn main")
            }) {
                problems.push(format!("{path}: block at doc line {line}: no fn main"));
            }
            if let Some(hidden) = code.lines().find(|l| *l == "#" || l.starts_with("# ")) {
                problems.push(format!(
                    "{path}: block at doc line {line}: hidden line {hidden:?}"
                ));
            }
        }
    }
    assert!(count >= 12, "found {count} rust blocks");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
