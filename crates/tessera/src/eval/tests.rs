//! Unit tests on ASTs built directly, so they do not depend on the parser.

use super::*;
use crate::notation::ast::{
    Access, AccessIndex, AssignOp, BinaryOp, Expr, ExprKind, Extent, Protocol, Reducer, Span, Stmt,
    StmtKind, UnaryOp,
};
use crate::types::ElemType;

// ---- AST builders -------------------------------------------------------------------------

fn at(line: u32, col: u32) -> Span {
    Span::new(line, col)
}

fn name(n: &str) -> Expr {
    Expr::name(n)
}

fn int(v: i64) -> Expr {
    Expr::lit(Scalar::I64(v))
}

fn float(v: f64) -> Expr {
    Expr::lit(Scalar::F64(v))
}

fn spanned(mut e: Expr, span: Span) -> Expr {
    e.span = span;
    e
}

fn plain(e: Expr) -> AccessIndex {
    AccessIndex {
        expr: e,
        permissive: false,
        protocol: None,
        window: None,
    }
}

fn perm(e: Expr) -> AccessIndex {
    AccessIndex {
        expr: e,
        permissive: true,
        protocol: None,
        window: None,
    }
}

fn acc_ix(t: &str, indices: Vec<AccessIndex>) -> Access {
    Access {
        tensor: t.to_string(),
        indices,
        swizzle: None,
        span: Span::default(),
    }
}

/// `t[a, b, ...]` with plain indices.
fn acc(t: &str, idx: Vec<Expr>) -> Access {
    acc_ix(t, idx.into_iter().map(plain).collect())
}

fn rd(t: &str, idx: Vec<Expr>) -> Expr {
    Expr::new(ExprKind::Access(acc(t, idx)), Span::default())
}

fn rd_ix(t: &str, idx: Vec<AccessIndex>) -> Expr {
    Expr::new(ExprKind::Access(acc_ix(t, idx)), Span::default())
}

fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::new(
        ExprKind::Binary(op, Box::new(a), Box::new(b)),
        Span::default(),
    )
}

fn call(f: &str, args: Vec<Expr>) -> Expr {
    Expr::new(ExprKind::Call(f.to_string(), args), Span::default())
}

fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind, Span::default())
}

fn assign(lhs: Access, op: AssignOp, rhs: Expr) -> Stmt {
    stmt(StmtKind::Assign { lhs, op, rhs })
}

fn set(lhs: Access, rhs: Expr) -> Stmt {
    assign(lhs, AssignOp::Overwrite, rhs)
}

fn reduce(lhs: Access, r: Reducer, rhs: Expr) -> Stmt {
    assign(lhs, AssignOp::Reduce(r), rhs)
}

fn declare(t: &str, init: Expr) -> Stmt {
    stmt(StmtKind::Declare {
        tensor: t.to_string(),
        init,
    })
}

fn for_(i: &str, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::Loop {
        index: i.to_string(),
        extent: Extent::Auto,
        body,
        parallel: crate::notation::ast::LoopMode::Serial,
    })
}

fn for_range(i: &str, a: Expr, b: Expr, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::Loop {
        index: i.to_string(),
        extent: Extent::Range(a, b),
        body,
        parallel: crate::notation::ast::LoopMode::Serial,
    })
}

fn let_(n: &str, value: Expr, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::Let {
        name: n.to_string(),
        value,
        body,
    })
}

fn if_(cond: Expr, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::If {
        cond,
        then,
        otherwise,
    })
}

fn prog(body: Vec<Stmt>) -> Program {
    Program {
        reducers: vec![],
        body,
    }
}

// ---- tensors ------------------------------------------------------------------------------

fn f64s(shape: &[usize], v: &[f64]) -> DenseTensor {
    DenseTensor {
        shape: shape.to_vec(),
        fill: Scalar::F64(0.0),
        values: Buffer::F64(v.to_vec().into()),
    }
}

fn i64s(shape: &[usize], v: &[i64]) -> DenseTensor {
    DenseTensor {
        shape: shape.to_vec(),
        fill: Scalar::I64(0),
        values: Buffer::I64(v.to_vec().into()),
    }
}

fn zeros(shape: &[usize]) -> DenseTensor {
    DenseTensor::filled(shape, ElemType::F64, Scalar::F64(0.0))
}

fn env(ts: Vec<(&str, DenseTensor)>) -> Env {
    let mut e = Env::new();
    for (n, t) in ts {
        e.insert(n, t);
    }
    e
}

fn values(e: &Env, t: &str) -> Vec<Scalar> {
    e.tensors[t].values.to_scalars()
}

fn as_f64(e: &Env, t: &str) -> Vec<f64> {
    e.tensors[t]
        .values
        .to_scalars()
        .iter()
        .map(|s| s.as_f64())
        .collect()
}

/// Run and expect success.
fn ok(p: &Program, e: &mut Env) {
    run(p, e).unwrap_or_else(|err| panic!("{err}"));
}

// ---- programs -----------------------------------------------------------------------------

#[test]
fn spmv_on_dense_data() {
    #[rustfmt::skip]
    let a = [1.0, 0.0, 2.0, 0.0,
             0.0, 0.0, 0.0, 0.0,
             0.0, 3.0, 0.0, 4.0];
    let mut e = env(vec![
        ("A", f64s(&[3, 4], &a)),
        ("x", f64s(&[4], &[1.0, 2.0, 3.0, 4.0])),
        ("y", zeros(&[3])),
    ]);
    let body = reduce(
        acc("y", vec![name("i")]),
        Reducer::Add,
        bin(
            BinaryOp::Mul,
            rd("A", vec![name("i"), name("j")]),
            rd("x", vec![name("j")]),
        ),
    );
    let p = prog(vec![
        declare("y", float(0.0)),
        for_("i", vec![for_("j", vec![body])]),
    ]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "y"), vec![7.0, 0.0, 22.0]);
}

#[test]
fn every_reducer() {
    let data = [3, -1, 4, 1, 5];
    let cases: Vec<(Reducer, Scalar, Scalar)> = vec![
        (Reducer::Add, Scalar::I64(0), Scalar::I64(12)),
        (Reducer::Sub, Scalar::I64(0), Scalar::I64(-12)),
        (Reducer::Mul, Scalar::I64(1), Scalar::I64(-60)),
        (Reducer::Min, Scalar::I64(100), Scalar::I64(-1)),
        (Reducer::Max, Scalar::I64(-100), Scalar::I64(5)),
        (Reducer::And, Scalar::I64(-1), Scalar::I64(0)),
        (Reducer::Or, Scalar::I64(0), Scalar::I64(-1)),
        // The first value that is not the "empty" marker wins.
        (
            Reducer::Choose(Scalar::I64(0)),
            Scalar::I64(0),
            Scalar::I64(3),
        ),
    ];
    for (r, init, want) in cases {
        let mut e = env(vec![("x", i64s(&[5], &data)), ("s", i64s(&[], &[77]))]);
        let p = prog(vec![
            declare("s", Expr::lit(init)),
            for_(
                "i",
                vec![reduce(
                    acc("s", vec![]),
                    r.clone(),
                    rd("x", vec![name("i")]),
                )],
            ),
        ]);
        ok(&p, &mut e);
        assert_eq!(values(&e, "s"), vec![want], "{r:?}");
        assert_eq!(e.tensors["s"].fill, init, "{r:?}");
    }
}

#[test]
fn reducers_on_floats_and_bools() {
    let mut e = env(vec![
        ("x", f64s(&[3], &[2.5, -1.0, 0.5])),
        (
            "b",
            DenseTensor {
                shape: vec![3],
                fill: Scalar::Bool(false),
                values: Buffer::Bool(vec![true, false, true].into()),
            },
        ),
        ("lo", f64s(&[], &[0.0])),
        (
            "all",
            DenseTensor::filled(&[], ElemType::Bool, Scalar::Bool(false)),
        ),
        (
            "any",
            DenseTensor::filled(&[], ElemType::Bool, Scalar::Bool(false)),
        ),
    ]);
    let p = prog(vec![
        declare("lo", float(f64::INFINITY)),
        declare("all", Expr::lit(Scalar::Bool(true))),
        declare("any", Expr::lit(Scalar::Bool(false))),
        for_(
            "i",
            vec![
                reduce(acc("lo", vec![]), Reducer::Min, rd("x", vec![name("i")])),
                reduce(acc("all", vec![]), Reducer::And, rd("b", vec![name("i")])),
                reduce(acc("any", vec![]), Reducer::Or, rd("b", vec![name("i")])),
            ],
        ),
    ]);
    ok(&p, &mut e);
    assert_eq!(values(&e, "lo"), vec![Scalar::F64(-1.0)]);
    assert_eq!(values(&e, "all"), vec![Scalar::Bool(false)]);
    assert_eq!(values(&e, "any"), vec![Scalar::Bool(true)]);
}

#[test]
fn named_reducer_is_rejected_even_if_it_never_runs() {
    let mut e = env(vec![("x", zeros(&[0])), ("s", zeros(&[]))]);
    let mut s = reduce(
        acc("s", vec![]),
        Reducer::Named("f".into()),
        rd("x", vec![name("i")]),
    );
    s.span = at(2, 3);
    let err = run(&prog(vec![for_("i", vec![s])]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if *span == at(2, 3) && span.line == 2 && msg.contains("`f`")),
        "{err}"
    );
}

#[test]
fn ranges_are_inclusive_and_checked() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0];
    let mut e = env(vec![("x", f64s(&[5], &x)), ("y", zeros(&[5]))]);
    let body = vec![set(
        acc("y", vec![name("i")]),
        bin(BinaryOp::Mul, rd("x", vec![name("i")]), int(2)),
    )];
    ok(
        &prog(vec![for_range("i", int(1), int(3), body.clone())]),
        &mut e,
    );
    assert_eq!(as_f64(&e, "y"), vec![0.0, 4.0, 6.0, 8.0, 0.0]);

    // An empty range runs nothing, even one that lies outside.
    ok(
        &prog(vec![for_range("i", int(9), int(7), body.clone())]),
        &mut e,
    );

    // Bounds are expressions evaluated at loop entry (a triangle).
    let mut t = env(vec![("C", zeros(&[3, 3]))]);
    let tri = for_(
        "i",
        vec![for_range(
            "j",
            int(0),
            name("i"),
            vec![set(acc("C", vec![name("i"), name("j")]), float(1.0))],
        )],
    );
    ok(&prog(vec![tri]), &mut t);
    assert_eq!(
        as_f64(&t, "C"),
        vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    );

    // A range that leaves a dimension the index addresses directly is a dimension mismatch.
    let mut body2 = body.clone();
    if let StmtKind::Assign { lhs, .. } = &mut body2[0].kind {
        lhs.span = at(4, 5);
    }
    let err = run(&prog(vec![for_range("i", int(2), int(5), body2)]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::DimensionMismatch { span, msg } if span.line == 4 && msg.contains("`y`") && msg.contains("2:5")),
        "{err}"
    );

    // Computed indices do not restrict the range; they are bounds-checked when they run.
    let shifted = vec![set(
        acc("y", vec![name("i")]),
        rd("x", vec![bin(BinaryOp::Sub, name("i"), int(1))]),
    )];
    let mut e = env(vec![("x", f64s(&[5], &x)), ("y", zeros(&[5]))]);
    ok(&prog(vec![for_range("i", int(1), int(4), shifted)]), &mut e);
    assert_eq!(as_f64(&e, "y"), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn let_if_else() {
    let mut e = env(vec![
        ("x", f64s(&[4], &[1.0, 3.0, 2.0, 5.0])),
        ("y", zeros(&[4])),
    ]);
    let t = name("t");
    let body = let_(
        "t",
        bin(BinaryOp::Mul, rd("x", vec![name("i")]), int(2)),
        vec![if_(
            bin(BinaryOp::Gt, t.clone(), int(4)),
            vec![set(acc("y", vec![name("i")]), t.clone())],
            vec![set(
                acc("y", vec![name("i")]),
                Expr::new(ExprKind::Unary(UnaryOp::Neg, Box::new(t)), Span::default()),
            )],
        )],
    );
    ok(&prog(vec![for_("i", vec![body])]), &mut e);
    assert_eq!(as_f64(&e, "y"), vec![-2.0, 6.0, -4.0, 10.0]);
}

#[test]
fn let_binds_and_indices_are_i64() {
    // `y[i] = i / 2` divides as floats; `let j = 0` binds a new name inside.
    let mut e = env(vec![("y", zeros(&[3])), ("z", i64s(&[3], &[9, 9, 9]))]);
    let body = |inner: &str| {
        prog(vec![for_(
            "i",
            vec![
                set(
                    acc("y", vec![name("i")]),
                    bin(BinaryOp::Div, name("i"), int(2)),
                ),
                let_(
                    "k",
                    name("i"),
                    vec![let_(
                        inner,
                        int(0),
                        vec![set(acc("z", vec![name("k")]), name(inner))],
                    )],
                ),
            ],
        )])
    };
    ok(&body("j"), &mut e);
    assert_eq!(as_f64(&e, "y"), vec![0.0, 0.5, 1.0]);
    assert_eq!(values(&e, "z"), vec![Scalar::I64(0); 3]);
    // Rebinding the loop's own index is an error, as in the compiler (no shadowing).
    let err = run(&body("i"), &mut e).unwrap_err().to_string();
    assert!(
        err.contains("reuses the name bound by the loop over `i`"),
        "{err}"
    );
}

/// `y[i] = coalesce(x[~(i-1)], 0) + x[i] + coalesce(x[~(i+1)], 0)`
#[test]
fn convolution_with_zero_padding() {
    let mut e = env(vec![
        ("x", f64s(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0])),
        ("y", zeros(&[5])),
    ]);
    let left = call(
        "coalesce",
        vec![
            rd_ix("x", vec![perm(bin(BinaryOp::Sub, name("i"), int(1)))]),
            int(0),
        ],
    );
    let right = call(
        "coalesce",
        vec![
            rd_ix("x", vec![perm(bin(BinaryOp::Add, name("i"), int(1)))]),
            int(0),
        ],
    );
    let sum = bin(
        BinaryOp::Add,
        bin(BinaryOp::Add, left, rd("x", vec![name("i")])),
        right,
    );
    ok(
        &prog(vec![for_("i", vec![set(acc("y", vec![name("i")]), sum)])]),
        &mut e,
    );
    assert_eq!(as_f64(&e, "y"), vec![3.0, 6.0, 9.0, 12.0, 9.0]);
}

#[test]
fn missing_propagates() {
    let x = [1.0, 2.0, 3.0];
    let next = || rd_ix("x", vec![perm(bin(BinaryOp::Add, name("i"), int(1)))]);
    let y = || acc("y", vec![name("i")]);
    let run_one = |body: Stmt| {
        let mut e = env(vec![
            ("x", f64s(&[3], &x)),
            ("y", f64s(&[3], &[-1.0, -1.0, -1.0])),
        ]);
        ok(&prog(vec![for_("i", vec![body])]), &mut e);
        as_f64(&e, "y")
    };
    // Through operators and functions: the statement does nothing where the read is missing.
    let neg = Expr::new(
        ExprKind::Unary(UnaryOp::Neg, Box::new(next())),
        Span::default(),
    );
    assert_eq!(
        run_one(set(y(), bin(BinaryOp::Add, neg, int(1)))),
        vec![-1.0, -2.0, -1.0]
    );
    assert_eq!(
        run_one(reduce(y(), Reducer::Add, call("max", vec![next(), int(0)]))),
        vec![1.0, 2.0, -1.0]
    );
    assert_eq!(
        run_one(set(y(), Expr::new(ExprKind::Missing, Span::default()))),
        vec![-1.0; 3]
    );
    // `coalesce` with a missing second argument gives the first.
    let c = call("coalesce", vec![rd("x", vec![name("i")]), next()]);
    assert_eq!(run_one(set(y(), c)), vec![1.0, 2.0, 3.0]);
    // An `if` on `missing` takes the `else` branch.
    let cond = bin(BinaryOp::Gt, next(), int(0));
    assert_eq!(
        run_one(if_(cond, vec![set(y(), int(1))], vec![set(y(), int(0))])),
        vec![1.0, 1.0, 0.0]
    );
    // A `let` binds `missing`; using it is missing.
    assert_eq!(
        run_one(let_("m", next(), vec![set(y(), name("m"))])),
        vec![2.0, 3.0, -1.0]
    );
    // A write through a permissive index outside the tensor is dropped.
    let shift = set(
        acc_ix("y", vec![perm(bin(BinaryOp::Add, name("i"), int(1)))]),
        rd("x", vec![name("i")]),
    );
    assert_eq!(run_one(shift), vec![-1.0, 1.0, 2.0]);
}

#[test]
fn missing_index_makes_the_access_missing() {
    // `x[I[~(i+1)]]`: the inner read is missing past the end, so the outer one is too.
    let mut e = env(vec![
        ("I", i64s(&[3], &[2, 0, 1])),
        ("x", f64s(&[3], &[5.0, 6.0, 7.0])),
        ("y", zeros(&[3])),
    ]);
    let inner = rd_ix("I", vec![perm(bin(BinaryOp::Add, name("i"), int(1)))]);
    let body = set(
        acc("y", vec![name("i")]),
        call("coalesce", vec![rd("x", vec![inner]), int(-1)]),
    );
    ok(&prog(vec![for_("i", vec![body])]), &mut e);
    assert_eq!(as_f64(&e, "y"), vec![5.0, 6.0, -1.0]);
}

#[test]
fn blocks_protocols_and_lifecycle_markers() {
    let mut e = env(vec![
        ("A", f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])),
        ("s", zeros(&[])),
    ]);
    let gallop = AccessIndex {
        expr: name("j"),
        permissive: false,
        protocol: Some(Protocol::Gallop),
        window: None,
    };
    let p = prog(vec![
        stmt(StmtKind::Thaw { tensor: "s".into() }),
        stmt(StmtKind::Block(vec![for_(
            "i",
            vec![for_(
                "j",
                vec![reduce(
                    acc("s", vec![]),
                    Reducer::Add,
                    rd_ix("A", vec![plain(name("i")), gallop.clone()]),
                )],
            )],
        )])),
        stmt(StmtKind::Freeze { tensor: "s".into() }),
    ]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "s"), vec![10.0]);
}

#[test]
fn gather_and_histogram() {
    let idx = [2, 0, 2, 3, 2];
    let mut e = env(vec![
        ("I", i64s(&[5], &idx)),
        ("x", f64s(&[4], &[10.0, 11.0, 12.0, 13.0])),
        ("y", zeros(&[5])),
        ("h", i64s(&[4], &[5, 5, 5, 5])),
    ]);
    let p = prog(vec![
        declare("h", int(0)),
        for_(
            "k",
            vec![
                set(
                    acc("y", vec![name("k")]),
                    rd("x", vec![rd("I", vec![name("k")])]),
                ),
                reduce(
                    acc("h", vec![rd("I", vec![name("k")])]),
                    Reducer::Add,
                    int(1),
                ),
            ],
        ),
    ]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "y"), vec![12.0, 10.0, 12.0, 13.0, 12.0]);
    assert_eq!(values(&e, "h"), [1, 0, 3, 1].map(Scalar::I64).to_vec());
}

#[test]
fn size_reads_extents() {
    let mut e = env(vec![
        ("A", zeros(&[2, 7])),
        ("s", i64s(&[], &[0])),
        ("y", zeros(&[2])),
    ]);
    let p = prog(vec![
        set(acc("s", vec![]), call("size", vec![name("A"), int(1)])),
        // A loop bounded by `size` alone: nothing else decides the extent of `i`.
        for_range(
            "i",
            int(0),
            bin(BinaryOp::Sub, call("size", vec![name("A"), int(0)]), int(1)),
            vec![set(acc("y", vec![name("i")]), name("s"))],
        ),
    ]);
    ok(&p, &mut e);
    assert_eq!(values(&e, "s"), vec![Scalar::I64(7)]);
    assert_eq!(as_f64(&e, "y"), vec![7.0, 7.0]);

    let bad = prog(vec![set(
        acc("s", vec![]),
        spanned(call("size", vec![name("A"), int(2)]), at(1, 8)),
    )]);
    let err = run(&bad, &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, .. } if span.line == 1 && span.col == 8),
        "{err}"
    );
}

#[test]
fn declare_converts_to_the_element_type_and_sets_the_fill() {
    let mut e = env(vec![(
        "y",
        DenseTensor::filled(&[2, 2], ElemType::I32, Scalar::I32(5)),
    )]);
    ok(&prog(vec![declare("y", float(2.7))]), &mut e);
    assert_eq!(values(&e, "y"), vec![Scalar::I32(2); 4]);
    assert_eq!(e.tensors["y"].fill, Scalar::I32(2));
}

#[test]
fn stores_narrow_and_scalars_read_by_name() {
    let mut e = env(vec![
        ("s", f64s(&[], &[1.5])),
        ("x", f64s(&[3], &[1.0, 2.0, 3.0])),
        (
            "y",
            DenseTensor::filled(&[3], ElemType::I32, Scalar::I32(0)),
        ),
    ]);
    let p = prog(vec![for_(
        "i",
        vec![set(
            acc("y", vec![name("i")]),
            bin(BinaryOp::Mul, rd("x", vec![name("i")]), name("s")),
        )],
    )]);
    ok(&p, &mut e);
    assert_eq!(
        values(&e, "y"),
        vec![Scalar::I32(1), Scalar::I32(3), Scalar::I32(4)]
    );
}

#[test]
fn extents_of_zero_run_nothing() {
    let mut e = env(vec![("x", zeros(&[0])), ("s", f64s(&[], &[3.0]))]);
    ok(
        &prog(vec![for_(
            "i",
            vec![reduce(
                acc("s", vec![]),
                Reducer::Add,
                rd("x", vec![name("i")]),
            )],
        )]),
        &mut e,
    );
    assert_eq!(as_f64(&e, "s"), vec![3.0]);
}

// ---- errors -------------------------------------------------------------------------------

#[test]
fn mismatched_extents() {
    let mut e = env(vec![("x", zeros(&[3])), ("y", zeros(&[4]))]);
    let mut lhs = acc("y", vec![name("i")]);
    lhs.span = at(2, 3);
    let mut read = acc("x", vec![name("i")]);
    read.span = at(2, 10);
    let p = prog(vec![for_(
        "i",
        vec![set(lhs, Expr::new(ExprKind::Access(read), at(2, 10)))],
    )]);
    let err = run(&p, &mut e).unwrap_err();
    match &err {
        // Reported at the second use, the first that disagrees.
        Error::DimensionMismatch { span, msg } => {
            assert!(span.line == 2 && span.col == 10, "{err}");
            assert!(
                msg.contains("`x`")
                    && msg.contains("`y`")
                    && msg.contains("size 3")
                    && msg.contains("size 4"),
                "{err}"
            );
        }
        _ => panic!("{err}"),
    }
}

#[test]
fn wrong_rank_is_a_dimension_mismatch() {
    let mut e = env(vec![("A", zeros(&[2, 2])), ("y", zeros(&[2]))]);
    let p = prog(vec![for_(
        "i",
        vec![set(acc("y", vec![name("i")]), rd("A", vec![name("i")]))],
    )]);
    assert!(matches!(
        run(&p, &mut e),
        Err(Error::DimensionMismatch { .. })
    ));
}

#[test]
fn unknown_tensor_and_name() {
    let mut e = env(vec![("y", zeros(&[2]))]);
    let mut lhs = acc("y", vec![name("i")]);
    lhs.span = at(1, 1);
    let mut read = acc("nope", vec![name("i")]);
    read.span = at(3, 9);
    let p = prog(vec![for_(
        "i",
        vec![set(
            lhs.clone(),
            Expr::new(ExprKind::Access(read), at(3, 9)),
        )],
    )]);
    let err = run(&p, &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if span.line == 3 && msg.contains("`nope`")),
        "{err}"
    );

    let p = prog(vec![for_(
        "i",
        vec![set(lhs.clone(), spanned(name("q"), at(5, 2)))],
    )]);
    let err = run(&p, &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if span.line == 5 && msg.contains("`q`")),
        "{err}"
    );

    // Declaring a tensor the caller did not give.
    let mut d = declare("z", int(0));
    d.span = at(7, 1);
    let err = run(&prog(vec![d]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if span.line == 7 && msg.contains("`z`")),
        "{err}"
    );

    // A vector read without brackets.
    let p = prog(vec![for_("i", vec![set(lhs, name("y"))])]);
    assert!(matches!(run(&p, &mut e), Err(Error::Program { .. })));
}

#[test]
fn out_of_bounds_reads_and_writes() {
    let mut e = env(vec![
        ("I", i64s(&[2], &[1, 9])),
        ("x", zeros(&[4])),
        ("y", zeros(&[2])),
    ]);
    let inner = spanned(rd("I", vec![name("k")]), at(2, 12));
    let mut read = acc("x", vec![inner.clone()]);
    read.span = at(2, 10);
    let p = prog(vec![for_(
        "k",
        vec![set(
            acc("y", vec![name("k")]),
            Expr::new(ExprKind::Access(read), at(2, 10)),
        )],
    )]);
    let err = run(&p, &mut e).unwrap_err();
    match &err {
        Error::Tensor { tensor, msg } => {
            assert_eq!(tensor, "x");
            assert!(
                msg.contains("2:12") && msg.contains("= 9") && msg.contains("size 4"),
                "{err}"
            );
        }
        _ => panic!("{err}"),
    }

    // A scatter out of bounds.
    let p = prog(vec![for_(
        "k",
        vec![reduce(acc("x", vec![inner]), Reducer::Add, int(1))],
    )]);
    assert!(matches!(run(&p, &mut e), Err(Error::Tensor { tensor, .. }) if tensor == "x"));

    // A computed index off the end names the loop value.
    let p = prog(vec![for_(
        "i",
        vec![set(
            acc("y", vec![name("i")]),
            rd("y", vec![bin(BinaryOp::Add, name("i"), int(1))]),
        )],
    )]);
    let mut e2 = env(vec![("y", zeros(&[2])), ("z", zeros(&[2]))]);
    let p2 = prog(vec![for_(
        "i",
        vec![set(
            acc("z", vec![name("i")]),
            rd("y", vec![bin(BinaryOp::Add, name("i"), int(1))]),
        )],
    )]);
    let err = run(&p2, &mut e2).unwrap_err();
    assert!(
        matches!(&err, Error::Tensor { tensor, msg } if tensor == "y" && msg.contains("= 2") && msg.contains("size 2")),
        "{err}"
    );
    // (Reading and writing `y` in one loop is rejected before anything runs.)
    assert!(matches!(run(&p, &mut e2), Err(Error::Lifecycle { .. })));
}

#[test]
fn unresolvable_extent() {
    let mut e = env(vec![("x", zeros(&[3])), ("s", zeros(&[]))]);
    let mut l = for_(
        "i",
        vec![reduce(
            acc("s", vec![]),
            Reducer::Add,
            rd_ix("x", vec![perm(name("i"))]),
        )],
    );
    l.span = at(1, 1);
    let err = run(&prog(vec![l]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if span.line == 1 && msg.contains("`i`")),
        "{err}"
    );
}

#[test]
fn read_and_write_in_one_loop_is_a_lifecycle_error() {
    let mut e = env(vec![("y", zeros(&[3]))]);
    let mut l = for_(
        "i",
        vec![set(
            acc("y", vec![name("i")]),
            bin(BinaryOp::Add, rd("y", vec![name("i")]), int(1)),
        )],
    );
    l.span = at(3, 1);
    let err = run(&prog(vec![l]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Lifecycle { span, msg } if span.line == 3 && msg.contains("`y`")),
        "{err}"
    );

    // A workspace declared inside the loop is fine.
    let mut e = env(vec![
        ("A", f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])),
        ("w", zeros(&[])),
        ("y", zeros(&[2])),
    ]);
    let p = prog(vec![for_(
        "i",
        vec![
            declare("w", int(0)),
            for_(
                "j",
                vec![reduce(
                    acc("w", vec![]),
                    Reducer::Add,
                    rd("A", vec![name("i"), name("j")]),
                )],
            ),
            set(acc("y", vec![name("i")]), name("w")),
        ],
    )]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "y"), vec![3.0, 7.0]);
}

#[test]
fn operator_and_function_errors() {
    let mut e = env(vec![("s", zeros(&[]))]);
    let bad = spanned(
        bin(BinaryOp::AndAnd, Expr::lit(Scalar::Bool(true)), int(1)),
        at(1, 6),
    );
    let err = run(&prog(vec![set(acc("s", vec![]), bad)]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, .. } if span.line == 1 && span.col == 6),
        "{err}"
    );

    let unknown = spanned(call("frob", vec![int(1)]), at(2, 6));
    let err = run(&prog(vec![set(acc("s", vec![]), unknown)]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, msg } if span.line == 2 && msg.contains("frob")),
        "{err}"
    );

    let arity = spanned(call("min", vec![int(1)]), at(3, 6));
    let err = run(&prog(vec![set(acc("s", vec![]), arity)]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, .. } if span.line == 3),
        "{err}"
    );

    let cond = spanned(int(1), at(4, 4));
    let err = run(&prog(vec![if_(cond, vec![], vec![])]), &mut e).unwrap_err();
    assert!(
        matches!(&err, Error::Program { span, .. } if span.line == 4),
        "{err}"
    );
}

#[test]
fn inconsistent_env_is_reported_not_a_panic() {
    let mut e = env(vec![("x", f64s(&[3], &[1.0]))]);
    assert!(matches!(
        run(&prog(vec![]), &mut e),
        Err(Error::Tensor { .. })
    ));
}

#[test]
fn parsed_convolution_and_histogram() {
    let text = "y .= 0\nh .= 0\nfor i = _\n  y[i] = coalesce(x[~(i - 1)], 0) + x[i] + coalesce(x[~(i + 1)], 0)\nend\nfor k = _\n  h[I[k]] += 1\nend\n";
    let p = crate::notation::parse::parse_program(text).unwrap_or_else(|e| panic!("{e}"));
    let mut e = env(vec![
        ("x", f64s(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0])),
        ("y", zeros(&[5])),
        ("I", i64s(&[3], &[1, 1, 0])),
        ("h", i64s(&[2], &[0, 0])),
    ]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "y"), vec![3.0, 6.0, 9.0, 12.0, 9.0]);
    assert_eq!(values(&e, "h"), vec![Scalar::I64(1), Scalar::I64(2)]);
}

// ---- user reducers and views --------------------------------------------------------------

fn text(t: &str) -> Program {
    crate::notation::parse::parse_program(t).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn user_reducers_apply_their_body_to_every_write() {
    // No identity is used: the zeros of `x` are reduced like any value.
    let p = text(
        "reducer zeros(a, b) = a + ifelse(b == 0, 1, 0) identity 0\nn .= 0\nfor i = _\n  n[] <<zeros>>= x[i]\nend",
    );
    let mut e = env(vec![
        ("x", f64s(&[5], &[0.0, 2.0, 0.0, 0.0, 1.0])),
        ("n", i64s(&[], &[0])),
    ]);
    ok(&p, &mut e);
    assert_eq!(values(&e, "n"), vec![Scalar::I64(3)]);
}

#[test]
fn windows_and_swizzles_address_the_viewed_tensor() {
    #[rustfmt::skip]
    let a = [1.0, 2.0, 3.0,
             4.0, 5.0, 6.0];
    // B[i, j] = A[j, 1 + i]: a window on the swizzled view's first index (A's dimension 1).
    let p = text("for i = _, j = _\n  B[i, j] = swizzle(A, 1, 0)[(1:2)(i), j]\nend");
    let mut e = env(vec![("A", f64s(&[2, 3], &a)), ("B", zeros(&[2, 2]))]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "B"), vec![2.0, 5.0, 3.0, 6.0]);
    // Window bounds from a `let` outside the loop size it when the loop starts.
    let p = text("let lo = 1, hi = 2\n  for i = _\n    s[] += A[0, (lo:hi)(i)]\n  end\nend");
    let mut e = env(vec![("A", f64s(&[2, 3], &a)), ("s", zeros(&[]))]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "s"), vec![5.0]);
    // Writes through a window land at the offset.
    let p = text("for i = _\n  y[(2:3)(i)] = x[i]\nend");
    let mut e = env(vec![("x", f64s(&[2], &[7.0, 8.0])), ("y", zeros(&[5]))]);
    ok(&p, &mut e);
    assert_eq!(as_f64(&e, "y"), vec![0.0, 0.0, 7.0, 8.0, 0.0]);
}

#[test]
fn view_errors_at_run_time() {
    let mut e = env(vec![("x", f64s(&[4], &[1.0; 4])), ("s", zeros(&[]))]);
    // Dynamic bounds: the window leaves `x` only for some `j`.
    let p = text(
        "for j = 0:2\n  let lo = j * 2\n    for i = _\n      s[] += x[(lo:lo + 1)(i)]\n    end\n  end\nend",
    );
    assert_eq!(
        run(&p, &mut e).unwrap_err().to_string(),
        "tensor `x`: 4:14: the window 4:5 leaves dimension 0 (size 4)"
    );
    // Two windows of different sizes for one `_` index, both known when the loop starts.
    let p = text("for i = _\n  s[] += x[(0:1)(i)] * x[(1:3)(i)]\nend");
    assert!(matches!(
        run(&p, &mut e),
        Err(Error::DimensionMismatch { span, .. }) if span.line == 2 && span.col == 24
    ));
    // An index outside its window.
    let p = text("for i = 0:2\n  s[] += x[(1:2)(i)]\nend");
    assert_eq!(
        run(&p, &mut e).unwrap_err().to_string(),
        "tensor `x`: 2:18: index `i` = 2 is outside the window 1:2 (size 2) of dimension 0"
    );
}
