//! Rewriting innermost loops: the passes that specialise a loop by what its body does
//! (`promote`, `ieee_mul`) look only at loops with no loop inside, and replace each with the
//! statements they return.

use super::{Kernel, Stmt};

/// Replace every innermost `for`/`while` loop `s` of `k` by `rewrite(k, s)` where that
/// returns statements; other loops and statements stay as they are.
pub fn rewrite_innermost_loops(
    k: &mut Kernel,
    rewrite: &mut dyn FnMut(&mut Kernel, &Stmt) -> Option<Vec<Stmt>>,
) {
    let mut body = std::mem::take(&mut k.body);
    walk(k, &mut body, rewrite);
    k.body = body;
}

fn walk(
    k: &mut Kernel,
    stmts: &mut Vec<Stmt>,
    rewrite: &mut dyn FnMut(&mut Kernel, &Stmt) -> Option<Vec<Stmt>>,
) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        match &mut s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk(k, then, rewrite);
                walk(k, otherwise, rewrite);
            }
            // A parallel loop's chunk body is an ordinary loop nest: its loops are rewritten too.
            Stmt::Chunked(c) => walk(k, &mut c.body, rewrite),
            Stmt::For { body, .. } | Stmt::While { body, .. } => {
                if has_loop(body) {
                    walk(k, body, rewrite);
                } else if let Some(new) = rewrite(k, &s) {
                    out.extend(new);
                    continue;
                }
            }
            _ => {}
        }
        out.push(s);
    }
    *stmts = out;
}

/// Whether `stmts` hold a loop, at any depth of `if`s.
pub fn has_loop(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Chunked(_) => true,
        Stmt::If {
            then, otherwise, ..
        } => has_loop(then) || has_loop(otherwise),
        _ => false,
    })
}
