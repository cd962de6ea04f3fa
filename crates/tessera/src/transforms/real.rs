//! Real-valued loops (issue 14, the continuous tensor abstraction §4): which loop indices are
//! real, where `d(x)` may appear, and which accesses a real index may drive.
//!
//! A loop is *real* when a bound of its range is a float (`for x = 0.5:9.0`, `for x = -Inf:Inf`,
//! `for x = 0:2.5`), and *integer* when its bounds are integers. A `for x = _` loop takes the
//! kind of the dimensions its index drives: it is real when it drives a real dimension (its
//! extent is then the whole line, [`real_extent`]). In one index position the *driver* is the
//! innermost loop index the expression names (the paper's "the deepest loop index drives; outer
//! ones are constants there"): in `A[x + i]` inside `for x`, inside `for i`, `i` drives and `x`
//! is an offset.
//!
//! [`check_real`] refuses, each with a [`RealError`] naming the place:
//! - an index driving both a real and an integer dimension, a float-bounded loop driving an
//!   integer dimension and an integer-bounded one driving a real dimension;
//! - a real index in an integer-only place: a position of an integer dimension (also through a
//!   `let` whose value uses it) or a window bound;
//! - a position of a real dimension that is not affine and invertible in the real indices it
//!   names (`A[x*x]`, `A[sin(x)]`, `A[x*y]` with both real, `A[0*x]`, `A[x - x]`): the loop's
//!   pieces are the accessed pieces mapped back through the inverse, which must exist;
//! - `d(...)` anywhere but as a factor of the top-level product of the right-hand side of a
//!   `+=` or `-=`, with an argument that is not an enclosing real loop's index, with an index
//!   twice, or with an index that also indexes the left-hand side (a measure of the loop the
//!   statement writes point by point has no meaning).
//!
//! A real index used as a plain value (`A[x] += x`, `if x > 2`) is not refused here: it is
//! valid where the loop is driven by pinpoints. The lowering decides, and the continuous
//! reference evaluator (`eval::continuous`) refuses it where it would change an output on a
//! piece of positive length.

use crate::error::Error;
use crate::notation::ast::{
    Access, AssignOp, BinaryOp, Expr, ExprKind, Extent, Program, Reducer, Span, Stmt, StmtKind,
    UnaryOp,
};
use crate::semantics::{self, Builtin};
use crate::types::{Class, Scalar};
use std::collections::BTreeMap;
use std::fmt;

/// The kind of a loop index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    Integer,
    Real,
}

/// The kind of one loop of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopClass {
    pub index: String,
    /// Where the `for` is written (spans compare equal whatever their position, so look a loop
    /// up with [`RealLoops::kind_at`], which compares line and column).
    pub span: Span,
    pub kind: IndexKind,
}

/// The kind of every loop of a program, in program order (pre-order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RealLoops {
    pub loops: Vec<LoopClass>,
}

impl RealLoops {
    /// The kind of the loop written at `span` (line and column), if there is one.
    pub fn kind_at(&self, span: Span) -> Option<IndexKind> {
        self.loops
            .iter()
            .find(|l| l.span.line == span.line && l.span.col == span.col)
            .map(|l| l.kind)
    }

    /// Whether any loop is real.
    pub fn any_real(&self) -> bool {
        self.loops.iter().any(|l| l.kind == IndexKind::Real)
    }
}

/// The extent a real `for x = _` takes: the whole line, `-Inf:Inf`.
pub fn real_extent(span: Span) -> Extent {
    let lit = |v: f64| Expr::new(ExprKind::Literal(Scalar::F64(v)), span);
    Extent::Range(lit(f64::NEG_INFINITY), lit(f64::INFINITY))
}

/// A program refused by [`check_real`], with the place it names.
#[derive(Clone, Debug, PartialEq)]
pub enum RealError {
    /// `index` drives a real dimension of one access and an integer dimension of another
    /// (`first` describes the earlier use).
    MixedDimensions {
        span: Span,
        index: String,
        tensor: String,
        dim: usize,
        first: String,
    },
    /// The loop over `index` has float bounds (it is real) but drives an integer dimension.
    RealLoopOnIntegerDimension {
        span: Span,
        index: String,
        tensor: String,
        dim: usize,
        loop_span: Span,
    },
    /// The loop over `index` has integer bounds but drives a real dimension.
    IntegerLoopOnRealDimension {
        span: Span,
        index: String,
        tensor: String,
        dim: usize,
        loop_span: Span,
    },
    /// The real index `index` is used where only integers may go (`place` says where).
    RealInIntegerPlace {
        span: Span,
        index: String,
        place: String,
    },
    /// The position `expr` of `tensor`, a real dimension, is not affine and invertible in the
    /// real index `index`.
    NotInvertible {
        span: Span,
        tensor: String,
        expr: String,
        index: String,
    },
    /// `d(index)` outside the right-hand side of a `+=` or `-=` or not one of its factors.
    MeasureMisplaced { span: Span, index: String },
    /// An argument of `d` that is not the index of an enclosing real loop.
    NotARealLoop { span: Span, arg: String },
    /// `d` names `index` twice in one statement.
    MeasureRepeated { span: Span, index: String },
    /// `d(index)` in a statement whose left-hand side `index` also indexes.
    MeasureOfWrittenIndex {
        span: Span,
        index: String,
        tensor: String,
    },
}

impl RealError {
    /// The place the error names.
    pub fn span(&self) -> Span {
        use RealError::*;
        match self {
            MixedDimensions { span, .. }
            | RealLoopOnIntegerDimension { span, .. }
            | IntegerLoopOnRealDimension { span, .. }
            | RealInIntegerPlace { span, .. }
            | NotInvertible { span, .. }
            | MeasureMisplaced { span, .. }
            | NotARealLoop { span, .. }
            | MeasureRepeated { span, .. }
            | MeasureOfWrittenIndex { span, .. } => *span,
        }
    }
}

impl fmt::Display for RealError {
    /// The message, without the place (the [`Error`] it converts to adds it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RealError::*;
        match self {
            MixedDimensions {
                index,
                tensor,
                dim,
                first,
                ..
            } => write!(
                f,
                "index `{index}` drives dimension {dim} of `{tensor}` here but also {first}; \
                 an index is either real or integer"
            ),
            RealLoopOnIntegerDimension {
                index,
                tensor,
                dim,
                loop_span,
                ..
            } => write!(
                f,
                "the loop over `{index}` at {loop_span} has float bounds (a real loop) but \
                 `{index}` indexes dimension {dim} of `{tensor}`, an integer dimension"
            ),
            IntegerLoopOnRealDimension {
                index,
                tensor,
                dim,
                loop_span,
                ..
            } => write!(
                f,
                "the loop over `{index}` at {loop_span} has integer bounds but `{index}` \
                 indexes dimension {dim} of `{tensor}`, a real dimension (give the loop float \
                 bounds, `0.0:9.0`, or `_`)"
            ),
            RealInIntegerPlace { index, place, .. } => {
                write!(
                    f,
                    "the real index `{index}` is used in {place}, which takes integers"
                )
            }
            NotInvertible {
                tensor,
                expr,
                index,
                ..
            } => write!(
                f,
                "index `{expr}` of `{tensor}` is not invertible in the real index `{index}` \
                 (a real dimension takes `x`, `x + c`, `c - x`, `2*x + c` or sums of real \
                 indices)"
            ),
            MeasureMisplaced { index, .. } => write!(
                f,
                "`d({index})` must be a factor of the right-hand side of `+=` inside `for {index}`"
            ),
            NotARealLoop { arg, .. } => write!(f, "`{arg}` is not a real loop"),
            MeasureRepeated { index, .. } => {
                write!(f, "`d` measures `{index}` twice in one statement")
            }
            MeasureOfWrittenIndex { index, tensor, .. } => write!(
                f,
                "`d({index})` in a statement whose left-hand side `{tensor}[...]` is indexed \
                 by `{index}`: that loop is not reduced, so it has no measure"
            ),
        }
    }
}

impl From<RealError> for Error {
    fn from(e: RealError) -> Error {
        let span = e.span();
        let msg = e.to_string();
        match e {
            RealError::MixedDimensions { .. }
            | RealError::RealLoopOnIntegerDimension { .. }
            | RealError::IntegerLoopOnRealDimension { .. } => {
                Error::DimensionMismatch { span, msg }
            }
            _ => Error::program(span, msg),
        }
    }
}

/// What the checks know of the tensors.
pub struct RealDims<'a> {
    /// Whether dimension `d` of tensor `t` is real.
    pub is_real: &'a dyn Fn(&str, usize) -> bool,
    /// The element class of a tensor (for the class of a 0-d tensor used as a loop bound).
    pub class_of: &'a dyn Fn(&str) -> Option<Class>,
}

/// Classify every loop (see the module documentation) and refuse real indices in integer
/// places; no `d` or invertibility checks.
pub fn classify(p: &Program, dims: &RealDims) -> Result<RealLoops, RealError> {
    walk(p, dims, false)
}

/// [`classify`], then the checks of `d(...)` and of invertible real accesses.
pub fn check_real(p: &Program, dims: &RealDims) -> Result<RealLoops, RealError> {
    walk(p, dims, true)
}

fn walk(p: &Program, dims: &RealDims, full: bool) -> Result<RealLoops, RealError> {
    let mut w = Walker {
        dims,
        full,
        scope: vec![],
        out: RealLoops::default(),
        real_use: BTreeMap::new(),
    };
    w.stmts(&p.body)?;
    Ok(w.out)
}

#[derive(Clone)]
enum BinderKind {
    /// A loop; `explicit` when its range is written (not `_`).
    Loop { kind: IndexKind, explicit: bool },
    /// A `let`: its value's class and the real index it depends on, if any.
    Let {
        class: Option<Class>,
        real_dep: Option<String>,
    },
}

#[derive(Clone)]
struct Binder {
    name: String,
    span: Span,
    kind: BinderKind,
}

struct Walker<'a, 'd> {
    dims: &'a RealDims<'d>,
    full: bool,
    scope: Vec<Binder>,
    out: RealLoops,
    /// Per real `_` loop (by its place), the first real dimension its index drives.
    real_use: BTreeMap<(u32, u32), String>,
}

/// The names an expression mentions outside nested accesses' indices, in order.
pub fn top_names(e: &Expr) -> Vec<&str> {
    let mut out = vec![];
    fn go<'e>(e: &'e Expr, out: &mut Vec<&'e str>) {
        match &e.kind {
            ExprKind::Name(n) => out.push(n),
            ExprKind::Unary(_, x) => go(x, out),
            ExprKind::Binary(_, x, y) => {
                go(x, out);
                go(y, out);
            }
            // `size(A, d)` names a tensor, not a value.
            ExprKind::Call(f, args) if f == Builtin::Size.name() || f == Builtin::Sample.name() => {
                args.iter().skip(1).for_each(|a| go(a, out))
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| go(a, out)),
            ExprKind::Access(_) | ExprKind::Literal(_) | ExprKind::Missing => {}
        }
    }
    go(e, &mut out);
    out
}

/// Call `f(access, k)` for every position `k` that `index` drives in `body`: it names `index`
/// and no loop index bound inside `body` (`inner`, the loops entered so far).
fn drives(body: &[Stmt], index: &str, inner: &mut Vec<String>, f: &mut dyn FnMut(&Access, usize)) {
    fn exprs(e: &Expr, index: &str, inner: &[String], f: &mut dyn FnMut(&Access, usize)) {
        crate::notation::visit::expr(e, &mut |x: &Expr| {
            if let ExprKind::Access(a) = &x.kind {
                position_drives(a, index, inner, f);
            }
        })
    }
    for s in body {
        match &s.kind {
            StmtKind::Declare { init, .. } => exprs(init, index, inner, f),
            StmtKind::Assign { lhs, rhs, .. } => {
                position_drives(lhs, index, inner, f);
                for ix in &lhs.indices {
                    exprs(&ix.expr, index, inner, f);
                }
                exprs(rhs, index, inner, f);
            }
            StmtKind::Loop {
                index: i,
                extent,
                body,
                ..
            } => {
                if let Extent::Range(a, b) = extent {
                    exprs(a, index, inner, f);
                    exprs(b, index, inner, f);
                }
                inner.push(i.clone());
                drives(body, index, inner, f);
                inner.pop();
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                exprs(cond, index, inner, f);
                drives(then, index, inner, f);
                drives(otherwise, index, inner, f);
            }
            StmtKind::Let { value, body, .. } => {
                exprs(value, index, inner, f);
                drives(body, index, inner, f);
            }
            StmtKind::Block(b) => drives(b, index, inner, f),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

fn position_drives(a: &Access, index: &str, inner: &[String], f: &mut dyn FnMut(&Access, usize)) {
    for (k, ix) in a.indices.iter().enumerate() {
        let names = top_names(&ix.expr);
        if names.contains(&index) && !names.iter().any(|n| inner.iter().any(|i| i == n)) {
            f(a, k);
        }
    }
}

/// A product's factors: `a * (b * c)` gives `a`, `b`, `c`.
pub fn factors(e: &Expr) -> Vec<&Expr> {
    match &e.kind {
        ExprKind::Binary(BinaryOp::Mul, x, y) => {
            let mut v = factors(x);
            v.extend(factors(y));
            v
        }
        _ => vec![e],
    }
}

/// Whether `e` is a call of `d`.
pub fn is_measure(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Call(f, _) if f == Builtin::D.name())
}

impl Walker<'_, '_> {
    fn binder(&self, name: &str) -> Option<(usize, &Binder)> {
        self.scope
            .iter()
            .enumerate()
            .rev()
            .find(|(_, b)| b.name == name)
    }

    /// The kind of a loop index in scope (`None`: not a loop index).
    fn loop_kind(&self, name: &str) -> Option<IndexKind> {
        match self.binder(name)?.1.kind {
            BinderKind::Loop { kind, .. } => Some(kind),
            BinderKind::Let { .. } => None,
        }
    }

    /// The real index `name` stands for: itself if it is a real loop index, or the real index
    /// a `let` value depends on.
    fn real_dep(&self, name: &str) -> Option<String> {
        match &self.binder(name)?.1.kind {
            BinderKind::Loop {
                kind: IndexKind::Real,
                ..
            } => Some(name.to_string()),
            BinderKind::Loop { .. } => None,
            BinderKind::Let { real_dep, .. } => real_dep.clone(),
        }
    }

    /// The first real index `e` depends on (outside nested accesses, whose values are
    /// piecewise constant).
    fn real_in(&self, e: &Expr) -> Option<String> {
        top_names(e).into_iter().find_map(|n| self.real_dep(n))
    }

    /// The class of `e` where it can be told (as `transforms::check` types it).
    fn class(&self, e: &Expr) -> Option<Class> {
        match &e.kind {
            ExprKind::Literal(v) => Some(v.widen().ty().class()),
            ExprKind::Missing => None,
            ExprKind::Name(n) => match self.binder(n) {
                Some((_, b)) => match &b.kind {
                    BinderKind::Loop {
                        kind: IndexKind::Real,
                        ..
                    } => Some(Class::Float),
                    BinderKind::Loop { .. } => Some(Class::Int),
                    BinderKind::Let { class, .. } => *class,
                },
                None => (self.dims.class_of)(n),
            },
            ExprKind::Access(a) => (self.dims.class_of)(&a.tensor),
            ExprKind::Unary(op, x) => self
                .class(x)
                .and_then(|c| semantics::unary_class(*op, c).ok())
                .map(|(_, r)| r),
            ExprKind::Binary(op, x, y) => self
                .class(x)
                .zip(self.class(y))
                .and_then(|(a, b)| semantics::binary_classes(*op, a, b).ok())
                .map(|(_, r)| r),
            ExprKind::Call(f, _) if f == Builtin::Size.name() => Some(Class::Int),
            ExprKind::Call(f, _) if f == Builtin::Sample.name() => Some(Class::Float),
            ExprKind::Call(f, args) => {
                let f = Builtin::from_name(f)?;
                let cs = args
                    .iter()
                    .map(|a| self.class(a))
                    .collect::<Option<Vec<_>>>();
                match (f, cs) {
                    (Builtin::Coalesce, _) => args.iter().find_map(|a| self.class(a)),
                    (_, Some(cs)) => f.classes(&cs).ok().map(|(_, r)| r),
                    _ => None,
                }
            }
        }
    }

    /// The innermost loop index `e` names (outside nested accesses), with its binder depth.
    fn driver(&self, e: &Expr) -> Option<(usize, String)> {
        top_names(e)
            .into_iter()
            .filter_map(|n| match self.binder(n) {
                Some((depth, b)) if matches!(b.kind, BinderKind::Loop { .. }) => {
                    Some((depth, n.to_string()))
                }
                _ => None,
            })
            .max_by_key(|(d, _)| *d)
    }

    fn stmts(&mut self, body: &[Stmt]) -> Result<(), RealError> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), RealError> {
        match &s.kind {
            StmtKind::Declare { init, .. } => self.expr(init),
            StmtKind::Assign { lhs, op, rhs } => {
                self.access(lhs)?;
                self.expr_allowing(rhs, op, lhs)
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                let (kind, explicit) = match extent {
                    Extent::Range(a, b) => {
                        self.expr(a)?;
                        self.expr(b)?;
                        let float = |e: &Expr| self.class(e) == Some(Class::Float);
                        let real = float(a) || float(b);
                        (
                            if real {
                                IndexKind::Real
                            } else {
                                IndexKind::Integer
                            },
                            true,
                        )
                    }
                    Extent::Auto => {
                        let (kind, first) = self.auto_kind(index, body);
                        if let Some(f) = first {
                            self.real_use.insert((s.span.line, s.span.col), f);
                        }
                        (kind, false)
                    }
                };
                self.out.loops.push(LoopClass {
                    index: index.clone(),
                    span: s.span,
                    kind,
                });
                self.scoped(
                    Binder {
                        name: index.clone(),
                        span: s.span,
                        kind: BinderKind::Loop { kind, explicit },
                    },
                    body,
                )
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond)?;
                self.stmts(then)?;
                self.stmts(otherwise)
            }
            StmtKind::Let { name, value, body } => {
                self.expr(value)?;
                let binder = Binder {
                    name: name.clone(),
                    span: s.span,
                    kind: BinderKind::Let {
                        class: self.class(value),
                        real_dep: self.real_in(value),
                    },
                };
                self.scoped(binder, body)
            }
            StmtKind::Block(b) => self.stmts(b),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => Ok(()),
        }
    }

    fn scoped(&mut self, b: Binder, body: &[Stmt]) -> Result<(), RealError> {
        self.scope.push(b);
        let r = self.stmts(body);
        self.scope.pop();
        r
    }

    /// The kind of `for index = _`: real when some position it drives in `body` is of a real
    /// dimension, with a description of the first such position. Conflicting uses are
    /// reported where the walk meets them.
    fn auto_kind(&self, index: &str, body: &[Stmt]) -> (IndexKind, Option<String>) {
        let mut first = None;
        let mut inner = vec![];
        drives(body, index, &mut inner, &mut |a: &Access, k: usize| {
            let d = a.dim_of(k);
            if first.is_none() && (self.dims.is_real)(&a.tensor, d) {
                first = Some(format!("dimension {d} of `{}` at {}", a.tensor, a.span));
            }
        });
        match first {
            Some(_) => (IndexKind::Real, first),
            None => (IndexKind::Integer, None),
        }
    }

    /// Check an expression that may not hold `d` (anything but a `+=`'s right-hand side).
    fn expr(&mut self, e: &Expr) -> Result<(), RealError> {
        self.expr_inner(e, &[])
    }

    /// The right-hand side of `lhs op= rhs`: `d(...)` may be a top-level factor of a `+=` or
    /// `-=`.
    fn expr_allowing(&mut self, rhs: &Expr, op: &AssignOp, lhs: &Access) -> Result<(), RealError> {
        let allowed: Vec<&Expr> = match op {
            AssignOp::Reduce(Reducer::Add | Reducer::Sub) => {
                factors(rhs).into_iter().filter(|f| is_measure(f)).collect()
            }
            _ => vec![],
        };
        if self.full {
            let mut seen: Vec<&str> = vec![];
            for m in &allowed {
                let ExprKind::Call(_, args) = &m.kind else {
                    continue;
                };
                for a in args {
                    let ExprKind::Name(n) = &a.kind else {
                        return Err(RealError::NotARealLoop {
                            span: a.span,
                            arg: a.to_string(),
                        });
                    };
                    if self.loop_kind(n) != Some(IndexKind::Real) {
                        return Err(RealError::NotARealLoop {
                            span: a.span,
                            arg: n.clone(),
                        });
                    }
                    if seen.contains(&n.as_str()) {
                        return Err(RealError::MeasureRepeated {
                            span: m.span,
                            index: n.clone(),
                        });
                    }
                    seen.push(n);
                    if lhs
                        .indices
                        .iter()
                        .any(|ix| top_names(&ix.expr).contains(&n.as_str()))
                    {
                        return Err(RealError::MeasureOfWrittenIndex {
                            span: m.span,
                            index: n.clone(),
                            tensor: lhs.tensor.clone(),
                        });
                    }
                }
            }
        }
        self.expr_inner(rhs, &allowed)
    }

    fn expr_inner(&mut self, e: &Expr, allowed: &[&Expr]) -> Result<(), RealError> {
        let mut result = Ok(());
        let full = self.full;
        crate::notation::visit::expr(e, &mut |x: &Expr| {
            if result.is_err() {
                return;
            }
            if full && is_measure(x) && !allowed.iter().any(|a| std::ptr::eq(*a, x)) {
                result = Err(self.misplaced(x));
            }
            if let ExprKind::Access(a) = &x.kind {
                result = self.access(a);
            }
        });
        result
    }

    /// The error for a misplaced `d(...)`: "not a real loop" when its first argument is not
    /// one, else "must be a factor".
    fn misplaced(&self, d: &Expr) -> RealError {
        let ExprKind::Call(_, args) = &d.kind else {
            unreachable!("is_measure matched a call");
        };
        match args.first().map(|a| &a.kind) {
            Some(ExprKind::Name(n)) if self.loop_kind(n) == Some(IndexKind::Real) => {
                RealError::MeasureMisplaced {
                    span: d.span,
                    index: n.clone(),
                }
            }
            Some(_) => RealError::NotARealLoop {
                span: args[0].span,
                arg: args[0].to_string(),
            },
            None => RealError::MeasureMisplaced {
                span: d.span,
                index: String::new(),
            },
        }
    }

    /// The rules of one access's positions (its nested accesses are visited by the caller).
    fn access(&mut self, a: &Access) -> Result<(), RealError> {
        for (k, ix) in a.indices.iter().enumerate() {
            let d = a.dim_of(k);
            if let Some((lo, hi)) = &ix.window {
                for b in [lo, hi] {
                    if let Some(r) = self.real_in(b) {
                        return Err(RealError::RealInIntegerPlace {
                            span: b.span,
                            index: r,
                            place: format!("a window bound of `{}`", a.tensor),
                        });
                    }
                }
            }
            let real_dim = (self.dims.is_real)(&a.tensor, d);
            if let Some((_, drv)) = self.driver(&ix.expr) {
                self.driven(a, d, &drv, real_dim)?;
            }
            if !real_dim {
                if let Some(r) = self.real_in(&ix.expr) {
                    return Err(RealError::RealInIntegerPlace {
                        span: a.span,
                        index: r,
                        place: format!(
                            "position {k} (`{}`) of `{a}`, an integer dimension",
                            ix.expr
                        ),
                    });
                }
            } else if self.full {
                self.invertible(a, &ix.expr)?;
            }
        }
        Ok(())
    }

    /// `index` drives dimension `d` of `a`, real or not.
    fn driven(
        &mut self,
        a: &Access,
        d: usize,
        index: &str,
        real_dim: bool,
    ) -> Result<(), RealError> {
        let Some((_, b)) = self.binder(index) else {
            return Ok(());
        };
        let BinderKind::Loop { kind, explicit } = b.kind else {
            return Ok(());
        };
        let loop_span = b.span;
        let is_real = kind == IndexKind::Real;
        if is_real == real_dim {
            return Ok(());
        }
        let (span, index, tensor) = (a.span, index.to_string(), a.tensor.clone());
        Err(if !explicit {
            // A `_` loop is integer only when it drives no real dimension.
            let first = self
                .real_use
                .get(&(loop_span.line, loop_span.col))
                .cloned()
                .unwrap_or_default();
            RealError::MixedDimensions {
                span,
                index,
                tensor,
                dim: d,
                first: format!("the real {first}"),
            }
        } else if is_real {
            RealError::RealLoopOnIntegerDimension {
                span,
                index,
                tensor,
                dim: d,
                loop_span,
            }
        } else {
            RealError::IntegerLoopOnRealDimension {
                span,
                index,
                tensor,
                dim: d,
                loop_span,
            }
        })
    }

    /// A position of a real dimension naming real indices is affine in them with nonzero
    /// coefficients.
    fn invertible(&self, a: &Access, e: &Expr) -> Result<(), RealError> {
        let is_real = |n: &str| self.loop_kind(n) == Some(IndexKind::Real);
        let named: Vec<&str> = top_names(e).into_iter().filter(|n| is_real(n)).collect();
        let Some(first) = named.first() else {
            return Ok(());
        };
        let refuse = |index: &str| RealError::NotInvertible {
            span: a.span,
            tensor: a.tensor.clone(),
            expr: e.to_string(),
            index: index.to_string(),
        };
        let form = linear(e, &is_real).map_err(|r| refuse(r.as_deref().unwrap_or(first)))?;
        for n in &named {
            match form.coefs.get(*n) {
                Some(Some(c)) if *c == 0.0 || !c.is_finite() => return Err(refuse(n)),
                Some(_) => {}
                None => return Err(refuse(n)),
            }
        }
        Ok(())
    }
}

/// The static form of an index expression affine in the real indices: their coefficients
/// (`None` when not a literal, such as an integer index) and, when the expression names no real
/// index and folds from literals, its value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Linear {
    pub coefs: BTreeMap<String, Option<f64>>,
    pub value: Option<f64>,
}

/// `e` as an affine form in the names `is_real` accepts, or the real index that makes it not
/// affine (`None` when no single one is to blame).
pub fn linear(e: &Expr, is_real: &dyn Fn(&str) -> bool) -> Result<Linear, Option<String>> {
    let scale = |l: Linear, c: Option<f64>| Linear {
        coefs: l
            .coefs
            .into_iter()
            .map(|(n, k)| (n, k.zip(c).map(|(k, c)| k * c)))
            .collect(),
        value: l.value.zip(c).map(|(v, c)| v * c),
    };
    let culprit = |e: &Expr| {
        top_names(e)
            .into_iter()
            .find(|n| is_real(n))
            .map(str::to_string)
    };
    Ok(match &e.kind {
        ExprKind::Literal(v) => Linear {
            coefs: BTreeMap::new(),
            value: match v.widen() {
                Scalar::F64(f) => Some(f),
                Scalar::I64(i) => Some(i as f64),
                _ => None,
            },
        },
        ExprKind::Name(n) if is_real(n) => Linear {
            coefs: BTreeMap::from([(n.clone(), Some(1.0))]),
            value: None,
        },
        ExprKind::Unary(UnaryOp::Neg, x) => scale(linear(x, is_real)?, Some(-1.0)),
        ExprKind::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), x, y) => {
            let (a, b) = (linear(x, is_real)?, linear(y, is_real)?);
            let sign = if *op == BinaryOp::Sub { -1.0 } else { 1.0 };
            let mut coefs = a.coefs;
            for (n, k) in b.coefs {
                let k = k.map(|k| k * sign);
                let sum = match coefs.remove(&n) {
                    None => k,
                    Some(j) => j.zip(k).map(|(j, k)| j + k),
                };
                coefs.insert(n, sum);
            }
            Linear {
                coefs,
                value: a.value.zip(b.value).map(|(p, q)| p + sign * q),
            }
        }
        ExprKind::Binary(BinaryOp::Mul, x, y) => {
            let (a, b) = (linear(x, is_real)?, linear(y, is_real)?);
            match (a.coefs.is_empty(), b.coefs.is_empty()) {
                (true, _) => scale(b, a.value),
                (_, true) => scale(a, b.value),
                _ => return Err(culprit(e)),
            }
        }
        ExprKind::Binary(BinaryOp::Div, x, y) => {
            let (a, b) = (linear(x, is_real)?, linear(y, is_real)?);
            if !b.coefs.is_empty() || (!a.coefs.is_empty() && b.value == Some(0.0)) {
                return Err(culprit(e));
            }
            scale(a, b.value.map(|v| 1.0 / v))
        }
        _ => match culprit(e) {
            Some(r) => return Err(Some(r)),
            None => Linear::default(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    /// Tensors: `A`, `B` real vectors, `M` real matrix, `I` an integer vector, `P[x, i]` real
    /// then integer, `s` a float scalar, `n` an integer scalar.
    fn run(text: &str) -> Result<RealLoops, String> {
        let is_real = |t: &str, d: usize| match t {
            "A" | "B" | "M" | "Z" => true,
            "P" => d == 0,
            _ => false,
        };
        let class_of = |t: &str| match t {
            "n" | "I" => Some(Class::Int),
            _ => Some(Class::Float),
        };
        let dims = RealDims {
            is_real: &is_real,
            class_of: &class_of,
        };
        let p = parse_program(text).map_err(|e| e.to_string())?;
        check_real(&p, &dims).map_err(|e| Error::from(e).to_string())
    }

    fn kinds(text: &str) -> Vec<(String, IndexKind)> {
        run(text)
            .unwrap()
            .loops
            .into_iter()
            .map(|l| (l.index, l.kind))
            .collect()
    }

    use IndexKind::{Integer as I, Real as R};

    #[test]
    fn loops_are_real_by_their_bounds_or_their_dimensions() {
        assert_eq!(
            kinds("for x = 0.5:9.0\n  s[] += A[x]\nend\n"),
            [("x".into(), R)]
        );
        assert_eq!(
            kinds("for x = 0:2.5\n  s[] += A[x]\nend\n"),
            [("x".into(), R)]
        );
        assert_eq!(
            kinds("for x = -Inf:Inf\n  s[] += A[x]\nend\n"),
            [("x".into(), R)]
        );
        assert_eq!(
            kinds("for x = _\n  for i = _\n    s[] += P[x, i] * I[i]\n  end\nend\n"),
            [("x".into(), R), ("i".into(), I)]
        );
        // An outer integer index is an offset of a real position; the inner real one drives.
        assert_eq!(
            kinds("for i = 0:3\n  for x = _\n    s[] += A[x + i]\n  end\nend\n"),
            [("i".into(), I), ("x".into(), R)]
        );
        // The affine pinpoint sum of seed item 17 infers a real loop.
        assert_eq!(
            kinds("for i = _\n  s[] += A[2 * i + 10]\nend\n"),
            [("i".into(), R)]
        );
        let rl = run("for x = _\n  s[] += A[x]\nend\n").unwrap();
        assert_eq!(rl.kind_at(Span::new(1, 1)), Some(R));
        assert_eq!(rl.kind_at(Span::new(2, 1)), None);
        assert!(rl.any_real());
        assert_eq!(
            real_extent(Span::default()).to_string(),
            Extent::Range(
                Expr::lit(Scalar::F64(f64::NEG_INFINITY)),
                Expr::lit(Scalar::F64(f64::INFINITY))
            )
            .to_string()
        );
    }

    #[test]
    fn an_index_is_either_real_or_integer() {
        assert_eq!(
            run("for x = _\n  s[] += A[x] * I[x]\nend\n").unwrap_err(),
            "2:17: dimension mismatch: index `x` drives dimension 0 of `I` here but also the \
             real dimension 0 of `A` at 2:10; an index is either real or integer"
        );
        assert_eq!(
            run("for x = 0.0:4.0\n  s[] += I[x]\nend\n").unwrap_err(),
            "2:10: dimension mismatch: the loop over `x` at 1:1 has float bounds (a real loop) \
             but `x` indexes dimension 0 of `I`, an integer dimension"
        );
        assert_eq!(
            run("for i = 0:4\n  s[] += A[i]\nend\n").unwrap_err(),
            "2:10: dimension mismatch: the loop over `i` at 1:1 has integer bounds but `i` \
             indexes dimension 0 of `A`, a real dimension (give the loop float bounds, \
             `0.0:9.0`, or `_`)"
        );
    }

    #[test]
    fn real_indices_stay_out_of_integer_places() {
        assert_eq!(
            run("for x = _\n  for i = _\n    s[] += A[x] * I[i + x]\n  end\nend\n").unwrap_err(),
            "3:19: the real index `x` is used in position 0 (`i + x`) of `I[i + x]`, an integer \
             dimension, which takes integers"
        );
        assert_eq!(
            run("for x = _\n  let k = x + 1\n    s[] += A[x] * I[k]\n  end\nend\n").unwrap_err(),
            "3:19: the real index `x` is used in position 0 (`k`) of `I[k]`, an integer \
             dimension, which takes integers"
        );
        assert_eq!(
            run("for x = _\n  for i = _\n    s[] += A[x] * I[(0:x)(i)]\n  end\nend\n").unwrap_err(),
            "3:24: the real index `x` is used in a window bound of `I`, which takes integers"
        );
        // As a plain value it is left to the lowering and the evaluator.
        assert!(run("for x = _\n  if x > 2\n    Z[x] += A[x] * x\n  end\nend\n").is_ok());
    }

    #[test]
    fn real_positions_are_affine_and_invertible() {
        let ok = [
            "for x = _\n  s[] += A[x]\nend\n",
            "for x = _\n  s[] += A[x + 1.5]\nend\n",
            "for x = _\n  s[] += A[3 - x]\nend\n",
            "for x = _\n  s[] += A[2 * x + s]\nend\n",
            "for x = _\n  s[] += A[x / 4]\nend\n",
            "for y = _\n  for x = _\n    s[] += A[x + y] * B[y]\n  end\nend\n",
            "for i = 0:3\n  for x = _\n    s[] += A[i * x + 1]\n  end\nend\n",
            "for x = _\n  let c = 2.0\n    s[] += A[x - c]\n  end\nend\n",
        ];
        for t in ok {
            assert!(run(t).is_ok(), "{t}: {:?}", run(t));
        }
        for (t, msg) in [
            (
                "for x = _\n  s[] += A[x * x]\nend\n",
                "2:10: index `x * x` of `A` is not invertible in the real index `x`",
            ),
            (
                "for x = _\n  s[] += A[sin(x)]\nend\n",
                "2:10: index `sin(x)` of `A` is not invertible in the real index `x`",
            ),
            (
                "for y = _\n  for x = _\n    s[] += M[x * y, x] * B[y]\n  end\nend\n",
                "3:12: index `x * y` of `M` is not invertible in the real index `x`",
            ),
            (
                "for x = _\n  s[] += A[0 * x]\nend\n",
                "2:10: index `0 * x` of `A` is not invertible in the real index `x`",
            ),
            (
                "for x = _\n  s[] += A[x - x + 1] * B[x]\nend\n",
                "2:10: index `x - x + 1` of `A` is not invertible in the real index `x`",
            ),
            (
                "for x = _\n  s[] += A[1 / x]\nend\n",
                "2:10: index `1 / x` of `A` is not invertible in the real index `x`",
            ),
        ] {
            let got = run(t).unwrap_err();
            assert!(got.starts_with(msg), "{t}: {got}");
        }
    }

    #[test]
    fn measures_are_factors_of_a_sum_inside_their_real_loops() {
        let ok = [
            "for x = _\n  s[] += A[x] * d(x)\nend\n",
            "for x = _\n  s[] -= d(x) * (A[x] + B[x])\nend\n",
            "for x = _\n  for y = _\n    s[] += M[y, x] * d(x, y)\n  end\nend\n",
            "for x = _\n  for y = _\n    s[] += M[y, x] * d(x) * d(y)\n  end\nend\n",
            "for i = 0:3\n  for x = _\n    Z[x] += P[x, i]\n    n[] += I[i]\n    s[] += A[x] * d(x)\n  end\nend\n",
        ];
        for t in ok {
            assert!(run(t).is_ok(), "{t}: {:?}", run(t));
        }
        for (t, msg) in [
            (
                "for x = _\n  s[] += A[x] * d(x) + 1\nend\n",
                "2:17: `d(x)` must be a factor of the right-hand side of `+=` inside `for x`",
            ),
            (
                "for x = _\n  s[] <<max>>= A[x] * d(x)\nend\n",
                "2:23: `d(x)` must be a factor of the right-hand side of `+=` inside `for x`",
            ),
            (
                "for x = _\n  if d(x) > 0\n    s[] += A[x]\n  end\nend\n",
                "2:6: `d(x)` must be a factor of the right-hand side of `+=` inside `for x`",
            ),
            (
                "for i = 0:3\n  n[] += I[i] * d(i)\nend\n",
                "2:19: `i` is not a real loop",
            ),
            (
                "for x = _\n  s[] += A[x] * d(y)\nend\n",
                "2:19: `y` is not a real loop",
            ),
            (
                "for x = _\n  s[] += A[x] * d(2)\nend\n",
                "2:19: `2` is not a real loop",
            ),
            (
                "for x = _\n  s[] += A[x] * d(x, x)\nend\n",
                "2:17: `d` measures `x` twice in one statement",
            ),
            (
                "for x = _\n  Z[x] += A[x] * d(x)\nend\n",
                "2:18: `d(x)` in a statement whose left-hand side `Z[...]` is indexed by `x`",
            ),
        ] {
            let got = run(t).unwrap_err();
            assert!(got.starts_with(msg), "{t}: {got}");
        }
        // `classify` alone leaves measures and invertibility alone.
        let p = parse_program("for x = _\n  s[] += A[x * x] * d(x) + 1\nend\n").unwrap();
        let (r, c) = (|_: &str, _: usize| true, |_: &str| Some(Class::Float));
        let dims = RealDims {
            is_real: &r,
            class_of: &c,
        };
        assert!(classify(&p, &dims).is_ok());
        assert!(check_real(&p, &dims).is_err());
    }

    #[test]
    fn the_printer_round_trips_measures() {
        let text = "for x = -Inf:Inf\n  for y = _\n    s[] += M[y, x] * d(x, y)\n  end\nend\n";
        let p = parse_program(text).unwrap();
        assert_eq!(parse_program(&p.to_string()).unwrap(), p);
        assert!(p.to_string().contains("d(x, y)"), "{p}");
    }
}
