//! The differential tests' random programs, as proptest strategies over the AST: a loop nest
//! over `i` and `j` (either order) around one assignment, perhaps under an index condition or
//! a `let`, reading matrices `A`, `B`, `T` (read transposed) and vectors `u`, `v` in every
//! format with every protocol, into a scalar, a vector or a matrix. Each part shrinks on its
//! own, so a failure shrinks to a small program over small tensors.
//!
//! Values are small integers stored as floats, so every summation order gives the same bits.

use super::cases::{Case, Tally, compare, run_cases, skip_huge_kernels};
use super::random::{Data, all_matrix_formats, all_vector_formats, data_s};
use super::{fmt, run_jit};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::{TestCaseError, TestRunner};
use std::collections::BTreeMap;
use tessera::notation::ast::{AccessIndex, Expr, ExprKind, Program, Stmt, StmtKind};
use tessera::notation::build::*;
use tessera::tensor::Tensor;

/// What the assignment writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// `s[]`
    Scalar,
    /// `y[i]`
    Rows,
    /// `w[j]`
    Cols,
    /// `C[i, j]` reduced into
    Matrix,
    /// `C[i, j] = ...`
    MatrixOverwrite,
}

/// Every output kind, for tests that draw from all: a quarter of the cases write a matrix
/// (reduced into or overwritten; the slowest kernels to compile).
pub const ALL_OUTPUTS: &[Output] = &[
    Output::Scalar,
    Output::Rows,
    Output::Cols,
    Output::Matrix,
    Output::Scalar,
    Output::Rows,
    Output::Cols,
    Output::MatrixOverwrite,
];

/// Extents are below this.
const MAX_EXTENT: usize = 6;
const MAX_ENTRIES: usize = (MAX_EXTENT - 1) * (MAX_EXTENT - 1);

/// `A[i, j]` with `j` as given.
fn read_a(j: AccessIndex) -> Expr {
    read(access("A", [idx("i"), j]))
}

/// `v[j]` with `j` as given.
fn read_v(j: AccessIndex) -> Expr {
    read(access("v", [j]))
}

/// The leaves of the expressions, simplest first (shrinking moves towards the front);
/// `with_t` adds the `let` variable `t`.
fn leaves(with_t: bool) -> Vec<Expr> {
    let mut out = vec![
        lit(0),
        lit(1),
        lit(2),
        name("i"),
        name("j"),
        read_a(idx("j")),
        read(access("B", [idx("i"), idx("j")])),
        read(access("u", [idx("i")])),
        read_v(idx("j")),
        read(access("T", [idx("j"), idx("i")])),
        read_a(idx("j").with_protocol(Protocol::Gallop)),
        read_v(idx("j").with_protocol(Protocol::Gallop)),
        read_a(idx("j").with_protocol(Protocol::Follow)),
        read_v(idx("j").with_protocol(Protocol::Follow)),
    ];
    if with_t {
        out.push(name("t"));
    }
    out
}

/// An expression of at most `depth` operators: `+ - * min max` and `ifelse` on a comparison.
/// An operator shrinks its operands, then to one of them (`Keep`).
pub fn expr_s(depth: u32, with_t: bool) -> BoxedStrategy<Expr> {
    let leaf = select(leaves(with_t));
    if depth == 0 {
        return leaf.boxed();
    }
    let node = |f: fn(Expr, Expr) -> Expr| {
        (
            expr_s(depth - 1, with_t),
            expr_s(depth - 1, with_t),
            Keep::strategy(),
        )
            .prop_map(move |(x, y, keep)| keep.apply(x, y, f))
    };
    let ifelse = (
        expr_s(depth - 1, with_t),
        expr_s(depth - 1, with_t),
        leaf.clone(),
        leaf.clone(),
        Keep::strategy(),
    )
        .prop_map(|(x, y, c, d, keep)| keep.apply(x, y, |x, y| call("ifelse", [le(c, d), x, y])));
    prop_oneof![
        3 => leaf,
        1 => node(add),
        1 => node(sub),
        2 => node(mul),
        1 => node(|x, y| call("min", [x, y])),
        1 => node(|x, y| call("max", [x, y])),
        1 => ifelse,
    ]
    .boxed()
}

/// Which operands of an operator to keep: both when generated, then, when shrinking, the
/// first or the second alone, so that an expression shrinks to a sub-expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    Both,
    First,
    Second,
}

impl Keep {
    fn strategy() -> KeepStrategy {
        KeepStrategy
    }

    fn apply(self, x: Expr, y: Expr, f: impl FnOnce(Expr, Expr) -> Expr) -> Expr {
        match self {
            Keep::Both => f(x, y),
            Keep::First => x,
            Keep::Second => y,
        }
    }
}

#[derive(Debug)]
struct KeepStrategy;

impl Strategy for KeepStrategy {
    type Tree = KeepTree;
    type Value = Keep;

    fn new_tree(&self, _: &mut TestRunner) -> NewTree<Self> {
        Ok(KeepTree {
            current: Keep::Both,
            done: false,
        })
    }
}

/// Tries `First`, then `Second`, then settles back on `Both` (`done`) when neither fails.
struct KeepTree {
    current: Keep,
    done: bool,
}

impl ValueTree for KeepTree {
    type Value = Keep;

    fn current(&self) -> Keep {
        self.current
    }

    fn simplify(&mut self) -> bool {
        if self.current == Keep::Both && !self.done {
            self.current = Keep::First;
            true
        } else {
            false
        }
    }

    fn complicate(&mut self) -> bool {
        match self.current {
            Keep::First => self.current = Keep::Second,
            Keep::Second => {
                self.current = Keep::Both;
                self.done = true;
            }
            Keep::Both => return false,
        }
        true
    }
}

/// Around the assignment.
#[derive(Clone, Copy, Debug)]
enum Guard {
    None,
    /// `if i <= j`
    Upper,
    /// `if i != j`
    OffDiagonal,
    /// `let t = ...`
    Let,
}

fn guard_s() -> impl Strategy<Value = Guard> {
    prop_oneof![
        2 => Just(Guard::None),
        1 => Just(Guard::Upper),
        1 => Just(Guard::OffDiagonal),
        1 => Just(Guard::Let),
    ]
}

/// `e` with the variable `t` replaced by `value` (what `let t = value` means), so that a
/// guard shrinks away from `let` without changing the right-hand side's meaning.
fn inline_t(e: &Expr, value: &Expr) -> Expr {
    let mut out = e.clone();
    match &mut out.kind {
        ExprKind::Name(n) if n == "t" => return value.clone(),
        ExprKind::Binary(_, x, y) => {
            **x = inline_t(x, value);
            **y = inline_t(y, value);
        }
        ExprKind::Call(_, args) => {
            for a in args {
                *a = inline_t(a, value);
            }
        }
        _ => {}
    }
    out
}

/// The statement part of a case, before formats and data.
#[derive(Clone, Debug)]
struct Shape {
    output: Output,
    /// `for j = _, i = _` (the loops shrink towards the concordant order).
    j_outer: bool,
    reducer: Index,
    guard: Guard,
    /// The value of `t`, bound by a `let` guard and inlined otherwise.
    t: Expr,
    rhs: Expr,
}

fn shape_s(outputs: &'static [Output]) -> impl Strategy<Value = Shape> {
    (
        select(outputs),
        proptest::bool::weighted(0.3),
        any::<Index>(),
        guard_s(),
        expr_s(1, false),
        expr_s(2, true),
    )
        .prop_map(|(output, j_outer, reducer, guard, t, rhs)| Shape {
            output,
            j_outer,
            reducer,
            guard,
            t,
            rhs,
        })
}

impl Shape {
    /// The program, for extents `ni` and `nj`: a loop whose index no access indexes directly
    /// (`s[] += v[j]` has none for `i`) cannot infer its extent, so it gets the range
    /// `0:n - 1` written out.
    ///
    /// A float value reduced into an integer output is an error (README, "Semantics"), so
    /// with `integer_out` a reduction reduces the indicator of a nonzero value instead.
    fn program(&self, ni: usize, nj: usize, integer_out: bool) -> Program {
        let (out, lhs) = match self.output {
            Output::Scalar => ("s", access("s", [])),
            Output::Rows => ("y", access("y", [idx("i")])),
            Output::Cols => ("w", access("w", [idx("j")])),
            Output::Matrix | Output::MatrixOverwrite => ("C", access("C", [idx("i"), idx("j")])),
        };
        let op = if self.output == Output::MatrixOverwrite {
            AssignOp::Overwrite
        } else {
            let reducers = [Reducer::Add, Reducer::Add, Reducer::Max, Reducer::Min];
            AssignOp::Reduce(self.reducer.get(&reducers).clone())
        };
        let indicator = integer_out && matches!(op, AssignOp::Reduce(_));
        let stmt = |rhs: Expr| -> Stmt {
            let rhs = match indicator {
                true => call("ifelse", [ne(rhs, lit(0)), lit(1), lit(0)]),
                false => rhs,
            };
            assign(lhs.clone(), op.clone(), rhs)
        };
        let inlined = || stmt(inline_t(&self.rhs, &self.t));
        let stmt = match self.guard {
            Guard::None => inlined(),
            Guard::Upper => if_(le("i", "j"), [inlined()]),
            Guard::OffDiagonal => if_(ne("i", "j"), [inlined()]),
            Guard::Let => let_("t", self.t.clone(), [stmt(self.rhs.clone())]),
        };
        let body = [stmt];
        let mut indexed = vec![];
        tessera::notation::visit::exprs(&body, &mut |e| {
            if let ExprKind::Access(a) = &e.kind {
                indexed.extend(a.indices.iter().map(|ix| ix.expr.clone()));
            }
        });
        if let StmtKind::Assign { lhs, .. } = &innermost(&body[0]).kind {
            indexed.extend(lhs.indices.iter().map(|ix| ix.expr.clone()));
        }
        let extent = |i: &str, n: usize| {
            if indexed.contains(&name(i)) {
                auto()
            } else {
                range(lit(0), lit(n as i64 - 1))
            }
        };
        let (outer, inner) = if self.j_outer {
            (("j", extent("j", nj)), ("i", extent("i", ni)))
        } else {
            (("i", extent("i", ni)), ("j", extent("j", nj)))
        };
        program([
            declare(out, lit(0)),
            for_(outer.0, outer.1, [for_(inner.0, inner.1, body)]),
        ])
    }

    /// The output's formats. Run-length outputs take writes in increasing coordinate order
    /// only: `C[i, j]` and `y[i]` when `i` is the outer loop.
    fn output_formats(&self) -> Vec<&'static str> {
        let mut formats = match self.output {
            Output::Scalar => vec![
                "Element(0.0)",
                "Element(0)",
                "SparseScalar(0.0)",
                "ShortCircuitScalar(0.0)",
                "SparseShortCircuitScalar(0)",
            ],
            Output::Rows => vec![
                "Dense(Element(0.0))",
                "SparseByteMap(Element(0.0))",
                "SparseDict(Element(0.0))",
            ],
            Output::Cols => vec![
                "Dense(Element(0.0))",
                "Dense(Element(0))",
                "SparseByteMap(Element(0.0))",
                "SparseDict(Element(0))",
            ],
            Output::Matrix | Output::MatrixOverwrite => vec![
                "Dense(Dense(Element(0.0)))",
                "Dense(SparseByteMap(Element(0.0)))",
                "SparseByteMap(SparseByteMap(Element(0.0)))",
                "SparseDict(SparseDict(Element(0.0)))",
                "Dense(SparseDict(Element(0.0)))",
            ],
        };
        if !self.j_outer {
            match self.output {
                Output::Matrix | Output::MatrixOverwrite => formats.extend([
                    "RunList(RunList(Element(0.0)))",
                    "Dense(SparseRunList(Element(0.0)))",
                    "SparseRunList(RunList(Element(0.0), merge=false))",
                ]),
                Output::Rows => {
                    formats.extend(["RunList(Element(0.0))", "SparseRunList(Element(0.0))"])
                }
                _ => {}
            }
        }
        formats
    }
}

/// The assignment under a guard.
fn innermost(s: &Stmt) -> &Stmt {
    match &s.kind {
        StmtKind::If { then: body, .. } | StmtKind::Let { body, .. } => innermost(&body[0]),
        _ => s,
    }
}

/// The inputs: a format and data for each of `A`, `B`, `T` (matrices) and `u`, `v` (vectors).
fn inputs_s() -> impl Strategy<Value = Vec<(&'static str, Data)>> {
    let matrix = || (select(all_matrix_formats()), data_s(MAX_ENTRIES));
    let vector = || (select(all_vector_formats()), data_s(MAX_EXTENT));
    (matrix(), matrix(), matrix(), vector(), vector())
        .prop_map(|(a, b, t, u, v)| vec![a, b, t, u, v])
}

/// Extents `(ni, nj)`: square half the time.
pub fn extents_s(max: usize) -> impl Strategy<Value = (usize, usize)> {
    (0..max, proptest::option::of(0..max)).prop_map(|(ni, nj)| (ni, nj.unwrap_or(ni)))
}

/// A random case writing one of `outputs`.
pub fn loop_case_s(outputs: &'static [Output]) -> impl Strategy<Value = Case> {
    // The extents come before the data: shrinking them crops the data, which works while it
    // is dense; once the data has shrunk to the few entries a failure needs, they would stay
    // large.
    (
        shape_s(outputs),
        extents_s(MAX_EXTENT),
        any::<Index>(),
        inputs_s(),
    )
        .prop_map(|(shape, (ni, nj), out_format, inputs)| {
            let of = fmt(out_format.get::<&str>(&shape.output_formats()));
            let integer_out = of.elem().class() != tessera::types::Class::Float;
            let program = shape.program(ni, nj, integer_out);
            let mut tensors = BTreeMap::new();
            let names = [
                ("A", vec![ni, nj]),
                ("B", vec![ni, nj]),
                ("T", vec![nj, ni]),
                ("u", vec![ni]),
                ("v", vec![nj]),
            ];
            for ((name, dims), (format, data)) in names.into_iter().zip(inputs) {
                tensors.insert(name.to_string(), data.tensor(&fmt(format), &dims));
            }
            let (out, dims) = match shape.output {
                Output::Scalar => ("s", vec![]),
                Output::Rows => ("y", vec![ni]),
                Output::Cols => ("w", vec![nj]),
                Output::Matrix | Output::MatrixOverwrite => ("C", vec![ni, nj]),
            };
            tensors.insert(
                out.to_string(),
                Tensor::empty(&of, &dims).expect("an empty output"),
            );
            Case { program, tensors }.retain_mentioned()
        })
}

/// `cases` cases writing one of `outputs` through the JIT, against the evaluator, their
/// programs rewritten by `rewrite` (which must keep their meaning); refusals and double
/// failures must be rare.
pub fn jit_matches_evaluator(
    name: &str,
    cases: u32,
    outputs: &'static [Output],
    rewrite: fn(&Program) -> Program,
) {
    let tally = Tally::default();
    run_cases(name, cases, loop_case_s(outputs), |case| {
        let case = Case {
            program: rewrite(&case.program),
            ..case
        };
        skip_huge_kernels(&case)?;
        let outcome = compare(&case, &run_jit)
            .map_err(|e| TestCaseError::fail(format!("{e}\nrun as:\n{}", case.program)))?;
        tally.count(outcome);
        Ok(())
    });
    tally.assert_rare(10, 4);
}

/// The same program through views and user reducers that mean the same thing: a double
/// swizzle (`swizzle(swizzle(A, 1, 0), 1, 0)`), a swizzled transpose for `T[j, i]`, windows
/// covering whole dimensions for `B[i, j]` and `u[i]`, and user versions of `+`, `max` and
/// `min` with their properties declared.
pub fn with_views_and_user_reducers(p: &Program) -> Program {
    fn expr(e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Access(a) => view(a),
            ExprKind::Unary(_, x) => expr(x),
            ExprKind::Binary(_, x, y) => {
                expr(x);
                expr(y);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(expr),
            ExprKind::Literal(_) | ExprKind::Missing | ExprKind::Name(_) => {}
        }
    }
    fn plain(a: &tessera::notation::ast::Access, names: &[&str]) -> bool {
        a.swizzle.is_none()
            && a.indices.len() == names.len()
            && a.indices.iter().zip(names).all(|(ix, n)| {
                ix.expr == name(n) && !ix.permissive && ix.protocol.is_none() && ix.window.is_none()
            })
    }
    fn whole(t: &str) -> (Expr, Expr) {
        (lit(0), sub(call("size", [name(t), lit(0)]), lit(1)))
    }
    fn view(a: &mut tessera::notation::ast::Access) {
        match a.tensor.as_str() {
            "T" if plain(a, &["j", "i"]) => {
                *a = access("T", [idx("i"), idx("j")]).swizzled(&[1, 0]);
            }
            "A" if plain(a, &["i", "j"]) => {
                *a = access("A", [idx("i"), idx("j")])
                    .swizzled(&[1, 0])
                    .swizzled(&[1, 0]);
            }
            "B" if plain(a, &["i", "j"]) => a.indices[0].window = Some(whole("B")),
            "u" if plain(a, &["i"]) => a.indices[0].window = Some(whole("u")),
            _ => {}
        }
    }
    fn stmts(body: &mut [Stmt]) {
        for s in body {
            match &mut s.kind {
                StmtKind::Assign { lhs, op, rhs } => {
                    view(lhs);
                    expr(rhs);
                    if let AssignOp::Reduce(r) = op {
                        let user = match r {
                            Reducer::Add => "plus",
                            Reducer::Max => "mx",
                            Reducer::Min => "mn",
                            _ => continue,
                        };
                        *r = Reducer::Named(user.to_string());
                    }
                }
                StmtKind::Loop { body, .. } | StmtKind::Block(body) => stmts(body),
                StmtKind::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    expr(cond);
                    stmts(then);
                    stmts(otherwise);
                }
                StmtKind::Let { value, body, .. } => {
                    expr(value);
                    stmts(body);
                }
                StmtKind::Declare { init, .. } => expr(init),
                StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
            }
        }
    }
    let mut out = p.clone();
    stmts(&mut out.body);
    out.with_reducer(
        reducer("plus", add("a", "b"))
            .identity(0)
            .commutative()
            .associative(),
    )
    .with_reducer(
        reducer("mx", call("max", [name("a"), name("b")]))
            .identity(f64::NEG_INFINITY)
            .commutative()
            .associative()
            .idempotent(),
    )
    .with_reducer(
        reducer("mn", call("min", [name("a"), name("b")]))
            .identity(f64::INFINITY)
            .commutative()
            .associative()
            .idempotent(),
    )
}
