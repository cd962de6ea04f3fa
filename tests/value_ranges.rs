//! Bounds checks decided by value ranges (`backend::ranges`, `versioning::At::Ranged` and
//! `At::Under`): a bin index computed from a byte (`img[y, x] / 16`, `% n`, `& m`, `min`,
//! `max`) lies in a constant range, so the scatter `bins[...] += 1` is tested once before
//! the loop instead of at every pixel, on the JIT and C. Results must be bit-identical to
//! the reference evaluator on every backend and mask format, and a `bins` too small for the
//! range must fail with the evaluator's error (tensor, index and place), not write wild.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const MASKED_HISTOGRAM: &str = include_str!("../examples/masked_histogram.tess");

/// Masked histograms whose bin index is a byte narrowed by each rule, and the number of
/// bins each needs.
const PROGRAMS: &[(&str, usize)] = &[
    (MASKED_HISTOGRAM, 16),
    (
        "bins .= 0\nfor y = _, x = _\n  if mask[y, x]\n    bins[img[y, x] % 7] += 1\n  end\nend\n",
        7,
    ),
    (
        "bins .= 0\nfor y = _, x = _\n  if mask[y, x]\n    bins[img[y, x] & 12] += 1\n  end\nend\n",
        13,
    ),
    (
        "bins .= 0\nfor y = _, x = _\n  if mask[y, x]\n    bins[min(img[y, x], 9)] += 1\n  end\nend\n",
        10,
    ),
    (
        "bins .= 0\nfor y = _, x = _\n  if mask[y, x]\n    bins[max(div(img[y, x], 32), 2) - 2] += 1\n  end\nend\n",
        6,
    ),
];

const MASKS: &[&str] = &[
    "Dense(Dense(Element(false)))",
    "Dense(SparseRunList(Pattern()))",
    "Dense(RunList(Element(false)))",
    "Dense(SparseList(Pattern()))",
];

fn tensors(mask_format: &str, bins: usize, (h, w): (usize, usize)) -> BTreeMap<String, Tensor> {
    // Every byte value, and runs of one value (consecutive pixels in one bin).
    let gray: Vec<u8> = (0..h * w)
        .map(|p| {
            if p % 50 < 20 {
                200
            } else {
                (p * 37 % 256) as u8
            }
        })
        .collect();
    let pixels: Vec<bool> = (0..h * w).map(|p| (p / 3 + p / w) % 4 != 0).collect();
    let img = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0x00)))"),
        &[h, w],
        &Buffer::U8(gray.into()),
    )
    .unwrap();
    let mask =
        Tensor::from_dense(&fmt(mask_format), &[h, w], &Buffer::Bool(pixels.into())).unwrap();
    let bins = Tensor::empty(&fmt("Dense(Element(0))"), &[bins]).unwrap();
    BTreeMap::from([
        ("img".to_string(), img),
        ("mask".to_string(), mask),
        ("bins".to_string(), bins),
    ])
}

#[test]
fn ranged_bin_indices_agree_with_the_evaluator() {
    for &(program, need) in PROGRAMS {
        let p = parse(program);
        for mask in MASKS {
            for shape in [(13, 21), (1, 1), (9, 130)] {
                // The bins the index needs, and more: both take the unchecked copy.
                for bins in [need, need + 5] {
                    let t = tensors(mask, bins, shape);
                    let want = run_eval(&p, &t).unwrap_or_else(|e| panic!("{e}\n{program}"));
                    for (name, runner) in runners() {
                        let mut got = t.clone();
                        let c = runner.compile(&p, &formats_of(&got)).unwrap();
                        runner
                            .execute(&c, &mut got)
                            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
                        assert_eq!(
                            got["bins"].to_dense(),
                            want["bins"],
                            "{name}, {mask}, {shape:?}, {bins} bins:\n{program}"
                        );
                    }
                }
            }
        }
    }
}

/// A `bins` smaller than the index's range fails the loop's test: the checked copy runs and
/// reports the first pixel whose bin is outside, with the evaluator's message.
#[test]
fn too_few_bins_fail_as_the_evaluator_does() {
    for &(program, need) in PROGRAMS {
        let p = parse(program);
        for mask in MASKS {
            for bins in [need - 1, 1] {
                let t = tensors(mask, bins, (9, 130));
                let want = run_eval(&p, &t)
                    .expect_err("the evaluator must fail")
                    .to_string();
                // `tensor `bins`: 14:10: index 0 = 15 is out of bounds ...`: the place and the
                // first bin outside, which the compiled kernels must name too.
                let value = want
                    .split(" = ")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .unwrap_or_else(|| panic!("{want}"));
                assert!(want.contains("`bins`"), "{want}");
                let place = want.split(": ").nth(1).unwrap();
                let expect = format!("{place}: index {value} is outside dimension 0 of `bins`");
                for (name, runner) in runners() {
                    let mut got = t.clone();
                    let c = runner.compile(&p, &formats_of(&got)).unwrap();
                    let e = runner
                        .execute(&c, &mut got)
                        .expect_err(&format!("{name}: {bins} bins must fail"))
                        .to_string();
                    assert!(
                        e.ends_with(&expect),
                        "{name}, {mask}, {bins} bins: {e} against the evaluator's {want}\n{program}"
                    );
                }
            }
        }
    }
}

/// In the C source of the masked histogram, the loop whose test covers `bins` (its length
/// and dimension above 15) has no check on `bins` and its index guard folded away; the
/// checked copy keeps both.
#[test]
fn the_pixel_loop_checks_no_bin() {
    for mask in MASKS {
        let t = tensors(mask, 16, (9, 130));
        let (ir, _, _) =
            tessera::run::Runner::lower(&parse(MASKED_HISTOGRAM), &formats_of(&t)).unwrap();
        let src = tessera::backend::CBackend::source(&ir);
        let lines: Vec<&str> = src.lines().map(str::trim).collect();
        // `... int64_t n1 = views[1].len; /* bins_val */`: the bins' length variable.
        let n = lines
            .iter()
            .find(|l| l.ends_with("/* bins_val */"))
            .and_then(|l| l.split("; int64_t ").nth(1)?.split(' ').next())
            .unwrap_or_else(|| panic!("no bins_val buffer in\n{src}"));
        let test = format!("{n} > INT64_C(15)");
        let start = lines
            .iter()
            .position(|l| l.starts_with("if (") && l.contains(&test))
            .unwrap_or_else(|| panic!("{mask}: no loop tests `{test}` in\n{src}"));
        // The fast copy: up to the `} else {` at the test's own indentation.
        let indent = src.lines().nth(start).unwrap().len() - lines[start].len();
        let end = start
            + src
                .lines()
                .skip(start)
                .position(|l| l.len() - l.trim_start().len() == indent && l.trim() == "} else {")
                .unwrap_or_else(|| panic!("no checked copy in\n{src}"));
        let checked = format!(">= (uint64_t){n})");
        let store = format!("{}[", n.replacen('n', "b", 1));
        let fast = &lines[start + 1..end];
        assert!(
            fast.iter().all(|l| !l.contains(&checked)),
            "{mask}: a bins check in the fast copy:\n{}",
            fast.join("\n")
        );
        assert!(
            fast.iter().any(|l| l.contains(&store)),
            "{mask}: the fast copy does not write bins:\n{}",
            fast.join("\n")
        );
        assert!(
            lines[end..].iter().any(|l| l.contains(&checked)),
            "{mask}: the checked copy lost its check:\n{src}"
        );
    }
}
