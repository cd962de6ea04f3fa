//! Differential property tests: random programs × random formats × random data; the compiled
//! kernel must give exactly what the dense reference evaluator gives.
//!
//! Values are small integers stored as floats, so every summation order gives the same bits.

mod common;

use common::{fmt, parse, run_eval, run_jit};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::tensor::{Tensor, random_sparse};

const MATRIX_FORMATS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "Dense(SparseList(Pattern()))",
    "Dense(SparseList(Element(1.0)))",
    "Dense(Dense(Element(0)))",
    "SparseList(SparseList(Element(0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseCOO{1}(Element(0.0)))",
    "SparseCOO{2}(Pattern())",
    "Dense(SparseBand(Element(0.0)))",
    "Dense(SparseBlockList(Element(0.0)))",
    "Dense(SparsePoint(Element(0.0)))",
    "SparseBand(SparseList(Element(0.0)))",
    "SparseList(SparseBlockList(Element(1.0)))",
    "SparseBlockList(SparseBand(Element(0)))",
    "SparsePoint(Dense(Element(0.0)))",
    "SparseBand(SparsePoint(Element(0.0)))",
    "SparseBlockList(SparseCOO{1}(Pattern()))",
    "SparseList(SparseBand(Element(2.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "SparseByteMap(SparseList(Element(0.0)))",
    "SparseList(SparseByteMap(Element(1.0)))",
    "Dense(SparseDict(Element(0.0)))",
    "SparseDict(SparseDict(Element(0.0)))",
    "SparseDict(Dense(Element(2.0)))",
];

const VECTOR_FORMATS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseList(Pattern())",
    "SparseList(Element(2.0))",
    "Dense(Element(0))",
    "SparseList(Element(0))",
    "SparseCOO{1}(Element(0.0))",
    "SparseBand(Element(0.0))",
    "SparseBlockList(Element(0.0))",
    "SparseBlockList(Pattern())",
    "SparsePoint(Element(0.0))",
    "SparsePoint(Pattern())",
    "SparseBand(Element(2.0))",
    "SparseByteMap(Element(0.0))",
    "SparseByteMap(Pattern())",
    "SparseDict(Element(0.0))",
    "SparseDict(Element(0))",
];

/// A random tensor of the format; levels that hold one coordinate per fiber (SparsePoint)
/// keep the first entry of each fiber, so any format can be drawn.
fn random_tensor(f: &Format, shape: &[usize], density: f64, seed: u64) -> Tensor {
    let text = f.to_string();
    if !text.contains("SparsePoint") {
        return random_sparse(f, shape, density, seed).expect("random tensor");
    }
    let loose = fmt(&text.replace("SparsePoint", "SparseList"));
    let t = random_sparse(&loose, shape, density, seed).expect("random tensor");
    // The dimensions a SparsePoint level indexes, found by level rank.
    let mut point_dims = vec![];
    let mut d = 0;
    for l in &f.levels {
        if *l == tessera::levels::LevelKind::SparsePoint {
            point_dims.push(d);
        }
        d += l.rank();
    }
    let mut chosen: std::collections::HashMap<(usize, Vec<usize>), usize> = Default::default();
    let mut coords = vec![vec![]; shape.len()];
    let mut vals = tessera::runtime::Buffer::new(f.elem());
    t.for_each_stored(&mut |c, v| {
        let fits = point_dims
            .iter()
            .all(|&d| *chosen.entry((d, c[..d].to_vec())).or_insert(c[d]) == c[d]);
        if fits {
            for (k, &x) in c.iter().enumerate() {
                coords[k].push(x as i64);
            }
            vals.push(v);
        }
    });
    Tensor::from_coo(f, shape, &coords, &vals, |a, _| a).expect("random tensor")
}

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

/// A random expression over the loop indices `i`, `j`.
fn expr(rng: &mut StdRng, depth: u32, square: bool) -> String {
    if depth == 0 || rng.random_bool(0.3) {
        let mut leaves = vec![
            "A[i, j]",
            "B[i, j]",
            "u[i]",
            "v[j]",
            "1",
            "2",
            "0",
            "i",
            "j",
            "A[i, gallop(j)]",
            "v[gallop(j)]",
            "A[i, follow(j)]",
            "v[follow(j)]",
        ];
        if square {
            leaves.push("T[j, i]");
        }
        return pick(rng, &leaves).to_string();
    }
    let a = expr(rng, depth - 1, square);
    let b = expr(rng, depth - 1, square);
    match rng.random_range(0..7) {
        0 => format!("({a} + {b})"),
        1 => format!("({a} - {b})"),
        2 | 3 => format!("({a} * {b})"),
        4 => format!("min({a}, {b})"),
        5 => format!("max({a}, {b})"),
        _ => format!(
            "ifelse({} <= {}, {a}, {b})",
            expr(rng, 0, square),
            expr(rng, 0, square)
        ),
    }
}

struct Case {
    program: String,
    tensors: BTreeMap<String, Tensor>,
}

fn random_case(seed: u64) -> Case {
    let mut rng = StdRng::seed_from_u64(seed);
    let ni = rng.random_range(0..6);
    let nj = if rng.random_bool(0.5) {
        ni
    } else {
        rng.random_range(0..6)
    };
    let square = ni == nj;
    let order = if rng.random_bool(0.7) {
        "i = _, j = _"
    } else {
        "j = _, i = _"
    };
    let rhs = expr(&mut rng, 2, square);
    let (out, lhs, out_shape, out_formats): (&str, &str, Vec<usize>, &[&str]) =
        match rng.random_range(0..4) {
            0 => (
                "s",
                "s[]",
                vec![],
                &[
                    "Element(0.0)",
                    "Element(0)",
                    "SparseScalar(0.0)",
                    "ShortCircuitScalar(0.0)",
                    "SparseShortCircuitScalar(0)",
                ],
            ),
            1 => (
                "y",
                "y[i]",
                vec![ni],
                &[
                    "Dense(Element(0.0))",
                    "SparseByteMap(Element(0.0))",
                    "SparseDict(Element(0.0))",
                ],
            ),
            2 => (
                "w",
                "w[j]",
                vec![nj],
                &[
                    "Dense(Element(0.0))",
                    "Dense(Element(0))",
                    "SparseByteMap(Element(0.0))",
                    "SparseDict(Element(0))",
                ],
            ),
            _ => (
                "C",
                "C[i, j]",
                vec![ni, nj],
                &[
                    "Dense(Dense(Element(0.0)))",
                    "Dense(SparseByteMap(Element(0.0)))",
                    "SparseByteMap(SparseByteMap(Element(0.0)))",
                    "SparseDict(SparseDict(Element(0.0)))",
                    "Dense(SparseDict(Element(0.0)))",
                ],
            ),
        };
    let op = if out == "C" && rng.random_bool(0.4) {
        "="
    } else {
        *pick(&mut rng, &["+=", "+=", "<<max>>=", "<<min>>="])
    };
    let init = if op == "*=" { "1" } else { "0" };
    let mut stmt = format!("{lhs} {op} {rhs}");
    match rng.random_range(0..5) {
        0 => stmt = format!("if i <= j\n    {stmt}\n  end"),
        1 => stmt = format!("if i != j\n    {stmt}\n  end"),
        2 => stmt = format!("let t = {}\n    {stmt}\n  end", expr(&mut rng, 1, square)),
        _ => {}
    }
    let program = format!("{out} .= {init}\nfor {order}\n  {stmt}\nend\n");

    let mut tensors = BTreeMap::new();
    let mut add = |rng: &mut StdRng, name: &str, formats: &[&str], shape: Vec<usize>| {
        let f = fmt(pick::<&str>(rng, formats));
        let density = rng.random_range(0.0..1.0);
        let t = random_tensor(&f, &shape, density, rng.random());
        tensors.insert(name.to_string(), t);
    };
    add(&mut rng, "A", MATRIX_FORMATS, vec![ni, nj]);
    add(&mut rng, "B", MATRIX_FORMATS, vec![ni, nj]);
    add(&mut rng, "T", MATRIX_FORMATS, vec![nj, ni]);
    add(&mut rng, "u", VECTOR_FORMATS, vec![ni]);
    add(&mut rng, "v", VECTOR_FORMATS, vec![nj]);
    let of = fmt(pick::<&str>(&mut rng, out_formats));
    tensors.insert(
        out.to_string(),
        Tensor::empty(&of, &out_shape).expect("output"),
    );
    // Only tensors the program mentions take part.
    tensors.retain(|n, _| n == out || program.contains(&format!("{n}[")));
    Case { program, tensors }
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let case = random_case(seed);
    let program = parse(&case.program);
    let expected = run_eval(&program, &case.tensors);
    let mut tensors = case.tensors.clone();
    let got = run_jit(&program, &mut tensors);
    let describe = || {
        let fs: Vec<String> = case
            .tensors
            .iter()
            .map(|(n, t)| format!("{n}: {} {:?}", t.format, t.shape))
            .collect();
        format!("seed {seed}\n{}\n{}", case.program, fs.join("\n"))
    };
    match (expected, got) {
        (Ok(exp), Ok(())) => {
            for (n, t) in &tensors {
                prop_assert_eq!(
                    &t.to_dense(),
                    &exp[n],
                    "tensor {} differs\n{}",
                    n,
                    describe()
                );
                t.validate(n)
                    .map_err(|e| TestCaseError::fail(format!("{e}\n{}", describe())))?;
            }
        }
        (Err(_), Err(_)) => {
            BOTH_FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (Ok(_), Err(tessera::Error::Unsupported { .. })) => {
            TOO_LARGE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (Ok(_), Err(e)) => prop_assert!(false, "compiled run failed: {}\n{}", e, describe()),
        (Err(e), Ok(())) => prop_assert!(
            false,
            "evaluator failed but kernel ran: {}\n{}",
            e,
            describe()
        ),
    }
    Ok(())
}

/// Cases the compiler refused as too large, and cases both sides rejected (e.g. a
/// dimension mismatch): allowed, but they must stay rare or the test proves little.
static TOO_LARGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static BOTH_FAILED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const CASES: u32 = 300;

/// CI runs a fixed set of cases so a result never depends on the day's luck; set
/// `TESSERA_DIFF_CASES=N` to search N fresh random cases instead (failures print their seed,
/// which then joins `past_failures_stay_fixed`).
#[test]
fn compiled_matches_evaluator() {
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    let fresh: Option<u32> = std::env::var("TESSERA_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    let cases = fresh.unwrap_or(CASES);
    let config = ProptestConfig::with_cases(cases);
    let mut runner = match fresh {
        Some(_) => TestRunner::new(config),
        None => TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha)),
    };
    runner.run(&any::<u64>(), check).unwrap();
    let (large, both) = (
        TOO_LARGE.load(std::sync::atomic::Ordering::Relaxed),
        BOTH_FAILED.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(
        large * 10 < cases as usize,
        "{large} of {cases} kernels were refused as too large"
    );
    assert!(
        both * 4 < cases as usize,
        "{both} of {cases} programs were rejected by both sides"
    );
}

/// Sparse outputs: the same computations written into sparse levels in concordant order.
#[test]
fn sparse_outputs_match_evaluator() {
    let programs = [
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
    ];
    let mut rng = StdRng::seed_from_u64(7);
    for (text, out, b_format) in programs {
        for _ in 0..40 {
            let (ni, nj) = (rng.random_range(0..7), rng.random_range(0..7));
            let mut tensors = BTreeMap::new();
            for name in ["A", "B"] {
                let mut f: Format = fmt(pick::<&str>(&mut rng, MATRIX_FORMATS));
                if let (Some(b), "B") = (b_format, name) {
                    // Outputs that hold one entry per fiber get an operand that has one.
                    f = fmt(b);
                }
                tensors.insert(
                    name.to_string(),
                    random_tensor(&f, &[ni, nj], rng.random_range(0.0..1.0), rng.random()),
                );
            }
            tensors.insert(
                "C".to_string(),
                Tensor::empty(&fmt(out), &[ni, nj]).unwrap(),
            );
            let program = parse(text);
            let exp = run_eval(&program, &tensors).unwrap();
            run_jit(&program, &mut tensors).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(
                tensors["C"].to_dense(),
                exp["C"],
                "{text} A: {} B: {}",
                tensors["A"].format,
                tensors["B"].format
            );
            tensors["C"].validate("C").unwrap();
        }
    }
}

/// Seeds that once failed, kept so the bugs they found stay fixed.
const PAST_FAILURES: &[u64] = &[
    // A galloping walk moved its jumper past the chunk, and the advance test then read the
    // entry after the fiber's last one.
    6186068451744910990,
];

#[test]
fn past_failures_stay_fixed() {
    for &seed in PAST_FAILURES {
        check(seed).unwrap();
    }
}
