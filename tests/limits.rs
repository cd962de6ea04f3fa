//! Resource limits and the command line's consistency rules, end to end: hostile sizes are
//! refused with a message instead of an abort, outputs are written all or nothing (and an
//! interrupted run leaves no temporary file), and every command treats its flags alike.

mod common;

use common::cli::{Dir, ok, tessera};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera::io::{DenseData, FileData, read_file};
use tessera::runtime::Buffer;

/// The command fails (exit code 1 or 2, not a signal or an abort) with a one-line message
/// containing every `needle`; returns the message.
fn fails(args: &[&str], needles: &[&str]) -> String {
    let o = tessera(args);
    let err = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "tessera {args:?} should fail cleanly, got {:?}: {err}",
        o.status
    );
    assert!(!err.contains("0:0"), "`{err}` names no place");
    for n in needles {
        assert!(err.contains(n), "message `{err}` should mention `{n}`");
    }
    err
}

fn write_npy(path: &str, shape: Vec<usize>, values: Buffer) {
    let d = DenseData { shape, values };
    tessera::io::write_atomic(Path::new(path), |w| tessera::io::npy::write_npy(w, &d)).unwrap();
}

/// Names in the folder that are temporary output files.
fn temp_files(d: &Dir) -> Vec<String> {
    std::fs::read_dir(&d.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// The same command with `--max-memory LIMIT` added.
fn limited<'a>(args: &[&'a str], limit: &'a str) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend_from_slice(&["--max-memory", limit]);
    v
}

#[test]
fn hostile_file_headers_are_refused_before_allocating() {
    let d = Dir::new("limits-headers");
    let files = [
        (
            "rows.mtx",
            "%%MatrixMarket matrix coordinate real general\n\
             1000000000000000000 1000000000000000000 1\n1 1 1\n",
        ),
        (
            "array.mtx",
            "%%MatrixMarket matrix array real general\n1000000 1000000\n1\n",
        ),
        ("shape.tns", "# shape: 1000000000000x1000000000000\n1 1 1\n"),
        ("index.tns", "1000000000000000000 1 1\n"),
    ];
    for (name, text) in files {
        let p = d.file(name, text);
        // Under a limit every one is refused (above it the 64-bit sizes are refused anyway).
        fails(
            &limited(&["info", &p], "1G"),
            &[name, "needs", "--max-memory"],
        );
    }
    // A sparse vector of length 10^12 is small: it loads.
    let p = d.file("long.tns", "1000000000000 5\n");
    assert!(ok(&["info", &p, "--max-memory", "1M"]).contains("shape: 1000000000000"));
    // A .npy header claiming 10^5 x 10^5 doubles, with no data behind it.
    let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000), }\n";
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    npy.extend_from_slice(dict.as_bytes());
    let p = d.path("big.npy");
    std::fs::write(&p, npy).unwrap();
    fails(
        &limited(&["info", &p], "1G"),
        &["big.npy", "100000x100000", "needs"],
    );
}

/// CRC-32 of PNG chunks.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut body = kind.to_vec();
    body.extend_from_slice(data);
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32(&body).to_be_bytes());
}

#[test]
fn png_headers_and_decompression_bombs_are_held_to_the_limit() {
    let d = Dir::new("limits-png");
    // 69 bytes claiming 100000 x 100000 gray pixels.
    let mut tiny = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 100_000u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut tiny, b"IHDR", &ihdr);
    chunk(
        &mut tiny,
        b"IDAT",
        &[0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff],
    );
    chunk(&mut tiny, b"IEND", &[]);
    assert!(tiny.len() < 70, "{} bytes", tiny.len());
    let p = d.path("tiny.png");
    std::fs::write(&p, &tiny).unwrap();
    fails(
        &limited(&["info", &p], "1G"),
        &["tiny.png", "100000x100000", "needs"],
    );
    // A real 3000 x 3000 black image compresses to a few KiB and decodes to 9 MB.
    let mut bomb = Vec::new();
    {
        let mut e = png::Encoder::new(&mut bomb, 3000, 3000);
        e.set_color(png::ColorType::Grayscale);
        e.set_depth(png::BitDepth::Eight);
        let mut w = e.write_header().unwrap();
        w.write_image_data(&vec![0u8; 3000 * 3000]).unwrap();
    }
    assert!(bomb.len() < 100_000, "{} bytes", bomb.len());
    let p = d.path("bomb.png");
    std::fs::write(&p, &bomb).unwrap();
    fails(
        &limited(&["info", &p], "4M"),
        &["bomb.png", "3000x3000", "4.0 MiB"],
    );
    // Within the limit it decodes.
    assert!(ok(&["info", &p, "--max-memory", "1G"]).contains("shape: 3000x3000"));
}

#[test]
fn huge_outputs_are_refused_before_the_kernel_naming_the_tensor() {
    let d = Dir::new("limits-outputs");
    let x = d.file("x.tns", "1 1\n2 2\n");
    // --shape of 10^12 for a dense output.
    fails(
        &[
            "run",
            "for i = _\n  y[i] = 1.0\nend",
            "--out",
            "y",
            "--shape",
            "y=1000000000000",
            "--max-memory",
            "1G",
        ],
        &["tensor `y`", "1000000000000", "needs 7.3 TiB", "1.0 GiB"],
    );
    // A dense 10^6 x 10^6 output of a sparse input.
    let a = d.file(
        "a.mtx",
        "%%MatrixMarket matrix coordinate real general\n1000000 1000000 1\n1 1 2\n",
    );
    let c = d.path("c.npy");
    fails(
        &[
            "run",
            "for i = _, j = _\n  C[i, j] = A[i, j]\nend",
            "--in",
            &format!("A={a}"),
            "--out",
            &format!("C={c}"),
            "--max-memory",
            "1G",
        ],
        &["tensor `C`", "1000000x1000000", "needs"],
    );
    assert!(!Path::new(&c).exists());
    // The same output stored sparsely fits; written as .npy (dense) it does not, and that is
    // found before the kernel runs.
    fails(
        &[
            "run",
            "for i = _, j = _\n  C[i, j] = A[i, j]\nend",
            "--in",
            &format!("A={a}"),
            "--out",
            &format!("C={c}@csr"),
            "--max-memory",
            "100M",
        ],
        &["c.npy", "1000000x1000000", "needs"],
    );
    // An einsum outer product of two 10^5 vectors.
    let v = d.path("v.npy");
    write_npy(&v, vec![100_000], Buffer::F64(vec![1.0; 100_000].into()));
    fails(
        &[
            "einsum",
            "C[i, j] = a[i] * b[j]",
            "--in",
            &format!("a={v}"),
            "--in",
            &format!("b={v}"),
            "--max-memory",
            "1G",
        ],
        &["tensor `C`", "100000x100000", "needs"],
    );
    // `x` of --backend eval is a dense copy of a sparse input.
    fails(
        &[
            "run",
            "s .= 0\nfor i = _\n  s[] += x[i]\nend",
            "--in",
            &format!("x={}", d.file("long.tns", "1000000000000 5\n")),
            "--out",
            "s",
            "--backend",
            "eval",
            "--max-memory",
            "1G",
        ],
        &["tensor `x`", "needs"],
    );
    let _ = x;
}

#[test]
fn a_growing_sparse_output_fails_cleanly_at_the_limit() {
    let prog = "for i = _\n  y[i] = 1.0\nend";
    let args = [
        "run",
        prog,
        "--out",
        "y@SparseList(Element(0.0))",
        "--shape",
        "y=200000",
    ];
    for backend in ["jit", "eval"] {
        let mut v = args.to_vec();
        v.extend_from_slice(&["--backend", backend]);
        if backend == "eval" {
            // The evaluator's dense copy is what exceeds the limit there.
            fails(&limited(&v, "256K"), &["tensor `y`", "needs"]);
        } else {
            fails(&limited(&v, "256K"), &["cannot grow", "y", "memory limit"]);
        }
        // With room it runs.
        ok(&limited(&v, "64M"));
    }
}

#[test]
fn max_memory_is_a_flag_of_every_command_that_allocates() {
    let d = Dir::new("limits-flag");
    let a = d.file(
        "a.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n3 2 2\n",
    );
    let out = d.path("out.tns");
    let spmv = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j]\nend";
    let ina = format!("A={a}");
    let commands: [Vec<&str>; 7] = [
        vec!["run", spmv, "--in", &ina, "--out", "y"],
        vec!["code", spmv, "--in", &ina, "--out", "y"],
        vec![
            "bench", spmv, "--in", &ina, "--out", "y", "--warmup", "0", "--repeat", "1",
        ],
        vec!["einsum", "y[i] += A[i, j]", "--in", &ina],
        vec![
            "graph", "bfs", "--in", &ina, "--warmup", "1", "--repeat", "1",
        ],
        vec!["convert", &a, &out],
        vec!["info", &a],
    ];
    for c in &commands {
        ok(&limited(c, "1G"));
        fails(&limited(c, "lots"), &["--max-memory", "not a size"]);
        // Loading the 3 x 3 matrix alone takes more than 64 bytes.
        fails(&limited(c, "64"), &["needs", "64 bytes"]);
    }
}

#[test]
fn outputs_are_checked_before_the_kernel_and_written_all_or_nothing() {
    let d = Dir::new("limits-all-or-nothing");
    let x = d.file("x.tns", "1 1\n2 2\n3 3\n");
    let (c, bad_dir) = (d.path("c.npy"), d.path("missing/d.npy"));
    let prog = "for i = _\n  C[i] = x[i]\n  D[i] = x[i]\nend";
    let inx = format!("x={x}");
    let outc = format!("C={c}");
    std::fs::create_dir(d.path("dir.npy")).unwrap();
    for (outd, needle) in [
        (format!("D={bad_dir}"), "missing/d.npy"),
        (format!("D={}", d.path("d.xyz")), ".xyz"),
        (format!("D={}", d.path("dir.npy")), "is a directory"),
    ] {
        fails(
            &["run", prog, "--in", &inx, "--out", &outc, "--out", &outd],
            &[needle],
        );
        assert!(
            !Path::new(&c).exists(),
            "C was written though D could not be"
        );
        assert!(temp_files(&d).is_empty(), "{:?}", temp_files(&d));
    }
    // The checks come before the kernel: a kernel that would fail (an index outside `C`)
    // is never run when an output's type is wrong.
    let idx = d.file("i.tns", "1 7\n");
    let scatter = "for k = _\n  C[I[k]] = 1.0\nend";
    let args = |outd: &str| {
        vec![
            "run".to_string(),
            scatter.into(),
            "--in".into(),
            format!("I={idx}@Dense(Element(0))"),
            "--out".into(),
            outc.clone(),
            "--out".into(),
            outd.to_string(),
            "--shape".into(),
            "C=3".into(),
        ]
    };
    let with_d = "for k = _\n  C[I[k]] = 1.0\n  D[k] = 1.0\nend";
    let mut bad = args(&format!("D={}", d.path("d.xyz")));
    bad[1] = with_d.into();
    let refs: Vec<&str> = bad.iter().map(String::as_str).collect();
    fails(&refs, &[".xyz"]);
    let mut good = args(&format!("D={}", d.path("d.npy")));
    good[1] = with_d.into();
    let refs: Vec<&str> = good.iter().map(String::as_str).collect();
    fails(&refs, &["outside"]);
    assert!(temp_files(&d).is_empty());
    // convert checks the output's type before reading the input.
    fails(
        &["convert", "/nonexistent/in.mtx", &d.path("o.csv")],
        &[".csv"],
    );
    // graph opens its outputs before the runs.
    let g = d.file(
        "g.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 1\n",
    );
    fails(
        &[
            "graph",
            "bfs",
            "--in",
            &format!("A={g}"),
            "--out",
            &format!("parents={}", d.path("p.npy")),
            "--out",
            &format!("dist={bad_dir}"),
        ],
        &["missing/d.npy"],
    );
    assert!(!Path::new(&d.path("p.npy")).exists());
}

#[test]
fn an_interrupted_run_leaves_no_temporary_file() {
    let d = Dir::new("limits-signal");
    let x = d.path("x.npy");
    write_npy(&x, vec![1000], Buffer::F64(vec![0.5; 1000].into()));
    let c = d.path("c.npy");
    // A kernel run far more often than the test waits: the temporary output file exists from
    // before the first run until the last, and SIGTERM arrives in between.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run",
            "for i = _, j = _\n  C[i, j] = x[i] * x[j]\nend",
            "--in",
            &format!("x={x}"),
            "--out",
            &format!("C={c}"),
            "--repeat",
            "100000000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while temp_files(&d).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("tessera ended early: {status:?}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The shell's own `kill`, so no procps is needed.
    let kill = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap();
    assert!(kill.success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("tessera did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(temp_files(&d).is_empty(), "{:?}", temp_files(&d));
    assert!(!Path::new(&c).exists());
}

#[test]
fn repeat_zero_is_the_same_usage_error_everywhere() {
    let d = Dir::new("limits-repeat");
    let a = d.file(
        "a.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 1\n",
    );
    let ina = format!("A={a}");
    let spmv = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j]\nend";
    let commands: [Vec<&str>; 4] = [
        vec!["run", spmv, "--in", &ina, "--out", "y"],
        vec!["bench", spmv, "--in", &ina, "--out", "y"],
        vec!["einsum", "y[i] += A[i, j]", "--in", &ina],
        vec!["graph", "bfs", "--in", &ina],
    ];
    for c in &commands {
        let mut v = c.clone();
        v.extend_from_slice(&["--repeat", "0"]);
        let msg = fails(&v, &["--repeat", "must be at least 1"]);
        assert!(!msg.contains("NaN"));
    }
    // `code` has no such flag.
    let help = ok(&["code", "--help"]);
    for flag in ["--repeat", "--time", "--warmup"] {
        assert!(!help.contains(flag), "code --help lists {flag}:\n{help}");
    }
    assert!(help.contains("--backend") && help.contains("--max-memory"));
}

#[test]
fn repeated_names_and_stray_shapes_are_usage_errors() {
    let d = Dir::new("limits-names");
    let x = d.file("x.tns", "1 1\n2 2\n");
    let inx = format!("x={x}");
    let prog = "for i = _\n  y[i] = x[i]\nend";
    let run = |extra: &[&str]| {
        let mut v = vec!["run", prog, "--in", &inx, "--out", "y"];
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let check = |extra: &[&str], needles: &[&str]| {
        let args = run(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&refs, needles);
    };
    check(&["--in", &inx], &["--in x is given twice"]);
    check(&["--scalar", "x=3"], &["`x`", "--in", "--scalar"]);
    check(
        &["--scalar", "s=1", "--scalar", "s=2"],
        &["--scalar s is given twice"],
    );
    check(&["--out", "y=a.tns"], &["--out y is given twice"]);
    check(
        &["--shape", "q=3"],
        &["--shape q", "no output or workspace `q`"],
    );
    check(&["--shape", "x=3"], &["--shape x", "input"]);
    check(
        &["--shape", "y=2", "--shape", "y=2"],
        &["--shape y is given twice"],
    );
    fails(
        &["einsum", "y[i] = x[i]", "--in", &inx, "--in", &inx],
        &["--in x is given twice"],
    );
    // A shape for a tensor of the program is used.
    assert!(
        ok(&[
            "run",
            "for i = _\n  y[i] = 2.0\nend",
            "--out",
            "y",
            "--shape",
            "y=3"
        ])
        .is_empty()
    );
}

#[test]
fn program_text_and_file_names() {
    // Program text that is not a file name runs, `=` or not.
    assert_eq!(ok(&["run", "x .= 5", "--out", "x"]), "x = 5.0\n");
    assert_eq!(ok(&["run", "x .= 0; x[] += 2", "--out", "x"]), "x = 2.0\n");
    // Neither a file nor a program: both are said.
    fails(
        &["run", "prog.fin", "--out", "y"],
        &["no file `prog.fin`", "as program text", "syntax error"],
    );
    // Text that is surely a program gets its syntax error alone.
    let msg = fails(&["run", "x[] += ", "--out", "x"], &["<program>:1:"]);
    assert!(!msg.contains("no file"), "{msg}");
    // An output no index sizes names the program place.
    fails(
        &["run", "for i = _\n  y[i] = 1.0\nend", "--out", "y"],
        &[
            "<program>:2:",
            "could not infer the shape of `y`",
            "--shape y=",
        ],
    );
}

#[test]
fn float_results_into_integer_or_bool_outputs_must_be_exact() {
    let d = Dir::new("limits-exact");
    let x = d.file("x.tns", "1 3\n2 4\n");
    let inx = format!("x={x}");
    let out = d.path("y.tns");
    let half = "for i = _\n  y[i] = x[i] * 0.5\nend";
    for (format, ty) in [
        ("Dense(Element(0))", "i64"),
        ("SparseList(Element(false))", "bool"),
    ] {
        fails(
            &[
                "run",
                half,
                "--in",
                &inx,
                "--out",
                &format!("y={out}@{format}"),
            ],
            &["tensor `y`", ty, "1.5", "[0]"],
        );
        assert!(!Path::new(&out).exists());
    }
    // Exact values go through, in the requested type.
    ok(&[
        "run",
        "for i = _\n  y[i] = x[i] * 2.0\nend",
        "--in",
        &inx,
        "--out",
        &format!("y={out}@Dense(Element(0))"),
    ]);
    match read_file(Path::new(&out)).unwrap() {
        FileData::Coo(c) => assert_eq!(c.values, Buffer::I64(vec![6, 8].into())),
        other => panic!("{other:?}"),
    }
    // The float division of an integer input, into bools that are 0 or 1: exact.
    let bits = d.file("b.tns", "1 2\n2 0\n");
    let text = ok(&[
        "run",
        "for i = _\n  y[i] = b[i] / 2\nend",
        "--in",
        &format!("b={bits}@Dense(Element(0))"),
        "--out",
        &format!("y={out}@Dense(Element(false))"),
    ]);
    assert!(text.is_empty());
    // Loading floats into an integer format follows the same rule (into bool, nonzero is true).
    let a = d.file(
        "a.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 2.5\n",
    );
    fails(
        &["info", &format!("{a}@Dense(SparseList(Element(0)))")],
        &["a.mtx", "(2, 1)", "2.5", "i64"],
    );
}

#[test]
fn matrix_market_output_keeps_explicit_zeros_and_takes_vectors() {
    let d = Dir::new("limits-mtx");
    let z = d.file(
        "z.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 3 3\n1 1 0\n1 3 5\n2 2 0\n",
    );
    let back = d.path("back.mtx");
    ok(&["convert", &z, &back]);
    assert!(ok(&["info", &back]).contains("stored: 3"));
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/matrices/west0479.mtx");
    if real.exists() {
        ok(&["convert", real.to_str().unwrap(), &back]);
        assert!(ok(&["info", &back]).contains("stored: 1910"));
    } else {
        eprintln!("skipping west0479: {} not found", real.display());
    }
    // A vector is written as an n x 1 matrix, sparse or dense.
    let v = d.file("v.tns", "# shape: 4\n2 7\n4 -1\n");
    for (format, header) in [
        ("", "coordinate integer"),
        ("@Dense(Element(0))", "array integer"),
    ] {
        let out = d.path("v.mtx");
        ok(&["convert", &format!("{v}{format}"), &out]);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.starts_with(&format!("%%MatrixMarket matrix {header} general\n4 1")),
            "{text}"
        );
        assert!(ok(&["info", &out]).contains("shape: 4x1"));
    }
}

#[test]
fn u64_values_beyond_i64_are_refused() {
    let d = Dir::new("limits-u64");
    let p = d.path("u.npy");
    write_npy(&p, vec![3], Buffer::U64(vec![1, u64::MAX, 2].into()));
    fails(
        &["info", &p],
        &["u.npy", "element [1]", "18446744073709551615"],
    );
    let t = d.file("u.tns", "18446744073709551615 1\n");
    fails(&["info", &t], &["u.tns:1", "18446744073709551615"]);
}
