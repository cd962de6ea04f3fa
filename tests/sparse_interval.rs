//! SparseInterval levels against the reference evaluator: a SparseInterval level holds one
//! run per fiber, so its tensors get data of that shape; they are read in the usual programs
//! and written by copies from every format, on the JIT and a sample on the C backend. The
//! case is drawn by a proptest strategy, so a failure shrinks to small tensors and prints them.
//!
//! CI runs a fixed set of cases. A long run of fresh cases (the seed is printed;
//! `PROPTEST_RNG_SEED=seed` replays it):
//! `PROPTEST_CASES=1000 cargo test --release --test sparse_interval -- --nocapture`

mod common;

use common::cases::{Case, Outcome, RunCompiled, c_runner, compare, run_cases, show_values};
use common::random::{Data, all_matrix_formats, data_s};
use common::{fmt, formats_of, parse, run_eval, run_jit};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use std::cell::Cell;
use std::collections::BTreeMap;
use tessera::notation::ast::Program;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// SparseInterval formats and whether their SparseInterval level is the outer one (then its
/// data is one interval of equal rows).
const INTERVAL_FORMATS: &[(&str, bool)] = &[
    ("Dense(SparseInterval(Element(0.0)))", false),
    ("SparseList(SparseInterval(Element(0.0)))", false),
    ("RunList(SparseInterval(Element(0.0)))", false),
    ("Dense(SparseInterval(Pattern()))", false),
    ("SparseInterval(Dense(Element(0.0)))", true),
    ("SparseInterval(SparseInterval(Element(0.0)))", true),
    ("SparseInterval(RunList(Element(0.0)))", true),
];

const INTERVAL_READS: &[&str] = &[
    "s .= 0\nfor i = _, j = _\n  s[] += A[i, j] * B[i, j]\nend\n",
    "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] + B[i, j]\nend\n",
    "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
    "s .= 0\nfor j = _, i = _\n  s[] <<max>>= A[i, j] * j\nend\n",
];

/// One interval `a..=z` of value `v` in a fiber of length `n` (`None`: an empty fiber).
type Interval = Option<(Index, Index, u8)>;

fn interval_s() -> impl Strategy<Value = Interval> {
    proptest::option::weighted(0.8, (any::<Index>(), any::<Index>(), 1u8..=3))
}

fn interval_row(interval: &Interval, n: usize) -> Vec<f64> {
    let mut row = vec![0.0; n];
    if let (Some((a, z, v)), true) = (interval, n > 0) {
        let a = a.index(n);
        let z = a + z.index(n - a);
        row[a..=z].iter_mut().for_each(|x| *x = f64::from(*v));
    }
    row
}

/// A SparseInterval case: the format and its one-run-per-fiber data, `B` (from a format that
/// holds any data) for the reads, and the formats the writes copy from.
#[derive(Clone, Debug)]
struct IntervalCase {
    format: (&'static str, bool),
    /// One interval per row (inner SparseInterval levels), or the first row's interval and
    /// the rows it repeats in (outer ones).
    rows: Vec<Interval>,
    repeated: (Index, Index),
    b: (&'static str, Data),
    read: &'static str,
    sources: [&'static str; 2],
    extents: (usize, usize),
}

fn interval_case_s() -> impl Strategy<Value = IntervalCase> {
    // Sources must hold any data: SparsePoint holds one entry per fiber.
    let sources: Vec<&'static str> = all_matrix_formats()
        .into_iter()
        .filter(|f| !f.contains("SparsePoint"))
        .collect();
    (
        // The extents come before the data (shrinking them crops the data).
        (0..6usize, 0..6usize),
        select(INTERVAL_FORMATS),
        proptest::collection::vec(interval_s(), 5),
        (any::<Index>(), any::<Index>()),
        (select(sources.clone()), data_s(25)),
        select(INTERVAL_READS),
        [select(sources.clone()), select(sources)],
    )
        .prop_map(
            |(extents, format, rows, repeated, b, read, sources)| IntervalCase {
                format,
                rows,
                repeated,
                b,
                read,
                sources,
                extents,
            },
        )
}

impl IntervalCase {
    /// Row-major values with one run per fiber of the SparseInterval level.
    fn values(&self) -> Vec<f64> {
        let ((ni, nj), (_, outer)) = (self.extents, self.format);
        if !outer {
            return (0..ni)
                .flat_map(|i| interval_row(&self.rows[i], nj))
                .collect();
        }
        let row = interval_row(&self.rows[0], nj);
        let mut out = vec![0.0; ni * nj];
        if ni > 0 {
            let a = self.repeated.0.index(ni);
            let z = a + self.repeated.1.index(ni - a);
            for i in a..=z {
                out[i * nj..(i + 1) * nj].copy_from_slice(&row);
            }
        }
        out
    }
}

/// A SparseInterval level refused a second run in a fiber.
fn second_run(e: &tessera::Error) -> bool {
    matches!(e, tessera::Error::Kernel(k) if matches!(k.kind, tessera::KernelErrorKind::SecondRun { .. }))
}

/// SparseInterval holds one run per fiber, so it gets data of that shape. It is read in the
/// usual programs and written by copies from every format; on data with several runs per
/// fiber, a refused second run is the expected outcome and nothing else is.
/// How often the interval checks took their rarer paths.
#[derive(Default)]
struct IntervalCounts {
    /// Copies refused as expected (a second run in a fiber).
    refusals: Cell<usize>,
    /// Copies into an outer SparseInterval level that ran.
    outer_written: Cell<usize>,
}

/// Reads `c`'s SparseInterval tensor and copies into its format, compiled by `run`, against
/// the evaluator.
fn check_interval(
    c: &IntervalCase,
    run: &RunCompiled<'_>,
    counts: &IntervalCounts,
) -> Result<(), TestCaseError> {
    let (ni, nj) = c.extents;
    let (sf, outer) = c.format;
    let data = c.values();
    let a = Tensor::from_dense(&fmt(sf), &[ni, nj], &Buffer::F64(data.clone().into()))
        .map_err(|e| TestCaseError::fail(format!("{sf}: {e}")))?;
    a.validate("A")
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // Reads.
    let b = c.b.1.tensor(&fmt(c.b.0), &[ni, nj]);
    let (out, shape, of) = match &c.read[..1] {
        "s" => ("s", vec![], "Element(0.0)"),
        "y" => ("y", vec![ni], "Dense(Element(0.0))"),
        _ => ("C", vec![ni, nj], "Dense(Dense(Element(0.0)))"),
    };
    let read = Case {
        program: parse(c.read),
        tensors: BTreeMap::from([
            ("A".to_string(), a),
            ("B".to_string(), b.clone()),
            (out.to_string(), Tensor::empty(&fmt(of), &shape).unwrap()),
        ]),
    };
    match compare(&read, run) {
        Ok(Outcome::Agreed) => {}
        Ok(other) => return Err(TestCaseError::fail(format!("{other:?} in{read:?}"))),
        Err(e) => return Err(TestCaseError::fail(format!("{e} in{read:?}"))),
    }
    // Writes: copy one-run data from any format, and data that may have several runs.
    // Over a non-leaf child (`outer`) a SparseInterval fiber takes one write: copies
    // that write row by row are refused even when the rows are equal (a known limit),
    // so there a refusal is allowed whatever the data.
    for (values, must_fit, src_format) in [
        (Buffer::F64(data.into()), true, c.sources[0]),
        (b.to_dense(), false, c.sources[1]),
    ] {
        let values = Buffer::F64((0..values.len()).map(|k| values.get(k).as_f64()).collect());
        let src = Tensor::from_dense(&fmt(src_format), &[ni, nj], &values).unwrap();
        let copy = Case {
            program: parse("C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend\n"),
            tensors: BTreeMap::from([
                ("A".to_string(), src),
                ("C".to_string(), Tensor::empty(&fmt(sf), &[ni, nj]).unwrap()),
            ]),
        };
        let exp = run_eval(&copy.program, &copy.tensors).unwrap();
        let mut got = copy.tensors.clone();
        match run(&copy.program, &mut got) {
            Ok(()) => {
                if got["C"].to_dense() != exp["C"] {
                    return Err(TestCaseError::fail(format!(
                        "C is {} in{copy:?}",
                        show_values(&got["C"])
                    )));
                }
                got["C"]
                    .validate("C")
                    .map_err(|e| TestCaseError::fail(format!("{e} in{copy:?}")))?;
                counts
                    .outer_written
                    .set(counts.outer_written.get() + outer as usize);
            }
            Err(e) if second_run(&e) && outer => {}
            Err(e) if second_run(&e) && !must_fit => {
                // Expected only if the data really does not fit in the format.
                let fits = Tensor::from_dense(&fmt(sf), &[ni, nj], &exp["A"]).is_ok();
                if fits {
                    return Err(TestCaseError::fail(format!(
                        "refused data that fits:{copy:?}"
                    )));
                }
                counts.refusals.set(counts.refusals.get() + 1);
            }
            Err(e) => return Err(TestCaseError::fail(format!("{e} in{copy:?}"))),
        }
    }
    Ok(())
}

#[test]
fn sparse_interval_matches_evaluator() {
    let counts = IntervalCounts::default();
    run_cases(
        "sparse_interval_matches_evaluator",
        300,
        interval_case_s(),
        |c| check_interval(&c, &run_jit, &counts),
    );
    let (refusals, outer) = (counts.refusals.get(), counts.outer_written.get());
    assert!(refusals > 10, "the refusal path was exercised ({refusals})");
    assert!(
        outer > 10,
        "outer SparseInterval levels were written ({outer})"
    );
}

/// A sample of the interval cases through the C backend (each kernel is a compiler run).
#[test]
fn sparse_interval_matches_evaluator_on_c() {
    let Some(c) = c_runner("sparse_interval_matches_evaluator_on_c") else {
        return;
    };
    let run_c = |p: &Program, ts: &mut BTreeMap<String, Tensor>| {
        let k = c.compile(p, &formats_of(ts))?;
        c.execute(&k, ts)
    };
    let counts = IntervalCounts::default();
    run_cases(
        "sparse_interval_matches_evaluator_on_c",
        15,
        interval_case_s(),
        |case| check_interval(&case, &run_c, &counts),
    );
}
