//! Random products of δ, ε and tensors (issue 15): the EIN normal form is a fixed point that
//! parses back, and the program, its normal form and its lowering all compute what brute force
//! over every index assignment computes.

mod common;

use common::cases::config;
use common::{fmt, formats_of, parse};
use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::ein;

const NAMES: [&str; 4] = ["i", "j", "k", "l"];

#[derive(Clone, Debug)]
enum F {
    Eps([usize; 3]),
    Delta([usize; 2]),
    A(usize),
    B(usize),
    S([usize; 2]),
}

fn factor_s() -> impl Strategy<Value = F> {
    let ix = || 0..NAMES.len();
    prop_oneof![
        [ix(), ix(), ix()].prop_map(F::Eps),
        [ix(), ix()].prop_map(F::Delta),
        ix().prop_map(F::A),
        ix().prop_map(F::B),
        [ix(), ix()].prop_map(F::S),
    ]
}

fn text(f: &F) -> String {
    let n = |k: &usize| NAMES[*k];
    match f {
        F::Eps(x) => format!("eps[{}, {}, {}]", n(&x[0]), n(&x[1]), n(&x[2])),
        F::Delta(x) => format!("delta[{}, {}]", n(&x[0]), n(&x[1])),
        F::A(x) => format!("a[{}]", n(x)),
        F::B(x) => format!("b[{}]", n(x)),
        F::S(x) => format!("S[{}, {}]", n(&x[0]), n(&x[1])),
    }
}

const A: [f64; 3] = [0.5, -1.25, 2.0];
const B: [f64; 3] = [1.5, 0.75, -0.5];
const S: [f64; 9] = [1.0, 2.0, -1.0, 0.5, -3.0, 0.25, 4.0, -0.5, 1.5];

fn value(f: &F, v: &[usize]) -> f64 {
    match f {
        F::Eps(x) => {
            let (p, q, r) = (v[x[0]], v[x[1]], v[x[2]]);
            if p == q || q == r || p == r {
                0.0
            } else if (p + 1) % 3 == q {
                1.0
            } else {
                -1.0
            }
        }
        F::Delta(x) => f64::from(u8::from(v[x[0]] == v[x[1]])),
        F::A(x) => A[v[*x]],
        F::B(x) => B[v[*x]],
        F::S(x) => S[3 * v[x[0]] + v[x[1]]],
    }
}

fn tensor(shape: &[usize], values: Vec<f64>) -> Tensor {
    let f = format!(
        "{}Element(0.0){}",
        "Dense(".repeat(shape.len()),
        ")".repeat(shape.len())
    );
    Tensor::from_dense(&fmt(&f), shape, &Buffer::F64(values.into())).unwrap()
}

fn case_s() -> impl Strategy<Value = (Vec<F>, Vec<F>, Vec<bool>)> {
    (
        prop::collection::vec(factor_s(), 1..5),
        prop::collection::vec(factor_s(), 0..3),
        prop::collection::vec(any::<bool>(), NAMES.len()),
    )
}

proptest! {
    #![proptest_config(config("ein_props", 48))]
    #[test]
    fn normal_form_is_a_fixed_point_and_keeps_values((p1, p2, free) in case_s()) {
        // Every loop has a range, so δ is always sized; `free` picks the left side's indices.
        let free: Vec<usize> = (0..NAMES.len()).filter(|&k| free[k]).collect();
        let product = |fs: &[F]| fs.iter().map(text).collect::<Vec<_>>().join(" * ");
        let rhs = if p2.is_empty() {
            product(&p1)
        } else {
            format!("{} - 2 * {}", product(&p1), product(&p2))
        };
        let lhs: Vec<&str> = free.iter().map(|&k| NAMES[k]).collect();
        let loops: Vec<String> = NAMES.iter().map(|n| format!("{n} = 0:2")).collect();
        let src = format!(
            "for {}\n  r[{}] += {rhs}\nend\n",
            loops.join(", "),
            lhs.join(", ")
        );
        let p = parse(&src);
        let normal = ein::normalize(&p).unwrap();
        prop_assert_eq!(&ein::normalize(&normal).unwrap(), &normal, "{}", src);
        prop_assert_eq!(&parse(&normal.to_string()), &normal);
        let lowered = ein::lower(&p).unwrap();
        prop_assert!(!ein::uses_ein(&lowered));
        // Brute force over all 81 assignments.
        let shape = vec![3usize; free.len()];
        let mut want = vec![0.0; 3usize.pow(free.len() as u32)];
        for code in 0..81usize {
            let v: Vec<usize> = (0..4).map(|d| (code / 3usize.pow(d as u32)) % 3).collect();
            let prod = |fs: &[F]| fs.iter().map(|f| value(f, &v)).product::<f64>();
            let mut x = prod(&p1);
            if !p2.is_empty() {
                x -= 2.0 * prod(&p2);
            }
            let at = free.iter().fold(0, |acc, &k| 3 * acc + v[k]);
            want[at] += x;
        }
        let mut ts = BTreeMap::new();
        ts.insert("a".to_string(), tensor(&[3], A.to_vec()));
        ts.insert("b".to_string(), tensor(&[3], B.to_vec()));
        ts.insert("S".to_string(), tensor(&[3, 3], S.to_vec()));
        ts.insert("r".to_string(), tensor(&shape, vec![0.0; want.len()]));
        for program in [&p, &normal] {
            // Only the tensors the program still reads (the normal form may drop some).
            let (reads, _) = tessera::notation::visit::reads_writes(&program.body);
            let mut mine: BTreeMap<String, Tensor> = ts
                .iter()
                .filter(|(n, _)| *n == "r" || reads.contains(n))
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect();
            // The evaluator starts from the same zeros as the kernel.
            let fresh = mine.clone();
            let runner = Runner::jit();
            let k = runner.compile(program, &formats_of(&mine)).unwrap();
            runner.execute(&k, &mut mine).unwrap();
            let got = mine["r"].to_dense();
            let got = got.as_f64().unwrap();
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((g - w).abs() < 1e-9, "{} vs {}\n{}\n{}", g, w, src, program);
            }
            let ev = tessera::tensor::evaluate(program, &fresh).unwrap();
            let got = ev["r"].as_f64().unwrap().to_vec();
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((g - w).abs() < 1e-9, "eval {} vs {}\n{}", g, w, src);
            }
        }
    }
}
