//! The layering rule: a surface (a transport or front end) never imports another
//! surface. What two surfaces share lives outside them (`argo`, `plugin_host`, `shutdown`,
//! `auth`, `engine`, ...). `cli` is the composition root and may import every surface.
//!
//! The check reads the `crate::…` paths of the code (comments skipped) of every file under
//! `src/<surface>/` (and `src/<surface>.rs`), including grouped imports (`crate::{a, b}`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The surfaces: each may import the shared modules, none may import another surface.
const SURFACES: [&str; 5] = ["goplugin", "grpc", "serve", "plugin", "cli"];
/// Surfaces that may import every other (the composition root).
const ROOTS: [&str; 1] = ["cli"];

/// The top-level modules a piece of Rust code names through `crate::`.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        // `$crate::` in macros is the same crate; a longer identifier ending in `crate` is not.
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if matches!(before, Some(c) if c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // First path segment of each top-level entry (nested groups are inside an entry),
            // up to the brace that closes the group.
            let mut depth = 0;
            let mut entry_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if entry_start && !c.is_whitespace() => {
                        entry_start = false;
                        out.insert(ident(&group[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// A file's code without its comments (line comments and doc comments).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal would be cut too; that only hides code, and no
            // surface names a module in a string.
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `(file, imported surface)` that breaks the rule.
fn violations(src: &Path) -> Vec<(PathBuf, String)> {
    let mut bad = Vec::new();
    for surface in SURFACES.iter().filter(|s| !ROOTS.contains(s)) {
        let mut files = Vec::new();
        rust_files(&src.join(surface), &mut files);
        let single = src.join(format!("{surface}.rs"));
        if single.exists() {
            files.push(single);
        }
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for m in crate_modules(&code_of(&text)) {
                if m != *surface && SURFACES.contains(&m.as_str()) {
                    bad.push((f.clone(), m));
                }
            }
        }
    }
    bad
}

#[test]
fn surfaces_never_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert!(
        src.join("grpc").is_dir(),
        "run from the crate: {}",
        src.display()
    );
    let bad = violations(&src);
    assert!(
        bad.is_empty(),
        "surfaces importing other surfaces (move what they share out of them): {bad:#?}"
    );
}

#[test]
fn the_scanner_finds_plain_grouped_and_nested_imports() {
    let code = code_of(
        "use crate::serve::auth::{bearer_token, constant_time_eq};\n\
         use crate::{engine::Engine, goplugin::{a, b}, measurement};\n\
         let x = crate::plugin::MEASUREMENT_BUDGET;\n\
         // crate::cli::run in a comment is not an import\n\
         $crate::grpc::x; notcrate::serve::y; crate::self_check;",
    );
    let found: Vec<String> = crate_modules(&code).into_iter().collect();
    assert_eq!(
        found,
        [
            "engine",
            "goplugin",
            "grpc",
            "measurement",
            "plugin",
            "self_check",
            "serve"
        ]
    );
    // And the rule fires on such a file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("grpc")).unwrap();
    std::fs::write(
        dir.path().join("grpc/remote.rs"),
        "use crate::serve::auth::bearer_token;\nuse crate::grpc::pb;\nuse crate::engine::Engine;\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("cli")).unwrap();
    std::fs::write(dir.path().join("cli/mod.rs"), "use crate::grpc::x;\n").unwrap();
    let bad = violations(dir.path());
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].1, "serve");
}
