//! What `Runner::execute` keeps between runs of one compiled kernel (issue 18/19's per-call
//! cost: the last checked shapes and integer scalars, the tensors' places, the buffer table)
//! must never make a later run wrong: every run of the same `Compiled` with other shapes,
//! values, scalars, formats or element types gives the reference evaluator's result or a
//! typed error, on every backend (JIT, interpreter, C when a compiler is present), through
//! the map entry (`Runner::execute`) and the positional one (`Runner::execute_at`) alike.

mod common;

use common::{fmt, formats_of, parse, run_eval};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::error::Error;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// A runner whose `execute` goes through the map entry or the positional one: every test
/// below runs both ways (`runners`), so what one keeps between runs is checked as the other's.
struct Caller {
    runner: tessera::run::Runner,
    by_position: bool,
}

impl std::ops::Deref for Caller {
    type Target = tessera::run::Runner;
    fn deref(&self) -> &tessera::run::Runner {
        &self.runner
    }
}

impl Caller {
    /// `Runner::execute`, or `Runner::execute_at` on the map's tensors in the kernel's
    /// parameter order (up to the first one the map lacks: a call by position cannot skip
    /// one), put back into the map after the run, failed or not.
    fn execute(
        &self,
        c: &tessera::run::Compiled,
        ts: &mut BTreeMap<String, Tensor>,
    ) -> tessera::error::Result<()> {
        if !self.by_position {
            return self.runner.execute(c, ts);
        }
        let names: Vec<String> = c
            .params()
            .map(str::to_string)
            .take_while(|n| ts.contains_key(n))
            .collect();
        let mut slots: Vec<Tensor> = names.iter().map(|n| ts.remove(n).unwrap()).collect();
        let result = self.runner.execute_at(c, &mut slots);
        ts.extend(names.into_iter().zip(slots));
        result
    }
}

/// Every backend's runner, once through each entry.
fn runners() -> Vec<(String, Caller)> {
    [false, true]
        .into_iter()
        .flat_map(|by_position| {
            common::runners().into_iter().map(move |(name, runner)| {
                let how = if by_position {
                    "by position"
                } else {
                    "by name"
                };
                (
                    format!("{name} ({how})"),
                    Caller {
                        runner,
                        by_position,
                    },
                )
            })
        })
        .collect()
}

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

fn random_values(rng: &mut StdRng, n: usize, density: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            if rng.random_bool(density) {
                rng.random_range(1..10) as f64
            } else {
                0.0
            }
        })
        .collect()
}

fn tensor(format: &str, shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::from_dense(&fmt(format), shape, &Buffer::F64(values.into())).unwrap()
}

/// SpMV's tensors: `A` (rows x cols) in `a_format`, `x`, and a `y` holding garbage values
/// from an earlier run (the program's `y .= 0` must clear them).
fn spmv_tensors(
    rng: &mut StdRng,
    a_format: &str,
    y_format: &str,
    rows: usize,
    cols: usize,
) -> BTreeMap<String, Tensor> {
    let a = random_values(rng, rows * cols, 0.3);
    let x = random_values(rng, cols, 0.9);
    let y = random_values(rng, rows, 0.5);
    BTreeMap::from([
        ("A".to_string(), tensor(a_format, &[rows, cols], a)),
        ("x".to_string(), tensor("Dense(Element(0.0))", &[cols], x)),
        ("y".to_string(), tensor(y_format, &[rows], y)),
    ])
}

/// Run `c` on `ts` and compare every tensor with the evaluator's (inputs included: a run
/// must leave what it only reads as it was, and valid).
fn run_and_compare(
    name: &str,
    runner: &Caller,
    c: &tessera::run::Compiled,
    program: &str,
    mut ts: BTreeMap<String, Tensor>,
) {
    let want = run_eval(&parse(program), &ts).unwrap();
    let before: BTreeMap<String, Buffer> =
        ts.iter().map(|(n, t)| (n.clone(), t.to_dense())).collect();
    runner
        .execute(c, &mut ts)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for (n, t) in &ts {
        t.validate(n).unwrap_or_else(|e| panic!("{name}: {n}: {e}"));
        assert_eq!(t.to_dense(), want[n], "{name}: {n}");
        if !["y", "s", "B"].contains(&n.as_str()) {
            assert_eq!(t.to_dense(), before[n], "{name}: input {n} changed");
        }
    }
}

/// One compiled SpMV per (A format, y format), run again and again with new values and new
/// (consistent) shapes, alternating with runs whose shapes disagree: each of those is an
/// error every time, however many good runs came before, and a good run after it is right.
#[test]
fn repeated_runs_of_one_kernel_follow_shapes_and_values() {
    let mut rng = StdRng::seed_from_u64(18);
    let a_formats = [
        "Dense(SparseList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
    ];
    let y_formats = ["Dense(Element(0.0))", "SparseList(Element(0.0))"];
    for (backend, runner) in runners() {
        for a_format in a_formats {
            for y_format in y_formats {
                let name = format!("{backend} A={a_format} y={y_format}");
                let first = spmv_tensors(&mut rng, a_format, y_format, 5, 4);
                let c = runner.compile(&parse(SPMV), &formats_of(&first)).unwrap();
                run_and_compare(&name, &runner, &c, SPMV, first);
                for (rows, cols) in [(5, 4), (5, 4), (8, 8), (1, 1), (5, 4), (3, 9), (3, 9)] {
                    let ts = spmv_tensors(&mut rng, a_format, y_format, rows, cols);
                    run_and_compare(&name, &runner, &c, SPMV, ts);
                    // `x` one longer than `A`'s columns: refused after any number of good runs.
                    let mut bad = spmv_tensors(&mut rng, a_format, y_format, rows, cols);
                    bad.insert(
                        "x".into(),
                        tensor("Dense(Element(0.0))", &[cols + 1], vec![1.0; cols + 1]),
                    );
                    let e = runner.execute(&c, &mut bad).unwrap_err();
                    assert!(matches!(e, Error::DimensionMismatch { .. }), "{name}: {e}");
                    // `y` of the wrong length too.
                    let mut bad = spmv_tensors(&mut rng, a_format, y_format, rows, cols);
                    bad.insert(
                        "y".into(),
                        tensor(y_format, &[rows + 2], vec![0.0; rows + 2]),
                    );
                    let e = runner.execute(&c, &mut bad).unwrap_err();
                    assert!(matches!(e, Error::DimensionMismatch { .. }), "{name}: {e}");
                }
            }
        }
    }
}

/// Integer scalars are part of what a run's shape check depends on: a changed scalar is
/// checked again (an error when it disagrees with a tensor, a new result when it agrees), and
/// a scalar that appears, disappears or is renamed between runs is noticed too.
#[test]
fn repeated_runs_follow_integer_scalars() {
    let program = "s .= 0\nfor k = 0:m - 1\n  s[] += w[k]\nend\n";
    let scalar =
        |v: i64| Tensor::from_dense(&fmt("Element(0)"), &[], &Buffer::I64(vec![v].into())).unwrap();
    let make = |m: i64, w: usize| -> BTreeMap<String, Tensor> {
        BTreeMap::from([
            ("m".to_string(), scalar(m)),
            (
                "w".to_string(),
                tensor(
                    "Dense(Element(0.0))",
                    &[w],
                    (1..=w).map(|v| v as f64).collect(),
                ),
            ),
            (
                "s".to_string(),
                Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
            ),
        ])
    };
    for (backend, runner) in runners() {
        let first = make(4, 4);
        let c = runner
            .compile(&parse(program), &formats_of(&first))
            .unwrap();
        for (m, w) in [(4, 4), (4, 4), (2, 2), (6, 6), (4, 4)] {
            run_and_compare(
                &format!("{backend} m={m}"),
                &runner,
                &c,
                program,
                make(m, w),
            );
        }
        // The same `w` as the last good run, another `m`: only the scalar changed.
        for m in [3, 5, 3] {
            let e = runner.execute(&c, &mut make(m, 4)).unwrap_err();
            assert!(e.to_string().contains("`k`"), "{backend}: {e}");
        }
        run_and_compare(
            &format!("{backend} again"),
            &runner,
            &c,
            program,
            make(4, 4),
        );
        // An extra integer scalar the program does not read changes nothing, whatever it is.
        for extra in [1, 2, 3] {
            let mut ts = make(4, 4);
            ts.insert("n".into(), scalar(extra));
            run_and_compare(
                &format!("{backend} extra {extra}"),
                &runner,
                &c,
                program,
                ts,
            );
        }
        // `m` missing: a typed error naming it, and the other tensors keep their arrays.
        let mut ts = make(4, 4);
        ts.remove("m");
        let e = runner.execute(&c, &mut ts).unwrap_err();
        assert!(e.to_string().contains('m'), "{backend}: {e}");
        assert_eq!(
            ts["w"].to_dense(),
            Buffer::F64(vec![1.0, 2.0, 3.0, 4.0].into())
        );
        run_and_compare(
            &format!("{backend} after missing"),
            &runner,
            &c,
            program,
            make(4, 4),
        );
    }
}

/// Scalars read as `lo[]` (not by bare name) bound loops the kernel checks itself, so a run
/// that changes only them skips the shape check (`run::sizing_scalars`): every such run is
/// still the evaluator's result, or the kernel's typed error when the range leaves `w`, also
/// right after good runs with the same shapes.
#[test]
fn runs_that_change_only_range_scalars_stay_checked() {
    let program = "s .= 0\nfor k = lo[]:hi[]\n  s[] += w[k]\nend\n";
    let scalar =
        |v: i64| Tensor::from_dense(&fmt("Element(0)"), &[], &Buffer::I64(vec![v].into())).unwrap();
    let make = |lo: i64, hi: i64| -> BTreeMap<String, Tensor> {
        BTreeMap::from([
            ("lo".to_string(), scalar(lo)),
            ("hi".to_string(), scalar(hi)),
            (
                "w".to_string(),
                tensor(
                    "Dense(Element(0.0))",
                    &[6],
                    (1..=6).map(|v| v as f64).collect(),
                ),
            ),
            (
                "s".to_string(),
                Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
            ),
        ])
    };
    let sizing = tessera::run::sizing_scalars(&parse(program));
    assert!(
        !sizing.contains("lo") && !sizing.contains("hi"),
        "{sizing:?}"
    );
    for (backend, runner) in runners() {
        let c = runner
            .compile(&parse(program), &formats_of(&make(0, 5)))
            .unwrap();
        for (lo, hi) in [(0, 5), (1, 3), (2, 2), (4, 1), (0, 0), (3, 5)] {
            let name = format!("{backend} {lo}:{hi}");
            run_and_compare(&name, &runner, &c, program, make(lo, hi));
        }
        for (lo, hi) in [(2, 6), (-1, 3), (0, 9)] {
            let e = runner.execute(&c, &mut make(lo, hi)).unwrap_err();
            assert!(
                e.to_string().contains("outside dimension 0 of `w`"),
                "{backend}: {e}"
            );
            run_and_compare(
                &format!("{backend} after"),
                &runner,
                &c,
                program,
                make(1, 4),
            );
        }
    }
}

/// A tensor the program uses but the run was not given is a typed error naming it, before
/// any array moves: the given tensors are left whole, and the next run is right.
#[test]
fn a_missing_tensor_is_an_error_and_loses_nothing() {
    let mut rng = StdRng::seed_from_u64(19);
    for (backend, runner) in runners() {
        let ts = spmv_tensors(
            &mut rng,
            "Dense(SparseList(Element(0.0)))",
            "Dense(Element(0.0))",
            4,
            4,
        );
        let c = runner.compile(&parse(SPMV), &formats_of(&ts)).unwrap();
        run_and_compare(&backend, &runner, &c, SPMV, ts);
        for missing in ["A", "x", "y"] {
            let mut ts = spmv_tensors(
                &mut rng,
                "Dense(SparseList(Element(0.0)))",
                "Dense(Element(0.0))",
                4,
                4,
            );
            let before: BTreeMap<String, Buffer> =
                ts.iter().map(|(n, t)| (n.clone(), t.to_dense())).collect();
            ts.remove(missing);
            let e = runner.execute(&c, &mut ts).unwrap_err();
            assert!(
                e.to_string().contains(&format!("`{missing}`")) || e.to_string().contains(missing),
                "{backend}: {e}"
            );
            for (n, t) in &ts {
                t.validate(n).unwrap();
                assert_eq!(
                    t.to_dense(),
                    before[n],
                    "{backend}: {n} after a run without {missing}"
                );
            }
        }
        let ts = spmv_tensors(
            &mut rng,
            "Dense(SparseList(Element(0.0)))",
            "Dense(Element(0.0))",
            6,
            2,
        );
        run_and_compare(&backend, &runner, &c, SPMV, ts);
    }
}

/// Tensors of another format or element type than the kernel was compiled for are refused
/// by the run (the backend's check of the buffers), however many good runs came before, and
/// a good run after the refusal is right.
#[test]
fn other_formats_and_element_types_are_refused() {
    let mut rng = StdRng::seed_from_u64(20);
    for (backend, runner) in runners() {
        let csr = "Dense(SparseList(Element(0.0)))";
        let ts = spmv_tensors(&mut rng, csr, "Dense(Element(0.0))", 4, 4);
        let c = runner.compile(&parse(SPMV), &formats_of(&ts)).unwrap();
        for _ in 0..3 {
            let ts = spmv_tensors(&mut rng, csr, "Dense(Element(0.0))", 4, 4);
            run_and_compare(&backend, &runner, &c, SPMV, ts);
        }
        // `x` of 4-byte floats.
        let mut ts = spmv_tensors(&mut rng, csr, "Dense(Element(0.0))", 4, 4);
        ts.insert(
            "x".into(),
            Tensor::from_dense(
                &fmt("Dense(Element(0.0, f32))"),
                &[4],
                &Buffer::F32(vec![1.0; 4].into()),
            )
            .unwrap(),
        );
        assert!(
            runner.execute(&c, &mut ts).is_err(),
            "{backend}: f32 x accepted"
        );
        // `A` dense: other arrays than the kernel's.
        let mut ts = spmv_tensors(
            &mut rng,
            "Dense(Dense(Element(0.0)))",
            "Dense(Element(0.0))",
            4,
            4,
        );
        assert!(
            runner.execute(&c, &mut ts).is_err(),
            "{backend}: dense A accepted"
        );
        let ts = spmv_tensors(&mut rng, csr, "Dense(Element(0.0))", 4, 4);
        run_and_compare(&backend, &runner, &c, SPMV, ts);
    }
}

/// A run-length output is finished and merged after every run (what the kernel wrote), while
/// the inputs, which a run no longer finishes, stay valid and equal to what was given.
#[test]
fn run_length_outputs_merge_on_every_run() {
    let program = "B .= 0\nfor i = _, j = _\n  B[i, j] = A[i, j] * s[]\nend\n";
    let scalar = |v: f64| {
        Tensor::from_dense(&fmt("Element(0.0)"), &[], &Buffer::F64(vec![v].into())).unwrap()
    };
    let mut rng = StdRng::seed_from_u64(21);
    for (backend, runner) in runners() {
        let make = |rng: &mut StdRng, rows: usize, cols: usize, s: f64| {
            let a = common::random::random_tensor(
                rng,
                &fmt("Dense(SparseRunList(Element(0.0)))"),
                &[rows, cols],
            );
            BTreeMap::from([
                ("A".to_string(), a),
                (
                    "B".to_string(),
                    Tensor::empty(&fmt("Dense(RunList(Element(0.0)))"), &[rows, cols]).unwrap(),
                ),
                ("s".to_string(), scalar(s)),
            ])
        };
        let first = make(&mut rng, 3, 5, 1.0);
        let c = runner
            .compile(&parse(program), &formats_of(&first))
            .unwrap();
        run_and_compare(&backend, &runner, &c, program, first);
        // `s = 0` makes every row one run of zeros: merging is what makes it one.
        for (rows, cols, s) in [
            (3, 5, 2.0),
            (3, 5, 0.0),
            (6, 2, 1.0),
            (3, 5, 0.0),
            (1, 9, 3.0),
        ] {
            let ts = make(&mut rng, rows, cols, s);
            let want = run_eval(&parse(program), &ts).unwrap();
            let mut got = ts;
            runner.execute(&c, &mut got).unwrap();
            got["B"].validate("B").unwrap();
            assert_eq!(got["B"].to_dense(), want["B"], "{backend}");
            if s == 0.0 {
                let runs = got["B"].levels[1][1].len();
                assert_eq!(
                    runs, rows,
                    "{backend}: B's runs not merged ({runs} for {rows} rows)"
                );
            }
        }
    }
}

/// The positional entry's own contract: `params` names the places and `param` finds them;
/// too few tensors is the missing one's typed error, too many a usage error, and tensors
/// swapped between places are refused by their formats or shapes (here `A` and `x`, and
/// `x` and `y` of other lengths), each without losing an array, after which a good run is
/// right.
#[test]
fn tensors_by_position_are_checked_in_their_places() {
    let mut rng = StdRng::seed_from_u64(22);
    let csr = "Dense(SparseList(Element(0.0)))";
    let dense = "Dense(Element(0.0))";
    for (backend, runner) in common::runners() {
        let ts = spmv_tensors(&mut rng, csr, dense, 5, 3);
        let c = runner.compile(&parse(SPMV), &formats_of(&ts)).unwrap();
        let params: Vec<String> = c.params().map(str::to_string).collect();
        let mut sorted = params.clone();
        sorted.sort();
        assert_eq!(sorted, ["A", "x", "y"], "{backend}");
        for (k, n) in params.iter().enumerate() {
            assert_eq!(c.param(n), Some(k), "{backend}: {n}");
        }
        assert_eq!(c.param("z"), None);
        let slots = |ts: &mut BTreeMap<String, Tensor>| -> Vec<Tensor> {
            params.iter().map(|n| ts.remove(n).unwrap()).collect()
        };
        let dense_of = |v: &[Tensor]| -> Vec<Buffer> { v.iter().map(Tensor::to_dense).collect() };
        // Too few: the first one not given is named.
        let mut v = slots(&mut spmv_tensors(&mut rng, csr, dense, 5, 3));
        let before = dense_of(&v);
        v.pop();
        let e = runner.execute_at(&c, &mut v).unwrap_err();
        assert!(e.to_string().contains(&params[2]), "{backend}: {e}");
        assert_eq!(dense_of(&v), before[..2], "{backend}");
        // Too many.
        let mut v = slots(&mut spmv_tensors(&mut rng, csr, dense, 5, 3));
        v.push(v[0].clone());
        let e = runner.execute_at(&c, &mut v).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{backend}: {e}");
        // `A` and `x` swapped: refused (the shape check sees it first), nothing lost.
        let (a, x) = (c.param("A").unwrap(), c.param("x").unwrap());
        let mut v = slots(&mut spmv_tensors(&mut rng, csr, dense, 5, 3));
        v.swap(a, x);
        let before = dense_of(&v);
        let e = runner.execute_at(&c, &mut v).unwrap_err();
        assert!(
            matches!(e, Error::DimensionMismatch { .. }) || e.to_string().contains("format"),
            "{backend}: {e}"
        );
        assert_eq!(dense_of(&v), before, "{backend}");
        // `A` of the right shape in another format: the format check names it.
        let mut ts = spmv_tensors(&mut rng, "Dense(Dense(Element(0.0)))", dense, 5, 3);
        let mut v = slots(&mut ts);
        let e = runner.execute_at(&c, &mut v).unwrap_err();
        assert!(
            e.to_string().contains("format") && e.to_string().contains('A'),
            "{backend}: {e}"
        );
        // `x` (3) and `y` (5) swapped: same format, other lengths: the shape check.
        let y = c.param("y").unwrap();
        let mut v = slots(&mut spmv_tensors(&mut rng, csr, dense, 5, 3));
        v.swap(x, y);
        let e = runner.execute_at(&c, &mut v).unwrap_err();
        assert!(
            matches!(e, Error::DimensionMismatch { .. }),
            "{backend}: {e}"
        );
        // And a good run by position after all that.
        let mut ts = spmv_tensors(&mut rng, csr, dense, 5, 3);
        let want = run_eval(&parse(SPMV), &ts).unwrap();
        let mut v = slots(&mut ts);
        runner.execute_at(&c, &mut v).unwrap();
        assert_eq!(v[y].to_dense(), want["y"], "{backend}");
    }
}
