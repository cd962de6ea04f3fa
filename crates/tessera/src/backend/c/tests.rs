//! The C backend against the interpreter on random expressions. The shared cross-checks in
//! `backend::tests` also run every hand-written kernel on it; here many random expressions
//! share one kernel, because each kernel costs a compiler run.

use crate::backend::tests::{arb_expr, c_backend, kernel, same_buffers};
use crate::backend::{Backend, CBackend, Interpreter};
use crate::ir::build as b;
use crate::ir::{BufId, Expr, Stmt, UnOp, VarId};
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const PER_KERNEL: usize = 120;

#[test]
fn c_and_interpreter_agree_on_random_expressions() {
    let Some(cb) = c_backend() else { return };
    let types = [ElemType::Bool, ElemType::I64, ElemType::F64];
    for batch in 0..3u8 {
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &[batch; 32]),
        );
        let consts = [
            [
                Scalar::I64(i64::MIN),
                Scalar::I64(-1),
                Scalar::F64(f64::NAN),
                Scalar::F64(-0.0),
                Scalar::Bool(true),
            ],
            [
                Scalar::I64(7),
                Scalar::I64(0),
                Scalar::F64(1e300),
                Scalar::F64(-2.5),
                Scalar::Bool(false),
            ],
            [
                Scalar::I64(i64::MAX),
                Scalar::I64(-3),
                Scalar::F64(f64::NEG_INFINITY),
                Scalar::F64(0.75),
                Scalar::Bool(true),
            ],
        ][batch as usize];
        let mut body: Vec<Stmt> = consts
            .iter()
            .enumerate()
            .map(|(k, c)| b::assign(VarId(k as u32), Expr::Const(*c)))
            .collect();
        for slot in 0..PER_KERNEL {
            let t = slot % 3;
            let e = arb_expr(types[t], 3)
                .new_tree(&mut runner)
                .unwrap()
                .current();
            body.push(b::store(BufId(t as u32), b::int((slot / 3) as i64), e));
        }
        let k = kernel(
            &[
                ("bools", ElemType::Bool, false),
                ("ints", ElemType::I64, false),
                ("floats", ElemType::F64, false),
            ],
            &[
                ("a", ElemType::I64),
                ("b", ElemType::I64),
                ("x", ElemType::F64),
                ("y", ElemType::F64),
                ("p", ElemType::Bool),
            ],
            body,
        );
        k.check().unwrap();
        let n = PER_KERNEL / 3;
        let bufs: Vec<Buffer> = types
            .iter()
            .map(|&t| Buffer::filled(t, n, Scalar::zero(t)))
            .collect();
        let mut want = bufs.clone();
        Interpreter::new()
            .compile(&k)
            .unwrap()
            .run(&mut want)
            .unwrap();
        let mut got = bufs;
        cb.compile(&k).unwrap().run(&mut got).unwrap();
        if !same_buffers(&want, &got) {
            for (t, (w, g)) in want.iter().zip(&got).enumerate() {
                for s in 0..n {
                    assert!(
                        w.get(s) == g.get(s) || (w.get(s).is_nan() && g.get(s).is_nan()),
                        "slot {s} of buffer {t}: interpreter {:?}, C {:?}\n{k}\n{}",
                        w.get(s),
                        g.get(s),
                        CBackend::source(&k)
                    );
                }
            }
        }
    }
}

#[test]
fn objects_are_unloaded_with_their_last_kernel() {
    let Some(cb) = c_backend() else { return };
    // A constant no other test uses, so no other test shares this object.
    let marker = 0x007e_55e7_a1ed_i64;
    let k = kernel(
        &[("out", ElemType::I64, false)],
        &[],
        vec![b::store(BufId(0), b::int(0), b::int(marker))],
    );
    let source = cb.source_of(&k);
    let path = super::cache::object_path(&cb.cache_dir, &source, &cb.command(&source));
    let live = || {
        super::registry()
            .lock()
            .unwrap()
            .get(&path)
            .is_some_and(|w| w.strong_count() > 0)
    };
    let first = cb.compile_object(&k, false).unwrap();
    let second = cb.compile_object(&k, false).unwrap();
    assert!(live());
    drop(first);
    assert!(live(), "the second kernel still uses the object");
    drop(second);
    assert!(!live(), "the object stays loaded without kernels");
    // Loaded again on demand, and it runs.
    let again = cb.compile(&k).unwrap();
    let mut bufs = vec![Buffer::filled(ElemType::I64, 1, Scalar::I64(0))];
    again.run(&mut bufs).unwrap();
    assert_eq!(bufs[0].get(0), Scalar::I64(marker));
}

/// A kernel cut into one function per top-level statement (`parts`): variables carried from
/// part to part (a loop's counter after its loop, a float sum, a point), a buffer grown in one
/// part and written in the next, and a fault in a later part, all as the interpreter has them.
#[test]
fn kernels_in_parts_carry_variables_buffers_and_faults() {
    let Some(cp) = super::super::tests::c_parts_backend() else {
        return;
    };
    let (i, s, p, n) = (VarId(0), VarId(1), VarId(2), VarId(3));
    let body = |bad: i64| {
        vec![
            b::assign(n, Expr::Len(BufId(0))),
            Stmt::For {
                var: i,
                start: b::int(0),
                stop: b::var(n),
                body: vec![b::assign(
                    s,
                    b::add(b::var(s), b::load(BufId(0), b::var(i))),
                )],
            },
            b::assign(p, Expr::Const(Scalar::limit(2.5, 1))),
            Stmt::Grow {
                buf: BufId(1),
                len: b::add(b::var(i), b::int(2)),
            },
            b::store(BufId(1), b::var(i), b::var(s)),
            b::store(
                BufId(1),
                b::add(b::var(i), b::int(1)),
                b::add(b::var(s), Expr::Unary(UnOp::LimitVal, Box::new(b::var(p)))),
            ),
            b::store(BufId(1), b::int(bad), Expr::Const(Scalar::F64(1.0))),
        ]
    };
    for bad in [0, 99] {
        let k = kernel(
            &[("x", ElemType::F64, false), ("out", ElemType::F64, true)],
            &[
                ("i", ElemType::I64),
                ("s", ElemType::F64),
                ("p", ElemType::Limit),
                ("n", ElemType::I64),
            ],
            body(bad),
        );
        let source = cp.source_of(&k);
        assert!(source.contains("tessera_part6("), "{source}");
        let bufs = vec![
            Buffer::F64(vec![1.5, -0.25, 4.0].into()),
            Buffer::F64(vec![].into()),
        ];
        let mut want = bufs.clone();
        let rw = Interpreter::new().compile(&k).unwrap().run(&mut want);
        let mut got = bufs.clone();
        let rg = cp.compile(&k).unwrap().run(&mut got);
        assert_eq!(rw, rg, "{source}");
        assert!(same_buffers(&want, &got), "{want:?}\n{got:?}\n{source}");
        assert_eq!(rg.is_err(), bad == 99);
        if bad == 0 {
            assert_eq!(got[1].get(3), Scalar::F64(5.25));
            assert_eq!(got[1].get(4), Scalar::F64(7.75));
        }
    }
}

/// A scatter loop (`bins[img[p]] += 1`) is unrolled (`unroll`), and counts, the remainder
/// past the last full step and a fault partway (the elements before it updated, as the
/// interpreter leaves them) are the interpreter's; without unrolling there is no pragma.
#[test]
fn scatter_loops_unroll_with_the_interpreters_results_and_faults() {
    let Some(cb) = c_backend() else { return };
    let (p, v) = (VarId(0), VarId(1));
    let k = kernel(
        &[
            ("img", ElemType::I64, false),
            ("bins", ElemType::I64, false),
        ],
        &[("p", ElemType::I64), ("v", ElemType::I64)],
        vec![Stmt::For {
            var: p,
            start: b::int(0),
            stop: Expr::Len(BufId(0)),
            body: vec![
                b::assign(v, b::load(BufId(0), b::var(p))),
                b::store(
                    BufId(1),
                    b::var(v),
                    b::add(b::load(BufId(1), b::var(v)), b::int(1)),
                ),
            ],
        }],
    );
    let source = cb.clone().with_unroll(4).source_of(&k);
    assert!(source.contains("#pragma GCC unroll 4"), "{source}");
    assert!(!cb.clone().with_unroll(1).source_of(&k).contains("unroll"));
    let compiled = cb.clone().with_unroll(4).compile(&k).unwrap();
    // 11 pixels: two steps of four and a remainder of three; then a bad bin at the 10th.
    for bad in [false, true] {
        let mut img: Vec<i64> = (0..11).map(|x| (x * 7) % 5).collect();
        if bad {
            img[9] = 5;
        }
        let bufs = vec![Buffer::I64(img.into()), Buffer::I64(vec![0; 5].into())];
        let mut want = bufs.clone();
        let rw = Interpreter::new().compile(&k).unwrap().run(&mut want);
        let mut got = bufs.clone();
        let rg = compiled.run(&mut got);
        assert_eq!(rw, rg);
        assert_eq!(rg.is_err(), bad);
        assert!(same_buffers(&want, &got), "{want:?}\n{got:?}");
    }
}

/// Products in an elementwise loop with a factor fixed for the whole loop (`t_mulza`,
/// `t_mulzb`) keep the IR's strong zero: every pairing of zeros of either sign, infinities,
/// NaN and ordinary values, the fixed factor on either side, bit for bit as the interpreter;
/// a body GCC leaves scalar (an `exp`) keeps the plain select.
#[test]
fn products_with_a_fixed_factor_keep_the_strong_zero() {
    let Some(cb) = c_backend() else { return };
    let (o, s) = (VarId(0), VarId(1));
    let w = || b::load(BufId(0), b::var(o));
    let mul = |x: Expr, y: Expr| Expr::Binary(crate::ir::BinOp::Mul, Box::new(x), Box::new(y));
    let values = SPECIAL;
    // `third` is the last store's value: `w * w`, or an `exp` that keeps GCC from
    // vectorising the loop (where the masks would only lengthen the products' chains).
    let kernel_of = |fixed: f64, third: Expr| {
        let body = vec![
            b::assign(s, Expr::Const(Scalar::F64(fixed))),
            Stmt::For {
                var: o,
                start: b::int(0),
                stop: Expr::Len(BufId(0)),
                body: vec![
                    b::store(BufId(1), b::var(o), mul(b::var(s), w())),
                    b::store(BufId(2), b::var(o), mul(w(), b::var(s))),
                    b::store(BufId(3), b::var(o), third),
                ],
            },
        ];
        kernel(
            &[
                ("w", ElemType::F64, false),
                ("a", ElemType::F64, false),
                ("b", ElemType::F64, false),
                ("c", ElemType::F64, false),
            ],
            &[("o", ElemType::I64), ("s", ElemType::F64)],
            body,
        )
    };
    let scalar = kernel_of(1.5, Expr::Unary(UnOp::Exp, Box::new(w())));
    let source = cb.source_of(&scalar);
    assert!(
        source.contains("t_mulz(v1, ") && !source.contains("t_mulza(v1, "),
        "{source}"
    );
    for (k, fixed) in values.iter().enumerate() {
        let kern = kernel_of(*fixed, mul(w(), w()));
        let source = cb.source_of(&kern);
        if k == 0 {
            for f in ["t_mulza(v1, ", "t_mulzb(", ", v1)", "t_mulz("] {
                assert!(source.contains(f), "{f}\n{source}");
            }
        }
        // Long enough for GCC's vector loop and its remainder.
        let w: Vec<f64> = (0..37)
            .map(|i| values[(i * 5 + k) % values.len()])
            .collect();
        let n = w.len();
        let bufs = vec![
            Buffer::F64(w.into()),
            Buffer::F64(vec![7.0; n].into()),
            Buffer::F64(vec![7.0; n].into()),
            Buffer::F64(vec![7.0; n].into()),
        ];
        assert_same_bits(cb, &kern, &bufs, &format!("s = {fixed}\n{source}"));
    }
}

/// A product with a fixed factor in a loop GCC leaves scalar (a scatter through a
/// permutation, in the bounds-tested copy of a loop over a stored range: a sparse product's
/// row of B scaled by an entry of A) takes `t_mulzs`'s mask in vector registers, and keeps
/// the IR's strong zero bit for bit: every pairing of zeros of either sign, infinities, NaN
/// and ordinary values, the fixed factor on either side.
#[test]
fn scalar_products_with_a_fixed_factor_keep_the_strong_zero() {
    let Some(cb) = c_backend() else { return };
    let (o, s, lo, hi, count) = (VarId(0), VarId(1), VarId(2), VarId(3), VarId(4));
    let mul = |x: Expr, y: Expr| Expr::Binary(crate::ir::BinOp::Mul, Box::new(x), Box::new(y));
    let values = SPECIAL;
    // buffers: w (values), perm (a permutation of w's positions), range (the loop's bounds),
    // a and b (the scattered products, s * w and w * s).
    let w = || b::load(BufId(0), b::var(o));
    let at = || b::load(BufId(1), b::var(o));
    let kernel_of = |fixed: f64| {
        let body = vec![
            b::assign(s, Expr::Const(Scalar::F64(fixed))),
            b::assign(lo, b::load(BufId(2), b::int(0))),
            b::assign(hi, b::load(BufId(2), b::int(1))),
            b::assign(count, b::int(0)),
            Stmt::For {
                var: o,
                start: b::var(lo),
                stop: b::var(hi),
                body: vec![
                    b::store(BufId(3), at(), mul(b::var(s), w())),
                    b::store(BufId(4), at(), mul(w(), b::var(s))),
                    // A value carried between iterations: no elementwise loop (whose
                    // products are selects), as a sparse product's count of its slots.
                    b::assign(count, b::add(b::var(count), b::int(1))),
                ],
            },
        ];
        kernel(
            &[
                ("w", ElemType::F64, false),
                ("perm", ElemType::I64, false),
                ("range", ElemType::I64, false),
                ("a", ElemType::F64, false),
                ("b", ElemType::F64, false),
            ],
            &[
                ("o", ElemType::I64),
                ("s", ElemType::F64),
                ("lo", ElemType::I64),
                ("hi", ElemType::I64),
                ("count", ElemType::I64),
            ],
            body,
        )
    };
    for (k, fixed) in values.iter().enumerate() {
        let kern = kernel_of(*fixed);
        let source = cb.source_of(&kern);
        assert!(
            source.contains("t_mulzs(v1, ") && source.contains(", v1)"),
            "{source}"
        );
        let n = 37;
        let w: Vec<f64> = (0..n).map(|i| values[(i * 5 + k) % values.len()]).collect();
        let perm: Vec<i64> = (0..n as i64).map(|i| (i * 11) % n as i64).collect();
        let bufs = vec![
            Buffer::F64(w.into()),
            Buffer::I64(perm.into()),
            Buffer::I64(vec![1, n as i64 - 2].into()),
            Buffer::F64(vec![7.0; n].into()),
            Buffer::F64(vec![7.0; n].into()),
        ];
        assert_same_bits(cb, &kern, &bufs, &format!("s = {fixed}\n{source}"));
    }
}

/// Values whose products test a strong zero: zeros of either sign, infinities, NaN, ordinary
/// and tiny values.
const SPECIAL: [f64; 8] = [
    0.0,
    -0.0,
    1.5,
    -2.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-300,
];

/// Runs `kern` on the interpreter and the C backend from `bufs` and asserts every element
/// equal, floats bit for bit (signed zeros too: `same_buffers` compares values, where
/// -0.0 == 0.0), any NaN equal to any NaN.
fn assert_same_bits(cb: &CBackend, kern: &crate::ir::Kernel, bufs: &[Buffer], ctx: &str) {
    let mut want = bufs.to_vec();
    Interpreter::new()
        .compile(kern)
        .unwrap()
        .run(&mut want)
        .unwrap();
    let mut got = bufs.to_vec();
    cb.compile(kern).unwrap().run(&mut got).unwrap();
    for (x, y) in want.iter().zip(&got) {
        for (p, q) in x.to_scalars().into_iter().zip(y.to_scalars()) {
            let same = match (p, q) {
                (Scalar::F64(p), Scalar::F64(q)) => {
                    p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())
                }
                (p, q) => p == q,
            };
            assert!(same, "{ctx}: {p:?} against {q:?}");
        }
    }
}
