//! Run-length levels (RunList, SparseRunList, SparseInterval) and the AcceptRun looplet:
//! golden storage (0-based forms of Finch's `test/reference64/representation` dumps), kernels
//! that write runs, work that follows runs, and SparseInterval's one-run rule.

mod common;

use common::{fmt, parse, run_eval, run_jit};
use std::collections::BTreeMap;
use tessera::KernelErrorKind;
use tessera::kernel_error::Order;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// The vector of the golden dumps.
const V: [f64; 9] = [0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0];

fn vector(format: &str, values: &[f64]) -> Tensor {
    Tensor::from_dense(
        &fmt(format),
        &[values.len()],
        &Buffer::F64(values.to_vec().into()),
    )
    .unwrap()
}

fn i64s(v: &[i64]) -> Buffer {
    Buffer::I64(v.to_vec().into())
}

fn f64s(v: &[f64]) -> Buffer {
    Buffer::F64(v.to_vec().into())
}

fn code(text: &str, formats: &[(&str, &str)]) -> String {
    let formats: BTreeMap<String, Format> = formats
        .iter()
        .map(|(n, f)| (n.to_string(), fmt(f)))
        .collect();
    let (k, _, _) = Runner::lower(&parse(text), &formats).unwrap_or_else(|e| panic!("{e}"));
    k.to_string()
}

fn loops(code: &str) -> (usize, usize) {
    let count = |kw: &str| {
        code.lines()
            .filter(|l| l.trim_start().starts_with(kw))
            .count()
    };
    (count("for "), count("while "))
}

/// Copy `src` into an empty `out_format` tensor with `B[i] = A[i]`; returns B.
fn copy(src: Tensor, out_format: &str) -> tessera::Result<Tensor> {
    let n = src.shape.clone();
    let mut ts = BTreeMap::from([
        ("A".to_string(), src),
        (
            "B".to_string(),
            Tensor::empty(&fmt(out_format), &n).unwrap(),
        ),
    ]);
    let text = if n.len() == 1 {
        "B .= 0\nfor i = _\n  B[i] = A[i]\nend"
    } else {
        "B .= 0\nfor i = _, j = _\n  B[i, j] = A[i, j]\nend"
    };
    run_jit(&parse(text), &mut ts)?;
    let b = ts.remove("B").unwrap();
    b.validate("B").unwrap();
    Ok(b)
}

#[test]
fn golden_storage_built_from_values() {
    let t = vector("RunList(Element(0.0))", &V);
    assert_eq!(t.levels[0], vec![i64s(&[0, 6]), i64s(&[0, 2, 4, 6, 7, 8])]);
    assert_eq!(t.levels[1], vec![f64s(&[0.0, 1.0, 2.0, 0.0, 3.0, 0.0])]);
    assert_eq!(t.countstored(), 6);

    let t = vector("RunList(Element(0.0), merge=false)", &V);
    assert_eq!(
        t.levels[0],
        vec![i64s(&[0, 8]), i64s(&[0, 1, 2, 3, 4, 6, 7, 8])]
    );
    assert_eq!(
        t.levels[1],
        vec![f64s(&[0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 3.0, 0.0])]
    );

    let t = vector("SparseRunList(Element(0.0))", &V);
    assert_eq!(
        t.levels[0],
        vec![i64s(&[0, 3]), i64s(&[1, 3, 7]), i64s(&[2, 4, 7])]
    );
    assert_eq!(t.levels[1], vec![f64s(&[1.0, 2.0, 3.0])]);

    let t = vector("SparseRunList(Element(0.0), merge=false)", &V);
    let ends = i64s(&[1, 2, 3, 4, 7]);
    assert_eq!(t.levels[0], vec![i64s(&[0, 5]), ends.clone(), ends]);
    assert_eq!(t.levels[1], vec![f64s(&[1.0, 1.0, 2.0, 2.0, 3.0])]);

    for f in [
        "RunList(Element(0.0))",
        "RunList(Element(0.0), merge=false)",
        "SparseRunList(Element(0.0))",
        "SparseRunList(Element(0.0), merge=false)",
    ] {
        let t = vector(f, &V);
        t.validate("t").unwrap();
        assert_eq!(t.to_dense(), f64s(&V), "{f}");
    }

    let bools = Buffer::Bool(vec![false, false, true, false, false, false].into());
    for f in [
        "SparseInterval(Pattern())",
        "SparseInterval(Element(false))",
    ] {
        let t = Tensor::from_dense(&fmt(f), &[6], &bools).unwrap();
        assert_eq!(t.levels[0], vec![i64s(&[2]), i64s(&[2])], "{f}");
        if f.contains("Element") {
            assert_eq!(t.levels[1], vec![Buffer::Bool(vec![true].into())]);
        }
        assert_eq!(t.to_dense(), bools);
    }
}

#[test]
fn golden_storage_written_by_kernels() {
    let sparse = || vector("SparseList(Element(0.0))", &V);
    let b = copy(sparse(), "RunList(Element(0.0), merge=false)").unwrap();
    assert_eq!(
        b.levels[0],
        vec![i64s(&[0, 8]), i64s(&[0, 1, 2, 3, 4, 6, 7, 8])]
    );
    assert_eq!(
        b.levels[1],
        vec![f64s(&[0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 3.0, 0.0])]
    );
    // Merging happens after the kernel, for kernel outputs as for built tensors.
    let b = copy(sparse(), "RunList(Element(0.0))").unwrap();
    assert_eq!(b.levels[0], vec![i64s(&[0, 6]), i64s(&[0, 2, 4, 6, 7, 8])]);
    assert_eq!(b.levels[1], vec![f64s(&[0.0, 1.0, 2.0, 0.0, 3.0, 0.0])]);

    let b = copy(sparse(), "SparseRunList(Element(0.0), merge=false)").unwrap();
    let ends = i64s(&[1, 2, 3, 4, 7]);
    assert_eq!(b.levels[0], vec![i64s(&[0, 5]), ends.clone(), ends]);
    assert_eq!(b.levels[1], vec![f64s(&[1.0, 1.0, 2.0, 2.0, 3.0])]);
    let b = copy(sparse(), "SparseRunList(Element(0.0))").unwrap();
    assert_eq!(
        b.levels[0],
        vec![i64s(&[0, 3]), i64s(&[1, 3, 7]), i64s(&[2, 4, 7])]
    );
    assert_eq!(b.levels[1], vec![f64s(&[1.0, 2.0, 3.0])]);

    let bools = Buffer::Bool(vec![false, false, true, false, false, false].into());
    for out in [
        "SparseInterval(Pattern())",
        "SparseInterval(Element(false))",
    ] {
        for src in ["SparseList(Pattern())", "Dense(Element(false))"] {
            let a = Tensor::from_dense(&fmt(src), &[6], &bools).unwrap();
            let b = copy(a, out).unwrap();
            assert_eq!(b.levels[0], vec![i64s(&[2]), i64s(&[2])], "{src} -> {out}");
            assert_eq!(b.to_dense(), bools);
        }
    }
}

/// `B[i] = A[i]` between run lists: one while loop over A's runs, each writing one run of B
/// for its whole extent; no loop over coordinates.
#[test]
fn run_to_run_copy_writes_one_run_per_input_run() {
    let c = code(
        "B .= 0\nfor i = _\n  B[i] = A[i]\nend",
        &[
            ("A", "RunList(Element(0.0))"),
            ("B", "RunList(Element(0.0), merge=false)"),
        ],
    );
    // (The only `for` loops complete fibers nobody wrote, at the fiber's opening and at
    // freeze.)
    assert!(
        c.lines()
            .filter(|l| l.trim_start().starts_with("for "))
            .all(|l| l.trim_start().starts_with("for (p")),
        "no per-coordinate loop:\n{c}"
    );
    assert_eq!(loops(&c).1, 1, "{c}");
    // The stored runs are A's runs (no merging, so nothing hides per-coordinate writes).
    let a = vector("RunList(Element(0.0))", &V);
    let b = copy(a.clone(), "RunList(Element(0.0), merge=false)").unwrap();
    assert_eq!(b.levels, a.levels);
    // From SparseRunList: fill gaps become fill runs of B.
    let b = copy(
        vector("SparseRunList(Element(0.0))", &V),
        "RunList(Element(0.0), merge=false)",
    )
    .unwrap();
    assert_eq!(b.levels, a.levels);
    let b = copy(a, "SparseRunList(Element(0.0), merge=false)").unwrap();
    assert_eq!(
        b.levels[0],
        vec![i64s(&[0, 3]), i64s(&[1, 3, 7]), i64s(&[2, 4, 7])]
    );
}

/// A dense input makes the writes per coordinate (runs of length 1, merged afterwards).
#[test]
fn dense_to_run_copy_falls_back_to_coordinates() {
    let c = code(
        "B .= 0\nfor i = _\n  B[i] = A[i] + 1\nend",
        &[("A", "Dense(Element(0.0))"), ("B", "RunList(Element(0.0))")],
    );
    assert!(loops(&c).0 >= 1, "a loop over coordinates:\n{c}");
    let b = copy(vector("Dense(Element(0.0))", &V), "RunList(Element(0.0))").unwrap();
    assert_eq!(b.levels[0], vec![i64s(&[0, 6]), i64s(&[0, 2, 4, 6, 7, 8])]);
    // `B[i] = i` depends on the index: per coordinate too.
    let mut ts = BTreeMap::from([
        ("A".to_string(), vector("RunList(Element(0.0))", &V)),
        (
            "B".to_string(),
            Tensor::empty(&fmt("RunList(Element(0))"), &[9]).unwrap(),
        ),
    ]);
    run_jit(
        &parse("B .= 0\nfor i = _\n  B[i] = ifelse(A[i] > 1.5, i, 0)\nend"),
        &mut ts,
    )
    .unwrap();
    assert_eq!(ts["B"].to_dense(), i64s(&[0, 0, 0, 3, 4, 0, 0, 7, 0]));
}

/// `s[] += A[i]` over a run list integrates each run (`s += len * v`): a vector of 10^12
/// coordinates in four runs takes four iterations.
#[test]
fn sum_over_runs_integrates_each_run() {
    let c = code(
        "s .= 0\nfor i = _\n  s[] += A[i]\nend",
        &[("A", "RunList(Element(0.0))"), ("s", "Element(0.0)")],
    );
    assert_eq!(loops(&c), (0, 1), "one loop over the runs:\n{c}");
    assert!(
        c.contains(" * "),
        "the run length multiplies the value:\n{c}"
    );
    let n: usize = 1_000_000_000_000;
    let a = Tensor {
        shape: vec![n],
        format: fmt("RunList(Element(0.0))"),
        levels: vec![
            vec![
                i64s(&[0, 4]),
                i64s(&[9, 499_999_999_999, 899_999_999_999, n as i64 - 1]),
            ],
            vec![f64s(&[1.0, 2.0, 0.0, 3.0])],
        ],
    };
    a.validate("A").unwrap();
    for (f, a) in [
        ("RunList", a.clone()),
        ("SparseRunList", a.to_runs_without_fill()),
    ] {
        let mut ts = BTreeMap::from([
            ("A".to_string(), a),
            (
                "s".to_string(),
                Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
            ),
        ]);
        run_jit(&parse("s .= 0\nfor i = _\n  s[] += A[i]\nend"), &mut ts).unwrap();
        let expect = 10.0 + 2.0 * 499_999_999_990.0 + 3.0 * 100_000_000_000.0;
        assert_eq!(ts["s"].get(&[]).unwrap().as_f64(), expect, "{f}");
    }
}

/// Helper for the test above: the same vector as a SparseRunList (fill runs dropped).
trait WithoutFill {
    fn to_runs_without_fill(&self) -> Tensor;
}

impl WithoutFill for Tensor {
    fn to_runs_without_fill(&self) -> Tensor {
        let (ptr, right) = (
            self.levels[0][0].as_i64().unwrap(),
            self.levels[0][1].as_i64().unwrap(),
        );
        let val = self.levels[1][0].as_f64().unwrap();
        let (mut left, mut r, mut v) = (vec![], vec![], vec![]);
        let mut start = 0;
        for q in ptr[0] as usize..ptr[1] as usize {
            if val[q] != 0.0 {
                left.push(start);
                r.push(right[q]);
                v.push(val[q]);
            }
            start = right[q] + 1;
        }
        let t = Tensor {
            shape: self.shape.clone(),
            format: fmt("SparseRunList(Element(0.0))"),
            levels: vec![
                vec![
                    i64s(&[0, left.len() as i64]),
                    Buffer::I64(left.into()),
                    Buffer::I64(r.into()),
                ],
                vec![Buffer::F64(v.into())],
            ],
        };
        t.validate("A").unwrap();
        t
    }
}

/// Matrices of runs of rows: the outer runs are integrated too (the inner loop runs once per
/// outer run, multiplied by its length).
#[test]
fn nested_runs_integrate_the_outer_run() {
    let c = code(
        "s .= 0\nfor i = _, j = _\n  s[] += A[i, j]\nend",
        &[
            ("A", "RunList(RunList(Element(0.0)))"),
            ("s", "Element(0.0)"),
        ],
    );
    assert_eq!(
        loops(&c),
        (0, 2),
        "a loop over row runs and one over runs:\n{c}"
    );
    let values: Vec<f64> = (0..4 * 5)
        .map(|k| {
            if k / 5 < 3 {
                [1.0, 1.0, 0.0, 2.0, 2.0][k % 5]
            } else {
                0.0
            }
        })
        .collect();
    let a = Tensor::from_dense(
        &fmt("RunList(RunList(Element(0.0)))"),
        &[4, 5],
        &Buffer::F64(values.into()),
    )
    .unwrap();
    // Three equal rows merged into one run of rows, then a fill row.
    assert_eq!(a.levels[0], vec![i64s(&[0, 2]), i64s(&[2, 3])]);
    assert_eq!(a.levels[1], vec![i64s(&[0, 3, 4]), i64s(&[1, 2, 4, 4])]);
    let mut ts = BTreeMap::from([
        ("A".to_string(), a),
        (
            "s".to_string(),
            Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
        ),
    ]);
    run_jit(
        &parse("s .= 0\nfor i = _, j = _\n  s[] += A[i, j]\nend"),
        &mut ts,
    )
    .unwrap();
    assert_eq!(ts["s"].get(&[]).unwrap().as_f64(), 18.0);
}

/// Reading a SparseInterval is three phases: no loop at all.
#[test]
fn sparse_interval_reads_without_a_loop() {
    let c = code(
        "s .= 0\nfor i = _\n  s[] += A[i]\nend",
        &[("A", "SparseInterval(Element(0.0))"), ("s", "Element(0.0)")],
    );
    assert_eq!(loops(&c), (0, 0), "{c}");
    let a = vector(
        "SparseInterval(Element(0.0))",
        &[0.0, 0.0, 4.0, 4.0, 4.0, 0.0],
    );
    assert_eq!(a.levels[0], vec![i64s(&[2]), i64s(&[4])]);
    let mut ts = BTreeMap::from([
        ("A".to_string(), a),
        (
            "s".to_string(),
            Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
        ),
    ]);
    run_jit(&parse("s .= 0\nfor i = _\n  s[] += A[i]\nend"), &mut ts).unwrap();
    assert_eq!(ts["s"].get(&[]).unwrap().as_f64(), 12.0);
}

/// A kernel refusing a second run, or a tensor built from values with several runs.
fn one_run_error(e: &tessera::Error) -> bool {
    match e {
        tessera::Error::Kernel(k) => matches!(k.kind, KernelErrorKind::SecondRun { .. }),
        tessera::Error::Tensor { msg, .. } => msg.contains("can only hold one run"),
        _ => false,
    }
}

#[test]
fn sparse_interval_holds_one_run() {
    // Building from values with two runs is an error, not a silent loss.
    let e = Tensor::from_dense(
        &fmt("SparseInterval(Element(0.0))"),
        &[5],
        &f64s(&[1.0, 0.0, 1.0, 0.0, 0.0]),
    )
    .unwrap_err();
    assert!(one_run_error(&e), "{e}");
    let e = Tensor::from_dense(
        &fmt("SparseInterval(Element(0.0))"),
        &[3],
        &f64s(&[1.0, 2.0, 0.0]),
    )
    .unwrap_err();
    assert!(one_run_error(&e), "{e}");

    for out in [
        "SparseInterval(Element(0.0))",
        "SparseInterval(Pattern())",
        "SparseInterval(Dense(Element(0.0)))",
    ] {
        let matrix = out.contains("Dense");
        let run = |values: &[f64]| {
            let (src, shape) = if matrix {
                ("SparseList(Dense(Element(0.0)))", vec![values.len(), 1])
            } else {
                ("SparseList(Element(0.0))", vec![values.len()])
            };
            let a = Tensor::from_dense(&fmt(src), &shape, &f64s(values)).unwrap();
            copy(a, out)
        };
        // Two separate runs.
        let e = run(&[1.0, 0.0, 1.0, 0.0]).unwrap_err();
        assert!(one_run_error(&e), "{out}: {e}");
        // The paper's edge case: a second write after a run of one coordinate (Finch checks
        // `left < right` and misses it).
        let e = run(&[0.0, 1.0, 0.0, 0.0, 1.0]).unwrap_err();
        assert!(one_run_error(&e), "{out}: {e}");
        if out.contains("Dense") {
            continue;
        }
        // Per-coordinate writes of one run of equal values extend the run.
        let b = run(&[0.0, 1.0, 1.0, 1.0, 0.0]).unwrap();
        assert_eq!(b.levels[0], vec![i64s(&[1]), i64s(&[3])], "{out}");
        if out.contains("Element") {
            // Adjacent but different values are two runs.
            let e = run(&[0.0, 1.0, 2.0, 0.0]).unwrap_err();
            assert!(one_run_error(&e), "{out}: {e}");
        }
    }
    // A whole run written at once (from a run list) is one write.
    let b = copy(
        vector("RunList(Element(0.0))", &[0.0, 0.0, 5.0, 5.0, 5.0, 0.0]),
        "SparseInterval(Element(0.0))",
    )
    .unwrap();
    assert_eq!(b.levels[0], vec![i64s(&[2]), i64s(&[4])]);
}

/// A reduction into a fiber that already holds a run starts from the fill value of the new
/// coordinate, not from the run's value.
#[test]
fn sparse_interval_extension_reduces_from_fill() {
    let text = "B .= 0\nfor i = _\n  B[i] += A[i]\nend";
    let a = vector("SparseList(Element(0.0))", &[0.0, 2.0, 2.0, 0.0]);
    let mut ts = BTreeMap::from([
        ("A".to_string(), a),
        (
            "B".to_string(),
            Tensor::empty(&fmt("SparseInterval(Element(0.0))"), &[4]).unwrap(),
        ),
    ]);
    run_jit(&parse(text), &mut ts).unwrap();
    assert_eq!(ts["B"].to_dense(), f64s(&[0.0, 2.0, 2.0, 0.0]));
    assert_eq!(ts["B"].levels[0], vec![i64s(&[1]), i64s(&[2])]);
    // `min=` from fill 0 gives 0 (not stored as a run of 5): the run stays one coordinate.
    let a = vector("SparseList(Element(0.0))", &[5.0, 7.0, 0.0]);
    let mut ts = BTreeMap::from([
        ("A".to_string(), a),
        (
            "B".to_string(),
            Tensor::empty(&fmt("SparseInterval(Element(0.0))"), &[3]).unwrap(),
        ),
    ]);
    let p = parse("B .= 0\nfor i = _\n  B[i] <<min>>= A[i]\nend");
    let exp = run_eval(&p, &ts).unwrap();
    match run_jit(&p, &mut ts) {
        Ok(()) => assert_eq!(ts["B"].to_dense(), exp["B"]),
        Err(e) => assert!(one_run_error(&e), "{e}"),
    }
}

/// Reductions inside an inner loop go into one run of the outer run-length output.
#[test]
fn row_sums_into_run_lists() {
    let values: Vec<f64> = (0..6 * 4)
        .map(|k| ((k / 8) % 2) as f64 + (k % 4 == 0) as u8 as f64)
        .collect();
    for a_format in [
        "RunList(RunList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseRunList(Dense(Element(0.0)))",
    ] {
        for y_format in [
            "RunList(Element(0.0))",
            "SparseRunList(Element(0.0))",
            "RunList(Element(0.0), merge=false)",
        ] {
            let a =
                Tensor::from_dense(&fmt(a_format), &[6, 4], &Buffer::F64(values.clone().into()))
                    .unwrap();
            let mut ts = BTreeMap::from([
                ("A".to_string(), a),
                (
                    "y".to_string(),
                    Tensor::empty(&fmt(y_format), &[6]).unwrap(),
                ),
            ]);
            let p = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j]\nend");
            let exp = run_eval(&p, &ts).unwrap();
            run_jit(&p, &mut ts).unwrap_or_else(|e| panic!("{a_format} -> {y_format}: {e}"));
            assert_eq!(ts["y"].to_dense(), exp["y"], "{a_format} -> {y_format}");
            ts["y"].validate("y").unwrap();
        }
    }
}

/// Formats round-trip through their text, including `merge=false`.
#[test]
fn run_formats_parse_and_print() {
    let f = fmt("RunList(Element(0.0), merge=true)");
    assert_eq!(f.to_string(), "RunList(Element(0.0))");
    for s in [
        "RunList(SparseList(Element(0.0)), merge=false)",
        "Dense(SparseRunList(Element(0), merge=false))",
        "SparseInterval(SparseRunList(Pattern()))",
    ] {
        assert_eq!(fmt(s).to_string(), s);
    }
    let e = Format::parse("RunList(Pattern())", None).unwrap_err();
    assert!(e.to_string().contains("Pattern"), "{e}");
}

/// Writes out of order are errors, never corrupt runs.
#[test]
fn out_of_order_run_writes_are_errors() {
    for out in ["RunList(Element(0.0))", "SparseRunList(Element(0.0))"] {
        let mut ts = BTreeMap::from([
            (
                "A".to_string(),
                vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0]),
            ),
            ("B".to_string(), Tensor::empty(&fmt(out), &[3]).unwrap()),
        ]);
        let e = run_jit(&parse("B .= 0\nfor i = _\n  B[2 - i] = A[i]\nend"), &mut ts).unwrap_err();
        assert!(
            matches!(&e, tessera::Error::Kernel(k) if matches!(k.kind, KernelErrorKind::OutOfOrder { order: Order::Runs, .. })),
            "{out}: {e}"
        );
        assert!(e.to_string().contains("in increasing order"), "{out}: {e}");
    }
}

/// A fill value written over a recorded run is a repeated write like any other: refused on
/// every backend (the fill records no run, and its order check once went with the record, so
/// the run's old value stayed: `w[2] = -2` then `w[2] = 0` left -2).
#[test]
fn a_fill_written_over_a_run_is_an_order_error() {
    let programs = [
        "B .= 0\nB[2] = A[0]\nB[2] = 0 * A[0]\n",
        "B .= 0\nfor i = _\n  B[2] = A[0] * Z[i]\nend\n",
    ];
    for out in ["RunList(Element(0.0))", "SparseRunList(Element(0.0))"] {
        for prog in programs {
            for (name, runner) in common::runners() {
                let mut ts = BTreeMap::from([
                    ("A".to_string(), vector("Dense(Element(0.0))", &[-2.0])),
                    ("Z".to_string(), vector("Dense(Element(0.0))", &[1.0, 0.0])),
                    ("B".to_string(), Tensor::empty(&fmt(out), &[3]).unwrap()),
                ]);
                let p = parse(prog);
                let e = runner
                    .compile(&p, &common::formats_of(&ts))
                    .and_then(|c| runner.execute(&c, &mut ts))
                    .unwrap_err();
                assert!(
                    matches!(&e, tessera::Error::Kernel(k) if matches!(k.kind, KernelErrorKind::OutOfOrder { order: Order::Runs, .. })),
                    "{name} {out} {prog}: {e}"
                );
            }
        }
    }
    // Fill written past the last run is no run and no error.
    let mut ts = BTreeMap::from([
        ("A".to_string(), vector("Dense(Element(0.0))", &[-2.0])),
        (
            "B".to_string(),
            Tensor::empty(&fmt("SparseRunList(Element(0.0))"), &[3]).unwrap(),
        ),
    ]);
    run_jit(&parse("B .= 0\nB[1] = A[0]\nB[2] = 0 * A[0]\n"), &mut ts).unwrap();
    assert_eq!(ts["B"].to_dense(), f64s(&[0.0, -2.0, 0.0]));
}

/// A sparse parent that writes nothing under a position retries it for its next coordinate:
/// run lists below it must forget the fibers they opened there (SparseList over Dense over
/// RunList reopens the same RunList fibers; the same holds for SparseList fibers).
#[test]
fn retried_positions_reopen_fibers() {
    let shape = [5, 2, 4];
    let values: Vec<f64> = (0..40)
        .map(|k| {
            let i = k / 8;
            if i % 2 == 1 {
                0.5
            } else {
                ((k * 7) % 5) as f64
            }
        })
        .collect();
    for out in [
        "SparseList(Dense(RunList(Element(0.0))))",
        "SparseList(RunList(RunList(Element(0.0))))",
        "SparseRunList(Dense(RunList(Element(0.0), merge=false)))",
        "SparseList(Dense(SparseList(Element(0.0))))",
        "SparseList(Dense(SparseRunList(Element(0.0))))",
        "SparseCOO{1}(Dense(SparseCOO{1}(Element(0.0))))",
    ] {
        let a = Tensor::from_dense(
            &fmt("Dense(Dense(Dense(Element(0.0))))"),
            &shape,
            &Buffer::F64(values.clone().into()),
        )
        .unwrap();
        let mut ts = BTreeMap::from([
            ("A".to_string(), a),
            ("C".to_string(), Tensor::empty(&fmt(out), &shape).unwrap()),
        ]);
        let p = parse(
            "C .= 0\nfor i = _, j = _, k = _\n  if A[i, j, k] > 1\n    C[i, j, k] = A[i, j, k]\n  end\nend",
        );
        let exp = run_eval(&p, &ts).unwrap();
        run_jit(&p, &mut ts).unwrap_or_else(|e| panic!("{out}: {e}"));
        ts["C"].validate("C").unwrap();
        assert_eq!(ts["C"].to_dense(), exp["C"], "{out}");
    }
}
