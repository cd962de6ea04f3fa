//! Several outputs in one loop nest, `let` values shared by several statements, and outputs
//! declared inside loops (workspaces re-declared per iteration), on several input formats,
//! against the reference evaluator. Every tensor, inputs included, must end as the evaluator
//! leaves it.

mod common;

use common::data::{KINDS, Kind, N, fitted};
use common::{fmt, parse, run_eval};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use tessera::run::Runner;
use tessera::tensor::Tensor;

const ROWS: usize = 5;

const MATRICES: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseBand(Element(0.0)))",
    "Dense(SparseBlockList(Element(0.0)))",
    "Dense(RunList(Element(0.0)))",
    "SparseRunList(Dense(Element(0.0)))",
    "Dense(SparseDict(Element(0.0)))",
    "SparseByteMap(SparseList(Element(0.0)))",
];

const VECTORS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseCOO{1}(Element(0.0))",
    "SparseBand(Element(0.0))",
    "RunList(Element(0.0))",
    "SparseRunList(Element(0.0))",
    "SparseByteMap(Element(0.0))",
    "SparseDict(Element(0.0))",
];

/// A program, its inputs (name, candidate formats, rows: 0 for a vector of N, or the
/// transposed `N x ROWS` shape for -1), and its outputs (name, format, shape).
struct Case<'a> {
    text: &'a str,
    inputs: &'a [(&'a str, &'a [&'a str], i32)],
    outputs: &'a [(&'a str, &'a str, &'a [usize])],
}

/// Every input format (one input cycling through its list while the others follow along)
/// and data of every kind; all tensors must match the evaluator and the outputs must not all
/// be fill in most runs.
fn check(case: &Case, seed: u64) {
    let runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(seed);
    let program = parse(case.text);
    let rounds = case.inputs.iter().map(|i| i.1.len()).max().unwrap_or(1);
    let (mut runs, mut nonzero) = (0, 0);
    for round in 0..rounds {
        for (k, &kind) in KINDS.iter().chain(&[Kind::Full, Kind::Runs]).enumerate() {
            let mut tensors = BTreeMap::new();
            for (n, (name, formats, rows)) in case.inputs.iter().enumerate() {
                let f = formats[(round + n) % formats.len()];
                let t = match rows {
                    -1 => {
                        // `N x ROWS` data through the transpose of a ROWS x N tensor.
                        let src = fitted(&mut rng, "Dense(Dense(Element(0.0)))", ROWS, kind);
                        let d = src.to_dense();
                        let mut v = vec![0.0; ROWS * N];
                        for r in 0..ROWS {
                            for c in 0..N {
                                v[c * ROWS + r] = d.get(r * N + c).as_f64();
                            }
                        }
                        Tensor::from_dense(
                            &fmt(f),
                            &[N, ROWS],
                            &tessera::runtime::Buffer::F64(v.into()),
                        )
                        .unwrap()
                    }
                    r => {
                        // The first input gets this round's kind, the others a dense-ish one.
                        let kind = if n == 0 {
                            kind
                        } else {
                            KINDS[(k + n) % KINDS.len()]
                        };
                        fitted(&mut rng, f, *r as usize, kind)
                    }
                };
                tensors.insert(name.to_string(), t);
            }
            for (name, f, shape) in case.outputs {
                tensors.insert(name.to_string(), Tensor::empty(&fmt(f), shape).unwrap());
            }
            let describe = || {
                let fs: Vec<String> = tensors
                    .iter()
                    .map(|(n, t)| format!("{n}: {} {:?}", t.format, t.to_dense()))
                    .collect();
                format!("{}{}", case.text, fs.join("\n"))
            };
            let exp =
                run_eval(&program, &tensors).unwrap_or_else(|e| panic!("{e}\n{}", describe()));
            let before = describe();
            let kernel = runner
                .compile(&program, &common::formats_of(&tensors))
                .unwrap_or_else(|e| panic!("{e}\n{before}"));

            runner
                .execute(&kernel, &mut tensors)
                .unwrap_or_else(|e| panic!("{e}\n{before}"));
            for (name, t) in &tensors {
                assert_eq!(t.to_dense(), exp[name], "tensor {name} differs\n{before}");
                t.validate(name).unwrap();
            }
            runs += 1;
            let all_fill = case.outputs.iter().all(|(name, _, _)| {
                let b = &exp[*name];
                let fill = tensors[*name].fill();
                (0..b.len()).all(|k| b.get(k) == fill)
            });
            nonzero += !all_fill as usize;
        }
    }
    assert!(
        nonzero * 10 >= runs * 6,
        "{}: only {nonzero} of {runs} runs wrote something",
        case.text
    );
}

#[test]
fn a_vector_and_a_scalar() {
    check(
        &Case {
            text: "y .= 0\ns .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\n  s[] += A[i, j]\nend\n",
            inputs: &[("A", MATRICES, ROWS as i32), ("x", VECTORS, 0)],
            outputs: &[
                ("y", "Dense(Element(0.0))", &[ROWS]),
                ("s", "Element(0.0)", &[]),
            ],
        },
        1,
    );
}

#[test]
fn two_matrices_of_different_formats() {
    check(
        &Case {
            text: "C .= 0\nD .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * 2\n  D[i, j] += A[i, j] + B[i, j]\nend\n",
            inputs: &[("A", MATRICES, ROWS as i32), ("B", MATRICES, ROWS as i32)],
            outputs: &[
                ("C", "Dense(SparseList(Element(0.0)))", &[ROWS, N]),
                ("D", "SparseDict(SparseByteMap(Element(0.0)))", &[ROWS, N]),
            ],
        },
        2,
    );
    // The same into a run-length and a blocked output, and with the outputs' roles swapped,
    // on every pair of input formats the rounds give (round 2 pairs SparseList(SparseList)
    // with SparseCOO{2}, a kernel that once took 20 s to compile).
    for d in [
        "Dense(SparseBlockList(Element(0.0)))",
        "SparseList(SparseBlockList(Element(0.0)))",
    ] {
        check(
            &Case {
                text: "C .= 0\nD .= 0\nfor i = _, j = _\n  D[i, j] = max(A[i, j], B[i, j])\n  C[i, j] = A[i, j] - B[i, j]\nend\n",
                inputs: &[("A", MATRICES, ROWS as i32), ("B", MATRICES, ROWS as i32)],
                outputs: &[
                    ("C", "Dense(RunList(Element(0.0)))", &[ROWS, N]),
                    ("D", d, &[ROWS, N]),
                ],
            },
            3,
        );
    }
}

#[test]
fn sum_max_and_count_in_one_pass() {
    check(
        &Case {
            text: "s .= 0\nm .= -100\nc .= 0\nfor i = _\n  s[] += x[i]\n  m[] <<max>>= x[i]\n  c[] += ifelse(x[i] != 0, 1, 0)\nend\n",
            inputs: &[("x", VECTORS, 0)],
            outputs: &[
                ("s", "Element(0.0)", &[]),
                ("m", "Element(0.0)", &[]),
                ("c", "Element(0)", &[]),
            ],
        },
        4,
    );
    // Per row, into three vectors of different formats.
    check(
        &Case {
            text: "s .= 0\nm .= 0\nc .= 0\nfor i = _, j = _\n  s[i] += A[i, j]\n  m[i] <<max>>= A[i, j]\n  if A[i, j] != 0\n    c[i] += 1\n  end\nend\n",
            inputs: &[("A", MATRICES, ROWS as i32)],
            outputs: &[
                ("s", "Dense(Element(0.0))", &[ROWS]),
                ("m", "SparseByteMap(Element(0.0))", &[ROWS]),
                ("c", "SparseDict(Element(0))", &[ROWS]),
            ],
        },
        5,
    );
}

#[test]
fn let_values_shared_by_statements() {
    check(
        &Case {
            text: "y .= 0\ns .= 0\nfor i = _\n  let t = x[i] * 2 + z[i]\n    y[i] = t * t\n    s[] += t\n  end\nend\n",
            inputs: &[("x", VECTORS, 0), ("z", VECTORS, 0)],
            outputs: &[
                ("y", "Dense(Element(0.0))", &[N]),
                ("s", "Element(0.0)", &[]),
            ],
        },
        6,
    );
    check(
        &Case {
            text: "y .= 0\nC .= 0\nfor i = _, j = _\n  let t = A[i, j] * x[j]\n    y[i] += t\n    C[i, j] = t - 1\n  end\nend\n",
            inputs: &[("A", MATRICES, ROWS as i32), ("x", VECTORS, 0)],
            outputs: &[
                ("y", "SparseByteMap(Element(0.0))", &[ROWS]),
                ("C", "Dense(Dense(Element(0.0)))", &[ROWS, N]),
            ],
        },
        7,
    );
}

/// A workspace declared inside the loop: each row of a sparse matrix product accumulates in
/// `w`, cleared per row, then is copied out.
#[test]
fn workspaces_declared_per_iteration() {
    for w in [
        "Dense(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseDict(Element(0.0))",
    ] {
        check(
            &Case {
                text: "C .= 0\nfor i = _\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  end\n  for j = _\n    C[i, j] = w[j]\n  end\nend\n",
                inputs: &[("A", MATRICES, ROWS as i32), ("B", MATRICES, -1)],
                outputs: &[
                    ("C", "Dense(SparseList(Element(0.0)))", &[ROWS, ROWS]),
                    ("w", w, &[ROWS]),
                ],
            },
            8,
        );
    }
    // A scalar workspace per row, read back twice.
    check(
        &Case {
            text: "y .= 0\nfor i = _\n  t .= 0\n  for j = _\n    t[] += A[i, j]\n  end\n  y[i] = t[] * t[] + t[]\nend\n",
            inputs: &[("A", MATRICES, ROWS as i32)],
            outputs: &[
                ("y", "Dense(Element(0.0))", &[ROWS]),
                ("t", "Element(0.0)", &[]),
            ],
        },
        9,
    );
}
