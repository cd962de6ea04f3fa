//! Sparse outputs against the reference evaluator: fixed computations written into every
//! sparse output format (in concordant order, and in any order for the formats that take
//! it), and SparseInterval levels read and written. Operand formats and data are drawn by
//! proptest strategies, so a failure shrinks to small operands and prints them.
//!
//! CI runs a fixed set of cases per program. A long run of fresh cases (the seed is printed;
//! `PROPTEST_RNG_SEED=seed` replays it):
//! `PROPTEST_CASES=500 cargo test --release --test sparse_outputs -- --nocapture`

mod common;

use common::cases::{Case, Outcome, compare, run_cases, show_values};
use common::random::{Data, all_matrix_formats, data_s};
use common::{fmt, parse, run_eval, run_jit};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use std::cell::Cell;
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// A program writing `C`, the format of `C`, and the format `B` must have if not any (outputs
/// that hold one entry per fiber get an operand that has one).
type SparseOutput = (&'static str, &'static str, Option<&'static str>);

/// Outputs written in concordant order.
const ORDERED: &[SparseOutput] = &[
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseList(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparseCOO{2}(Element(0.0))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "Dense(SparseCOO{1}(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseBand(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseBlockList(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseBlockList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseBand(SparseBlockList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparsePoint(Element(0.0)))",
        Some("Dense(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += B[i, j]\nend\n",
        "SparsePoint(SparsePoint(Element(0.0)))",
        Some("SparsePoint(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparsePoint(SparseBlockList(Element(0.0)))",
        Some("SparsePoint(Dense(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparseBlockList(SparsePoint(Element(0.0)))",
        Some("Dense(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseList(SparseBand(Element(0.0)))",
        None,
    ),
];

/// Formats that take writes in any order (also from transposed loops), run-length outputs, and
/// writes that may not happen (sparse parents retry positions their child opened).
const ANY_ORDER_AND_RUNS: &[SparseOutput] = &[
    // Formats that take writes in any order: also transposed loops.
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseByteMap(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseByteMap(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseDict(SparseDict(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "Dense(SparseDict(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseDict(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "RunList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(RunList(Element(0.0), merge=false))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseRunList(SparseRunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * 2\nend\n",
        "SparseList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] - B[i, j]\nend\n",
        "RunList(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend\n",
        "SparseRunList(Dense(Element(0.0)), merge=false)",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "RunList(RunList(Element(0.0)))",
        None,
    ),
    // Writes that may not happen: sparse parents retry positions their child opened.
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "SparseList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "SparseRunList(RunList(Element(0.0), merge=false))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if B[i, j] != 2\n    C[i, j] = A[i, j]\n  end\nend\n",
        "RunList(SparseList(Pattern()))",
        None,
    ),
];

/// Cases per program on CI.
const CASES: u32 = 40;

/// The case of `program` on operands `A` and `B` of any formats (`B`'s fixed if the program
/// says so) and extents below 7.
fn sparse_output_case_s((text, out, b_format): SparseOutput) -> impl Strategy<Value = Case> {
    let operand = || (select(all_matrix_formats()), data_s(36));
    (operand(), operand(), 0..7usize, 0..7usize).prop_map(
        move |((af, ad), (bf, bd), ni, nj): ((&str, Data), (&str, Data), usize, usize)| {
            let bf = b_format.unwrap_or(bf);
            let tensors = BTreeMap::from([
                ("A".to_string(), ad.tensor(&fmt(af), &[ni, nj])),
                ("B".to_string(), bd.tensor(&fmt(bf), &[ni, nj])),
                (
                    "C".to_string(),
                    Tensor::empty(&fmt(out), &[ni, nj]).unwrap(),
                ),
            ]);
            Case {
                program: parse(text),
                tensors,
            }
        },
    )
}

/// Every program of `programs` on `CASES` cases: compiled, it must give the evaluator's
/// values in a valid `C`.
fn sparse_outputs_match_evaluator(name: &str, programs: &[SparseOutput]) {
    for (k, &p) in programs.iter().enumerate() {
        run_cases(
            &format!("{name} {k}"),
            CASES,
            sparse_output_case_s(p),
            |case| match compare(&case, &run_jit)? {
                Outcome::Agreed => Ok(()),
                other => Err(TestCaseError::fail(format!("{other:?}"))),
            },
        );
    }
}

#[test]
fn ordered_sparse_outputs_match_evaluator() {
    sparse_outputs_match_evaluator("ordered_sparse_outputs_match_evaluator", ORDERED);
}

#[test]
fn any_order_and_run_length_outputs_match_evaluator() {
    sparse_outputs_match_evaluator(
        "any_order_and_run_length_outputs_match_evaluator",
        ANY_ORDER_AND_RUNS,
    );
}

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
        select(INTERVAL_FORMATS),
        proptest::collection::vec(interval_s(), 5),
        (any::<Index>(), any::<Index>()),
        (select(sources.clone()), data_s(25)),
        select(INTERVAL_READS),
        [select(sources.clone()), select(sources)],
        (0..6usize, 0..6usize),
    )
        .prop_map(
            |(format, rows, repeated, b, read, sources, extents)| IntervalCase {
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
#[test]
fn sparse_interval_matches_evaluator() {
    let expected_refusals = Cell::new(0);
    let outer_written = Cell::new(0);
    run_cases(
        "sparse_interval_matches_evaluator",
        300,
        interval_case_s(),
        |c| {
            let (ni, nj) = c.extents;
            let (sf, outer) = c.format;
            let data = c.values();
            let a = Tensor::from_dense(&fmt(sf), &[ni, nj], &Buffer::F64(data.clone()))
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
            match compare(&read, &run_jit) {
                Ok(Outcome::Agreed) => {}
                Ok(other) => return Err(TestCaseError::fail(format!("{other:?} in{read:?}"))),
                Err(e) => return Err(TestCaseError::fail(format!("{e} in{read:?}"))),
            }
            // Writes: copy one-run data from any format, and data that may have several runs.
            // Over a non-leaf child (`outer`) a SparseInterval fiber takes one write: copies
            // that write row by row are refused even when the rows are equal (a known limit),
            // so there a refusal is allowed whatever the data.
            for (values, must_fit, src_format) in [
                (Buffer::F64(data), true, c.sources[0]),
                (b.to_dense(), false, c.sources[1]),
            ] {
                let values =
                    Buffer::F64((0..values.len()).map(|k| values.get(k).as_f64()).collect());
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
                match run_jit(&copy.program, &mut got) {
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
                        outer_written.set(outer_written.get() + outer as usize);
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
                        expected_refusals.set(expected_refusals.get() + 1);
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("{e} in{copy:?}"))),
                }
            }
            Ok(())
        },
    );
    let (refusals, outer) = (expected_refusals.get(), outer_written.get());
    assert!(refusals > 10, "the refusal path was exercised ({refusals})");
    assert!(
        outer > 10,
        "outer SparseInterval levels were written ({outer})"
    );
}
