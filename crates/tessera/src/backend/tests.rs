//! The JIT, the C backend and the interpreter must agree on every kernel, including the corner
//! cases of the IR's arithmetic (division by zero, shifts, saturating casts, NaN) and its
//! failures. (The C backend takes part when a C compiler is installed.)

use super::{Backend, CBackend, Interpreter, Jit};
use crate::error::Error;
use crate::ir::build as b;
use crate::ir::cx::{KernelError, KernelErrorKind};
use crate::ir::{BinOp, BufDecl, BufId, Expr, Kernel, Stmt, UnOp, VarDecl, VarId};
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use proptest::prelude::*;

pub(super) fn kernel(
    bufs: &[(&str, ElemType, bool)],
    vars: &[(&str, ElemType)],
    body: Vec<Stmt>,
) -> Kernel {
    Kernel {
        name: "test".into(),
        bufs: bufs
            .iter()
            .map(|&(n, elem, growable)| BufDecl {
                name: n.into(),
                elem,
                growable,
                tensor: None,
                scratch: false,
            })
            .collect(),
        vars: vars
            .iter()
            .map(|&(n, ty)| VarDecl {
                name: n.into(),
                ty,
                cold: false,
            })
            .collect(),
        body,
        errors: vec![custom_failure()],
        bounded: vec![],
        not_nan: vec![],
        vectorized: vec![],
    }
}

/// The error `Stmt::Fail(0)` raises in test kernels.
pub(super) fn custom_failure() -> KernelError {
    KernelError::new("y", KernelErrorKind::Duplicate { level: "SparseCOO" })
}

/// The C backend for tests, caching in a folder of the temporary directory; `None` (after
/// saying so once) when no C compiler is installed.
pub(crate) fn c_backend() -> Option<&'static CBackend> {
    static C: std::sync::OnceLock<Option<CBackend>> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
        if c.compiler_available() {
            Some(c)
        } else {
            eprintln!("no C compiler (cc or $CC): skipping the C backend in these tests");
            None
        }
    })
    .as_ref()
}

/// The C backend of [`c_backend`] with every top-level statement of a kernel compiled as a
/// function of its own (`backend::c::parts`), which the default does only for large kernels.
pub(crate) fn c_parts_backend() -> Option<&'static CBackend> {
    static C: std::sync::OnceLock<Option<CBackend>> = std::sync::OnceLock::new();
    C.get_or_init(|| c_backend().map(|c| c.clone().with_parts(0, 1)))
        .as_ref()
}

/// Buffers equal value for value, any NaN matching any NaN (sign and payload may differ
/// between machine code and Rust).
pub(super) fn same_buffers(a: &[Buffer], c: &[Buffer]) -> bool {
    let same = |x: &Buffer, y: &Buffer| {
        x.elem() == y.elem()
            && x.to_scalars()
                .iter()
                .zip(y.to_scalars())
                .all(|(p, q)| *p == q || (p.is_nan() && q.is_nan()))
            && x.len() == y.len()
    };
    a.len() == c.len() && a.iter().zip(c).all(|(x, y)| same(x, y))
}

/// Run on every backend; all results (buffers after the run, or the error) must be equal.
fn run_both(k: &Kernel, bufs: &[Buffer]) -> (Result<(), Error>, Vec<Buffer>) {
    run_on(k, bufs, true)
}

/// As `run_both`; without `with_c` only the JIT and the interpreter (for the many small
/// random kernels, which `backend::c::tests` batches into a few C compiles instead).
fn run_on(k: &Kernel, bufs: &[Buffer], with_c: bool) -> (Result<(), Error>, Vec<Buffer>) {
    k.check()
        .unwrap_or_else(|e| panic!("ill-typed test kernel: {e}\n{k}"));
    let mut a = bufs.to_vec();
    let ra = Jit::new().compile(k).unwrap().run(&mut a);
    let mut c = bufs.to_vec();
    let rc = Interpreter::new().compile(k).unwrap().run(&mut c);
    assert_eq!(ra, rc, "JIT and interpreter disagree on the result\n{k}");
    assert!(
        same_buffers(&a, &c),
        "JIT and interpreter disagree on the buffers\n{k}\n{a:?}\n{c:?}"
    );
    if let Some(cb) = c_backend().filter(|_| with_c) {
        let mut n = bufs.to_vec();
        let rn = cb.compile(k).unwrap().run(&mut n);
        let src = CBackend::source(k);
        assert_eq!(ra, rn, "JIT and C disagree on the result\n{k}\n{src}");
        assert!(
            same_buffers(&a, &n),
            "JIT and C disagree on the buffers\n{k}\n{a:?}\n{n:?}\n{src}"
        );
    }
    // Cut into parts (a kernel of one statement would be the same source).
    if let Some(cp) = c_parts_backend().filter(|_| with_c && k.body.len() > 1) {
        let mut n = bufs.to_vec();
        let rn = cp.compile(k).unwrap().run(&mut n);
        let src = cp.source_of(k);
        assert_eq!(
            ra, rn,
            "JIT and C in parts disagree on the result\n{k}\n{src}"
        );
        assert!(
            same_buffers(&a, &n),
            "JIT and C in parts disagree on the buffers\n{k}\n{a:?}\n{n:?}\n{src}"
        );
    }
    (ra, a)
}

#[test]
fn sums_a_vector_of_each_float_width() {
    for (elem, data) in [
        (ElemType::F64, Buffer::F64(vec![1.5, 2.0, -0.5].into())),
        (ElemType::F32, Buffer::F32(vec![1.5, 2.0, -0.5].into())),
        (ElemType::I32, Buffer::I32(vec![1, 2, -5].into())),
        (ElemType::U8, Buffer::U8(vec![200, 100, 1].into())),
    ] {
        let out_ty = elem.compute();
        let (i, s) = (VarId(0), VarId(1));
        let k = kernel(
            &[("x", elem, false), ("out", out_ty, false)],
            &[("i", ElemType::I64), ("s", out_ty)],
            vec![
                Stmt::For {
                    var: i,
                    start: b::int(0),
                    stop: Expr::Len(BufId(0)),
                    body: vec![b::assign(
                        s,
                        b::add(b::var(s), b::load(BufId(0), b::var(i))),
                    )],
                },
                b::store(BufId(1), b::int(0), b::var(s)),
            ],
        );
        let (r, bufs) = run_both(&k, &[data, Buffer::filled(out_ty, 1, Scalar::zero(out_ty))]);
        r.unwrap();
        let want = match elem {
            ElemType::I32 => Scalar::I64(-2),
            ElemType::U8 => Scalar::I64(301),
            _ => Scalar::F64(3.0),
        };
        assert_eq!(bufs[1].get(0), want);
    }
}

#[test]
fn grow_fill_and_narrowing_stores() {
    let i = VarId(0);
    let k = kernel(
        &[("v", ElemType::I8, true)],
        &[("i", ElemType::I64)],
        vec![
            Stmt::Grow {
                buf: BufId(0),
                len: b::int(5),
            },
            Stmt::Fill {
                buf: BufId(0),
                start: b::int(0),
                stop: b::int(5),
                value: b::int(7),
            },
            Stmt::For {
                var: i,
                start: b::int(0),
                stop: b::int(3),
                body: vec![b::store(
                    BufId(0),
                    b::var(i),
                    b::mul(b::var(i), b::int(100)),
                )],
            },
        ],
    );
    let (r, bufs) = run_both(&k, &[Buffer::I8(vec![].into())]);
    r.unwrap();
    let Buffer::I8(v) = &bufs[0] else {
        unreachable!()
    };
    assert_eq!(&v[..5], &[0, 100, -56, 7, 7]);
}

#[test]
fn a_scratch_buffer_in_a_local_array_reads_back_what_the_kernel_wrote() {
    // `s` is scratch grown to 8 (a lane array): the C backend keeps it in an aligned local
    // array; what the kernel reads back from it and its length must be the same everywhere.
    let i = VarId(0);
    let mut k = kernel(
        &[("s", ElemType::F64, true), ("out", ElemType::F64, false)],
        &[("i", ElemType::I64)],
        vec![
            Stmt::Grow {
                buf: BufId(0),
                len: b::int(4),
            },
            Stmt::Grow {
                buf: BufId(0),
                len: b::int(8),
            },
            Stmt::For {
                var: i,
                start: b::int(0),
                stop: Expr::Len(BufId(0)),
                body: vec![b::store(
                    BufId(0),
                    b::var(i),
                    b::add(
                        b::cast(ElemType::F64, b::var(i)),
                        b::load(BufId(0), b::var(i)),
                    ),
                )],
            },
            b::store(BufId(1), b::int(0), b::load(BufId(0), b::int(7))),
            b::store(
                BufId(1),
                b::int(1),
                b::cast(ElemType::F64, Expr::Len(BufId(0))),
            ),
        ],
    );
    k.bufs[0].scratch = true;
    let bufs = [Buffer::F64(vec![].into()), Buffer::F64(vec![0.0; 2].into())];
    let mut jit = bufs.to_vec();
    Jit::new().compile(&k).unwrap().run(&mut jit).unwrap();
    assert_eq!(jit[1], Buffer::F64(vec![7.0, 8.0].into()));
    if let Some(cb) = c_backend() {
        let src = CBackend::source(&k);
        assert!(src.contains("l0[8] __attribute__((aligned(64)))"), "{src}");
        let mut c = bufs.to_vec();
        cb.compile(&k).unwrap().run(&mut c).unwrap();
        assert_eq!(c[1], jit[1], "{src}");
        // Not scratch: the buffer handed in, grown and written.
        k.bufs[0].scratch = false;
        let src = CBackend::source(&k);
        assert!(!src.contains("l0["), "{src}");
    }
}

#[test]
fn search_break_and_while() {
    let (lo, n) = (VarId(0), VarId(1));
    let k = kernel(
        &[("idx", ElemType::I64, false), ("out", ElemType::I64, false)],
        &[("lo", ElemType::I64), ("n", ElemType::I64)],
        vec![
            b::assign(
                lo,
                Expr::SearchGe {
                    buf: BufId(0),
                    lo: Box::new(b::int(0)),
                    hi: Box::new(Expr::Len(BufId(0))),
                    key: Box::new(b::int(6)),
                },
            ),
            b::store(BufId(1), b::int(0), b::var(lo)),
            Stmt::While {
                cond: b::boolean(true),
                body: vec![
                    b::assign(n, b::add(b::var(n), b::int(1))),
                    Stmt::If {
                        cond: b::eq(b::var(n), b::int(10)),
                        then: vec![Stmt::Break],
                        otherwise: vec![],
                    },
                ],
            },
            b::store(BufId(1), b::int(1), b::var(n)),
        ],
    );
    let (r, bufs) = run_both(
        &k,
        &[
            Buffer::I64(vec![1, 3, 5, 7, 9].into()),
            Buffer::I64(vec![0, 0].into()),
        ],
    );
    r.unwrap();
    assert_eq!(bufs[1], Buffer::I64(vec![3, 10].into()));
}

/// `out[i] = x[i + 1] + x[i - 1]` over `lo..hi`: the C backend checks such a loop's range once
/// before it and runs an unchecked copy when the range fits, the checked copy otherwise; both
/// must stop at the same access with the same writes done as the JIT and the interpreter.
#[test]
fn shifted_loop_accesses_fail_at_the_same_place() {
    let i = VarId(0);
    let k = kernel(
        &[
            ("x", ElemType::F64, false),
            ("out", ElemType::F32, false),
            ("range", ElemType::I64, false),
        ],
        &[("i", ElemType::I64)],
        vec![Stmt::For {
            var: i,
            start: b::load(BufId(2), b::int(0)),
            stop: b::load(BufId(2), b::int(1)),
            body: vec![b::store(
                BufId(1),
                b::var(i),
                b::add(
                    b::load(BufId(0), b::add(b::var(i), b::int(1))),
                    b::load(BufId(0), b::sub(b::var(i), b::int(1))),
                ),
            )],
        }],
    );
    let x = Buffer::F64((0..8).map(|v| v as f64 * 1.5).collect());
    let out = Buffer::F32(vec![0.0; 8].into());
    for (lo, hi, ok) in [
        (1, 7, true),
        (3, 3, true),
        (5, 2, true),
        (0, 5, false),
        (2, 8, false),
    ] {
        let (r, bufs) = run_both(
            &k,
            &[x.clone(), out.clone(), Buffer::I64(vec![lo, hi].into())],
        );
        assert_eq!(r.is_ok(), ok, "{lo}..{hi}: {r:?}");
        if lo == 2 {
            // Written up to the failing position.
            assert_eq!(bufs[1].get(6), Scalar::F32(7.5 + 10.5), "{bufs:?}");
        }
    }
}

/// `out[w + i] = x[w + i - 1] * 2` over `lo..hi` with a base `w` the loop keeps (a row's
/// start): the C backend's range test before the loop takes `w + i` in 128 bits, so a huge or
/// negative base fails at the same access as on the other backends instead of wrapping into
/// range.
#[test]
fn based_loop_accesses_fail_at_the_same_place() {
    let (i, w) = (VarId(0), VarId(1));
    let k = kernel(
        &[
            ("x", ElemType::F64, false),
            ("out", ElemType::F64, false),
            ("range", ElemType::I64, false),
        ],
        &[("i", ElemType::I64), ("w", ElemType::I64)],
        vec![
            Stmt::Assign(w, b::load(BufId(2), b::int(2))),
            Stmt::For {
                var: i,
                start: b::load(BufId(2), b::int(0)),
                stop: b::load(BufId(2), b::int(1)),
                body: vec![b::store(
                    BufId(1),
                    b::add(b::var(w), b::var(i)),
                    b::mul(
                        b::load(BufId(0), b::add(b::add(b::var(w), b::var(i)), b::int(-1))),
                        Expr::Const(Scalar::F64(2.0)),
                    ),
                )],
            },
        ],
    );
    let x = Buffer::F64((0..8).map(|v| v as f64 + 0.5).collect());
    let out = Buffer::F64(vec![0.0; 8].into());
    for (lo, hi, base, ok) in [
        (1, 5, 3, true),
        (0, 4, 4, true),
        (2, 2, i64::MAX, true),
        (0, 4, 5, false),
        (0, 3, 0, false),
        (0, 2, i64::MAX, false),
        (0, 2, i64::MIN, false),
        (3, 5, i64::MAX - 1, false),
        (-4, 2, 5, true),
        (-5, 2, 5, false),
    ] {
        let (r, bufs) = run_both(
            &k,
            &[
                x.clone(),
                out.clone(),
                Buffer::I64(vec![lo, hi, base].into()),
            ],
        );
        assert_eq!(r.is_ok(), ok, "{lo}..{hi} at {base}: {r:?}");
        if (lo, base) == (0, 5) {
            // Written up to the failing position.
            assert_eq!(bufs[1].get(7), Scalar::F64(2.0 * 6.5), "{bufs:?}");
        }
    }
}

#[test]
fn out_of_bounds_and_fail_are_errors_not_crashes() {
    let oob = kernel(
        &[("x", ElemType::F64, false)],
        &[],
        vec![b::store(BufId(0), b::int(3), Expr::Const(Scalar::F64(1.0)))],
    );
    let (r, _) = run_both(&oob, &[Buffer::F64(vec![0.0; 3].into())]);
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("index 3") && msg.contains("`x`"), "{msg}");
    let neg = kernel(
        &[("x", ElemType::F64, false)],
        &[],
        vec![b::store(
            BufId(0),
            b::int(-1),
            Expr::Const(Scalar::F64(1.0)),
        )],
    );
    assert!(
        run_both(&neg, &[Buffer::F64(vec![0.0; 3].into())])
            .0
            .is_err()
    );
    let fail = kernel(&[], &[], vec![Stmt::Fail(0)]);
    assert_eq!(run_both(&fail, &[]).0, Err(Error::kernel(custom_failure())));
    let huge = kernel(
        &[("x", ElemType::F64, true)],
        &[],
        vec![Stmt::Grow {
            buf: BufId(0),
            len: b::int(1 << 50),
        }],
    );
    assert!(
        run_both(&huge, &[Buffer::F64(vec![].into())])
            .0
            .unwrap_err()
            .to_string()
            .contains("cannot grow")
    );
    let fill = kernel(
        &[("x", ElemType::F64, false)],
        &[],
        vec![Stmt::Fill {
            buf: BufId(0),
            start: b::int(1),
            stop: b::int(9),
            value: Expr::Const(Scalar::F64(1.0)),
        }],
    );
    assert!(
        run_both(&fill, &[Buffer::F64(vec![0.0; 3].into())])
            .0
            .is_err()
    );
}

#[test]
fn sort_intrinsics_agree_and_check_bounds() {
    let data = Buffer::I64(vec![9, 3, 7, 3, -1, 0, 5].into());
    let sort = |lo: i64, hi: i64| {
        kernel(
            &[("x", ElemType::I64, false)],
            &[],
            vec![Stmt::Sort {
                buf: BufId(0),
                flags: None,
                lo: b::int(lo),
                hi: b::int(hi),
            }],
        )
    };
    let (r, out) = run_both(&sort(1, 6), std::slice::from_ref(&data));
    r.unwrap();
    assert_eq!(out[0], Buffer::I64(vec![9, -1, 0, 3, 3, 7, 5].into()));
    assert!(run_both(&sort(5, 2), std::slice::from_ref(&data)).0.is_ok());
    for (lo, hi) in [(-1, 3), (2, 8)] {
        let msg = run_both(&sort(lo, hi), std::slice::from_ref(&data))
            .0
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`x`"), "{msg}");
    }
    // Slots with flags, as a SparseByteMap's freeze sorts them: a dense range (the flags are
    // listed), a wide one (compared), flags that disagree with the list (compared), and a
    // slot outside the flags (a fault naming the flags).
    let sort_slots = |lo: i64, hi: i64| {
        kernel(
            &[
                ("srt", ElemType::I64, false),
                ("tbl", ElemType::Bool, false),
            ],
            &[],
            vec![Stmt::Sort {
                buf: BufId(0),
                flags: Some(BufId(1)),
                lo: b::int(lo),
                hi: b::int(hi),
            }],
        )
    };
    let flags_of = |slots: &[i64], n: usize| {
        let mut f = vec![false; n];
        for &q in slots {
            f[q as usize] = true;
        }
        Buffer::Bool(f.into())
    };
    let dense: Vec<i64> = (0..200).map(|x| (x * 37) % 211).collect();
    let wide: Vec<i64> = (0..200).map(|x| (x * 7919) % 100_003).collect();
    for (slots, n) in [(dense, 211), (wide, 100_003)] {
        let mut want = slots.clone();
        want.sort_unstable();
        let (r, out) = run_both(
            &sort_slots(0, slots.len() as i64),
            &[Buffer::I64(slots.clone().into()), flags_of(&slots, n)],
        );
        r.unwrap();
        assert_eq!(out[0], Buffer::I64(want.clone().into()));
        let (r, out) = run_both(
            &sort_slots(0, slots.len() as i64),
            &[
                Buffer::I64(slots.clone().into()),
                Buffer::Bool(vec![true; n].into()),
            ],
        );
        r.unwrap();
        assert_eq!(out[0], Buffer::I64(want.into()));
    }
    let msg = run_both(
        &sort_slots(0, 100),
        &[
            Buffer::I64((0..100).rev().collect::<Vec<i64>>().into()),
            Buffer::Bool(vec![true; 99].into()),
        ],
    )
    .0
    .unwrap_err()
    .to_string();
    assert!(msg.contains("`tbl`"), "{msg}");
    // Sort by the second key, then stably by the first: lexicographic order of (k0, k1).
    let perm = |lo: i64, hi: i64| {
        kernel(
            &[
                ("k0", ElemType::I64, false),
                ("k1", ElemType::I64, false),
                ("p", ElemType::I64, false),
            ],
            &[],
            vec![
                Stmt::SortPerm {
                    keys: BufId(1),
                    perm: BufId(2),
                    lo: b::int(lo),
                    hi: b::int(hi),
                },
                Stmt::SortPerm {
                    keys: BufId(0),
                    perm: BufId(2),
                    lo: b::int(lo),
                    hi: b::int(hi),
                },
            ],
        )
    };
    let bufs = [
        Buffer::I64(vec![2, 0, 2, 1, 0].into()),
        Buffer::I64(vec![1, 5, 0, 0, 4].into()),
        Buffer::I64(vec![0, 1, 2, 3, 4].into()),
    ];
    let (r, out) = run_both(&perm(0, 5), &bufs);
    r.unwrap();
    assert_eq!(out[2], Buffer::I64(vec![4, 1, 3, 2, 0].into()));
    let mut bad = bufs.clone();
    bad[2] = Buffer::I64(vec![0, 1, 7, 3, 4].into());
    let msg = run_both(&perm(0, 5), &bad).0.unwrap_err().to_string();
    assert!(msg.contains("index 7") && msg.contains("`k1`"), "{msg}");
    assert!(run_both(&perm(0, 6), &bufs).0.is_err());
}

#[test]
fn hash_find_agrees() {
    // Insert keys one by one: slot = hash_find(t, key); t[slot] = key; record the slots.
    let (k, s) = (VarId(0), VarId(1));
    let keys: Vec<i64> = vec![4, 17, 4, 1 << 40, 0, 33, 17, -3];
    let body = vec![Stmt::For {
        var: k,
        start: b::int(0),
        stop: Expr::Len(BufId(1)),
        body: vec![
            b::assign(
                s,
                Expr::HashFind {
                    table: BufId(0),
                    key: Box::new(b::load(BufId(1), b::var(k))),
                },
            ),
            b::store(BufId(2), b::var(k), b::var(s)),
            Stmt::If {
                cond: b::le(b::int(0), b::var(s)),
                then: vec![b::store(BufId(0), b::var(s), b::load(BufId(1), b::var(k)))],
                otherwise: vec![],
            },
        ],
    }];
    let kern = kernel(
        &[
            ("t", ElemType::I64, false),
            ("keys", ElemType::I64, false),
            ("slots", ElemType::I64, false),
        ],
        &[("k", ElemType::I64), ("s", ElemType::I64)],
        body,
    );
    for size in [0usize, 5, 8] {
        let (r, out) = run_both(
            &kern,
            &[
                Buffer::I64(vec![-1; size].into()),
                Buffer::I64(keys.clone().into()),
                Buffer::I64(vec![0; keys.len()].into()),
            ],
        );
        r.unwrap();
        let slots = out[2].as_i64().unwrap();
        if size == 0 {
            assert!(slots.iter().all(|&x| x == -1));
        } else {
            assert_eq!(slots[0], slots[2], "a key found again");
            assert_eq!(slots[1], slots[6]);
            assert_eq!(slots[7], -1, "negative keys are never stored");
        }
    }
}

#[test]
fn wrong_buffers_are_rejected() {
    let k = kernel(&[("x", ElemType::F64, false)], &[], vec![]);
    let mut compiled = vec![Jit::new().compile(&k).unwrap()];
    compiled.extend(c_backend().map(|c| c.compile(&k).unwrap()));
    for c in compiled {
        assert!(c.run(&mut []).is_err());
        assert!(c.run(&mut [Buffer::I64(vec![].into())]).is_err());
    }
}

/// Random well-typed expressions of a given compute type over two variables of each type.
pub(super) fn arb_expr(ty: ElemType, depth: u32) -> BoxedStrategy<Expr> {
    let leaf = match ty {
        ElemType::I64 => prop_oneof![
            prop_oneof![
                Just(0i64),
                Just(-1),
                Just(1),
                Just(i64::MIN),
                Just(i64::MAX),
                -100i64..100
            ]
            .prop_map(|v| Expr::Const(Scalar::I64(v))),
            Just(Expr::Var(VarId(0))),
            Just(Expr::Var(VarId(1))),
        ]
        .boxed(),
        ElemType::F64 => prop_oneof![
            prop_oneof![
                Just(0.0f64),
                Just(-0.0),
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(1e300),
                -10.0f64..10.0
            ]
            .prop_map(|v| Expr::Const(Scalar::F64(v))),
            Just(Expr::Var(VarId(2))),
            Just(Expr::Var(VarId(3))),
        ]
        .boxed(),
        _ => prop_oneof![
            any::<bool>().prop_map(|v| Expr::Const(Scalar::Bool(v))),
            Just(Expr::Var(VarId(4)))
        ]
        .boxed(),
    };
    if depth == 0 {
        return leaf;
    }
    let sub = move |t| arb_expr(t, depth - 1);
    let same = sub(ty);
    let ops: Vec<BinOp> = match ty {
        ElemType::I64 => vec![
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::Rem,
            BinOp::Min,
            BinOp::Max,
            BinOp::And,
            BinOp::Or,
            BinOp::Xor,
            BinOp::Shl,
            BinOp::Shr,
        ],
        ElemType::F64 => vec![
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::IeeeMul,
            BinOp::Div,
            BinOp::Rem,
            BinOp::Min,
            BinOp::Max,
        ],
        _ => vec![BinOp::And, BinOp::Or, BinOp::Xor],
    };
    let unops: Vec<UnOp> = match ty {
        ElemType::I64 => vec![UnOp::Neg, UnOp::Not, UnOp::Abs],
        ElemType::F64 => vec![
            UnOp::Neg,
            UnOp::Abs,
            UnOp::Sqrt,
            UnOp::Exp,
            UnOp::Log,
            UnOp::Floor,
        ],
        _ => vec![UnOp::Not],
    };
    let binary = (proptest::sample::select(ops), same.clone(), same.clone())
        .prop_map(|(op, a, b)| Expr::Binary(op, Box::new(a), Box::new(b)));
    let unary = (proptest::sample::select(unops), same.clone())
        .prop_map(|(op, a)| Expr::Unary(op, Box::new(a)));
    let select = (sub(ElemType::Bool), same.clone(), same)
        .prop_map(|(c, a, b)| Expr::Select(Box::new(c), Box::new(a), Box::new(b)));
    let cast = proptest::sample::select(vec![ElemType::Bool, ElemType::I64, ElemType::F64])
        .prop_flat_map(sub)
        .prop_map(move |a| Expr::Cast(ty, Box::new(a)));
    let mut options = vec![
        leaf,
        binary.boxed(),
        unary.boxed(),
        select.boxed(),
        cast.boxed(),
    ];
    if ty == ElemType::Bool {
        let cmp = (
            proptest::sample::select(vec![
                BinOp::Eq,
                BinOp::Ne,
                BinOp::Lt,
                BinOp::Le,
                BinOp::Gt,
                BinOp::Ge,
            ]),
            proptest::sample::select(vec![ElemType::I64, ElemType::F64, ElemType::Bool]),
        )
            .prop_flat_map(move |(op, t)| (Just(op), sub(t), sub(t)))
            .prop_map(|(op, a, b)| Expr::Binary(op, Box::new(a), Box::new(b)));
        options.push(cmp.boxed());
    }
    proptest::strategy::Union::new(options).boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn jit_and_interpreter_agree_on_random_expressions(
        ty in proptest::sample::select(vec![ElemType::Bool, ElemType::I64, ElemType::F64]),
        seed in any::<u64>(),
        ints in (any::<i64>(), -5i64..5),
        floats in (any::<f64>(), -3.0f64..3.0),
        flag in any::<bool>(),
    ) {
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(
            ProptestConfig::default(),
            proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &{
                let mut s = [0u8; 32];
                s[..8].copy_from_slice(&seed.to_le_bytes());
                s
            }),
        );
        let e = arb_expr(ty, 3).new_tree(&mut runner).unwrap().current();
        let consts = [
            Scalar::I64(ints.0), Scalar::I64(ints.1), Scalar::F64(floats.0), Scalar::F64(floats.1), Scalar::Bool(flag),
        ];
        let mut body: Vec<Stmt> = consts.iter().enumerate().map(|(k, c)| b::assign(VarId(k as u32), Expr::Const(*c))).collect();
        body.push(b::store(BufId(0), b::int(0), e));
        let k = kernel(
            &[("out", ty, false)],
            &[("a", ElemType::I64), ("b", ElemType::I64), ("x", ElemType::F64), ("y", ElemType::F64), ("p", ElemType::Bool)],
            body,
        );
        let _ = run_on(&k, &[Buffer::filled(ty, 1, Scalar::zero(ty))], false);
    }
}

/// A walk over positions (`backend::walked`): `while (x <= last & q < e) { .. right[q] ..
/// left[q] .. if (right[q] == step) q = q + 1; x = step + 1 }` as a run-length mask's row
/// lowers to. Positions inside `right` and `left` take the copy without checks; a negative
/// start or an end past either buffer takes the checked copy and fails at the same read
/// with the same writes as the interpreter (and C); the results agree either way.
#[test]
fn walks_over_positions_fail_at_the_same_place() {
    let (q, e, x, step, last) = (VarId(0), VarId(1), VarId(2), VarId(3), VarId(4));
    let (left, right, out, range) = (BufId(0), BufId(1), BufId(2), BufId(3));
    let mut body = vec![
        Stmt::Assign(step, b::min(b::load(right, b::var(q)), b::var(last))),
        b::store(
            out,
            b::int(0),
            b::add(
                b::load(out, b::int(0)),
                b::sub(b::var(step), b::load(left, b::var(q))),
            ),
        ),
    ];
    body.extend(b::if_(
        b::eq(b::load(right, b::var(q)), b::var(step)),
        vec![Stmt::Assign(q, b::add(b::var(q), b::int(1)))],
    ));
    body.push(Stmt::Assign(x, b::add(b::var(step), b::int(1))));
    let k = kernel(
        &[
            ("left", ElemType::I64, false),
            ("right", ElemType::I64, false),
            ("out", ElemType::I64, false),
            ("range", ElemType::I64, false),
        ],
        &[
            ("q", ElemType::I64),
            ("e", ElemType::I64),
            ("x", ElemType::I64),
            ("step", ElemType::I64),
            ("last", ElemType::I64),
        ],
        vec![
            Stmt::Assign(q, b::load(range, b::int(0))),
            Stmt::Assign(e, b::load(range, b::int(1))),
            Stmt::Assign(last, b::load(range, b::int(2))),
            Stmt::Assign(x, b::int(0)),
            Stmt::While {
                cond: b::and(b::le(b::var(x), b::var(last)), b::lt(b::var(q), b::var(e))),
                body: body.clone(),
            },
        ],
    );
    let found = crate::backend::walked::walked(
        &b::and(b::le(b::var(x), b::var(last)), b::lt(b::var(q), b::var(e))),
        &body,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    let runs = (
        Buffer::I64(vec![1, 4, 9, 12].into()),
        Buffer::I64(vec![2, 6, 9, 20].into()),
    );
    // (first position, end, last coordinate, succeeds)
    for (lo, hi, end_x, ok) in [
        (0, 4, 15, true),
        (1, 3, 30, true),
        (2, 2, 30, true),
        (0, 0, 5, true),
        (3, 4, 0, true),
        // Past both buffers: the checked copy fails reading right[4] once the runs end.
        (1, 6, 40, false),
        // A negative start fails at once.
        (-1, 2, 40, false),
        // Past the buffers, but the walk stops before: no failure.
        (0, 9, 8, true),
    ] {
        let (r, bufs) = run_both(
            &k,
            &[
                runs.0.clone(),
                runs.1.clone(),
                Buffer::I64(vec![0].into()),
                Buffer::I64(vec![lo, hi, end_x].into()),
            ],
        );
        assert_eq!(r.is_ok(), ok, "{lo}..{hi} to {end_x}: {r:?} {bufs:?}");
    }
}
