//! `SparseSliceList` (sliced ELLPACK, slices of 8 fibers): its storage layout, reads on every
//! backend against CSR and the evaluator, kernels writing it (under dense and sparse parents,
//! fibers out of order refused), and validation of hand-made arrays.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners_full};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Compile `program` for `tensors`' formats with `runner` and run it.
fn run(
    runner: &tessera::run::Runner,
    program: &tessera::notation::ast::Program,
    tensors: &mut BTreeMap<String, Tensor>,
) -> tessera::Result<()> {
    let c = runner.compile(program, &formats_of(tensors))?;
    runner.execute(&c, tensors)
}

fn ints(b: &Buffer) -> Vec<i64> {
    (0..b.len()).map(|k| b.get(k).as_f64() as i64).collect()
}

fn floats(b: &Buffer) -> Vec<f64> {
    (0..b.len()).map(|k| b.get(k).as_f64()).collect()
}

/// A `rows x cols` matrix whose row `i` holds `lens[i]` entries at spread columns.
fn matrix(format: &str, cols: usize, lens: &[usize], rng: &mut StdRng) -> Tensor {
    let (mut r, mut c, mut v) = (vec![], vec![], vec![]);
    for (i, &n) in lens.iter().enumerate() {
        let mut js: Vec<i64> = (0..cols as i64).collect();
        for k in 0..n.min(cols) {
            let pick = rng.random_range(k..cols);
            js.swap(k, pick);
        }
        let mut js = js[..n.min(cols)].to_vec();
        js.sort_unstable();
        for j in js {
            r.push(i as i64);
            c.push(j);
            // Values with a fractional part, so sums in another order would differ in bits.
            v.push(rng.random_range(-4.0..4.0) * 1.000_000_1);
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[lens.len(), cols],
        &[r, c],
        &Buffer::F64(v.into()),
        |a, _| a,
    )
    .unwrap()
}

#[test]
fn slices_interleave_eight_fibers_padded_to_the_longest() {
    // Rows of 2, 0, 3, 1 entries and 9 rows in all: slice 0 holds rows 0..8 (longest 3, so
    // 24 slots), slice 1 row 8 alone (1 entry: 8 slots).
    let coo: [(i64, i64, f64); 7] = [
        (0, 1, 1.0),
        (0, 4, 2.0),
        (2, 0, 3.0),
        (2, 2, 4.0),
        (2, 5, 5.0),
        (3, 3, 6.0),
        (8, 2, 7.0),
    ];
    let t = Tensor::from_coo(
        &fmt("Dense(SparseSliceList(Element(-1.0), coord=i32))"),
        &[9, 6],
        &[
            coo.iter().map(|e| e.0).collect(),
            coo.iter().map(|e| e.1).collect(),
        ],
        &Buffer::F64(coo.iter().map(|e| e.2).collect::<Vec<_>>().into()),
        |a, _| a,
    )
    .unwrap();
    let l = &t.levels[1];
    assert_eq!(ints(&l[0]), [0, 24, 32], "ptr: slice offsets");
    assert_eq!(ints(&l[1]), [2, 0, 3, 1, 0, 0, 0, 0, 1], "len: per fiber");
    let (idx, val) = (ints(&l[2]), floats(&t.levels[2][0]));
    assert_eq!(idx.len(), 32);
    assert_eq!(val.len(), 32);
    // Entry k of row r of slice 0 at slot 8 k + r; padding: coordinate 0, the fill.
    for (slot, want) in [(0, (1, 1.0)), (8, (4, 2.0)), (2, (0, 3.0)), (10, (2, 4.0))] {
        assert_eq!((idx[slot], val[slot]), want, "slot {slot}");
    }
    assert_eq!((idx[18], val[18]), (5, 5.0));
    assert_eq!((idx[3], val[3]), (3, 6.0));
    assert_eq!((idx[24], val[24]), (2, 7.0));
    for pad in [1, 4, 9, 11, 16, 17, 19, 25, 31] {
        assert_eq!((idx[pad], val[pad]), (0, -1.0), "padding slot {pad}");
    }
    assert_eq!(t.countstored(), 7);
    let mut seen = vec![];
    t.for_each_stored(&mut |c, v| seen.push((c[0] as i64, c[1] as i64, v.as_f64())));
    assert_eq!(seen, coo);
    t.validate("A").unwrap();
}

/// SpMV with `A` in sliced ELLPACK equals CSR's bit for bit on every backend (each row summed
/// in stored order either way), on rows of every length, an empty and a long one, and row
/// counts that do not fill the last slice.
#[test]
fn spmv_reads_slices_as_csr_on_every_backend() {
    let program = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend");
    let mut rng = StdRng::seed_from_u64(50);
    for rows in [1, 7, 8, 9, 61] {
        let cols = 40;
        let mut lens: Vec<usize> = (0..rows).map(|_| rng.random_range(0..7)).collect();
        lens[rows / 2] = 0;
        lens[rows - 1] = cols;
        let csr = matrix("Dense(SparseList(Element(0.0)))", cols, &lens, &mut rng);
        let x: Vec<f64> = (0..cols).map(|_| rng.random_range(-2.0..2.0)).collect();
        let mut tensors = BTreeMap::from([
            ("A".to_string(), csr.clone()),
            (
                "x".to_string(),
                Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[cols], &Buffer::F64(x.into()))
                    .unwrap(),
            ),
            (
                "y".to_string(),
                Tensor::empty(&fmt("Dense(Element(0.0))"), &[rows]).unwrap(),
            ),
        ]);
        let want = run_eval(&program, &tensors).unwrap().remove("y").unwrap();
        for f in [
            "Dense(SparseSliceList(Element(0.0)))",
            "Dense(SparseSliceList(Element(0.0), coord=i32))",
        ] {
            tensors.insert("A".into(), csr.to_format_runtime(&fmt(f)).unwrap());
            for (name, runner) in runners_full() {
                let mut t = tensors.clone();
                run(&runner, &program, &mut t).unwrap_or_else(|e| panic!("{name} {f}: {e}"));
                assert_eq!(t["y"].to_dense(), want, "{name}, {f}, {rows} rows");
            }
        }
    }
}

/// Programs that co-iterate a sliced matrix with another sparse one (the walk's seek), read
/// it transposed and masked, and write it: every backend agrees with the evaluator.
#[test]
fn other_programs_over_slices_agree_with_the_evaluator() {
    let mut rng = StdRng::seed_from_u64(51);
    let lens: Vec<usize> = (0..19).map(|_| rng.random_range(0..9)).collect();
    let a = matrix("Dense(SparseSliceList(Element(0.0)))", 23, &lens, &mut rng);
    let b = matrix("Dense(SparseList(Element(0.0)))", 23, &lens, &mut rng);
    let programs = [
        // Intersection with another sparse row: the walk seeks past the other's gaps.
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend",
        // Union, into a sliced output.
        "D .= 0\nfor i = _, j = _\n  D[i, j] = A[i, j] + B[i, j]\nend",
        // Column sums (rows visited in order, their entries scattered).
        "s .= 0\nfor i = _, j = _\n  s[j] += A[i, j]\nend",
        // A window of columns: the walk starts past coordinate 0.
        "w .= 0\nfor i = _, j = 5:17\n  w[i] += A[i, j]\nend",
    ];
    let outputs = [
        ("C", "Dense(SparseList(Element(0.0)))", vec![19, 23]),
        (
            "D",
            "Dense(SparseSliceList(Element(0.0), coord=i32))",
            vec![19, 23],
        ),
        ("s", "Dense(Element(0.0))", vec![23]),
        ("w", "Dense(Element(0.0))", vec![19]),
    ];
    for (program, (out, f, shape)) in programs.iter().zip(outputs) {
        let p = parse(program);
        let tensors = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("B".to_string(), b.clone()),
            (out.to_string(), Tensor::empty(&fmt(f), &shape).unwrap()),
        ]);
        let want = run_eval(&p, &tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
        for (name, runner) in runners_full() {
            let mut t = tensors.clone();
            run(&runner, &p, &mut t).unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
            t[out].validate(out).unwrap();
            assert_eq!(t[out].to_dense(), want[out], "{name}\n{program}");
        }
    }
}

/// A kernel writing a sliced output, under a dense parent and under a sparse one (whose
/// positions come and go as rows turn out empty), stores what conversion stores; fibers
/// written out of order are refused with the tensor's name.
#[test]
fn kernels_write_slices_in_order_and_refuse_other_orders() {
    let mut rng = StdRng::seed_from_u64(52);
    let lens: Vec<usize> = (0..27)
        .map(|i| {
            if i % 4 == 1 {
                0
            } else {
                rng.random_range(0..6)
            }
        })
        .collect();
    let a = matrix("Dense(SparseList(Element(0.0)))", 17, &lens, &mut rng);
    let copy = "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend";
    for f in [
        "Dense(SparseSliceList(Element(0.0)))",
        "SparseList(SparseSliceList(Element(0.0), coord=i32))",
        "Dense(SparseSliceList(Pattern()))",
    ] {
        let want = a.to_format_runtime(&fmt(f)).unwrap();
        let tensors = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("C".to_string(), Tensor::empty(&fmt(f), &[27, 17]).unwrap()),
        ]);
        for (name, runner) in runners_full() {
            let mut t = tensors.clone();
            run(&runner, &parse(copy), &mut t).unwrap_or_else(|e| panic!("{name} {f}: {e}"));
            t["C"].validate("C").unwrap();
            assert_eq!(t["C"].to_dense(), want.to_dense(), "{name} {f}");
            if !f.starts_with("Dense(SparseSliceList(Pattern") {
                assert_eq!(t["C"].levels, want.levels, "{name} {f}: the same arrays");
            }
        }
    }
    let transposed = parse("C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend");
    let tensors = BTreeMap::from([
        ("A".to_string(), a.clone()),
        (
            "C".to_string(),
            Tensor::empty(&fmt("Dense(SparseSliceList(Element(0.0)))"), &[27, 17]).unwrap(),
        ),
    ]);
    for (name, runner) in runners_full() {
        let mut t = tensors.clone();
        let e = run(&runner, &transposed, &mut t).unwrap_err().to_string();
        assert!(
            e.contains("tensor `C`")
                && e.contains(
                    "SparseSliceList fibers must be written in increasing position order"
                ),
            "{name}: {e}"
        );
    }
}

/// Hand-made arrays that break the layout are refused with what is wrong, and real
/// coordinates are refused by the format.
#[test]
fn broken_slices_are_refused() {
    let good = matrix(
        "Dense(SparseSliceList(Element(0.0)))",
        6,
        &[2, 0, 3, 1, 0, 0, 0, 0, 1],
        &mut StdRng::seed_from_u64(53),
    );
    good.validate("A").unwrap();
    let cases: [(usize, usize, i64, &str); 5] = [
        // (buffer, element, value, message part)
        (0, 1, 20, "multiple of 8"),
        (1, 2, 4, "does not fit slice 0"),
        (1, 8, -1, "does not fit slice 1"),
        (2, 1, 6, "outside 0..6"),
        (2, 8, 0, "is not above"),
    ];
    for (buf, at, value, want) in cases {
        let mut t = good.clone();
        let mut v = ints(&t.levels[1][buf]);
        v[at] = value;
        t.levels[1][buf] = Buffer::I64(v.into());
        let e = t.validate("A").unwrap_err().to_string();
        assert!(e.contains(want), "buffer {buf}[{at}] = {value}: {e}");
        assert!(e.contains("`A`"), "{e}");
    }
    let e = tessera::levels::Format::parse("Dense(SparseSliceList(Element(0.0), coord=f64))", None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("SparseSliceList stores integer coordinates only"),
        "{e}"
    );
}
