//! The program form the lowering engine rewrites: the notation after normalisation, with every
//! tensor access pointing at a [`Target`] (a fiber, a looplet, a fill value) and expressions
//! that may already contain lowered IR values.

use super::Target;
use crate::ir;
use crate::notation::ast::{AssignOp, BinaryOp, Protocol, Span, UnaryOp};
use crate::types::{ElemType, Scalar};

/// Dimension `dim` of `tensor`, whose extent is the IR value `size`.
#[derive(Clone)]
pub struct Bound {
    pub tensor: String,
    pub dim: usize,
    pub size: ir::Expr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Update,
}

#[derive(Clone)]
pub struct LAccess {
    pub tensor: String,
    pub target: Target,
    /// Indices not yet consumed by a loop, outermost first.
    pub indices: Vec<String>,
    pub protocols: Vec<Option<Protocol>>,
    /// Per index: the access reads coordinate `index + offset` (Finch's offset and toeplitz
    /// wrappers, from `A[i + c]` and `A[i + j]`); the offset only uses loops outside the index.
    pub offsets: Vec<Option<LExpr>>,
    pub mode: Mode,
    pub span: Span,
    /// A mask from an index comparison (`if i <= j`), not a tensor: its target is the
    /// comparison's looplet and `tensor` only a name for messages.
    pub mask: bool,
}

impl LAccess {
    pub fn head(&self) -> Option<&str> {
        self.indices.first().map(|s| s.as_str())
    }
    pub fn head_offset(&self) -> Option<&LExpr> {
        self.offsets.first().and_then(|o| o.as_ref())
    }
    pub fn head_protocol(&self) -> Option<Protocol> {
        self.protocols.first().copied().flatten()
    }
    /// The access has consumed its head index and now points at `target`.
    pub fn advance(&mut self, target: Target) {
        self.target = target;
        self.indices.remove(0);
        self.protocols.remove(0);
        self.offsets.remove(0);
    }
}

#[derive(Clone)]
pub enum LExpr {
    /// A literal, widened to its compute type.
    Lit(Scalar),
    /// An already-lowered value of the given compute type.
    Ir(ir::Expr, ElemType),
    /// A loop index that no loop has bound yet.
    Index(String),
    Access(Box<LAccess>),
    Unary(UnaryOp, Box<LExpr>, Span),
    Binary(BinaryOp, Box<LExpr>, Box<LExpr>, Span),
    Call(crate::semantics::Builtin, Vec<LExpr>, Span),
    /// An index comparison `lo <= index <= hi` (either bound may be absent), `inside` where
    /// it holds and `!inside` elsewhere. When the loop over `index` is lowered it becomes a
    /// mask tensor whose looplets (a sequence of runs) cut the loop at the bounds, so only the
    /// part where the mask is true is iterated (Finch's UpTriMask, DiagMask, band masks).
    Mask(Box<Mask>),
}

#[derive(Clone)]
pub struct Mask {
    /// The compared loop index (an `LExpr::Index` until the loop binds it).
    pub index: LExpr,
    pub lo: Option<LExpr>,
    pub hi: Option<LExpr>,
    pub inside: bool,
    /// The comparison as written, emitted when the mask cannot be lowered as structure.
    pub original: LExpr,
    pub span: Span,
}

#[derive(Clone)]
pub enum LStmt {
    Declare {
        tensor: String,
        init: Scalar,
        span: Span,
    },
    Freeze {
        tensor: String,
    },
    Thaw {
        tensor: String,
        span: Span,
        /// Where the tensor was read before this update, for the error of a format that
        /// cannot reopen.
        read: Option<Span>,
    },
    Assign {
        lhs: LAccess,
        op: AssignOp,
        rhs: LExpr,
        span: Span,
    },
    Loop {
        index: String,
        start: LExpr,
        stop: LExpr,
        body: Vec<LStmt>,
        span: Span,
        /// Dimensions the index addresses directly whose bounds the shape check before the
        /// run does not cover (a range computed from data, like an indirect index's
        /// single-iteration loop): tested once per entry into the loop.
        bounds: Vec<Bound>,
    },
    If {
        cond: LExpr,
        then: Vec<LStmt>,
        otherwise: Vec<LStmt>,
        span: Span,
    },
    Let {
        name: String,
        value: LExpr,
        body: Vec<LStmt>,
        span: Span,
    },
}

impl LExpr {
    pub fn children_mut(&mut self) -> Vec<&mut LExpr> {
        match self {
            LExpr::Unary(_, a, _) => vec![a.as_mut()],
            LExpr::Binary(_, a, b, _) => vec![a.as_mut(), b.as_mut()],
            LExpr::Call(_, args, _) => args.iter_mut().collect(),
            LExpr::Access(a) => a.offsets.iter_mut().flatten().collect(),
            LExpr::Mask(m) => {
                let Mask {
                    index,
                    lo,
                    hi,
                    original,
                    ..
                } = m.as_mut();
                [index, original]
                    .into_iter()
                    .chain(lo.as_mut())
                    .chain(hi.as_mut())
                    .collect()
            }
            _ => vec![],
        }
    }

    /// Whether the expression mentions index `i` (directly or through an access).
    pub fn uses_index(&self, i: &str) -> bool {
        match self {
            LExpr::Index(n) => n == i,
            LExpr::Access(a) => {
                a.indices.iter().any(|n| n == i)
                    || a.offsets.iter().flatten().any(|o| o.uses_index(i))
            }
            LExpr::Mask(m) => m.original.uses_index(i),
            LExpr::Unary(_, a, _) => a.uses_index(i),
            LExpr::Binary(_, a, b, _) => a.uses_index(i) || b.uses_index(i),
            LExpr::Call(_, args, _) => args.iter().any(|a| a.uses_index(i)),
            LExpr::Lit(_) | LExpr::Ir(..) => false,
        }
    }
}

/// Visit every expression (pre-order, including expressions inside accesses' statements).
pub fn visit_exprs_mut(
    stmts: &mut [LStmt],
    f: &mut dyn FnMut(&mut LExpr) -> crate::Result<()>,
) -> crate::Result<()> {
    fn expr(
        e: &mut LExpr,
        f: &mut dyn FnMut(&mut LExpr) -> crate::Result<()>,
    ) -> crate::Result<()> {
        f(e)?;
        for c in e.children_mut() {
            expr(c, f)?;
        }
        Ok(())
    }
    for s in stmts {
        match s {
            LStmt::Assign { lhs, rhs, .. } => {
                for o in lhs.offsets.iter_mut().flatten() {
                    expr(o, f)?;
                }
                expr(rhs, f)?
            }
            LStmt::Loop {
                start, stop, body, ..
            } => {
                expr(start, f)?;
                expr(stop, f)?;
                visit_exprs_mut(body, f)?;
            }
            LStmt::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                expr(cond, f)?;
                visit_exprs_mut(then, f)?;
                visit_exprs_mut(otherwise, f)?;
            }
            LStmt::Let { value, body, .. } => {
                expr(value, f)?;
                visit_exprs_mut(body, f)?;
            }
            LStmt::Declare { .. } | LStmt::Freeze { .. } | LStmt::Thaw { .. } => {}
        }
    }
    Ok(())
}

/// Visit every access, read or update, anywhere in the statements.
pub fn visit_accesses_mut(
    stmts: &mut [LStmt],
    f: &mut dyn FnMut(&mut LAccess) -> crate::Result<()>,
) -> crate::Result<()> {
    fn in_lhs(
        stmts: &mut [LStmt],
        f: &mut dyn FnMut(&mut LAccess) -> crate::Result<()>,
    ) -> crate::Result<()> {
        for s in stmts {
            match s {
                LStmt::Assign { lhs, .. } => f(lhs)?,
                LStmt::Loop { body, .. } | LStmt::Let { body, .. } => in_lhs(body, f)?,
                LStmt::If {
                    then, otherwise, ..
                } => {
                    in_lhs(then, f)?;
                    in_lhs(otherwise, f)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
    in_lhs(stmts, f)?;
    visit_exprs_mut(stmts, &mut |e| {
        if let LExpr::Access(a) = e {
            f(a)?;
        }
        Ok(())
    })
}

/// Replace every occurrence of index `i` by the lowered value `v`.
pub fn substitute_index(stmts: &mut [LStmt], i: &str, v: &ir::Expr) {
    let _ = visit_exprs_mut(stmts, &mut |e| {
        if matches!(e, LExpr::Index(n) if n == i) {
            *e = LExpr::Ir(v.clone(), ElemType::I64);
        }
        Ok(())
    });
}

/// Whether any statement mentions index `i`.
pub fn stmts_use_index(stmts: &mut [LStmt], i: &str) -> bool {
    let mut found = false;
    let _ = visit_exprs_mut(stmts, &mut |e| {
        if matches!(e, LExpr::Index(n) if n == i) {
            found = true;
        }
        Ok(())
    });
    let _ = visit_accesses_mut(stmts, &mut |a| {
        if a.indices.iter().any(|n| n == i) {
            found = true;
        }
        Ok(())
    });
    found
}
