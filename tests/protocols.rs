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

use common::{fmt, parse, run_eval};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
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

const N: usize = 7;
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

#[derive(Clone, Copy, Debug)]
enum Kind {
    Empty,
    One,
    Full,
    Runs,
    Scattered,
}

const KINDS: &[Kind] = &[Kind::Empty, Kind::One, Kind::Full, Kind::Runs, Kind::Scattered];

/// A nonzero small integer.
fn value(rng: &mut StdRng) -> f64 {
    [1.0, 2.0, 3.0, -1.0, -2.0][rng.random_range(0..5)]
}

fn raw_values(rng: &mut StdRng, kind: Kind, len: usize) -> Vec<f64> {
    let mut v = vec![0.0; len];
    match kind {
        Kind::Empty => {}
        Kind::One => {
            if len > 0 {
                v[rng.random_range(0..len)] = value(rng);
            }
        }
        Kind::Full => v.iter_mut().for_each(|x| *x = value(rng)),
        Kind::Runs => {
            let mut k = 0;
            while k < len {
                let run = rng.random_range(1..4).min(len - k);
                let x = if rng.random_bool(0.35) {
                    0.0
                } else {
                    value(rng)
                };
                v[k..k + run].iter_mut().for_each(|y| *y = x);
                k += run;
            }
        }
        Kind::Scattered => {
            let d = rng.random_range(0.2..0.8);
            v.iter_mut().for_each(|x| {
                if rng.random_bool(d) {
                    *x = value(rng)
                }
            });
        }
    }
    v
}

/// Keep only the first stored coordinate of a fiber (SparsePoint).
fn one_point(row: &mut [f64]) {
    if let Some(k) = row.iter().position(|&x| x != 0.0) {
        row[k + 1..].iter_mut().for_each(|x| *x = 0.0);
    }
}

/// Keep only the first run of equal nonzero values of a fiber (SparseInterval).
fn one_run(row: &mut [f64]) {
    if let Some(a) = row.iter().position(|&x| x != 0.0) {
        let x = row[a];
        let z = a + row[a..].iter().take_while(|&&y| y == x).count();
        row[z..].iter_mut().for_each(|y| *y = 0.0);
    }
}

/// Data of `kind` that `format` can hold: levels that keep one coordinate or one run per fiber
/// get the first of them. `rows == 0` means a vector of N.
fn tensor(rng: &mut StdRng, format: &str, rows: usize, kind: Kind) -> Tensor {
    let (shape, row_len) = if rows == 0 {
        (vec![N], N)
    } else {
        (vec![rows, N], N)
    };
    let mut v = raw_values(rng, kind, shape.iter().product());
    // The level a constraint applies to: the inner one (each row) or the outer one (rows).
    let inner = if rows == 0 {
        format
    } else {
        format.split_once('(').map(|x| x.1).unwrap_or("")
    };
    for row in v.chunks_mut(row_len) {
        if inner.starts_with("SparsePoint") {
            one_point(row);
        } else if inner.starts_with("SparseInterval") {
            one_run(row);
        }
    }
    if rows > 0 && format.starts_with("SparsePoint") {
        // One stored row: the first nonzero one.
        let keep = v.chunks(row_len).position(|r| r.iter().any(|&x| x != 0.0));
        for (k, row) in v.chunks_mut(row_len).enumerate() {
            if Some(k) != keep {
                row.iter_mut().for_each(|x| *x = 0.0);
            }
        }
    }
    if rows > 0 && format.starts_with("SparseInterval") {
        // One run of equal rows, starting at the first nonzero one.
        let rows_v: Vec<Vec<f64>> = v.chunks(row_len).map(|r| r.to_vec()).collect();
        let first = rows_v.iter().position(|r| r.iter().any(|&x| x != 0.0));
        for (k, row) in v.chunks_mut(row_len).enumerate() {
            let keep = first.is_some_and(|a| k >= a && rows_v[a..=k].iter().all(|r| *r == rows_v[a]));
            if !keep {
                row.iter_mut().for_each(|x| *x = 0.0);
            }
        }
    }
    Tensor::from_dense(&fmt(format), &shape, &Buffer::F64(v))
        .unwrap_or_else(|e| panic!("{format} {kind:?}: {e}"))
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
                tensors.insert(name.to_string(), tensor(&mut self.rng, f, *rows, kind));
            }
            tensors.insert(
                out.0.to_string(),
                Tensor::empty(&fmt(out.1), &out.2).unwrap(),
            );
            let exp = run_eval(&program, &tensors).unwrap_or_else(|e| panic!("{e}\n{}", describe()));
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
        assert_eq!(hashed, level == "SparseDict", "{level}: y is hashed:\n{code}");
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
