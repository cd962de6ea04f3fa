//! Switch: runtime specialisation, the first case whose condition holds (a sparse level
//! that may be empty, a spike whose point is not known to end the extent). The rule lowers
//! the loop once per case under a chain of `if`s.

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::{set_at, take_first};
use super::{Ext, Looplet, Target};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    let cases = take_first(&mut body, index, |l| matches!(l, Looplet::Switch(_)));
    let Some((path, Looplet::Switch(cases))) = cases else {
        unreachable!("a switch is present")
    };
    let mut code: Vec<Stmt> = vec![];
    let conds: Vec<Expr> = cases.iter().map(|(c, _)| c.clone()).collect();
    for (k, (cond, case)) in cases.into_iter().enumerate().rev() {
        let mut b2 = body.clone();
        set_at(&mut b2, &path, Target::Looplet(case));
        switch_alike(&mut b2, index, &conds, k);
        let lowered = lw.lower_loop(index, ext.clone(), b2)?;
        code = if code.is_empty() && cond == b::boolean(true) {
            lowered
        } else {
            b::if_else(cond, lowered, code)
        };
    }
    Ok(code)
}

/// Switches with the same conditions as the one being lowered take their case `k` with it.
fn switch_alike(body: &mut [LStmt], index: &str, conds: &[Expr], k: usize) {
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(Looplet::Switch(cases)) = &a.target
            && cases.len() == conds.len()
            && cases.iter().zip(conds).all(|((c, _), d)| c == d)
        {
            let t = Target::Looplet(cases[k].1.clone());
            a.target = t;
        }
        Ok(())
    });
}
