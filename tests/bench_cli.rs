//! `tessera bench` and `tessera einsum --json`: the one-line JSON report the benchmark scripts
//! parse, the output file of the last run, and the usage errors.

mod common;

use common::cli::{Dir, tessera};
use std::collections::BTreeMap;
use tessera::io::{FileData, read_file};

/// A flat JSON object of numbers and strings, as `bench --json` prints it.
#[derive(Debug, PartialEq)]
enum Value {
    Num(f64),
    Str(String),
}

fn parse_flat_json(line: &str) -> BTreeMap<String, Value> {
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not a JSON object: {line}"));
    obj.iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => Value::Str(s.clone()),
                serde_json::Value::Number(n) => Value::Num(n.as_f64().expect("a finite number")),
                other => panic!("`{other}` of `{k}` is neither a number nor a string"),
            };
            (k.clone(), v)
        })
        .collect()
}

fn num(m: &BTreeMap<String, Value>, k: &str) -> f64 {
    match m.get(k) {
        Some(Value::Num(v)) => *v,
        other => panic!("`{k}` should be a number, got {other:?}"),
    }
}

const A_MTX: &str = "%%MatrixMarket matrix coordinate real general\n3 4 5\n1 1 1.5\n1 3 2\n2 2 -1\n3 1 4\n3 4 0.25\n";
const X_TNS: &str = "1 1\n2 2\n3 3\n4 4\n";
const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

#[test]
fn bench_prints_one_json_line_and_writes_the_last_runs_output() {
    let d = Dir::new("json");
    let a = d.file("a.mtx", A_MTX);
    let x = d.file("x.tns", X_TNS);
    let prog = d.file("spmv.tess", SPMV);
    let y = d.path("y.npy");
    let o = tessera(&[
        "bench",
        &prog,
        "--in",
        &format!("A={a}@Dense(SparseBlockList(Element(0.0)))"),
        "--in",
        &format!("x={x}@dense"),
        "--out",
        &format!("y={y}"),
        "--warmup",
        "2",
        "--repeat",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line expected: {stdout}");
    let m = parse_flat_json(&stdout);
    assert_eq!(num(&m, "repeats"), 4.0);
    assert_eq!(num(&m, "warmup"), 2.0);
    // The default backend is tiered; a benchmark times its last tier (C with a compiler).
    assert_eq!(m.get("backend"), Some(&Value::Str("tiered".into())));
    assert!(
        matches!(m.get("tier"), Some(Value::Str(t)) if t == "c" || t == "jit"),
        "{stdout}"
    );
    let (min, median, max) = (num(&m, "min_ms"), num(&m, "median_ms"), num(&m, "max_ms"));
    assert!(0.0 <= min && min <= median && median <= max, "{stdout}");
    assert!(num(&m, "compile_ms") > 0.0, "compiled once: {stdout}");
    // The kernel ran 6 times on the same y: `y .= 0` makes the last run's output A x.
    match read_file(std::path::Path::new(&y)).unwrap() {
        FileData::Dense(t) => {
            let v: Vec<f64> = t.values.to_scalars().iter().map(|s| s.as_f64()).collect();
            assert_eq!(v, vec![7.5, -2.0, 5.0]);
        }
        FileData::Coo(_) => panic!("y should be dense"),
    }
    // Without --json: run's `time:` line.
    let o = tessera(&[
        "bench",
        &prog,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("x={x}@dense"),
        "--out",
        "y",
        "--repeat",
        "3",
    ]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with("time: compile_ms=") && text.contains("repeats=3"),
        "{text}"
    );
}

#[test]
fn bench_rejects_bad_repeat_and_backend_and_writes_nothing() {
    let d = Dir::new("errors");
    let a = d.file("a.mtx", A_MTX);
    let x = d.file("x.tns", X_TNS);
    let y = d.path("y.npy");
    let base = [
        "bench".to_string(),
        SPMV.to_string(),
        "--in".into(),
        format!("A={a}"),
        "--in".into(),
        format!("x={x}@dense"),
        "--out".into(),
        format!("y={y}"),
        "--json".into(),
    ];
    let with = |extra: &[&str]| {
        let mut v: Vec<&str> = base.iter().map(String::as_str).collect();
        v.extend_from_slice(extra);
        tessera(&v)
    };
    let o = with(&["--repeat", "0"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("'--repeat <REPEAT>': must be at least 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = with(&["--repeat", "many"]);
    assert!(!o.status.success(), "a non-number --repeat is refused");
    let o = with(&["--backend", "fortran"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown backend `fortran`"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());
    assert!(
        !std::path::Path::new(&y).exists(),
        "no output file after a failure"
    );
}

#[test]
fn einsum_json_reports_the_same_fields() {
    let d = Dir::new("einsum");
    let a = d.file("a.mtx", A_MTX);
    let c = d.path("c.mtx");
    let o = tessera(&[
        "einsum",
        "C[i, k] += A[i, j] * A[k, j]",
        "--in",
        &format!("A={a}"),
        "--out",
        &format!("C={c}"),
        "--warmup",
        "1",
        "--repeat",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = parse_flat_json(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(num(&m, "repeats"), 3.0);
    assert_eq!(num(&m, "warmup"), 1.0);
    assert!(std::path::Path::new(&c).exists());
}
