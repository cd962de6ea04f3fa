//! Walks over a run-length mask's runs (`backend::walked`): the row's `while` over run
//! positions `q` is emitted twice on the JIT and C, once without the checks of
//! `right[q]`/`left[q]` behind one test before the walk (`q >= 0`, `q_stop <= len`), and the
//! checked walk otherwise. Results must be bit-identical to the reference evaluator for every
//! mask format and shape of runs (empty rows, runs of one pixel, runs touching both edges,
//! full rows), and a mask whose shape differs from the image's must fail as the evaluator
//! does.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const MASKED_HISTOGRAM: &str = include_str!("../examples/masked_histogram.tess");
const MASKED_SUM: &str =
    "s .= 0\nfor y = _, x = _\n  if mask[y, x]\n    s[] += img[y, x] * (x + 1)\n  end\nend\n";

const MASKS: &[&str] = &[
    "Dense(SparseRunList(Pattern()))",
    "Dense(RunList(Element(false)))",
    "Dense(SparseList(Pattern()))",
    "Dense(Dense(Element(false)))",
];

/// Masks of `h x w` pixels with the run shapes the walk must get right.
fn masks(h: usize, w: usize) -> Vec<(&'static str, Vec<bool>)> {
    let at = |f: &dyn Fn(usize, usize) -> bool| -> Vec<bool> {
        (0..h * w).map(|p| f(p / w, p % w)).collect()
    };
    vec![
        ("empty", vec![false; h * w]),
        ("full", vec![true; h * w]),
        // Runs of one pixel, the first and last columns included.
        ("single pixels", at(&|_, x| x % 2 == 0 || x + 1 == w)),
        // Runs touching both edges with a gap inside; every other row empty.
        ("edges", at(&|y, x| y % 2 == 0 && (x < 2 || x + 2 >= w))),
        // Irregular runs, some rows empty.
        (
            "irregular",
            at(&|y, x| y % 3 != 1 && (x * 7 + y * 3) % 5 < 2),
        ),
    ]
}

fn tensors(
    program: &str,
    mask_format: &str,
    pixels: &[bool],
    (h, w): (usize, usize),
    img_shape: (usize, usize),
) -> BTreeMap<String, Tensor> {
    let (ih, iw) = img_shape;
    let gray: Vec<u8> = (0..ih * iw).map(|p| (p * 53 % 256) as u8).collect();
    let img = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0x00)))"),
        &[ih, iw],
        &Buffer::U8(gray.into()),
    )
    .unwrap();
    let mask =
        Tensor::from_dense(&fmt(mask_format), &[h, w], &Buffer::Bool(pixels.into())).unwrap();
    let out = if program == MASKED_SUM {
        ("s", Tensor::empty(&fmt("Element(0)"), &[]).unwrap())
    } else {
        (
            "bins",
            Tensor::empty(&fmt("Dense(Element(0))"), &[16]).unwrap(),
        )
    };
    BTreeMap::from([
        ("img".to_string(), img),
        ("mask".to_string(), mask),
        (out.0.to_string(), out.1),
    ])
}

#[test]
fn walks_agree_with_the_evaluator() {
    for program in [MASKED_HISTOGRAM, MASKED_SUM] {
        let p = parse(program);
        let out = if program == MASKED_SUM { "s" } else { "bins" };
        for shape in [(1, 1), (3, 1), (1, 9), (6, 13)] {
            for (what, pixels) in masks(shape.0, shape.1) {
                for mask in MASKS {
                    let t = tensors(program, mask, &pixels, shape, shape);
                    let want = run_eval(&p, &t).unwrap_or_else(|e| panic!("{e}\n{program}"));
                    for (name, runner) in runners() {
                        let mut got = t.clone();
                        let c = runner.compile(&p, &formats_of(&got)).unwrap();
                        runner
                            .execute(&c, &mut got)
                            .unwrap_or_else(|e| panic!("{name}, {mask}, {what}: {e}"));
                        assert_eq!(
                            got[out].to_dense(),
                            want[out],
                            "{name}, {mask}, {what}, {shape:?}:\n{program}"
                        );
                    }
                }
            }
        }
    }
}

/// A mask larger or smaller than the image: the compiled kernels refuse it as the evaluator
/// does (a typed error, never a read outside the image).
#[test]
fn a_mask_of_another_shape_fails_as_the_evaluator_does() {
    let p = parse(MASKED_HISTOGRAM);
    for (mask_shape, img_shape) in [((6, 13), (6, 12)), ((6, 13), (5, 13)), ((4, 9), (6, 13))] {
        let pixels = vec![true; mask_shape.0 * mask_shape.1];
        for mask in MASKS {
            let t = tensors(MASKED_HISTOGRAM, mask, &pixels, mask_shape, img_shape);
            let want = run_eval(&p, &t);
            assert!(
                want.is_err(),
                "{mask}, {mask_shape:?} on {img_shape:?}: {want:?}"
            );
            for (name, runner) in runners() {
                let mut got = t.clone();
                let r = runner
                    .compile(&p, &formats_of(&got))
                    .and_then(|c| runner.execute(&c, &mut got));
                match (&want, r) {
                    (Err(w), Err(e)) => assert_eq!(
                        e.to_string(),
                        w.to_string(),
                        "{name}, {mask}, {mask_shape:?} on {img_shape:?}"
                    ),
                    (Ok(w), Ok(())) => assert_eq!(got["bins"].to_dense(), w["bins"]),
                    (w, r) => panic!("{name}, {mask}: evaluator {w:?}, compiled {r:?}"),
                }
            }
        }
    }
}

/// In the C source of the masked histogram with a `SparseRunList` mask, the walk over a
/// row's runs is tested once before it and its fast copy reads `mask_right` and
/// `mask_left` without checks; the checked copy keeps them.
#[test]
fn the_run_walk_reads_its_runs_unchecked() {
    let pixels: Vec<bool> = (0..6 * 13).map(|p| p % 5 < 2).collect();
    let t = tensors(
        MASKED_HISTOGRAM,
        "Dense(SparseRunList(Pattern()))",
        &pixels,
        (6, 13),
        (6, 13),
    );
    let (ir, _, _) =
        tessera::run::Runner::lower(&parse(MASKED_HISTOGRAM), &formats_of(&t)).unwrap();
    let shown = ir.to_string();
    assert!(
        shown.contains("& (mask_q < mask_q_stop)) {"),
        "the walk's condition bounds its position:\n{shown}"
    );
    let src = tessera::backend::CBackend::source(&ir);
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let buf = |name: &str| {
        lines
            .iter()
            .find(|l| l.ends_with(&format!("/* {name} */")))
            .and_then(|l| l.split("; const int64_t ").nth(1)?.split(' ').next())
            .unwrap_or_else(|| panic!("no {name} in\n{src}"))
            .to_string()
    };
    let (n_left, n_right) = (buf("mask_left"), buf("mask_right"));
    let test = format!("<= {n_right}");
    let start = lines
        .iter()
        .position(|l| {
            l.starts_with("if (LIKELY(") && l.contains(&test) && l.contains(">= INT64_C(0)")
        })
        .unwrap_or_else(|| panic!("no walk test in\n{src}"));
    let indent = src.lines().nth(start).unwrap().len() - lines[start].len();
    let end = start
        + src
            .lines()
            .skip(start)
            .position(|l| l.len() - l.trim_start().len() == indent && l.trim() == "} else {")
            .unwrap_or_else(|| panic!("no checked walk in\n{src}"));
    let checks = [
        format!(">= (uint64_t){n_left})"),
        format!(">= (uint64_t){n_right})"),
    ];
    let fast = &lines[start + 1..end];
    assert!(
        fast.iter().any(|l| l.starts_with("while (")),
        "{}",
        fast.join("\n")
    );
    assert!(
        fast.iter()
            .all(|l| checks.iter().all(|c| !l.contains(c.as_str()))),
        "a run check in the fast walk:\n{}",
        fast.join("\n")
    );
    assert!(
        lines[end..].iter().any(|l| l.contains(checks[1].as_str())),
        "the checked walk lost its checks:\n{src}"
    );
}
