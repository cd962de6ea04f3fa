//! The distributed commands under `mpirun -np 1|2|3` against the serial library calls the
//! single-process commands make (`tessera run examples/spmv_row.tess`, `tessera einsum`
//! (also on 4 ranks, SUMMA's 2 x 2 grid),
//! `tessera graph bfs-do`): SpMV within 1e-12 relative, SpGEMM and BFS exactly; ghost counts
//! against the partition rule; a rank that cannot read its input fails every rank with no
//! output written. Matrices are read both ways: scattered from rank 0 and `--read parallel`. Needs Open MPI's `mpirun` (scripts/test-mpi.sh skips without it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessera::algorithms::bfs;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::{load_tensor, write_tensor};

const BIN: &str = env!("CARGO_BIN_EXE_tessera-mpi");

fn mpirun(np: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--oversubscribe", "-np", &np.to_string(), BIN])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (scripts/test-mpi.sh checks that it exists)")
}

/// Two ranks running different arguments (MPMD: `mpirun -np 1 BIN A : -np 1 BIN B`).
fn mpmd(rank0: &[&str], rank1: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--oversubscribe", "-np", "1", BIN])
        .args(rank0)
        .args([":", "-np", "1", BIN])
        .args(rank1)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (scripts/test-mpi.sh checks that it exists)")
}

fn ok(np: usize, args: &[&str]) -> String {
    let out = mpirun(np, args);
    assert!(
        out.status.success(),
        "mpirun -np {np} tessera-mpi {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Neither `out` nor a temporary file of it (named after its stem) exists.
fn assert_nothing_written(out: &Path) {
    assert!(!out.exists(), "an output was written");
    let stem = out.file_stem().unwrap().to_string_lossy().into_owned();
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(&stem))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-mpi-tests-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The shared real matrices (at most `limit` entries each), or none with a message.
fn real_matrices(test: &str, names: &[&str]) -> Vec<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/matrices");
    if !d.is_dir() {
        eprintln!("{test}: {} is absent, real matrices skipped", d.display());
        return vec![];
    }
    names
        .iter()
        .map(|n| d.join(n))
        .filter(|p| p.is_file())
        .collect()
}

/// A random `m x n` matrix file with about `per_row` entries per row, some rows empty.
fn generated(name: &str, m: usize, n: usize, per_row: usize, seed: u64) -> PathBuf {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut entries = BTreeSet::new();
    for i in 0..m {
        if next() % 7 == 0 {
            continue;
        }
        for _ in 0..1 + next() % (2 * per_row) {
            entries.insert((i, next() % n));
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{m} {n} {}\n",
        entries.len()
    );
    for (i, j) in entries {
        let v = (next() % 2001) as f64 / 100.0 - 10.0;
        text += &format!("{} {} {v}\n", i + 1, j + 1);
    }
    let p = tmp(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn x_file(n: usize, name: &str) -> (PathBuf, Vec<f64>) {
    let x: Vec<f64> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 997.0 - 0.3)
        .collect();
    let t = Tensor::from_slice("dense", &[n], &Buffer::F64(x.clone().into())).unwrap();
    let p = tmp(name);
    write_tensor(s(&p), &t).unwrap();
    (p, x)
}

fn f64s(t: &Tensor) -> Vec<f64> {
    match t.to_dense().converted(tessera::types::ElemType::F64) {
        Buffer::F64(v) => v.into_vec(),
        _ => unreachable!(),
    }
}

fn serial_spmv(a: &Path, x: &Path) -> Vec<f64> {
    let mut ts = BTreeMap::new();
    ts.insert("A".to_string(), load_tensor(s(a), None).unwrap());
    ts.insert("x".to_string(), load_tensor(s(x), Some("dense")).unwrap());
    let y = Tensor::with_format("dense", &[ts["A"].shape[0]]).unwrap();
    ts.insert("y".to_string(), y);
    let r = Runner::jit();
    let p = parse_program(include_str!("../../../examples/spmv_row.tess")).unwrap();
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let c = r.compile(&p, &formats).unwrap();
    r.execute(&c, &mut ts).unwrap();
    f64s(&ts["y"])
}

/// The rows of each rank by the documented rule: range r starts at the first row i with
/// entries(rows < i) * P >= r * nnz.
fn balanced(row_counts: &[usize], p: usize) -> Vec<usize> {
    let nnz: usize = row_counts.iter().sum();
    let mut b = vec![0];
    for r in 1..p {
        let (mut i, mut before) = (0, 0);
        while i < row_counts.len() && before * p < r * nnz {
            before += row_counts[i];
            i += 1;
        }
        b.push(i);
    }
    b.push(row_counts.len());
    b
}

fn check_spmv(a: &Path, tag: &str) {
    let t = load_tensor(s(a), None).unwrap();
    let (m, n) = (t.shape[0], t.shape[1]);
    let mut entries = vec![];
    t.for_each_stored(&mut |c, _| entries.push((c[0], c[1])));
    let (xp, _) = x_file(n, &format!("{tag}-x.npy"));
    let want = serial_spmv(a, &xp);
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    for (np, read) in (1..=3).flat_map(|np| [(np, "root"), (np, "parallel")]) {
        let yp = tmp(&format!("{tag}-y{np}{read}.npy"));
        let json = ok(
            np,
            &[
                "spmv",
                "--in",
                &format!("A={}", s(a)),
                "--in",
                &format!("x={}", s(&xp)),
                "--out",
                &format!("y={}", s(&yp)),
                "--json",
                "--read",
                read,
            ],
        );
        let got = f64s(&load_tensor(s(&yp), None).unwrap());
        assert_eq!(got.len(), m);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * scale,
                "{tag} np={np} y[{k}] = {g}, serial {w}"
            );
        }
        let j: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        let bounds: Vec<usize> = serde_json::from_value(j["partition"].clone()).unwrap();
        let mut counts = vec![0; m];
        for &(i, _) in &entries {
            counts[i] += 1;
        }
        assert_eq!(bounds, balanced(&counts, np), "{tag} np={np}: partition");
        // Square: x is split as the rows; else evenly.
        let cols: Vec<usize> = if m == n {
            bounds.clone()
        } else {
            (0..=np).map(|r| r * n / np).collect()
        };
        let ghosts: Vec<u64> = serde_json::from_value(j["ghosts"].clone()).unwrap();
        for r in 0..np {
            let want: BTreeSet<usize> = entries
                .iter()
                .filter(|(i, c)| {
                    (bounds[r]..bounds[r + 1]).contains(i) && !(cols[r]..cols[r + 1]).contains(c)
                })
                .map(|&(_, c)| c)
                .collect();
            assert_eq!(
                ghosts[r] as usize,
                want.len(),
                "{tag} np={np}: ghosts of rank {r}"
            );
        }
    }
}

#[test]
fn spmv_equals_serial_on_1_2_3_ranks() {
    for a in real_matrices(
        "spmv",
        &[
            "1138_bus.mtx",
            "west0479.mtx",
            "bcsstk13.mtx",
            "ca-HepPh.mtx",
        ],
    ) {
        let tag = a.file_stem().unwrap().to_string_lossy().into_owned();
        check_spmv(&a, &tag);
    }
    check_spmv(&generated("gen-sq.mtx", 300, 300, 4, 1), "gen-sq");
    check_spmv(&generated("gen-rect.mtx", 200, 350, 5, 2), "gen-rect");
}

fn entries_of(t: &Tensor) -> Vec<(Vec<usize>, f64)> {
    let mut v = vec![];
    t.for_each_stored(&mut |c, x| v.push((c.to_vec(), x.as_f64())));
    v
}

fn check_spgemm(a: &Path, b: Option<&Path>, tag: &str) {
    let ta = load_tensor(s(a), None).unwrap();
    let tb = b.map_or_else(|| ta.clone(), |b| load_tensor(s(b), None).unwrap());
    let want =
        tessera::api::einsum("C[i, j] += A[i, k] * B[k, j]", &[("A", &ta), ("B", &tb)]).unwrap();
    // 1 and 4 ranks run SUMMA (a square grid), 2 and 3 the 1-D row algorithm.
    for (np, read) in (1..=4).flat_map(|np| [(np, "root"), (np, "parallel")]) {
        let cp = tmp(&format!("{tag}-c{np}{read}.mtx"));
        let mut args = vec!["spgemm".to_string(), "--read".into(), read.into()];
        args.extend(["--in".into(), format!("A={}", s(a))]);
        if let Some(b) = b {
            args.extend(["--in".into(), format!("B={}", s(b))]);
        }
        args.extend(["--out".into(), format!("C={}", s(&cp))]);
        ok(np, &args.iter().map(String::as_str).collect::<Vec<_>>());
        let got = load_tensor(s(&cp), None).unwrap();
        assert_eq!(got.shape, want.shape);
        assert!(
            entries_of(&got) == entries_of(&want),
            "{tag} np={np}: C differs from the serial product"
        );
    }
}

#[test]
fn spgemm_equals_serial_exactly_on_1_to_4_ranks() {
    for a in real_matrices("spgemm", &["1138_bus.mtx", "west0479.mtx", "Erdos971.mtx"]) {
        let tag = a.file_stem().unwrap().to_string_lossy().into_owned();
        check_spgemm(&a, None, &tag);
    }
    let a = generated("gm-a.mtx", 120, 90, 3, 3);
    let b = generated("gm-b.mtx", 90, 150, 4, 4);
    check_spgemm(&a, Some(&b), "gm");
}

fn check_bfs(a: &Path, source: usize, tag: &str) {
    let g = load_tensor(s(a), Some(bfs::GRAPH_FORMAT)).unwrap();
    let at = bfs::transpose(&g).unwrap();
    let want = bfs::search(&Runner::jit(), &g, &at, source, bfs::Direction::Auto).unwrap();
    for np in 1..=3 {
        for dir in ["auto", "push", "pull"] {
            let pp = tmp(&format!("{tag}-p{np}{dir}.npy"));
            let dp = tmp(&format!("{tag}-d{np}{dir}.npy"));
            ok(
                np,
                &[
                    "bfs",
                    // Pull runs also read the graph in parallel.
                    "--read",
                    if dir == "pull" { "parallel" } else { "root" },
                    "--in",
                    &format!("A={}", s(a)),
                    "--source",
                    &source.to_string(),
                    "--direction",
                    dir,
                    "--out",
                    &format!("parents={}", s(&pp)),
                    "--out",
                    &format!("dist={}", s(&dp)),
                ],
            );
            let parents = load_tensor(s(&pp), None).unwrap().to_dense();
            assert_eq!(
                parents,
                Buffer::I64(want.parent.clone().into()),
                "{tag} np={np} {dir}: parents"
            );
            let dist = f64s(&load_tensor(s(&dp), None).unwrap());
            let levels: Vec<f64> = want.level.iter().map(|&l| l as f64).collect();
            assert_eq!(dist, levels, "{tag} np={np} {dir}: levels");
        }
    }
}

#[test]
fn bfs_equals_serial_exactly_on_1_2_3_ranks() {
    for a in real_matrices(
        "bfs",
        &[
            "usroads.mtx",
            "ca-HepPh.mtx",
            "delaunay_n14.mtx",
            "karate.mtx",
        ],
    ) {
        let tag = a.file_stem().unwrap().to_string_lossy().into_owned();
        check_bfs(&a, 0, &tag);
    }
    // A directed graph with unreachable parts.
    let g = generated("gen-graph.mtx", 400, 400, 2, 5);
    check_bfs(&g, 3, "gen-graph");
}

#[test]
fn a_rank_that_cannot_read_its_input_fails_every_rank_and_writes_nothing() {
    let a = generated("fail-a.mtx", 50, 50, 3, 6);
    let (x, _) = x_file(50, "fail-x.npy");
    let y = tmp("fail-y.npy");
    let missing = tmp("no-such-dir/x.npy");
    let good = [
        "spmv",
        "--in",
        &format!("A={}", s(&a)),
        "--in",
        &format!("x={}", s(&x)),
        "--out",
        &format!("y={}", s(&y)),
    ];
    let bad = [
        "spmv",
        "--in",
        &format!("A={}", s(&a)),
        "--in",
        &format!("x={}", s(&missing)),
        "--out",
        &format!("y={}", s(&y)),
    ];
    // MPMD: rank 0 reads a good x, rank 1 one that does not exist.
    let out = mpmd(&good, &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job succeeded: {err}");
    assert!(
        err.contains("rank 1") && err.contains("no-such-dir"),
        "stderr: {err}"
    );
    assert_nothing_written(&y);
    // With --read parallel every rank reads the matrix: rank 1's is missing.
    let (pa, pm, py) = (
        format!("A={}", s(&a)),
        format!("A={}", s(&missing)),
        format!("parents={}", s(&y)),
    );
    let out = mpmd(
        &["bfs", "--read", "parallel", "--in", &pa, "--out", &py],
        &["bfs", "--read", "parallel", "--in", &pm, "--out", &py],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job succeeded: {err}");
    assert!(
        err.contains("rank 1") && err.contains("no-such-dir"),
        "stderr: {err}"
    );
    assert!(!y.exists(), "an output was written");
    // An unreadable matrix on rank 0 fails every rank too.
    let out = mpirun(
        2,
        &[
            "bfs",
            "--in",
            &format!("A={}", s(&missing)),
            "--out",
            &format!("parents={}", s(&y)),
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rank 0"));
    assert!(!y.exists());
}

#[test]
fn a_kernel_failing_on_one_rank_fails_every_rank_and_writes_nothing() {
    // C = A A where A (400 x 400) has 5 full rows and every other row reaches one of them:
    // C is dense, 80,000 entries a rank, while A has 6,336. Rank 1 may hold 600 KB in one
    // buffer: its blocks of A load, then its SpGEMM kernel fails growing C's arrays past
    // that. Rank 0 has room.
    let n = 400;
    let mut entries = BTreeSet::new();
    for i in 0..n {
        if i < 5 {
            entries.extend((0..n).map(|j| (i, j)));
        } else {
            entries.extend((0..10).map(|j| (i, (i * 7 + j * 13) % n)));
            entries.insert((i, i % 5));
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
        entries.len()
    );
    for (i, j) in entries {
        text += &format!("{} {} {}.5\n", i + 1, j + 1, (i * 31 + j * 17) % 19);
    }
    let a = tmp("kfail-a.mtx");
    std::fs::write(&a, text).unwrap();
    let c = tmp("kfail-c.mtx");
    let args = |limit: &'static str| {
        vec![
            "spgemm".to_string(),
            "--in".into(),
            format!("A={}", s(&a)),
            "--out".into(),
            format!("C={}", s(&c)),
            "--max-memory".into(),
            limit.into(),
        ]
    };
    let (big, small) = (args("1G"), args("600K"));
    fn as_strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let out = mpmd(&as_strs(&big), &as_strs(&small));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job succeeded: {err}");
    assert!(
        err.contains("rank 1") && err.contains("kernel error") && err.contains("memory limit"),
        "stderr: {err}"
    );
    assert_nothing_written(&c);
    // The same job with room on both ranks succeeds.
    let out = mpmd(&as_strs(&big), &as_strs(&big));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(c.exists());
}

/// `mpirun tessera dist ...` reaches this binary when the CLI is built beside it.
#[test]
fn the_tessera_cli_hands_over_to_this_binary() {
    let cli = Path::new(BIN).with_file_name("tessera");
    if !cli.is_file() {
        eprintln!(
            "the_tessera_cli_hands_over_to_this_binary: {} is not built, skipped",
            cli.display()
        );
        return;
    }
    let a = generated("cli-a.mtx", 60, 60, 3, 7);
    let out = Command::new("mpirun")
        .args([
            "--oversubscribe",
            "-np",
            "2",
            s(&cli),
            "dist",
            "spmv",
            "--in",
            &format!("A={}", s(&a)),
            "--json",
        ])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(j["ranks"], 2);
}

/// `--format` stores each rank's blocks in another Tessera format; the products are the same.
#[test]
fn blocks_in_other_formats_give_the_serial_result() {
    let a = generated("fmt-a.mtx", 240, 240, 4, 8);
    let (xp, _) = x_file(240, "fmt-x.npy");
    let want = serial_spmv(&a, &xp);
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for format in [
        "Dense(SparseBlockList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
    ] {
        let yp = tmp("fmt-y.npy");
        ok(
            2,
            &[
                "spmv",
                "--format",
                format,
                "--in",
                &format!("A={}", s(&a)),
                "--in",
                &format!("x={}", s(&xp)),
                "--out",
                &format!("y={}", s(&yp)),
            ],
        );
        let got = f64s(&load_tensor(s(&yp), None).unwrap());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * scale,
                "{format}: y[{k}] = {g}, serial {w}"
            );
        }
    }
}
