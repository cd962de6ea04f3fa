//! Indirect indices: scatters (`h[I[i]] += 1`), gathers (`y[i] = x[P[i]]`), permutations, COO
//! assembly into matrices, and gathers inside sparse loops, against the reference evaluator.
//! An indirect index reaches its level by random access (concordization turns it into a
//! one-iteration loop), so every readable format can be gathered from and every randomly
//! writable one scattered into. Out-of-range indices are errors on both sides.

mod common;

use common::data::{Kind, N, fitted};
use common::{fmt, parse, run_eval};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Every level format as a vector (for reads).
const VECTORS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseCOO{1}(Element(0.0))",
    "SparsePoint(Element(0.0))",
    "SparseBlockList(Element(0.0))",
    "SparseBand(Element(0.0))",
    "RunList(Element(0.0))",
    "SparseRunList(Element(0.0))",
    "SparseInterval(Element(0.0))",
    "SparseByteMap(Element(0.0))",
    "SparseDict(Element(0.0))",
];

/// Vector outputs that take writes in any order.
const SCATTER_OUTPUTS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseByteMap(Element(0.0))",
    "SparseDict(Element(0.0))",
];

const MATRIX_OUTPUTS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseDict(Element(0.0)))",
    "SparseDict(SparseDict(Element(0.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "SparseByteMap(SparseByteMap(Element(0.0)))",
    "SparseDict(Dense(Element(0.0)))",
];

fn ints(format: &str, values: &[i64]) -> Tensor {
    Tensor::from_dense(
        &fmt(format),
        &[values.len()],
        &Buffer::I64(values.to_vec().into()),
    )
    .unwrap_or_else(|e| panic!("{format}: {e}"))
}

/// `len` indices into `0..n`, repeats allowed.
fn random_indices(rng: &mut StdRng, len: usize, n: usize) -> Vec<i64> {
    (0..len).map(|_| rng.random_range(0..n) as i64).collect()
}

/// `len` distinct indices into `0..n` (`len <= n`).
fn distinct_indices(rng: &mut StdRng, len: usize, n: usize) -> Vec<i64> {
    let mut all: Vec<i64> = (0..n as i64).collect();
    for k in 0..len {
        let j = rng.random_range(k..n);
        all.swap(k, j);
    }
    all.truncate(len);
    all
}

fn floats(format: &str, values: &[f64]) -> Tensor {
    Tensor::from_dense(
        &fmt(format),
        &[values.len()],
        &Buffer::F64(values.to_vec().into()),
    )
    .unwrap_or_else(|e| panic!("{format}: {e}"))
}

/// Compile once per program and formats, run on the given tensors, compare every tensor
/// with the evaluator; returns whether the output had a nonzero entry.
fn agree(runner: &Runner, text: &str, tensors: &mut BTreeMap<String, Tensor>, out: &str) -> bool {
    let program = parse(text);
    let formats: BTreeMap<String, Format> = common::formats_of(tensors);
    let describe = |ts: &BTreeMap<String, Tensor>| {
        ts.iter()
            .map(|(n, t)| format!("{n}: {} = {:?}", t.format, t.to_dense()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let exp = run_eval(&program, tensors)
        .unwrap_or_else(|e| panic!("evaluator: {e}\n{text}{}", describe(tensors)));
    let before = describe(tensors);
    let kernel = runner
        .compile(&program, &formats)
        .unwrap_or_else(|e| panic!("{e}\n{text}{before}"));
    runner
        .execute(&kernel, tensors)
        .unwrap_or_else(|e| panic!("{e}\n{text}{before}"));
    assert_eq!(tensors[out].to_dense(), exp[out], "{text}{before}");
    tensors[out].validate(out).unwrap();
    let o = &exp[out];
    (0..o.len()).any(|k| o.get(k).as_f64() != 0.0)
}

fn empty(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap()
}

#[test]
fn histograms() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(21);
    let n = 6;
    let mut nonzero = 0;
    let mut cases = 0;
    for out in SCATTER_OUTPUTS {
        for index_format in ["Dense(Element(0))", "SparseList(Element(0))"] {
            for w_format in VECTORS {
                for len in [0, 1, 9, 30] {
                    let idx = random_indices(&mut rng, len, n);
                    let w = fitted(&mut rng, w_format, 0, Kind::Scattered).to_dense();
                    // `w` has N entries; the histogram reads `len` of them.
                    let mut wv: Vec<f64> = (0..len).map(|k| w.get(k % N).as_f64()).collect();
                    if w_format.contains("SparsePoint") || w_format.contains("SparseInterval") {
                        wv = vec![0.0; len];
                        if len > 0 {
                            wv[len / 2] = 2.0;
                        }
                    }
                    let mut tensors = BTreeMap::from([
                        ("I".to_string(), ints(index_format, &idx)),
                        ("w".to_string(), floats(w_format, &wv)),
                        ("h".to_string(), empty(out, &[n])),
                    ]);
                    for text in [
                        "h .= 0\nfor i = _\n  h[I[i]] += 1\nend\n",
                        "h .= 0\nfor i = _\n  h[I[i]] += w[i]\nend\n",
                    ] {
                        nonzero += agree(&runner, text, &mut tensors, "h") as usize;
                        cases += 1;
                    }
                }
            }
        }
    }
    // A quarter of the cases have no indices at all.
    assert!(
        nonzero * 10 > cases * 6,
        "{nonzero} of {cases} histograms were nonzero"
    );
}

/// A scatter of `value` into `target` (`h[I[i]]`, `M[R[i], C[i]]`) of format `out`: `+=` into
/// values, `|= true` into a pattern.
fn scatter_text(out: &str, target: &str, value: &str) -> String {
    let name = &target[..1];
    if out.contains("Pattern") {
        format!("{name} .= false\nfor i = _\n  {target} |= true\nend\n")
    } else {
        format!("{name} .= 0\nfor i = _\n  {target} += {value}\nend\n")
    }
}

/// SparseCOO takes writes in any order but each entry once: a scatter of distinct indices
/// works, a repeated index is refused with an error naming the tensor. A root level sorts
/// by coordinates alone (1-D with a `Pattern` child: in place), a lower level by fiber and
/// coordinates; both are checked on every backend.
#[test]
fn scatter_into_coo() {
    let mut rng = StdRng::seed_from_u64(22);
    let n = 9;
    let vectors = ["SparseCOO{1}(Element(0.0))", "SparseCOO{1}(Pattern())"];
    for (backend, runner) in common::runners() {
        for len in [0, 1, 5, 9] {
            let mut idx = distinct_indices(&mut rng, len, n);
            if len == 5 {
                // In order: the freeze's sort finds nothing to do.
                idx.sort_unstable();
            }
            let w: Vec<f64> = (0..len).map(|k| k as f64 + 1.0).collect();
            for out in vectors {
                let mut tensors = BTreeMap::from([
                    ("I".to_string(), ints("Dense(Element(0))", &idx)),
                    ("w".to_string(), floats("Dense(Element(0.0))", &w)),
                    ("h".to_string(), empty(out, &[n])),
                ]);
                agree(
                    &runner,
                    &scatter_text(out, "h[I[i]]", "w[i]"),
                    &mut tensors,
                    "h",
                );
            }
            // Matrices: pairs (I[i] / 3, I[i] % 3) in a shuffled order, so rows and columns
            // both arrive out of order, into a root COO{2} and into COO below a Dense row.
            let rows: Vec<i64> = idx.iter().map(|v| v / 3).collect();
            let cols: Vec<i64> = idx.iter().map(|v| v % 3).collect();
            for out in [
                "SparseCOO{2}(Element(0.0))",
                "SparseCOO{2}(Pattern())",
                "Dense(SparseCOO{1}(Element(0.0)))",
                "Dense(SparseCOO{1}(Pattern()))",
            ] {
                let mut tensors = BTreeMap::from([
                    ("R".to_string(), ints("Dense(Element(0))", &rows)),
                    ("C".to_string(), ints("Dense(Element(0))", &cols)),
                    ("w".to_string(), floats("Dense(Element(0.0))", &w)),
                    ("M".to_string(), empty(out, &[3, 3])),
                ]);
                let text = scatter_text(out, "M[R[i], C[i]]", "w[i]");
                agree(&runner, &text, &mut tensors, "M");
            }
        }
        // A twin out of order, and one right after its twin (in order: a root `Pattern` COO,
        // which no longer tests the order per append, finds it in its freeze's scan).
        for (out, twins) in vectors
            .into_iter()
            .flat_map(|o| [(o, [3, 1, 3]), (o, [1, 3, 3])])
        {
            let mut tensors = BTreeMap::from([
                ("I".to_string(), ints("Dense(Element(0))", &twins)),
                ("h".to_string(), empty(out, &[n])),
            ]);
            let program = parse(&scatter_text(out, "h[I[i]]", "1"));
            assert!(run_eval(&program, &tensors).is_ok());
            let kernel = runner
                .compile(&program, &common::formats_of(&tensors))
                .unwrap();
            let err = runner
                .execute(&kernel, &mut tensors)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("`h`") && err.contains("written twice"),
                "{backend}, {out}, {twins:?}: {err}"
            );
        }
    }
}

#[test]
fn gathers_from_every_format() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(23);
    let mut nonzero = 0;
    let mut cases = 0;
    for x_format in VECTORS {
        for y_format in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            for kind in [Kind::Full, Kind::Runs, Kind::Scattered, Kind::One] {
                for permutation in [false, true] {
                    let p = if permutation {
                        distinct_indices(&mut rng, N, N)
                    } else {
                        random_indices(&mut rng, N + 3, N)
                    };
                    let mut tensors = BTreeMap::from([
                        ("P".to_string(), ints("Dense(Element(0))", &p)),
                        ("x".to_string(), fitted(&mut rng, x_format, 0, kind)),
                        ("y".to_string(), empty(y_format, &[p.len()])),
                    ]);
                    nonzero += agree(
                        &runner,
                        "y .= 0\nfor i = _\n  y[i] = x[P[i]]\nend\n",
                        &mut tensors,
                        "y",
                    ) as usize;
                    // The same with the index read through a sparse vector, and the gathered
                    // values combined with a second operand.
                    tensors.insert("P".to_string(), ints("SparseList(Element(0))", &p));
                    nonzero += agree(
                        &runner,
                        "y .= 0\nfor i = _\n  y[i] = 2 * x[P[i]] + x[P[i]]\nend\n",
                        &mut tensors,
                        "y",
                    ) as usize;
                    cases += 2;
                }
            }
        }
    }
    assert!(
        nonzero * 10 > cases * 6,
        "{nonzero} of {cases} gathers were nonzero"
    );
}

/// `y[P[i]] = x[i]` scatters through a permutation: applied after the gather by `P` it gives
/// `x` back.
#[test]
fn permutation_and_inverse() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(24);
    for x_format in VECTORS {
        for out in SCATTER_OUTPUTS
            .iter()
            .chain(&["SparseCOO{1}(Element(0.0))"])
        {
            let p = distinct_indices(&mut rng, N, N);
            let x = fitted(&mut rng, x_format, 0, Kind::Full);
            let mut tensors = BTreeMap::from([
                ("P".to_string(), ints("Dense(Element(0))", &p)),
                ("x".to_string(), x.clone()),
                ("y".to_string(), empty("Dense(Element(0.0))", &[N])),
                ("z".to_string(), empty(out, &[N])),
            ]);
            let text = "y .= 0\nfor i = _\n  y[i] = x[P[i]]\nend\nz .= 0\nfor i = _\n  z[P[i]] = y[i]\nend\n";
            assert!(
                agree(&runner, text, &mut tensors, "z"),
                "{x_format}: nonzero data"
            );
            assert_eq!(
                tensors["z"].to_dense(),
                x.to_dense(),
                "the inverse undoes P"
            );
        }
    }
}

/// `C[I[k], J[k]] += V[k]`: COO triplets (repeats included) into matrices that take writes in
/// any order.
#[test]
fn coo_assembly_into_matrices() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(25);
    let (m, n) = (4, 5);
    for out in MATRIX_OUTPUTS {
        for v_format in [
            "Dense(Element(0.0))",
            "SparseList(Element(0.0))",
            "RunList(Element(0.0))",
        ] {
            for len in [0, 1, 8, 25] {
                let i = random_indices(&mut rng, len, m);
                let j = random_indices(&mut rng, len, n);
                let v: Vec<f64> = (0..len).map(|_| rng.random_range(0..4) as f64).collect();
                let mut tensors = BTreeMap::from([
                    ("I".to_string(), ints("Dense(Element(0))", &i)),
                    ("J".to_string(), ints("SparseList(Element(0))", &j)),
                    ("V".to_string(), floats(v_format, &v)),
                    ("C".to_string(), empty(out, &[m, n])),
                ]);
                agree(
                    &runner,
                    "C .= 0\nfor k = _\n  C[I[k], J[k]] += V[k]\nend\n",
                    &mut tensors,
                    "C",
                );
            }
        }
    }
}

/// `y[i] += A[i, j] * x[P[j]]`: a gather at each stored entry of a sparse matrix.
#[test]
fn gathers_inside_sparse_loops() {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(26);
    let matrices = [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(SparseDict(Element(0.0)))",
    ];
    let mut nonzero = 0;
    let mut cases = 0;
    for a_format in matrices {
        for x_format in VECTORS {
            let p = random_indices(&mut rng, N, N);
            let mut tensors = BTreeMap::from([
                (
                    "A".to_string(),
                    fitted(&mut rng, a_format, 5, Kind::Scattered),
                ),
                ("P".to_string(), ints("Dense(Element(0))", &p)),
                ("x".to_string(), fitted(&mut rng, x_format, 0, Kind::Full)),
                ("y".to_string(), empty("Dense(Element(0.0))", &[5])),
            ]);
            for text in [
                "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[P[j]]\nend\n",
                "y .= 0\nfor i = _, j = _\n  y[i] <<max>>= A[i, j] + x[P[j]]\nend\n",
            ] {
                nonzero += agree(&runner, text, &mut tensors, "y") as usize;
                cases += 1;
            }
        }
    }
    assert!(
        nonzero * 10 > cases * 7,
        "{nonzero} of {cases} results were nonzero"
    );
}

/// Runs `text` where `I` holds an index outside `0..n`: the evaluator must refuse, and so must
/// the kernel (never a silently wrong result). Returns the kernel's message.
fn out_of_range(text: &str, out_format: &str, bad: i64) -> String {
    let n = 5;
    let runner = Runner::jit();
    let idx = [1, bad, 2];
    let mut tensors = BTreeMap::from([
        ("I".to_string(), ints("Dense(Element(0))", &idx)),
        ("J".to_string(), ints("Dense(Element(0))", &[0, 1, 2])),
        (
            "x".to_string(),
            floats("SparseList(Element(0.0))", &[1.0, 0.0, 2.0, 3.0, 0.0]),
        ),
        ("h".to_string(), empty(out_format, &[n])),
        (
            "C".to_string(),
            empty("Dense(Dense(Element(0.0)))", &[3, n]),
        ),
        ("y".to_string(), empty("Dense(Element(0.0))", &[idx.len()])),
    ]);
    let program = parse(text);
    let eval = run_eval(&program, &tensors);
    assert!(eval.is_err(), "evaluator accepted index {bad}: {text}");
    let got = runner
        .compile(&program, &common::formats_of(&tensors))
        .and_then(|k| runner.execute(&k, &mut tensors));
    got.expect_err(&format!("kernel accepted index {bad}: {text}{out_format}"))
        .to_string()
}

const HISTOGRAM: &str = "h .= 0\nfor i = _\n  h[I[i]] += 1\nend\n";

#[test]
fn scatter_out_of_range_is_an_error() {
    for out in SCATTER_OUTPUTS {
        for bad in [-1, 5, 1000] {
            out_of_range(HISTOGRAM, out, bad);
        }
    }
}

/// The message names the tensor written and the bad index (today the kernel only notices a
/// buffer overrun and blames the tensor's arrays).
#[test]

fn scatter_out_of_range_names_the_tensor_and_index() {
    for out in SCATTER_OUTPUTS {
        for bad in [-1, 5] {
            let err = out_of_range(HISTOGRAM, out, bad);
            assert!(
                err.contains("`h`") && err.contains(&bad.to_string()),
                "{out}: {err}"
            );
            assert!(!err.contains("inconsistent"), "{out}: {err}");
        }
    }
}

#[test]

fn gather_out_of_range_is_an_error() {
    for bad in [-1, 5, 1000] {
        out_of_range(
            "y .= 0\nfor i = _\n  y[i] = x[I[i]]\nend\n",
            "Dense(Element(0.0))",
            bad,
        );
    }
}

/// A column index past the row lands inside the next row of a dense matrix's storage: only a
/// bounds check on the index itself can catch it.
#[test]

fn matrix_scatter_out_of_range_is_an_error() {
    for bad in [-1, 5] {
        out_of_range(
            "C .= 0\nfor k = _\n  C[J[k], I[k]] += 1\nend\n",
            "Dense(Element(0.0))",
            bad,
        );
    }
}
