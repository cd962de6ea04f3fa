//! Context for errors a kernel raises while writing a tensor. A level only knows that a
//! coordinate came out of order; the program knows which write it was and inside which loops,
//! so the message gains the access as the user wrote it, its line:column, the enclosing loops,
//! and for order errors what to change.

use crate::error::Error;
use crate::lower::Layout;
use crate::notation::ast::{Access, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind};
use std::collections::HashMap;

/// Formats whose levels all take writes in any order, for the hint.
const RANDOM_WRITES: &str = "Dense, SparseByteMap, SparseDict or SparseCOO";

/// `err` with the writes of the tensor it names described (`program` is the normalised one the
/// kernel was built from); other errors unchanged.
pub fn kernel_error(err: Error, program: &Program, layout: &Layout) -> Error {
    let Error::Kernel { msg } = &err else {
        return err;
    };
    let Some(tensor) = named_tensor(msg) else {
        return err;
    };
    let mut writes = vec![];
    collect_writes(&program.body, tensor, &mut Walk::default(), &mut writes);
    if writes.is_empty() {
        return err;
    }
    let mut text = msg.clone();
    for w in &writes {
        text.push_str(&format!(
            "; `{tensor}` is written as `{}` at {}",
            w.access, w.span
        ));
        if !w.loops.is_empty() {
            let loops: Vec<String> = w
                .loops
                .iter()
                .map(|(i, s)| format!("`{i}` ({s})"))
                .collect();
            text.push_str(&format!(" inside the loops over {}", loops.join(", ")));
        }
    }
    if msg.contains("order") {
        let format = layout
            .tensors
            .iter()
            .find(|t| t.name == tensor)
            .map(|t| format!(" {}", t.format))
            .unwrap_or_default();
        text.push_str(&format!(
            ". Hint: its format{format} takes these writes only in increasing coordinate order"
        ));
        let plain: Vec<&Write> = writes.iter().filter(|w| w.plain_order.is_some()).collect();
        if let Some(w) = plain.first() {
            let order = w.plain_order.as_ref().expect("filtered");
            text.push_str(&format!(
                ": nest the loops in the order of the access's indices (`for {}`), or",
                order
                    .iter()
                    .map(|i| format!("{i} = _"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        } else {
            text.push_str(" (an index computed from data must increase with the loops), so");
        }
        text.push_str(&format!(
            " store `{tensor}` in a format that takes writes in any order ({RANDOM_WRITES})"
        ));
    }
    Error::Kernel { msg: text }
}

/// `tensor `NAME`: ...` → NAME.
fn named_tensor(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("tensor `")?;
    rest.split_once('`').map(|(name, _)| name)
}

struct Write {
    /// The access with the indices concordization moved out put back.
    access: Access,
    span: Span,
    /// The user's loops around the write, outermost first.
    loops: Vec<(String, Span)>,
    /// For an access whose indices are all loop indices: those indices in access order.
    plain_order: Option<Vec<String>>,
}

/// The enclosing loops and `let` values on the way down.
#[derive(Default, Clone)]
struct Walk {
    loops: Vec<(String, Span)>,
    lets: HashMap<String, Expr>,
    /// Loops concordization added (`for _k = _v:_v`), with the expression they stand for.
    moved: HashMap<String, Expr>,
}

fn collect_writes(stmts: &[Stmt], tensor: &str, walk: &mut Walk, out: &mut Vec<Write>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Assign { lhs, .. } if lhs.tensor == tensor => {
                let mut access = lhs.clone();
                let mut plain = vec![];
                for ix in access.indices.iter_mut() {
                    if let ExprKind::Name(n) = &ix.expr.kind
                        && let Some(e) = walk.moved.get(n)
                    {
                        ix.expr = e.clone();
                    }
                    match &ix.expr.kind {
                        ExprKind::Name(n) if walk.loops.iter().any(|(l, _)| l == n) => {
                            plain.push(n.clone())
                        }
                        _ => plain.clear(),
                    }
                }
                let plain_order = (plain.len() == access.indices.len()).then_some(plain);
                out.push(Write {
                    access,
                    span: s.span,
                    loops: walk.loops.clone(),
                    plain_order,
                });
            }
            StmtKind::Loop {
                index,
                extent,
                body,
            } => {
                let mut inner = walk.clone();
                let moved = match extent {
                    Extent::Range(a, _) if index.starts_with("_k") => match &a.kind {
                        ExprKind::Name(v) => walk.lets.get(v).cloned(),
                        _ => None,
                    },
                    _ => None,
                };
                match moved {
                    Some(e) => {
                        inner.moved.insert(index.clone(), e);
                    }
                    None => inner.loops.push((index.clone(), s.span)),
                }
                collect_writes(body, tensor, &mut inner, out);
            }
            StmtKind::Let { name, value, body } => {
                let mut inner = walk.clone();
                inner.lets.insert(name.clone(), value.clone());
                collect_writes(body, tensor, &mut inner, out);
            }
            StmtKind::Block(body) => collect_writes(body, tensor, walk, out),
            StmtKind::If {
                then, otherwise, ..
            } => {
                collect_writes(then, tensor, walk, out);
                collect_writes(otherwise, tensor, walk, out);
            }
            _ => {}
        }
    }
}
