//! What a looplet's lowering rule needs from the engine that drives it (`lower::engine`). The
//! rules sit below the engine (they are part of the looplet vocabulary, which levels build),
//! so they reach the engine only through this trait: the IR under construction, the extent
//! facts, the simplifier, and the recursion into what is left of the loop.

use super::extent::{Ext, Kind};
use super::node::LStmt;
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, VarId, build as b};
use crate::symbolic::bounds::Facts;

pub trait Lowerer {
    /// The kernel under construction (fresh variables, buffers, error messages).
    fn cx(&mut self) -> &mut Cx;
    /// Bounds of phase and loop variables, for the proofs that drop empty phases.
    fn facts(&self) -> &Facts;
    fn facts_mut(&mut self) -> &mut Facts;
    /// Lower `for index in ext: body`: unfurl the accesses headed by `index`, then apply the
    /// rule of the highest looplet style left (which recurses here with a smaller problem).
    fn lower_loop(&mut self, index: &str, ext: Ext, body: Vec<LStmt>) -> Result<Vec<Stmt>>;
    /// Lower statements that no longer depend on the loop being lowered.
    fn lower_block(&mut self, body: Vec<LStmt>) -> Result<Vec<Stmt>>;
    /// Rewrite the statements with the simplifier over lowering nodes (drop writes of the
    /// fill, fold constants, prune decided branches).
    fn simplify(&self, body: &mut Vec<LStmt>);
    /// Code for the end of one iteration of the loop over `index` whose (not yet specialised)
    /// body is `body`: leave the loop once a short-circuiting reduction reaches its
    /// annihilator, finishing the other statements from `next` to `stop`.
    fn short_circuit_exit(
        &mut self,
        index: &str,
        next: Expr,
        stop: &Expr,
        body: &[LStmt],
    ) -> Result<Vec<Stmt>>;
    /// `lowered` (the part of the loop over `ext`, lowered from `body`) with an alternative
    /// for when an earlier part already short-circuited a reduction.
    fn short_circuit_guard(
        &mut self,
        index: &str,
        ext: &Ext,
        body: &[LStmt],
        lowered: Vec<Stmt>,
    ) -> Result<Vec<Stmt>>;
    /// The counted loop over `var` walks the stored positions of a fiber along `index`, one
    /// coordinate per position: a `vectorize(index)` loop runs it in lanes.
    fn walked(&mut self, _var: VarId, _index: &str) {}

    /// Keep simple values as they are; give anything else a variable, so extents compare
    /// structurally and are computed once.
    fn pin(&mut self, code: &mut Vec<Stmt>, e: Expr, name: &str) -> Expr {
        match e {
            Expr::Const(_) | Expr::Var(_) => e,
            e => {
                let ty = Kind::of(self.cx(), &e).ty();
                let v = self.cx().var(name, ty);
                self.facts_mut().record(v, &e);
                code.push(b::assign(v, e));
                b::var(v)
            }
        }
    }

    /// Inside a chunk loop over `ext`, the chunk `i..=e` lies in the extent.
    fn loop_facts(&mut self, i: VarId, e: VarId, ext: &Ext) {
        let facts = self.facts_mut();
        facts.record_range(i, Some(ext.start.clone()), Some(ext.stop.clone()));
        facts.record_range(e, Some(b::var(i)), Some(ext.stop.clone()));
    }

    /// The extent itself, or its start when the facts show it holds at most that point (the
    /// caller runs it only when it is not empty).
    fn narrow(&self, ext: Ext) -> Ext {
        if !ext.is_point() && self.facts().at_most_one(&ext.start, &ext.stop) {
            Ext {
                start: ext.start.clone(),
                stop: ext.start,
            }
        } else {
            ext
        }
    }

    /// `narrow` for an extent whose code runs only where `start <= stop`: a point that is not
    /// a constant gets a variable that the facts bound by `stop` as well (shifted accesses at
    /// the last coordinate are then in bounds, and phases at the point reaching `stop` need
    /// no test). Its assignment is pushed to `code`.
    fn narrow_guarded(&mut self, ext: Ext, index: &str, code: &mut Vec<Stmt>) -> Ext {
        let narrowed = self.narrow(ext.clone());
        if ext.is_point() || !narrowed.is_point() || matches!(ext.start, Expr::Const(_)) {
            return narrowed;
        }
        let ty = Kind::of(self.cx(), &ext.start).ty();
        let p = self.cx().var(&format!("{index}_at"), ty);
        self.facts_mut()
            .record_range(p, Some(ext.start.clone()), Some(ext.stop.clone()));
        code.push(b::assign(p, ext.start));
        Ext {
            start: b::var(p),
            stop: b::var(p),
        }
    }

    /// `code` under `if start <= stop`, unless the facts show the extent is not empty (a
    /// chunk of a stepper loop always holds its first coordinate).
    fn if_nonempty(&self, ext: &Ext, code: Vec<Stmt>) -> Vec<Stmt> {
        if ext.is_point() || self.facts().le(&ext.start, &ext.stop) {
            code
        } else {
            guard(b::le(ext.start.clone(), ext.stop.clone()), code)
        }
    }
}

/// `if cond { then }`, without repeating a test that `then` already makes first and alone
/// (a phase guard around a run writer's own emptiness test).
fn guard(cond: Expr, then: Vec<Stmt>) -> Vec<Stmt> {
    match then.as_slice() {
        [
            Stmt::If {
                cond: c, otherwise, ..
            },
        ] if *c == cond && otherwise.is_empty() => then,
        _ => b::if_(cond, then),
    }
}
