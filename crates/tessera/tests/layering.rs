//! The core's module graph is one-way: a module may import only from modules in layers below
//! its own (DESIGN.md, "Layers"). This test reads every source file of the crate and fails
//! when a `crate::…` path in non-test code reaches a module in the same or a higher layer,
//! or when a top-level module is missing from the table (a new module must be placed).
//!
//! Test code (`#[cfg(test)] mod … { … }` blocks, `tests.rs`, `testing.rs`) may reach up: it
//! exercises the whole pipeline. Comments are ignored.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom first. Modules in one entry form one layer; within a layer only the modules of a
/// group listed in `PEERS` may import each other.
const LAYERS: &[&[&str]] = &[
    &["limit"],
    &["types", "span"],
    &["kernel_error"],
    &["error"],
    &["ir", "runtime"],
    &["io", "notation"],
    &["semantics"],
    &["transforms", "symbolic"],
    &["levels", "looplets"],
    &["lower", "memory"],
    &["backend", "eval"],
    &["explain", "tensor", "fields"],
    &["run"],
    &["convert", "algorithms", "api"],
];

/// Same-layer modules that may import each other: a level builds looplets, and a looplet's
/// fiber points into a level tree.
const PEERS: &[&[&str]] = &[&["levels", "looplets"]];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn peers(a: &str, b: &str) -> bool {
    PEERS.iter().any(|g| g.contains(&a) && g.contains(&b))
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let p = entry.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`lower/engine.rs` → `lower`, `run.rs` → `run`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src_dir()).expect("under src");
    let first = rel.components().next().expect("a component");
    let s = first.as_os_str().to_string_lossy();
    s.strip_suffix(".rs").unwrap_or(&s).to_string()
}

/// The non-test, non-comment lines of a file with their line numbers.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t == "#[cfg(test)]" {
            // Skip the attributed item: a `mod x;` line, or a braced block.
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            if j < lines.len() && lines[j].contains('{') {
                let mut depth = 0i64;
                while j < lines.len() {
                    depth += lines[j].matches('{').count() as i64;
                    depth -= lines[j].matches('}').count() as i64;
                    j += 1;
                    if depth <= 0 {
                        break;
                    }
                }
            } else {
                j += 1;
            }
            i = j;
            continue;
        }
        if !t.starts_with("//") {
            // Drop a trailing comment so a path mentioned in prose does not count.
            let code = match lines[i].find("//") {
                Some(k) => &lines[i][..k],
                None => lines[i],
            };
            out.push((i + 1, code.to_string()));
        }
        i += 1;
    }
    out
}

/// The top-level modules a line names through `crate::` paths, `use crate::{a, b::c}` included.
fn imported_modules(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = line;
    while let Some(k) = rest.find("crate::") {
        rest = &rest[k + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

fn is_test_file(p: &Path) -> bool {
    matches!(
        p.file_name().and_then(|n| n.to_str()),
        Some("tests.rs" | "testing.rs")
    )
}

#[test]
fn every_top_level_module_has_a_layer() {
    let mut files = vec![];
    rust_files(&src_dir(), &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(f))
        .filter(|m| m != "lib")
        .collect();
    let missing: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        missing.is_empty(),
        "modules without a layer in tests/layering.rs (and DESIGN.md): {missing:?}"
    );
}

#[test]
fn no_module_imports_from_its_own_layer_or_above() {
    let mut files = vec![];
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut violations = vec![];
    for f in files.iter().filter(|f| !is_test_file(f)) {
        let module = module_of(f);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            continue; // reported by the other test
        };
        let text = std::fs::read_to_string(f).expect("readable source");
        for (line_no, line) in code_lines(&text) {
            for m in imported_modules(&line) {
                if m == module || m == "self" {
                    continue;
                }
                let Some(theirs) = layer_of(&m) else {
                    continue; // not a module of this crate (e.g. a macro path)
                };
                if theirs > own || (theirs == own && !peers(&module, &m)) {
                    violations.push(format!(
                        "{}:{line_no}: `{module}` (layer {own}) imports `{m}` (layer {theirs})",
                        f.strip_prefix(src_dir()).expect("under src").display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checker_sees_grouped_and_plain_paths() {
    assert_eq!(
        imported_modules("use crate::{ir::Expr, lower};"),
        ["ir", "lower"]
    );
    assert_eq!(
        imported_modules("let x = crate::run::Runner::jit(); crate::api::f()"),
        ["run", "api"]
    );
    let lines = code_lines(
        "use crate::ir;\n// crate::api in prose\n#[cfg(test)]\nmod tests {\n    use crate::run;\n}\nfn f() {}\n",
    );
    let all: Vec<String> = lines
        .iter()
        .flat_map(|(_, l)| imported_modules(l))
        .collect();
    assert_eq!(all, ["ir"]);
}
