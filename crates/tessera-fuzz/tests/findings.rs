//! Inputs the fuzz campaigns found, replayed with the property each broke (they also sit in
//! the committed corpus, which the short run replays through the targets).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

fn seed(target: &str, name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The passes before lowering on the program of a program-target finding, with every
/// accessed tensor given, and how long they took (generously bounded by the caller: the
/// findings took seconds or hung before their fixes).
fn normalize_seed(name: &str) -> (tessera::Result<tessera::notation::ast::Program>, f64) {
    let data = seed("program", name);
    let text = std::str::from_utf8(&data).expect("text");
    let p = tessera::notation::parse::parse_program(text).expect("it parses");
    let mut tensors = HashSet::new();
    tessera::notation::visit::accesses(&p.body, &mut |a| {
        tensors.insert(a.tensor.clone());
    });
    let t0 = Instant::now();
    let r = tessera::run::normalize(&p, &tensors);
    (r, t0.elapsed().as_secs_f64())
}

/// A 650-byte statement of permissive reads nested in each other's indices: the permissive
/// pass split it on every bounds check, copying the rest of the statement into both branches,
/// and took seconds (a libFuzzer timeout; a few more reads would hang). Now refused, with the
/// statement's place, once the splits pass `permissive::MAX_SPLITS`. Since one split decides
/// every read of its bounds check (`permissive::decide`), its many repeated reads of
/// `~d(j + 0)` take a few hundred splits and the statement is accepted.
#[test]
fn nested_permissive_reads_are_not_multiplied() {
    let (r, took) = normalize_seed("finding-nested-permissive-reads");
    r.unwrap_or_else(|e| panic!("refused: {e}"));
    // Generous: milliseconds; the old pass took seconds on this input and exponentially
    // longer on larger ones.
    assert!(took < 5.0, "{took} s");
}

/// Reads of distinct bounds checks still multiply: twenty offsets of one vector in one
/// statement are refused, with the statement's place, well before 2^20 cases.
#[test]
fn distinct_permissive_checks_are_still_refused_quickly() {
    let terms: Vec<String> = (1..=20)
        .map(|k| format!("coalesce(x[~(i + {k})], {k})"))
        .collect();
    let text = format!("for i = _\n  y[i] = {}\nend\n", terms.join(" + "));
    let p = tessera::notation::parse::parse_program(&text).expect("it parses");
    let tensors: HashSet<String> = ["x", "y"].iter().map(|s| s.to_string()).collect();
    let t0 = Instant::now();
    let msg = tessera::run::normalize(&p, &tensors)
        .expect_err("refused")
        .to_string();
    assert!(
        msg.starts_with("2:3: unsupported: ") && msg.contains("permissive (`~`) reads"),
        "{msg}"
    );
    assert!(t0.elapsed().as_secs_f64() < 5.0, "{:?}", t0.elapsed());
}

/// A libFuzzer timeout (14 s under load) of the program target: a chain of comparisons of
/// permissive reads nested in each other's indices made fewer than `MAX_SPLITS` splits of a
/// growing statement, a program of millions of nodes that the passes after took a second
/// over. It was then refused once the copies passed `permissive::MAX_COPIED` nodes; since one
/// split decides every read of its check, its repeated reads fit and it is accepted.
#[test]
fn a_chain_of_nested_permissive_comparisons_is_normalised_quickly() {
    let (r, took) = normalize_seed("finding-permissive-compare-chain");
    r.unwrap_or_else(|e| panic!("refused: {e}"));
    // Generous, as above: milliseconds now, a second before.
    assert!(took < 5.0, "{took} s");
}

/// A libFuzzer timeout of the einsum target: a statement of eight indices, whose 8! loop
/// orders the planner scored one by one. Orders of more than seven indices are now found by
/// swapping pairs of loops from the preferred order.
#[test]
fn einsums_of_eight_and_nine_indices_are_planned_quickly() {
    // The second (nine indices, 11 s in an instrumented build under load) came after the
    // planner's fix; it now takes tens of milliseconds, most of them lowering.
    for name in ["finding-eight-index-chain", "finding-nine-index-chain"] {
        let data = seed("einsum", name);
        let t0 = Instant::now();
        tessera_fuzz::einsum::einsum(&data);
        // Generous: milliseconds now, a third of a second (seconds under load) before.
        assert!(
            t0.elapsed().as_secs_f64() < 5.0,
            "{name}: {:?}",
            t0.elapsed()
        );
    }
}

/// A hang of the program target (over 10 s, then libFuzzer's alarm deadlocked in malloc): a
/// chain of permissive comparisons within `MAX_COPIED`, whose nested splits the lifecycle
/// pass walked once per level of nesting. Its summaries are now built once, bottom-up.
#[test]
fn a_deep_split_statement_is_normalised_quickly() {
    let (_, took) = normalize_seed("finding-permissive-chain-hang");
    // Generous: tens of milliseconds now, over ten seconds under load before.
    assert!(took < 5.0, "{took} s");
}
