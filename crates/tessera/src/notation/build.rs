//! A Rust builder for notation ASTs, for tests and for programs generated from Rust code.
//! Built nodes carry `Span::default()`; since spans never take part in equality, a built
//! program equals the parsed text of the same program.
//!
//! ```
//! use tessera::notation::build::*;
//! let spmv = program([
//!     declare("y", lit(0)),
//!     for_("i", auto(), [for_("j", auto(), [
//!         assign(access("y", [idx("i")]), Reducer::Add,
//!                read(access("A", [idx("i"), idx("j")])) * read(access("x", [idx("j")]))),
//!     ])]),
//! ]);
//! assert_eq!(spmv.to_string(), "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n");
//! ```

use super::ast::{Access, AccessIndex, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind};
pub use super::ast::{AssignOp, BinaryOp, Protocol, Reducer, ReducerDef, UnaryOp};
use crate::types::Scalar;

fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind, Span::default())
}

fn expr(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn stmts(body: impl IntoIterator<Item = Stmt>) -> Vec<Stmt> {
    body.into_iter().collect()
}

pub fn program(body: impl IntoIterator<Item = Stmt>) -> Program {
    Program {
        reducers: vec![],
        body: stmts(body),
    }
}

impl Program {
    /// The program with one more user reducer, for chaining after [`program`].
    pub fn with_reducer(mut self, def: ReducerDef) -> Program {
        self.reducers.push(def);
        self
    }
}

/// `reducer name(a, b) = body`: the parameters are `a` (old value) and `b` (new value); add
/// properties with the methods of [`ReducerDef`] and register it with
/// [`Program::with_reducer`]; use it with `Reducer::Named(name)` or [`user`].
pub fn reducer(name: &str, body: impl Into<Expr>) -> ReducerDef {
    ReducerDef::new(name, body.into())
}

/// `<<name>>`: a user reducer, by name.
pub fn user(name: &str) -> Reducer {
    Reducer::Named(name.to_string())
}

impl ReducerDef {
    /// Name the old and new value something other than `a` and `b`.
    pub fn params(mut self, old: &str, new: &str) -> ReducerDef {
        self.params = [old.to_string(), new.to_string()];
        self
    }
    pub fn identity(mut self, v: impl IntoLiteral) -> ReducerDef {
        self.identity = Some(v.into_scalar());
        self
    }
    pub fn annihilator(mut self, v: impl IntoLiteral) -> ReducerDef {
        self.annihilator = Some(v.into_scalar());
        self
    }
    pub fn commutative(mut self) -> ReducerDef {
        self.commutative = true;
        self
    }
    pub fn associative(mut self) -> ReducerDef {
        self.associative = true;
        self
    }
    pub fn idempotent(mut self) -> ReducerDef {
        self.idempotent = true;
        self
    }

    /// `derivative(e)`: the reduced result's derivative in one element (see
    /// [`ReducerDef::derivative`]).
    pub fn derivative(mut self, e: impl Into<Expr>) -> ReducerDef {
        self.derivative = Some(e.into());
        self
    }
}

/// `tensor .= init`
pub fn declare(tensor: &str, init: impl Into<Expr>) -> Stmt {
    stmt(StmtKind::Declare {
        tensor: tensor.to_string(),
        init: init.into(),
    })
}

/// `lhs op rhs`; `op` may be a [`Reducer`] (`+=` is `Reducer::Add`) or an [`AssignOp`].
pub fn assign(lhs: Access, op: impl Into<AssignOp>, rhs: impl Into<Expr>) -> Stmt {
    stmt(StmtKind::Assign {
        lhs,
        op: op.into(),
        rhs: rhs.into(),
    })
}

/// `lhs = rhs`
pub fn overwrite(lhs: Access, rhs: impl Into<Expr>) -> Stmt {
    assign(lhs, AssignOp::Overwrite, rhs)
}

impl From<Reducer> for AssignOp {
    fn from(r: Reducer) -> AssignOp {
        AssignOp::Reduce(r)
    }
}

/// `for index = extent ... end`
pub fn for_(index: &str, extent: Extent, body: impl IntoIterator<Item = Stmt>) -> Stmt {
    stmt(StmtKind::Loop {
        index: index.to_string(),
        extent,
        body: stmts(body),
        parallel: crate::notation::ast::LoopMode::Serial,
    })
}

/// `for index = parallel(extent) ... end`: a loop whose iterations may run on several threads.
pub fn parallel_for(index: &str, extent: Extent, body: impl IntoIterator<Item = Stmt>) -> Stmt {
    parallelize(for_(index, extent, body))
}

/// `for index = vectorize(extent) ... end`: a loop whose iterations may run in SIMD lanes
/// (compiling it checks its dependences as the `vectorize` schedule command does).
pub fn vector_for(index: &str, extent: Extent, body: impl IntoIterator<Item = Stmt>) -> Stmt {
    let mut s = for_(index, extent, body);
    if let StmtKind::Loop { parallel, .. } = &mut s.kind {
        *parallel = crate::notation::ast::LoopMode::Vector;
    }
    s
}

/// Mark the loop `s` parallel (what the `parallelize` schedule command does to its loop);
/// any other statement is returned unchanged.
pub fn parallelize(mut s: Stmt) -> Stmt {
    if let StmtKind::Loop { parallel, .. } = &mut s.kind {
        *parallel = crate::notation::ast::LoopMode::Parallel(Default::default());
    }
    s
}

/// The extent `_`.
pub fn auto() -> Extent {
    Extent::Auto
}

/// The extent `lo:hi` (inclusive).
pub fn range(lo: impl Into<Expr>, hi: impl Into<Expr>) -> Extent {
    Extent::Range(lo.into(), hi.into())
}

/// `if cond ... end`
pub fn if_(cond: impl Into<Expr>, then: impl IntoIterator<Item = Stmt>) -> Stmt {
    if_else(cond, then, [])
}

/// `if cond ... else ... end`
pub fn if_else(
    cond: impl Into<Expr>,
    then: impl IntoIterator<Item = Stmt>,
    otherwise: impl IntoIterator<Item = Stmt>,
) -> Stmt {
    stmt(StmtKind::If {
        cond: cond.into(),
        then: stmts(then),
        otherwise: stmts(otherwise),
    })
}

/// `let name = value ... end`
pub fn let_(name: &str, value: impl Into<Expr>, body: impl IntoIterator<Item = Stmt>) -> Stmt {
    stmt(StmtKind::Let {
        name: name.to_string(),
        value: value.into(),
        body: stmts(body),
    })
}

/// `begin ... end`
pub fn block(body: impl IntoIterator<Item = Stmt>) -> Stmt {
    stmt(StmtKind::Block(stmts(body)))
}

/// `@freeze(tensor)`
pub fn freeze(tensor: &str) -> Stmt {
    stmt(StmtKind::Freeze {
        tensor: tensor.to_string(),
    })
}

/// `@thaw(tensor)`
pub fn thaw(tensor: &str) -> Stmt {
    stmt(StmtKind::Thaw {
        tensor: tensor.to_string(),
    })
}

/// `tensor[indices...]` (no indices for a 0-d tensor: `s[]`).
pub fn access(tensor: &str, indices: impl IntoIterator<Item = AccessIndex>) -> Access {
    Access {
        tensor: tensor.to_string(),
        indices: indices.into_iter().collect(),
        swizzle: None,
        span: Span::default(),
    }
}

impl Access {
    /// `swizzle(A, perm...)[...]`: index `k` addresses dimension `perm[k]`. Swizzling an
    /// already swizzled access composes the two, as nested `swizzle(swizzle(A, p), q)` does.
    pub fn swizzled(mut self, perm: &[usize]) -> Access {
        self.swizzle = Some(match &self.swizzle {
            Some(inner) => compose_swizzles(inner, perm),
            None => perm.to_vec(),
        });
        self
    }
}

/// `swizzle(swizzle(A, inner), outer)` as one swizzle: index `k` addresses dimension
/// `outer[k]` of the inner view, which is dimension `inner[outer[k]]` of `A`. Entries out of
/// range are kept as they are for the validity checks to report.
pub fn compose_swizzles(inner: &[usize], outer: &[usize]) -> Vec<usize> {
    outer
        .iter()
        .map(|&k| inner.get(k).copied().unwrap_or(k))
        .collect()
}

/// A plain index; `idx("i")` is the loop index `i`.
pub fn idx(e: impl Into<Expr>) -> AccessIndex {
    AccessIndex {
        expr: e.into(),
        permissive: false,
        protocol: None,
        window: None,
    }
}

impl AccessIndex {
    /// `~e`
    pub fn with_tilde(mut self) -> AccessIndex {
        self.permissive = true;
        self
    }

    /// `gallop(e)` etc.
    pub fn with_protocol(mut self, p: Protocol) -> AccessIndex {
        self.protocol = Some(p);
        self
    }

    /// `(lo:hi)(e)`: the index into the window `lo:hi` of the dimension.
    pub fn with_window(mut self, lo: impl Into<Expr>, hi: impl Into<Expr>) -> AccessIndex {
        self.window = Some((lo.into(), hi.into()));
        self
    }
}

/// An access read as an expression.
pub fn read(a: Access) -> Expr {
    a.into()
}

impl From<Access> for Expr {
    fn from(a: Access) -> Expr {
        expr(ExprKind::Access(a))
    }
}

/// A bare `&str` is a name (loop index, `let` variable or 0-d tensor).
impl From<&str> for Expr {
    fn from(n: &str) -> Expr {
        name(n)
    }
}

pub fn name(n: &str) -> Expr {
    expr(ExprKind::Name(n.to_string()))
}

/// Rust values that have a literal spelling: `i32`/`i64` (→ i64), `f64`, `bool`, `u8`.
pub trait IntoLiteral {
    fn into_scalar(self) -> Scalar;
}

impl IntoLiteral for i32 {
    fn into_scalar(self) -> Scalar {
        Scalar::I64(self as i64)
    }
}

impl IntoLiteral for i64 {
    fn into_scalar(self) -> Scalar {
        Scalar::I64(self)
    }
}

impl IntoLiteral for f64 {
    fn into_scalar(self) -> Scalar {
        Scalar::F64(self)
    }
}

impl IntoLiteral for bool {
    fn into_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
}

impl IntoLiteral for u8 {
    fn into_scalar(self) -> Scalar {
        Scalar::U8(self)
    }
}

impl IntoLiteral for Scalar {
    fn into_scalar(self) -> Scalar {
        self
    }
}

/// A literal: `lit(0)` is the i64 0, `lit(0.0)` the f64 0.0, `lit(0xffu8)` the u8 `0xff`.
pub fn lit(v: impl IntoLiteral) -> Expr {
    expr(ExprKind::Literal(v.into_scalar()))
}

/// `missing`
pub fn missing() -> Expr {
    expr(ExprKind::Missing)
}

pub fn unary(op: UnaryOp, a: impl Into<Expr>) -> Expr {
    expr(ExprKind::Unary(op, Box::new(a.into())))
}

/// `-a` (the tree `Unary(Neg, a)`, never folded into a literal: `lit(-1)` is the literal `-1`).
pub fn neg(a: impl Into<Expr>) -> Expr {
    unary(UnaryOp::Neg, a)
}

/// `!a`
pub fn not(a: impl Into<Expr>) -> Expr {
    unary(UnaryOp::Not, a)
}

pub fn binary(op: BinaryOp, a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
    expr(ExprKind::Binary(op, Box::new(a.into()), Box::new(b.into())))
}

/// `name(args...)`
pub fn call(name: &str, args: impl IntoIterator<Item = Expr>) -> Expr {
    expr(ExprKind::Call(name.to_string(), args.into_iter().collect()))
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $f:ident => $op:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $f(a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
                binary(BinaryOp::$op, a, b)
            }
        )*
    };
}

binary_fns! {
    /// `a + b`
    add => Add,
    /// `a - b`
    sub => Sub,
    /// `a * b`
    mul => Mul,
    /// `a / b`
    div => Div,
    /// `a % b`
    rem => Rem,
    /// `a == b`
    eq => Eq,
    /// `a != b`
    ne => Ne,
    /// `a < b`
    lt => Lt,
    /// `a <= b`
    le => Le,
    /// `a > b`
    gt => Gt,
    /// `a >= b`
    ge => Ge,
    /// `a && b`
    and => AndAnd,
    /// `a || b`
    or => OrOr,
    /// `a & b`
    bitand => BitAnd,
    /// `a | b`
    bitor => BitOr,
    /// `a xor b`
    xor => Xor,
    /// `a << b`
    shl => Shl,
    /// `a >> b`
    shr => Shr,
}

// Operators on `Expr` build trees, so built programs read like the text (`a * b + c`).
macro_rules! binary_ops {
    ($($trait:ident $method:ident => $op:ident),* $(,)?) => {
        $(
            impl<R: Into<Expr>> std::ops::$trait<R> for Expr {
                type Output = Expr;
                fn $method(self, rhs: R) -> Expr {
                    binary(BinaryOp::$op, self, rhs)
                }
            }
        )*
    };
}

binary_ops! {
    Add add => Add,
    Sub sub => Sub,
    Mul mul => Mul,
    Div div => Div,
    Rem rem => Rem,
    BitAnd bitand => BitAnd,
    BitOr bitor => BitOr,
    BitXor bitxor => Xor,
    Shl shl => Shl,
    Shr shr => Shr,
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        neg(self)
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        not(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    #[test]
    fn builder_matches_parser_on_spmv() {
        let built = program([
            declare("y", lit(0)),
            for_(
                "i",
                auto(),
                [for_(
                    "j",
                    auto(),
                    [assign(
                        access("y", [idx("i")]),
                        Reducer::Add,
                        read(access("A", [idx("i"), idx("j")])) * read(access("x", [idx("j")])),
                    )],
                )],
            ),
        ]);
        let parsed = parse_program("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n");
        assert_eq!(parsed, Ok(built));
    }

    #[test]
    fn builder_covers_every_statement() {
        let built = program([
            declare("s", lit(0.0)),
            for_(
                "i",
                range(lit(0), sub("n", lit(1))),
                [let_(
                    "t",
                    read(access("a", [idx("i").with_protocol(Protocol::Gallop)])),
                    [if_else(
                        lt("t", lit(-1)) | not("b"),
                        [assign(
                            access("s", []),
                            Reducer::Choose(Scalar::I64(-1)),
                            "t",
                        )],
                        [overwrite(
                            access("c", [idx(add("i", lit(1))).with_tilde()]),
                            -missing(),
                        )],
                    )],
                )],
            ),
            block([freeze("s"), thaw("s")]),
            assign(access("m", []), Reducer::Max, call("abs", [lit(0xffu8)])),
        ]);
        let text = "s .= 0.0
for i = 0:n - 1
  let t = a[gallop(i)]
    if (t < -1) | !b
      s[] <<choose(-1)>>= t
    else
      c[~(i + 1)] = -missing
    end
  end
end
begin
  @freeze(s)
  @thaw(s)
end
m[] <<max>>= abs(0xff)
";
        assert_eq!(parse_program(text), Ok(built.clone()));
        assert_eq!(built.to_string(), text);
    }
}
