//! Repeated index loads and checks done once (`ir::recheck`), and C's branchless float
//! selects (`t_self`): a gradient's scatter loop (SubdivNet's backward over a face's three
//! neighbours: `dx[adj[i, j], f] += ifelse(x[adj[i, j], f] - x[i, f] >= 0.0, g, -g)` and
//! its partners) loads and checks `adj[i, j]` once per statement; after the pass, once per
//! iteration. Results must be bit-identical to the reference evaluator on the JIT, the IR
//! interpreter and C, with NaN, infinities and signed zeros in the data, and a bad index
//! must fail with the same error (the first check in program order) as before.

mod common;

use common::rows::bits;
use common::{fmt, formats_of, parse, run_eval, runners};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::ir::{Expr, Kernel, Stmt};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// The scatter loop of SubdivNet's gradient, and variants: a read of an updated element
/// between two updates, a gather whose index is loaded in one branch, a second loop.
const PROGRAMS: &[&str] = &[
    "dx .= 0.0
for i = _, f = _
  for j = _
    dx[adj[i, j], f] += ifelse(x[adj[i, j], f] - x[i, f] >= 0.0, g[i, f], -g[i, f])
    dx[i, f] += -ifelse(x[adj[i, j], f] - x[i, f] >= 0.0, g[i, f], -g[i, f])
    dx[adj[i, j], f] += ifelse(x[adj[i, j], f] - x[adj[i, (j + 1) % 3], f] >= 0.0, g[i, f], -g[i, f])
    dx[adj[i, (j + 1) % 3], f] += -ifelse(x[adj[i, j], f] - x[adj[i, (j + 1) % 3], f] >= 0.0, g[i, f], -g[i, f])
    dx[adj[i, j], f] += g[i, f]
  end
end
",
    "dx .= 0.0
for i = _, f = _
  for j = _
    dx[adj[i, j], f] += x[adj[i, j], f] * g[i, f]
    dx[adj[i, (j + 2) % 3], f] += ifelse(x[i, f] < 0.0, x[adj[i, j], f], g[adj[i, j], f])
  end
end
",
    "dx .= 0.0
for i = _, f = _
  for j = _
    if x[i, f] > 0.0
      dx[adj[i, j], f] += g[adj[i, j], f]
    end
    dx[adj[i, j], f] += max(x[adj[i, j], f], g[i, f])
  end
end
",
];

const ROWS: usize = 9;
const COLS: usize = 4;

/// Values with the awkward ones mixed in: NaN, infinities, signed zeros.
fn value(rng: &mut StdRng, special: bool) -> f64 {
    if special && rng.random_range(0..5) == 0 {
        [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0][rng.random_range(0..5)]
    } else {
        (rng.random_range(-8..8) as f64) * 0.375
    }
}

fn tensors(seed: u64, special: bool, bad: Option<i64>) -> BTreeMap<String, Tensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    // Neighbours may repeat and include the face itself (all three updates then hit one
    // element, which the pass must not merge).
    let mut adj: Vec<i64> = (0..ROWS * 3)
        .map(|_| rng.random_range(0..ROWS as i64))
        .collect();
    if let Some(b) = bad {
        adj[7] = b;
    }
    let mut dense = |n: usize| -> Vec<f64> { (0..n).map(|_| value(&mut rng, special)).collect() };
    let matrix = |v: Vec<f64>| {
        Tensor::from_dense(
            &fmt("Dense(Dense(Element(0.0)))"),
            &[ROWS, COLS],
            &Buffer::F64(v.into()),
        )
        .unwrap()
    };
    let x = matrix(dense(ROWS * COLS));
    let g = matrix(dense(ROWS * COLS));
    BTreeMap::from([
        (
            "adj".to_string(),
            Tensor::from_dense(
                &fmt("Dense(Dense(Element(0)))"),
                &[ROWS, 3],
                &Buffer::I64(adj.into()),
            )
            .unwrap(),
        ),
        ("x".to_string(), x),
        ("g".to_string(), g),
        ("dx".to_string(), matrix(vec![0.0; ROWS * COLS])),
    ])
}

#[test]
fn scatters_match_the_evaluator_bit_for_bit() {
    for text in PROGRAMS {
        let p = parse(text);
        for seed in 0..6 {
            let special = seed % 2 == 1;
            let t = tensors(seed, special, None);
            let want = run_eval(&p, &t).unwrap();
            for (name, runner) in runners() {
                let k = runner.compile(&p, &formats_of(&t)).unwrap();
                let mut got = t.clone();
                runner.execute(&k, &mut got).unwrap();
                assert_eq!(
                    bits(&got["dx"].to_dense()),
                    bits(&want["dx"]),
                    "{name} seed {seed}\n{text}"
                );
            }
        }
    }
}

/// An index out of range fails at the first access that uses it, with the error the kernel
/// gave before the pass (`TESSERA_NO_RECHECK=1`, recorded below), on every backend: the
/// pass removes only checks that a passed one made before, so the first use of the bad
/// neighbour is still checked.
#[test]
fn a_bad_neighbour_fails_at_its_first_use() {
    // Per program: the place and the tensor of the failing check.
    let want = [("6:52", "`x`"), ("4:8", "`dx`"), ("5:10", "`dx`")];
    for (text, (place, tensor)) in PROGRAMS.iter().zip(want) {
        let p = parse(text);
        for bad in [-1, ROWS as i64, i64::MAX] {
            let t = tensors(3, false, Some(bad));
            for (name, runner) in runners() {
                let k = runner.compile(&p, &formats_of(&t)).unwrap();
                let mut got = t.clone();
                let e = runner
                    .execute(&k, &mut got)
                    .expect_err(&format!("{name}: index {bad} accepted"))
                    .to_string();
                let expected = format!("{place}: index {bad} is outside dimension 0 of {tensor}");
                assert!(e.contains(&expected), "{name}: {e}, not {expected}\n{text}");
            }
        }
    }
}

/// Loads of `buf` anywhere in the kernel.
fn loads_of(k: &Kernel, name: &str) -> usize {
    let Some(b) = k.bufs.iter().position(|d| d.name == name) else {
        return 0;
    };
    fn walk(stmts: &[Stmt], b: u32, n: &mut usize) {
        for s in stmts {
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    if let Expr::Load { buf, .. } = x {
                        *n += (buf.0 == b) as usize;
                    }
                });
            }
            for body in s.bodies() {
                walk(body, b, n);
            }
        }
    }
    let mut n = 0;
    walk(&k.body, b as u32, &mut n);
    n
}

/// The scatter loop's statements share their loads of `adj[i, j]` and `adj[i, (j + 1) % 3]`:
/// one of each per copy of the loop (the lowering emitted one per access, eleven per copy).
#[test]
fn the_scatter_loads_each_neighbour_once() {
    let p = parse(PROGRAMS[0]);
    let t = tensors(0, false, None);
    let runner = tessera::run::Runner::jit();
    let k = runner.compile(&p, &formats_of(&t)).unwrap();
    let loops = count_loops(&k.ir.body);
    let loads = loads_of(&k.ir, "adj_val");
    assert!(
        loads <= 2 * loops,
        "{loads} loads of adj in {loops} loops:\n{}",
        k.ir
    );
}

/// The kernel without `ir::jam`'s groups of rows, whose loop holds one copy of each row's
/// loads and calls: the rows left over run the original body, which is what is counted.
fn without_jammed_groups(k: &Kernel) -> Kernel {
    fn prune(stmts: &mut Vec<Stmt>, k: &Kernel) {
        stmts.retain(
            |s| !matches!(s, Stmt::For { var, .. } if k.vars[var.0 as usize].name == "jam_group"),
        );
        for s in stmts.iter_mut() {
            for b in s.bodies_mut() {
                prune(b, k);
            }
        }
    }
    let mut out = k.clone();
    prune(&mut out.body, k);
    out
}

fn count_loops(stmts: &[Stmt]) -> usize {
    stmts
        .iter()
        .map(|s| {
            let inner: usize = s.bodies().iter().map(|b| count_loops(b)).sum();
            inner + matches!(s, Stmt::For { .. }) as usize
        })
        .sum()
}

/// The sign choices of a gradient's scatter (`ifelse(x[p] - x[q] >= 0.0, d, -d)` with `d` a
/// local, as `ds3[]` is in SubdivNet's) are picked without a branch in C (`t_self`), with the
/// evaluator's bits; masks (`ifelse(x < 0.0, ...)`) keep C's `?:`.
#[test]
fn c_picks_signs_of_differences_without_a_branch() {
    let text = "dx .= 0.0
for i = _, f = _
  d .= 0.0
  d[] = g[i, f]
  for j = _
    dx[adj[i, j], f] += ifelse(x[adj[i, j], f] - x[i, f] >= 0.0, d[], -d[])
    dx[i, f] += ifelse(x[i, f] < 0.0, d[], 0.0)
  end
end
";
    let p = parse(text);
    let runner = tessera::run::Runner::jit();
    for seed in 0..4 {
        let mut t = tensors(seed, seed % 2 == 1, None);
        t.insert(
            "d".to_string(),
            Tensor::from_dense(&fmt("Element(0.0)"), &[], &Buffer::F64(vec![0.0].into())).unwrap(),
        );
        let want = run_eval(&p, &t).unwrap();
        for (name, r) in runners() {
            let k = r.compile(&p, &formats_of(&t)).unwrap();
            let mut got = t.clone();
            r.execute(&k, &mut got).unwrap();
            assert_eq!(
                bits(&got["dx"].to_dense()),
                bits(&want["dx"]),
                "{name} seed {seed}"
            );
        }
        let k = runner.compile(&p, &formats_of(&t)).unwrap();
        let c = tessera::backend::CBackend::source(&k.ir);
        // The sign choice in every copy of the loop; the mask stays a `?:`.
        let uses: Vec<&str> = c
            .lines()
            .filter(|l| l.contains("t_self(") && !l.contains("static inline"))
            .collect();
        assert!(!uses.is_empty(), "{c}");
        assert!(uses.iter().all(|l| l.contains(" - ")), "{uses:?}");
        assert!(c.lines().any(|l| l.contains("< (0.0)) ?")), "{c}");
    }
}

/// A softmax gradient's shape (GAT's backward after its partial sums): three statements
/// that each load `t[j]` twice and call `exp(s[i] + t[j])`, with a store to `dt` between
/// them. `ir::values` names the repeated loads (so `recheck` loads `t[j]` once) and then
/// the repeated call (computed once): results bit-identical to the evaluator on every
/// backend, with NaN, infinities and signed zeros, and one load of `t` and one `exp` per copy
/// of the loop.
#[test]
fn repeated_loads_and_calls_across_statements_are_done_once() {
    let text = "ds .= 0.0
dt .= 0.0
for i = _, j = _
  ds[i] += ifelse(s[i] + t[j] >= 0.0, g[i, j] * exp(s[i] + t[j]), 0.0)
  dt[j] += ifelse(s[i] + t[j] < 0.0, g[i, j] * exp(s[i] + t[j]), 0.0)
  ds[i] += g[i, j] * -exp(s[i] + t[j])
end
";
    let p = parse(text);
    for seed in 0..6 {
        let special = seed % 2 == 1;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut dense =
            |n: usize| -> Vec<f64> { (0..n).map(|_| value(&mut rng, special) / 4.0).collect() };
        let vector = |v: Vec<f64>| {
            let n = v.len();
            Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[n], &Buffer::F64(v.into())).unwrap()
        };
        let t = BTreeMap::from([
            ("s".to_string(), vector(dense(ROWS))),
            ("t".to_string(), vector(dense(COLS))),
            ("ds".to_string(), vector(vec![0.0; ROWS])),
            ("dt".to_string(), vector(vec![0.0; COLS])),
            (
                "g".to_string(),
                Tensor::from_dense(
                    &fmt("Dense(Dense(Element(0.0)))"),
                    &[ROWS, COLS],
                    &Buffer::F64(dense(ROWS * COLS).into()),
                )
                .unwrap(),
            ),
        ]);
        let want = run_eval(&p, &t).unwrap();
        for (name, runner) in runners() {
            let k = runner.compile(&p, &formats_of(&t)).unwrap();
            let mut got = t.clone();
            runner.execute(&k, &mut got).unwrap();
            for out in ["ds", "dt"] {
                assert_eq!(
                    bits(&got[out].to_dense()),
                    bits(&want[out]),
                    "{name} seed {seed} {out}"
                );
            }
            if seed == 0 {
                let ir = without_jammed_groups(&k.ir);
                let loops = count_loops(&ir.body);
                let loads = loads_of(&ir, "t_val");
                let mut exps = 0;
                fn walk(stmts: &[Stmt], n: &mut usize) {
                    for s in stmts {
                        for e in s.own_exprs() {
                            e.visit(&mut |x| {
                                *n += matches!(x, Expr::Unary(tessera::ir::UnOp::Exp, _)) as usize
                            });
                        }
                        for b in s.bodies() {
                            walk(b, n);
                        }
                    }
                }
                walk(&ir.body, &mut exps);
                assert!(
                    loads <= loops && exps <= loops,
                    "{name}: {loads} loads of t and {exps} exp in {loops} loops:\n{}",
                    k.ir
                );
            }
        }
    }
}
