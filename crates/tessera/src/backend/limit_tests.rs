//! `Limit` points (`ElemType::Limit`) on every backend: the interpreter, the JIT and the C
//! backend must agree bit for bit with each other and with the host-side `crate::limit::Limit`
//! on order, `min`/`max`, `select`, `after`/`before`, `val`/`eps` and loops over points. No
//! buffer holds a point, so the kernels write their values and signs to F64 and I64 buffers.

use super::tests::{c_backend, kernel};
use super::{Backend, CompiledKernel, Interpreter, Jit};
use crate::ir::build as b;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::limit::{Eps, Limit};
use crate::runtime::Buffer;
use crate::types::{CANONICAL_NAN, ElemType, Scalar};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// A kernel compiled once by every available backend.
struct Everywhere {
    k: Kernel,
    runs: Vec<(&'static str, Box<dyn CompiledKernel>)>,
}

impl Everywhere {
    fn new(k: Kernel) -> Everywhere {
        k.check()
            .unwrap_or_else(|e| panic!("ill-typed test kernel: {e}\n{k}"));
        let mut runs: Vec<(&'static str, Box<dyn CompiledKernel>)> = vec![
            ("interp", Interpreter::new().compile(&k).unwrap()),
            ("jit", Jit::new().compile(&k).unwrap()),
        ];
        if let Some(c) = c_backend() {
            runs.push(("c", c.compile(&k).unwrap()));
        }
        Everywhere { k, runs }
    }

    /// The buffers after a run, the same on every backend to the bit (points are canonical,
    /// so even a NaN value has one representation).
    fn run(&self, bufs: &[Buffer]) -> Vec<Buffer> {
        let mut first: Option<Vec<Buffer>> = None;
        for (name, run) in &self.runs {
            let mut out = bufs.to_vec();
            run.run(&mut out)
                .unwrap_or_else(|e| panic!("{name} failed: {e}\n{}", self.k));
            let bits: Vec<Vec<Scalar>> = out.iter().map(Buffer::to_scalars).collect();
            match &first {
                None => first = Some(out),
                Some(f) => {
                    let want: Vec<Vec<Scalar>> = f.iter().map(Buffer::to_scalars).collect();
                    assert_eq!(
                        bits, want,
                        "{name} disagrees with the interpreter\n{}",
                        self.k
                    );
                }
            }
        }
        first.unwrap()
    }
}

fn f64s(b: &Buffer) -> &[f64] {
    b.as_f64().unwrap()
}
fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().unwrap()
}

/// What every backend must give for a point: `canonical(l)` as (value bits, sign).
fn expect_point(l: Limit<f64>) -> (u64, i64) {
    let c = crate::types::canonical_limit(l);
    (c.val.to_bits(), i64::from(c.eps.sign()))
}

fn point(v: f64, e: i64) -> Limit<f64> {
    Limit::new(v, Eps::saturate(e.signum() as i32))
}

/// The comparisons, in the order the pair kernel writes them.
const CMPS: [BinOp; 6] = [
    BinOp::Lt,
    BinOp::Le,
    BinOp::Gt,
    BinOp::Ge,
    BinOp::Eq,
    BinOp::Ne,
];

/// The pair kernel: points `p = (v[0], e[0])`, `q = (v[1], e[1])` made at run time; writes
/// the six comparisons of `p` and `q` to `cmp`, and the value and sign of each point of
/// [`pair_results`] to `val` and `eps`.
fn pair_kernel() -> Kernel {
    let (v, e, cmp, val, eps) = (BufId(0), BufId(1), BufId(2), BufId(3), BufId(4));
    let (p, q, r) = (VarId(0), VarId(1), VarId(2));
    let (pv, qv) = (|| b::var(VarId(0)), || b::var(VarId(1)));
    let mut body = vec![
        b::assign(
            p,
            b::make_limit(b::load(v, b::int(0)), b::load(e, b::int(0))),
        ),
        b::assign(
            q,
            b::make_limit(b::load(v, b::int(1)), b::load(e, b::int(1))),
        ),
    ];
    for (k, op) in CMPS.iter().enumerate() {
        body.push(b::store(
            cmp,
            b::int(k as i64),
            Expr::Binary(*op, Box::new(pv()), Box::new(qv())),
        ));
    }
    let results = vec![
        pv(),
        qv(),
        Expr::Binary(BinOp::Min, Box::new(pv()), Box::new(qv())),
        Expr::Binary(BinOp::Max, Box::new(pv()), Box::new(qv())),
        b::after(pv()),
        b::before(pv()),
        b::after(b::after(pv())),
        b::before(b::before(pv())),
        b::after(b::before(pv())),
        b::before(b::after(pv())),
        b::select(
            Expr::Binary(BinOp::Lt, Box::new(qv()), Box::new(pv())),
            qv(),
            pv(),
        ),
        // A round trip through val and eps.
        b::make_limit(b::limit_val(pv()), b::limit_eps(pv())),
        // Through a variable.
        b::var(r),
    ];
    body.push(b::assign(
        r,
        Expr::Binary(
            BinOp::Max,
            Box::new(b::before(qv())),
            Box::new(b::after(pv())),
        ),
    ));
    for (k, x) in results.into_iter().enumerate() {
        body.push(b::store(val, b::int(k as i64), b::limit_val(x.clone())));
        body.push(b::store(eps, b::int(k as i64), b::limit_eps(x)));
    }
    kernel(
        &[
            ("v", ElemType::F64, false),
            ("e", ElemType::I64, false),
            ("cmp", ElemType::Bool, false),
            ("val", ElemType::F64, false),
            ("eps", ElemType::I64, false),
        ],
        &[
            ("p", ElemType::Limit),
            ("q", ElemType::Limit),
            ("r", ElemType::Limit),
        ],
        body,
    )
}

/// `crate::limit::Limit`'s own answers for the pair kernel's points (same order).
fn pair_results(p: Limit<f64>, q: Limit<f64>) -> (Vec<bool>, Vec<Limit<f64>>) {
    let cmps = vec![p < q, p <= q, p > q, p >= q, p == q, p != q];
    let sel = if q < p { q } else { p };
    let points = vec![
        p,
        q,
        p.min(q),
        p.max(q),
        p.next(),
        p.prev(),
        p.next().next(),
        p.prev().prev(),
        p.prev().next(),
        p.next().prev(),
        sel,
        p,
        q.prev().max(p.next()),
    ];
    (cmps, points)
}

fn pair_buffers(p: (f64, i64), q: (f64, i64)) -> Vec<Buffer> {
    let n = pair_results(Limit::exact(0.0), Limit::exact(0.0)).1.len();
    vec![
        Buffer::F64(vec![p.0, q.0].into()),
        Buffer::I64(vec![p.1, q.1].into()),
        Buffer::Bool(vec![false; CMPS.len()].into()),
        Buffer::F64(vec![0.0; n].into()),
        Buffer::I64(vec![0; n].into()),
    ]
}

/// Run the pair kernel on `(p, q)` and check it against `crate::limit::Limit`.
fn check_pair(k: &Everywhere, p: (f64, i64), q: (f64, i64)) -> Result<(), TestCaseError> {
    let out = k.run(&pair_buffers(p, q));
    let (lp, lq) = (point(p.0, p.1), point(q.0, q.1));
    let (cmps, points) = pair_results(lp, lq);
    let got: Vec<bool> = (0..CMPS.len()).map(|k| out[2].get(k).as_bool()).collect();
    prop_assert_eq!(&got, &cmps, "comparisons of {} and {}", lp, lq);
    for (n, want) in points.iter().enumerate() {
        let got = (f64s(&out[3])[n].to_bits(), i64s(&out[4])[n]);
        prop_assert_eq!(
            got,
            expect_point(*want),
            "result {} of {} and {}: want {}",
            n,
            lp,
            lq,
            want
        );
    }
    Ok(())
}

#[test]
fn points_order_lexicographically_on_every_backend() {
    let k = Everywhere::new(pair_kernel());
    let pairs = [
        (1.0, 2.0),
        (-3.5, -1.0),
        (-1.0, 0.0),
        (0.0, 1e-300),
        (f64::NEG_INFINITY, -f64::MAX),
        (f64::MAX, f64::INFINITY),
        (f64::NEG_INFINITY, f64::INFINITY),
        (1.0, 1.0f64.next_up()),
        (-5e-324, 5e-324),
    ];
    for (a, bv) in pairs {
        // a-ε < a < a+ε < b-ε < b, each link checked on the kernel's own comparisons.
        let chain = [(a, -1), (a, 0), (a, 1), (bv, -1), (bv, 0)];
        for w in chain.windows(2) {
            let out = k.run(&pair_buffers(w[0], w[1]));
            let cmp: Vec<bool> = (0..6).map(|n| out[2].get(n).as_bool()).collect();
            assert_eq!(
                cmp,
                [true, true, false, false, false, true],
                "{:?} < {:?}",
                w[0],
                w[1]
            );
            check_pair(&k, w[0], w[1]).unwrap();
            check_pair(&k, w[1], w[0]).unwrap();
        }
    }
    // -0.0 and 0.0 are the same point (with any infinitesimal), and the value reads back +0.0.
    for e in [-1, 0, 1] {
        let out = k.run(&pair_buffers((-0.0, e), (0.0, e)));
        let cmp: Vec<bool> = (0..6).map(|n| out[2].get(n).as_bool()).collect();
        assert_eq!(cmp, [false, true, false, true, true, false], "eps {e}");
        assert_eq!(f64s(&out[3])[0].to_bits(), 0, "-0.0 is made +0.0");
        check_pair(&k, (-0.0, e), (0.0, e)).unwrap();
    }
    // Any negative or positive sign clamps to -ε or +ε.
    let out = k.run(&pair_buffers((2.0, i64::MIN), (2.0, i64::MAX)));
    assert_eq!(&i64s(&out[4])[..2], &[-1, 1]);
}

#[test]
fn after_and_before_saturate() {
    let k = Everywhere::new(pair_kernel());
    for v in [-2.0, 0.0, 7.25, f64::INFINITY] {
        let steps = |e: i64| {
            let out = k.run(&pair_buffers((v, e), (v, 0)));
            // Results 4 and 5 are after(p) and before(p).
            (
                (f64s(&out[3])[4], i64s(&out[4])[4]),
                (f64s(&out[3])[5], i64s(&out[4])[5]),
            )
        };
        assert_eq!(
            steps(-1),
            ((v, 0), (v, -1)),
            "after(v-ε) = v, before(v-ε) = v-ε"
        );
        assert_eq!(
            steps(0),
            ((v, 1), (v, -1)),
            "after(v) = v+ε, before(v) = v-ε"
        );
        assert_eq!(
            steps(1),
            ((v, 1), (v, 0)),
            "after(v+ε) = v+ε, before(v+ε) = v"
        );
    }
}

#[test]
fn nan_points_are_one_point_above_infinity() {
    let k = Everywhere::new(pair_kernel());
    let neg_nan = f64::from_bits(0xfff8_0000_0000_0001);
    let out = k.run(&pair_buffers((neg_nan, -1), (f64::INFINITY, 1)));
    let cmp: Vec<bool> = (0..6).map(|n| out[2].get(n).as_bool()).collect();
    assert_eq!(
        cmp,
        [false, false, true, true, false, true],
        "NaN-ε > Inf+ε"
    );
    assert_eq!(f64s(&out[3])[0].to_bits(), CANONICAL_NAN);
    assert_eq!(i64s(&out[4])[0], -1);
    // max(NaN-ε, Inf+ε) is the NaN point; min is +Inf+ε.
    assert_eq!(f64s(&out[3])[3].to_bits(), CANONICAL_NAN);
    assert_eq!((f64s(&out[3])[2], i64s(&out[4])[2]), (f64::INFINITY, 1));
    let out = k.run(&pair_buffers((f64::NAN, 0), (neg_nan, 0)));
    let cmp: Vec<bool> = (0..6).map(|n| out[2].get(n).as_bool()).collect();
    assert_eq!(cmp, [false, true, false, true, true, false], "NaN == NaN");
}

#[test]
fn constants_and_fresh_variables_are_canonical_points() {
    let (val, eps) = (BufId(0), BufId(1));
    let (p, fresh) = (VarId(0), VarId(1));
    // A constant built without the builder may hold -0.0; it still means +0.0.
    let raw = Expr::Const(Scalar::Limit(Limit::plus_eps(-0.0)));
    let consts = [
        b::limit(-1.5, -1),
        b::limit(f64::NEG_INFINITY, 1),
        raw.clone(),
        b::var(fresh),
        Expr::Binary(BinOp::Max, Box::new(b::limit(3.0, 0)), Box::new(b::var(p))),
    ];
    let mut body = vec![b::assign(p, b::after(b::limit(3.0, 0)))];
    for (n, c) in consts.iter().enumerate() {
        body.push(b::store(val, b::int(n as i64), b::limit_val(c.clone())));
        body.push(b::store(eps, b::int(n as i64), b::limit_eps(c.clone())));
    }
    body.push(b::store(
        eps,
        b::int(5),
        b::cast(
            ElemType::I64,
            Expr::Binary(BinOp::Eq, Box::new(raw), Box::new(b::limit(0.0, 1))),
        ),
    ));
    let k = Everywhere::new(kernel(
        &[("val", ElemType::F64, false), ("eps", ElemType::I64, false)],
        &[("p", ElemType::Limit), ("fresh", ElemType::Limit)],
        body,
    ));
    let out = k.run(&[
        Buffer::F64(vec![9.0; 5].into()),
        Buffer::I64(vec![9; 6].into()),
    ]);
    let bits: Vec<u64> = f64s(&out[0]).iter().map(|v| v.to_bits()).collect();
    let want = [-1.5, f64::NEG_INFINITY, 0.0, 0.0, 3.0].map(f64::to_bits);
    assert_eq!(bits, want);
    assert_eq!(i64s(&out[1]), &[-1, 1, 1, 0, 1, 1]);
}

#[test]
fn after_and_before_on_integers_step_by_one() {
    let (out, x) = (BufId(0), VarId(0));
    let k = Everywhere::new(kernel(
        &[("out", ElemType::I64, false)],
        &[("x", ElemType::I64)],
        vec![
            b::assign(x, b::load(out, b::int(0))),
            b::store(out, b::int(1), b::after(b::var(x))),
            b::store(out, b::int(2), b::before(b::var(x))),
        ],
    ));
    for v in [0, -7, i64::MAX, i64::MIN] {
        let got = k.run(&[Buffer::I64(vec![v, 0, 0].into())]);
        assert_eq!(i64s(&got[0]), &[v, v.wrapping_add(1), v.wrapping_sub(1)]);
    }
}

/// `i = start; while i <= stop { e = min(next cut, stop); lengths += val(e) - val(i);
/// i = after(e) }` over the cuts `(v[j], e[j])`, `j = 1, 2, …`: the pieces of a real loop.
/// Writes each piece's length (if `store_pieces`) and the totals. Without the stores the loop
/// only accumulates, so the IEEE-product pass rewrites it (through the weighted sum), and its
/// re-run keeps the point `i` in a cold stack slot.
fn piece_loop(store_pieces: bool) -> Kernel {
    let (cv, ce, w, len, total) = (BufId(0), BufId(1), BufId(2), BufId(3), BufId(4));
    let (i, e, stop, j, s, ws) = (VarId(0), VarId(1), VarId(2), VarId(3), VarId(4), VarId(5));
    let cut = |j: Expr| b::make_limit(b::load(cv, j.clone()), b::load(ce, j));
    let last = b::sub(Expr::Len(cv), b::int(1));
    let piece = b::sub(b::limit_val(b::var(e)), b::limit_val(b::var(i)));
    kernel(
        &[
            ("cv", ElemType::F64, false),
            ("ce", ElemType::I64, false),
            ("w", ElemType::F64, false),
            ("len", ElemType::F64, false),
            ("total", ElemType::F64, false),
        ],
        &[
            ("i", ElemType::Limit),
            ("e", ElemType::Limit),
            ("stop", ElemType::Limit),
            ("j", ElemType::I64),
            ("s", ElemType::F64),
            ("ws", ElemType::F64),
        ],
        vec![
            b::assign(i, cut(b::int(0))),
            b::assign(stop, cut(last)),
            b::assign(j, b::int(1)),
            Stmt::While {
                cond: b::le(b::var(i), b::var(stop)),
                body: [
                    vec![b::assign(
                        e,
                        Expr::Binary(BinOp::Min, Box::new(cut(b::var(j))), Box::new(b::var(stop))),
                    )],
                    if store_pieces {
                        vec![b::store(len, b::sub(b::var(j), b::int(1)), piece.clone())]
                    } else {
                        vec![]
                    },
                    vec![
                        b::assign(s, b::add(b::var(s), piece.clone())),
                        b::assign(ws, b::add(b::var(ws), b::mul(piece, b::load(w, b::var(j))))),
                        b::assign(i, b::after(b::var(e))),
                        b::assign(j, b::add(b::var(j), b::int(1))),
                    ],
                ]
                .concat(),
            },
            b::store(total, b::int(0), b::var(s)),
            b::store(total, b::int(1), b::var(ws)),
            b::store(total, b::int(2), b::cast(ElemType::F64, b::var(j))),
            b::store(total, b::int(3), b::limit_val(b::var(i))),
            b::store(
                total,
                b::int(4),
                b::cast(ElemType::F64, b::limit_eps(b::var(i))),
            ),
        ],
    )
}

/// The same loop on the host with `crate::limit::Limit`: (piece lengths, [s, ws, j, val(i),
/// eps(i)]).
fn piece_loop_host(cuts: &[(f64, i64)], w: &[f64]) -> (Vec<f64>, [f64; 5]) {
    let cut = |j: usize| point(cuts[j].0, cuts[j].1);
    let stop = cut(cuts.len() - 1);
    let (mut i, mut j, mut s, mut ws) = (cut(0), 1, 0.0, 0.0);
    let mut lengths = vec![0.0; cuts.len()];
    while i <= stop {
        let e = cut(j).min(stop);
        let piece = e.val - i.val;
        lengths[j - 1] = piece;
        s += piece;
        ws += crate::semantics::mul_f(piece, w[j]);
        i = e.next();
        j += 1;
    }
    let i = crate::types::canonical_limit(i);
    let eps = f64::from(i.eps.sign());
    (lengths, [s, ws, j as f64, i.val, eps])
}

#[test]
fn a_while_loop_over_points_measures_its_pieces() {
    let cases: Vec<Vec<(f64, i64)>> = vec![
        // [0, 1) [1, 2.5] (2.5, 4]: three pieces of lengths 1, 1.5, 1.5.
        vec![(0.0, 0), (1.0, -1), (2.5, 0), (4.0, 0)],
        vec![
            (-3.0, 1),
            (-1.0, 0),
            (-1.0, 1),
            (0.0, -1),
            (-0.0, 0),
            (2.0, 0),
        ],
        // A pinpoint: a single piece [5, 5].
        vec![(5.0, 0), (5.0, 0)],
        // Cuts past the end are cut at it.
        vec![(0.5, 0), (0.75, 1), (9.0, 0), (1.0, 0)],
    ];
    let plain = Everywhere::new(piece_loop(true));
    // As the backends see it after the passes `Runner` applies.
    let mut passed = piece_loop(false);
    crate::ir::promote::promote_scalars(&mut passed);
    crate::ir::ieee_mul::ieee_products(&mut passed);
    let shown = passed.to_string();
    assert!(shown.contains("i_saved = i;"), "{shown}");
    let passed = Everywhere::new(passed);
    for cuts in &cases {
        for weights in [vec![2.0; cuts.len()], vec![0.0; cuts.len()]] {
            let bufs = vec![
                Buffer::F64(cuts.iter().map(|c| c.0).collect()),
                Buffer::I64(cuts.iter().map(|c| c.1).collect()),
                Buffer::F64(weights.clone().into()),
                Buffer::F64(vec![0.0; cuts.len()].into()),
                Buffer::F64(vec![0.0; 5].into()),
            ];
            let (lengths, totals) = piece_loop_host(cuts, &weights);
            let out = plain.run(&bufs);
            assert_eq!(f64s(&out[3]), &lengths[..], "{cuts:?}");
            assert_eq!(f64s(&out[4]), &totals[..], "{cuts:?}");
            let out = passed.run(&bufs);
            assert_eq!(f64s(&out[4]), &totals[..], "{cuts:?} after the passes");
        }
    }
    let (lengths, totals) = piece_loop_host(&cases[0], &[1.0; 4]);
    assert_eq!(lengths, [1.0, 1.5, 1.5, 0.0]);
    assert_eq!(totals, [4.0, 4.0, 4.0, 4.0, 1.0]);
}

/// Values where the order is delicate: signed zeros, infinities, neighbouring doubles.
fn arb_value() -> impl Strategy<Value = f64> {
    prop::sample::select(vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        1.0f64.next_up(),
        1.0f64.next_down(),
        -1.0,
        (-1.0f64).next_up(),
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        f64::MAX,
        -f64::MAX,
        2.5,
    ])
}

fn arb_sign() -> impl Strategy<Value = i64> {
    prop::sample::select(vec![-1, 0, 1, -1, 0, 1, i64::MIN, i64::MAX, -9, 4])
}

#[test]
fn every_backend_computes_what_limit_rs_computes() {
    let k = Everywhere::new(pair_kernel());
    let mut runner = TestRunner::new(Config {
        cases: 400,
        ..Config::default()
    });
    runner
        .run(
            &((arb_value(), arb_sign()), (arb_value(), arb_sign())),
            |(p, q)| check_pair(&k, p, q),
        )
        .unwrap();
}

/// The kernel for `ir::exact_points`: points whose signs are constants (`make_limit(v, -1)`,
/// `limit(c, 0)`), variables whose assignments all have sign 0 (`p`), or variables whose
/// signs vary at run time (`q`, `r`, `t`), compared every way, with their minima, maxima,
/// selections, steps, values and signs written out. `w` holds values the kernel is told are
/// never NaN (`Kernel::not_nan`); `v` may hold anything.
fn exact_kernel(c: f64) -> Kernel {
    let (v, w, cmp, val, eps) = (BufId(0), BufId(1), BufId(2), BufId(3), BufId(4));
    let (p, q, r, t) = (VarId(0), VarId(1), VarId(2), VarId(3));
    let lv = |i: i64| b::load(v, b::int(i));
    let lw = || b::load(w, b::int(0));
    let ml = |x: Expr, s: i64| b::make_limit(x, b::int(s));
    let mut body = vec![
        b::assign(p, ml(lv(0), 0)),
        b::assign(q, ml(lw(), 1)),
        b::assign(r, b::limit(c, 0)),
    ];
    body.extend(b::if_(
        b::lt(lv(1), Expr::Const(Scalar::F64(0.75))),
        vec![b::assign(q, ml(lv(1), -1))],
    ));
    body.extend(b::if_(
        b::lt(lv(0), lv(1)),
        vec![b::assign(r, b::after(b::var(p)))],
    ));
    body.push(b::assign(t, b::min(b::var(q), b::var(r))));
    let operands = vec![
        b::var(p),
        b::var(q),
        b::var(r),
        b::var(t),
        ml(lv(0), -1),
        ml(lv(1), 1),
        ml(lw(), 0),
        b::limit(c, -1),
        b::limit(c, 0),
        b::limit(c, 1),
        b::after(b::var(q)),
        b::before(b::var(p)),
    ];
    let mut results = operands.clone();
    let (mut nc, mut nv) = (0, 0);
    for x in &operands {
        for y in &operands {
            for op in CMPS {
                body.push(b::store(
                    cmp,
                    b::int(nc),
                    Expr::Binary(op, Box::new(x.clone()), Box::new(y.clone())),
                ));
                nc += 1;
            }
        }
    }
    for x in &operands[..4] {
        for y in &operands {
            results.push(b::min(x.clone(), y.clone()));
            results.push(b::max(x.clone(), y.clone()));
            results.push(b::select(b::lt(lv(0), lv(1)), x.clone(), y.clone()));
        }
    }
    for x in results {
        body.push(b::store(val, b::int(nv), b::limit_val(x.clone())));
        body.push(b::store(eps, b::int(nv), b::limit_eps(x)));
        nv += 1;
    }
    // A square of a point's offset, the disc test's shape (`ir::exact_points::squares`).
    let d = || {
        b::sub(
            Expr::Unary(crate::ir::UnOp::LimitVal, Box::new(b::var(t))),
            lv(1),
        )
    };
    body.push(b::store(val, b::int(nv), b::mul(d(), d())));
    let mut k = kernel(
        &[
            ("v", ElemType::F64, false),
            ("w", ElemType::F64, false),
            ("cmp", ElemType::Bool, false),
            ("val", ElemType::F64, false),
            ("eps", ElemType::I64, false),
        ],
        &[
            ("p", ElemType::Limit),
            ("q", ElemType::Limit),
            ("r", ElemType::Limit),
            ("t", ElemType::Limit),
        ],
        body,
    );
    k.not_nan = vec![w];
    k
}

fn exact_buffers(k: &Kernel, v: [f64; 2], w: f64) -> Vec<Buffer> {
    let count = |buf: BufId| {
        let mut n = 0;
        fn walk(s: &[Stmt], buf: BufId, n: &mut usize) {
            for s in s {
                if matches!(s, Stmt::Store { buf: b, .. } if *b == buf) {
                    *n += 1;
                }
                for inner in s.bodies() {
                    walk(inner, buf, n);
                }
            }
        }
        walk(&k.body, buf, &mut n);
        n
    };
    vec![
        Buffer::F64(v.to_vec().into()),
        Buffer::F64(vec![w].into()),
        Buffer::Bool(vec![false; count(BufId(2))].into()),
        Buffer::F64(vec![0.0; count(BufId(3))].into()),
        Buffer::I64(vec![0; count(BufId(4))].into()),
    ]
}

/// `ir::exact_points` changes no result: the kernel as written (points as keys) and after
/// the pass (floats and signs), each on every backend, on values where ties, signed zeros,
/// infinities and NaN decide; constants include NaN and `-0.0`.
#[test]
fn exact_points_keep_every_answer() {
    let values = || prop_oneof![arb_value(), Just(f64::NAN), Just(-f64::NAN)];
    for c in [1.0, -0.0, f64::NAN] {
        let plain = exact_kernel(c);
        let mut passed = plain.clone();
        crate::ir::exact_points::exact_points(&mut passed);
        passed
            .check()
            .unwrap_or_else(|e| panic!("ill-typed after the pass: {e}\n{passed}"));
        // The pass did its work: no point variable is left, and far fewer points are made.
        assert!(
            passed.vars.iter().all(|d| d.ty != ElemType::Limit),
            "{passed}"
        );
        // Comparisons, minima and maxima of points (as keys) left.
        let on_keys = |k: &Kernel| {
            let mut n = 0;
            fn walk(k: &Kernel, s: &[Stmt], n: &mut usize) {
                for s in s {
                    for e in s.own_exprs() {
                        e.visit(&mut |x| {
                            if let Expr::Binary(_, a, _) = x
                                && k.type_of(a) == ElemType::Limit
                            {
                                *n += 1;
                            }
                        });
                    }
                    for inner in s.bodies() {
                        walk(k, inner, n);
                    }
                }
            }
            walk(k, &k.body, &mut n);
            n
        };
        assert!(on_keys(&passed) * 2 < on_keys(&plain), "{passed}");
        let (plain_runs, passed_runs) = (Everywhere::new(plain), Everywhere::new(passed));
        let mut runner = TestRunner::new(Config {
            cases: 120,
            ..Config::default()
        });
        runner
            .run(&(values(), values(), arb_value()), |(v0, v1, w)| {
                let bufs = exact_buffers(&plain_runs.k, [v0, v1], w);
                let want = plain_runs.run(&bufs);
                let got = passed_runs.run(&bufs);
                prop_assert_eq!(
                    &got[2],
                    &want[2],
                    "comparisons, c = {}, v = {:?}",
                    c,
                    (v0, v1, w)
                );
                prop_assert_eq!(&got[4], &want[4], "signs, c = {}, v = {:?}", c, (v0, v1, w));
                // Values to the bit, except a NaN's payload (`build::limit_val`).
                for (n, (g, e)) in f64s(&got[3]).iter().zip(f64s(&want[3])).enumerate() {
                    prop_assert!(
                        g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()),
                        "value {}: {} vs {}, c = {}, v = {:?}",
                        n,
                        g,
                        e,
                        c,
                        (v0, v1, w)
                    );
                }
                Ok(())
            })
            .unwrap();
    }
}
