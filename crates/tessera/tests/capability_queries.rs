//! The lowering engine, the einsum planner and the kernel-error hints ask the level registry
//! what a level can do (`caps()`, `is_sparse()`, `merges()`, ...), never which level it is: a
//! new level must not need an edit there. This test reads their sources and fails when code
//! (not comments or tests) matches on a `LevelKind` or names a registered level.

use std::path::{Path, PathBuf};
use tessera::levels::registry::LEVELS;

fn src(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(rel)
}

/// The lines before the first `#[cfg(test)]`, without `//` comments.
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("readable source");
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .enumerate()
        .map(|(k, l)| (k + 1, l.split("//").next().unwrap_or("").to_string()))
        .collect()
}

/// Mentions of level kinds in `path`'s code: `LevelKind::X` patterns or constructors, or a
/// registered level's name as a word.
fn level_mentions(path: &Path, allowed: &[&str]) -> Vec<String> {
    let mut out = vec![];
    for (no, line) in code(path) {
        let words: Vec<&str> = line
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .collect();
        // `Scalar` is also the value type: only `LevelKind::Scalar` names the level.
        let names = |s: &str| match s {
            "Scalar" => line.contains("LevelKind::Scalar"),
            _ => words.contains(&s),
        };
        let named = LEVELS
            .iter()
            .find(|s| names(s.name) && !allowed.contains(&s.name));
        if let Some(spec) = named {
            out.push(format!(
                "{}:{no}: names {}: {}",
                path.display(),
                spec.name,
                line.trim()
            ));
        }
    }
    out
}

#[test]
fn the_engine_never_names_a_level() {
    let dir = src("lower");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("src/lower")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 3, "{files:?}");
    let found: Vec<String> = files.iter().flat_map(|f| level_mentions(f, &[])).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
    let engine = std::fs::read_to_string(src("lower/engine.rs")).unwrap();
    assert!(
        engine.contains(".caps().reopen"),
        "the engine asks `reopen`"
    );
}

#[test]
fn the_hints_ask_the_registry() {
    let found = level_mentions(&src("explain.rs"), &[]);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let text = std::fs::read_to_string(src("explain.rs")).unwrap();
    assert!(text.contains("registry::any_order_levels("));
}

#[test]
fn the_planner_asks_capabilities() {
    // The planner chooses output and workspace formats (it builds Dense, SparseList and
    // SparseByteMap levels and an Element leaf), but which levels take writes in any order
    // and which are sparse it asks.
    let plan = src("api/plan.rs");
    let found = level_mentions(&plan, &["Dense", "SparseList", "SparseByteMap", "Element"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("k.caps().writes == Writes::Random"));
    assert!(text.contains(".is_sparse()"));
    assert!(
        !code(&plan)
            .iter()
            .any(|(_, l)| l.contains("matches!") && l.contains("LevelKind")),
        "no `matches!` on level kinds in the planner"
    );
}
