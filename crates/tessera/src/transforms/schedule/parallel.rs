//! `parallelize(i)`: run loop `i`'s iterations at once (`for i = parallel(...)`), when the
//! dependence analysis finds no dependence carried by `i` other than reductions of one
//! commutative and associative kind. Which outputs then need per-thread copies, and which
//! writes are races after all (a sparse output whose rows are not the loop's, an overwrite of
//! a shared location), is decided when the program is lowered for its formats
//! (`transforms::parallel`), as for a loop written `parallel` in the program.
//!
//! Tensors the loop's iterations declare before using them (a row's workspace, Gustavson's
//! `w .= 0`) count as one per iteration (`deps`' private tensors): the executor gives each
//! chunk of iterations its own copy (`Plan::scratch`), and the race check refuses a
//! declaration it cannot give one for.

use super::loops::replace;
use super::names::{find_loop, get};
use super::{Located, LoopRef, deps};
use crate::error::Result;
use crate::notation::ast::{Program, StmtKind};

pub fn parallelize(p: &Program, c: &Located, target: &LoopRef) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    if let Some(dep) = deps::Analysis::new(p).carried_by(&path, true) {
        return Err(c.broken(
            format!(
                "loop `{}` carries a dependence, so its iterations cannot run at once",
                target.name
            ),
            dep,
        ));
    }
    let mut s = get(&p.body, &path).clone();
    if let StmtKind::Loop { parallel, .. } = &mut s.kind {
        *parallel = true;
    }
    Ok(replace(p, &path, vec![s]))
}
