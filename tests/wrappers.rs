//! Wrappers and masks against the reference evaluator: index comparisons (triangles,
//! diagonals, bands, half-planes), offset and toeplitz accesses (`x[i + c]`, `x[i + j]`,
//! `y[i + j] += ...`), permissive accesses with `coalesce`, on every format and protocol.
//!
//! Each case is a random program from one of the families below with random formats and
//! data; values are small integers so every summation order gives the same bits.

mod common;

use common::random::{
    MATRIX_FORMATS, RUN_MATRIX_FORMATS, RUN_VECTOR_FORMATS, VECTOR_FORMATS, pick, random_tensor,
};
use common::{fmt, parse, run_eval, run_jit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::tensor::Tensor;

const PROTOCOLS: &[&str] = &["", "", "gallop", "follow"];

/// `i` or `gallop(i)` ...
fn proto(rng: &mut StdRng, i: &str) -> String {
    match *pick(rng, PROTOCOLS) {
        "" => i.to_string(),
        p => format!("{p}({i})"),
    }
}

/// An index comparison over `i` (outer) and `j` (inner), or a half-plane in one of them.
fn condition(rng: &mut StdRng) -> String {
    let k = rng.random_range(0..3);
    let c = [
        "i <= j".to_string(),
        "i < j".to_string(),
        "i >= j".to_string(),
        "j > i".to_string(),
        "i == j".to_string(),
        "i != j".to_string(),
        format!("j <= i + {k}"),
        format!("i - {k} <= j && j <= i + {k}"),
        format!("j + {k} < i"),
        format!("{k} <= j"),
        format!("j - {k} != i"),
        format!("i <= {k}"),
        "i + 1 == j || j == i".to_string(),
    ];
    pick(rng, &c).clone()
}

struct Case {
    program: String,
    tensors: BTreeMap<String, Tensor>,
}

fn tensor(rng: &mut StdRng, formats: &[&str], shape: &[usize]) -> Tensor {
    let f = fmt(pick::<&str>(rng, formats));
    random_tensor(rng, &f, shape)
}

/// Masked reductions and copies over a matrix.
fn mask_case(rng: &mut StdRng) -> Case {
    let (ni, nj) = (rng.random_range(0..7), rng.random_range(0..7));
    let matrices = [MATRIX_FORMATS, RUN_MATRIX_FORMATS].concat();
    let vectors = [VECTOR_FORMATS, RUN_VECTOR_FORMATS].concat();
    let mut tensors = BTreeMap::new();
    tensors.insert("A".to_string(), tensor(rng, &matrices, &[ni, nj]));
    tensors.insert("B".to_string(), tensor(rng, &matrices, &[ni, nj]));
    tensors.insert("u".to_string(), tensor(rng, &vectors, &[ni]));
    let (pi, pj) = (proto(rng, "i"), proto(rng, "j"));
    let a = format!("A[{pi}, {pj}]");
    let rhs = pick(
        rng,
        &[
            a.clone(),
            format!("{a} * B[i, {pj}]"),
            format!("{a} + u[{pi}]"),
            format!("({a} + 1) * j"),
        ],
    )
    .clone();
    let cond = condition(rng);
    let other = if rng.random_bool(0.3) {
        "\n  else\n    OUT <<max>>= B[i, j]".to_string()
    } else {
        String::new()
    };
    let (out, lhs, shape, formats): (&str, &str, Vec<usize>, &[&str]) = match rng.random_range(0..3)
    {
        0 => ("s", "s[]", vec![], &["Element(0.0)", "SparseScalar(0.0)"]),
        1 => (
            "y",
            "y[i]",
            vec![ni],
            &["Dense(Element(0.0))", "SparseByteMap(Element(0.0))"],
        ),
        _ => (
            "C",
            "C[i, j]",
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
    let op = if out == "C" { "<<max>>=" } else { "+=" };
    let other = other.replace("OUT", lhs);
    let program = format!(
        "{out} .= 0\nfor i = _, j = _\n  if {cond}\n    {lhs} {op} {rhs}{other}\n  end\nend\n"
    );
    let f = fmt(pick::<&str>(rng, formats));
    tensors.insert(out.to_string(), Tensor::empty(&f, &shape).unwrap());
    tensors.retain(|n, _| n == out || program.contains(&format!("{n}[")));
    Case { program, tensors }
}

/// Offsets, toeplitz and permissive accesses over vectors and matrices.
fn offset_case(rng: &mut StdRng) -> Case {
    let (n, m) = (rng.random_range(0..8), rng.random_range(1..4));
    let k: i64 = rng.random_range(-3..4);
    let vectors = [VECTOR_FORMATS, RUN_VECTOR_FORMATS].concat();
    let matrices = [MATRIX_FORMATS, RUN_MATRIX_FORMATS].concat();
    let outs = [
        "Dense(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseDict(Element(0.0))",
    ];
    let mut tensors = BTreeMap::new();
    tensors.insert("x".to_string(), tensor(rng, &vectors, &[n]));
    tensors.insert("w".to_string(), tensor(rng, &vectors, &[m]));
    let pad = rng.random_range(0..3);
    let mut p = |e: &str| proto(rng, e);
    let (pi, pj, pk, pij, pk1, pik) = (
        p("i"),
        p("j"),
        p(&format!("(i + {k})")),
        p("(i + j)"),
        p("(i + 1)"),
        p(&format!("(j + {k})")),
    );
    let pl = p(&format!("(i - {})", k.unsigned_abs()));
    let (program, out, shape) = match rng.random_range(0..8) {
        0 => (
            format!("y .= 0\nfor i = _\n  y[i] += coalesce(x[~{pk}], {pad})\nend\n"),
            "y",
            vec![n],
        ),
        1 => (
            format!("y .= 0\nfor i = _, j = _\n  y[i] += coalesce(x[~{pij}], {pad}) * w[j]\nend\n"),
            "y",
            vec![n],
        ),
        2 => (
            format!("y .= 0\nfor i = _, j = _\n  y[i + j] += x[{pi}] * w[{pj}]\nend\n"),
            "y",
            vec![n + m - 1],
        ),
        3 => {
            let k = k.unsigned_abs() as usize;
            (
                format!(
                    "y .= 0\nfor i = {k}:size(x, 0) - 1\n  y[i - {k}] += x[i] * x[{pl}]\nend\n"
                ),
                "y",
                vec![n],
            )
        }
        4 => (
            format!("y .= 0\nfor i = _\n  y[~(i + {k})] += x[{pi}]\nend\n"),
            "y",
            vec![n],
        ),
        5 => {
            tensors.insert("A".to_string(), tensor(rng, &matrices, &[n, m]));
            (
                format!(
                    "C .= 0\nfor i = _, j = _\n  C[i, j] = coalesce(A[~(i - 1), {pj}], {pad}) * coalesce(A[{pi}, ~{pik}], 1) + A[i, j]\nend\n"
                ),
                "C",
                vec![n, m],
            )
        }
        6 => {
            // Erosion by a 3x3 cross in two separable passes, with a true border.
            let img = [
                "Dense(Dense(Element(false)))",
                "Dense(RunList(Element(false)))",
                "Dense(SparseRunList(Pattern()))",
                "Dense(SparseList(Pattern()))",
                "SparseList(SparseRunList(Pattern()))",
            ];
            let f = fmt(pick::<&str>(rng, &img));
            let data: Vec<f64> = (0..n * m)
                .map(|_| if rng.random_bool(0.7) { 1.0 } else { 0.0 })
                .collect();
            let t = Tensor::from_dense(
                &fmt("Dense(Dense(Element(0.0)))"),
                &[n, m],
                &tessera::runtime::Buffer::F64(data),
            )
            .unwrap();
            tensors.insert("A".to_string(), t.to_format(&f).unwrap());
            let tf = *pick(
                rng,
                &[
                    "Dense(Element(false))",
                    "RunList(Element(false))",
                    "SparseRunList(Pattern(), merge=false)",
                ],
            );
            tensors.insert("t".to_string(), Tensor::empty(&fmt(tf), &[m]).unwrap());
            (
                "C .= false\nfor i = _\n  t .= false\n  for j = _\n    t[j] = coalesce(A[~(i - 1), j], true) & A[i, j] & coalesce(A[~(i + 1), j], true)\n  end\n  for j = _\n    C[i, j] = coalesce(t[~(j - 1)], true) & t[j] & coalesce(t[~(j + 1)], true)\n  end\nend\n".to_string(),
                "C",
                vec![n, m],
            )
        }
        _ => {
            // A non-permissive offset out of bounds: an error on both sides (unless empty).
            (
                format!("y .= 0\nfor i = _\n  y[i] += x[{pk1}]\nend\n"),
                "y",
                vec![n],
            )
        }
    };
    let of = if out == "C" {
        if program.contains("false") {
            *pick(
                rng,
                &[
                    "Dense(Dense(Element(false)))",
                    "Dense(RunList(Element(false)))",
                    "Dense(SparseRunList(Pattern()))",
                ],
            )
        } else {
            *pick(
                rng,
                &[
                    "Dense(Dense(Element(0.0)))",
                    "Dense(SparseList(Element(0.0)))",
                ],
            )
        }
    } else {
        *pick(rng, &outs)
    };
    tensors.insert(out.to_string(), Tensor::empty(&fmt(of), &shape).unwrap());
    tensors.retain(|name, _| name == out || program.contains(&format!("{name}[")));
    Case {
        program: program.to_string(),
        tensors,
    }
}

/// Kernels refused as too large (several permissive reads of sparse operands in one
/// statement multiply their phases): allowed, but they must stay rare.
static TOO_LARGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn check(seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let case = if rng.random_bool(0.5) {
        mask_case(&mut rng)
    } else {
        offset_case(&mut rng)
    };
    let describe = || {
        let fs: Vec<String> = case
            .tensors
            .iter()
            .map(|(n, t)| format!("{n}: {} {:?}", t.format, t.shape))
            .collect();
        format!("seed {seed}\n{}{}", case.program, fs.join("\n"))
    };
    let program = parse(&case.program);
    let expected = run_eval(&program, &case.tensors);
    let mut tensors = case.tensors.clone();
    match (expected, run_jit(&program, &mut tensors)) {
        (Ok(exp), Ok(())) => {
            for (n, t) in &tensors {
                if t.to_dense() != exp[n] {
                    return Err(format!(
                        "tensor {n} differs: {:?} != {:?}\n{}",
                        t.to_dense(),
                        exp[n],
                        describe()
                    ));
                }
                t.validate(n).map_err(|e| format!("{e}\n{}", describe()))?;
            }
            Ok(())
        }
        (Err(_), Err(_)) => Ok(()),
        (Ok(_), Err(tessera::Error::Unsupported { .. })) => {
            TOO_LARGE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        (Ok(_), Err(e)) => Err(format!("compiled run failed: {e}\n{}", describe())),
        (Err(e), Ok(())) => Err(format!(
            "evaluator failed ({e}) but kernel ran\n{}",
            describe()
        )),
    }
}

/// A fixed set of cases on CI; `TESSERA_DIFF_CASES=N` searches N fresh ones.
#[test]
fn wrappers_match_evaluator() {
    let fresh: Option<u64> = std::env::var("TESSERA_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    let (base, cases) = match fresh {
        Some(n) => (rand::random::<u64>(), n),
        None => (0x5eed, 300),
    };
    let mut failures = vec![];
    for k in 0..cases {
        if let Err(e) = check(base.wrapping_add(k)) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed; first:\n{}",
        failures.len(),
        failures[0]
    );
    let large = TOO_LARGE.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        large * 20 < cases as usize,
        "{large} of {cases} kernels were refused as too large"
    );
}
