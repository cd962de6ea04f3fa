//! The dense reference evaluator: runs a source program by its denotational semantics on
//! dense, row-major copies of the tensors. It is the oracle the compiled kernels are tested
//! against, so it is deliberately naive: every loop visits every coordinate, every access is
//! an array lookup, and every value rule comes from [`crate::semantics`] so that both sides
//! agree on arithmetic.
//!
//! A run has three phases:
//! 1. static errors, reported whether or not the faulty code runs, by the compiler's own
//!    checks in the compiler's order: [`crate::transforms::check`] (bad swizzles and windows,
//!    unknown names and tensors, wrong ranks, reused loop names, float indices, unknown
//!    functions), [`crate::transforms::resolve_reducers`] (bad reducer definitions and unknown
//!    reducers), the extents of `_` loops, and
//!    [`crate::transforms::dimensionalize::constant_indices_inside`] (constant indices out of
//!    bounds);
//! 2. the lifecycle check, which is the compiler's own pass
//!    ([`crate::transforms::lifecycle`]) run on the source program. Reusing it, rather than
//!    re-deriving the rule, guarantees the evaluator rejects exactly the programs the compiler
//!    rejects (reading and writing one tensor in one scope) instead of silently computing a
//!    sequential answer the compiler would refuse to give. Its rewritten output (the inserted
//!    `@freeze`/`@thaw`) is discarded: those are no-ops on dense arrays;
//! 3. [`exec`]: the execution proper, which reports errors that depend on values (extents,
//!    out-of-bounds indices, operator type errors) when the faulty statement runs.
//!
//! Choices where the source semantics leave room:
//! - an operator type error (`true && 1`) is reported only if the expression is evaluated;
//!   the compiler reports it for any program, so on code that never runs the evaluator is the
//!   more permissive of the two;
//! - in one access, a permissive index outside its dimension makes the access `missing` even
//!   if a plain index is outside too (the compiler tests permissive bounds first);
//! - a write through a permissive index outside is dropped before its value is computed, so
//!   errors in that value are not reported (the compiler drops the whole statement);
//! - a window `A[(lo:hi)(i)]` is computed where the access runs: a non-empty window must lie
//!   inside `A` and `i` inside `0:hi - lo`, both reported like an out-of-bounds index; a
//!   `for i = _` loop also meets the sizes of the windows of `i` whose bounds are known where
//!   it starts (the compiler checks only those whose size is the same for every value of the
//!   names they use);
//! - a user reducer applies its body to every write, whatever properties it declares.

pub mod continuous;
mod exec;
mod extent;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::notation::ast::Program;
use crate::runtime::Buffer;
use crate::types::Scalar;
use std::collections::{BTreeMap, HashSet};

/// A tensor as the evaluator sees it: every entry stored, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseTensor {
    pub shape: Vec<usize>,
    /// The background value (the value `.=` last declared).
    pub fill: Scalar,
    /// Row-major, `len == product(shape)`, of the tensor's element type.
    pub values: Buffer,
}

impl DenseTensor {
    /// Every entry equal to `fill`, converted to `ty`.
    pub fn filled(shape: &[usize], ty: crate::types::ElemType, fill: Scalar) -> DenseTensor {
        let len = shape.iter().product();
        DenseTensor {
            shape: shape.to_vec(),
            fill: fill.cast(ty),
            values: Buffer::filled(ty, len, fill),
        }
    }
}

/// The tensors a program runs on, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Env {
    pub tensors: BTreeMap<String, DenseTensor>,
}

impl Env {
    pub fn new() -> Env {
        Env::default()
    }

    pub fn insert(&mut self, name: &str, t: DenseTensor) {
        self.tensors.insert(name.to_string(), t);
    }
}

/// Run `program` on the tensors of `env`, updating them in place.
///
/// On error the tensors may be partly updated (the evaluator does not roll back).
pub fn run(program: &Program, env: &mut Env) -> Result<()> {
    crate::transforms::stack::fitting(program, || run_fitted(program, env))
}

fn run_fitted(program: &Program, env: &mut Env) -> Result<()> {
    if let Some(n) = env
        .tensors
        .keys()
        .find(|n| crate::transforms::ein::is_reserved(n))
    {
        return Err(crate::transforms::ein::reserved_error(n));
    }
    // δ and ε are lowered as the compiler lowers them (`Runner::lower`).
    let lowered = crate::transforms::ein::lower(program)?;
    let program = &lowered;
    for (name, t) in &env.tensors {
        let len: usize = t.shape.iter().product();
        if t.values.len() != len {
            return Err(Error::tensor(
                name,
                format!(
                    "shape {:?} needs {len} values but {} are given",
                    t.shape,
                    t.values.len()
                ),
            ));
        }
    }
    // In the compiler's order: the static checks on the source program first.
    let signatures = env
        .tensors
        .iter()
        .map(|(n, t)| {
            let sig = crate::transforms::check::Signature {
                rank: t.shape.len(),
                elem: t.values.elem(),
            };
            (n.clone(), sig)
        })
        .collect();
    crate::transforms::check::check(program, &signatures)?;
    let program = &crate::transforms::resolve_reducers(program)?;
    // After the extents, as `dimensionalize::infer_shapes` does.
    check_extents(env, &program.body)?;
    let sizes = |t: &str, d: usize| env.tensors.get(t)?.shape.get(d).copied();
    crate::transforms::dimensionalize::constant_indices_inside(&program.body, &sizes)?;
    let names: HashSet<String> = env.tensors.keys().cloned().collect();
    crate::transforms::lifecycle(program, &names)?;
    exec::Machine::new(env).stmts(&program.body)
}

/// Every `_` extent must be inferable and consistent even if its loop never runs, as the
/// compiler decides extents before running anything.
fn check_extents(env: &Env, body: &[crate::notation::ast::Stmt]) -> Result<()> {
    use crate::notation::ast::{Extent, StmtKind};
    use crate::transforms::linear::window_size;
    for s in body {
        match &s.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                if *extent == Extent::Auto {
                    let mut all = extent::uses(env, body, index);
                    let windows = crate::transforms::wrapperize::window_uses(body, index);
                    let sizes = |t: &str, d: usize| env.tensors.get(t)?.shape.get(d).copied();
                    for w in &windows {
                        if let Some(n) = window_size(w.lo, w.hi, &sizes) {
                            let (lo, hi) = (w.lo.to_string(), w.hi.to_string());
                            all.push(extent::Use::window(w, &lo, &hi, n as usize));
                        }
                    }
                    // Windows of sizes known only at run time are checked when the loop runs.
                    if !all.is_empty() || windows.is_empty() {
                        extent::infer(&all, index, s.span)?;
                    }
                }
                check_extents(env, body)?;
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                check_extents(env, then)?;
                check_extents(env, otherwise)?;
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => check_extents(env, body)?,
            _ => {}
        }
    }
    Ok(())
}
