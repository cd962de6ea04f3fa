//! Turning fully lowered expressions into typed IR, with the typing rules of `semantics`.

use super::node::LExpr;
use crate::error::{Error, Result};
use crate::ir::{BinOp, Expr, UnOp, build as b};
use crate::levels::{LeafValue, level_impl};
use crate::looplets::Target;
use crate::notation::ast::{self, BinaryOp, ExprKind, Reducer, ReducerDef, Span, UnaryOp};
use crate::semantics::{self, Builtin, builtin::min_max};
use crate::types::Class;

pub use crate::semantics::class_type;

/// Convert between compute classes.
pub fn convert(e: Expr, from: Class, to: Class) -> Expr {
    if from == to {
        return e;
    }
    if let Expr::Const(s) = &e {
        return Expr::Const(s.cast(class_type(to)));
    }
    b::cast(class_type(to), e)
}

/// An integer-valued index or extent bound.
pub fn emit_index(e: &LExpr, span: Span) -> Result<Expr> {
    let (v, class) = emit_expr(e, span)?;
    match class {
        Class::Float => Err(Error::program(
            span,
            "an index or extent must be an integer, not a float",
        )),
        c => Ok(convert(v, c, Class::Int)),
    }
}

/// A leaf read as one IR value of class `class` (switches not specialised by the engine
/// become selects).
pub fn leaf_expr(lv: LeafValue, class: Class) -> (Expr, Class) {
    match lv {
        LeafValue::Const(s) => (Expr::Const(s.widen()), s.ty().class()),
        LeafValue::Value(v, ty) => (v, ty.class()),
        LeafValue::Switch(c, a, z) => {
            let (a, ca) = leaf_expr(*a, class);
            let (z, cz) = leaf_expr(*z, class);
            (
                b::select(c, convert(a, ca, class), convert(z, cz, class)),
                class,
            )
        }
    }
}

pub fn emit_expr(e: &LExpr, span: Span) -> Result<(Expr, Class)> {
    Ok(match e {
        LExpr::Lit(s) => {
            let w = s.widen();
            (Expr::Const(w), w.ty().class())
        }
        LExpr::Ir(v, ty) => (v.clone(), ty.class()),
        LExpr::Mask(m) => emit_expr(&m.original, span)?,
        LExpr::Index(n) => {
            return Err(Error::program(
                span,
                format!("index `{n}` is used outside a loop that binds it"),
            ));
        }
        LExpr::Access(a) => match &a.target {
            Target::Fill(v) => {
                let w = v.widen();
                (Expr::Const(w), w.ty().class())
            }
            Target::Fiber(f) if a.indices.is_empty() => {
                match level_impl(&f.tensor.format.levels[f.level]).read_leaf(f) {
                    Some(lv) => leaf_expr(lv, f.tensor.elem.class()),
                    None => {
                        return Err(Error::program(
                            a.span,
                            format!(
                                "`{}` is read with fewer indices than it has dimensions",
                                a.tensor
                            ),
                        ));
                    }
                }
            }
            _ => {
                return Err(Error::program(
                    a.span,
                    format!("internal: read of `{}` was not lowered", a.tensor),
                ));
            }
        },
        LExpr::Unary(op, x, sp) => {
            let (v, c) = emit_expr(x, *sp)?;
            let (operand, result) =
                semantics::unary_class(*op, c).map_err(|m| Error::program(*sp, m))?;
            let v = convert(v, c, operand);
            let out = match op {
                UnaryOp::Neg => Expr::Unary(UnOp::Neg, Box::new(v)),
                UnaryOp::Not => Expr::Unary(UnOp::Not, Box::new(v)),
            };
            (out, result)
        }
        LExpr::Binary(op, x, y, sp) => {
            let (a, ca) = emit_expr(x, *sp)?;
            let (bv, cb) = emit_expr(y, *sp)?;
            let (operand, result) =
                semantics::binary_classes(*op, ca, cb).map_err(|m| Error::program(*sp, m))?;
            let a = convert(a, ca, operand);
            let bv = convert(bv, cb, operand);
            let irop = match op {
                BinaryOp::Add => BinOp::Add,
                BinaryOp::Sub => BinOp::Sub,
                BinaryOp::Mul => BinOp::Mul,
                BinaryOp::Div => BinOp::Div,
                BinaryOp::Rem => BinOp::Rem,
                BinaryOp::Eq => BinOp::Eq,
                BinaryOp::Ne => BinOp::Ne,
                BinaryOp::Lt => BinOp::Lt,
                BinaryOp::Le => BinOp::Le,
                BinaryOp::Gt => BinOp::Gt,
                BinaryOp::Ge => BinOp::Ge,
                BinaryOp::AndAnd | BinaryOp::BitAnd => BinOp::And,
                BinaryOp::OrOr | BinaryOp::BitOr => BinOp::Or,
                BinaryOp::Xor => BinOp::Xor,
                BinaryOp::Shl => BinOp::Shl,
                BinaryOp::Shr => BinOp::Shr,
            };
            (Expr::Binary(irop, Box::new(a), Box::new(bv)), result)
        }
        LExpr::Call(f, args, sp) => {
            let mut vals = vec![];
            let mut classes = vec![];
            for a in args {
                let (v, c) = emit_expr(a, *sp)?;
                vals.push(v);
                classes.push(c);
            }
            let (operands, result) = f.classes(&classes).map_err(|m| Error::program(*sp, m))?;
            let v: Vec<Expr> = vals
                .into_iter()
                .zip(classes.iter().zip(operands.iter()))
                .map(|(v, (c, o))| convert(v, *c, *o))
                .collect();
            let out = f.emit(v, &operands).ok_or_else(|| {
                Error::program(*sp, format!("internal: `{}` was not resolved", f.name()))
            })?;
            (out, result)
        }
    })
}

/// `old <op> new` in compute class `class` (operands already converted).
pub fn apply_reducer(r: &Reducer, old: Expr, new: Expr, class: Class) -> Expr {
    match r {
        Reducer::Add => b::bin(BinOp::Add, old, new),
        Reducer::Sub => b::bin(BinOp::Sub, old, new),
        Reducer::Mul => b::bin(BinOp::Mul, old, new),
        Reducer::And => b::bin(BinOp::And, old, new),
        Reducer::Or => b::bin(BinOp::Or, old, new),
        Reducer::Min => min_max(true, old, new, class),
        Reducer::Max => min_max(false, old, new, class),
        Reducer::Choose(z) => {
            let z = Expr::Const(z.cast(class_type(class)));
            b::select(b::eq(old.clone(), z), new, old)
        }
        Reducer::Named(_) => unreachable!("reducer_classes rejects unknown reducers"),
        Reducer::User(def) => {
            // Inline the body with the parameters bound to the two operands; `reducer_classes`
            // typed it with these classes by the same rules, so emission cannot fail.
            let operand = |v: &Expr| LExpr::Ir(v.clone(), class_type(class));
            let body = user_body(def, &def.body, &operand(&old), &operand(&new));
            emit_expr(&body, def.body.span)
                .expect("reducer_classes typed the body")
                .0
        }
    }
}

/// A user reducer's body in engine form, with its parameters replaced by `old` and `new`.
fn user_body(def: &ReducerDef, e: &ast::Expr, old: &LExpr, new: &LExpr) -> LExpr {
    let go = |x: &ast::Expr| user_body(def, x, old, new);
    match &e.kind {
        ExprKind::Name(n) if *n == def.params[0] => old.clone(),
        ExprKind::Name(n) if *n == def.params[1] => new.clone(),
        ExprKind::Unary(op, x) => LExpr::Unary(*op, Box::new(go(x)), e.span),
        ExprKind::Binary(op, x, y) => LExpr::Binary(*op, Box::new(go(x)), Box::new(go(y)), e.span),
        ExprKind::Call(f, args) => match Builtin::from_name(f) {
            Some(f) => LExpr::Call(f, args.iter().map(go).collect(), e.span),
            // `resolve_reducers` admits only built-ins; emitting this fails with its name.
            None => LExpr::Index(format!("{e}")),
        },
        ExprKind::Literal(v) => LExpr::Lit(v.widen()),
        // `resolve_reducers` admits nothing else; an unbound name fails in `emit_expr`.
        _ => LExpr::Index(format!("{e}")),
    }
}
