//! Run: the same target over the whole extent (a fill region, a run-length level's stored
//! run, one phase of a mask). The rule replaces the looplet by its target, which consumes
//! the index for that access.

use super::lowerer::Lowerer;
use super::node::LStmt;
use super::rewrite::replace_head;
use super::{Ext, Looplet};
use crate::error::Result;
use crate::ir::Stmt;

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::Run(t) => Some(*t.clone()),
        _ => None,
    });
    lw.lower_loop(index, ext, body)
}
