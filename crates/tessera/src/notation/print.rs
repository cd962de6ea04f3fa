//! The printer: `Display` for the AST, producing program text that parses back to the same AST
//! (`parse_program(&p.to_string()) == Ok(p)` for every AST the parser can produce).
//!
//! Parentheses are minimal: an operand is parenthesised only when its operator binds more
//! loosely than its context, or equally on the right (every binary operator is
//! left-associative). Literals are printed so that they reparse with the exact same value and
//! type; the element types the parser cannot produce (`i8`, `i32`, `u64`, `f32`) print as their
//! nearest literal and reparse as `i64` / `f64`.

use super::ast::*;
use crate::types::Scalar;
use std::fmt::{self, Display, Formatter, Write};

/// Binding strength of a prefix operator: tighter than every binary operator.
const UNARY_PREC: u8 = 9;
/// Binding strength of literals, names, accesses, calls.
const ATOM_PREC: u8 = 10;

impl Display for Program {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for r in &self.reducers {
            writeln!(f, "{r}")?;
        }
        for s in &self.body {
            write_stmt(f, s, 0)?;
            f.write_char('\n')?;
        }
        Ok(())
    }
}

impl Display for Stmt {
    /// Multi-line for compound statements, without a trailing newline.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_stmt(f, self, 0)
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_expr(f, self, 0)
    }
}

impl Display for ReducerDef {
    /// One line: `reducer name(a, b) = body identity 0 commutative ...`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let [a, b] = &self.params;
        write!(f, "reducer {}({a}, {b}) = {}", self.name, self.body)?;
        if let Some(v) = &self.identity {
            f.write_str(" identity ")?;
            write_scalar(f, v)?;
        }
        if let Some(v) = &self.annihilator {
            f.write_str(" annihilator ")?;
            write_scalar(f, v)?;
        }
        for (yes, word) in [
            (self.commutative, " commutative"),
            (self.associative, " associative"),
            (self.idempotent, " idempotent"),
        ] {
            if yes {
                f.write_str(word)?;
            }
        }
        if let Some(d) = &self.derivative {
            write!(f, " derivative({d})")?;
        }
        Ok(())
    }
}

impl Display for Access {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.swizzle {
            Some(perm) => {
                write!(f, "swizzle({}", self.tensor)?;
                for p in perm {
                    write!(f, ", {p}")?;
                }
                f.write_str(")[")?;
            }
            None => write!(f, "{}[", self.tensor)?,
        }
        for (k, ix) in self.indices.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write_index(f, ix)?;
        }
        f.write_char(']')
    }
}

impl Display for Extent {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Auto => f.write_char('_'),
            Extent::Range(lo, hi) => write!(f, "{lo}:{hi}"),
        }
    }
}

impl Display for Reducer {
    /// The operator without its trailing `=`: `+`, `<<min>>`, `<<choose(-1)>>`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Reducer::Add => f.write_char('+'),
            Reducer::Sub => f.write_char('-'),
            Reducer::Mul => f.write_char('*'),
            Reducer::And => f.write_char('&'),
            Reducer::Or => f.write_char('|'),
            Reducer::Min => f.write_str("<<min>>"),
            Reducer::Max => f.write_str("<<max>>"),
            Reducer::Choose(z) => {
                f.write_str("<<choose(")?;
                write_scalar(f, z)?;
                f.write_str(")>>")
            }
            Reducer::Named(n) => write!(f, "<<{n}>>"),
            Reducer::User(def) => write!(f, "<<{}>>", def.name),
        }
    }
}

impl Display for AssignOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            AssignOp::Overwrite => f.write_char('='),
            AssignOp::Reduce(r) => write!(f, "{r}="),
        }
    }
}

fn indent(f: &mut Formatter<'_>, level: usize) -> fmt::Result {
    for _ in 0..level {
        f.write_str("  ")?;
    }
    Ok(())
}

/// Writes `body` one statement per line (each preceded by a newline), then the `end` line.
fn write_body_end(f: &mut Formatter<'_>, body: &[Stmt], level: usize) -> fmt::Result {
    write_lines(f, body, level + 1)?;
    f.write_char('\n')?;
    indent(f, level)?;
    f.write_str("end")
}

fn write_lines(f: &mut Formatter<'_>, body: &[Stmt], level: usize) -> fmt::Result {
    for s in body {
        f.write_char('\n')?;
        write_stmt(f, s, level)?;
    }
    Ok(())
}

/// A loop's extent, inside `parallel(...)` or `vectorize(...)` when the loop is so marked.
fn write_extent(f: &mut Formatter<'_>, extent: &Extent, mode: LoopMode) -> fmt::Result {
    match mode {
        LoopMode::Serial => write!(f, "{extent}"),
        LoopMode::Parallel(Folds::Auto) => write!(f, "parallel({extent})"),
        LoopMode::Parallel(Folds::Atomics) => write!(f, "parallel({extent}, atomics)"),
        LoopMode::Parallel(Folds::Copies) => write!(f, "parallel({extent}, copies)"),
        LoopMode::Vector => write!(f, "vectorize({extent})"),
    }
}

fn write_stmt(f: &mut Formatter<'_>, s: &Stmt, level: usize) -> fmt::Result {
    indent(f, level)?;
    match &s.kind {
        StmtKind::Declare { tensor, init } => write!(f, "{tensor} .= {init}"),
        StmtKind::Assign { lhs, op, rhs } => write!(f, "{lhs} {op} {rhs}"),
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => {
            // Perfectly nested loops print as one header, as they are usually written.
            write!(f, "for {index} = ")?;
            write_extent(f, extent, *parallel)?;
            let mut body = body;
            while let [
                Stmt {
                    kind:
                        StmtKind::Loop {
                            index,
                            extent,
                            body: inner,
                            parallel,
                        },
                    ..
                },
            ] = body.as_slice()
            {
                write!(f, ", {index} = ")?;
                write_extent(f, extent, *parallel)?;
                body = inner;
            }
            write_body_end(f, body, level)
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            write!(f, "if {cond}")?;
            write_lines(f, then, level + 1)?;
            if !otherwise.is_empty() {
                f.write_char('\n')?;
                indent(f, level)?;
                f.write_str("else")?;
            }
            write_body_end(f, otherwise, level)
        }
        StmtKind::Let { name, value, body } => {
            write!(f, "let {name} = {value}")?;
            let mut body = body;
            while let [
                Stmt {
                    kind:
                        StmtKind::Let {
                            name,
                            value,
                            body: inner,
                        },
                    ..
                },
            ] = body.as_slice()
            {
                write!(f, ", {name} = {value}")?;
                body = inner;
            }
            write_body_end(f, body, level)
        }
        StmtKind::Block(body) => {
            f.write_str("begin")?;
            write_body_end(f, body, level)
        }
        StmtKind::Freeze { tensor } => write!(f, "@freeze({tensor})"),
        StmtKind::Thaw { tensor } => write!(f, "@thaw({tensor})"),
    }
}

fn write_index(f: &mut Formatter<'_>, ix: &AccessIndex) -> fmt::Result {
    if ix.permissive {
        f.write_char('~')?;
    }
    match (ix.protocol, &ix.window) {
        (Some(p), None) => write!(f, "{}({})", p.name(), ix.expr),
        (Some(p), Some((lo, hi))) => write!(f, "{}(({lo}:{hi})({}))", p.name(), ix.expr),
        (None, Some((lo, hi))) => write!(f, "({lo}:{hi})({})", ix.expr),
        // `~` covers the whole index; parentheses make that visible for `~(i - 1)`.
        (None, None) if ix.permissive => write_expr(f, &ix.expr, UNARY_PREC),
        (None, None) => write!(f, "{}", ix.expr),
    }
}

/// Literals the parser folds a leading `-` into: printing `-` before one of them would change the
/// tree from `Unary(Neg, lit)` to a negative literal.
fn folds_minus(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Literal(Scalar::I64(_) | Scalar::F64(_)))
}

fn prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, ..) => op.precedence(),
        ExprKind::Unary(..) => UNARY_PREC,
        _ => ATOM_PREC,
    }
}

/// Writes `e` in a context that requires binding strength at least `ctx`.
fn write_expr(f: &mut Formatter<'_>, e: &Expr, ctx: u8) -> fmt::Result {
    if prec(e) < ctx {
        f.write_char('(')?;
        write_expr(f, e, 0)?;
        return f.write_char(')');
    }
    match &e.kind {
        ExprKind::Literal(v) => write_scalar(f, v),
        ExprKind::Missing => f.write_str("missing"),
        ExprKind::Name(n) => f.write_str(n),
        ExprKind::Access(a) => write!(f, "{a}"),
        ExprKind::Unary(op, x) => {
            f.write_char(match op {
                UnaryOp::Neg => '-',
                UnaryOp::Not => '!',
            })?;
            if *op == UnaryOp::Neg && folds_minus(x) {
                f.write_char('(')?;
                write_expr(f, x, 0)?;
                f.write_char(')')
            } else {
                write_expr(f, x, UNARY_PREC)
            }
        }
        ExprKind::Binary(op, a, b) => {
            let p = op.precedence();
            write_expr(f, a, p)?;
            write!(f, " {} ", op.symbol())?;
            write_expr(f, b, p + 1)
        }
        ExprKind::Call(name, args) => {
            // `F(x, y)[k]`: the components argument after the call (`parse::COMPONENTS`).
            let (args, comps) = super::parse::split_components(args);
            write!(f, "{name}(")?;
            for (k, a) in args.iter().enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                write_expr(f, a, 0)?;
            }
            f.write_char(')')?;
            if let Some(Expr {
                kind: ExprKind::Call(_, ixs),
                ..
            }) = comps
            {
                f.write_char('[')?;
                for (k, a) in ixs.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write_expr(f, a, 0)?;
                }
                f.write_char(']')?;
            }
            Ok(())
        }
    }
}

/// A literal that reparses to the same value: `0x..` for u8 and a sign on negative NaN (which
/// `Scalar`'s own `Display` leaves out); everything else as `Scalar` prints it.
fn write_scalar(f: &mut Formatter<'_>, v: &Scalar) -> fmt::Result {
    match *v {
        Scalar::U8(b) => write!(f, "0x{b:02x}"),
        Scalar::F64(x) if x.is_nan() && x.is_sign_negative() => f.write_str("-NaN"),
        Scalar::F32(x) if x.is_nan() && x.is_sign_negative() => f.write_str("-NaN"),
        _ => write!(f, "{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::build::*;
    use crate::notation::parse::{parse_expr, parse_program};
    use proptest::prelude::*;

    #[test]
    fn prints_minimal_parentheses() {
        let cases: Vec<(Expr, &str)> = vec![
            (add("a", mul("b", "c")), "a + b * c"),
            (mul(add("a", "b"), "c"), "(a + b) * c"),
            (sub(sub("a", "b"), "c"), "a - b - c"),
            (sub("a", sub("b", "c")), "a - (b - c)"),
            (sub("a", lit(-1)), "a - -1"),
            (neg(lit(1)), "-(1)"),
            (neg(lit(-1.5)), "-(-1.5)"),
            (neg(neg("x")), "--x"),
            (not(lit(-1)), "!-1"),
            (neg(add("a", "b")), "-(a + b)"),
            (neg(lit(1u8)), "-0x01"),
            (lit(f64::NEG_INFINITY), "-Inf"),
            (lit(-f64::NAN), "-NaN"),
            (lit(1e-300), "1e-300"),
            (lit(2.0), "2.0"),
            (lit(i64::MIN), "-9223372036854775808"),
            (xor("a", and("b", "c")), "a xor (b && c)"),
            (
                read(access(
                    "A",
                    [
                        idx(sub("i", lit(1))).with_tilde(),
                        idx("j").with_tilde().with_protocol(Protocol::Gallop),
                    ],
                )),
                "A[~(i - 1), ~gallop(j)]",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
            assert_eq!(parse_expr(want), Ok(e), "{want}");
        }
    }

    #[test]
    fn prints_operators() {
        assert_eq!(
            AssignOp::Reduce(Reducer::Choose(Scalar::F64(-0.0))).to_string(),
            "<<choose(-0.0)>>="
        );
        assert_eq!(
            AssignOp::Reduce(Reducer::Named("gcd".into())).to_string(),
            "<<gcd>>="
        );
        assert_eq!(AssignOp::Overwrite.to_string(), "=");
        assert_eq!(Reducer::Mul.to_string(), "*");
        assert_eq!(range(lit(0), "n").to_string(), "0:n");
    }

    #[test]
    fn prints_views_and_reducers() {
        let p = program([assign(
            access("y", [idx("i").with_window("j", add("j", lit(2)))]).swizzled(&[0]),
            user("sat"),
            read(
                access(
                    "A",
                    [
                        idx("i").with_window(lit(0), lit(3)).with_tilde(),
                        idx("j")
                            .with_window(lit(1), lit(2))
                            .with_protocol(Protocol::Follow),
                    ],
                )
                .swizzled(&[1, 0]),
            ),
        )])
        .with_reducer(
            reducer("sat", call("min", [add("a", "b"), lit(255)]))
                .identity(0)
                .annihilator(255)
                .commutative()
                .associative(),
        )
        .with_reducer(
            reducer("neg", neg("y"))
                .params("x", "y")
                .identity(-0.5)
                .idempotent(),
        );
        let text =
            "reducer sat(a, b) = min(a + b, 255) identity 0 annihilator 255 commutative associative
reducer neg(x, y) = -y identity -0.5 idempotent
swizzle(y, 0)[(j:j + 2)(i)] <<sat>>= swizzle(A, 1, 0)[~(0:3)(i), follow((1:2)(j))]
";
        assert_eq!(p.to_string(), text);
        assert_eq!(parse_program(text), Ok(p));
    }

    #[test]
    fn prints_nested_blocks() {
        let p = program([for_(
            "i",
            auto(),
            [
                if_("c", []),
                let_("a", lit(true), [let_("b", "a", [freeze("T")])]),
                for_("j", auto(), []),
            ],
        )]);
        let text = "for i = _\n  if c\n  end\n  let a = true, b = a\n    @freeze(T)\n  end\n  for j = _\n  end\nend\n";
        assert_eq!(p.to_string(), text);
        assert_eq!(parse_program(text), Ok(p));
    }

    const NAMES: &[&str] = &[
        "i", "j", "k", "A", "B", "x", "y", "s", "n", "_t1", "gallop", "minimum",
    ];
    const FUNCS: &[&str] = &["min", "max", "abs", "ifelse", "f"];

    fn scalar() -> impl Strategy<Value = Scalar> {
        prop_oneof![
            any::<i64>().prop_map(Scalar::I64),
            (-3i64..20).prop_map(Scalar::I64),
            any::<bool>().prop_map(Scalar::Bool),
            any::<u8>().prop_map(Scalar::U8),
            (proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO)
                .prop_map(Scalar::F64),
            prop_oneof![
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(f64::NAN),
                Just(-f64::NAN),
                Just(0.5)
            ]
            .prop_map(Scalar::F64),
        ]
    }

    fn name_s() -> impl Strategy<Value = String> {
        proptest::sample::select(NAMES).prop_map(str::to_string)
    }

    fn binary_op() -> impl Strategy<Value = BinaryOp> {
        use BinaryOp::*;
        proptest::sample::select(vec![
            Add, Sub, Mul, Div, Rem, Eq, Ne, Lt, Le, Gt, Ge, AndAnd, OrOr, BitAnd, BitOr, Xor, Shl,
            Shr,
        ])
    }

    fn access_s(e: impl Strategy<Value = Expr> + 'static) -> impl Strategy<Value = Access> {
        let protocol = proptest::option::of(proptest::sample::select(vec![
            Protocol::Walk,
            Protocol::Gallop,
            Protocol::Follow,
            Protocol::Extrude,
        ]));
        let e = e.boxed();
        let window = proptest::option::weighted(0.2, (e.clone(), e.clone()));
        let index = (e, any::<bool>(), protocol, window).prop_map(
            |(expr, permissive, protocol, window)| AccessIndex {
                expr,
                permissive,
                protocol,
                window,
            },
        );
        (
            name_s(),
            proptest::collection::vec(index, 0..3),
            any::<bool>(),
            any::<proptest::sample::Index>(),
        )
            .prop_map(|(t, ix, swizzled, which)| {
                let n = ix.len();
                let a = access(&t, ix);
                if !swizzled {
                    return a;
                }
                // One of the permutations of 0..n, chosen by rotating the identity.
                let r = if n == 0 { 0 } else { which.index(n) };
                let perm: Vec<usize> = (0..n).map(|k| (k + r) % n).collect();
                a.swizzled(&perm)
            })
    }

    fn reducer_s() -> impl Strategy<Value = ReducerDef> {
        (
            proptest::sample::select(vec!["f", "absmax", "sat_2"]),
            expr_s(),
            proptest::option::of(scalar()),
            proptest::option::of(scalar()),
            any::<[bool; 3]>(),
        )
            .prop_map(|(n, body, id, ann, [c, a, i])| {
                let mut r = reducer(n, body);
                r.identity = id;
                r.annihilator = ann;
                r.commutative = c;
                r.associative = a;
                r.idempotent = i;
                r
            })
    }

    fn expr_s() -> BoxedStrategy<Expr> {
        let leaf = prop_oneof![
            scalar().prop_map(lit),
            Just(missing()),
            name_s().prop_map(|n| name(&n)),
        ];
        leaf.prop_recursive(5, 48, 3, |e| {
            prop_oneof![
                (binary_op(), e.clone(), e.clone()).prop_map(|(op, a, b)| binary(op, a, b)),
                (
                    prop_oneof![Just(UnaryOp::Neg), Just(UnaryOp::Not)],
                    e.clone()
                )
                    .prop_map(|(op, a)| unary(op, a)),
                (
                    proptest::sample::select(FUNCS),
                    proptest::collection::vec(e.clone(), 0..3)
                )
                    .prop_map(|(f, args)| call(f, args)),
                access_s(e).prop_map(read),
            ]
        })
        .boxed()
    }

    fn op_s() -> impl Strategy<Value = AssignOp> {
        prop_oneof![
            Just(AssignOp::Overwrite),
            proptest::sample::select(vec![
                Reducer::Add,
                Reducer::Sub,
                Reducer::Mul,
                Reducer::And,
                Reducer::Or,
                Reducer::Min,
                Reducer::Max,
                Reducer::Named("gcd".into()),
                Reducer::Named("lcm_2".into()),
            ])
            .prop_map(AssignOp::Reduce),
            scalar().prop_map(|z| AssignOp::Reduce(Reducer::Choose(z))),
        ]
    }

    fn stmt_s() -> impl Strategy<Value = Stmt> {
        let simple = prop_oneof![
            (name_s(), expr_s()).prop_map(|(t, e)| declare(&t, e)),
            (access_s(expr_s()), op_s(), expr_s()).prop_map(|(a, op, e)| assign(a, op, e)),
            name_s().prop_map(|t| freeze(&t)),
            name_s().prop_map(|t| thaw(&t)),
        ];
        simple.prop_recursive(4, 40, 4, |s| {
            let body = proptest::collection::vec(s, 0..4);
            let extent = prop_oneof![
                Just(Extent::Auto),
                (expr_s(), expr_s()).prop_map(|(a, b)| range(a, b))
            ];
            prop_oneof![
                (name_s(), extent, body.clone(), any::<bool>()).prop_map(|(i, ext, b, par)| {
                    if par {
                        parallel_for(&i, ext, b)
                    } else {
                        for_(&i, ext, b)
                    }
                }),
                (expr_s(), body.clone(), body.clone()).prop_map(|(c, t, o)| if_else(c, t, o)),
                (name_s(), expr_s(), body.clone()).prop_map(|(n, v, b)| let_(&n, v, b)),
                body.prop_map(block),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn expressions_round_trip(e in expr_s()) {
            let text = e.to_string();
            prop_assert_eq!(parse_expr(&text), Ok(e), "{}", text);
        }

        #[test]
        fn programs_round_trip(
            body in proptest::collection::vec(stmt_s(), 0..5),
            reducers in proptest::collection::vec(reducer_s(), 0..3),
        ) {
            let mut p = program(body);
            p.reducers = reducers;
            let text = p.to_string();
            prop_assert_eq!(parse_program(&text), Ok(p), "{}", text);
        }

        #[test]
        fn random_strings_never_panic(s in ".*") {
            let _ = parse_program(&s);
            let _ = parse_expr(&s);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_program(&s);
            let _ = parse_expr(&s);
        }

        #[test]
        fn token_soup_never_panics(toks in proptest::collection::vec(proptest::sample::select(vec![
            "for", "if", "else", "let", "begin", "end", "i", "A", "_", "=", ".=", "+=", "<<", ">>=", ">>",
            "min", "choose", "(", ")", "[", "]", ",", ";", "\n", ":", "~", "gallop", "-", "!", "1", "2.5",
            "0xff", "Inf", "NaN", "missing", "xor", "@", "freeze", "#", "*", "9223372036854775808",
        ]), 0..40)) {
            let s = toks.join(" ");
            let _ = parse_program(&s);
            let _ = parse_expr(&s);
        }

        #[test]
        fn mutated_programs_never_panic(p in proptest::collection::vec(stmt_s(), 1..3), cut in any::<proptest::sample::Index>(), junk in ".{0,3}") {
            // Valid programs with a piece replaced reach deeper parser states than random text.
            let text = program(p).to_string();
            let chars: Vec<char> = text.chars().collect();
            let k = cut.index(chars.len() + 1);
            let mutated: String = chars[..k].iter().collect::<String>() + &junk + &chars[k.min(chars.len())..].iter().skip(1).collect::<String>();
            let _ = parse_program(&mutated);
        }
    }
}
