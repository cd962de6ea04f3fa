use super::*;
use crate::notation::parse::parse_program;

fn parse(src: &str) -> Program {
    parse_program(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// The normal form, printed.
fn norm(src: &str) -> String {
    normalize(&parse(src)).unwrap().to_string()
}

/// `a`'s normal form is the stated form `b` (normalised as if it used δ or ε: factors and
/// terms in canonical order).
fn same_normal(a: &str, b: &str) {
    let stated = run_with(&parse(b), Mode::Normal, true).unwrap().to_string();
    assert_eq!(norm(a), stated, "\n{a}\nvs\n{b}");
}

#[test]
fn eps_delta_identity() {
    assert_eq!(
        norm(
            "for j = _, k = _, l = _, m = _, i = _\n r[j, k, l, m] += eps[i, j, k] * eps[i, l, m]\nend"
        ),
        "for j = _, k = _, l = _, m = _\n  r[j, k, l, m] += delta[j, l] * delta[k, m] - delta[j, m] * delta[k, l]\nend\n"
    );
}

#[test]
fn traces_of_delta_and_eps() {
    assert_eq!(norm("for i = 0:2\n s[] += delta[i, i]\nend"), "s[] += 3\n");
    assert_eq!(
        norm("for i = 0:4\n s[] += 2 * delta[i, i]\nend"),
        "s[] += 10\n"
    );
    assert_eq!(
        norm("for i = _, j = _, k = _\n s[] += eps[i, j, k] * eps[i, j, k]\nend"),
        "s[] += 6\n"
    );
    assert_eq!(
        norm("for i = _, j = _\n s[] += eps[i, j] * eps[i, j]\nend"),
        "s[] += 2\n"
    );
    assert_eq!(
        norm("for i = _, j = _, k = _, l = _\n s[] += eps[i, j, k, l] * eps[i, j, k, l]\nend"),
        "s[] += 24\n"
    );
    // Two shared indices of order 3: Σ_jk ε_ijk ε_ljk = 2 δ_il.
    same_normal(
        "for i = _, l = _, j = _, k = _\n r[i, l] += eps[i, j, k] * eps[l, j, k]\nend",
        "for i = _, l = _\n r[i, l] += 2 * delta[i, l]\nend",
    );
    // Order 4 with two shared: 2 (δ_km δ_ln − δ_kn δ_lm).
    same_normal(
        "for k = _, l = _, m = _, n = _, i = _, j = _\n r[k, l, m, n] += eps[i, j, k, l] * eps[i, j, m, n]\nend",
        "for k = _, l = _, m = _, n = _\n r[k, l, m, n] += 2 * delta[k, m] * delta[l, n] - 2 * delta[k, n] * delta[l, m]\nend",
    );
}

#[test]
fn delta_substitutes_into_accesses() {
    assert_eq!(
        norm("for i = _, j = _\n c[i] += delta[i, j] * t[j]\nend"),
        "for i = _\n  c[i] += t[i]\nend\n"
    );
    // Identity times a matrix.
    assert_eq!(
        norm("for i = _, j = _, k = _\n c[i, j] += delta[i, k] * A[k, j]\nend"),
        "for i = _, j = _\n  c[i, j] += A[i, j]\nend\n"
    );
    // δ with a constant index picks an entry.
    assert_eq!(
        norm("for j = _\n c[] += delta[2, j] * t[j]\nend"),
        "c[] += t[2]\n"
    );
    assert_eq!(norm("c[] += delta[1, 2] * t[0]\n"), "c[] += 0\n");
}

#[test]
fn eps_against_symmetric_pairs_vanishes() {
    // a × a
    assert_eq!(
        norm("for i = _, j = _, k = _\n c[i] += eps[i, j, k] * a[j] * a[k]\nend"),
        "for i = _\n  c[i] += 0\nend\n"
    );
    // a · (a × b)
    assert_eq!(
        norm("for i = _, j = _, k = _\n s[] += a[i] * eps[i, j, k] * a[j] * b[k]\nend"),
        "s[] += 0\n"
    );
    // ε_ijk δ_jk
    assert_eq!(
        norm("for i = _, j = _, k = _\n c[i] += eps[i, j, k] * delta[j, k]\nend"),
        "for i = _\n  c[i] += 0\nend\n"
    );
    // A symmetric product of two tensors in the pair.
    assert_eq!(
        norm("for i = _, j = _, k = _\n c[i] += eps[i, j, k] * (S[j, k] + S[k, j])\nend"),
        "for i = _\n  c[i] += 0\nend\n"
    );
    // Not symmetric: kept.
    assert_eq!(
        norm("for i = _, j = _, k = _\n c[i] += eps[i, j, k] * a[j] * b[k]\nend"),
        "for i = _, j = _, k = _\n  c[i] += eps[i, j, k] * a[j] * b[k]\nend\n"
    );
}

#[test]
fn bac_cab_family() {
    // a × (b × c) = b (a·c) − c (a·b)
    same_normal(
        "for i = _, j = _, k = _, l = _, m = _\n d[i] += eps[i, j, k] * a[j] * eps[k, l, m] * b[l] * c[m]\nend",
        "for i = _, j = _\n d[i] += b[i] * a[j] * c[j] - c[i] * a[j] * b[j]\nend",
    );
    // (a × b) × c = b (a·c) − a (b·c)
    same_normal(
        "for i = _, j = _, k = _, l = _, m = _\n d[i] += eps[i, j, k] * eps[j, l, m] * a[l] * b[m] * c[k]\nend",
        "for i = _, k = _\n d[i] += b[i] * a[k] * c[k] - a[i] * b[k] * c[k]\nend",
    );
    // (a × b) · (c × d) = (a·c)(b·d) − (a·d)(b·c)
    same_normal(
        "for i = _, j = _, k = _, l = _, m = _\n s[] += eps[i, j, k] * a[j] * b[k] * eps[i, l, m] * c[l] * d[m]\nend",
        "for j = _, k = _\n s[] += a[j] * c[j] * b[k] * d[k] - a[j] * d[j] * b[k] * c[k]\nend",
    );
}

#[test]
fn sums_distribute_and_cancel() {
    assert_eq!(
        norm("for i = _, j = _\n c[i] += delta[i, j] * (a[j] + b[j]) - b[j] * delta[i, j]\nend"),
        "for i = _\n  c[i] += a[i]\nend\n"
    );
    // `-=` is `+=` of the negation.
    assert_eq!(
        norm("for i = _, j = _\n c[i] -= delta[i, j] * a[j]\nend"),
        "for i = _\n  c[i] += -a[i]\nend\n"
    );
}

const PROGRAMS: &[&str] = &[
    "for j = _, k = _, l = _, m = _, i = _\n r[j, k, l, m] += eps[i, j, k] * eps[i, l, m]\nend",
    "for i = _, j = _, k = _\n c[i] += eps[i, j, k] * a[j] * b[k]\nend",
    "for n = _, i = _, j = _, k = _\n c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]\nend",
    "for i = _, j = _, k = _, l = _, m = _\n d[i] += eps[i, j, k] * a[j] * eps[k, l, m] * b[l] * c[m]\nend",
    "for i = _, j = _, k = _, l = _, m = _\n s[] += eps[i, j, k] * a[j] * b[k] * eps[i, l, m] * c[l] * d[m]\nend",
    "for i = _, j = _\n c[i] += delta[i, j] * (a[j] + b[j]) - 3 * b[i] * delta[i, j]\nend",
    "for i = 0:2\n s[] += delta[i, i]\nend",
    "for i = _, j = _\n c[i, j] += delta[i, j] * x[i]\nend",
    "for i = _, j = _, k = _, l = _\n c[i, j] += eps[i, j, k, l] * (a[k] * b[l] - b[k] * a[l])\nend",
    "for i = _\n y[i] = delta[i, 0] * x[i]\nend",
    "for i = _\n let z = 2\n  c[i] += delta[i, z] * x[i]\n end\nend",
    "for i = _, j = _\n c[i] += eps[i, j] * eps[j, i] * a[i]\nend",
];

#[test]
fn normalising_is_idempotent_and_round_trips() {
    for src in PROGRAMS {
        let once = normalize(&parse(src)).unwrap();
        let twice = normalize(&once).unwrap();
        assert_eq!(once, twice, "{src}\n{once}\n{twice}");
        let reparsed = parse(&once.to_string());
        assert_eq!(reparsed, once, "{once}");
        let lowered = lower(&parse(src)).unwrap();
        assert!(!uses_ein(&lowered), "{lowered}");
        assert_eq!(lower(&lowered).unwrap(), lowered);
    }
}

#[test]
fn cross_product_lowers_to_six_products() {
    let p = lower(&parse(
        "for n = _, i = _, j = _, k = _\n c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]\nend",
    ))
    .unwrap();
    assert_eq!(
        p.to_string(),
        "for n = _\n  c[n, 0] += a[n, 1] * b[n, 2] - a[n, 2] * b[n, 1]\n  c[n, 1] += -(a[n, 0] * b[n, 2]) + a[n, 2] * b[n, 0]\n  c[n, 2] += a[n, 0] * b[n, 1] - a[n, 1] * b[n, 0]\nend\n"
    );
}

#[test]
fn leftover_delta_and_eps_become_comparisons() {
    let p = lower(&parse("for i = _\n y[i] = delta[i, 0] * x[i]\nend")).unwrap();
    assert_eq!(
        p.to_string(),
        "for i = _\n  y[i] = ifelse(i == 0, 1, 0) * x[i]\nend\n"
    );
    // A loop only ε indexes takes ε's range.
    let p = lower(&parse("for i = _\n y[] = eps[i] \nend")).unwrap();
    assert!(p.to_string().starts_with("for i = 0:0\n"), "{p}");
}

#[test]
fn errors_name_places() {
    let e = normalize(&parse("for i = _\n  s[] += delta[i, i]\nend")).unwrap_err();
    assert!(
        matches!(&e, Error::Program { span, .. } if (span.line, span.col) == (2, 10)),
        "{e}"
    );
    let e = lower(&parse("for i = _, j = _\n  s[] = delta[i, j]\nend")).unwrap_err();
    assert!(
        matches!(&e, Error::Program { span, .. } if span.line == 2),
        "{e}"
    );
    let e = lower(&parse("for i = _\n  eps[i] += 1\nend")).unwrap_err();
    assert!(e.to_string().contains("read only"), "{e}");
    let e = lower(&parse("s[] += delta[1]")).unwrap_err();
    assert!(e.to_string().contains("two indices"), "{e}");
    let e = lower(&parse("s[] += eps[0, 3, 1]")).unwrap_err();
    assert!(e.to_string().contains("outside 0:2"), "{e}");
}

#[test]
fn programs_without_delta_or_eps_are_untouched() {
    let p = parse("for i = _, j = _\n c[i] += A[i, j] * (x[j] + y[j])\nend");
    assert_eq!(normalize(&p).unwrap(), p);
    assert_eq!(lower(&p).unwrap(), p);
}

#[test]
fn permutation_signs() {
    assert_eq!(perm_sign(&[0, 1, 2]), 1);
    assert_eq!(perm_sign(&[1, 0, 2]), -1);
    assert_eq!(perm_sign(&[1, 2, 0]), 1);
    assert_eq!(perm_sign(&[1, 1, 0]), 0);
    assert_eq!(permutations(4).len(), 24);
    assert_eq!(permutations(4).iter().map(|p| p.1).sum::<i64>(), 0);
}
