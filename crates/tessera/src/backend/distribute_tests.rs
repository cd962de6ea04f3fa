//! `ir::distribute` on hand-built loop IR: a distributed loop gives the original loop's
//! buffers and fault (the same error at the same access, with the same elements written
//! before it) on the interpreter, the JIT and the C backend, for ranges in bounds, past the
//! end, before the start, empty, and with a base that wraps around; loops whose halves read
//! each other, or that gather, are left whole.

use super::tests::{c_backend, kernel, same_buffers};
use super::{Backend, Interpreter, Jit};
use crate::error::Error;
use crate::ir::build as b;
use crate::ir::distribute::distribute_loops;
use crate::ir::{BufId, Expr, Kernel, Stmt, VarId};
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

const A: BufId = BufId(0);
const X: BufId = BufId(1);
const OUT: BufId = BufId(2);
const RANGE: BufId = BufId(3);
const RES: BufId = BufId(4);
const J: VarId = VarId(0);
const S: VarId = VarId(1);
const W: VarId = VarId(2);
const T: VarId = VarId(3);

/// `w = range[2]; s = 0; for j = range[0]..range[1] { body }; res[0] = s`.
fn looped(body: Vec<Stmt>) -> Kernel {
    kernel(
        &[
            ("a", ElemType::F64, false),
            ("x", ElemType::F64, false),
            ("out", ElemType::F64, false),
            ("range", ElemType::I64, false),
            ("res", ElemType::F64, false),
        ],
        &[
            ("j", ElemType::I64),
            ("s", ElemType::F64),
            ("w", ElemType::I64),
            ("t", ElemType::F64),
        ],
        vec![
            b::assign(W, b::load(RANGE, b::int(2))),
            b::assign(S, Expr::Const(Scalar::F64(0.0))),
            Stmt::For {
                var: J,
                start: b::load(RANGE, b::int(0)),
                stop: b::load(RANGE, b::int(1)),
                body,
            },
            b::store(RES, b::int(0), b::var(S)),
        ],
    )
}

fn f(v: f64) -> Expr {
    Expr::Const(Scalar::F64(v))
}

fn distributed(k: &Kernel) -> Option<Kernel> {
    let mut d = k.clone();
    distribute_loops(&mut d);
    d.vars.iter().any(|v| v.name == "dist_start").then_some(d)
}

fn buffers(lo: i64, hi: i64, w: i64) -> Vec<Buffer> {
    vec![
        Buffer::F64((0..9).map(|v| v as f64 * 0.5 - 1.0).collect()),
        Buffer::F64((0..12).map(|v| 3.0 - v as f64 * 0.75).collect()),
        Buffer::F64(vec![0.25; 8].into()),
        Buffer::I64(vec![lo, hi, w].into()),
        Buffer::F64(vec![0.0].into()),
    ]
}

/// The result and buffers of `k` on `backend`.
fn run(backend: &dyn Backend, k: &Kernel, bufs: &[Buffer]) -> (Result<(), Error>, Vec<Buffer>) {
    let mut out = bufs.to_vec();
    let r = backend.compile(k).unwrap().run(&mut out);
    (r, out)
}

/// The distributed kernel on every backend against the original on the interpreter.
fn same_as_original(original: &Kernel, split: &Kernel, cases: &[(i64, i64, i64)]) {
    split
        .check()
        .unwrap_or_else(|e| panic!("ill-typed: {e}\n{split}"));
    let mut backends: Vec<(&str, &dyn Backend)> = vec![];
    let (interp, jit) = (Interpreter::new(), Jit::new());
    backends.push(("interp", &interp));
    backends.push(("jit", &jit));
    if let Some(c) = c_backend() {
        backends.push(("c", c));
    }
    for &(lo, hi, w) in cases {
        let bufs = buffers(lo, hi, w);
        let (want, want_bufs) = run(&Interpreter::new(), original, &bufs);
        for (name, backend) in &backends {
            let (got, got_bufs) = run(*backend, split, &bufs);
            assert_eq!(got, want, "{name} {lo}..{hi} base {w}\n{split}");
            assert!(
                same_buffers(&got_bufs, &want_bufs),
                "{name} {lo}..{hi} base {w}\n{got_bufs:?}\n{want_bufs:?}\n{split}"
            );
        }
    }
}

/// `s += a[j] * x[w + j]; t = a[j] * 2; out[w + j] += t`: the fold and the stores (with the
/// temporary only they read) run as two loops when every access is in bounds; a range past
/// either end of `out` or `x`, an empty one, and bases that overflow get the original loop's
/// fault and writes.
#[test]
fn distributed_loops_keep_results_and_faults() {
    let body = vec![
        b::assign(
            S,
            b::add(
                b::var(S),
                b::mul(
                    b::load(A, b::var(J)),
                    b::load(X, b::add(b::var(W), b::var(J))),
                ),
            ),
        ),
        b::assign(T, b::mul(b::load(A, b::var(J)), f(2.0))),
        b::store(
            OUT,
            b::add(b::var(W), b::var(J)),
            b::add(b::load(OUT, b::add(b::var(W), b::var(J))), b::var(T)),
        ),
    ];
    let k = looped(body);
    let d = distributed(&k).unwrap_or_else(|| panic!("not distributed\n{k}"));
    let cases = [
        (0, 8, 0),
        (2, 6, 2),
        (0, 9, 0),
        (2, 6, 3),
        (0, 4, -1),
        (5, 2, 0),
        (4, 4, 100),
        (0, 3, i64::MAX - 1),
        (0, 3, i64::MIN + 1),
        (i64::MAX - 2, i64::MAX, 0),
    ];
    same_as_original(&k, &d, &cases);
}

/// Halves that read each other are left whole: a fold reading the stores' temporary, a fold
/// reading the buffer the stores write, a store reading the fold (a running sum). A gather
/// (`x[out_index]` through a load) has no range test and is left whole too.
#[test]
fn dependent_or_gathering_halves_stay_together() {
    let fold = |e: Expr| b::assign(S, b::add(b::var(S), e));
    let cases: Vec<Vec<Stmt>> = vec![
        vec![
            b::assign(T, b::mul(b::load(A, b::var(J)), f(2.0))),
            b::store(OUT, b::var(J), b::var(T)),
            fold(b::var(T)),
        ],
        vec![
            b::store(OUT, b::var(J), b::load(A, b::var(J))),
            fold(b::load(OUT, b::var(J))),
        ],
        vec![
            fold(b::load(A, b::var(J))),
            b::store(OUT, b::var(J), b::var(S)),
        ],
        vec![
            fold(b::load(X, b::cast(ElemType::I64, b::load(A, b::var(J))))),
            b::store(OUT, b::var(J), b::load(A, b::var(J))),
        ],
    ];
    for body in cases {
        let k = looped(body);
        assert!(distributed(&k).is_none(), "distributed\n{k}");
    }
}
