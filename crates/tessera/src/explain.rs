//! Context for errors a kernel raises while writing a tensor. A level only knows that a
//! coordinate came out of order; the program knows which write it was and inside which loops,
//! so the error gains every write of the tensor as the user wrote it, with its line:column and
//! enclosing loops, and for order errors what to change. All of it is typed data on the
//! [`KernelError`]; nothing here reads a message.

use crate::error::Error;
use crate::ir::cx::{KernelError, KernelErrorKind};
use crate::kernel_error::{OrderHint, WriteSite};
use crate::lower::Layout;
use crate::notation::ast::{Access, ExprKind, Program, Span, Stmt, StmtKind};

/// `err` with the writes of the tensor it names described (`program` is the source program
/// the kernel was compiled from); other errors unchanged.
pub fn kernel_error(err: Error, program: &Program, layout: &Layout) -> Error {
    match err {
        Error::Kernel(e) => Error::Kernel(Box::new(explain(*e, program, layout))),
        other => other,
    }
}

/// Add the writes of a refused write's tensor and, for an order error, the fix.
fn explain(mut e: KernelError, program: &Program, layout: &Layout) -> KernelError {
    if !e.is_refused_write() {
        return e;
    }
    let Some(tensor) = e.tensor.clone() else {
        return e;
    };
    let mut writes = vec![];
    collect_writes(&program.body, &tensor, &mut vec![], &mut writes);
    if writes.is_empty() {
        return e;
    }
    if let KernelErrorKind::OutOfOrder { .. } = e.kind {
        e.hint = Some(OrderHint {
            format: layout
                .tensors
                .iter()
                .find(|t| t.name == tensor)
                .map(|t| t.format.to_string()),
            loop_order: writes.iter().find_map(|w| w.plain_order.clone()),
            // The levels that take writes in any order, from the level registry.
            any_order: crate::levels::registry::any_order_levels(false),
            // The program given is the source one: the lifecycle pass says where `tensor`
            // reopens for updates after a read (append-only formats append after the stored).
            reopened_at: {
                let names = layout.tensors.iter().map(|t| t.name.clone()).collect();
                crate::transforms::lifecycle(program, &names)
                    .ok()
                    .and_then(|p| reopened(&p.body, &tensor))
            },
        });
    }
    // With one write, the failing access is known.
    if let [w] = writes.as_slice() {
        e.access = Some(w.site.access.clone());
        e.span = w.site.span;
    }
    e.writes = writes.into_iter().map(|w| w.site).collect();
    e
}

struct Write {
    site: WriteSite,
    /// For an access whose indices are all loop indices: those indices in access order.
    plain_order: Option<Vec<String>>,
}

/// The writes of `tensor` in `stmts`; `loops` are the user's loops around them, outermost
/// first.
fn collect_writes(
    stmts: &[Stmt],
    tensor: &str,
    loops: &mut Vec<(String, Span)>,
    out: &mut Vec<Write>,
) {
    for s in stmts {
        match &s.kind {
            StmtKind::Assign { lhs, .. } if lhs.tensor == tensor => out.push(Write {
                site: WriteSite {
                    access: lhs.to_string(),
                    span: s.span,
                    loops: loops.clone(),
                },
                plain_order: plain_order(lhs, loops),
            }),
            StmtKind::Loop { index, body, .. } => {
                loops.push((index.clone(), s.span));
                collect_writes(body, tensor, loops, out);
                loops.pop();
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                collect_writes(body, tensor, loops, out)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                collect_writes(then, tensor, loops, out);
                collect_writes(otherwise, tensor, loops, out);
            }
            _ => {}
        }
    }
}

/// The access's indices when every one is an enclosing loop's index.
fn plain_order(access: &Access, loops: &[(String, Span)]) -> Option<Vec<String>> {
    access
        .indices
        .iter()
        .map(|ix| match &ix.expr.kind {
            ExprKind::Name(n) if loops.iter().any(|(l, _)| l == n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// Where the lifecycle pass reopens `tensor` for updates after a read (its first `@thaw`).
fn reopened(stmts: &[Stmt], tensor: &str) -> Option<Span> {
    stmts.iter().find_map(|s| match &s.kind {
        StmtKind::Thaw { tensor: t } if t == tensor => Some(s.span),
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            reopened(body, tensor)
        }
        StmtKind::If {
            then, otherwise, ..
        } => reopened(then, tensor).or_else(|| reopened(otherwise, tensor)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::cx::Order;
    use crate::levels::Format;
    use crate::lower::TensorLayout;
    use crate::notation::parse::parse_program;

    fn layout(name: &str, format: &str) -> Layout {
        Layout {
            tensors: vec![TensorLayout {
                name: name.into(),
                format: Format::parse(format, None).unwrap(),
                bufs: vec![],
                dims_slot: 0,
            }],
            ndims: 0,
            bounds: vec![],
        }
    }

    fn explained(kind: KernelErrorKind, text: &str) -> KernelError {
        let p = parse_program(text).unwrap();
        let l = layout("C", "Dense(SparseList(Element(0.0)))");
        match kernel_error(Error::kernel(KernelError::new("C", kind)), &p, &l) {
            Error::Kernel(e) => *e,
            other => panic!("not a kernel error: {other}"),
        }
    }

    const ORDER: KernelErrorKind = KernelErrorKind::OutOfOrder {
        level: "SparseList",
        order: Order::Entries,
    };

    #[test]
    fn an_order_error_gets_the_write_its_loops_and_the_loop_order_to_use() {
        let e = explained(
            ORDER,
            "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        );
        assert_eq!(e.access.as_deref(), Some("C[i, j]"));
        assert_eq!((e.span.line, e.span.col), (3, 3));
        assert_eq!(e.writes.len(), 1);
        let loops: Vec<&str> = e.writes[0].loops.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(loops, ["j", "i"]);
        let hint = e.hint.as_ref().expect("an order error has a hint");
        assert_eq!(
            hint.loop_order,
            Some(vec!["i".to_string(), "j".to_string()])
        );
        assert_eq!(
            hint.format.as_deref(),
            Some("Dense(SparseList(Element(0.0)))")
        );
        let shown = e.to_string();
        assert!(shown.contains("`for i = _, j = _`"), "{shown}");
    }

    #[test]
    fn a_data_dependent_write_has_no_loop_order_and_two_writes_no_single_place() {
        let e = explained(
            ORDER,
            "C .= 0\nfor i = _\n  C[P[i], 0] = x[i]\n  C[i, 1] = x[i]\nend\n",
        );
        assert_eq!(e.writes.len(), 2);
        assert_eq!(e.access, None);
        assert!(!e.span.is_known());
        // The second write is plain but lists only `i` of two indices: no loop order.
        assert_eq!(e.hint.as_ref().unwrap().loop_order, None);
    }

    #[test]
    fn only_order_errors_get_a_hint_and_other_kinds_stay_as_they_are() {
        let text = "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend\n";
        let dup = explained(KernelErrorKind::Duplicate { level: "SparseCOO" }, text);
        assert_eq!(dup.writes.len(), 1);
        assert_eq!(dup.hint, None);
        let bounds = explained(
            KernelErrorKind::OutOfBounds {
                dim: 0,
                value: Some(4),
            },
            text,
        );
        assert!(bounds.writes.is_empty() && bounds.hint.is_none());
        // A tensor the program does not write: unchanged.
        let p = parse_program(text).unwrap();
        let e = KernelError::new("Z", ORDER);
        let l = layout("C", "Dense(SparseList(Element(0.0)))");
        assert_eq!(
            kernel_error(Error::kernel(e.clone()), &p, &l),
            Error::kernel(e)
        );
    }
}
