//! 4-byte indices (`coord=i32`, issue 18): every kernel over levels storing 4-byte coordinates
//! and positions gives what the same kernel over 8-byte levels gives, and what the reference
//! evaluator gives, on the JIT, the C backend and the evaluator; the arrays really are 4 bytes;
//! formats print and parse back; conversion goes both ways; and a dimension or count beyond
//! `i32::MAX` is a typed error, never a wrap.

mod common;

use common::cases::c_runner;
use common::random::random_tensor;
use common::{fmt, formats_of, parse, run_eval};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use tessera::error::Error;
use tessera::levels::format::Coord;
use tessera::levels::{Format, LevelKind};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Matrix formats over levels that take `coord=`, written with `{c}` for the coordinate type.
const MATRIX: &[&str] = &[
    "Dense(SparseList(Element(0.0){c}))",
    "SparseList(SparseList(Element(0.0){c}){c})",
    "Dense(SparsePoint(Element(0.0){c}))",
    "Dense(SparseRunList(Element(0.0){c}))",
    "Dense(SparseInterval(Element(0.0){c}))",
    "SparseList(Dense(Element(0.0)){c})",
];

fn with(template: &str, coord: Coord) -> Format {
    let c = match coord {
        Coord::I64 => String::new(),
        c => format!(", coord={}", c.name()),
    };
    fmt(&template.replace("{c}", &c))
}

/// A matrix whose stored structure suits every format above: one run of equal values per
/// row (so SparsePoint and SparseInterval hold it) with some empty rows.
fn matrix(f: &Format, m: usize, n: usize, seed: u64) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..m {
        let k = (i as u64 * 7 + seed) % 5;
        if k == 0 {
            continue;
        }
        let j = (i * 3 + seed as usize) % n;
        coords[0].push(i as i64);
        coords[1].push(j as i64);
        vals.push(k as f64);
    }
    Tensor::from_coo(f, &[m, n], &coords, &Buffer::F64(vals.into()), |a, _| a).unwrap()
}

fn vector(values: &[f64]) -> Tensor {
    Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[values.len()],
        &Buffer::F64(values.to_vec().into()),
    )
    .unwrap()
}

fn runners() -> Vec<(&'static str, Runner)> {
    let mut out = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("coord32") {
        out.push(("c", c));
    }
    out
}

/// Run `program` on every runner; each tensor must equal the evaluator's result.
fn agree_all(program: &str, tensors: &BTreeMap<String, Tensor>) -> BTreeMap<String, Buffer> {
    let p = parse(program);
    let want = run_eval(&p, tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        let mut got = tensors.clone();
        let c = runner
            .compile(&p, &formats_of(&got))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        runner
            .execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        for (n, t) in &got {
            t.validate(n).unwrap();
            assert_eq!(t.to_dense(), want[n], "{name}: {n} in\n{program}");
        }
    }
    want
}

#[test]
fn i32_levels_store_four_byte_arrays() {
    let a = matrix(&with(MATRIX[0], Coord::I32), 6, 5, 1);
    assert_eq!(a.levels[1][0].elem().to_string(), "i32", "ptr");
    assert_eq!(a.levels[1][1].elem().to_string(), "i32", "idx");
    let b = matrix(&with(MATRIX[0], Coord::I64), 6, 5, 1);
    assert_eq!(b.levels[1][1].elem().to_string(), "i64");
    assert_eq!(a.to_dense(), b.to_dense());
}

#[test]
fn formats_print_and_parse_back() {
    for t in MATRIX {
        let f = with(t, Coord::I32);
        assert!(f.to_string().contains("coord=i32"), "{f}");
        assert_eq!(Format::parse(&f.to_string(), None).unwrap(), f);
        assert!(f.levels.iter().any(|l| l.coord() == Coord::I32));
    }
    let err = Format::parse("Dense(SparseList(Element(0.0), coord=i16))", None).unwrap_err();
    assert!(err.to_string().contains("i64, i32 or f64"), "{err}");
}

#[test]
fn spmv_and_products_equal_i64_and_evaluator_on_every_backend() {
    let spmv = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend";
    let scale = "B .= 0\nfor i = _, j = _\n  B[i, j] = A[i, j] * 2\nend";
    let rowsum = "s .= 0\nfor i = _, j = _\n  s[j] += A[i, j]\nend";
    for t in MATRIX {
        let mut results = vec![];
        for coord in [Coord::I64, Coord::I32] {
            let f = with(t, coord);
            let a = matrix(&f, 9, 7, 3);
            let x = vector(&(0..7).map(|k| k as f64 - 2.5).collect::<Vec<_>>());
            let mut ts = BTreeMap::new();
            ts.insert("A".to_string(), a.clone());
            ts.insert("x".to_string(), x);
            ts.insert(
                "y".to_string(),
                Tensor::empty(&fmt("Dense(Element(0.0))"), &[9]).unwrap(),
            );
            let y = agree_all(spmv, &ts)["y"].clone();
            // An output in the same format: written (narrowed) by the kernel.
            let mut ts = BTreeMap::new();
            ts.insert("A".to_string(), a.clone());
            ts.insert("B".to_string(), Tensor::empty(&f, &[9, 7]).unwrap());
            let b = agree_all(scale, &ts)["B"].clone();
            let mut ts = BTreeMap::new();
            ts.insert("A".to_string(), a);
            ts.insert(
                "s".to_string(),
                Tensor::empty(&fmt("Dense(Element(0.0))"), &[7]).unwrap(),
            );
            let s = agree_all(rowsum, &ts)["s"].clone();
            results.push((y, b, s));
        }
        assert_eq!(results[0], results[1], "{t}: i32 differs from i64");
    }
}

#[test]
fn random_data_in_i32_vector_formats_agrees() {
    let mut rng = StdRng::seed_from_u64(18);
    let formats = [
        "SparseList(Element(0.0), coord=i32)",
        "SparseRunList(Element(0.0), coord=i32)",
        "SparseRunList(Element(0.0), merge=false, coord=i32)",
    ];
    for a in formats {
        for b in formats {
            let mut ts = BTreeMap::new();
            ts.insert("a".to_string(), random_tensor(&mut rng, &fmt(a), &[23]));
            ts.insert("b".to_string(), random_tensor(&mut rng, &fmt(b), &[23]));
            ts.insert("z".to_string(), Tensor::empty(&fmt(a), &[23]).unwrap());
            agree_all("z .= 0\nfor i = _\n  z[i] = a[i] * b[i] + a[i]\nend", &ts);
        }
    }
}

#[test]
fn conversion_between_i32_and_i64_formats() {
    for t in MATRIX {
        let a64 = matrix(&with(t, Coord::I64), 8, 6, 2);
        let a32 = a64.to_format(&with(t, Coord::I32)).unwrap();
        assert_eq!(a32.format, with(t, Coord::I32));
        a32.validate("a32").unwrap();
        assert_eq!(a32.to_dense(), a64.to_dense(), "{t}");
        let back = a32.to_format(&with(t, Coord::I64)).unwrap();
        assert_eq!(back, a64, "{t}");
    }
}

#[test]
fn a_dimension_beyond_i32_is_a_typed_error() {
    let f = fmt("SparseList(Element(0.0), coord=i32)");
    let big = i32::MAX as usize + 1;
    match Tensor::empty(&f, &[big]) {
        Err(Error::Format { msg, .. }) => assert!(msg.contains("coord=i32"), "{msg}"),
        other => panic!("expected a format error, got {other:?}"),
    }
    let coords = vec![vec![big as i64 - 1]];
    assert!(matches!(
        Tensor::from_coo(
            &f,
            &[big],
            &coords,
            &Buffer::F64(vec![1.0].into()),
            |a, _| a
        ),
        Err(Error::Format { .. })
    ));
    // The 8-byte level holds it.
    assert!(Tensor::empty(&fmt("SparseList(Element(0.0))"), &[big]).is_ok());
}

#[test]
fn every_level_taking_coord_takes_i32() {
    use tessera::levels::registry::{LEVELS, Param, Role};
    for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
        let kinds = spec.variants(1, &[]);
        let takes = spec.params.contains(&Param::Coord);
        assert_eq!(
            kinds.iter().any(|k| k.coord() == Coord::I32),
            takes,
            "{}",
            spec.name
        );
        for k in kinds.into_iter().filter(|k| k.coord() == Coord::I32) {
            let f = Format::new(vec![
                k,
                LevelKind::Element(tessera::types::Scalar::F64(0.0)),
            ])
            .unwrap();
            let t =
                Tensor::from_dense(&f, &[5], &Buffer::F64(vec![0.0, 0.0, 2.0, 0.0, 0.0].into()))
                    .unwrap();
            assert!(
                t.levels[0].iter().all(|b| b.elem().to_string() == "i32"),
                "{f}: {:?}",
                t.levels[0]
            );
        }
    }
}
