//! The `tessera` command line, end to end: the contract scripts rely on, and every error path.

mod common;

use common::cli::{Dir, ok, tessera};
use std::path::Path;
use tessera::io::{FileData, read_file};

/// The command fails with a one-line message containing every `needle`.
fn fails(args: &[&str], needles: &[&str]) {
    let o = tessera(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "tessera {args:?} should fail");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one-line message expected, got:\n{err}"
    );
    for n in needles {
        assert!(
            err.contains(n),
            "message `{}` should mention `{n}`",
            err.trim_end()
        );
    }
}

const A_MTX: &str = "%%MatrixMarket matrix coordinate real general\n% a 3x4 matrix\n3 4 5\n1 1 1.5\n1 3 2\n2 2 -1\n3 1 4\n3 4 0.25\n";
const X_TNS: &str = "1 1\n2 2\n3 3\n4 4\n";
const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

fn dense_values(path: &str) -> Vec<f64> {
    match read_file(Path::new(path)).unwrap() {
        FileData::Dense(d) => d.values.to_scalars().iter().map(|v| v.as_f64()).collect(),
        FileData::Coo(_) => panic!("{path} should be dense"),
    }
}

#[test]
fn spmv_runs_and_writes_npy_with_both_backends() {
    let d = Dir::new("spmv");
    let (a, x, prog) = (
        d.file("A.mtx", A_MTX),
        d.file("x.tns", X_TNS),
        d.file("spmv.fin", SPMV),
    );
    for backend in ["jit", "eval"] {
        let y = d.path(&format!("y-{backend}.npy"));
        ok(&[
            "run",
            &prog,
            "--in",
            &format!("A={a}"),
            "--in",
            &format!("x={x}@Dense(Element(0.0))"),
            "--out",
            &format!("y={y}"),
            "--backend",
            backend,
        ]);
        assert_eq!(dense_values(&y), vec![1.5 + 6.0, -2.0, 4.0 + 1.0]);
        let info = ok(&["info", &y]);
        assert!(
            info.contains("shape: 3\n") && info.contains("stored: 3\n"),
            "{info}"
        );
    }
}

#[test]
fn scalar_output_is_printed_and_round_trips() {
    let d = Dir::new("scalar");
    let a = d.file("A.mtx", A_MTX);
    let out = ok(&[
        "run",
        "s .= 0; for i = _, j = _; s[] += A[i, j]; end",
        "--in",
        &format!("A={a}"),
        "--out",
        "s@Element(0.0)",
    ]);
    assert_eq!(out, "s = 6.75\n");
    let out = ok(&[
        "run",
        "s .= 0; for i = _, j = _; if i <= j; s[] += A[i, j] / 3; end; end",
        "--in",
        &format!("A={a}"),
        "--out",
        "s@Element(0.0)",
    ]);
    let v: f64 = out.trim().strip_prefix("s = ").unwrap().parse().unwrap();
    assert_eq!(v, 1.5 / 3.0 + 2.0 / 3.0 + -1.0 / 3.0 + 0.25 / 3.0);
}

#[test]
fn scalar_inputs_and_shapes() {
    let d = Dir::new("shape");
    let v = d.file("v.tns", "1 5\n2 17\n3 33\n4 40\n");
    let bins = d.path("bins.npy");
    ok(&[
        "run",
        "for i = _; bins[div(v[i], 16)] += 1; end",
        "--in",
        &format!("v={v}@Dense(Element(0))"),
        "--out",
        &format!("bins={bins}@Dense(Element(0))"),
        "--shape",
        "bins=3",
    ]);
    assert_eq!(dense_values(&bins), vec![1.0, 1.0, 2.0]);
    let out = ok(&[
        "run",
        "s .= 0; for i = 0:9; if i * i <= R; s[] += 1; end; end",
        "--scalar",
        "R=20",
        "--out",
        "s@Element(0)",
    ]);
    assert_eq!(out, "s = 5\n");
}

#[test]
fn time_and_code_and_convert() {
    let d = Dir::new("time");
    let (a, x, prog) = (
        d.file("A.mtx", A_MTX),
        d.file("x.tns", X_TNS),
        d.file("spmv.fin", SPMV),
    );
    let out = ok(&[
        "run",
        &prog,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("x={x}@dense"),
        "--out",
        "y",
        "--time",
        "--repeat",
        "3",
    ]);
    let line = out
        .lines()
        .find(|l| l.starts_with("time: "))
        .expect("a time line");
    for key in ["compile_ms=", "run_ms_median=", "run_ms_min=", "repeats=3"] {
        assert!(line.contains(key), "{line}");
    }
    let code = ok(&[
        "code",
        &prog,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("x={x}@dense"),
        "--out",
        "y",
    ]);
    assert!(code.contains("for") && code.contains('y'), "{code}");
    let t = d.path("A.tns");
    ok(&["convert", &a, &format!("{t}@dcsr")]);
    let info = ok(&["info", &format!("{t}@dcsr"), "--storage"]);
    assert!(
        info.contains("shape: 3x4") && info.contains("stored: 5"),
        "{info}"
    );
    let m = d.path("A2.mtx");
    ok(&["convert", &t, &m]);
    let info = ok(&["info", &m]);
    assert!(
        info.contains("shape: 3x4") && info.contains("stored: 5"),
        "{info}"
    );
}

#[test]
fn in_place_update_of_an_input() {
    let d = Dir::new("inplace");
    let p = d.file("p.tns", "# shape: 4\n1 -1\n2 -1\n3 7\n4 -1\n");
    let e = d.file("e.tns", "# shape: 4\n1 2\n2 1\n");
    let out = d.path("p2.npy");
    ok(&[
        "run",
        "for k = _; P[k] <<choose(-1)>>= E[k]; end",
        "--in",
        &format!("P={p}@Dense(Element(0))"),
        "--in",
        &format!("E={e}@Dense(Element(0))"),
        "--out",
        &format!("P={out}"),
    ]);
    assert_eq!(dense_values(&out), vec![2.0, 1.0, 7.0, 0.0]);
}

#[test]
fn error_paths_name_the_place_and_write_nothing() {
    let d = Dir::new("errors");
    let (a, x) = (d.file("A.mtx", A_MTX), d.file("x.tns", X_TNS));
    let y = d.path("y.npy");
    let ins = [format!("A={a}"), format!("x={x}@dense")];
    let run_with = |prog: &str, extra: &[&str]| {
        let mut args = vec!["run", prog, "--in", &ins[0], "--in", &ins[1]];
        args.extend_from_slice(extra);
        args.push("--out");
        args.push(Box::leak(format!("y={y}").into_boxed_str()));
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let check = |args: Vec<String>, needles: &[&str]| {
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        fails(&refs, needles);
        assert!(
            !Path::new(&y).exists(),
            "no output file may be written on error"
        );
    };
    // Bad program: the syntax error names line:column.
    let bad = d.file(
        "bad.fin",
        "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * \nend\n",
    );
    check(run_with(&bad, &[]), &["bad.fin:", "4:"]);
    // Bad format string.
    check(
        vec![
            "run".into(),
            SPMV.into(),
            "--in".into(),
            format!("A={a}@Dense(Sparse(Element(0.0)))"),
            "--in".into(),
            ins[1].clone(),
            "--out".into(),
            format!("y={y}"),
        ],
        &["Sparse"],
    );
    // Missing and malformed files name the file (and the line).
    check(
        run_with(SPMV, &["--in", "z=/nonexistent/z.mtx"]),
        &["/nonexistent/z.mtx"],
    );
    let broken = d.file(
        "broken.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 4 2\n1 1 1.0\n1 x 2.0\n",
    );
    check(
        vec![
            "run".into(),
            SPMV.into(),
            "--in".into(),
            format!("A={broken}"),
            "--in".into(),
            ins[1].clone(),
            "--out".into(),
            format!("y={y}"),
        ],
        &["broken.mtx:4"],
    );
    // Shape mismatch: x has 4 entries, B has 3 columns.
    let b = d.file(
        "B.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1.0\n",
    );
    check(
        vec![
            "run".into(),
            SPMV.into(),
            "--in".into(),
            format!("A={b}"),
            "--in".into(),
            ins[1].clone(),
            "--out".into(),
            format!("y={y}"),
        ],
        &["dimension mismatch"],
    );
    // Unknown names and bad usage.
    check(
        run_with("y .= 0; for i = _; y[i] += Q[i]; end", &[]),
        &["Q"],
    );
    check(run_with(SPMV, &["--backend", "gpu"]), &["gpu"]);
    fails(&["info", "/nonexistent.npy"], &["/nonexistent.npy"]);
    fails(&["convert", &a, &d.path("out.xyz")], &[".xyz"]);
}

#[test]
fn info_storage_prints_every_level_array() {
    let d = Dir::new("storage");
    // The vector [0,1,1,2,2,0,0,3,0] (1-based file coordinates).
    let v = d.file("v.tns", "# shape: 9\n2 1\n3 1\n4 2\n5 2\n8 3\n");
    let info = ok(&[
        "info",
        &format!("{v}@SparseList(Element(0.0))"),
        "--storage",
    ]);
    assert!(info.contains("stored: 5\n"), "{info}");
    assert!(
        info.contains("level 1 SparseList: ptr [0, 5] idx [1, 2, 3, 4, 7]\n"),
        "{info}"
    );
    assert!(
        info.contains("level 2 Element: val [1.0, 1.0, 2.0, 2.0, 3.0]\n"),
        "{info}"
    );
    let info = ok(&["info", &format!("{v}@dense"), "--storage"]);
    assert!(info.contains("stored: 9\n"), "{info}");
    assert!(info.contains("level 1 Dense: (no arrays)\n"), "{info}");
    let info = ok(&["info", &format!("{v}@coo"), "--storage"]);
    assert!(
        info.contains("level 1 SparseCOO{1}: ptr [0, 5] idx0 [1, 2, 3, 4, 7]\n"),
        "{info}"
    );
    // Long arrays show their ends and their length.
    let long: String = std::iter::once("# shape: 100\n".to_string())
        .chain((1..=100).map(|k| format!("{k} {k}\n")))
        .collect();
    let l = d.file("long.tns", &long);
    let info = ok(&["info", &format!("{l}@sparse"), "--storage"]);
    assert!(
        info.contains("idx [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ..., 95, 96, 97, 98, 99] (100 entries)"),
        "{info}"
    );
}

#[test]
fn convert_goes_through_the_compiled_copy() {
    let d = Dir::new("convert2");
    let a = d.file("A.mtx", A_MTX);
    // Dense → CSR stores no zeros; CSR → COO keeps the entries; COO → DCSR round trips.
    let dn = d.path("A.npy");
    ok(&["convert", &a, &dn]);
    let info = ok(&["info", &format!("{dn}@csr"), "--storage"]);
    assert!(info.contains("stored: 5\n"), "{info}");
    let t = d.path("A.tns");
    ok(&["convert", &format!("{dn}@dense"), &format!("{t}@csr")]);
    let info = ok(&["info", &format!("{t}@dcsr"), "--storage"]);
    assert!(
        info.contains("level 2 SparseList: ptr [0, 2, 3, 5] idx [0, 2, 1, 0, 3]"),
        "{info}"
    );
    assert_eq!(
        dense_values(&dn),
        vec![1.5, 0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.25]
    );
    fails(
        &[
            "convert",
            &a,
            &format!("{}@Dense(Element(0.0))", d.path("x.tns")),
        ],
        &["Dense(Element(0.0))"],
    );
    assert!(!std::path::Path::new(&d.path("x.tns")).exists());
}

/// The golden storage of Finch's representation tests (`seed-finch.md` §2.4, 0-based) for
/// every level format, as `tessera info --storage` prints it.
#[test]
fn info_storage_shows_the_golden_arrays_of_every_format() {
    let d = Dir::new("golden");
    // [0,1,1,2,2,0,0,3,0] and, for the singular formats, the Bool vector [0,0,1,0,0,0].
    let v = d.file("v.tns", "# shape: 9\n2 1\n3 1\n4 2\n5 2\n8 3\n");
    let b = d.file("b.tns", "# shape: 6\n3 1\n");
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            &v,
            "RunList(Element(0.0))",
            "6",
            "right [0, 2, 4, 6, 7, 8]\nlevel 2 Element: val [0.0, 1.0, 2.0, 0.0, 3.0, 0.0]",
        ),
        (
            &v,
            "SparseList(Element(0.0))",
            "5",
            "ptr [0, 5] idx [1, 2, 3, 4, 7]\n",
        ),
        (
            &v,
            "SparseBlockList(Element(0.0))",
            "5",
            "ptr [0, 2] idx [4, 7] ofs [0, 4, 5]\n",
        ),
        (
            &v,
            "SparseBand(Element(0.0))",
            "7",
            "idx [7] ofs [0, 7]\nlevel 2 Element: val [1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0]",
        ),
        (
            &v,
            "SparseByteMap(Element(0.0))",
            // Every slot: a byte map's values are allocated densely (Finch's countstored).
            "9",
            "ptr [0, 5] tbl [false, true, true, true, true, false, false, true, false] srt [1, 2, 3, 4, 7]",
        ),
        (
            &v,
            "SparseRunList(Element(0.0))",
            "3",
            "ptr [0, 3] left [1, 3, 7] right [2, 4, 7]\nlevel 2 Element: val [1.0, 2.0, 3.0]",
        ),
        (
            &v,
            "SparseRunList(Element(0.0), merge=false)",
            "5",
            "left [1, 2, 3, 4, 7] right [1, 2, 3, 4, 7]",
        ),
        (
            &v,
            "SparseDict(Element(0.0))",
            "5",
            "ptr [0, 5] idx [1, 2, 3, 4, 7] val [0, 1, 2, 3, 4]",
        ),
        (
            &v,
            "SparseCOO{1}(Element(0.0))",
            "5",
            "ptr [0, 5] idx0 [1, 2, 3, 4, 7]\n",
        ),
        (
            &b,
            "SparsePoint(Element(false))",
            "1",
            "idx [2]\nlevel 2 Element: val [true]",
        ),
        (
            &b,
            "SparseInterval(Element(false))",
            "1",
            "left [2] right [2]\nlevel 2 Element: val [true]",
        ),
    ];
    for (file, format, stored, arrays) in cases {
        let info = ok(&["info", &format!("{file}@{format}"), "--storage"]);
        assert!(
            info.contains(&format!("stored: {stored}\n")),
            "{format}:\n{info}"
        );
        assert!(info.contains(arrays), "{format}:\n{info}");
    }
}

#[test]
fn max_kernel_size_applies_to_every_compiling_command() {
    let d = Dir::new("kernel-size");
    let (a, x, prog) = (
        d.file("A.mtx", A_MTX),
        d.file("x.tns", X_TNS),
        d.file("spmv.fin", SPMV),
    );
    let g = d.file(
        "g.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n2 3 1\n",
    );
    let (ain, xin) = (format!("A={a}"), format!("x={x}@Dense(Element(0.0))"));
    let gin = format!("A={g}");
    let over = ["unsupported: the kernel is ", "over the limit of 5"];
    let tensor_args = ["--in", &ain, "--in", &xin, "--out", "y"];
    for command in ["run", "code", "bench"] {
        let mut args = vec![command, prog.as_str()];
        args.extend(tensor_args);
        ok(&args);
        args.extend(["--max-kernel-size", "5"]);
        fails(&args, &over);
    }
    fails(
        &[
            "run",
            &prog,
            "--in",
            &ain,
            "--in",
            &xin,
            "--out",
            "y",
            "--backend",
            "c",
            "--max-kernel-size",
            "5",
        ],
        &over,
    );
    let einsum = [
        "einsum",
        "y[i] += A[i, j] * x[j]",
        "--in",
        &ain,
        "--in",
        &xin,
    ];
    ok(&einsum);
    fails(&[&einsum[..], &["--max-kernel-size", "5"]].concat(), &over);
    ok(&["graph", "bfs", "--in", &gin]);
    fails(
        &["graph", "bfs", "--in", &gin, "--max-kernel-size", "5"],
        &over,
    );
    // A budget large enough runs; 0 and non-numbers are usage errors.
    let mut args = vec!["run", prog.as_str()];
    args.extend(tensor_args);
    args.extend(["--max-kernel-size", "100000"]);
    ok(&args);
    let mut bad = args.clone();
    *bad.last_mut().unwrap() = "0";
    let o = tessera(&bad);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("must be at least 1"));
}

#[test]
fn integer_outputs_of_float_values_are_computed_in_floats_and_checked_whole() {
    // A constant the kernel narrows before storing (`1 / 0` is Inf) was written as i64::MAX.
    fails(
        &["run", "y[] = 1 / 0", "--out", "y@Element(0)"],
        &[
            "tensor `y`",
            "computes Inf at index []",
            "cannot hold exactly",
        ],
    );
    // Float reductions into an integer output, an error in the library, are computed in
    // floats here and pass when the result is whole.
    assert_eq!(
        ok(&[
            "run",
            "s .= 0\nfor k = 0:3\n  s[] += 2.5\nend\n",
            "--out",
            "s@Element(0)"
        ])
        .trim(),
        "s = 10"
    );
    fails(
        &[
            "run",
            "s .= 0\nfor k = 0:2\n  s[] += 2.5\nend\n",
            "--out",
            "s@Element(0)",
        ],
        &["tensor `s`", "computes 7.5"],
    );
}

#[test]
fn convert_and_backend_errors_name_the_file_and_the_choices() {
    let d = Dir::new("convert-errors");
    let a = d.file("A.mtx", A_MTX);
    let out = d.path("out.npy");
    fails(
        &["convert", &a, &format!("{out}@SparseList(Element(0.0))")],
        &[
            &format!("{out}: bad format"),
            "1 dimensions but the tensor has 2",
        ],
    );
    assert!(!Path::new(&out).exists());
    fails(
        &[
            "bench",
            SPMV,
            "--in",
            &format!("A={a}"),
            "--backend",
            "eval",
        ],
        &[
            "unknown backend `eval` (tiered, jit or c;",
            "tessera run --backend eval",
        ],
    );
    fails(
        &["run", SPMV, "--backend", "nope"],
        &["unknown backend `nope` (tiered, jit, c or eval)"],
    );
    fails(
        &[
            "run",
            "for i = _\n  y[i] = 1.0\nend\n",
            "--out",
            "y",
            "--shape",
            "y=3x",
        ],
        &["--shape y: bad shape `3x`"],
    );
}

/// BED files and point sets load into real-valued formats, and `info --storage` shows their
/// pieces with open and closed ends.
#[test]
fn info_storage_shows_real_pieces_of_bed_files_and_point_sets() {
    let d = Dir::new("real-info");
    let bed = d.file("a.bed", "chr1\t10\t20\nchr2\t5\t5\nchr1\t15\t30\n");
    let info = ok(&["info", &bed, "--storage"]);
    assert!(info.starts_with("shape: 2x3xR\nstored: 3\n"), "{info}");
    assert!(info.contains("pieces: 3\n"), "{info}");
    // Half-open BED intervals; a zero-length record covers one base on each side.
    assert!(info.contains("  (0, 0, [10, 20)) = true\n"), "{info}");
    assert!(info.contains("  (0, 2, [15, 30)) = true\n"), "{info}");
    assert!(info.contains("  (1, 1, [4, 6)) = true\n"), "{info}");
    let info = ok(&[
        "info",
        &format!("{bed}@Dense(SparseList(SparseInterval(Element(0), coord=f64)))"),
        "--storage",
    ]);
    assert!(info.contains("level 4 Element: val [1, 1, 1]\n"), "{info}");
    fails(
        &[
            "info",
            &format!("{bed}@Dense(SparseList(SparseList(Pattern())))"),
        ],
        &["a.bed", "coord=f64"],
    );
    // A run list stores each record's fill runs too, out to ±Inf (Element(false): a Pattern
    // leaf cannot hold the fill runs' `false`).
    let runs = "Dense(SparseList(RunList(Element(false), coord=f64)))";
    let info = ok(&["info", &format!("{bed}@{runs}"), "--storage"]);
    // The fill runs are stored: 9 runs for 3 records.
    assert!(info.starts_with("shape: 2x3xR\nstored: 9\n"), "{info}");
    assert!(info.contains(&format!("format: {runs}\n")), "{info}");
    assert!(
        info.contains(
            "level 3 RunList: ptr [0, 3, 6, 9] right [10.0, 20.0, Inf, 15.0, 30.0, Inf, 4.0, \
             6.0, Inf] right_eps [-1, -1, 0, -1, -1, 0, -1, -1, 0]\n"
        ),
        "{info}"
    );
    assert!(info.contains("  (0, 0, [-inf, 10)) = false\n"), "{info}");
    assert!(info.contains("  (0, 0, [10, 20)) = true\n"), "{info}");
    assert!(info.contains("  (0, 0, [20, inf]) = false\n"), "{info}");
    fails(
        &[
            "info",
            &format!("{bed}@Dense(SparseList(RunList(Pattern(), coord=f64)))"),
        ],
        &["Pattern", "Element(false)"],
    );

    // Three points in the plane, as an N × 2 array: P[x, y, id].
    let points = d.path("p.npy");
    let mut f = std::fs::File::create(&points).unwrap();
    tessera::io::npy::write_npy(
        &mut f,
        &tessera::io::DenseData {
            shape: vec![3, 2],
            values: tessera::runtime::Buffer::F64(vec![1.5, 2.0, 0.25, -3.0, 1.5, 2.0].into()),
        },
    )
    .unwrap();
    let real2 = "SparseList(SparseList(SparseList(Pattern()), coord=f64), coord=f64)";
    let info = ok(&["info", &format!("{points}@{real2}"), "--storage"]);
    assert!(info.starts_with("shape: RxRx3\nstored: 3\n"), "{info}");
    assert!(info.contains("  ([0.25], [-3], 1) = true\n"), "{info}");
    assert!(info.contains("  ([1.5], [2], 2) = true\n"), "{info}");
    fails(
        &[
            "info",
            &format!("{points}@SparseList(SparseList(Pattern()), coord=f64)"),
        ],
        &["p.npy", "N × k"],
    );
}

/// BED inputs of one run share a numbering of chromosomes: `c` is the same chromosome in
/// `A` and `B` whatever order each file lists them in.
#[test]
fn bed_inputs_of_one_run_share_chromosome_numbers() {
    let d = Dir::new("bed-run");
    let a = d.file("a.bed", "chr1\t10\t20\nchr2\t5\t8\nchr1\t15\t30\n");
    let b = d.file(
        "b.bed",
        "chr2\t0\t100\nchr1\t18\t19\nchr1\t30\t40\nchr3\t1\t2\n",
    );
    // Overlap lengths: [10, 20) and [15, 30) each meet [18, 19) for 1; chr2's [5, 8) lies
    // in [0, 100) for 3.
    let program =
        "n .= 0\nfor c = _, i = _, j = _, x = _\n  n[] += A[c, i, x] * B[c, j, x] * d(x)\nend\n";
    let out = ok(&[
        "run",
        program,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("B={b}"),
        "--out",
        "n",
    ]);
    assert_eq!(out.trim(), "n = 5.0");
    // The same overlaps with `A`'s records as run lists: the fill runs out to ±Inf hold
    // `false`, so they add nothing.
    let out = ok(&[
        "run",
        program,
        "--in",
        &format!("A={a}@Dense(SparseList(RunList(Element(false), coord=f64)))"),
        "--in",
        &format!("B={b}"),
        "--out",
        "n",
    ]);
    assert_eq!(out.trim(), "n = 5.0");
}

#[test]
fn code_shows_atomic_folds_of_a_parallel_push() {
    // A reduction into a Dense output several iterations reach: the range lists the output as
    // copies or atomics, and its updates are printed as atomic (JIT IR) or compare-and-swap
    // loops (C source), which the chunks run when copies would not pay.
    let d = Dir::new("atomic_code");
    // A is 3x4: a push from its 3 rows reads 3 elements of x, and fills 4 of y.
    let (a, x3) = (d.file("A.mtx", A_MTX), d.file("x3.tns", "1 1\n2 2\n3 3\n"));
    let x4 = d.file("x.tns", X_TNS);
    let code = |backend: &str, program: &str, x: &str, y: &str| {
        ok(&[
            "code",
            program,
            "--in",
            &format!("A={a}@csr"),
            "--in",
            &format!("x={x}@dense"),
            "--out",
            "y@dense",
            "--shape",
            &format!("y={y}"),
            "--backend",
            backend,
        ])
    };
    let args = |backend: &str, program: &str| code(backend, program, &x3, "4");
    let push = "y .= 0\nfor j = parallel(_), i = _\n  y[i] += A[j, i] * x[j]\nend";
    let ir = args("jit", push);
    assert!(ir.contains("private y_val (Add or atomic)"), "{ir}");
    assert!(ir.contains("atomic y_val[i_entry] += "), "{ir}");
    let min = "y .= Inf\nfor j = parallel(_), i = _\n  y[i] <<min>>= A[j, i] + x[j]\nend";
    let ir = args("jit", min);
    assert!(
        ir.contains("(Min or atomic)") && ir.contains("atomic y_val["),
        "{ir}"
    );
    let c = args("c", min);
    assert!(c.contains("__atomic_compare_exchange_n"), "{c}");
    // An injective write needs neither.
    let rows = "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend";
    let ir = code("jit", rows, &x4, "3");
    assert!(!ir.contains("atomic"), "{ir}");
}

/// `--atomics auto|always|never` chooses how a parallel loop's reductions fold; a `min` push
/// writes the same result every way, on two threads (the result is exact for `min`).
#[test]
fn atomics_flag_chooses_the_fold_and_keeps_the_result() {
    let d = Dir::new("atomics_flag");
    let (a, x3) = (d.file("A.mtx", A_MTX), d.file("x3.tns", "1 1\n2 2\n3 3\n"));
    let min = "y .= Inf\nfor j = parallel(_), i = _\n  y[i] <<min>>= A[j, i] + x[j]\nend";
    let run = |mode: &str| {
        let y = d.path(&format!("y_{mode}.tns"));
        let o = tessera(&[
            "run",
            min,
            "--in",
            &format!("A={a}@csr"),
            "--in",
            &format!("x={x3}@dense"),
            "--out",
            &format!("y={y}@dense"),
            "--shape",
            "y=4",
            "--threads",
            "2",
            "--atomics",
            mode,
        ]);
        (o, y)
    };
    let out = |mode: &str| {
        let (o, y) = run(mode);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(y).unwrap()
    };
    let auto = out("auto");
    assert!(!auto.is_empty() && !auto.contains("inf"), "{auto}");
    assert_eq!(out("always"), auto);
    assert_eq!(out("never"), auto);
    let (bad, _) = run("sometimes");
    assert!(!bad.status.success());
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("auto, always or never"), "{e}");
}
