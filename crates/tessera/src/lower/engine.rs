//! The recursive lowering engine, the driver of the looplet rules: one loop at a time,
//! outermost first, it unfurls the accesses headed by the loop's index and hands the body to
//! the rule (in `looplets/`, one file per kind) of the highest style present (see
//! `looplets::Style`); without looplets left it emits the plain loop.

use super::emit::{convert, emit_expr, emit_index};
use super::node::{self, LAccess, LExpr, LStmt, Mode};
use super::simplify;
use crate::error::{Error, Result};
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::levels::registry::reopen_error;
use crate::levels::{LevelRef, level_impl};
use crate::looplets::tensor::TensorInfo;
use crate::looplets::{
    Ext, Fiber, IndexKind, Integer, Kind, Looplet, Lowerer, Style, Target, accept_run, jumper,
    lookup, run, sequence, spike, stepper, switch, thunk,
};
use crate::notation::ast::{AssignOp, Span};
use crate::symbolic;
use crate::types::{Class, ElemType, Scalar};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

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
    /// Tensors a loop both reads and writes (state variables, `transforms::lifecycle`): a
    /// loop writing one is never collapsed, since each iteration reads what the last wrote.
    pub carried: HashSet<String>,
    /// Bounds of phase and loop variables: provably empty phases are skipped, phases of one
    /// coordinate lowered as points.
    pub facts: crate::symbolic::bounds::Facts,
    /// Where a failing bounds check stores the value it reports: buffer 0 (the dimensions),
    /// one slot past the last dimension.
    pub detail: (crate::ir::BufId, i64),
    /// The parallel loops (by the `(line, column)` of their statement and their index) and
    /// what each privatises, from `transforms::parallel::check_parallel`. The index is
    /// part of the key because a generated program (an einsum plan) gives several loops one
    /// place: without it, the loops nested in a parallel one were lowered as parallel too
    /// (their extents opaque chunk bounds, so sparse levels searched for their start).
    pub parallel: HashMap<(u32, u32, String), crate::transforms::parallel::Plan>,
    /// The vectorised loops (`vectorize(i)`), keyed as `parallel`.
    pub vector: HashSet<(u32, u32, String)>,
    /// The counted loops lowered from them (`Kernel::vectorized`).
    pub vectorized: Vec<crate::ir::VarId>,
    /// The counted loops that walk a fiber's stored positions, with the index they walk
    /// (`Lowerer::walked`): lanes of a vectorised loop over that index.
    pub walks: Vec<(crate::ir::VarId, String)>,
}

impl Engine {
    pub fn lower_block(&mut self, mut stmts: Vec<LStmt>) -> Result<Vec<Stmt>> {
        let (pre, post) = thunk::hoist(&mut stmts)?;
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
                if let Some((start, stop)) = real_extent(&start, &stop, span)? {
                    // A real loop: its points are Limits, its bounds checks none (a real
                    // dimension spans the whole line).
                    let mut code = vec![];
                    let start = self.pin(&mut code, start, &format!("{index}_start"));
                    let stop = self.pin(&mut code, stop, &format!("{index}_stop"));
                    let lowered = self.lower_loop(&index, Ext { start, stop }, body);
                    code.extend(lowered.map_err(|e| e.or_at(span))?);
                    return Ok(code);
                }
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
                if let Some(plan) = self
                    .parallel
                    .get(&(span.line, span.col, index.clone()))
                    .cloned()
                    && let Some(mut private) = self.private_bufs(&plan.private)
                    && let Some((rows, counts)) = self.rows_of(&plan.rows)
                {
                    private.extend(counts);
                    let scratch = self.scratch_bufs(&plan.scratch);
                    let scratch_state = plan
                        .scratch
                        .iter()
                        .filter_map(|t| self.tensors.get(t))
                        .flat_map(|t| t.level_vars.iter().flatten().copied())
                        .collect();
                    // Each chunk lowers the loop over its own part `lo..=hi`: looplets seek
                    // their start there as at any loop start.
                    let lo = self.cx.var(&format!("{index}_lo"), ElemType::I64);
                    let hi = self.cx.var(&format!("{index}_hi"), ElemType::I64);
                    let ext = Ext {
                        start: b::var(lo),
                        stop: b::var(hi),
                    };
                    let (weights, nested) = self.weights(&index, &body);
                    let lowered = self.lower_loop(&index, ext, body);
                    let body = lowered.map_err(|e| e.or_at(span))?;
                    code.push(Stmt::Chunked(Box::new(crate::ir::Chunked {
                        lo,
                        hi,
                        start,
                        stop,
                        body,
                        private,
                        scratch,
                        scratch_state,
                        rows,
                        weights,
                        nested,
                        atomics: match plan.folds {
                            crate::notation::ast::Folds::Auto => None,
                            crate::notation::ast::Folds::Atomics => Some(true),
                            crate::notation::ast::Folds::Copies => Some(false),
                        },
                    })));
                    return Ok(code);
                }
                // An error the loop's lowering raised without a place (the kernel grew too
                // large) is placed at the innermost loop statement around it.
                let first_var = self.cx.vars.len();
                let lowered = self.lower_loop(&index, Ext { start, stop }, body);
                let lowered = lowered.map_err(|e| e.or_at(span))?;
                if self.vector.contains(&(span.line, span.col, index.clone())) {
                    // The counted loops over this index that its lowering made (a Dense
                    // range's `Lookup`, each phase's): the ones that run in lanes.
                    mark_counted(
                        &lowered,
                        &index,
                        first_var,
                        &self.cx.vars,
                        &self.walks,
                        &mut self.vectorized,
                    );
                }
                code.extend(lowered);
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

impl Engine {
    /// The buffers of privatised outputs with their folds and identities; `None` when one
    /// cannot be folded by a built-in operator (a user reducer: the loop then runs serially).
    fn private_bufs(
        &self,
        private: &[(String, crate::notation::ast::Reducer)],
    ) -> Option<Vec<crate::ir::Private>> {
        use crate::ir::{BinOp, Fold};
        use crate::notation::ast::Reducer;
        let mut out = vec![];
        for (tensor, r) in private {
            let t = self.tensors.get(tensor)?;
            let fold = match r {
                Reducer::Add => Fold::Op(BinOp::Add),
                Reducer::Mul => Fold::Op(BinOp::Mul),
                Reducer::Min => Fold::Op(BinOp::Min),
                Reducer::Max => Fold::Op(BinOp::Max),
                Reducer::And => Fold::Op(BinOp::And),
                Reducer::Or => Fold::Op(BinOp::Or),
                Reducer::Choose(z) if choose_folds_exactly(*z, t.elem) => Fold::Choose,
                _ => return None,
            };
            let identity = symbolic::algebra::identity(r, t.elem.class())?;
            let identity = crate::semantics::convert(identity.widen(), t.elem.compute().class());
            // A densely stored tensor keeps its values in one array, its leaf's.
            let bufs: Vec<_> = t.level_bufs.iter().flatten().copied().collect();
            let [buf] = bufs.as_slice() else {
                return None;
            };
            out.push(crate::ir::Private {
                buf: *buf,
                fold,
                identity,
                atomic: false,
            });
        }
        Some(out)
    }

    /// The appending levels of sparse outputs whose rows the chunks append separately
    /// (`Plan::rows`), and the per-fiber count arrays to sum over the chunks: an output whose
    /// first level appends (a 1-D sparse vector) has one fiber, which every chunk appends to,
    /// so each chunk counts its entries into a copy of the array starting at zero
    /// ([`crate::levels::Level::fiber_counts`]). `None` when a level cannot say what it
    /// appends to (the loop then runs serially: its chunks would share the appends).
    fn rows_of(&self, rows: &[String]) -> Option<(Vec<crate::ir::Rows>, Vec<crate::ir::Private>)> {
        let mut out = vec![];
        let mut counts = vec![];
        for name in rows {
            let t = self.tensors.get(name)?;
            let level = crate::levels::row_appended_level(&t.format)?;
            let l = LevelRef { tensor: t, level };
            let imp = level_impl(l.kind());
            out.push(imp.appends(&l)?);
            if level == 0
                && let Some(buf) = imp.fiber_counts(&l)
            {
                counts.push(crate::ir::Private {
                    buf,
                    fold: crate::ir::Fold::Op(crate::ir::BinOp::Add),
                    identity: crate::types::Scalar::zero(
                        self.cx.bufs[buf.0 as usize].elem.compute(),
                    ),
                    atomic: false,
                });
            }
        }
        Some((out, counts))
    }

    /// Every array of the tensors a parallel loop's iterations declare afresh (a tensor the
    /// lowering keeps in variables has none).
    fn scratch_bufs(&self, scratch: &[String]) -> Vec<crate::ir::BufId> {
        let mut out: Vec<_> = scratch
            .iter()
            .filter_map(|t| self.tensors.get(t))
            .flat_map(|t| t.level_bufs.iter().flatten().copied())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The position array of a level that the parallel loop over `index` drives through its
    /// parent's positions (the rows of CSR under `for i`): `pos[i]..pos[i + 1]` are row `i`'s
    /// entries, so chunks can be cut at equal numbers of entries. With it, the fiber another
    /// read walks under each of those entries, if any (`B[k, :]` under `A[i, k]`): the
    /// entries' coordinates and that level's positions, which let the runner count the
    /// iterations of the nested loop too (`ir::Nested`).
    fn weights(
        &self,
        index: &str,
        body: &[LStmt],
    ) -> (Option<crate::ir::BufId>, Option<crate::ir::Nested>) {
        let mut reads = vec![];
        let mut body = body.to_vec();
        let _ = node::visit_accesses_mut(&mut body, &mut |a: &mut LAccess| {
            if a.mode == Mode::Read
                && let Some(rows) = self.csr_rows(a)
            {
                reads.push(rows);
            }
            Ok(())
        });
        let Some(outer) = reads.iter().find(|r| r.head == index) else {
            return (None, None);
        };
        // The weighed level's next index heads another such read: its row under each entry.
        let nested = outer.crd.and_then(|crd| {
            let next = outer.next.as_deref()?;
            let inner = reads.iter().find(|r| r.head == next)?;
            Some(crate::ir::Nested {
                crd,
                ptr: inner.ptr,
            })
        });
        (Some(outer.ptr), nested)
    }

    /// A read `X[h, n, ...]` of a root level without arrays (its positions are its
    /// coordinates) over a sparse level whose first array is its `ptr` (per parent position,
    /// where its entries start), with no offset on `h`: the rows of a CSR-like tensor.
    fn csr_rows(&self, a: &LAccess) -> Option<CsrRows> {
        let Target::Fiber(f) = &a.target else {
            return None;
        };
        let int = |b: &crate::ir::BufId, suffix: &str| {
            self.cx.bufs.get(b.0 as usize).is_some_and(|d| {
                matches!(d.elem, ElemType::I64 | ElemType::I32) && d.name.ends_with(suffix)
            })
        };
        let head = a.head()?;
        let sparse = f.tensor.level_bufs.get(1)?;
        let ptr = *sparse.first()?;
        (f.level == 0
            && a.offsets.first().is_some_and(Option::is_none)
            && f.tensor.level_bufs.first().is_some_and(Vec::is_empty)
            && f.tensor
                .format
                .levels
                .get(1)
                .is_some_and(|k| k.caps().sparse)
            && int(&ptr, "ptr"))
        .then(|| CsrRows {
            head: head.to_string(),
            ptr,
            // The second index is plain (no offset), so the row's coordinates are its
            // entries' `idx`.
            next: a
                .indices
                .get(1)
                .filter(|_| a.offsets.get(1).is_some_and(Option::is_none))
                .cloned(),
            crd: sparse.get(1).copied().filter(|b| int(b, "idx")),
        })
    }
}

/// What [`Engine::csr_rows`] finds of a read: its head index and position array, its next
/// index and the coordinates of its entries.
struct CsrRows {
    head: String,
    ptr: crate::ir::BufId,
    next: Option<String>,
    crd: Option<crate::ir::BufId>,
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
        let kind = Kind::of_ext(cx, &ext);
        let mut checks = vec![];
        let mut binds = vec![];
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
                    // On a real loop the offset is a real point (an exact one: a value, not
                    // an end moved by ε); integer offsets (outer integer indices) convert.
                    Some(o) if kind == Kind::Real => {
                        let (v, class) = emit_expr(o, a.span)?;
                        Some(b::make_limit(convert(v, class, Class::Float), b::int(0)))
                    }
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
                // The offset is fixed while the loop runs, but the shifted looplet uses it at
                // every step (each search probe, each chunk's ends): compute it once, before
                // the loop, unless it is a constant or a variable already.
                let key_offset = offset.clone();
                let mut bind = |e: Expr, ty: ElemType| match e {
                    Expr::Const(_) | Expr::Var(_) => e,
                    e => {
                        let v = cx.var(&format!("{index}_shift"), ty);
                        binds.push(b::assign(v, e));
                        b::var(v)
                    }
                };
                let offset = offset.map(|o| match o {
                    // A real offset is an exact point: bind its value, so the Limit arithmetic
                    // of the shifted looplet sees the infinitesimal 0 and drops it.
                    Expr::MakeLimit(v, eps) => b::make_limit(bind(*v, ElemType::F64), *eps),
                    o => bind(o, ElemType::I64),
                });
                let imp = level_impl(&f.tensor.format.levels[f.level]);
                let l = match a.mode {
                    Mode::Read => imp.unfurl_read(cx, f, a.head_protocol())?,
                    Mode::Update => imp.unfurl_update(cx, f)?,
                };
                let l = match &offset {
                    // The real line is unbounded: a shifted real access cannot leave it.
                    Some(c) if kind == Kind::Real => super::wrappers::shift(&l, c, kind),
                    Some(c) => {
                        checks.extend(super::wrappers::offset_check(
                            cx,
                            &self.facts,
                            a,
                            f,
                            &ext,
                            c,
                        ));
                        super::wrappers::shift(&l, c, kind)
                    }
                    None => l,
                };
                unfurled.push(((f.clone(), key_offset, mode, protocol), l.clone()));
                a.target = Target::Looplet(l);
            }
            Ok(())
        })?;
        let (mut pre, post) = thunk::hoist(&mut body)?;
        pre.splice(0..0, binds.into_iter().chain(checks));
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
            Some(Style::Switch) => switch::lower(self, index, ext, body)?,
            Some(Style::Sequence) => sequence::lower(self, index, ext, body)?,
            Some(Style::Spike) => spike::lower(self, index, ext, body)?,
            Some(Style::Run) => run::lower(self, index, ext, body)?,
            Some(Style::Jumper) => jumper::lower(self, index, ext, body)?,
            Some(Style::Stepper) => stepper::lower(self, index, ext, body)?,
            Some(Style::Lookup) => lookup::lower(self, index, ext, body)?,
            Some(Style::AcceptRun) => accept_run::lower(self, index, ext, body)?,
        });
        code.extend(post);
        Ok(code)
    }

    /// No looplet depends on the index: integrate what can be integrated, else loop densely.
    fn lower_plain(&mut self, index: &str, ext: Ext, mut body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        if Kind::of_ext(&self.cx, &ext) == Kind::Real {
            return super::continuous::lower_plain(self, index, ext, body);
        }
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
            Integer::after(&b::var(v)),
            &ext.stop,
            &unspecialised,
        )?);
        Ok(vec![Stmt::For {
            var: v,
            stop: ext.end_after(),
            start: ext.start,
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
        let len = ext.measure();
        if !integrable_ops(body) || writes_any(body, &self.carried) {
            return Ok(None);
        }
        let Some(out) = integrated(body, &len) else {
            return Ok(None);
        };
        let code = self.lower_block(out)?;
        Ok(Some(self.if_nonempty(ext, code)))
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

/// The engine as the looplet rules see it.
impl Lowerer for Engine {
    fn walked(&mut self, var: crate::ir::VarId, index: &str) {
        self.walks.push((var, index.to_string()));
    }
    fn cx(&mut self) -> &mut Cx {
        &mut self.cx
    }
    fn facts(&self) -> &crate::symbolic::bounds::Facts {
        &self.facts
    }
    fn facts_mut(&mut self) -> &mut crate::symbolic::bounds::Facts {
        &mut self.facts
    }
    fn lower_loop(&mut self, index: &str, ext: Ext, body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        Engine::lower_loop(self, index, ext, body)
    }
    fn lower_block(&mut self, body: Vec<LStmt>) -> Result<Vec<Stmt>> {
        Engine::lower_block(self, body)
    }
    fn simplify(&self, body: &mut Vec<LStmt>) {
        simplify::simplify_stmts(body, &self.declared);
    }
    fn short_circuit_exit(
        &mut self,
        index: &str,
        next: Expr,
        stop: &Expr,
        body: &[LStmt],
    ) -> Result<Vec<Stmt>> {
        Engine::short_circuit_exit(self, index, next, stop, body)
    }
    fn short_circuit_guard(
        &mut self,
        index: &str,
        ext: &Ext,
        body: &[LStmt],
        lowered: Vec<Stmt>,
    ) -> Result<Vec<Stmt>> {
        Engine::short_circuit_guard(self, index, ext, body, lowered)
    }
}

/// The Limit ends of a real loop (`for x = 0.5:9.0`: a float bound makes the loop real), or
/// `None` for an integer loop.
fn real_extent(start: &LExpr, stop: &LExpr, span: Span) -> Result<Option<(Expr, Expr)>> {
    let (a, ca) = emit_expr(start, span)?;
    let (z, cz) = emit_expr(stop, span)?;
    if ca != Class::Float && cz != Class::Float {
        return Ok(None);
    }
    let point = |v: Expr, c: Class| {
        let v = super::emit::convert(v, c, Class::Float);
        match v {
            Expr::Const(Scalar::F64(x)) => b::limit(x, 0),
            v => b::make_limit(v, b::int(0)),
        }
    };
    Ok(Some((point(a, ca), point(z, cz))))
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
/// Whether `body` writes one of `tensors`.
fn writes_any(body: &[LStmt], tensors: &HashSet<String>) -> bool {
    body.iter().any(|s| match s {
        LStmt::Assign { lhs, .. } => tensors.contains(&lhs.tensor),
        LStmt::Loop { body, .. } | LStmt::Let { body, .. } => writes_any(body, tensors),
        LStmt::If {
            then, otherwise, ..
        } => writes_any(then, tensors) || writes_any(otherwise, tensors),
        _ => false,
    })
}

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

/// Whether private copies of an output of type `elem` reduced with `<<choose(z)>>=` fold
/// back exactly ([`crate::ir::Fold::Choose`]): `z` must be a value the element type holds
/// (so the kernels' comparison and the fold's agree), and not a float zero, since `-0.0 ==
/// 0.0` would let a copy's untouched `z` replace the other zero. Otherwise the loop runs
/// serially.
fn choose_folds_exactly(z: Scalar, elem: ElemType) -> bool {
    use crate::types::Class;
    match (elem.class(), z.ty().class()) {
        (Class::Bool, Class::Bool) => true,
        (Class::Int, Class::Int) => z.cast(elem).as_i64() == z.as_i64(),
        (Class::Float, Class::Int | Class::Float) => {
            let v = z.as_f64();
            v != 0.0 && z.cast(elem).as_f64() == v
        }
        _ => false,
    }
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

/// Push the variables of the `For` loops in `code` that count over `index`: made by this
/// loop's lowering (variable `first_var` or later) and named after the index, or walking a
/// fiber's stored positions along it (`walks`).
fn mark_counted(
    code: &[Stmt],
    index: &str,
    first_var: usize,
    vars: &[crate::ir::VarDecl],
    walks: &[(crate::ir::VarId, String)],
    out: &mut Vec<crate::ir::VarId>,
) {
    let go = |body: &[Stmt], out: &mut Vec<crate::ir::VarId>| {
        mark_counted(body, index, first_var, vars, walks, out)
    };
    for s in code {
        match s {
            Stmt::For { var, body, .. } => {
                let named = var.0 as usize >= first_var && vars[var.0 as usize].name == index;
                // A walk's position variable belongs to the level (made before this loop's
                // lowering), so it is known by the walk's record, not by its name.
                let walk = walks.iter().any(|(v, i)| v == var && i == index);
                if (named || walk) && !out.contains(var) {
                    out.push(*var);
                }
                go(body, out);
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                go(then, out);
                go(otherwise, out);
            }
            Stmt::While { body, .. } => go(body, out),
            Stmt::Chunked(c) => go(&c.body, out),
            _ => {}
        }
    }
}
