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

impl Display for Access {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.tensor)?;
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

fn write_stmt(f: &mut Formatter<'_>, s: &Stmt, level: usize) -> fmt::Result {
    indent(f, level)?;
    match &s.kind {
        StmtKind::Declare { tensor, init } => write!(f, "{tensor} .= {init}"),
        StmtKind::Assign { lhs, op, rhs } => write!(f, "{lhs} {op} {rhs}"),
        StmtKind::Loop {
            index,
            extent,
            body,
        } => {
            // Perfectly nested loops print as one header, as they are usually written.
            write!(f, "for {index} = {extent}")?;
            let mut body = body;
            while let [
                Stmt {
                    kind:
                        StmtKind::Loop {
                            index,
                            extent,
                            body: inner,
                        },
                    ..
                },
            ] = body.as_slice()
            {
                write!(f, ", {index} = {extent}")?;
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
    match ix.protocol {
        Some(p) => write!(f, "{}({})", p.name(), ix.expr),
        // `~` covers the whole index; parentheses make that visible for `~(i - 1)`.
        None if ix.permissive => write_expr(f, &ix.expr, UNARY_PREC),
        None => write!(f, "{}", ix.expr),
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
            write!(f, "{name}(")?;
            for (k, a) in args.iter().enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                write_expr(f, a, 0)?;
            }
            f.write_char(')')
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
