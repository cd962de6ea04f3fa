//! The C backend (`--backend c`) against the JIT and the evaluator: the example kernels give
//! the same tensors, corrupt inputs and failing checks give the same error text, compiled
//! objects are reused from the disk cache, a missing or failing compiler is a typed error, and
//! a sample of the differential tests' random cases agrees with the evaluator. Every test
//! skips with a message when no C compiler is installed.

mod common;

use common::cases::c_matches_evaluator;
use common::loops::{ALL_OUTPUTS, loop_case_s};
use common::random::scattered;
use common::{fmt, fresh_dir, has_c_compiler, parse, run_eval, run_jit};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use tessera::backend::{Backend, CBackend};
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::{Error, KernelErrorKind};

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";
const EROSION: &str = include_str!("../examples/erosion.tess");
const MASKED_HISTOGRAM: &str = include_str!("../examples/masked_histogram.tess");
const EROSION_TWICE: &str = include_str!("../examples/erosion_twice.tess");
const EROSION_WORDS: &str = include_str!("../examples/erosion_words.tess");
const EROSION_WORDS_TWICE: &str = include_str!("../examples/erosion_words_twice.tess");
const HISTOGRAM: &str = "h .= 0\nfor i = _\n  h[I[i]] += 1\nend\n";

/// A runner on the C backend caching in the shared test cache, or `None` (with a message)
/// without a C compiler.
fn c_runner(test: &str) -> Option<Runner> {
    has_c_compiler(test).then(|| {
        let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
        Runner::new(Box::new(c))
    })
}

fn run_on(
    runner: &Runner,
    text: &str,
    tensors: &mut BTreeMap<String, Tensor>,
) -> tessera::Result<()> {
    let k = runner.compile(&parse(text), &common::formats_of(tensors))?;
    runner.execute(&k, tensors)
}

fn tensors(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn empty(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap()
}

/// Run `text` on C and the JIT; both must succeed with the evaluator's values and the same
/// storage.
fn agree_three_ways(c: &Runner, text: &str, ts: BTreeMap<String, Tensor>) {
    let want = run_eval(&parse(text), &ts).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut on_jit = ts.clone();
    run_jit(&parse(text), &mut on_jit).unwrap_or_else(|e| panic!("JIT: {e}\n{text}"));
    let mut on_c = ts;
    run_on(c, text, &mut on_c).unwrap_or_else(|e| panic!("C: {e}\n{text}"));
    for (n, t) in &on_c {
        assert_eq!(
            t.to_dense(),
            want[n],
            "`{n}` differs from the evaluator\n{text}"
        );
        assert_eq!(
            t.levels, on_jit[n].levels,
            "`{n}` storage differs from the JIT\n{text}"
        );
    }
}

#[test]
fn spmv_over_formats_agrees() {
    let Some(c) = c_runner("spmv_over_formats_agrees") else {
        return;
    };
    for (k, f) in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(RunList(Element(0.0)))",
    ]
    .iter()
    .enumerate()
    {
        let a = scattered(&fmt(f), &[9, 7], 0.4, k as u64);
        let x = scattered(&fmt("Dense(Element(0.0))"), &[7], 0.8, 99);
        let y = empty("Dense(Element(0.0))", &[9]);
        agree_three_ways(&c, SPMV, tensors(vec![("A", a), ("x", x), ("y", y)]));
    }
}

#[test]
fn image_examples_agree() {
    let Some(c) = c_runner("image_examples_agree") else {
        return;
    };
    let (h, w) = (13, 21);
    // A blob with holes: erosion removes its rim and the pixels next to holes.
    let pixels: Vec<bool> = (0..h * w)
        .map(|p| {
            let (y, x) = ((p / w) as i64, (p % w) as i64);
            (y - 6).pow(2) + (x - 10).pow(2) < 40 && (x * 7 + y * 3) % 11 != 0
        })
        .collect();
    for (f, tmp) in [
        ("Dense(Dense(Element(false)))", "Dense(Element(false))"),
        ("Dense(SparseRunList(Pattern()))", "Dense(Element(false))"),
        (
            "Dense(RunList(Element(false)))",
            "RunList(Element(false), merge=false)",
        ),
    ] {
        let img =
            Tensor::from_dense(&fmt(f), &[h, w], &Buffer::Bool(pixels.clone().into())).unwrap();
        agree_three_ways(
            &c,
            EROSION,
            tensors(vec![
                ("input", img),
                ("output", empty(f, &[h, w])),
                ("tmp", empty(tmp, &[w])),
            ]),
        );
    }
    let gray: Vec<u8> = (0..h * w).map(|p| (p * 37 % 256) as u8).collect();
    let img = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0x00)))"),
        &[h, w],
        &Buffer::U8(gray.into()),
    )
    .unwrap();
    let mask = Tensor::from_dense(
        &fmt("Dense(SparseRunList(Pattern()))"),
        &[h, w],
        &Buffer::Bool(pixels.into()),
    )
    .unwrap();
    agree_three_ways(
        &c,
        MASKED_HISTOGRAM,
        tensors(vec![
            ("img", img),
            ("mask", mask),
            ("bins", empty("Dense(Element(0))", &[16])),
        ]),
    );
}

/// The paper's two erosion iterations in one program (erosion_twice.tess and
/// erosion_words_twice.tess, what the images study calls once per image): C, the JIT and the
/// evaluator agree, and the output is the one-iteration program's run twice, in every
/// image format (run-length ones with a run-length row and `mid`, as Finch keeps them).
#[test]
fn two_erosions_in_one_program_agree() {
    let Some(c) = c_runner("two_erosions_in_one_program_agree") else {
        return;
    };
    for (h, w) in [(13, 21), (1, 1), (2, 70), (9, 130)] {
        // A blob with holes, scaled to the image: erosion removes its rim and the pixels
        // next to holes.
        let pixels: Vec<bool> = (0..h * w)
            .map(|p| {
                let (y, x) = ((p / w) as i64, (p % w) as i64);
                let (cy, cx) = (h as i64 / 2, w as i64 / 2);
                (y - cy).pow(2) * 4 + (x - cx).pow(2) < (w * w) as i64 / 3
                    && (x * 7 + y * 3) % 11 != 0
            })
            .collect();
        for (f, tmp) in [
            ("Dense(Dense(Element(false)))", "Dense(Element(false))"),
            (
                "Dense(RunList(Element(false)))",
                "RunList(Element(false), merge=false)",
            ),
            (
                "Dense(SparseRunList(Pattern()))",
                "SparseRunList(Pattern(), merge=false)",
            ),
        ] {
            let img =
                Tensor::from_dense(&fmt(f), &[h, w], &Buffer::Bool(pixels.clone().into())).unwrap();
            let ts = tensors(vec![
                ("input", img.clone()),
                ("mid", empty(f, &[h, w])),
                ("output", empty(f, &[h, w])),
                ("tmp", empty(tmp, &[w])),
            ]);
            agree_three_ways(&c, EROSION_TWICE, ts.clone());
            let mut once = ts;
            run_on(&c, EROSION_TWICE, &mut once).unwrap();
            let mut cur = img;
            for _ in 0..2 {
                let mut step = tensors(vec![
                    ("input", cur),
                    ("output", empty(f, &[h, w])),
                    ("tmp", empty(tmp, &[w])),
                ]);
                run_on(&c, EROSION, &mut step).unwrap();
                cur = step.remove("output").unwrap();
            }
            assert_eq!(once["output"].to_dense(), cur.to_dense(), "{h}x{w} as {f}");
        }
        // The same image as 64-pixel words, padding bits set past the width.
        let nw = w.div_ceil(64);
        let mut words = vec![0i64; h * nw];
        let mut pad = vec![0i64; nw];
        for x in w..nw * 64 {
            pad[x / 64] |= 1 << (x % 64);
        }
        for (p, &b) in pixels.iter().enumerate() {
            if b {
                words[(p / w) * nw + (p % w) / 64] |= 1 << ((p % w) % 64);
            }
        }
        for (k, v) in words.iter_mut().enumerate() {
            *v |= pad[k % nw];
        }
        let words = Tensor::from_dense(
            &fmt("Dense(Dense(Element(0)))"),
            &[h, nw],
            &Buffer::I64(words.into()),
        )
        .unwrap();
        let pad =
            Tensor::from_dense(&fmt("Dense(Element(0))"), &[nw], &Buffer::I64(pad.into())).unwrap();
        let ts = tensors(vec![
            ("input", words.clone()),
            ("pad", pad.clone()),
            ("mid", empty("Dense(Dense(Element(0)))", &[h, nw])),
            ("output", empty("Dense(Dense(Element(0)))", &[h, nw])),
            ("tmp", empty("Dense(Element(0))", &[nw])),
        ]);
        agree_three_ways(&c, EROSION_WORDS_TWICE, ts.clone());
        let mut once = ts;
        run_on(&c, EROSION_WORDS_TWICE, &mut once).unwrap();
        let mut cur = words;
        for _ in 0..2 {
            let mut step = tensors(vec![
                ("input", cur),
                ("pad", pad.clone()),
                ("output", empty("Dense(Dense(Element(0)))", &[h, nw])),
                ("tmp", empty("Dense(Element(0))", &[nw])),
            ]);
            run_on(&c, EROSION_WORDS, &mut step).unwrap();
            cur = step.remove("output").unwrap();
        }
        assert_eq!(once["output"].to_dense(), cur.to_dense(), "{h}x{w} words");
    }
}

#[test]
fn spgemm_through_einsum_agrees() {
    let Some(c) = c_runner("spgemm_through_einsum_agrees") else {
        return;
    };
    let csr = fmt("Dense(SparseList(Element(0.0)))");
    let a = scattered(&csr, &[8, 6], 0.3, 1);
    let b = scattered(&csr, &[6, 9], 0.3, 2);
    let spec = "C[i, j] += A[i, k] * B[k, j]";
    let on_c = tessera::api::einsum_with(&c, spec, &[("A", &a), ("B", &b)], Some(&csr)).unwrap();
    let on_jit =
        tessera::api::einsum_with(&Runner::jit(), spec, &[("A", &a), ("B", &b)], Some(&csr))
            .unwrap();
    assert_eq!(on_c.levels, on_jit.levels);
    assert!(on_c.countstored() > 0, "the product should not be empty");
}

/// A CSR matrix with the given stored pattern (row 0 empty, row 1 full, the rest about 40%)
/// whose stored values include explicit zeros of both signs, NaN, infinities and products
/// that underflow (`1e-200 * 1e-200`): the strong zero of each product must survive every
/// shortcut of the Gustavson kernel, on C as on the JIT and the evaluator.
fn special_csr(format: &str, rows: usize, cols: usize, seed: u64, specials: f64) -> Tensor {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dense: Vec<f64> = (0..rows * cols)
        .map(|e| match e / cols {
            0 => 0.0,
            1 => 1.0,
            _ => f64::from(u8::from(rng.random_bool(0.4))),
        })
        .collect();
    let mut t =
        Tensor::from_dense(&fmt(format), &[rows, cols], &Buffer::F64(dense.into())).unwrap();
    let special = [
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e-200,
        -1e-200,
    ];
    let vals = t.levels.last_mut().unwrap().last_mut().unwrap();
    let n = vals.len();
    *vals = Buffer::F64(
        (0..n)
            .map(|_| {
                if rng.random_bool(specials) {
                    special[rng.random_range(0..special.len())]
                } else {
                    rng.random_range(-4..=4) as f64 * 0.75 + 0.5
                }
            })
            .collect::<Vec<f64>>()
            .into(),
    );
    t
}

#[test]
fn spgemm_with_zeros_nans_and_infinities_agrees_bit_for_bit() {
    let Some(c) = c_runner("spgemm_with_zeros_nans_and_infinities_agrees_bit_for_bit") else {
        return;
    };
    let text = include_str!("../examples/spgemm_gustavson.tess");
    for coord in ["", ", coord=i32"] {
        let csr = format!("Dense(SparseList(Element(0.0){coord}))");
        // No specials (every row takes the IEEE loop), a few, and many.
        for (seed, specials) in [(1, 0.0), (2, 0.05), (3, 0.3)] {
            let ts = tensors(vec![
                ("A", special_csr(&csr, 12, 10, seed, specials)),
                ("B", special_csr(&csr, 10, 14, seed + 10, specials)),
                ("C", empty(&csr, &[12, 14])),
                ("w", empty("SparseByteMap(Element(0.0))", &[14])),
            ]);
            let want = run_eval(&parse(text), &ts).unwrap();
            let mut on_jit = ts.clone();
            run_jit(&parse(text), &mut on_jit).unwrap();
            let mut on_c = ts;
            run_on(&c, text, &mut on_c).unwrap();
            // Debug text tells -0.0 from 0.0 and compares NaN equal to itself.
            let bits = |b: &Buffer| format!("{b:?}");
            assert_eq!(
                bits(&on_c["C"].to_dense()),
                bits(&want["C"]),
                "{csr} {seed}"
            );
            assert_eq!(
                format!("{:?}", on_c["C"].levels),
                format!("{:?}", on_jit["C"].levels),
                "{csr} {seed}"
            );
        }
    }
}

/// The error of running `text` on C and on the JIT (both must fail, with the same error:
/// kind, data and message).
fn same_error(c: &Runner, text: &str, ts: &BTreeMap<String, Tensor>) -> Error {
    let mut on_jit = ts.clone();
    let e_jit = run_jit(&parse(text), &mut on_jit).expect_err("the JIT should fail");
    let mut on_c = ts.clone();
    let e_c = run_on(c, text, &mut on_c).expect_err("C should fail");
    assert_eq!(e_c, e_jit);
    assert_eq!(e_c.to_string(), e_jit.to_string());
    e_c
}

#[test]
fn corrupt_input_gives_the_jit_error() {
    let Some(c) = c_runner("corrupt_input_gives_the_jit_error") else {
        return;
    };
    let a = scattered(&fmt("Dense(SparseList(Element(0.0)))"), &[5, 4], 0.6, 3);
    let x = scattered(&fmt("Dense(Element(0.0))"), &[4], 1.0, 4);
    let (ptr, idx) = (
        a.levels[1][0].as_i64().unwrap().to_vec(),
        a.levels[1][1].as_i64().unwrap().to_vec(),
    );
    assert!(idx.len() > 1);
    let corrupt = |level: usize, k: usize, v: i64| {
        let mut t = a.clone();
        let mut arr = [&ptr, &idx][level].clone();
        arr[k] = v;
        t.levels[1][level] = Buffer::I64(arr.into());
        tensors(vec![
            ("A", t),
            ("x", x.clone()),
            ("y", empty("Dense(Element(0.0))", &[5])),
        ])
    };
    for ts in [
        // The last row ends far past the column indices.
        corrupt(0, ptr.len() - 1, idx.len() as i64 + 50),
        // A row starts before the first entry.
        corrupt(0, 1, -7),
        // A middle row that ends past the column indices.
        corrupt(0, 2, idx.len() as i64 + 3),
    ] {
        // A fault on one of `A`'s arrays names `A`.
        match same_error(&c, SPMV, &ts) {
            Error::Kernel(e) => assert!(
                e.tensor.as_deref() == Some("A")
                    && matches!(e.kind, KernelErrorKind::Storage { .. })
                    && e.to_string().contains("out of bounds"),
                "{e}"
            ),
            e => panic!("expected a kernel error, got {e}"),
        }
    }
}

#[test]
fn failing_check_reports_its_detail_like_the_jit() {
    let Some(c) = c_runner("failing_check_reports_its_detail_like_the_jit") else {
        return;
    };
    for out in ["Dense(Element(0))", "SparseByteMap(Element(0))"] {
        for bad in [-1i64, 7] {
            let i = Tensor::from_dense(
                &fmt("Dense(Element(0))"),
                &[3],
                &Buffer::I64(vec![1, bad, 2].into()),
            )
            .unwrap();
            let ts = tensors(vec![("I", i), ("h", empty(out, &[5]))]);
            let e = same_error(&c, HISTOGRAM, &ts);
            assert!(
                matches!(&e, Error::Kernel(k) if k.kind == KernelErrorKind::OutOfBounds { dim: 0, value: Some(bad) }),
                "{out}: {e}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains("`h`") && msg.contains(&bad.to_string()),
                "{out}: {msg}"
            );
        }
    }
}

/// A kernel no other test compiles (so its object is certainly not cached yet).
fn unique_kernel(tag: u64) -> tessera::ir::Kernel {
    let p = parse_program(&format!("y .= 0\nfor i = _\n  y[i] += x[i] * {tag}\nend\n")).unwrap();
    let ts = tensors(vec![
        ("x", empty("Dense(Element(0.0))", &[3])),
        ("y", empty("Dense(Element(0.0))", &[3])),
    ]);
    Runner::lower(&p, &common::formats_of(&ts)).unwrap().0
}

#[test]
fn objects_are_cached_on_disk_by_hash() {
    let dir = fresh_dir("c", "cache");
    let c = CBackend::new().with_cache_dir(&dir);
    if !has_c_compiler("objects_are_cached_on_disk_by_hash") {
        return;
    }
    let objects = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "so"))
            .collect();
        v.sort();
        v
    };
    let k = unique_kernel(std::process::id() as u64);
    c.compile(&k).unwrap();
    let first = objects();
    assert_eq!(first.len(), 1, "one object per kernel: {first:?}");
    assert!(
        dir.join(first[0].with_extension("c").file_name().unwrap())
            .is_file()
    );
    let stamp = std::fs::metadata(&first[0]).unwrap().modified().unwrap();
    // A second backend on the same folder reuses the object instead of compiling again.
    CBackend::new().with_cache_dir(&dir).compile(&k).unwrap();
    assert_eq!(objects(), first);
    assert_eq!(
        std::fs::metadata(&first[0]).unwrap().modified().unwrap(),
        stamp
    );
    // Another kernel is another object.
    c.compile(&unique_kernel(std::process::id() as u64 + 1))
        .unwrap();
    assert_eq!(objects().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A new process finds the object in the cache and does not run the compiler: a logging
/// wrapper as `$CC` counts the compiler runs of two `tessera run --backend c` processes.
#[test]
fn a_new_process_reuses_the_cached_object() {
    if !has_c_compiler("a_new_process_reuses_the_cached_object") {
        return;
    }
    let dir = fresh_dir("c", "process");
    let log = dir.join("cc.log");
    let wrapper = dir.join("logging-cc");
    let real = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho run >> '{}'\nexec {real} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .unwrap();
    let x = dir.join("x.npy");
    write_npy(&x, &[1.0, 2.0, 3.0]);
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["run", "s .= 0\nfor i = _\n  s[] += x[i] * x[i]\nend\n"])
            .arg("--in")
            .arg(format!("x={}", x.display()))
            .args(["--out", "s", "--backend", "c", "--time"])
            .env("TESSERA_CACHE_DIR", dir.join("cache"))
            .env("CC", &wrapper)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let first = run();
    assert!(first.starts_with("s = 14"), "{first}");
    assert!(first.contains("compile_ms="), "{first}");
    let second = run();
    assert_eq!(second.lines().next(), first.lines().next());
    let runs = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(runs, 1, "the compiler ran {runs} times for one kernel");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 1-d f64 `.npy` file.
fn write_npy(path: &std::path::Path, values: &[f64]) {
    let header = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend(std::iter::repeat_n(b' ', pad));
    npy.push(b'\n');
    for v in values {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, npy).unwrap();
}

#[test]
fn a_missing_compiler_is_a_backend_error_naming_it() {
    let dir = fresh_dir("c", "missing");
    let k = unique_kernel(7);
    let err = CBackend::with_compiler("/nonexistent/cc")
        .with_cache_dir(&dir)
        .compile(&k)
        .err()
        .expect("compiling without a compiler must fail");
    match &err {
        Error::Backend(msg) => assert!(msg.contains("/nonexistent/cc"), "{msg}"),
        e => panic!("expected a backend error, got {e:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_compiler_shows_its_stderr() {
    if !has_c_compiler("a_failing_compiler_shows_its_stderr") {
        return;
    }
    let dir = fresh_dir("c", "failing");
    let err = CBackend::with_compiler("cc -include /nonexistent/tessera-missing.h")
        .with_cache_dir(&dir)
        .compile(&unique_kernel(8))
        .err()
        .expect("the compile must fail");
    match &err {
        Error::Backend(msg) => {
            assert!(msg.contains("cc -include"), "{msg}");
            assert!(msg.contains("tessera-missing.h"), "{msg}");
        }
        e => panic!("expected a backend error, got {e:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn code_prints_the_c_source() {
    let dir = fresh_dir("c", "code");
    let a = dir.join("a.mtx");
    std::fs::write(
        &a,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.5\n2 1 2.0\n",
    )
    .unwrap();
    let x = dir.join("x.npy");
    write_npy(&x, &[1.0, 2.0]);
    let code = |backend: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["code", SPMV, "--out", "y", "--backend", backend])
            .arg("--in")
            .arg(format!("A={}@csr", a.display()))
            .arg("--in")
            .arg(format!("x={}", x.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let c = code("c");
    assert!(c.contains("int64_t tessera_kernel("), "{c}");
    assert!(
        c.contains("A_idx"),
        "buffers keep their names in comments: {c}"
    );
    assert!(
        !code("jit").contains("tessera_kernel"),
        "the IR printer stays the default"
    );
    if !has_c_compiler("code_prints_the_c_source (einsum --backend c)") {
        return;
    }
    let einsum = |backend: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "einsum",
                "C[i, j] += A[i, k] * A[k, j]",
                "--backend",
                backend,
            ])
            .arg("--in")
            .arg(format!("A={}@csr", a.display()))
            .env("TESSERA_CACHE_DIR", dir.join("cache"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let on_c = einsum("c");
    assert!(on_c.contains("stored 2"), "{on_c}");
    assert_eq!(on_c, einsum("jit"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The random cases of the differential tests (`common::loops`) through the C backend against
/// the evaluator. Each kernel is a compiler run (the disk cache makes reruns cheap), so the
/// sample is small. `PROPTEST_CASES=N` runs N fresh cases.
#[test]
fn random_cases_agree_with_the_evaluator() {
    c_matches_evaluator(
        "random_cases_agree_with_the_evaluator",
        40,
        loop_case_s(ALL_OUTPUTS),
        |_| Ok(()),
    );
}

/// `exp` and `log` on C are the C library's (as builtins GCC may share between equal
/// arguments), which is what the JIT and the evaluator call through Rust's `f64::exp` and
/// `f64::ln`: every result bit for bit those, on specials (NaN, infinities, zeros of both
/// signs, negatives, subnormals, overflow), and an expression using `exp(x[i])` twice (the
/// shape of a sigmoid's gradient) gives the value computed once.
#[test]
fn exp_and_log_are_the_c_librarys_bit_for_bit() {
    let Some(c) = c_runner("exp_and_log_are_the_c_librarys_bit_for_bit") else {
        return;
    };
    let mut xs = vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        -1.0,
        1.0,
        5e-324,
        1e-310,
        709.78,
        709.79,
        -745.2,
        -745.13,
        std::f64::consts::E,
        1e300,
    ];
    let mut s = 7u64;
    for _ in 0..200 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        xs.push(((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 100.0);
    }
    let n = xs.len();
    let dense = fmt("Dense(Element(0.0))");
    let x = Tensor::from_dense(
        &dense,
        &[n],
        &tessera::runtime::Buffer::F64(xs.clone().into()),
    )
    .unwrap();
    let text = "for i = _\n  e[i] = exp(x[i])\n  l[i] = log(x[i])\n  g[i] = exp(-x[i]) / ((1.0 + exp(-x[i])) * (1.0 + exp(-x[i])))\nend\n";
    let mut on_c = tensors(vec![
        ("x", x),
        ("e", empty("Dense(Element(0.0))", &[n])),
        ("l", empty("Dense(Element(0.0))", &[n])),
        ("g", empty("Dense(Element(0.0))", &[n])),
    ]);
    let mut on_jit = on_c.clone();
    run_on(&c, text, &mut on_c).unwrap();
    run_jit(&parse(text), &mut on_jit).unwrap();
    let values = |t: &Tensor| -> Vec<u64> {
        match &t.levels[t.levels.len() - 1][0] {
            tessera::runtime::Buffer::F64(v) => v.iter().map(|f| f.to_bits()).collect(),
            b => panic!("not f64: {b:?}"),
        }
    };
    let want =
        |f: &dyn Fn(f64) -> f64| -> Vec<u64> { xs.iter().map(|&x| f(x).to_bits()).collect() };
    let sigmoid_grad = |x: f64| {
        let e = (-x).exp();
        e / ((1.0 + e) * (1.0 + e))
    };
    for (name, f) in [
        ("e", &f64::exp as &dyn Fn(f64) -> f64),
        ("l", &f64::ln),
        ("g", &sigmoid_grad),
    ] {
        let w = want(f);
        for (backend, got) in [("C", values(&on_c[name])), ("JIT", values(&on_jit[name]))] {
            for (k, (g, w)) in got.iter().zip(&w).enumerate() {
                // NaNs may differ in payload; every other value bit for bit.
                let (g, w) = (f64::from_bits(*g), f64::from_bits(*w));
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{backend} `{name}` at x = {:e}: {g:e}, Rust {w:e}",
                    xs[k]
                );
            }
        }
    }
}
