//! Read protocols (`walk`, `gallop`, `follow`, `extrude`, or none) on every level format, as a
//! vector and as the inner and the outer level of a matrix: dot products against a second
//! operand in every format, SpMV, elementwise products and masked sums must give exactly what
//! the reference evaluator gives. A protocol a level does not implement falls back to its walk,
//! so every combination compiles and agrees.
//!
//! Values are small integers stored as floats, so every summation order gives the same bits.
//! Data comes in kinds (empty, one entry, every coordinate stored, runs, scattered) and most
//! expected results are checked to be nonzero, so a kernel that returns zeros cannot pass.

mod common;

use common::data::{KINDS, Kind, N, fitted};
use common::{fmt, parse, run_eval};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Every level format over a leaf, as a vector.
const LEVELS: &[&str] = &[
    "Dense",
    "SparseList",
    "SparseCOO{1}",
    "SparsePoint",
    "SparseBlockList",
    "SparseBand",
    "RunList",
    "SparseRunList",
    "SparseInterval",
    "SparseByteMap",
    "SparseDict",
];

const PROTOCOLS: &[Option<&str>] = &[
    None,
    Some("walk"),
    Some("gallop"),
    Some("follow"),
    Some("extrude"),
];

const ROWS: usize = 5;

fn vector_format(level: &str) -> String {
    format!("{level}(Element(0.0))")
}

/// The level as the inner and as the outer level of a matrix (over Dense).
fn matrix_formats() -> Vec<String> {
    LEVELS
        .iter()
        .flat_map(|l| {
            [
                format!("Dense({l}(Element(0.0)))"),
                format!("{l}(Dense(Element(0.0)))"),
            ]
        })
        .collect()
}

fn index(ix: &str, p: Option<&str>) -> String {
    match p {
        Some(p) => format!("{p}({ix})"),
        None => ix.to_string(),
    }
}

fn is_nonzero(b: &Buffer) -> bool {
    (0..b.len()).any(|k| b.get(k).as_f64() != 0.0)
}

/// Runs the kernels of one test and counts what they proved.
struct Checker {
    runner: Runner,
    rng: StdRng,
    cases: usize,
    nonzero: usize,
}

impl Checker {
    fn new(seed: u64) -> Checker {
        Checker {
            runner: Runner::jit(),
            rng: StdRng::seed_from_u64(seed),
            cases: 0,
            nonzero: 0,
        }
    }

    /// Compile `text` once for the formats of `inputs` (name, format, rows; rows 0 is a
    /// vector) and the output, then compare with the evaluator on data of several kinds:
    /// `round` picks the kinds so that every pair of kinds meets across kernels.
    fn check(
        &mut self,
        text: &str,
        inputs: &[(&str, &str, usize)],
        out: (&str, &str, Vec<usize>),
        round: usize,
    ) {
        let program = parse(text);
        let formats: BTreeMap<String, Format> = inputs
            .iter()
            .map(|(n, f, _)| (n.to_string(), fmt(f)))
            .chain([(out.0.to_string(), fmt(out.1))])
            .collect();
        let describe = || {
            let fs: Vec<String> = inputs.iter().map(|(n, f, _)| format!("{n}: {f}")).collect();
            format!("{text}{}", fs.join(", "))
        };
        let kernel = self
            .runner
            .compile(&program, &formats)
            .unwrap_or_else(|e| panic!("{e}\n{}", describe()));
        // The data of one kernel: mostly dense-ish kinds, so results are rarely trivially 0,
        // plus one round whose kinds cycle through every combination (empty, one entry...).
        for r in 0..3 {
            let mut tensors = BTreeMap::new();
            for (k, (name, f, rows)) in inputs.iter().enumerate() {
                let kind = match r {
                    0 => Kind::Full,
                    1 => [Kind::Runs, Kind::Scattered][(round + k) % 2],
                    _ => KINDS[(round / (k * 4 + 1) + k) % KINDS.len()],
                };
                tensors.insert(name.to_string(), fitted(&mut self.rng, f, *rows, kind));
            }
            tensors.insert(
                out.0.to_string(),
                Tensor::empty(&fmt(out.1), &out.2).unwrap(),
            );
            let exp =
                run_eval(&program, &tensors).unwrap_or_else(|e| panic!("{e}\n{}", describe()));
            self.runner
                .execute(&kernel, &mut tensors)
                .unwrap_or_else(|e| panic!("{e}\n{}", describe()));
            let data = || {
                tensors
                    .iter()
                    .map(|(n, t)| format!("{n} = {:?}", t.to_dense()))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(
                tensors[out.0].to_dense(),
                exp[out.0],
                "{}\n{}",
                describe(),
                data()
            );
            self.cases += 1;
            self.nonzero += is_nonzero(&exp[out.0]) as usize;
        }
    }

    /// Most expected results were nonzero, so an all-zero kernel could not have passed.
    fn assert_nontrivial(&self, what: &str) {
        assert!(
            self.nonzero * 10 >= self.cases * 6,
            "{what}: only {} of {} expected results were nonzero",
            self.nonzero,
            self.cases
        );
    }
}

/// `x · y` with `x` in every format and protocol, against `y` in every format (its protocol
/// cycling through all of them, so walk×walk, gallop×gallop, gallop×walk, follow×walk... all
/// occur).
#[test]
fn dot_products() {
    let mut c = Checker::new(1);
    let mut round = 0;
    for lx in LEVELS {
        for &px in PROTOCOLS {
            for ly in LEVELS {
                let py = PROTOCOLS[round % PROTOCOLS.len()];
                let text = format!(
                    "s .= 0\nfor i = _\n  s[] += x[{}] * y[{}]\nend\n",
                    index("i", px),
                    index("i", py)
                );
                c.check(
                    &text,
                    &[("x", &vector_format(lx), 0), ("y", &vector_format(ly), 0)],
                    ("s", "Element(0.0)", vec![]),
                    round,
                );
                round += 1;
            }
        }
    }
    c.assert_nontrivial("dot products");
}

/// `y[i] += A[i, j] * x[j]` with a protocol on each of A's indices and on x's.
#[test]
fn spmv() {
    let mut c = Checker::new(2);
    let mut round = 0;
    for fa in matrix_formats() {
        for &pi in PROTOCOLS {
            for &pj in PROTOCOLS {
                let lx = LEVELS[round % LEVELS.len()];
                let px = PROTOCOLS[(round / LEVELS.len()) % PROTOCOLS.len()];
                let text = format!(
                    "y .= 0\nfor i = _, j = _\n  y[i] += A[{}, {}] * x[{}]\nend\n",
                    index("i", pi),
                    index("j", pj),
                    index("j", px)
                );
                c.check(
                    &text,
                    &[("A", &fa, ROWS), ("x", &vector_format(lx), 0)],
                    ("y", "Dense(Element(0.0))", vec![ROWS]),
                    round,
                );
                round += 1;
            }
        }
    }
    c.assert_nontrivial("SpMV");
}

/// `C[i, j] = A[i, j] * B[i, j]` into a dense output, protocols on A's indices, B in every
/// matrix format with a protocol on its inner index.
#[test]
fn elementwise_products() {
    let mut c = Checker::new(3);
    let formats = matrix_formats();
    let mut round = 0;
    for fa in &formats {
        for &pi in PROTOCOLS {
            for &pj in PROTOCOLS {
                let fb = &formats[(round * 7) % formats.len()];
                let pb = PROTOCOLS[(round / formats.len()) % PROTOCOLS.len()];
                let text = format!(
                    "C .= 0\nfor i = _, j = _\n  C[i, j] = A[{}, {}] * B[i, {}]\nend\n",
                    index("i", pi),
                    index("j", pj),
                    index("j", pb)
                );
                c.check(
                    &text,
                    &[("A", fa, ROWS), ("B", fb, ROWS)],
                    ("C", "Dense(Dense(Element(0.0)))", vec![ROWS, N]),
                    round,
                );
                round += 1;
            }
        }
    }
    c.assert_nontrivial("elementwise products");
}

/// `s += A[i, j]` where a mask `M` (every format) is nonzero, and the vector form.
#[test]
fn masked_sums() {
    let mut c = Checker::new(4);
    let formats = matrix_formats();
    let mut round = 0;
    for fa in &formats {
        for &pi in PROTOCOLS {
            for &pj in PROTOCOLS {
                let fm = &formats[(round * 5) % formats.len()];
                let pm = PROTOCOLS[(round / formats.len()) % PROTOCOLS.len()];
                let text = format!(
                    "s .= 0\nfor i = _, j = _\n  if M[i, {}] != 0\n    s[] += A[{}, {}]\n  end\nend\n",
                    index("j", pm),
                    index("i", pi),
                    index("j", pj)
                );
                c.check(
                    &text,
                    &[("A", fa, ROWS), ("M", fm, ROWS)],
                    ("s", "Element(0.0)", vec![]),
                    round,
                );
                round += 1;
            }
        }
    }
    for lx in LEVELS {
        for &px in PROTOCOLS {
            for lm in LEVELS {
                let pm = PROTOCOLS[round % PROTOCOLS.len()];
                let text = format!(
                    "s .= 0\nfor i = _\n  if m[{}] != 0\n    s[] += x[{}]\n  end\nend\n",
                    index("i", pm),
                    index("i", px)
                );
                c.check(
                    &text,
                    &[("x", &vector_format(lx), 0), ("m", &vector_format(lm), 0)],
                    ("s", "Element(0.0)", vec![]),
                    round,
                );
                round += 1;
            }
        }
    }
    c.assert_nontrivial("masked sums");
}

/// `follow` is random access by binary search: in a loop driven by a sparse operand, a
/// followed sorted level is searched at each of that operand's entries instead of being
/// iterated, so the kernel has one loop (over `x`'s entries) and a search; with `walk` both
/// lists are coiterated instead.
#[test]
fn follow_reads_by_search() {
    let text = "s .= 0\nfor i = _\n  s[] += x[i] * y[follow(i)]\nend\n";
    for level in [
        "SparseDict",
        "SparseByteMap",
        "SparseList",
        "SparseBlockList",
        "SparseRunList",
        "RunList",
        "SparseCOO{1}",
    ] {
        let formats: BTreeMap<String, Format> = [
            ("x", "SparseList(Element(0.0))".to_string()),
            ("y", vector_format(level)),
            ("s", "Element(0.0)".to_string()),
        ]
        .iter()
        .map(|(n, f)| (n.to_string(), fmt(f)))
        .collect();
        let (k, _, _) = Runner::lower(&parse(text), &formats).unwrap_or_else(|e| panic!("{e}"));
        let code = k.to_string();
        let loops = code
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("for ") || l.starts_with("while ")
            })
            .count();
        assert_eq!(loops, 1, "{level}: one loop, over x's entries:\n{code}");
        let searched = code.contains("search_ge(y_");
        let hashed = code.contains("hash_find(y_");
        let direct = ["SparseByteMap", "SparseDict"].contains(&level);
        assert_eq!(searched, !direct, "{level}: y is searched:\n{code}");
        assert_eq!(
            hashed,
            level == "SparseDict",
            "{level}: y is hashed:\n{code}"
        );
    }
}

/// A protocol on a written index changes nothing: the write goes through the level's update
/// looplet (`extrude` is Finch's name for that default).
#[test]
fn protocols_on_written_indices() {
    let mut c = Checker::new(5);
    let mut round = 0;
    for ly in [
        "Dense",
        "SparseList",
        "SparseCOO{1}",
        "SparseBlockList",
        "SparseBand",
        "RunList",
        "SparseRunList",
        "SparseByteMap",
        "SparseDict",
    ] {
        for &p in PROTOCOLS {
            let lx = LEVELS[round % LEVELS.len()];
            let text = format!(
                "y .= 0\nfor i = _\n  y[{}] += x[i] * 2\nend\n",
                index("i", p)
            );
            c.check(
                &text,
                &[("x", &vector_format(lx), 0)],
                ("y", &vector_format(ly), vec![N]),
                round,
            );
            round += 1;
        }
    }
    c.assert_nontrivial("writes");
}
