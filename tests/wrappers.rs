//! Wrappers and masks against the reference evaluator: index comparisons (triangles,
//! diagonals, bands, half-planes), offset and toeplitz accesses (`x[i + c]`, `x[i + j]`,
//! `y[i + j] += ...`), permissive accesses with `coalesce`, on every format and protocol.
//!
//! Each case is a program of one of the families below (built as an AST by a proptest
//! strategy) with formats and data; values are small integers so every summation order gives
//! the same bits. A failure shrinks to a small case and prints its program, formats and data.
//!
//! CI runs a fixed set of cases. A long run of fresh cases (the seed is printed;
//! `PROPTEST_RNG_SEED=seed` replays it):
//! `PROPTEST_CASES=2000 cargo test --release --test wrappers -- --nocapture`

mod common;

use common::cases::{Case, Tally, c_matches_evaluator, compare, run_cases};
use common::random::{Data, all_matrix_formats, all_vector_formats, data_s};
use common::{fmt, parse, run_jit};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use std::collections::BTreeMap;
use tessera::notation::ast::{AccessIndex, Expr, Stmt};
use tessera::notation::build::*;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Cases per family on CI.
const CASES: u32 = 150;

/// Cases per family through the C backend on CI (each kernel is a compiler run).
const C_CASES: u32 = 15;

/// No protocol half the time, else `gallop` or `follow`.
fn protocol_s() -> impl Strategy<Value = Option<Protocol>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(Protocol::Gallop)),
        1 => Just(Some(Protocol::Follow)),
    ]
}

/// `e` as an index with protocol `p`.
fn at(e: impl Into<Expr>, p: Option<Protocol>) -> AccessIndex {
    let ix = idx(e);
    match p {
        Some(p) => ix.with_protocol(p),
        None => ix,
    }
}

fn read_at(t: &str, indices: impl IntoIterator<Item = AccessIndex>) -> Expr {
    read(access(t, indices))
}

/// The index comparisons over `i` (outer) and `j` (inner) with a constant `k`, including
/// half-planes in one of them.
fn conditions(k: i64) -> Vec<Expr> {
    let k = || lit(k);
    vec![
        le("i", "j"),
        lt("i", "j"),
        ge("i", "j"),
        gt("j", "i"),
        eq("i", "j"),
        ne("i", "j"),
        le("j", add("i", k())),
        and(le(sub("i", k()), "j"), le("j", add("i", k()))),
        lt(add("j", k()), "i"),
        le(k(), "j"),
        ne(sub("j", k()), "i"),
        le("i", k()),
        or(eq(add("i", lit(1)), "j"), eq("j", "i")),
    ]
}

/// A format (by name) and data for an input tensor.
type Input = (&'static str, Data);

fn tensor((format, data): &Input, shape: &[usize]) -> Tensor {
    data.tensor(&fmt(format), shape)
}

/// Masked reductions and copies over a matrix: the parts of a case.
#[derive(Clone, Debug)]
struct Mask {
    /// The protocols of `i` and `j` in `A[i, j]`.
    protocols: (Option<Protocol>, Option<Protocol>),
    rhs: usize,
    condition: Index,
    k: i64,
    /// An `else` branch.
    otherwise: bool,
    output: usize,
    out_format: Index,
    inputs: (Input, Input, Input),
    extents: (usize, usize),
}

fn mask_s() -> impl Strategy<Value = Mask> {
    let matrix = || (select(all_matrix_formats()), data_s(36));
    // The extents come first: shrinking them crops the data, which works while it is dense;
    // once the data has shrunk to the few entries a failure needs, they would stay large.
    (
        (0..7usize, 0..7usize),
        (protocol_s(), protocol_s()),
        0..4usize,
        any::<Index>(),
        0..3i64,
        proptest::bool::weighted(0.3),
        0..3usize,
        any::<Index>(),
        (
            matrix(),
            matrix(),
            (select(all_vector_formats()), data_s(6)),
        ),
    )
        .prop_map(
            |(extents, protocols, rhs, condition, k, otherwise, output, out_format, inputs)| Mask {
                protocols,
                rhs,
                condition,
                k,
                otherwise,
                output,
                out_format,
                inputs,
                extents,
            },
        )
}

impl Mask {
    fn case(&self) -> Case {
        let (ni, nj) = self.extents;
        let (pi, pj) = self.protocols;
        let a = || read_at("A", [at("i", pi), at("j", pj)]);
        let rhs = match self.rhs {
            0 => a(),
            1 => mul(a(), read_at("B", [idx("i"), at("j", pj)])),
            2 => add(a(), read_at("u", [at("i", pi)])),
            _ => mul(add(a(), lit(1)), "j"),
        };
        let (out, lhs, shape, formats): (&str, _, Vec<usize>, &[&str]) = match self.output {
            0 => (
                "s",
                access("s", []),
                vec![],
                &["Element(0.0)", "SparseScalar(0.0)"],
            ),
            1 => (
                "y",
                access("y", [idx("i")]),
                vec![ni],
                &["Dense(Element(0.0))", "SparseByteMap(Element(0.0))"],
            ),
            _ => (
                "C",
                access("C", [idx("i"), idx("j")]),
                vec![ni, nj],
                &[
                    "Dense(Dense(Element(0.0)))",
                    "Dense(SparseList(Element(0.0)))",
                    "SparseList(SparseList(Element(0.0)))",
                    "Dense(RunList(Element(0.0)))",
                    "Dense(SparseDict(Element(0.0)))",
                ],
            ),
        };
        let op = if out == "C" {
            Reducer::Max
        } else {
            Reducer::Add
        };
        let otherwise: Vec<Stmt> = if self.otherwise {
            vec![assign(
                lhs.clone(),
                Reducer::Max,
                read_at("B", [idx("i"), idx("j")]),
            )]
        } else {
            vec![]
        };
        let cond = self.condition.get(&conditions(self.k)).clone();
        let program = program([
            declare(out, lit(0)),
            for_(
                "i",
                auto(),
                [for_(
                    "j",
                    auto(),
                    [if_else(cond, [assign(lhs, op, rhs)], otherwise)],
                )],
            ),
        ]);
        let (a, b, u) = &self.inputs;
        let mut tensors = BTreeMap::from([
            ("A".to_string(), tensor(a, &[ni, nj])),
            ("B".to_string(), tensor(b, &[ni, nj])),
            ("u".to_string(), tensor(u, &[ni])),
        ]);
        let f = fmt(self.out_format.get::<&str>(formats));
        tensors.insert(out.to_string(), Tensor::empty(&f, &shape).unwrap());
        Case { program, tensors }.retain_mentioned()
    }
}

/// Offsets, toeplitz and permissive accesses over vectors and matrices, and an erosion with a
/// true border: the parts of a case.
#[derive(Clone, Debug)]
struct Offset {
    family: usize,
    k: i64,
    pad: i64,
    /// Protocols for the indices of the family's accesses.
    protocols: [Option<Protocol>; 7],
    /// `x`, `w` and `A`.
    inputs: (Input, Input, Input),
    /// The erosion's image (true where set), its format and the format of its workspace.
    image: (Vec<bool>, &'static str, &'static str),
    out_format: Index,
    /// The length of `x`, and of `w`.
    extents: (usize, usize),
}

const IMAGE_FORMATS: &[&str] = &[
    "Dense(Dense(Element(false)))",
    "Dense(RunList(Element(false)))",
    "Dense(SparseRunList(Pattern()))",
    "Dense(SparseList(Pattern()))",
    "SparseList(SparseRunList(Pattern()))",
];

const EROSION: &str = "C .= false
for i = _
  t .= false
  for j = _
    t[j] = coalesce(A[~(i - 1), j], true) & A[i, j] & coalesce(A[~(i + 1), j], true)
  end
  for j = _
    C[i, j] = coalesce(t[~(j - 1)], true) & t[j] & coalesce(t[~(j + 1)], true)
  end
end
";

fn offset_s() -> impl Strategy<Value = Offset> {
    // The extents come before the data (see `mask_s`).
    (
        0..8usize,
        (0..8usize, 1..4usize),
        -3..4i64,
        0..3i64,
        proptest::array::uniform7(protocol_s()),
        (
            (select(all_vector_formats()), data_s(7)),
            (select(all_vector_formats()), data_s(3)),
            (select(all_matrix_formats()), data_s(21)),
        ),
        (
            proptest::collection::vec(proptest::bool::weighted(0.7), 21),
            select(IMAGE_FORMATS),
            select(
                &[
                    "Dense(Element(false))",
                    "RunList(Element(false))",
                    "SparseRunList(Pattern(), merge=false)",
                ][..],
            ),
        ),
        any::<Index>(),
    )
        .prop_map(
            |(family, extents, k, pad, protocols, inputs, image, out_format)| Offset {
                family,
                k,
                pad,
                protocols,
                inputs,
                image,
                out_format,
                extents,
            },
        )
}

impl Offset {
    fn case(&self) -> Case {
        let (n, m) = self.extents;
        let k = self.k;
        let [pi, pj, pk, pij, pk1, pik, pl] = self.protocols;
        let y_i = || access("y", [idx("i")]);
        let x_at = |ix: AccessIndex| read_at("x", [ix]);
        let coalesce = |a: Expr, b: Expr| call("coalesce", [a, b]);
        let one_loop = |stmt: Stmt| vec![declare("y", lit(0)), for_("i", auto(), [stmt])];
        let two_loops = |out: &str, stmt: Stmt| {
            vec![
                declare(out, lit(0)),
                for_("i", auto(), [for_("j", auto(), [stmt])]),
            ]
        };
        let (x, w, a) = &self.inputs;
        let mut tensors = BTreeMap::from([
            ("x".to_string(), tensor(x, &[n])),
            ("w".to_string(), tensor(w, &[m])),
        ]);
        let (body, out, shape) = match self.family {
            0 => (
                one_loop(assign(
                    y_i(),
                    Reducer::Add,
                    coalesce(x_at(at(add("i", lit(k)), pk).with_tilde()), lit(self.pad)),
                )),
                "y",
                vec![n],
            ),
            1 => (
                two_loops(
                    "y",
                    assign(
                        y_i(),
                        Reducer::Add,
                        mul(
                            coalesce(x_at(at(add("i", "j"), pij).with_tilde()), lit(self.pad)),
                            read_at("w", [idx("j")]),
                        ),
                    ),
                ),
                "y",
                vec![n],
            ),
            2 => (
                two_loops(
                    "y",
                    assign(
                        access("y", [idx(add("i", "j"))]),
                        Reducer::Add,
                        mul(x_at(at("i", pi)), read_at("w", [at("j", pj)])),
                    ),
                ),
                "y",
                vec![n + m - 1],
            ),
            3 => {
                let k = k.abs();
                (
                    vec![
                        declare("y", lit(0)),
                        for_(
                            "i",
                            range(lit(k), sub(call("size", [name("x"), lit(0)]), lit(1))),
                            [assign(
                                access("y", [idx(sub("i", lit(k)))]),
                                Reducer::Add,
                                mul(x_at(idx("i")), x_at(at(sub("i", lit(k)), pl))),
                            )],
                        ),
                    ],
                    "y",
                    vec![n],
                )
            }
            4 => (
                one_loop(assign(
                    access("y", [idx(add("i", lit(k))).with_tilde()]),
                    Reducer::Add,
                    x_at(at("i", pi)),
                )),
                "y",
                vec![n],
            ),
            5 => {
                tensors.insert("A".to_string(), tensor(a, &[n, m]));
                let rhs = add(
                    mul(
                        coalesce(
                            read_at("A", [idx(sub("i", lit(1))).with_tilde(), at("j", pj)]),
                            lit(self.pad),
                        ),
                        coalesce(
                            read_at("A", [at("i", pi), at(add("j", lit(k)), pik).with_tilde()]),
                            lit(1),
                        ),
                    ),
                    read_at("A", [idx("i"), idx("j")]),
                );
                (
                    two_loops("C", overwrite(access("C", [idx("i"), idx("j")]), rhs)),
                    "C",
                    vec![n, m],
                )
            }
            6 => {
                let (set, image_format, t_format) = &self.image;
                let values = set[..n * m]
                    .iter()
                    .map(|&b| if b { 1.0 } else { 0.0 })
                    .collect();
                let dense = Tensor::from_dense(
                    &fmt("Dense(Dense(Element(0.0)))"),
                    &[n, m],
                    &Buffer::F64(values),
                )
                .unwrap();
                tensors.insert(
                    "A".to_string(),
                    dense.to_format(&fmt(image_format)).unwrap(),
                );
                tensors.insert(
                    "t".to_string(),
                    Tensor::empty(&fmt(t_format), &[m]).unwrap(),
                );
                (parse(EROSION).body, "C", vec![n, m])
            }
            // A non-permissive offset out of bounds: an error on both sides (unless empty).
            _ => (
                one_loop(assign(y_i(), Reducer::Add, x_at(at(add("i", lit(1)), pk1)))),
                "y",
                vec![n],
            ),
        };
        let out_formats: &[&str] = match (out, self.family) {
            ("C", 6) => &[
                "Dense(Dense(Element(false)))",
                "Dense(RunList(Element(false)))",
                "Dense(SparseRunList(Pattern()))",
            ],
            ("C", _) => &[
                "Dense(Dense(Element(0.0)))",
                "Dense(SparseList(Element(0.0)))",
            ],
            _ => &[
                "Dense(Element(0.0))",
                "SparseByteMap(Element(0.0))",
                "SparseDict(Element(0.0))",
            ],
        };
        let f = fmt(self.out_format.get::<&str>(out_formats));
        tensors.insert(out.to_string(), Tensor::empty(&f, &shape).unwrap());
        Case {
            program: program(body),
            tensors,
        }
        .retain_mentioned()
    }
}

/// `CASES` cases of a family through the JIT. Kernels refused as too large (several
/// permissive reads of sparse operands in one statement multiply their phases) are allowed,
/// and programs both sides reject (out-of-bounds offsets), but both must stay rare.
fn family_matches_evaluator(name: &str, strategy: impl Strategy<Value = Case>) {
    let tally = Tally::default();
    run_cases(name, CASES, strategy, |case| {
        tally.count(compare(&case, &run_jit)?);
        Ok(())
    });
    tally.assert_rare(20, 4);
}

#[test]
fn masks_match_evaluator() {
    family_matches_evaluator("masks_match_evaluator", mask_s().prop_map(|m| m.case()));
}

#[test]
fn offsets_match_evaluator() {
    family_matches_evaluator("offsets_match_evaluator", offset_s().prop_map(|o| o.case()));
}

#[test]
fn masks_match_evaluator_on_c() {
    c_matches_evaluator(
        "masks_match_evaluator_on_c",
        C_CASES,
        mask_s().prop_map(|m| m.case()),
        |_| Ok(()),
    );
}

#[test]
fn offsets_match_evaluator_on_c() {
    c_matches_evaluator(
        "offsets_match_evaluator_on_c",
        C_CASES,
        offset_s().prop_map(|o| o.case()),
        |_| Ok(()),
    );
}
