//! AcceptRun: the output side of run-length levels. `f(start, stop)` is the target that
//! receives one value for every coordinate of the extent (one stored run). The rule comes
//! last in the priority order: once every read's structure is lowered, a body that no longer
//! depends on the index is written once for the whole extent; otherwise the writer falls back
//! to one write per coordinate (runs of length 1, which the level merges afterwards).

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::replace_head;
use super::{Ext, Looplet, Target, lookup, thunk};
use crate::error::Result;
use crate::ir::{Expr, Stmt};
use std::rc::Rc;

/// The write target for a whole extent `start..=stop` (both absolute coordinates).
pub type AcceptRunFn = Rc<dyn Fn(&Expr, &Expr) -> Target>;

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    if only_run_writes(&body, index) {
        let mut once = body.clone();
        let (start, stop) = (ext.start.clone(), ext.stop.clone());
        replace_head(&mut once, index, &mut |l| match l {
            Looplet::AcceptRun(f) => Some(f(&start, &stop)),
            _ => None,
        });
        if !node::stmts_use_index(&mut once, index) {
            let (pre, post) = thunk::hoist(&mut once)?;
            lw.simplify(&mut once);
            if once.is_empty() {
                return Ok(vec![]);
            }
            let mut code = pre;
            code.extend(lw.lower_block(once)?);
            code.extend(post);
            return Ok(lw.if_nonempty(&ext, code));
        }
    }
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::AcceptRun(f) => {
            let f = f.clone();
            Some(Target::Looplet(Looplet::Lookup(Rc::new(
                move |i: &Expr| f(i, i),
            ))))
        }
        _ => None,
    });
    lookup::lower(lw, index, ext, body)
}

/// Whether every statement of the body is (nested in loops, `if`s and `let`s) an assignment
/// to an access headed by `index` whose target is a run writer: only then may the body run
/// once for a whole extent.
fn only_run_writes(body: &[LStmt], index: &str) -> bool {
    body.iter().all(|s| match s {
        LStmt::Assign { lhs, .. } => {
            lhs.head() == Some(index)
                && matches!(lhs.target, Target::Looplet(Looplet::AcceptRun(_)))
        }
        LStmt::Loop { body, .. } | LStmt::Let { body, .. } => only_run_writes(body, index),
        LStmt::If {
            then, otherwise, ..
        } => only_run_writes(then, index) && only_run_writes(otherwise, index),
        LStmt::Declare { .. } | LStmt::Freeze { .. } | LStmt::Thaw { .. } => false,
    })
}
