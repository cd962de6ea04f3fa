//! The end of a real loop (the continuous tensor abstraction, §4.3–4.4): once the looplets of
//! the real-valued levels have cut the loop into pieces over which nothing depends on the
//! index, a piece is *collapsed* instead of iterated (a real piece of positive length has
//! uncountably many points):
//! - `+=` / `-=` with a factor `d(x)` integrate: `d(x)` becomes the piece's length (0 on a
//!   pinpoint), so `s += v * d(x)` adds `v * (stop - start)`;
//! - `+=` / `-=` without `d(x)` count pinpoints: only a piece that is one real point adds
//!   (a positive-length piece adds nothing, as in Finch's implementation, rather than ∞);
//! - every other reducer and `=` apply once, on any piece that holds a real number;
//! - on a pinpoint piece the index is a value (`let x = start`): conditions and values may
//!   use it there (the radius test of a point search); on a piece that may have positive
//!   length a use of the index as a value is refused.

use super::engine::Engine;
use crate::error::{Error, Result};
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::node::{self, LExpr, LStmt};
use crate::looplets::{Ext, Lowerer};
use crate::notation::ast::{AssignOp, BinaryOp, Reducer};
use crate::semantics::Builtin;
use crate::span::Span;
use crate::symbolic;
use crate::types::{ElemType, Scalar};

/// Lower the rest of the real loop over `index` on `ext`, where no looplet is left.
pub fn lower_plain(
    engine: &mut Engine,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    if ext.is_point() {
        // A pinpoint: integrals over it are 0, and the index is a value.
        replace_measure(&mut body, index, &LExpr::Lit(Scalar::F64(0.0)));
        substitute(&mut body, index, &ext.start);
        return engine.lower_block(body);
    }
    let mut code = vec![];
    for s in body {
        code.extend(collapse(engine, index, &ext, s)?);
    }
    Ok(code)
}

/// One statement over a piece of unknown length.
fn collapse(engine: &mut Engine, index: &str, ext: &Ext, mut s: LStmt) -> Result<Vec<Stmt>> {
    let span = stmt_span(&s);
    let mut kinds = vec![];
    assignments(&s, index, &mut kinds);
    let integral = kinds.contains(&Collapse::Integral);
    let counting = kinds.contains(&Collapse::Counting);
    if integral && counting {
        return Err(Error::unsupported(
            span,
            format!(
                "sums with and without `d({index})` under one statement of the real loop `{index}`: write them in separate statements"
            ),
        ));
    }
    let length = b::sub(
        b::limit_val(ext.stop.clone()),
        b::limit_val(ext.start.clone()),
    );
    replace_measure(
        std::slice::from_mut(&mut s),
        index,
        &LExpr::Ir(length, ElemType::F64),
    );
    if node::stmts_use_index(std::slice::from_mut(&mut s), index) {
        return Err(Error::program(
            span,
            format!(
                "the real index `{index}` is used as a value on a piece that may have positive length (only pinpoints of a real loop can be visited one by one; drive the loop by a pinpoint tensor, or use `{index}` only in accesses)"
            ),
        ));
    }
    let code = engine.lower_block(vec![s])?;
    if counting {
        return Ok(guard(is_pinpoint(ext), code));
    }
    // A piece holds a real number exactly when it is not empty (see `is_pinpoint`); the
    // facts drop the test where the enclosing phase already made it (the paper's bound
    // analysis, Fig. 18).
    Ok(engine.if_nonempty(ext, code))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Collapse {
    /// `+=` / `-=` with `d(index)`.
    Integral,
    /// `+=` / `-=` without it.
    Counting,
    /// Anything applied once per piece.
    Once,
}

fn assignments(s: &LStmt, index: &str, out: &mut Vec<Collapse>) {
    match s {
        LStmt::Assign { op, rhs, .. } => out.push(match op {
            AssignOp::Reduce(Reducer::Add | Reducer::Sub) if mentions_measure(rhs, index) => {
                Collapse::Integral
            }
            AssignOp::Reduce(Reducer::Add | Reducer::Sub) => Collapse::Counting,
            AssignOp::Reduce(r) if symbolic::algebra::is_idempotent(r) => Collapse::Once,
            AssignOp::Overwrite => Collapse::Once,
            // `*=` and non-idempotent user reducers repeat per point: counted like a sum.
            AssignOp::Reduce(_) => Collapse::Counting,
        }),
        LStmt::Loop { body, .. } | LStmt::Let { body, .. } => {
            body.iter().for_each(|s| assignments(s, index, out))
        }
        LStmt::If {
            then, otherwise, ..
        } => then
            .iter()
            .chain(otherwise)
            .for_each(|s| assignments(s, index, out)),
        LStmt::Declare { .. } | LStmt::Freeze { .. } | LStmt::Thaw { .. } => {}
    }
}

fn mentions_measure(e: &LExpr, index: &str) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if let LExpr::Call(Builtin::D, args, _) = x
            && args
                .iter()
                .any(|a| matches!(a, LExpr::Index(n) if n == index))
        {
            found = true;
        }
    });
    found
}

fn visit(e: &LExpr, f: &mut dyn FnMut(&LExpr)) {
    f(e);
    match e {
        LExpr::Unary(_, a, _) => visit(a, f),
        LExpr::Binary(_, a, z, _) => {
            visit(a, f);
            visit(z, f);
        }
        LExpr::Call(_, args, _) => args.iter().for_each(|a| visit(a, f)),
        _ => {}
    }
}

/// `d(..., index, ...)` becomes `measure * d(...)` (and `d()` is 1), everywhere in `stmts`.
fn replace_measure(stmts: &mut [LStmt], index: &str, measure: &LExpr) {
    let _ = node::visit_exprs_mut(stmts, &mut |e| {
        if let LExpr::Call(Builtin::D, args, span) = e
            && let Some(k) = args
                .iter()
                .position(|a| matches!(a, LExpr::Index(n) if n == index))
        {
            let span = *span;
            let mut rest = std::mem::take(args);
            rest.remove(k);
            let others = match rest.is_empty() {
                true => LExpr::Lit(Scalar::F64(1.0)),
                false => LExpr::Call(Builtin::D, rest, span),
            };
            *e = LExpr::Binary(
                BinaryOp::Mul,
                Box::new(measure.clone()),
                Box::new(others),
                span,
            );
        }
        Ok(())
    });
}

/// The index as a value at the point `p`: its real value (ε dropped).
fn substitute(stmts: &mut [LStmt], index: &str, p: &Expr) {
    let _ = node::visit_exprs_mut(stmts, &mut |e| {
        if matches!(e, LExpr::Index(n) if n == index) {
            *e = LExpr::Ir(b::limit_val(p.clone()), ElemType::F64);
        }
        Ok(())
    });
}

/// `[start, stop]` is the one real point `start`. Extents of real loops keep the normal form
/// of stored pieces (`levels::real::normal`): a start is a value or just after one, a stop a
/// value or just before one (loop bounds are values; the point after a stop, the point
/// before a start, and min/max keep this). So `start == stop` is a value without an
/// infinitesimal, and `start <= stop` holds a real number.
fn is_pinpoint(ext: &Ext) -> Expr {
    b::eq(ext.start.clone(), ext.stop.clone())
}

fn guard(cond: Expr, code: Vec<Stmt>) -> Vec<Stmt> {
    match code.is_empty() {
        true => code,
        false => b::if_(cond, code),
    }
}

fn stmt_span(s: &LStmt) -> Span {
    match s {
        LStmt::Assign { span, .. }
        | LStmt::Loop { span, .. }
        | LStmt::If { span, .. }
        | LStmt::Let { span, .. } => *span,
        _ => Span::default(),
    }
}
