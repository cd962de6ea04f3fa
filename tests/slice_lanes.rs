//! Slice lanes (issue 18, `ir::lanes`): the 8 rows of a `SparseSliceList` slice run as the
//! lanes of one loop, each row's entries summed in their stored order. Results must be
//! bit-identical to the reference evaluator on the JIT, the IR interpreter and the C backend,
//! for row-length patterns that exercise whole slices, slices with empty rows (run row by
//! row), row counts that leave a partial last slice, rows windows that start inside a slice,
//! the NaN/zero re-run of IEEE products per lane, and other row programs (two outputs, two
//! gathers, no gather). Coordinates nobody vouches for must still fail naming the first bad access.

mod common;

use common::rows::{
    COLS, assert_first_bad_gather, bits, faults, marked, matrix, spmv_tensors as tensors, vector,
    y_agrees_marked,
};
use common::{fmt, formats_of, parse, run_eval, runners_full};
use proptest::prelude::*;
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

const FORMATS: &[&str] = &[
    "Dense(SparseSliceList(Element(0.0)))",
    "Dense(SparseSliceList(Element(0.0), coord=i32))",
    "Dense(SparseSliceList(Pattern(), coord=i32))",
];

/// [`runners_full`], and where the C backend is tested, C compiled without AVX-512 (the
/// portable loop under the vector text's `#else`), so both are checked on any machine.
fn runners() -> Vec<(&'static str, Runner)> {
    let mut r = runners_full();
    if r.iter().any(|(name, _)| *name == "c") {
        let cc = std::env::var("CC")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "cc".into());
        let portable = tessera::backend::CBackend::with_compiler(&format!("{cc} -mno-avx512f"));
        r.push(("c-no-avx512", Runner::new(Box::new(portable))));
    }
    r
}

const MARK: &str = "rows of a slice as lanes";

/// Every backend gives the evaluator's bits for `program` (output `y`); returns whether some
/// runner's kernel ran rows in lanes.
fn agree(program: &str, format: &str, lengths: &[usize], seed: u64, special: bool) -> bool {
    y_agrees_marked(
        &parse(program),
        (format, lengths, seed, special),
        runners(),
        MARK,
    )
}

/// Row-length patterns: one slice, whole slices of equal and ragged rows, a slice with an
/// empty row (row by row) next to full ones, a partial last slice (9, 13, 23 rows), one
/// long row among short ones (the slice's padding), and every row empty.
fn patterns() -> Vec<Vec<usize>> {
    vec![
        vec![3; 8],
        vec![5; 16],
        vec![1, 2, 3, 4, 5, 6, 7, 8],
        vec![9, 1, 1, 1, 1, 1, 1, 1, 4, 4],
        vec![2, 2, 0, 2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6, 1],
        (0..13).map(|i| (i * 5) % 11 + 1).collect(),
        (0..23).map(|i| (i * 37) % 17 + 1).collect(),
        vec![1, 1, 1, 211, 1, 1, 1, 1],
        vec![0; 8],
        vec![4; 7],
    ]
}

#[test]
fn spmv_in_lanes_is_bit_identical_to_the_evaluator() {
    for f in FORMATS {
        for (k, lengths) in patterns().iter().enumerate() {
            for special in [false, true] {
                let shaped = agree(SPMV, f, lengths, k as u64 + 1, special);
                // The pass must really apply where a whole slice has no empty row, or this
                // test checks nothing of it.
                if lengths.len() >= 8 && lengths[..8].iter().all(|&n| n > 0) {
                    assert!(shaped, "{f} {lengths:?}: SpMV did not run in lanes");
                }
            }
        }
    }
}

#[test]
fn other_row_programs_in_lanes_agree_with_the_evaluator() {
    let programs = [
        // Two carried sums per row.
        "y .= 0\nz .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\n  z[i] += A[i, j]\nend\n",
        // Two gathers of one coordinate and a constant in a product.
        "y .= 0\nfor i = _, j = _\n  y[i] += (A[i, j] * x[j]) * (x[j] - 0.75)\nend\n",
        // No gather: row sums of a scaled matrix.
        "y .= 0\nfor i = _, j = _\n  y[i] += 2.5 * A[i, j]\nend\n",
        // Rows from inside the first slice: the first rows run alone, then whole slices.
        "y .= 0\nfor i = 3:26, j = _\n  y[i] += A[i, j] * x[j]\nend\n",
    ];
    let lengths: Vec<usize> = (0..29).map(|i| (i * 7) % 9 + 1).collect();
    for program in programs {
        for f in &FORMATS[..2] {
            for special in [false, true] {
                let p = parse(program);
                let mut t = tensors(matrix(f, &lengths, 4, special), vector(4, special));
                if program.contains("z[i]") {
                    t.insert(
                        "z".to_string(),
                        Tensor::empty(&fmt("Dense(Element(0.0))"), &[lengths.len()]).unwrap(),
                    );
                }
                let want = run_eval(&p, &t).unwrap();
                let mut shaped = false;
                for (name, runner) in runners() {
                    let c = runner.compile(&p, &formats_of(&t)).unwrap();
                    shaped |= marked(&c.ir, MARK);
                    let mut got = t.clone();
                    runner
                        .execute(&c, &mut got)
                        .unwrap_or_else(|e| panic!("{name} {f}: {e}\n{program}"));
                    for out in ["y", "z"] {
                        if let Some(w) = want.get(out) {
                            assert_eq!(
                                bits(&got[out].to_dense()),
                                bits(w),
                                "{name} {f} special {special} `{out}`\n{program}"
                            );
                        }
                    }
                }
                assert!(shaped, "{f}: not in lanes\n{program}");
            }
        }
    }
}

#[test]
fn unvouched_coordinates_fail_at_the_first_bad_access_in_row_order() {
    // Every row of the first slice holds entries; row 1's first one and row 5's last one
    // point past x. Row by row, the first out-of-bounds gather is row 1's.
    let lengths = [6; 16];
    let mut a = matrix(FORMATS[0], &lengths, 5, false);
    let first = COLS as i64 + 1000;
    let second = COLS as i64 + 2000;
    // Slots: slice 0 starts at 0, entry k of row r at 8k + r.
    a.levels[1][2].set(1, Scalar::I64(first));
    a.levels[1][2].set(8 * 5 + 5, Scalar::I64(second));
    assert_eq!(a.levels[1][2].below(), None);
    for msg in faults(&parse(SPMV), &tensors(a, vector(5, false)), runners()) {
        assert_first_bad_gather(&msg, first);
        assert!(!msg.contains(&second.to_string()), "{msg}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random row lengths (empty rows included) on every backend, in both index widths.
    #[test]
    fn random_slices_in_lanes_match_the_evaluator(
        lengths in prop::collection::vec(0usize..14, 1..40),
        seed in 0u64..1000,
        special in any::<bool>(),
        wide in any::<bool>(),
    ) {
        let f = FORMATS[usize::from(!wide)];
        agree(SPMV, f, &lengths, seed, special);
    }
}

/// The C text of SpMV on slices: the steps with the lane arrays in 512-bit variables and one
/// masked gather a step where the compiler targets AVX-512, the portable loop otherwise.
#[test]
fn the_c_text_runs_steps_in_vectors_where_avx512_is_available() {
    use common::cli::{Dir, ok};
    let d = Dir::new("slice-lanes-code");
    let a = d.file(
        "a.tns",
        "# shape: 17x5\n1 1 1.5\n2 3 2.0\n9 5 1.0\n17 2 3.0\n",
    );
    let x = d.file("x.tns", "# shape: 5\n1 1.0\n");
    let code = ok(&[
        "code",
        SPMV,
        "--in",
        &format!("A={a}@Dense(SparseSliceList(Element(0.0), coord=i32))"),
        "--in",
        &format!("x={x}@Dense(Element(0.0))"),
        "--backend",
        "c",
    ]);
    for text in [
        "#if defined(__AVX512F__)",
        "__m512d lr",
        // The gather loads only the lanes whose rows have an entry at the step.
        "_mm512_mask_i64gather_pd(_mm512_setzero_pd(), ",
        "_mm512_mask_blend_pd",
        // The rows' chains in one vector pass, their step count a reduction.
        "_mm512_reduce_max_epi64",
        // The rows' tails: 8 sums stored at once when none re-runs.
        "/* lanes_rare */",
        // The lane arrays on the stack, a vector's store and load never split across lines.
        "__attribute__((aligned(64))) = {0};",
        "#else",
        "#pragma omp simd",
    ] {
        assert!(code.contains(text), "no `{text}` in\n{code}");
    }
}
