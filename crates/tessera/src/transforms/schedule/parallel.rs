//! `parallelize(i)`: run loop `i`'s iterations at once (`for i = parallel(...)`), when the
//! dependence analysis finds no dependence carried by `i` other than reductions of one
//! commutative and associative kind. Which outputs then need per-thread copies, and which
//! writes are races after all (a sparse output level, an overwrite of a shared location), is
//! decided when the program is lowered for its formats (`transforms::parallel`), as for a loop
//! written `parallel` in the program.

use super::loops::replace;
use super::names::{find_loop, get};
use super::{Located, LoopRef, deps};
use crate::error::Result;
use crate::notation::ast::{Program, StmtKind};

pub fn parallelize(p: &Program, c: &Located, target: &LoopRef) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    if let Some(dep) = deps::Analysis::new(p).carried_by(&path, false) {
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
