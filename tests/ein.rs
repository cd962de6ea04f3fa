//! δ and ε (issue 15): every identity of seed-diderot-ein.md §11 that needs no fields, on
//! random data, on the JIT, the C backend and the reference evaluator, against brute force in
//! Rust; the lowered cross product; einsum; errors; `tessera code --show-normal`.

mod common;

use common::cases::c_runner;
use common::cli::{ok, tessera};
use common::{fmt, formats_of, parse};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::error::Error;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn dense(rank: usize) -> String {
    format!("{}Element(0.0){}", "Dense(".repeat(rank), ")".repeat(rank))
}

fn tensor(shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::from_dense(
        &fmt(&dense(shape.len())),
        shape,
        &Buffer::F64(values.into()),
    )
    .unwrap()
}

fn random(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// The output `out` of `src` on every backend (JIT, C when a compiler is present, evaluator).
fn run_all(
    src: &str,
    inputs: &[(&str, &[usize], Vec<f64>)],
    out: (&str, &[usize]),
) -> Vec<(&'static str, Vec<f64>)> {
    let p = parse(src);
    let mut tensors = BTreeMap::new();
    for (n, s, v) in inputs {
        tensors.insert(n.to_string(), tensor(s, v.clone()));
    }
    let len = out.1.iter().product();
    tensors.insert(out.0.to_string(), tensor(out.1, vec![0.0; len]));
    let mut results = vec![];
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("ein") {
        runners.push(("c", c));
    }
    for (name, r) in runners {
        let mut ts = tensors.clone();
        let k = r
            .compile(&p, &formats_of(&ts))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        r.execute(&k, &mut ts).unwrap();
        let v = ts[out.0]
            .to_dense()
            .converted(tessera::types::ElemType::F64);
        results.push((name, v.as_f64().unwrap().to_vec()));
    }
    let ev = tessera::tensor::evaluate(&p, &tensors).unwrap_or_else(|e| panic!("eval: {e}"));
    let v = ev[out.0].converted(tessera::types::ElemType::F64);
    results.push(("eval", v.as_f64().unwrap().to_vec()));
    results
}

fn assert_close(src: &str, got: &[(&str, Vec<f64>)], want: &[f64]) {
    for (backend, v) in got {
        assert_eq!(v.len(), want.len(), "{backend}: {src}");
        for (k, (x, y)) in v.iter().zip(want).enumerate() {
            assert!(
                (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
                "{backend}, entry {k}: {x} vs {y}\n{src}"
            );
        }
    }
}

/// The Levi-Civita symbol by brute force: the sign of `ix` as a permutation of `0..n`.
fn levi(ix: &[usize]) -> f64 {
    let n = ix.len();
    if ix.iter().any(|&x| x >= n) {
        return 0.0;
    }
    let mut s = 1.0;
    for a in 0..n {
        for b in a + 1..n {
            if ix[a] == ix[b] {
                return 0.0;
            }
            if ix[a] > ix[b] {
                s = -s;
            }
        }
    }
    s
}

fn kd(a: usize, b: usize) -> f64 {
    if a == b { 1.0 } else { 0.0 }
}

fn cross(a: &[f64], b: &[f64]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn eps_delta_identity_for_all_81_tuples() {
    let src = "for j = _, k = _, l = _, m = _, i = _\n  r[j, k, l, m] += eps[i, j, k] * eps[i, l, m]\nend";
    let got = run_all(src, &[], ("r", &[3, 3, 3, 3]));
    let mut want = vec![];
    for j in 0..3 {
        for k in 0..3 {
            for l in 0..3 {
                for m in 0..3 {
                    // Brute force on the left side, and the stated right side: equal.
                    let lhs: f64 = (0..3).map(|i| levi(&[i, j, k]) * levi(&[i, l, m])).sum();
                    assert_eq!(lhs, kd(j, l) * kd(k, m) - kd(j, m) * kd(k, l));
                    want.push(lhs);
                }
            }
        }
    }
    assert_close(src, &got, &want);
}

#[test]
fn traces() {
    let src = "for i = 0:2\n  s[] += delta[i, i]\nend";
    assert_close(src, &run_all(src, &[], ("s", &[])), &[3.0]);
    let src = "for i = _, j = _, k = _\n  s[] += eps[i, j, k] * eps[i, j, k]\nend";
    assert_close(src, &run_all(src, &[], ("s", &[])), &[6.0]);
    // δ sized by the tensor its index also reads: Σ_ij δ_ij x_j = Σ x.
    let mut rng = StdRng::seed_from_u64(1);
    let x = random(&mut rng, 7);
    let src = "for i = _, j = _\n  s[] += delta[i, j] * x[j]\nend";
    let got = run_all(src, &[("x", &[7], x.clone())], ("s", &[]));
    assert_close(src, &got, &[x.iter().sum()]);
}

#[test]
fn bac_cab_family_on_random_vectors() {
    let mut rng = StdRng::seed_from_u64(2);
    for _ in 0..3 {
        let (a, b, c, d) = (
            random(&mut rng, 3),
            random(&mut rng, 3),
            random(&mut rng, 3),
            random(&mut rng, 3),
        );
        let ins = |names: &[&'static str]| {
            names
                .iter()
                .map(|n| {
                    let v = match *n {
                        "a" => a.clone(),
                        "b" => b.clone(),
                        "c" => c.clone(),
                        _ => d.clone(),
                    };
                    (*n, &[3usize][..], v)
                })
                .collect::<Vec<_>>()
        };
        // a × (b × c) = b (a·c) − c (a·b)
        let src = "for i = _, j = _, k = _, l = _, m = _\n  r[i] += eps[i, j, k] * a[j] * eps[k, l, m] * b[l] * c[m]\nend";
        let want: Vec<f64> = (0..3)
            .map(|i| b[i] * dot(&a, &c) - c[i] * dot(&a, &b))
            .collect();
        assert_eq!(cross(&a, &cross(&b, &c)).len(), 3);
        for (x, y) in cross(&a, &cross(&b, &c)).iter().zip(&want) {
            assert!((x - y).abs() < 1e-12);
        }
        assert_close(
            src,
            &run_all(src, &ins(&["a", "b", "c"]), ("r", &[3])),
            &want,
        );
        // (a × b) × c = b (a·c) − a (b·c)
        let src = "for i = _, j = _, k = _, l = _, m = _\n  r[i] += eps[i, j, k] * eps[j, l, m] * a[l] * b[m] * c[k]\nend";
        let want: Vec<f64> = (0..3)
            .map(|i| b[i] * dot(&a, &c) - a[i] * dot(&b, &c))
            .collect();
        assert_close(
            src,
            &run_all(src, &ins(&["a", "b", "c"]), ("r", &[3])),
            &want,
        );
        // (a × b) · (c × d) = (a·c)(b·d) − (a·d)(b·c)
        let src = "for i = _, j = _, k = _, l = _, m = _\n  s[] += eps[i, j, k] * a[j] * b[k] * eps[i, l, m] * c[l] * d[m]\nend";
        let want = dot(&a, &c) * dot(&b, &d) - dot(&a, &d) * dot(&b, &c);
        assert!((dot(&cross(&a, &b), &cross(&c, &d)) - want).abs() < 1e-12);
        assert_close(
            src,
            &run_all(src, &ins(&["a", "b", "c", "d"]), ("s", &[])),
            &[want],
        );
        // (a × b) × (c × d) = (a·(c×d)) b − (b·(c×d)) a
        let src = "for i = _, j = _, k = _, l = _, m = _, p = _, q = _\n  r[i] += eps[i, j, k] * eps[j, l, m] * a[l] * b[m] * eps[k, p, q] * c[p] * d[q]\nend";
        let cd = cross(&c, &d);
        let want: Vec<f64> = (0..3)
            .map(|i| dot(&a, &cd) * b[i] - dot(&b, &cd) * a[i])
            .collect();
        assert_close(
            src,
            &run_all(src, &ins(&["a", "b", "c", "d"]), ("r", &[3])),
            &want,
        );
        // a × a = 0, a · (a × b) = 0
        let src = "for i = _, j = _, k = _\n  r[i] += eps[i, j, k] * a[j] * a[k]\nend";
        assert_close(src, &run_all(src, &ins(&["a"]), ("r", &[3])), &[0.0; 3]);
        let src = "for i = _, j = _, k = _\n  s[] += a[i] * eps[i, j, k] * a[j] * b[k]\nend";
        assert_close(src, &run_all(src, &ins(&["a", "b"]), ("s", &[])), &[0.0]);
    }
}

#[test]
fn eps_of_order_two_and_four() {
    let mut rng = StdRng::seed_from_u64(3);
    let (a, b, c) = (
        random(&mut rng, 4),
        random(&mut rng, 4),
        random(&mut rng, 4),
    );
    // 2-D: the scalar cross product.
    let src = "for i = _, j = _\n  s[] += eps[i, j] * a[i] * b[j]\nend";
    let got = run_all(
        src,
        &[("a", &[2], a[..2].to_vec()), ("b", &[2], b[..2].to_vec())],
        ("s", &[]),
    );
    assert_close(src, &got, &[a[0] * b[1] - a[1] * b[0]]);
    // 4-D: the vector orthogonal to three others.
    let src = "for i = _, j = _, k = _, l = _\n  r[i] += eps[i, j, k, l] * a[j] * b[k] * c[l]\nend";
    let got = run_all(
        src,
        &[
            ("a", &[4], a.clone()),
            ("b", &[4], b.clone()),
            ("c", &[4], c.clone()),
        ],
        ("r", &[4]),
    );
    let mut want = vec![0.0; 4];
    for (i, w) in want.iter_mut().enumerate() {
        for (j, aj) in a.iter().enumerate() {
            for (k, bk) in b.iter().enumerate() {
                for (l, cl) in c.iter().enumerate() {
                    *w += levi(&[i, j, k, l]) * aj * bk * cl;
                }
            }
        }
    }
    assert_close(src, &got, &want);
    assert!(dot(&want, &a).abs() < 1e-12);
    // Σ ε_ijkl ε_ijkl = 4! and the contraction over two indices, entry by entry.
    let src = "for i = _, j = _, k = _, l = _\n  s[] += eps[i, j, k, l] * eps[i, j, k, l]\nend";
    assert_close(src, &run_all(src, &[], ("s", &[])), &[24.0]);
    let src = "for k = _, l = _, m = _, n = _, i = _, j = _\n  r[k, l, m, n] += eps[i, j, k, l] * eps[i, j, m, n]\nend";
    let mut want = vec![];
    for k in 0..4 {
        for l in 0..4 {
            for m in 0..4 {
                for n in 0..4 {
                    want.push(2.0 * (kd(k, m) * kd(l, n) - kd(k, n) * kd(l, m)));
                }
            }
        }
    }
    assert_close(src, &run_all(src, &[], ("r", &[4, 4, 4, 4])), &want);
}

#[test]
fn batched_cross_product_is_six_products() {
    let mut rng = StdRng::seed_from_u64(4);
    let n = 1000;
    let (a, b) = (random(&mut rng, 3 * n), random(&mut rng, 3 * n));
    let src = "for n = _, i = _, j = _, k = _\n  c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]\nend";
    let got = run_all(
        src,
        &[("a", &[n, 3], a.clone()), ("b", &[n, 3], b.clone())],
        ("c", &[n, 3]),
    );
    let want: Vec<f64> = (0..n)
        .flat_map(|r| cross(&a[3 * r..3 * r + 3], &b[3 * r..3 * r + 3]))
        .collect();
    assert_close(src, &got, &want);
    // The kernel: one loop (over n), six products, no ε table.
    let mut ts = BTreeMap::new();
    for name in ["a", "b", "c"] {
        ts.insert(name.to_string(), tensor(&[2, 3], vec![0.0; 6]));
    }
    let (k, _, _) = Runner::lower(&parse(src), &formats_of(&ts)).unwrap();
    let ir = k.to_string();
    let loops = ir
        .lines()
        .filter(|l| l.trim_start().starts_with("for "))
        .count();
    assert_eq!(loops, 1, "{ir}");
    assert_eq!(ir.matches("] * b_val[").count(), 6, "{ir}");
}

#[test]
fn einsum_with_eps() {
    let mut rng = StdRng::seed_from_u64(5);
    let (a, b) = (random(&mut rng, 3), random(&mut rng, 3));
    let (ta, tb) = (tensor(&[3], a.clone()), tensor(&[3], b.clone()));
    let c = tessera::api::einsum(
        "c[i] += eps[i, j, k] * a[j] * b[k]",
        &[("a", &ta), ("b", &tb)],
    )
    .unwrap();
    let got = c.to_dense();
    let want = cross(&a, &b);
    for (x, y) in got.as_f64().unwrap().iter().zip(&want) {
        assert!((x - y).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    let m = tessera::api::einsum(
        "m[i, j] += delta[i, k] * A[k, j]",
        &[("A", &tensor(&[3, 3], a.repeat(3)))],
    )
    .unwrap();
    assert_eq!(m.to_dense().as_f64().unwrap(), a.repeat(3).as_slice());
}

#[test]
fn reserved_names_and_typed_errors() {
    // A tensor of a reserved name is refused, by the compiler, the evaluator and the CLI.
    let p = parse("for i = _\n  y[i] += eps[i] * x[i]\nend");
    let mut ts = BTreeMap::new();
    ts.insert("eps".to_string(), tensor(&[1], vec![1.0]));
    ts.insert("y".to_string(), tensor(&[1], vec![0.0]));
    let e = Runner::jit().compile(&p, &formats_of(&ts)).err().unwrap();
    assert!(
        matches!(&e, Error::Tensor { tensor, .. } if tensor == "eps"),
        "{e}"
    );
    let e = tessera::tensor::evaluate(&p, &ts).unwrap_err();
    assert!(
        matches!(&e, Error::Tensor { tensor, .. } if tensor == "eps"),
        "{e}"
    );
    // A δ nothing sizes names its place.
    let p = parse("for i = _\n  s[] += delta[i, i]\nend");
    let mut ts = BTreeMap::new();
    ts.insert("s".to_string(), tensor(&[], vec![0.0]));
    let e = Runner::jit().compile(&p, &formats_of(&ts)).err().unwrap();
    assert!(
        matches!(&e, Error::Program { span, .. } if (span.line, span.col) == (2, 10)),
        "{e}"
    );
    let e = tessera::tensor::evaluate(&p, &ts).unwrap_err();
    assert!(matches!(&e, Error::Program { .. }), "{e}");
}

#[test]
fn show_normal_prints_a_program_that_parses_back() {
    let out = ok(&[
        "code",
        "--show-normal",
        "for i = _, j = _, k = _, l = _, m = _\n  d[i] += eps[i, j, k] * a[j] * eps[k, l, m] * b[l] * c[m]\nend",
    ]);
    assert_eq!(
        out,
        "for i = _, j = _\n  d[i] += a[j] * b[i] * c[j] - a[j] * b[j] * c[i]\nend\n"
    );
    let again = ok(&["code", "--show-normal", &out]);
    assert_eq!(again, out);
    let o = tessera(&[
        "code",
        "--show-normal",
        "for i = _\n  s[] += delta[i, i]\nend",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("2:10"), "{o:?}");
}
