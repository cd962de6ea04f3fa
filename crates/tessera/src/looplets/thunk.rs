//! Thunk: code to run before (and after) the loop that lowers the thunk's body — a level's
//! set-up when its fiber is opened (loading a position range, resetting a write cursor) and
//! its wrap-up (committing what was written). The rule is a hoist: the code goes around the
//! loop and every access continues with the body.

use super::node::{self, LStmt};
use super::{Looplet, Target};
use crate::error::Result;
use crate::ir::Stmt;

/// Collect the code of every thunk in the statements and replace each by its body. A thunk
/// shared by several accesses (one writer for several writes) runs once.
pub fn hoist(body: &mut [LStmt]) -> Result<(Vec<Stmt>, Vec<Stmt>)> {
    let mut pre = vec![];
    let mut post: Vec<Vec<Stmt>> = vec![];
    let mut seen: Vec<(Vec<Stmt>, Vec<Stmt>)> = vec![];
    node::visit_accesses_mut(body, &mut |a| {
        while let Target::Looplet(Looplet::Thunk {
            preamble,
            body,
            epilogue,
        }) = &a.target
        {
            let key = (preamble.clone(), epilogue.clone());
            if !seen.contains(&key) {
                pre.extend(preamble.clone());
                post.push(epilogue.clone());
                seen.push(key);
            }
            a.target = (**body).clone();
        }
        Ok(())
    })?;
    // Epilogues run in reverse order of their preambles (inner thunks close first).
    Ok((pre, post.into_iter().rev().flatten().collect()))
}
