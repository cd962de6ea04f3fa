//! The recursive lowering engine: one loop at a time, outermost first, each loop's body
//! rewritten by the looplet rule of the highest style present (see `looplets::Style`).

use super::emit::{emit_expr, emit_index};
use super::node::{self, LAccess, LExpr, LStmt, Mode};
use super::simplify;
use crate::error::{Error, Result};
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::levels::registry::reopen_error;
use crate::levels::{LevelRef, level_impl};
use crate::looplets::tensor::TensorInfo;
use crate::looplets::{Fiber, Looplet, Phase, Style, Target};
use crate::notation::ast::{AssignOp, Span};
use crate::symbolic;
use crate::types::{Class, ElemType, Scalar};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// An inclusive range of coordinates as IR values.
#[derive(Clone)]
pub struct Ext {
    pub start: Expr,
    pub stop: Expr,
}

impl Ext {
    pub fn is_point(&self) -> bool {
        self.start == self.stop
    }
}

/// Size limit of a generated kernel, counted in variables (roughly one per looplet split).
const MAX_KERNEL_VARS: usize = 4_000;

pub struct Engine {
    pub cx: Cx,
    pub tensors: HashMap<String, Rc<TensorInfo>>,
    /// The value each tensor was last declared with in this kernel (Finch's `initwrite`: an
    /// overwrite with that value is a no-op).
    pub declared: HashMap<String, Scalar>,
    /// Tensors whose declaration is followed by writes that touch each element at most once;
    /// only for those is `initwrite` sound (otherwise a later fill write must overwrite).
    pub write_once: HashSet<String>,
    /// Bounds of phase and loop variables: provably empty phases are skipped, phases of one
    /// coordinate lowered as points.
    pub facts: crate::symbolic::bounds::Facts,
    /// Where a failing bounds check stores the value it reports: buffer 0 (the dimensions),
    /// one slot past the last dimension.
    pub detail: (crate::ir::BufId, i64),
}

impl Engine {
    pub fn lower_block(&mut self, mut stmts: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let (pre, post) = hoist_thunks(&mut stmts)?;
        self.write_once.extend(write_once_tensors(&stmts));
        super::scalars::drop_annihilated_writes(self, &mut stmts);
        let mut stmts = super::scalars::split_leaf_switches(stmts);
        simplify::simplify_stmts(&mut stmts, &self.declared);
        let mut body = vec![];
        for s in stmts {
            body.extend(self.lower_stmt(s)?);
        }
        if body.is_empty() {
            // The statements vanished (a product with a fill of 0, a write of the fill): the
            // set-up their reads and writes needed (a lookup's search, a fiber's opening)
            // goes with them, as in `lower_loop`.
            return Ok(vec![]);
        }
        let mut code = pre;
        code.extend(body);
        code.extend(post);
        Ok(code)
    }

    fn lower_stmt(&mut self, s: LStmt) -> Result<Vec<Stmt>> {
        match s {
            LStmt::Loop {
                index,
                start,
                stop,
                body,
                span,
                bounds,
            } => {
                let start = emit_index(&start, span)?;
                let stop = emit_index(&stop, span)?;
                let mut code = vec![];
                let start = self.pin(&mut code, start, &format!("{index}_start"));
                let stop = self.pin(&mut code, stop, &format!("{index}_stop"));
                for bd in bounds {
                    // The value is filled in from `self.detail` when the fault is reported.
                    let msg = self.cx.error(
                        crate::ir::cx::KernelError::new(
                            &bd.tensor,
                            crate::ir::cx::KernelErrorKind::OutOfBounds {
                                dim: bd.dim,
                                value: None,
                            },
                        )
                        .at(span),
                    );
                    let low = b::lt(start.clone(), b::int(0));
                    let outside = b::or(low.clone(), b::le(bd.size, stop.clone()));
                    let (buf, slot) = self.detail;
                    let bad = b::select(low, start.clone(), stop.clone());
                    code.extend(b::if_(
                        b::and(b::le(start.clone(), stop.clone()), outside),
                        vec![b::store(buf, b::int(slot), bad), Stmt::Fail(msg)],
                    ));
                }
                // An error the loop's lowering raised without a place (the kernel grew too
                // large) is placed at the innermost loop statement around it.
                let lowered = self.lower_loop(&index, Ext { start, stop }, body);
                code.extend(lowered.map_err(|e| e.or_at(span))?);
                Ok(code)
            }
            LStmt::If {
                cond,
                then,
                otherwise,
                span,
            } => {
                let (c, class) = emit_expr(&cond, span)?;
                if class != Class::Bool {
                    return Err(Error::program(
                        span,
                        "the condition of `if` must be a boolean",
                    ));
                }
                let then = self.lower_block(then)?;
                let otherwise = self.lower_block(otherwise)?;
                Ok(b::if_else(c, then, otherwise))
            }
            LStmt::Let {
                name,
                value,
                mut body,
                span,
            } => {
                let (v, ty) = emit_expr(&value, span)?;
                let var = self.cx.var(&name, crate::semantics::class_type(ty));
                node::substitute_index(&mut body, &name, &b::var(var));
                // `substitute_index` marks the value I64; fix the type of let-bound values.
                retype(&mut body, var, crate::semantics::class_type(ty));
                let mut code = vec![b::assign(var, v)];
                code.extend(self.lower_block(body)?);
                Ok(code)
            }
            LStmt::Assign { lhs, op, rhs, span } => self.lower_assign(lhs, op, rhs, span),
            LStmt::Declare { tensor, init, .. } => {
                let t = self.tensors[&tensor].clone();
                let l = LevelRef {
                    tensor: &t,
                    level: 0,
                };
                let code = level_impl(l.kind()).declare(&mut self.cx, &l, b::int(1), init)?;
                if self.write_once.contains(&tensor) {
                    self.declared.insert(tensor, init.cast(t.elem));
                } else {
                    self.declared.remove(&tensor);
                }
                Ok(code)
            }
            LStmt::Freeze { tensor } => {
                let t = self.tensors[&tensor].clone();
                let l = LevelRef {
                    tensor: &t,
                    level: 0,
                };
                Ok(level_impl(l.kind()).freeze(&mut self.cx, &l, b::int(1))?.0)
            }
            LStmt::Thaw { tensor, span, read } => {
                let t = self.tensors[&tensor].clone();
                // Whether the format can be reopened is the registry's answer, not the name's.
                if let Some(kind) = t.format.levels.iter().find(|k| !k.caps().reopen) {
                    return Err(cannot_reopen(
                        &tensor,
                        span,
                        read,
                        reopen_error(&tensor, kind),
                    ));
                }
                let l = LevelRef {
                    tensor: &t,
                    level: 0,
                };
                self.declared.remove(&tensor);
                level_impl(l.kind())
                    .thaw(&mut self.cx, &l, b::int(1))
                    .map(|r| r.0)
                    .map_err(|e| cannot_reopen(&tensor, span, read, e))
            }
        }
    }
}

/// The error for updating `tensor` at `span` after a read at `read` when a level of its format
/// cannot reopen (`why`, from the level's `thaw`).
fn cannot_reopen(tensor: &str, span: Span, read: Option<Span>, why: Error) -> Error {
    let why = match why {
        Error::Tensor { msg, .. } => msg,
        other => other.to_string(),
    };
    let read = read.map(|r| format!(" at {r}")).unwrap_or_default();
    Error::Lifecycle {
        span,
        msg: format!(
            "`{tensor}` is updated again here after it was read{read}, but {why}. Declare it again (`{tensor} .= ...`) before this update to start over, or store it in a format whose levels all reopen after a read (the README's format table lists them)"
        ),
    }
}

impl Engine {
    /// Keep simple values as they are; give anything else a variable, so extents compare
    /// structurally and are computed once.
    fn pin(&mut self, code: &mut Vec<Stmt>, e: Expr, name: &str) -> Expr {
        match e {
            Expr::Const(_) | Expr::Var(_) => e,
            e => {
                let v = self.cx.var(name, ElemType::I64);
                self.facts.record(v, &e);
                code.push(b::assign(v, e));
                b::var(v)
            }
        }
    }

    /// Inside a chunk loop over `ext`, the chunk `i..=e` lies in the extent.
    fn loop_facts(&mut self, i: crate::ir::VarId, e: crate::ir::VarId, ext: &Ext) {
        self.facts
            .record_range(i, Some(ext.start.clone()), Some(ext.stop.clone()));
        self.facts
            .record_range(e, Some(b::var(i)), Some(ext.stop.clone()));
    }

    /// The extent itself, or its start when the facts show it holds at most that point (the
    /// caller runs it only when it is not empty).
    fn narrow(&self, ext: Ext) -> Ext {
        if !ext.is_point() && self.facts.at_most_one(&ext.start, &ext.stop) {
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
        let p = self.cx.var(&format!("{index}_at"), ElemType::I64);
        self.facts
            .record_range(p, Some(ext.start.clone()), Some(ext.stop.clone()));
        code.push(b::assign(p, ext.start));
        Ext {
            start: b::var(p),
            stop: b::var(p),
        }
    }

    /// Lower `for index in ext: body`.
    pub fn lower_loop(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        if self.cx.vars.len() > MAX_KERNEL_VARS {
            // Each split of a loop (phases, spikes, switch cases) copies its body, so some
            // combinations of many structured operands grow code multiplicatively; refuse
            // clearly rather than exhaust memory.
            return Err(Error::unsupported(
                Span::default(),
                format!(
                    "the kernel for loop `{index}` grows beyond {MAX_KERNEL_VARS} variables; simplify the program or use fewer sparse operands per loop"
                ),
            ));
        }
        super::wrappers::unfurl_masks(&mut body, index)?;
        // Unfurl every access whose next index is this loop's. Offset accesses wait until the
        // masks on the index are lowered: a mask (often the bounds test of a permissive
        // access) narrows the extent over which the shifted access must stay in bounds.
        use super::wrappers::any_head;
        let masked = any_head(&mut body, index, |a| a.mask);
        if !masked && any_head(&mut body, index, |a| a.head_offset().is_some()) {
            // Drop the branches the masks already decided, so only offset accesses that
            // can run are checked against their bounds.
            simplify::simplify_stmts(&mut body, &self.declared);
        }
        let cx = &mut self.cx;
        let mut checks = vec![];
        // Accesses to one fiber share one unfurled looplet (its state, its thunk, its
        // splits). Writes must: separate writers would each open and commit the same fiber
        // (`if ... C[i] = x else C[i] = y`). Reads may: the same row read in both branches of
        // a permissive split is walked once instead of coiterated with itself.
        type Key = (
            Fiber,
            Option<Expr>,
            Mode,
            Option<crate::notation::ast::Protocol>,
        );
        let mut unfurled: Vec<(Key, Looplet)> = vec![];
        node::visit_accesses_mut(&mut body, &mut |a: &mut LAccess| {
            if a.head() == Some(index)
                && let Target::Fiber(f) = &a.target
            {
                let offset = match a.head_offset() {
                    Some(_) if masked => return Ok(()),
                    Some(o) => Some(emit_index(o, a.span)?),
                    None => None,
                };
                let (mode, protocol) = (a.mode, a.head_protocol());
                if let Some((_, l)) = unfurled.iter().find(|((g, o, m, p), _)| {
                    same_fiber(f, g) && *o == offset && *m == mode && *p == protocol
                }) {
                    a.target = Target::Looplet(l.clone());
                    return Ok(());
                }
                let imp = level_impl(&f.tensor.format.levels[f.level]);
                let l = match a.mode {
                    Mode::Read => imp.unfurl_read(cx, f, a.head_protocol())?,
                    Mode::Update => imp.unfurl_update(cx, f)?,
                };
                let l = match &offset {
                    Some(c) => {
                        checks.extend(super::wrappers::offset_check(
                            cx,
                            &self.facts,
                            a,
                            f,
                            &ext,
                            c,
                        ));
                        super::wrappers::shift(&l, c)
                    }
                    None => l,
                };
                unfurled.push(((f.clone(), offset, mode, protocol), l.clone()));
                a.target = Target::Looplet(l);
            }
            Ok(())
        })?;
        let (mut pre, post) = hoist_thunks(&mut body)?;
        pre.splice(0..0, checks);
        simplify::simplify_stmts(&mut body, &self.declared);
        if body.is_empty() {
            // Nothing left to do at this level (e.g. only writes of the fill value): the
            // thunks' set-up and wrap-up are not needed either, and skipping them is what
            // lets fill regions of sparse outputs cost nothing.
            return Ok(vec![]);
        }
        let style = styles_of(&mut body, index).into_iter().min();
        let mut code = pre;
        code.extend(match style {
            None => self.lower_plain(index, ext, body)?,
            Some(Style::Thunk) => unreachable!("thunks were hoisted"),
            Some(Style::Switch) => self.lower_switch(index, ext, body)?,
            Some(Style::Sequence) => self.lower_sequence(index, ext, body)?,
            Some(Style::Spike) => self.lower_spike(index, ext, body)?,
            Some(Style::Run) => {
                replace_head(&mut body, index, &mut |l| match l {
                    Looplet::Run(t) => Some(*t.clone()),
                    _ => None,
                });
                self.lower_loop(index, ext, body)?
            }
            Some(Style::Jumper) => self.lower_jumper(index, ext, body)?,
            Some(Style::Stepper) => self.lower_stepper(index, ext, body)?,
            Some(Style::Lookup) => self.lower_lookup(index, ext, body)?,
            Some(Style::AcceptRun) => self.lower_accept_run(index, ext, body)?,
        });
        code.extend(post);
        Ok(code)
    }

    /// No looplet depends on the index: integrate what can be integrated, else loop densely.
    fn lower_plain(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        if !node::stmts_use_index(&mut body, index)
            && let Some(code) = self.integrate(&ext, &body)?
        {
            return Ok(code);
        }
        self.emit_for(index, ext, body)
    }

    fn emit_for(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        if ext.is_point() {
            node::substitute_index(&mut body, index, &ext.start);
            return self.lower_block(body);
        }
        let v = self.cx.var(index, ElemType::I64);
        let unspecialised = body.clone();
        node::substitute_index(&mut body, index, &b::var(v));
        let mut inner = self.lower_block(body)?;
        if inner.is_empty() {
            return Ok(vec![]);
        }
        inner.extend(self.short_circuit_exit(
            index,
            b::add(b::var(v), b::int(1)),
            &ext.stop,
            &unspecialised,
        )?);
        Ok(vec![Stmt::For {
            var: v,
            start: ext.start,
            stop: b::add(ext.stop, b::int(1)),
            body: inner,
        }])
    }

    /// `for i in ext: s op= c` with nothing depending on i: `+` multiplies by the extent's
    /// length, idempotent reducers apply once if the extent is non-empty (Finch's loop
    /// collapse). Nested loops, `if`s and `let`s whose statements all fit are integrated the
    /// same way (repeating the whole body `len` times repeats each assignment `len` times with
    /// the same right-hand side: reads cannot see the tensors being updated). Returns `None`
    /// when some statement does not fit.
    fn integrate(&mut self, ext: &Ext, body: &[LStmt]) -> Result<Option<Vec<Stmt>>> {
        if ext.is_point() {
            // One iteration: nothing to multiply and no emptiness to test.
            return self.lower_block(body.to_vec()).map(Some);
        }
        let len = b::add(b::sub(ext.stop.clone(), ext.start.clone()), b::int(1));
        if !integrable_ops(body) {
            return Ok(None);
        }
        let Some(out) = integrated(body, &len) else {
            return Ok(None);
        };
        let code = self.lower_block(out)?;
        Ok(Some(self.if_nonempty(ext, code)))
    }

    /// `code` under `if start <= stop`, unless the facts show the extent is not empty (a
    /// chunk of a stepper loop always holds its first coordinate).
    fn if_nonempty(&self, ext: &Ext, code: Vec<Stmt>) -> Vec<Stmt> {
        if ext.is_point() || self.facts.le(&ext.start, &ext.stop) {
            code
        } else {
            guard(b::le(ext.start.clone(), ext.stop.clone()), code)
        }
    }

    /// The run writers' rule. Once every other looplet on the index is lowered, replace each
    /// `AcceptRun` by its target for the whole extent; if the body then no longer depends on
    /// the index and consists only of writes to those run targets, it runs once for the extent
    /// (each target stores one run). Otherwise the writers fall back to one write per
    /// coordinate (runs of length 1, which the level merges afterwards).
    fn lower_accept_run(
        &mut self,
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
                let (pre, post) = hoist_thunks(&mut once)?;
                simplify::simplify_stmts(&mut once, &self.declared);
                if once.is_empty() {
                    return Ok(vec![]);
                }
                let mut code = pre;
                code.extend(self.lower_block(once)?);
                code.extend(post);
                return Ok(self.if_nonempty(&ext, code));
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
        self.lower_lookup(index, ext, body)
    }

    fn lower_lookup(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        if ext.is_point() {
            let at = ext.start.clone();
            replace_head(&mut body, index, &mut |l| match l {
                Looplet::Lookup(f) => Some(f(&at)),
                _ => None,
            });
            return self.lower_loop(index, ext, body);
        }
        let v = self.cx.var(index, ElemType::I64);
        let at = b::var(v);
        let unspecialised = body.clone();
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Lookup(f) => Some(f(&at)),
            _ => None,
        });
        let mut inner = self.lower_loop(
            index,
            Ext {
                start: at.clone(),
                stop: at.clone(),
            },
            body,
        )?;
        if inner.is_empty() {
            return Ok(vec![]);
        }
        inner.extend(self.short_circuit_exit(
            index,
            b::add(at.clone(), b::int(1)),
            &ext.stop,
            &unspecialised,
        )?);
        Ok(vec![Stmt::For {
            var: v,
            start: ext.start,
            stop: b::add(ext.stop, b::int(1)),
            body: inner,
        }])
    }

    fn lower_switch(&mut self, index: &str, ext: Ext, body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let mut body = body;
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
            let lowered = self.lower_loop(index, ext.clone(), b2)?;
            code = if code.is_empty() && cond == b::boolean(true) {
                lowered
            } else {
                b::if_else(cond, lowered, code)
            };
        }
        Ok(code)
    }

    fn lower_sequence(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let seq = take_first(&mut body, index, |l| matches!(l, Looplet::Sequence(_)));
        let Some((path, Looplet::Sequence(phases))) = seq else {
            unreachable!("a sequence is present")
        };
        let stops: Vec<Option<Expr>> = phases.iter().map(|p| p.stop.clone()).collect();
        if ext.is_point() {
            return self.lower_sequence_at(index, ext, body, path, phases, &stops);
        }
        let mut code = vec![];
        let mut cur = ext.start.clone();
        let mut emitted = false;
        let n = phases.len();
        for (
            k,
            Phase {
                stop,
                body: looplet,
            },
        ) in phases.into_iter().enumerate()
        {
            let hi = match &stop {
                // A phase reaching past the extent is cut by it alone.
                Some(s) if !self.facts.le(&ext.stop, s) => b::min(s.clone(), ext.stop.clone()),
                _ => ext.stop.clone(),
            };
            let hi = self.pin(&mut code, hi, &format!("{index}_phase_stop"));
            let mut b2 = body.clone();
            set_at(&mut b2, &path, Target::Looplet(looplet));
            split_alike(&mut b2, index, &stops, k);
            let phase = Ext {
                start: cur.clone(),
                stop: hi.clone(),
            };
            if self.facts.empty(&phase.start, &phase.stop) {
                // Nothing to run, and the next phase starts where this one would have.
                continue;
            }
            // A phase of at most one coordinate (the edges a mask cuts) runs at its start,
            // under the guard below: no loop, and its steppers seek once.
            let mut at_point = vec![];
            let run = self.narrow_guarded(phase.clone(), index, &mut at_point);
            let mut inner = self.lower_loop(index, run.clone(), b2.clone())?;
            if !inner.is_empty() {
                inner.splice(0..0, at_point);
            }
            if k > 0 {
                // Earlier phases may have finished a short-circuiting reduction.
                inner = self.short_circuit_guard(index, &run, &b2, inner)?;
            }
            if !inner.is_empty() {
                emitted = true;
            }
            code.extend(self.if_nonempty(&phase, inner));
            if k + 1 < n {
                let next = self.cx.var(&format!("{index}_phase_start"), ElemType::I64);
                // After the phase's own stop rather than after `hi`: the two differ only when
                // the phase reaches past the extent, and then every later phase is empty
                // either way. Without the `min`, constant cuts stay constants (`max(0, 0 + 1)`
                // is 1), which proves the shifted accesses of later phases in bounds.
                let after = stop.unwrap_or(hi);
                let start = b::max(cur.clone(), b::add(after, b::int(1)));
                self.facts.record(next, &start);
                code.push(b::assign(next, start));
                cur = b::var(next);
            }
        }
        // Phase bounds alone are dead code.
        Ok(if emitted { code } else { vec![] })
    }

    /// A sequence at one point runs the phase holding it: the first whose stop is not before
    /// the point (phase k starts after every earlier stop). Only that phase runs, so no
    /// phase bounds are computed.
    fn lower_sequence_at(
        &mut self,
        index: &str,
        ext: Ext,
        body: Vec<LStmt>,
        path: usize,
        phases: Vec<Phase>,
        stops: &[Option<Expr>],
    ) -> Result<Vec<Stmt>> {
        let at = ext.start.clone();
        let mut cases: Vec<(Expr, Vec<Stmt>)> = vec![];
        for (k, phase) in phases.into_iter().enumerate() {
            let cond = match &phase.stop {
                Some(s) if self.facts.lt(s, &at) => continue,
                Some(s) if !self.facts.le(&at, s) => b::le(at.clone(), s.clone()),
                _ => b::boolean(true),
            };
            let mut b2 = body.clone();
            set_at(&mut b2, &path, Target::Looplet(phase.body));
            split_alike(&mut b2, index, stops, k);
            let inner = self.lower_loop(index, ext.clone(), b2)?;
            let last = cond == b::boolean(true);
            cases.push((cond, inner));
            if last {
                break;
            }
        }
        let mut code = vec![];
        for (cond, inner) in cases.into_iter().rev() {
            code = b::if_else(cond, inner, code);
        }
        Ok(code)
    }

    fn lower_spike(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        // A spike whose point is not known to be the extent's end becomes a runtime switch.
        let stop = ext.stop.clone();
        let mut first: Option<Expr> = None;
        replace_head(&mut body, index, &mut |l| {
            if let Looplet::Spike { at, .. } = l
                && *at != stop
                && first.is_none()
            {
                first = Some(at.clone());
            }
            None
        });
        // Every spike at that point (one shared by several accesses) switches with it.
        let mut switched = false;
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Spike { at, body, tail } if Some(at) == first.as_ref() => {
                switched = true;
                Some(Target::Looplet(Looplet::Switch(vec![
                    (
                        b::eq(at.clone(), stop.clone()),
                        Looplet::Spike {
                            at: stop.clone(),
                            body: body.clone(),
                            tail: tail.clone(),
                        },
                    ),
                    (b::boolean(true), Looplet::Run(body.clone())),
                ])))
            }
            _ => None,
        });
        if switched {
            return self.lower_loop(index, ext, body);
        }
        let mut before = body.clone();
        replace_head(&mut before, index, &mut |l| match l {
            Looplet::Spike { body, .. } => Some(Target::Looplet(Looplet::Run(body.clone()))),
            _ => None,
        });
        let mut code = vec![];
        let last = self.pin(
            &mut code,
            b::sub(ext.stop.clone(), b::int(1)),
            &format!("{index}_before_stop"),
        );
        let before_ext = self.narrow(Ext {
            start: ext.start.clone(),
            stop: last.clone(),
        });
        let inner = self.lower_loop(index, before_ext, before)?;
        if inner.is_empty() {
            code.clear();
        } else {
            code.extend(b::if_(b::le(ext.start.clone(), last), inner));
        }
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Spike { tail, .. } => Some(Target::Looplet(Looplet::Run(tail.clone()))),
            _ => None,
        });
        let point = Ext {
            start: ext.stop.clone(),
            stop: ext.stop,
        };
        let tail = self.lower_loop(index, point.clone(), body.clone())?;
        // The part before the tail may have finished a short-circuiting reduction.
        let tail = if code.is_empty() {
            tail
        } else {
            self.short_circuit_guard(index, &point, &body, tail)?
        };
        code.extend(tail);
        Ok(code)
    }

    fn lower_stepper(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let unspecialised = body.clone();
        let mut steppers = vec![];
        node::visit_accesses_mut(&mut body, &mut |a| {
            if a.head() == Some(index)
                && let Target::Looplet(Looplet::Stepper(s)) = &a.target
            {
                // An access sharing another's stepper advances with it, not again.
                if !steppers.iter().any(|t| Rc::ptr_eq(t, s)) {
                    steppers.push(s.clone());
                }
                a.target = Target::Looplet(s.chunk.clone());
            }
            Ok(())
        })?;
        let mut code = vec![];
        for s in &steppers {
            code.extend((s.seek)(&ext.start));
        }
        if ext.is_point() {
            // After seeking, every stepper's current chunk reaches the point: no loop.
            let chunk = self.lower_loop(index, ext, body)?;
            if chunk.is_empty() {
                return Ok(vec![]);
            }
            code.extend(chunk);
            return Ok(code);
        }
        if let [s] = steppers.as_slice()
            && let Some(walk) = self.lower_walk(index, &ext, s, &body, &unspecialised)?
        {
            code.extend(walk);
            return Ok(code);
        }
        let i = self.cx.var(index, ElemType::I64);
        let e = self.cx.var(&format!("{index}_step"), ElemType::I64);
        self.loop_facts(i, e, &ext);
        code.push(b::assign(i, ext.start.clone()));
        let mut step = ext.stop.clone();
        for s in &steppers {
            step = b::min(s.stop.clone(), step);
        }
        let chunk = self.lower_loop(
            index,
            Ext {
                start: b::var(i),
                stop: b::var(e),
            },
            body,
        )?;
        if chunk.is_empty() {
            // Every stepper loop seeks to its own start, so skipping one leaves no stale state.
            return Ok(vec![]);
        }
        let mut inner = vec![b::assign(e, step)];
        inner.extend(chunk);
        for s in &steppers {
            // Advance only past a chunk that reached the stepper's entry: the last chunk may
            // be cut short by the extent, and a later seek continues from this position.
            inner.extend(b::if_(b::eq(s.stop.clone(), b::var(e)), s.next.clone()));
        }
        inner.push(b::assign(i, b::add(b::var(e), b::int(1))));
        inner.extend(self.short_circuit_exit(index, b::var(i), &ext.stop, &unspecialised)?);
        code.push(Stmt::While {
            cond: b::le(b::var(i), ext.stop),
            body: inner,
        });
        Ok(code)
    }

    /// One stepper whose chunks are spikes over a part that does nothing (a sparse list read
    /// where the statement vanishes on its fill): visit the stored coordinates only,
    /// `while i <= stop { e = entry; if e > stop break; tail at e; next; i = e + 1 }`, without
    /// the generic chunk's `min` and the tests of whether the chunk reached its entry.
    fn lower_walk(
        &mut self,
        index: &str,
        ext: &Ext,
        s: &Rc<crate::looplets::Stepper>,
        body: &[LStmt],
        unspecialised: &[LStmt],
    ) -> Result<Option<Vec<Stmt>>> {
        let Looplet::Spike {
            at,
            body: gap,
            tail,
        } = &s.chunk
        else {
            return Ok(None);
        };
        if *at != s.stop {
            return Ok(None);
        }
        let i = self.cx.var(index, ElemType::I64);
        let e = self.cx.var(&format!("{index}_entry"), ElemType::I64);
        self.loop_facts(i, e, ext);
        let mut before = body.to_vec();
        replace_head(&mut before, index, &mut |l| match l {
            Looplet::Spike { .. } => Some(Target::Looplet(Looplet::Run(gap.clone()))),
            _ => None,
        });
        let gap_ext = Ext {
            start: b::var(i),
            stop: b::sub(b::var(e), b::int(1)),
        };
        if !self.lower_loop(index, gap_ext, before)?.is_empty() {
            return Ok(None);
        }
        let mut at_entry = body.to_vec();
        replace_head(&mut at_entry, index, &mut |l| match l {
            Looplet::Spike { .. } => Some(Target::Looplet(Looplet::Run(tail.clone()))),
            _ => None,
        });
        let point = Ext {
            start: b::var(e),
            stop: b::var(e),
        };
        let chunk = self.lower_loop(index, point, at_entry)?;
        if chunk.is_empty() {
            return Ok(Some(vec![]));
        }
        // Positions advanced one by one become a counted loop over those whose coordinate is
        // inside the extent (found once, by a search only when the extent ends before the
        // last entry); backends can free such a loop of per-access bounds checks.
        if let (Some(pos), [Stmt::Assign(q, step)]) = (&s.positions, s.next.as_slice())
            && *step == b::add(b::var(*q), b::int(1))
        {
            let end = self.cx.var(&format!("{index}_entries_end"), ElemType::I64);
            let mut inner = vec![b::assign(e, s.stop.clone())];
            inner.extend(chunk);
            let next = b::add(b::var(e), b::int(1));
            inner.extend(self.short_circuit_exit(index, next, &ext.stop, unspecialised)?);
            let mut code = vec![b::assign(end, pos.end.clone())];
            code.extend(b::if_(
                b::lt(ext.stop.clone(), pos.last.clone()),
                vec![b::assign(
                    end,
                    Expr::SearchGe {
                        buf: pos.coords,
                        lo: Box::new(b::var(*q)),
                        hi: Box::new(pos.end.clone()),
                        key: Box::new(b::add(ext.stop.clone(), b::int(1))),
                    },
                )],
            ));
            code.push(Stmt::For {
                var: *q,
                start: b::var(*q),
                stop: b::var(end),
                body: inner,
            });
            return Ok(Some(code));
        }
        let mut inner = vec![b::assign(e, s.stop.clone())];
        inner.extend(b::if_(
            b::lt(ext.stop.clone(), b::var(e)),
            vec![Stmt::Break],
        ));
        inner.extend(chunk);
        inner.extend(s.next.clone());
        inner.push(b::assign(i, b::add(b::var(e), b::int(1))));
        inner.extend(self.short_circuit_exit(index, b::var(i), &ext.stop, unspecialised)?);
        Ok(Some(vec![
            b::assign(i, ext.start.clone()),
            Stmt::While {
                cond: b::le(b::var(i), ext.stop.clone()),
                body: inner,
            },
        ]))
    }

    /// Leapfrog: each chunk ends at the largest stop among the jumpers; the jumper that reaches
    /// it contributes a spike, the others skip ahead (binary search) and walk their entries.
    fn lower_jumper(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let unspecialised = body.clone();
        let mut jumpers: Vec<Rc<crate::looplets::Jumper>> = vec![];
        node::visit_accesses_mut(&mut body, &mut |a| {
            if a.head() == Some(index)
                && let Target::Looplet(Looplet::Jumper(j)) = &a.target
                && !jumpers.iter().any(|k| Rc::ptr_eq(k, j))
            {
                jumpers.push(j.clone());
            }
            Ok(())
        })?;
        let mut code = vec![];
        for j in &jumpers {
            code.extend((j.seek)(&ext.start));
        }
        if ext.is_point() {
            // After seeking, the point is the jumper's entry or lies before it.
            let at = ext.start.clone();
            replace_head(&mut body, index, &mut |l| match l {
                Looplet::Jumper(j) => Some(Target::Looplet(Looplet::Switch(vec![
                    (b::eq(j.stop.clone(), at.clone()), j.spike.clone()),
                    (b::boolean(true), j.walk.clone()),
                ]))),
                _ => None,
            });
            let chunk = self.lower_loop(index, ext, body)?;
            if chunk.is_empty() {
                return Ok(vec![]);
            }
            code.extend(chunk);
            return Ok(code);
        }
        let i = self.cx.var(index, ElemType::I64);
        let e = self.cx.var(&format!("{index}_jump"), ElemType::I64);
        self.loop_facts(i, e, &ext);
        code.push(b::assign(i, ext.start.clone()));
        let lead = jumpers
            .iter()
            .skip(1)
            .fold(jumpers[0].stop.clone(), |m, j| b::max(m, j.stop.clone()));
        // Whether each jumper leads the chunk is decided before the chunk runs: a walk moves
        // its jumper past the chunk's end, so testing `stop == e` afterwards would read the
        // entry after it (past the fiber's end for its last entry).
        let mut inner = vec![b::assign(e, b::min(lead, ext.stop.clone()))];
        let mut led = vec![];
        for j in &jumpers {
            let flag = self.cx.var(&format!("{index}_led"), ElemType::Bool);
            inner.push(b::assign(flag, b::eq(j.stop.clone(), b::var(e))));
            led.push((Rc::as_ptr(j), flag));
        }
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Jumper(j) => {
                let flag = led.iter().find(|(p, _)| *p == Rc::as_ptr(j))?.1;
                Some(Target::Looplet(Looplet::Switch(vec![
                    (b::var(flag), j.spike.clone()),
                    (b::boolean(true), j.walk.clone()),
                ])))
            }
            _ => None,
        });
        let chunk = self.lower_loop(
            index,
            Ext {
                start: b::var(i),
                stop: b::var(e),
            },
            body,
        )?;
        if chunk.is_empty() {
            return Ok(vec![]);
        }
        inner.extend(chunk);
        for (j, (_, flag)) in jumpers.iter().zip(&led) {
            inner.extend(b::if_(b::var(*flag), j.next.clone()));
        }
        inner.push(b::assign(i, b::add(b::var(e), b::int(1))));
        inner.extend(self.short_circuit_exit(index, b::var(i), &ext.stop, &unspecialised)?);
        code.push(Stmt::While {
            cond: b::le(b::var(i), ext.stop),
            body: inner,
        });
        Ok(code)
    }

    fn lower_assign(
        &mut self,
        lhs: LAccess,
        op: AssignOp,
        rhs: LExpr,
        span: Span,
    ) -> Result<Vec<Stmt>> {
        if !lhs.indices.is_empty() {
            return Err(Error::program(
                span,
                format!("`{}` is written before its indices are bound", lhs.tensor),
            ));
        }
        let fiber = match &lhs.target {
            Target::Null => return Ok(vec![]),
            Target::Fiber(f) => f.clone(),
            _ => {
                return Err(Error::program(
                    span,
                    format!("internal: write to `{}` was not lowered", lhs.tensor),
                ));
            }
        };
        let (r, rclass) = emit_expr(&rhs, span)?;
        let elem = fiber.tensor.elem;
        let imp = level_impl(&fiber.tensor.format.levels[fiber.level]);
        let value: Box<dyn Fn(Expr) -> Expr> = match &op {
            AssignOp::Overwrite => {
                let v = super::emit::convert(r, rclass, elem.class());
                Box::new(move |_| v.clone())
            }
            AssignOp::Reduce(red) => {
                let red = red.clone();
                let (compute, result) =
                    crate::semantics::reducer_classes(&red, elem.class(), rclass)
                        .map_err(|m| Error::program(span, m))?;
                let r = super::emit::convert(r, rclass, compute);
                Box::new(move |old| {
                    let old = super::emit::convert(old, elem.class(), compute);
                    let v = super::emit::apply_reducer(&red, old, r.clone(), compute);
                    super::emit::convert(v, result, elem.class())
                })
            }
        };
        imp.update_leaf(&mut self.cx, &fiber, value.as_ref())
            .ok_or_else(|| {
                Error::unsupported(
                    span,
                    format!(
                        "`{}`'s format {} cannot record writes at this level",
                        lhs.tensor, fiber.tensor.format
                    ),
                )
            })
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

/// Whether two fibers are the same position of the same level of one tensor.
fn same_fiber(f: &Fiber, g: &Fiber) -> bool {
    f.tensor.name == g.tensor.name
        && f.level == g.level
        && f.pos == g.pos
        && f.pos_hi == g.pos_hi
        && f.sub == g.sub
        && f.coords == g.coords
}

/// The statements of a loop body that does not use its index, rewritten to run once for an
/// extent of length `len`; `None` if some statement cannot be integrated.
fn integrated(body: &[LStmt], len: &Expr) -> Option<Vec<LStmt>> {
    let mut out = vec![];
    for s in body {
        out.push(match s {
            LStmt::Assign { lhs, op, rhs, span } => {
                let rhs = match op {
                    AssignOp::Reduce(r) if symbolic::algebra::is_idempotent(r) => rhs.clone(),
                    // Reducing by the annihilator once or many times gives the annihilator.
                    AssignOp::Reduce(r) if matches!(rhs, LExpr::Lit(v) if symbolic::algebra::annihilator(r, v.ty().class()) == Some(*v)) => {
                        rhs.clone()
                    }
                    AssignOp::Overwrite => rhs.clone(),
                    AssignOp::Reduce(
                        crate::notation::ast::Reducer::Add | crate::notation::ast::Reducer::Sub,
                    ) => LExpr::Binary(
                        crate::notation::ast::BinaryOp::Mul,
                        Box::new(LExpr::Ir(len.clone(), ElemType::I64)),
                        Box::new(rhs.clone()),
                        *span,
                    ),
                    _ => return None,
                };
                LStmt::Assign {
                    lhs: lhs.clone(),
                    op: op.clone(),
                    rhs,
                    span: *span,
                }
            }
            LStmt::Loop {
                index,
                start,
                stop,
                body,
                span,
                bounds,
            } => LStmt::Loop {
                index: index.clone(),
                start: start.clone(),
                stop: stop.clone(),
                body: integrated(body, len)?,
                span: *span,
                bounds: bounds.clone(),
            },
            LStmt::If {
                cond,
                then,
                otherwise,
                span,
            } => LStmt::If {
                cond: cond.clone(),
                then: integrated(then, len)?,
                otherwise: integrated(otherwise, len)?,
                span: *span,
            },
            LStmt::Let {
                name,
                value,
                body,
                span,
            } => LStmt::Let {
                name: name.clone(),
                value: value.clone(),
                body: integrated(body, len)?,
                span: *span,
            },
            LStmt::Declare { .. } | LStmt::Freeze { .. } | LStmt::Thaw { .. } => return None,
        });
    }
    Some(out)
}

/// Repeating `t += x; t = y` is not `t += len * x; t = y`: a tensor summed into may not be
/// written with any other operator in the same body.
fn integrable_ops(body: &[LStmt]) -> bool {
    fn collect(body: &[LStmt], out: &mut Vec<(String, bool)>) {
        for s in body {
            match s {
                LStmt::Assign { lhs, op, .. } => out.push((
                    lhs.tensor.clone(),
                    matches!(
                        op,
                        AssignOp::Reduce(
                            crate::notation::ast::Reducer::Add | crate::notation::ast::Reducer::Sub
                        )
                    ),
                )),
                LStmt::Loop { body, .. } | LStmt::Let { body, .. } => collect(body, out),
                LStmt::If {
                    then, otherwise, ..
                } => {
                    collect(then, out);
                    collect(otherwise, out);
                }
                _ => {}
            }
        }
    }
    let mut writes = vec![];
    collect(body, &mut writes);
    writes
        .iter()
        .all(|(t, sum)| !sum || writes.iter().all(|(u, other)| u != t || *other))
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

/// Let-bound values were substituted as I64; give them their real type.
fn retype(body: &mut [LStmt], var: crate::ir::VarId, ty: ElemType) {
    let _ = node::visit_exprs_mut(body, &mut |e| {
        if let LExpr::Ir(Expr::Var(v), t) = e
            && *v == var
        {
            *t = ty;
        }
        Ok(())
    });
}

/// Collect the code of every thunk in the statements and replace each by its body. A thunk
/// shared by several accesses (one writer for several writes) runs once.
fn hoist_thunks(body: &mut [LStmt]) -> Result<(Vec<Stmt>, Vec<Stmt>)> {
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

fn styles_of(body: &mut [LStmt], index: &str) -> Vec<Style> {
    let mut styles = vec![];
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(l) = &a.target
        {
            styles.push(l.style());
        }
        Ok(())
    });
    styles
}

/// Replace the looplet of every access headed by `index` for which `f` returns a target;
/// a replacement that is not a looplet consumes the index.
fn replace_head(body: &mut [LStmt], index: &str, f: &mut dyn FnMut(&Looplet) -> Option<Target>) {
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(l) = &a.target
            && let Some(t) = f(l)
        {
            if consumes_index(&t) {
                a.advance(t);
            } else {
                a.target = t;
            }
        }
        Ok(())
    });
}

/// Whether a replacement is the value at the index (a fiber, or a thunk around one) rather
/// than another looplet over the same index.
fn consumes_index(t: &Target) -> bool {
    match t {
        Target::Looplet(Looplet::Thunk { body, .. }) => consumes_index(body),
        Target::Looplet(_) => false,
        _ => true,
    }
}

/// The position (in visiting order) and looplet of the first access headed by `index` whose
/// looplet satisfies `pred`.
fn take_first(
    body: &mut [LStmt],
    index: &str,
    pred: impl Fn(&Looplet) -> bool,
) -> Option<(usize, Looplet)> {
    let mut k = 0;
    let mut found = None;
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if found.is_none()
            && a.head() == Some(index)
            && let Target::Looplet(l) = &a.target
            && pred(l)
        {
            found = Some((k, l.clone()));
        }
        k += 1;
        Ok(())
    });
    found
}

/// Sequences with the same phase boundaries as the one being lowered (the same mask in both
/// branches of an `if`, or tested twice) split with it: phase `k` of each takes its place,
/// rather than every copy cutting every phase again.
fn split_alike(body: &mut [LStmt], index: &str, stops: &[Option<Expr>], k: usize) {
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(Looplet::Sequence(ps)) = &a.target
            && ps.len() == stops.len()
            && ps.iter().zip(stops).all(|(p, s)| p.stop == *s)
        {
            let t = Target::Looplet(ps[k].body.clone());
            a.target = t;
        }
        Ok(())
    });
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

/// Set the target of the access at visiting position `path`.
fn set_at(body: &mut [LStmt], path: &usize, t: Target) {
    let mut k = 0;
    let mut t = Some(t);
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if k == *path {
            match t.take() {
                Some(Target::Looplet(l)) => a.target = Target::Looplet(l),
                Some(other) => a.advance(other),
                None => {}
            }
        }
        k += 1;
        Ok(())
    });
}

/// Tensors declared in `stmts` whose following writes (up to their freeze) are overwrites
/// that name every enclosing loop index, so each element is written at most once. Several
/// writes qualify when they sit in exclusive branches of `if`s (the split a permissive access
/// makes) and address the element the same way, so no two iterations can reach one element.
fn write_once_tensors(stmts: &[LStmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for (k, s) in stmts.iter().enumerate() {
        let LStmt::Declare { tensor, .. } = s else {
            continue;
        };
        let end = stmts[k + 1..]
            .iter()
            .position(|s| matches!(s, LStmt::Freeze { tensor: t } if t == tensor))
            .map_or(stmts.len(), |p| k + 1 + p);
        let mut writes = vec![];
        let per_pass = collect_writes(&stmts[k + 1..end], tensor, &mut vec![], &mut writes);
        let once = match writes.as_slice() {
            [] => true,
            [(_, first, _, _), ..] => {
                per_pass <= 1
                    && writes.iter().all(|(op, lhs, loops, plain)| {
                        let distinct: HashSet<&String> = lhs.iter().collect();
                        *op == AssignOp::Overwrite
                            && distinct.len() == lhs.len()
                            && loops.iter().all(|l| lhs.contains(l))
                            && (writes.len() == 1 || (lhs == first && *plain))
                    })
            }
        };
        if once {
            out.insert(tensor.clone());
        }
    }
    out
}

/// (operator, indices, enclosing loops, whether the indices carry no offsets)
type Write = (AssignOp, Vec<String>, Vec<String>, bool);

/// Collect the writes to `tensor`; returns how many of them one pass through `stmts` can
/// execute (the branches of an `if` are exclusive; loops are judged by their indices).
fn collect_writes(
    stmts: &[LStmt],
    tensor: &str,
    loops: &mut Vec<String>,
    out: &mut Vec<Write>,
) -> usize {
    let mut n = 0;
    for s in stmts {
        n += match s {
            LStmt::Assign { lhs, op, .. } if lhs.tensor == tensor => {
                let plain = lhs.offsets.iter().all(|o| o.is_none());
                out.push((op.clone(), lhs.indices.clone(), loops.clone(), plain));
                1
            }
            LStmt::Loop { index, body, .. } => {
                loops.push(index.clone());
                let k = collect_writes(body, tensor, loops, out);
                loops.pop();
                k
            }
            LStmt::If {
                then, otherwise, ..
            } => collect_writes(then, tensor, loops, out)
                .max(collect_writes(otherwise, tensor, loops, out)),
            LStmt::Let { body, .. } => collect_writes(body, tensor, loops, out),
            // A second declaration starts a new region, judged on its own.
            LStmt::Declare { tensor: t, .. } if t == tensor => return n,
            _ => 0,
        };
    }
    n
}
