//! The tiered backend (`--backend tiered`, the command line's default): the JIT runs a kernel
//! from its first call; once hot, C is compiled in the background and later calls run it, with
//! the same results; an object already in the disk cache is used at once; without a working C
//! compiler the kernel stays on the JIT. Tests that need a C compiler skip with a message
//! without one.

mod common;

use common::cli::ok;
use common::random::scattered;
use common::{fmt, fresh_dir, has_c_compiler, parse, run_eval};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera::backend::{CBackend, Tiered};
use tessera::run::Runner;
use tessera::tensor::Tensor;

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

/// A tiered runner whose kernels are hot after their first call, caching C objects in `dir`.
fn eager(c: Option<CBackend>) -> Runner {
    Runner::new(Box::new(
        Tiered::new().with_c(c).with_hot_after(Duration::ZERO),
    ))
}

fn spmv_tensors(seed: u64) -> BTreeMap<String, Tensor> {
    let a = scattered(
        &fmt("Dense(SparseList(Element(0.0)))"),
        &[40, 30],
        0.2,
        seed,
    );
    let x = scattered(&fmt("Dense(Element(0.0))"), &[30], 1.0, seed + 1);
    let y = Tensor::empty(&fmt("Dense(Element(0.0))"), &[40]).unwrap();
    [("A", a), ("x", x), ("y", y)]
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect()
}

/// `got` equals the evaluator's dense values within rounding.
fn assert_close(got: &[f64], want: &tessera::runtime::Buffer) {
    assert_eq!(got.len(), want.len());
    for (i, v) in got.iter().enumerate() {
        let w = want.get(i).as_f64();
        assert!(
            (v - w).abs() <= 1e-12 * w.abs().max(1.0),
            "y[{i}]: {v} vs {w}"
        );
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    (0..t.shape[0])
        .map(|i| t.get(&[i]).unwrap().as_f64())
        .collect()
}

#[test]
fn a_hot_kernel_moves_from_the_jit_to_c_with_the_same_results() {
    if !has_c_compiler("a_hot_kernel_moves_from_the_jit_to_c_with_the_same_results") {
        return;
    }
    let dir = fresh_dir("tiered", "hot");
    let runner = eager(Some(CBackend::new().with_cache_dir(&dir)));
    let program = parse(SPMV);
    let mut ts = spmv_tensors(1);
    let want = run_eval(&program, &ts).unwrap();
    let k = runner.compile(&program, &common::formats_of(&ts)).unwrap();
    assert_eq!(k.kernel.tier(), "jit", "a new kernel starts on the JIT");
    runner.execute(&k, &mut ts).unwrap();
    let on_jit = values(&ts["y"]);
    k.kernel.settle();
    assert_eq!(
        k.kernel.tier(),
        "c",
        "after its first call the kernel was hot"
    );
    // New data of the same formats, on the optimised tier.
    for seed in [1, 7] {
        let mut fresh = spmv_tensors(seed);
        let want_here = run_eval(&program, &fresh).unwrap();
        runner.execute(&k, &mut fresh).unwrap();
        assert_close(&values(&fresh["y"]), &want_here["y"]);
        if seed == 1 {
            assert_eq!(
                values(&fresh["y"]),
                on_jit,
                "both tiers give the same floats"
            );
        }
    }
    assert_close(&on_jit, &want["y"]);
    // The background compile renamed its object and source into place, leaving no temporary.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".so")), "{names:?}");
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_range_run_in_chunks_on_threads_gets_hot_too() {
    // Chunks run through the kernel's native entry, not `run`: their time must count towards
    // the move to C, or a range always split across threads stays on the JIT for good.
    if !has_c_compiler("a_range_run_in_chunks_on_threads_gets_hot_too") {
        return;
    }
    let dir = fresh_dir("tiered", "chunks");
    let runner = eager(Some(CBackend::new().with_cache_dir(&dir)));
    runner.set_threads(2);
    runner.set_min_parallel_work(0);
    let program = parse("y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend\n");
    let mut ts = spmv_tensors(3);
    let want = run_eval(&program, &ts).unwrap();
    let k = runner.compile(&program, &common::formats_of(&ts)).unwrap();
    assert_eq!(k.kernel.tier(), "jit");
    runner.execute(&k, &mut ts).unwrap();
    assert_close(&values(&ts["y"]), &want["y"]);
    // No `settle` (which compiles regardless): the chunked call alone made it hot, and the
    // background compile finishes on its own.
    let start = std::time::Instant::now();
    while k.kernel.tier() != "c" && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(k.kernel.tier(), "c", "the chunked range moved to C");
    let mut fresh = spmv_tensors(4);
    let want = run_eval(&program, &fresh).unwrap();
    runner.execute(&k, &mut fresh).unwrap();
    assert_close(&values(&fresh["y"]), &want["y"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_object_in_the_disk_cache_is_used_from_the_first_call() {
    if !has_c_compiler("an_object_in_the_disk_cache_is_used_from_the_first_call") {
        return;
    }
    let dir = fresh_dir("tiered", "cached");
    let program = parse(SPMV);
    let ts = spmv_tensors(3);
    let formats = common::formats_of(&ts);
    {
        let first = eager(Some(CBackend::new().with_cache_dir(&dir)));
        let k = first.compile(&program, &formats).unwrap();
        k.kernel.settle();
        assert_eq!(k.kernel.tier(), "c");
    }
    // A runner that would never promote (a day of JIT time first) still starts on C.
    let later = Runner::new(Box::new(
        Tiered::new()
            .with_c(Some(CBackend::new().with_cache_dir(&dir)))
            .with_hot_after(Duration::from_secs(86_400)),
    ));
    let k = later.compile(&program, &formats).unwrap();
    assert_eq!(k.kernel.tier(), "c");
    let mut run = ts.clone();
    later.execute(&k, &mut run).unwrap();
    let want = run_eval(&program, &ts).unwrap();
    assert_close(&values(&run["y"]), &want["y"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_working_c_compiler_the_kernel_stays_on_the_jit() {
    let dir = fresh_dir("tiered", "broken");
    let program = parse(SPMV);
    for c in [
        None,
        // A compiler command that fails on every input, and one that does not exist.
        Some(CBackend::with_compiler("false").with_cache_dir(&dir)),
        Some(CBackend::with_compiler("/nonexistent/tessera-cc").with_cache_dir(&dir)),
    ] {
        let runner = eager(c);
        let mut ts = spmv_tensors(5);
        let want = run_eval(&program, &ts).unwrap();
        let k = runner.compile(&program, &common::formats_of(&ts)).unwrap();
        runner.execute(&k, &mut ts).unwrap();
        k.kernel.settle();
        assert_eq!(k.kernel.tier(), "jit");
        let mut again = spmv_tensors(5);
        runner.execute(&k, &mut again).unwrap();
        assert_close(&values(&again["y"]), &want["y"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cold_kernel_is_not_compiled_with_c() {
    let dir = fresh_dir("tiered", "cold");
    let program = parse(SPMV);
    let runner = Runner::new(Box::new(
        Tiered::new()
            .with_c(Some(CBackend::new().with_cache_dir(&dir)))
            .with_hot_after(Duration::from_secs(86_400)),
    ));
    let mut ts = spmv_tensors(9);
    let k = runner.compile(&program, &common::formats_of(&ts)).unwrap();
    for _ in 0..3 {
        runner.execute(&k, &mut ts).unwrap();
    }
    assert_eq!(k.kernel.tier(), "jit");
    let entries = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    assert_eq!(
        entries, 0,
        "nothing was compiled for a kernel that never got hot"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_times_the_optimised_tier_and_says_so() {
    if !has_c_compiler("bench_times_the_optimised_tier_and_says_so") {
        return;
    }
    let dir = fresh_dir("tiered", "bench");
    let a = dir.join("A.mtx");
    std::fs::write(
        &a,
        "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.0\n2 3 2.0\n3 1 3.0\n3 3 4.0\n",
    )
    .unwrap();
    let x = dir.join("x.tns");
    std::fs::write(&x, "# shape: 3\n1 1.0\n2 2.0\n3 3.0\n").unwrap();
    let prog = dir.join("spmv.tess");
    std::fs::write(&prog, SPMV).unwrap();
    let (a, x) = (format!("A={}", a.display()), format!("x={}", x.display()));
    let bench = |backend: &str| -> serde_json::Value {
        let args = [
            "bench",
            prog.to_str().unwrap(),
            "--in",
            &a,
            "--in",
            &x,
            "--out",
            "y",
            "--repeat",
            "2",
            "--backend",
            backend,
            "--json",
        ];
        serde_json::from_str(ok(&args).trim()).unwrap()
    };
    let tiered = bench("tiered");
    assert_eq!(tiered["backend"], "tiered");
    assert_eq!(tiered["tier"], "c", "{tiered}");
    assert!(tiered["optimise_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(bench("jit")["tier"], "jit");
    let _ = std::fs::remove_dir_all(&dir);
}
