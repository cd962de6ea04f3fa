//! Schedule commands (`transforms::schedule`, issue 17): FreeTensor's legality cases written as
//! Tessera programs, each legal schedule run on the JIT, C and the evaluator over several
//! formats against the unscheduled program, each illegal one refused with the dependence it
//! would break and the program unchanged; random programs × random commands.

mod common;

use common::cases::c_runner;
use common::random::scattered;
use common::{fmt, formats_of, parse, run_eval, run_jit};
use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera::Error;
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::schedule::{carried_dependence, schedule};

type Tensors = BTreeMap<String, Tensor>;

/// Inputs: (name, formats to cycle through, shape); outputs and workspaces: (name, format,
/// shape), empty.
struct Setup<'a> {
    inputs: &'a [(&'a str, &'a [&'a str], &'a [usize])],
    outputs: &'a [(&'a str, &'a str, &'a [usize])],
}

const MATRICES: &[&str] = &[
    "Dense(SparseList(Element(0.0)))",
    "Dense(Dense(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "Dense(SparseRunList(Element(0.0)))",
];
const VECTORS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseByteMap(Element(0.0))",
];
const DENSE1: &str = "Dense(Element(0.0))";
const DENSE2: &str = "Dense(Dense(Element(0.0)))";
const SCALAR: &str = "Element(0.0)";

fn tensors(s: &Setup, variant: usize) -> Tensors {
    let mut out = BTreeMap::new();
    for (k, (n, fs, shape)) in s.inputs.iter().enumerate() {
        let f = fs[(variant + k) % fs.len()];
        out.insert(
            n.to_string(),
            scattered(&fmt(f), shape, 0.5, (variant * 31 + k) as u64),
        );
    }
    for (n, f, shape) in s.outputs {
        out.insert(n.to_string(), Tensor::empty(&fmt(f), shape).unwrap());
    }
    out
}

fn values(b: &Buffer) -> Vec<f64> {
    (0..b.len()).map(|k| b.get(k).as_f64()).collect()
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs())))
}

fn outputs_of(s: &Setup, ts: &Tensors) -> BTreeMap<String, Vec<f64>> {
    s.outputs
        .iter()
        .map(|(n, _, _)| (n.to_string(), values(&ts[*n].to_dense())))
        .collect()
}

fn run_on(backend: &str, p: &Program, s: &Setup, ts: &Tensors) -> BTreeMap<String, Vec<f64>> {
    match backend {
        "eval" => {
            let r = run_eval(p, ts).unwrap_or_else(|e| panic!("eval: {e}\n{p}"));
            s.outputs
                .iter()
                .map(|(n, _, _)| (n.to_string(), values(&r[*n])))
                .collect()
        }
        "jit" => {
            let mut ts = ts.clone();
            run_jit(p, &mut ts).unwrap_or_else(|e| panic!("jit: {e}\n{p}"));
            outputs_of(s, &ts)
        }
        _ => {
            let c: Runner = c_runner("schedule").expect("checked");
            let mut ts = ts.clone();
            let k = c
                .compile(p, &formats_of(&ts))
                .unwrap_or_else(|e| panic!("c: {e}\n{p}"));
            c.execute(&k, &mut ts)
                .unwrap_or_else(|e| panic!("c: {e}\n{p}"));
            outputs_of(s, &ts)
        }
    }
}

/// `sched` applies, the result prints and parses back, the input is unchanged, and on every
/// backend and format variant the scheduled program computes what the unscheduled one does.
fn legal(text: &str, sched: &str, s: &Setup) -> Program {
    let p = parse(text);
    let q = schedule(&p, sched).unwrap_or_else(|e| panic!("`{sched}` refused: {e}\n{text}"));
    assert_eq!(p, parse(text), "the input program changed");
    assert_eq!(parse(&q.to_string()), q, "does not print back:\n{q}");
    let mut backends = vec!["eval", "jit"];
    if c_runner("schedule").is_some() {
        backends.push("c");
    }
    for variant in 0..3 {
        let ts = tensors(s, variant);
        let want = run_on("eval", &p, s, &ts);
        for b in &backends {
            let got = run_on(b, &q, s, &ts);
            // Workspaces the schedule made (`.cache`, the per-iteration copies `fission`
            // expands: `t.i`) hold whatever their last iteration left; the loop-body local
            // they replace is no longer written.
            let (r, wr) = tessera::notation::visit::reads_writes(&q.body);
            let kept = |n: &String| !n.contains('.') && (r.contains(n) || wr.contains(n));
            for (n, w) in want.iter().filter(|(n, _)| kept(n)) {
                assert!(
                    close(w, &got[n]),
                    "`{sched}` on {b}, variant {variant}: `{n}` differs\n{w:?}\n{:?}\n{q}",
                    got[n]
                );
            }
        }
    }
    q
}

/// `sched` is refused with a schedule error; returns it.
fn refused(text: &str, sched: &str) -> Error {
    let p = parse(text);
    match schedule(&p, sched) {
        Ok(q) => panic!("`{sched}` accepted:\n{q}"),
        Err(e @ Error::Schedule { .. }) => {
            assert_eq!(p, parse(text));
            e
        }
        Err(e) => panic!("not a schedule error: {e}"),
    }
}

/// The direction of the broken dependence, as `(loop, direction)` pairs.
fn direction(e: &Error) -> Vec<(String, char)> {
    match e {
        Error::Schedule {
            dependence: Some(d),
            ..
        } => d.direction.clone(),
        _ => panic!("no dependence in {e}"),
    }
}

fn dirs(v: &[(&str, char)]) -> Vec<(String, char)> {
    v.iter().map(|(l, d)| (l.to_string(), *d)).collect()
}

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

fn spmv_setup() -> Setup<'static> {
    Setup {
        inputs: &[("A", MATRICES, &[10, 7]), ("x", VECTORS, &[7])],
        outputs: &[("y", DENSE1, &[10])],
    }
}

#[test]
fn spmv_split_merge_reorder_unroll_keep_results() {
    let s = spmv_setup();
    for sched in [
        "split(i, 4)",
        "split(i, 5)",
        "split(j, 3)",
        "reorder(j, i)",
        "merge(i, j)",
        "split(i, 4); reorder(j, i.1)",
        "split(i, 4); reorder(i.1, i.0)",
        "split(j, 2); merge(i, j.0)",
        "split(i, 4); unroll(i.1)",
        "split(i, 3); split(j, 2); reorder(i.0, j.0, i.1); reorder(j.1, i.1)",
    ] {
        legal(SPMV, sched, &s);
    }
    let q = legal(SPMV, "split(i, 4); reorder(j, i.1)", &s);
    assert!(
        q.to_string().contains("for i.0 = "),
        "derived names print: {q}"
    );
}

#[test]
fn fig11_stencil_dependence_and_the_rejected_reorder() {
    // FreeTensor Fig. 11: the write at (i, j) is read at (i + 2, j - 1).
    let text = "for i = 1:8, j = 1:8\n  A[i + 1, j] = A[i - 1, j + 1] + A[i - 1, j - 1]\nend\n";
    let e = refused(text, "reorder(j, i)");
    assert_eq!(direction(&e), dirs(&[("i", '<'), ("j", '>')]));
    let Error::Schedule {
        dependence: Some(d),
        command,
        pos,
        ..
    } = &e
    else {
        unreachable!()
    };
    assert_eq!((command.as_str(), *pos), ("reorder(j, i)", 0));
    assert_eq!(d.kind, "read after write");
    assert_eq!(d.source, "A[i + 1, j]");
    assert_eq!(d.sink, "A[i - 1, j + 1]");
    assert_eq!(d.source_span.to_string(), "2:3");
    let msg = e.to_string();
    assert!(msg.contains("(i: <, j: >)") && msg.contains("2:3"), "{msg}");
    // Order-preserving commands stay legal.
    schedule(&parse(text), "split(j, 2)").unwrap();
    // Without the cross-iteration reads there is nothing to break.
    schedule(
        &parse("for i = 1:8, j = 1:8\n  A[i + 1, j] = B[i - 1, j + 1]\nend\n"),
        "reorder(j, i)",
    )
    .unwrap();
}

#[test]
fn fig12_reorder_a_c_d_legal_b_illegal() {
    // (a) independent writes.
    legal(
        "for i = _, j = _\n  B[i, j] = A[i, j] + 1\nend\n",
        "reorder(j, i)",
        &Setup {
            inputs: &[("A", MATRICES, &[6, 5])],
            outputs: &[("B", DENSE2, &[6, 5])],
        },
    );
    // (c) a reduction: its instances commute.
    legal(
        "a .= 0\nfor i = _, j = _\n  a[] += A[i, j]\nend\n",
        "reorder(j, i)",
        &Setup {
            inputs: &[("A", MATRICES, &[6, 5])],
            outputs: &[("a", SCALAR, &[])],
        },
    );
    // (d) a workspace declared inside `j`: private to each iteration.
    legal(
        "C .= 0\nfor i = 0:4, j = 0:3\n  t .= 0\n  for k = 0:5\n    t[k] = A[i, k] * B[k, j]\n  end\n  for k = 0:5\n    C[i, j] += t[k]\n  end\nend\n",
        "reorder(j, i)",
        &Setup {
            inputs: &[("A", MATRICES, &[5, 6]), ("B", MATRICES, &[6, 4])],
            outputs: &[("C", DENSE2, &[5, 4]), ("t", DENSE1, &[6])],
        },
    );
    // (b) a = a * b + 1 orders every pair of iterations.
    let e = refused(
        "for i = _, j = _\n  a[] = a[] * A[i, j] + 1\nend\n",
        "reorder(j, i)",
    );
    assert_eq!(direction(&e), dirs(&[("i", '<'), ("j", '>')]));
    // The workspace of (d) is not private once it outlives the nest.
    refused(
        "for i = 0:4, j = 0:3\n  t[] = A[i, j]\nend\n",
        "reorder(j, i)",
    );
}

#[test]
fn fig13_loop_carried_dependences() {
    // What `parallelize` asks: a, d, e carry nothing (d and e are reductions); b does.
    let carried = |text: &str| carried_dependence(&parse(text), "i", false).unwrap();
    assert!(carried("for i = _\n  y[i] = x[i] * 2\nend\n").is_none());
    assert!(carried("for i = _\n  a[] += B[i]\nend\n").is_none());
    assert!(carried("for i = _\n  a[I[i]] += B[i]\nend\n").is_none());
    let d = carried("for i = _\n  a[] = a[] * 2 + B[i]\nend\n").expect("carried");
    assert_eq!(d.direction, dirs(&[("i", '<')]));
    // A CSR loop needs no hint: `y[i]` is one element per row whatever the format.
    assert!(carried(SPMV).is_none());
    // A write through data is conservatively carried.
    assert!(carried("for i = _\n  a[I[i]] = B[i]\nend\n").is_some());
    // Distinct rows of an indirect read: `A[I[i], j]` is different for different `j`.
    assert!(
        carried_dependence(
            &parse("for i = _, j = _\n  C[I[i], j] = B[i, j]\nend\n"),
            "j",
            false
        )
        .unwrap()
        .is_none()
    );
}

#[test]
fn fuse_cases_of_freetensor_tests() {
    let prod_cons = "for i = 0:3, j = 0:7\n  B[i, j] = A[i, j] * 2\nend\nfor i = 0:3, j = 0:7\n  C[i, j] = B[i, j] + 1\nend\n";
    // Producer then consumer of the same element: legal (the lifecycle pass then asks for a
    // workspace, since `B` is read and written inside one loop).
    let q = schedule(&parse(prod_cons), "fuse(i#1, i#2); fuse(j#1, j#2)").unwrap();
    assert!(
        q.to_string()
            .contains("for i = 0:3, j = 0:7\n  B[i, j] = A[i, j] * 2\n  C[i, j] = B[i, j] + 1\n"),
        "{q}"
    );
    // A consumer of `B[i, 7 - j]` reads what later iterations of the producer write.
    let rev = "for i = 0:3\n  for j = 0:7\n    B[i, j] = A[i, j] * 2\n  end\n  for j = 0:7\n    C[i, j] = B[i, 7 - j]\n  end\nend\n";
    let e = refused(rev, "fuse(j#1, j#2)");
    assert_eq!(direction(&e), dirs(&[("i", '='), ("j", '<')]));
    // Different lengths, and loops that are not adjacent.
    let e = refused(
        "for i = 0:7\n  y[i] = x[i]\nend\nfor i = 0:6\n  z[i] = x[i]\nend\n",
        "fuse(i#1, i#2)",
    );
    assert!(e.to_string().contains("extents differ"), "{e}");
    let e = refused(
        "for i = 0:7\n  y[i] = x[i]\nend\ns[] = 1\nfor i = 0:7\n  z[i] = x[i]\nend\n",
        "fuse(i#1, i#2)",
    );
    assert!(e.to_string().contains("follow"), "{e}");
    // Independent loops fuse and run.
    legal(
        "for i = 0:9\n  y[i] = x[i] * 2\nend\nfor k = 0:9\n  z[k] = x[k] + 1\nend\n",
        "fuse(i, k)",
        &Setup {
            inputs: &[("x", VECTORS, &[10])],
            outputs: &[("y", DENSE1, &[10]), ("z", DENSE1, &[10])],
        },
    );
}

#[test]
fn swap_and_fission() {
    let two = "for i = _\n  y[i] = x[i] * 2\n  z[i] = x[i] + 1\nend\n";
    let s = Setup {
        inputs: &[("x", VECTORS, &[9])],
        outputs: &[("y", DENSE1, &[9]), ("z", DENSE1, &[9])],
    };
    legal(two, "swap(y, z)", &s);
    legal(two, "swap(@2, @3)", &s);
    legal(two, "fission(i, after y)", &s);
    legal(two, "fission(i, after y); fuse(i#1, i#2)", &s);
    // A workspace filled then read in one iteration: swap and fission break it.
    let ws = "for i = _\n  t .= 0\n  for j = _\n    t[] += A[i, j]\n  end\n  y[i] = t[] * 2\nend\n";
    let e = refused(ws, "swap(@3, y)");
    assert_eq!(direction(&e), dirs(&[("i", '=')]));
    // Fission expands such a workspace into one per iteration (`t.i[i]`), declared before
    // the loops, unless something after the loop reads its last value.
    let q = legal(
        ws,
        "fission(i, after @3)",
        &Setup {
            inputs: &[("A", MATRICES, &[7, 6])],
            outputs: &[
                ("y", DENSE1, &[7]),
                ("t", SCALAR, &[]),
                ("t.i", DENSE1, &[7]),
            ],
        },
    );
    assert!(
        q.to_string().starts_with(
            "t.i .= 0\nfor i = _, j = _\n  t.i[i] += A[i, j]\nend\nfor i = _\n  y[i] = t.i[i] * 2"
        ),
        "{q}"
    );
    let read_after = format!("{ws}z[] = t[]\n");
    let e = refused(&read_after, "fission(i, after @3)");
    assert!(e.to_string().contains("`t[]`"), "{e}");
    let twice = "for i = _\n  t .= 0\n  for j = _\n    t[] += A[i, j]\n  end\n  y[i] = t[] * 2\n  t .= 1\n  z[i] = t[]\nend\n";
    let e = refused(twice, "fission(i, after @3)");
    assert!(e.to_string().contains("`t"), "{e}");
    legal(
        ws,
        "split(i, 3)",
        &Setup {
            inputs: &[("A", MATRICES, &[7, 6])],
            outputs: &[("y", DENSE1, &[7]), ("t", SCALAR, &[])],
        },
    );
    let e = refused(two, "swap(y, x)");
    assert!(e.to_string().contains("no statement"), "{e}");
}

#[test]
fn freetensor_117_statements_between_loops() {
    // A statement between the loops would run once per iteration of other loops.
    let text = "for i = _\n  z[i] = x[i]\n  for j = _\n    B[i, j] = A[i, j]\n  end\nend\n";
    let e = refused(text, "reorder(j, i)");
    assert!(e.to_string().contains("z[i] = x[i]"), "{e}");
    assert!(e.to_string().contains("2:3"), "{e}");
}

#[test]
fn freetensor_466_definitions_between_loops() {
    // A `let` between the loops moves into the innermost body.
    let text = "for i = _\n  let s = x[i] * 2\n    for j = _\n      B[i, j] = A[i, j] * s\n    end\n  end\nend\n";
    let q = legal(
        text,
        "reorder(j, i)",
        &Setup {
            inputs: &[("A", MATRICES, &[6, 5]), ("x", VECTORS, &[6])],
            outputs: &[("B", DENSE2, &[6, 5])],
        },
    );
    assert!(
        q.to_string().starts_with("for j = _, i = _\n  let s"),
        "{q}"
    );
    // ... unless the nest writes what it reads.
    let bad =
        "for i = _\n  let s = c[]\n    for j = _\n      c[] += A[i, j] * s\n    end\n  end\nend\n";
    let e = refused(bad, "reorder(j, i)");
    assert!(e.to_string().contains("`let s`"), "{e}");
}

#[test]
fn freetensor_474_dependences_carried_by_outer_loops() {
    // The dependence between the statements is carried by `k`: swapping them inside one
    // iteration of `k` keeps it.
    let text = "for k = 1:3\n  A[k, 0] = B[k] * 2\n  C[k] = A[k - 1, 0]\nend\n";
    schedule(&parse(text), "swap(A, C)").unwrap();
    schedule(&parse(text), "fission(k, after A)").unwrap();
    let same = "for k = 1:3\n  A[k, 0] = B[k] * 2\n  C[k] = A[k, 0]\nend\n";
    let e = refused(same, "swap(A, C)");
    assert_eq!(direction(&e), dirs(&[("k", '=')]));
    // Fuse under an outer loop: the outer loop carries the workspace's reuse.
    let outer = "for k = 0:3\n  for i = 0:5\n    t[i] = A[k, i] * 2\n  end\n  for i = 0:5\n    D[k, i] = t[i] + 1\n  end\nend\n";
    schedule(&parse(outer), "fuse(i#1, i#2)").unwrap();
    let shifted = "for k = 0:3\n  for i = 0:5\n    t[i] = A[k, i] * 2\n  end\n  for i = 0:5\n    D[k, i] = t[5 - i] + 1\n  end\nend\n";
    refused(shifted, "fuse(i#1, i#2)");
    // Fission of the inner loops' parent keeps the order of `k`'s iterations only if nothing
    // flows back: here `t` is reused by the next `k`.
    refused(outer, "fission(k, after @2)");
}

#[test]
fn names_addressing_and_command_errors() {
    let two = "for i = 0:3\n  y[i] = x[i]\nend\nfor i = 0:3\n  z[i] = x[i]\nend\n";
    let e = refused(two, "split(i, 2)");
    assert!(e.to_string().contains("i#1"), "{e}");
    let q = schedule(&parse(two), "split(i#2, 2)").unwrap();
    assert!(
        q.to_string().contains("for i.0 = 0:1, i.1 = 0:1\n  z["),
        "{q}"
    );
    let e = refused(two, "split(q, 2)");
    assert!(e.to_string().contains("no loop `q`"), "{e}");
    let e = refused(two, "unroll(i#1); reorder(i, j)");
    let Error::Schedule { pos, .. } = e else {
        unreachable!()
    };
    assert_eq!(pos, 13);
    let e = refused("for i = 0:99\n  y[i] = x[i]\nend\n", "unroll(i)");
    assert!(e.to_string().contains("at most"), "{e}");
    // A name the program already uses is not taken over.
    refused("for i = 0:3\n  y[i] = x[i] + i.0[]\nend\n", "split(i, 2)");
}

#[test]
fn split_of_sparse_accesses_falls_back_to_random_access() {
    // `A[i.0 * 4 + i.1, j]` is not concordant with a sparse root level; the lowering reads it
    // by random access and gets the same result on every format.
    let s = Setup {
        inputs: &[
            (
                "A",
                &[
                    "SparseList(SparseList(Element(0.0)))",
                    "SparseDict(SparseList(Element(0.0)))",
                    "SparseByteMap(Dense(Element(0.0)))",
                ],
                &[11, 6],
            ),
            ("x", VECTORS, &[6]),
        ],
        outputs: &[("y", DENSE1, &[11])],
    };
    legal(SPMV, "split(i, 4)", &s);
    legal(SPMV, "split(j, 4); reorder(j.1, j.0)", &s);
    legal(SPMV, "merge(i, j)", &s);
}

#[test]
fn fig14_cache_and_cache_reduce() {
    // FreeTensor Fig. 14: caching `a` around loop `j` gives an m-element cache of `a[i + j]`.
    let conv = "y .= 0\nfor i = 0:5\n  for j = 0:3\n    y[i] += a[i + j] * w[j]\n  end\nend\n";
    let q = legal(
        conv,
        "cache(i, a)",
        &Setup {
            inputs: &[("a", VECTORS, &[9]), ("w", VECTORS, &[4])],
            outputs: &[("y", DENSE1, &[6]), ("a.cache", DENSE1, &[4])],
        },
    );
    let text = q.to_string();
    assert!(text.contains("a.cache[j] = a[i + j]"), "{text}");
    assert!(text.contains("y[i] += a.cache[j] * w[j]"), "{text}");
    let q = legal(
        conv,
        "cache_reduce(i, y)",
        &Setup {
            inputs: &[("a", VECTORS, &[9]), ("w", VECTORS, &[4])],
            outputs: &[("y", DENSE1, &[6]), ("y.cache", SCALAR, &[])],
        },
    );
    assert!(q.to_string().contains("y[i] += y.cache[]"), "{q}");
    legal(
        SPMV,
        "cache_reduce(i, y)",
        &Setup {
            inputs: &[("A", MATRICES, &[10, 7]), ("x", VECTORS, &[7])],
            outputs: &[("y", DENSE1, &[10]), ("y.cache", SCALAR, &[])],
        },
    );
    // A plain read of the reduced tensor, and indices that do not bound a region.
    refused(
        "for i = 0:5, j = 0:3\n  y[i] += x[j]\n  z[i] = y[i]\nend\n",
        "cache_reduce(i, y)",
    );
    refused(
        "for i = 0:5, j = 0:3\n  y[i] += x[2 * j]\nend\n",
        "cache(i, x)",
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random programs of the differential generator × random schedule commands: whenever a
    /// command is accepted, the scheduled program computes what the unscheduled one does on
    /// the evaluator and the JIT (`tessera_fuzz::schedule` panics otherwise).
    #[test]
    fn random_programs_and_schedules(bytes in proptest::collection::vec(any::<u8>(), 32..400)) {
        tessera_fuzz::schedule::check(&bytes, false);
    }
}

/// The same over fixed random inputs, C included, counting the cases where a command was
/// accepted and values compared: the sample must not be mostly refusals.
#[test]
fn random_schedules_are_mostly_checked() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let (mut checked, total) = (0, 200);
    for k in 0..total {
        let n = rng.random_range(32..400);
        let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        if tessera_fuzz::schedule::check(&bytes, k % 20 == 0) {
            checked += 1;
        }
    }
    eprintln!("{checked} of {total} random schedules applied and compared");
    assert!(checked * 4 >= total, "only {checked} of {total} compared");
}

#[test]
fn parallelize_marks_loops_without_carried_dependences() {
    let s = spmv_setup();
    // Rows of SpMV are independent; the loop runs on threads with the same results.
    let q = legal(SPMV, "parallelize(i)", &s);
    assert!(q.to_string().contains("for i = parallel(_)"), "{q}");
    // The transposed product reduces into shared `y[j]`: a reduction, so legal (privatised).
    let t = Setup {
        inputs: &[("A", MATRICES, &[10, 7]), ("x", VECTORS, &[10])],
        outputs: &[("y", DENSE1, &[7])],
    };
    let transposed = "y .= 0\nfor i = _, j = _\n  y[j] += A[i, j] * x[i]\nend\n";
    legal(transposed, "parallelize(i)", &t);
    // After a split, the outer part can be parallel.
    legal(SPMV, "split(i, 4); parallelize(i.0)", &s);
    // A recurrence is refused with the dependence.
    let e = refused(
        "for i = 1:8\n  a[i] = a[i - 1] + b[i]\nend\n",
        "parallelize(i)",
    );
    assert_eq!(direction(&e), dirs(&[("i", '<')]));
}

// ---- vectorize(i) (issues 17 and 18) ----

/// Lengths around the lanes: empty, one, one full vector, odd, a tail of one, longer.
const LENGTHS: &[usize] = &[0, 1, 2, 3, 7, 64, 1001];

fn dense_vector(leaf: &str, values: Buffer) -> Tensor {
    let n = values.len();
    Tensor::from_dense(&fmt(&format!("Dense({leaf})")), &[n], &values).unwrap()
}

/// Floats with the values lanes must get right: zeros of both signs against infinities
/// (the strong zero), NaN (min and max propagate it), and ordinary values.
fn float_values(n: usize, seed: u64, special: bool) -> Vec<f64> {
    (0..n)
        .map(|k| {
            let h = (k as u64 * 2654435761 + seed * 97) % 1000;
            match (special, h % 13) {
                (true, 0) => 0.0,
                (true, 1) => -0.0,
                (true, 2) => f64::INFINITY,
                (true, 3) if h.is_multiple_of(3) => f64::NAN,
                _ => (h as f64 - 500.0) / 37.0,
            }
        })
        .collect()
}

fn int_values(n: usize, seed: u64) -> Vec<i64> {
    (0..n)
        .map(|k| ((k as i64 * 7919 + seed as i64 * 31) % 2001) - 1000)
        .collect()
}

/// Equal bit for bit (every NaN equal), or, with `sum`, within rounding: vectorised float
/// sums are reassociated (lane 0 adds the even iterations, lane 1 the odd ones).
fn same(a: &[f64], b: &[f64], sum: bool) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.is_nan() && y.is_nan())
                || x.to_bits() == y.to_bits()
                || (sum && (x - y).abs() <= 1e-12 * (1.0 + x.abs().max(y.abs())))
        })
}

/// `program` with `vectorize(i)` on the JIT (which must run it in lanes) and on C, against
/// the unscheduled program on the evaluator: every output equal (sums within rounding).
fn vector_agree(program: &str, ts: &Tensors, outs: &[&str], sums: &[&str]) {
    let p = parse(program);
    let q = schedule(&p, "vectorize(i)").unwrap_or_else(|e| panic!("{e}\n{program}"));
    assert!(q.to_string().contains("for i = vectorize("), "{q}");
    assert_eq!(parse(&q.to_string()), q);
    let want = run_eval(&p, ts).unwrap_or_else(|e| panic!("eval: {e}\n{program}"));
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("schedule") {
        runners.push(("c", c));
    }
    for (name, r) in runners {
        let c = r
            .compile(&q, &formats_of(ts))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{q}"));
        if name == "jit" {
            let code = c.ir.to_string();
            assert!(
                code.contains("vectorised: the JIT runs 2 iterations per instruction"),
                "not in lanes:\n{code}"
            );
        }
        let mut got = ts.clone();
        r.execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{q}"));
        for o in outs {
            let (w, g) = (values(&want[*o]), values(&got[*o].to_dense()));
            assert!(
                same(&w, &g, sums.contains(o)),
                "{name}, n = {}: `{o}` differs\n{w:?}\n{g:?}\n{q}",
                ts.values()
                    .map(|t| t.shape.first().copied().unwrap_or(0))
                    .max()
                    .unwrap_or(0)
            );
        }
    }
}

fn float_inputs(n: usize, special: bool) -> Tensors {
    let mut ts = BTreeMap::new();
    for (k, name) in ["a", "b", "c"].iter().enumerate() {
        let v = float_values(n, k as u64 + 1, special);
        ts.insert(
            name.to_string(),
            dense_vector("Element(0.0)", Buffer::F64(v.into())),
        );
    }
    ts
}

fn with_outputs(mut ts: Tensors, outs: &[(&str, &str, &[usize])]) -> Tensors {
    for (n, f, shape) in outs {
        ts.insert(n.to_string(), Tensor::empty(&fmt(f), shape).unwrap());
    }
    ts
}

#[test]
fn vectorize_elementwise_and_dot_product_keep_results() {
    let ew = "for i = _\n  y[i] = a[i] * b[i] + c[i]\nend\n";
    let dot = "for i = _\n  s[] += a[i] * b[i]\nend\n";
    // `sq` is a min of positive values from above: a wrong identity in the lanes would show.
    let extremes = "sq .= 1e300\nfor i = _\n  lo[] <<min>>= a[i] - b[i]\n  hi[] <<max>>= a[i] * c[i]\n  sq[] <<min>>= a[i] * a[i] + 1.0\n  y[i] = max(a[i], -c[i]) / b[i]\nend\n";
    for &n in LENGTHS {
        for special in [false, true] {
            let ts = float_inputs(n, special);
            vector_agree(
                ew,
                &with_outputs(ts.clone(), &[("y", DENSE1, &[n])]),
                &["y"],
                &[],
            );
            vector_agree(
                dot,
                &with_outputs(ts.clone(), &[("s", SCALAR, &[])]),
                &["s"],
                &["s"],
            );
            let outs: &[(&str, &str, &[usize])] = &[
                ("lo", SCALAR, &[]),
                ("hi", SCALAR, &[]),
                ("sq", SCALAR, &[]),
                ("y", DENSE1, &[n]),
            ];
            let ts = with_outputs(ts, outs);
            vector_agree(extremes, &ts, &["lo", "hi", "sq", "y"], &[]);
        }
    }
}

#[test]
fn vectorize_integer_loops_are_exact() {
    // i64 and i32 inputs (i32 lanes load two elements widened), sums, products, min, max,
    // bitwise reductions and an elementwise store: every result exact.
    let program = "for i = _\n  t[] += p[i] * q[i]\n  m[] <<max>>= p[i] - q[i]\n  l[] <<min>>= p[i] + q[i]\n  o[] |= p[i] & q[i]\n  z[i] = p[i] * 3 - q[i]\nend\n";
    for &n in LENGTHS {
        for leaf in ["Element(0)", "Element(0, i32)"] {
            let mut ts = BTreeMap::new();
            ts.insert(
                "p".to_string(),
                dense_vector(leaf, Buffer::I64(int_values(n, 1).into())),
            );
            ts.insert(
                "q".to_string(),
                dense_vector("Element(0)", Buffer::I64(int_values(n, 2).into())),
            );
            let ts = with_outputs(
                ts,
                &[
                    ("t", "Element(0)", &[]),
                    ("m", "Element(0)", &[]),
                    ("l", "Element(0)", &[]),
                    ("o", "Element(0)", &[]),
                    ("z", "Dense(Element(0))", &[n]),
                ],
            );
            vector_agree(program, &ts, &["t", "m", "l", "o", "z"], &[]);
        }
    }
}

#[test]
fn vectorize_refusals_name_the_dependence() {
    // A recurrence: the read after write between consecutive iterations.
    let e = refused(
        "for i = 1:8\n  a[i] = a[i - 1] + x[i]\nend\n",
        "vectorize(i)",
    );
    assert_eq!(direction(&e), dirs(&[("i", '<')]));
    assert!(e.to_string().contains("`a[i - 1]`"), "{e}");
    // Not innermost.
    let e = refused(SPMV, "vectorize(i)");
    assert!(e.to_string().contains("not innermost"), "{e}");
    // A reduction into elements the loop's index picks (a histogram): legal on threads
    // (privatised copies), but lanes would update one element at once.
    let hist = "for i = _\n  h[i % 4] += x[i]\nend\n";
    assert!(schedule(&parse(hist), "parallelize(i)").is_ok());
    let e = refused(hist, "vectorize(i)");
    assert!(e.to_string().contains("`h[i % 4]`"), "{e}");
    // A reducer lanes cannot combine.
    refused(
        "for i = _\n  s[] <<choose(0.0)>>= x[i]\nend\n",
        "vectorize(i)",
    );
    // A loop runs on threads or in lanes.
    let e = refused(
        "for i = _\n  y[i] = x[i]\nend\n",
        "parallelize(i); vectorize(i)",
    );
    assert!(e.to_string().contains("parallel"), "{e}");
    // The dense inner loop of a dense matrix is fine.
    let s = Setup {
        inputs: &[("A", &[DENSE2], &[6, 5]), ("x", &[DENSE1], &[5])],
        outputs: &[("y", DENSE1, &[6])],
    };
    legal(SPMV, "vectorize(j)", &s);
}

/// A reduction whose elements no two iterations share (`y[i, o] += ...`: a row of a matrix
/// product) runs in lanes as a plain update per lane; reductions two iterations meet in are
/// refused with the pair named.
#[test]
fn vectorize_takes_reductions_into_elements_of_their_own() {
    let rows = "for i = _, f = _\n  for o = _\n    y[i, o] += x[i, f] * w[f, o]\n  end\nend\n";
    let s = Setup {
        inputs: &[("x", &[DENSE2], &[4, 3]), ("w", &[DENSE2], &[3, 9])],
        outputs: &[("y", DENSE2, &[4, 9])],
    };
    let q = legal(rows, "vectorize(o)", &s);
    assert!(q.to_string().contains("o = vectorize(_)"), "{q}");
    // A row starts at `i * 9`: still contiguous, so the JIT runs it in lanes.
    let code = Runner::jit()
        .compile(&q, &formats_of(&tensors(&s, 0)))
        .unwrap()
        .ir
        .to_string();
    assert!(
        code.contains("vectorised: the JIT runs 2 iterations per instruction"),
        "{code}"
    );
    // Iteration o's second update and iteration o + 1's first reach one element.
    let e = refused(
        "for o = 0:7\n  y[o] += x[o]\n  y[o + 1] += x[o]\nend\n",
        "vectorize(o)",
    );
    assert_eq!(direction(&e), dirs(&[("o", '<')]));
    assert!(e.to_string().contains("`y[o"), "{e}");
    refused("for o = _\n  y[o % 2] += x[o]\nend\n", "vectorize(o)");
}

/// The shape of a gradient's backward loop: folds into a local beside updates of a row
/// (`ir::distribute` splits them). Vectorised, C runs the fold loop as an OpenMP `simd`
/// reduction (the sum reassociated, as the JIT's lanes do) and the results agree with the
/// evaluator within rounding on every backend, for rows shorter than a vector, exactly one,
/// and longer, with a tail.
#[test]
fn vectorised_folds_run_as_simd_reductions_on_c() {
    let text = "for i = _\n  s .= 0.0\n  for o = _\n    s[] += x[i, o] * w[o]\n    dw[o] += x[i, o] * g[i]\n  end\n  y[i] = s[]\nend\n";
    for n in [1, 3, 8, 37] {
        let s = Setup {
            inputs: &[
                ("x", &[DENSE2], &[5, n]),
                ("w", &[DENSE1], &[n]),
                ("g", &[DENSE1], &[5]),
            ],
            outputs: &[
                ("dw", DENSE1, &[n]),
                ("y", DENSE1, &[5]),
                ("s", SCALAR, &[]),
            ],
        };
        legal(text, "vectorize(o)", &s);
    }
    if c_runner("schedule").is_some() {
        use common::cli::{Dir, ok};
        let d = Dir::new("vectorize-folds");
        let x = d.file("x.tns", "# shape: 5x37\n1 1 1.5\n5 37 2.5\n");
        let w = d.file("w.tns", "# shape: 37\n3 1.0\n");
        let g = d.file("g.tns", "# shape: 5\n2 1.0\n");
        let q = schedule(&parse(text), "vectorize(o)").unwrap().to_string();
        let ins = [
            format!("x={x}@Dense(Dense(Element(0.0)))"),
            format!("w={w}@Dense(Element(0.0))"),
            format!("g={g}@Dense(Element(0.0))"),
        ];
        let code = ok(&[
            "code",
            &q,
            "--in",
            &ins[0],
            "--in",
            &ins[1],
            "--in",
            &ins[2],
            "--out",
            "dw",
            "--out",
            "y",
            "--backend",
            "c",
        ]);
        assert!(code.contains("#pragma omp simd reduction(+:"), "{code}");
        // The loop of stores alone (`y`'s) is a `simd` loop too, without clauses.
        assert!(
            code.lines().any(|l| l.trim() == "#pragma omp simd"),
            "{code}"
        );
        // A checked copy of a loop may return a fault: it is never a `simd` loop.
        let lines: Vec<&str> = code.lines().collect();
        for (n, l) in lines.iter().enumerate() {
            if l.contains("#pragma omp simd") {
                // The loop: from its `for` line to the brace closing it.
                let mut depth = 0i64;
                for body in &lines[n + 1..] {
                    assert!(!body.contains("return"), "a simd loop may fault:\n{code}");
                    depth += body.matches('{').count() as i64 - body.matches('}').count() as i64;
                    if depth <= 0 {
                        break;
                    }
                }
            }
        }
    }
}

/// A program may say `vectorize(_)` itself; the compiler checks its dependences as the
/// schedule command does, since the backends take the mark as a promise.
#[test]
fn a_vectorised_loop_in_the_text_is_checked_when_compiled() {
    let p = parse("for i = vectorize(1:7)\n  a[i] = a[i - 1] + x[i]\nend\n");
    let mut ts = BTreeMap::new();
    ts.insert(
        "x".to_string(),
        dense_vector("Element(0.0)", Buffer::F64(vec![1.0; 8].into())),
    );
    ts.insert(
        "a".to_string(),
        dense_vector("Element(0.0)", Buffer::F64(vec![0.0; 8].into())),
    );
    let e = match Runner::jit().compile(&p, &formats_of(&ts)) {
        Ok(_) => panic!("a recurrence compiled vectorised"),
        Err(e) => e,
    };
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("vectorised loop `i`") && msg.contains("`a[i - 1]`"),
        "{msg}"
    );
}

/// A vectorised loop over a sparse level walks its stored entries in lanes (the sums
/// reassociated): SpMV's rows and a dot product over every kind of level the loop can walk,
/// equal to the unscheduled program on the evaluator within rounding on every backend, rows
/// shorter and longer than the lanes, with tails.
#[test]
fn vectorize_walks_the_stored_entries_of_sparse_levels() {
    let rows = [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
        "Dense(SparseByteMap(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(RunList(Element(0.0)))",
    ];
    for f in rows {
        for n in [3, 37] {
            let s = Setup {
                inputs: &[("A", &[f], &[6, n]), ("x", &[DENSE1], &[n])],
                outputs: &[("y", DENSE1, &[6])],
            };
            legal(SPMV, "vectorize(j)", &s);
        }
    }
    let dot = "for i = _\n  s[] += a[i] * b[i]\nend\n";
    for f in VECTORS {
        let s = Setup {
            inputs: &[("a", &[f], &[50]), ("b", &[DENSE1], &[50])],
            outputs: &[("s", SCALAR, &[])],
        };
        legal(dot, "vectorize(i)", &s);
    }
}

/// On C, a row's walk over CSR positions is an OpenMP `simd` reduction whose coordinate is
/// each lane's own, four lanes of gathers; the rows are not interleaved (the lanes are the
/// independent chains).
#[test]
fn vectorised_sparse_rows_are_simd_gathers_on_c() {
    if c_runner("schedule").is_none() {
        return;
    }
    use common::cli::{Dir, ok};
    let d = Dir::new("vectorize-csr");
    let a = d.file("A.tns", "# shape: 3x200\n1 1 1.5\n1 200 2.5\n3 7 1.0\n");
    let x = d.file("x.tns", "# shape: 200\n3 1.0\n");
    let q = schedule(&parse(SPMV), "vectorize(j)").unwrap().to_string();
    let code = ok(&[
        "code",
        &q,
        "--in",
        &format!("A={a}@Dense(SparseList(Element(0.0), coord=i32))"),
        "--in",
        &format!("x={x}@Dense(Element(0.0))"),
        "--out",
        "y",
        "--backend",
        "c",
    ]);
    let simd = code
        .lines()
        .find(|l| l.contains("#pragma omp simd"))
        .unwrap_or_else(|| panic!("no simd loop:\n{code}"));
    assert!(
        simd.contains("reduction(+:")
            && simd.contains("lastprivate(")
            && simd.contains("simdlen(4)"),
        "{simd}"
    );
    assert!(!code.contains("interleave"), "{code}");
}

/// Lanes over a sparse level's stored entries only read through the index and reduce: a
/// loop that also writes at the walked coordinate (a scatter, whose lanes would meet on a
/// repeated coordinate) runs serially, no loop of its kernel vectorised, with the
/// evaluator's results on every backend.
#[test]
fn vectorised_writes_at_a_walked_coordinate_run_serially() {
    let p = schedule(
        &parse("for i = _\n  y[i] = a[i] * 2.0\n  s[] += a[i]\nend\n"),
        "vectorize(i)",
    )
    .unwrap();
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("schedule") {
        runners.push(("c", c));
    }
    for f in ["SparseList(Element(0.0))", "SparseByteMap(Element(0.0))"] {
        let mut ts = BTreeMap::new();
        ts.insert("a".to_string(), scattered(&fmt(f), &[20], 0.5, 3));
        let ts = with_outputs(ts, &[("y", DENSE1, &[20]), ("s", SCALAR, &[])]);
        let want = run_eval(&p, &ts).unwrap();
        for (name, r) in &runners {
            let c = r
                .compile(&p, &formats_of(&ts))
                .unwrap_or_else(|e| panic!("{name} {f}: {e}"));
            assert!(c.ir.vectorized.is_empty(), "{name} {f}: lanes\n{}", c.ir);
            let mut got = ts.clone();
            r.execute(&c, &mut got).unwrap();
            for o in ["y", "s"] {
                let (w, g) = (values(&want[o]), values(&got[o].to_dense()));
                assert!(same(&w, &g, false), "{name} {f}: `{o}`\n{w:?}\n{g:?}");
            }
        }
    }
}

#[test]
fn vectorize_outside_the_lanes_class_runs_scalar_and_says_why() {
    // The index as a value (a conversion to f64) is outside the JIT's class: the mark stays,
    // the loop runs scalar with the reason in the code, and results are unchanged.
    let program = "for i = _\n  y[i] = x[i] * 2.0 + i\nend\n";
    let n = 11;
    let p = parse(program);
    let q = schedule(&p, "vectorize(i)").unwrap();
    let mut ts = BTreeMap::new();
    ts.insert(
        "x".to_string(),
        dense_vector(
            "Element(0.0)",
            Buffer::F64(float_values(n, 4, false).into()),
        ),
    );
    let ts = with_outputs(ts, &[("y", DENSE1, &[n])]);
    let want = run_eval(&p, &ts).unwrap();
    let r = Runner::jit();
    let c = r.compile(&q, &formats_of(&ts)).unwrap();
    let code = c.ir.to_string();
    assert!(
        code.contains("vectorised: the JIT runs it scalar ("),
        "{code}"
    );
    let mut got = ts.clone();
    r.execute(&c, &mut got).unwrap();
    assert!(same(
        &values(&want["y"]),
        &values(&got["y"].to_dense()),
        false
    ));
}

#[test]
fn tessera_code_shows_the_vectorised_loop() {
    use common::cli::{Dir, ok};
    let d = Dir::new("vectorize-code");
    let a = d.file("a.tns", "# shape: 5\n1 1.5\n2 2.5\n3 3.5\n4 4.5\n5 5.5\n");
    let b = d.file("b.tns", "# shape: 5\n1 1\n2 2\n3 3\n4 4\n5 5\n");
    let program = "for i = _\n  s[] += a[i] * b[i]\nend";
    let ins = [
        format!("a={a}@Dense(Element(0.0))"),
        format!("b={b}@Dense(Element(0.0))"),
    ];
    let args = |backend: &'static str| -> Vec<String> {
        let mut v: Vec<String> = [
            "code", program, "--in", &ins[0], "--in", &ins[1], "--out", "s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(["--schedule", "vectorize(i)", "--backend", backend].map(String::from));
        v
    };
    let jit = args("jit");
    let out = ok(&jit.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.contains("// vectorised: the JIT runs 2 iterations"),
        "{out}"
    );
    if c_runner("schedule").is_some() {
        let c = args("c");
        let out = ok(&c.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.contains("#pragma GCC ivdep"), "{out}");
    }
    let run: Vec<&str> = [
        "run",
        program,
        "--in",
        &ins[0],
        "--in",
        &ins[1],
        "--out",
        "s",
        "--schedule",
        "vectorize(i)",
        "--backend",
        "jit",
    ]
    .to_vec();
    // 1.5 + 5 + 10.5 + 18 + 27.5
    assert_eq!(ok(&run).trim(), "s = 62.5");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random lengths and values: the vectorised JIT loop against the scalar JIT loop
    /// (elementwise results and min/max bit for bit, sums within rounding).
    #[test]
    fn vectorized_jit_equals_scalar_jit(
        xs in proptest::collection::vec(-1e6f64..1e6, 0..80),
        ys in proptest::collection::vec(-1e6f64..1e6, 80),
    ) {
        let n = xs.len();
        let program = "for i = _\n  y[i] = a[i] * b[i] - a[i]\n  s[] += a[i] * b[i]\n  m[] <<min>>= b[i] - a[i]\nend\n";
        let mut ts = BTreeMap::new();
        ts.insert("a".to_string(), dense_vector("Element(0.0)", Buffer::F64(xs.into())));
        ts.insert("b".to_string(), dense_vector("Element(0.0)", Buffer::F64(ys[..n].to_vec().into())));
        let ts = with_outputs(ts, &[("y", DENSE1, &[n]), ("s", SCALAR, &[]), ("m", SCALAR, &[])]);
        let p = parse(program);
        let q = schedule(&p, "vectorize(i)").unwrap();
        let (mut scalar, mut lanes) = (ts.clone(), ts);
        run_jit(&p, &mut scalar).unwrap();
        run_jit(&q, &mut lanes).unwrap();
        for (o, sum) in [("y", false), ("s", true), ("m", false)] {
            let (a, b) = (values(&scalar[o].to_dense()), values(&lanes[o].to_dense()));
            prop_assert!(same(&a, &b, sum), "{o}: {a:?} vs {b:?}");
        }
    }
}

// ---- unroll_jam(i, T) (issue 16) ----

/// A row program shaped like a gradient's backward loop: per (i, f), a 0-d local summed over
/// `o` and a row `d[f, o]` updated by every `i`, then a scatter through an index array.
const JAM_ROWS: &str = "for i = _, f = _\n  s .= 0.0\n  for o = _\n    s[] += y[i, o] * w[f, o]\n    d[f, o] += y[i, o] * x[i, f]\n  end\n  for j = _\n    z[a[i, j], f] += s[] * x[i, f]\n  end\nend\n";

fn jam_inputs(n: usize, seed: u64, special: bool) -> Tensors {
    let dense = |shape: &[usize], k: u64| {
        let len = shape.iter().product();
        Tensor::from_dense(
            &fmt(DENSE2),
            shape,
            &Buffer::F64(float_values(len, seed * 7 + k, special).into()),
        )
        .unwrap()
    };
    let idx: Vec<i64> = (0..n * 2).map(|k| ((k * 5 + 3) % n) as i64).collect();
    let ints = tessera::levels::Format::dense(2, tessera::types::Scalar::I64(0));
    let mut ts = BTreeMap::new();
    ts.insert("y".to_string(), dense(&[n, 9], 1));
    ts.insert("w".to_string(), dense(&[3, 9], 2));
    ts.insert("x".to_string(), dense(&[n, 3], 3));
    ts.insert(
        "a".to_string(),
        Tensor::from_dense(&ints, &[n, 2], &Buffer::I64(idx.into())).unwrap(),
    );
    let mut ts = with_outputs(ts, &[("d", DENSE2, &[3, 9]), ("z", DENSE2, &[n, 3])]);
    // The local and its copies (`s.0` ... of the jams below).
    for k in std::iter::once(String::new()).chain((0..16).map(|k| format!(".{k}"))) {
        ts.insert(format!("s{k}"), Tensor::empty(&fmt(SCALAR), &[]).unwrap());
    }
    ts
}

/// Runs `q` and `p` on `backend`; every output of `outs` bit for bit equal (or, for `sums`,
/// within rounding), NaN equal to NaN.
fn jam_agree(p: &Program, q: &Program, ts: &Tensors, outs: &[&str], sums: &[&str]) {
    let want = run_eval(p, ts).unwrap_or_else(|e| panic!("eval: {e}\n{p}"));
    let got = run_eval(q, ts).unwrap_or_else(|e| panic!("eval: {e}\n{q}"));
    for o in outs {
        let (w, g) = (values(&want[*o]), values(&got[*o]));
        assert!(
            same(&w, &g, sums.contains(o)),
            "eval: `{o}`\n{w:?}\n{g:?}\n{q}"
        );
    }
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("schedule") {
        runners.push(("c", c));
    }
    for (name, r) in runners {
        let run = |prog: &Program| {
            let k = r
                .compile(prog, &formats_of(ts))
                .unwrap_or_else(|e| panic!("{name}: {e}\n{prog}"));
            let mut out = ts.clone();
            r.execute(&k, &mut out)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{prog}"));
            out
        };
        let (w, g) = (run(p), run(q));
        for o in outs {
            let (w, g) = (values(&w[*o].to_dense()), values(&g[*o].to_dense()));
            assert!(
                same(&w, &g, sums.contains(o)),
                "{name}: `{o}`\n{w:?}\n{g:?}\n{q}"
            );
        }
    }
}

/// `unroll_jam` of the row loop by 2, 3, 4 and more than its extent, with and without a
/// remainder: the rows `d[f, o]` add the `i` in their order (bit-identical, NaN, infinities
/// and signed zeros included), the local `s` is one per copy; the scatter into `z` adds the
/// copies' contributions in another order (within rounding).
#[test]
fn unroll_jam_keeps_results_and_the_rows_order() {
    let p = parse(JAM_ROWS);
    for n in [1, 7, 8, 12] {
        for special in [false, true] {
            let ts = jam_inputs(n, n as u64, special);
            for t in [2, 3, 4, 16] {
                let sched = format!("unroll_jam(i, {t})");
                let q = schedule(&p, &sched).unwrap_or_else(|e| panic!("{sched}: {e}"));
                assert_eq!(parse(&q.to_string()), q, "{q}");
                jam_agree(&p, &q, &ts, &["d", "z"], &["z"]);
            }
        }
    }
    let q = schedule(&p, "unroll_jam(i, 4)").unwrap();
    let text = q.to_string();
    assert!(
        text.contains("for i.0 = 0:div(size(y, 0), 4) - 1, f = _"),
        "{text}"
    );
    assert!(text.contains("s.3 .= 0.0"), "{text}");
    assert!(
        text.contains("for i = div(size(y, 0), 4) * 4:size(y, 0) - 1, f = _"),
        "{text}"
    );
    // Every row update of one `o` iteration in one loop: one loop over `o` per block.
    assert_eq!(text.matches("for o = _").count(), 2, "{text}");
    // The SpMV's row loop jammed over sparse and dense formats: the same results.
    let s = spmv_setup();
    legal(SPMV, "unroll_jam(i, 3)", &s);
    legal(SPMV, "split(j, 2); unroll_jam(i, 4)", &s);
}

/// A jam that would run an instance of a later iteration before one of an earlier iteration
/// it depends on is refused, naming the dependence; a local whose last value is read after
/// the loop is not renamed, so the jam is refused on it; a vectorised loop is not jammed.
#[test]
fn unroll_jam_refusals_name_the_dependence() {
    let prog = "for i = 1:9\n  for o = 0:3\n    a[i, o] = a[i - 1, o + 1] + 1.0\n  end\nend\n";
    let e = refused(prog, "unroll_jam(i, 2)");
    assert_eq!(direction(&e), dirs(&[("i", '<'), ("o", '>')]), "{e}");
    let prog = "for i = 1:9\n  for o = 0:3\n    a[i, o] = b[i - 1, o]\n  end\n  for o = 0:3\n    b[i, o] = a[i, o] * 2.0\n  end\nend\n";
    refused(prog, "unroll_jam(i, 2)");
    // Order kept: iteration i's instance of each jammed loop still runs before i + 1's.
    let kept = "for i = 1:9\n  for o = 0:3\n    a[i, o] = a[i - 1, o] + 1.0\n  end\nend\n";
    assert!(schedule(&parse(kept), "unroll_jam(i, 3)").is_ok());
    let escapes =
        "for i = 0:9\n  t .= 0.0\n  for o = 0:3\n    t[] += x[i, o]\n  end\nend\ny[] = t[]\n";
    refused(escapes, "unroll_jam(i, 2)");
    let vec = "for i = vectorize(0:9)\n  y[i] = x[i]\nend\n";
    refused(vec, "unroll_jam(i, 2)");
    refused(SPMV, "unroll_jam(i, 65)");
}

/// Two elements of one row kept in variables in one loop over `o` (what a jam makes of
/// `dx[i.0 * 2, f] +=` and `dx[i.0 * 2 + 1, f] +=`) only while they are two elements: with
/// both indices equal the loop runs with its updates in memory. Bit-identical to the
/// evaluator on the JIT and C, both ways.
#[test]
fn elements_promoted_apart_only_when_distinct() {
    let prog = "for f = _\n  for o = _\n    d[p[], f] += y[o] * w[f, o]\n    d[q[], f] += y[o] * x[f, o]\n  end\nend\n";
    let p = parse(prog);
    for (pv, qv) in [(0, 1), (1, 1), (2, 0)] {
        let mut ts = BTreeMap::new();
        let m = |k: u64| {
            Tensor::from_dense(
                &fmt(DENSE2),
                &[4, 9],
                &Buffer::F64(float_values(36, k, true).into()),
            )
            .unwrap()
        };
        ts.insert("w".to_string(), m(1));
        ts.insert("x".to_string(), m(2));
        let y = float_values(9, 3, false);
        ts.insert(
            "y".to_string(),
            dense_vector("Element(0.0)", Buffer::F64(y.into())),
        );
        for (n, v) in [("p", pv), ("q", qv)] {
            let t =
                Tensor::from_dense(&fmt("Element(0)"), &[], &Buffer::I64(vec![v].into())).unwrap();
            ts.insert(n.to_string(), t);
        }
        let ts = with_outputs(ts, &[("d", DENSE2, &[3, 4])]);
        let want = values(&run_eval(&p, &ts).unwrap()["d"]);
        let mut runners = vec![("jit", Runner::jit())];
        if let Some(c) = c_runner("schedule") {
            runners.push(("c", c));
        }
        for (name, r) in runners {
            let k = r.compile(&p, &formats_of(&ts)).unwrap();
            let mut got = ts.clone();
            r.execute(&k, &mut got).unwrap();
            let got = values(&got["d"].to_dense());
            assert!(
                same(&want, &got, false),
                "{name}, p = {pv}, q = {qv}\n{want:?}\n{got:?}"
            );
        }
    }
}
