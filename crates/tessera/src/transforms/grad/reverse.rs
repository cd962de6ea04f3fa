//! Reversal: the backward statements of each forward statement, in reverse order per body.
//!
//! Loops run forward in the backward pass too. Reversing a loop is needed when its iterations
//! communicate through a value one writes and a later one reads; the language forbids that
//! (a tensor read and written inside one loop must be declared inside it, so it is private to
//! an iteration), and what iterations still share are reductions, whose gradient
//! contributions (`dx[j] += ...`) commute. Inside a body the statements are reversed, so a
//! local's gradient is complete before it is propagated to what the local was computed from.

use super::derive::{
    Target, adjoint, bin, mul, neg, reads_active, reducer_derivative, select, zero,
};
use super::tape::{self, Tape, Tapes};
use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AssignOp, BinaryOp, Expr, ExprKind, LoopMode, Reducer, ReducerDef, Span, Stmt, StmtKind,
};
use crate::types::Scalar;
use std::collections::{BTreeMap, HashMap, HashSet};

pub(crate) struct Cx {
    /// Tensors and `let` variables that depend on a differentiated input.
    pub active: HashSet<String>,
    /// Gradient names of the active values (and of the differentiated inputs).
    pub grads: HashMap<String, String>,
    /// Differentiated inputs whose gradient is masked by their stored pattern → mask input.
    pub masks: BTreeMap<String, String>,
    pub mode: Tapes,
    pub tapes: Vec<Tape>,
    /// Every name in use (the program's and the generated ones).
    pub used: HashSet<String>,
    /// The program's user reducers (its statements name them: `Reducer::Named`).
    pub reducers: Vec<ReducerDef>,
    /// How many `vectorize` loops enclose the statement being reversed: their bodies get no
    /// zero-gradient guards (a branch in the body would cost the lanes).
    pub lanes: usize,
}

impl Cx {
    /// A name not used yet, `base` if possible.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut n = base.to_string();
        let mut k = 1;
        while self.used.contains(&n) || crate::notation::parse::is_keyword(&n) {
            n = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(n.clone());
        n
    }

    /// The gradient's name of an active value (`dA` for `A`).
    pub fn grad_name(&mut self, n: &str) -> String {
        if let Some(g) = self.grads.get(n) {
            return g.clone();
        }
        let g = self.fresh(&format!("d{n}"));
        self.grads.insert(n.to_string(), g.clone());
        g
    }

    /// The statements propagating `g` (the cotangent of `rhs`) to the values `rhs` reads.
    fn contributions(&mut self, rhs: &Expr, g: Expr, span: Span) -> Result<Vec<Stmt>> {
        let mut parts = vec![];
        adjoint(rhs, g, &self.active, &mut parts)?;
        // The gradients these contributions update; their repeated subexpressions are bound
        // to `let` variables around them (see `share`).
        let mut updated = HashSet::new();
        for (target, _) in &parts {
            let name = match target {
                Target::Element(a) => &a.tensor,
                Target::Name(n) => n,
            };
            updated.insert(self.grad_name(name));
        }
        let mut exprs: Vec<Expr> = parts.iter().map(|p| p.1.clone()).collect();
        let lets = super::share::share(&mut exprs, &updated, &mut || self.fresh("g"));
        let mut out = vec![];
        for ((target, _), c) in parts.into_iter().zip(exprs) {
            let (name, indices, swizzle) = match target {
                Target::Element(a) => (a.tensor, a.indices, a.swizzle),
                Target::Name(n) => (n, vec![], None),
            };
            let dname = self.grad_name(&name);
            let lhs = Access {
                tensor: dname,
                indices: indices.clone(),
                swizzle: swizzle.clone(),
                span,
            };
            let mut s = tape::stmt(
                StmtKind::Assign {
                    lhs,
                    op: AssignOp::Reduce(Reducer::Add),
                    rhs: c,
                },
                span,
            );
            // Masked semantics: only the input's stored entries receive a gradient, and the
            // mask's structure drives the loop, so the gradient has the input's pattern.
            if let Some(m) = self.masks.get(&name) {
                let cond = tape::read(Access {
                    tensor: m.clone(),
                    indices,
                    swizzle,
                    span,
                });
                s = tape::stmt(
                    StmtKind::If {
                        cond,
                        then: vec![s],
                        otherwise: vec![],
                    },
                    span,
                );
            }
            out.push(s);
        }
        Ok(super::guard::wrap(lets, out, span))
    }

    /// Forward and backward statements of one body. `loops`: the loop indices around it,
    /// outermost first (the version indices of its locals' tapes); `global`: the program's
    /// top level, whose values the forward part keeps.
    pub fn body(
        &mut self,
        stmts: &[Stmt],
        loops: &[String],
        global: bool,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>)> {
        let mut fwd = vec![];
        let mut parts = vec![];
        for s in stmts {
            let (f, b) = self.stmt(s, loops)?;
            fwd.push(f);
            parts.push(b);
        }
        let mut bwd: Vec<Stmt> = parts.into_iter().rev().flatten().collect();
        if global || bwd.is_empty() {
            return Ok((fwd, bwd));
        }
        let locals: Vec<(String, Expr, Span)> = stmts
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Declare { tensor, init } => Some((tensor.clone(), init.clone(), s.span)),
                _ => None,
            })
            .collect();
        if locals.is_empty() {
            return Ok((fwd, bwd));
        }
        let mut referenced = HashSet::new();
        tape::names_in(&bwd, &mut referenced);
        // The locals the backward body reads, and those their recomputation reads.
        let mut taped: Vec<String> = vec![];
        let mut recomputed: HashSet<String> = HashSet::new();
        let mut todo: Vec<String> = locals
            .iter()
            .map(|l| l.0.clone())
            .filter(|n| referenced.contains(n))
            .collect();
        while let Some(n) = todo.pop() {
            if taped.contains(&n) || recomputed.contains(&n) {
                continue;
            }
            let one: HashSet<String> = [n.clone()].into_iter().collect();
            let defs: Vec<&Stmt> = stmts.iter().filter(|s| tape::writes_any(s, &one)).collect();
            let tape_it = match self.mode {
                Tapes::All => true,
                Tapes::None => false,
                Tapes::Auto => defs.iter().any(|s| tape::has_loop(s)),
            };
            if tape_it {
                taped.push(n);
            } else {
                let mut reads = HashSet::new();
                for s in &defs {
                    tape::names_in(std::slice::from_ref(s), &mut reads);
                }
                todo.extend(
                    locals
                        .iter()
                        .map(|l| l.0.clone())
                        .filter(|l| *l != n && reads.contains(l)),
                );
                recomputed.insert(n);
            }
        }
        let mut prologue = vec![];
        for (n, init, span) in &locals {
            if !taped.contains(n) {
                continue;
            }
            let rank = rank_of(stmts, n);
            let qs: Vec<String> = (0..rank).map(|k| self.fresh(&format!("q{k}"))).collect();
            let name = self.fresh(&format!("{n}_tape"));
            let fill = match &init.kind {
                ExprKind::Literal(v) => *v,
                _ => Scalar::F64(0.0),
            };
            self.tapes.push(Tape {
                name: name.clone(),
                local: n.clone(),
                versions: loops.len(),
                rank: loops.len() + rank,
                fill,
            });
            // Forward: save the local's final value of this iteration, indexed by the
            // iteration (its version) and its own indices. A scalar set by one overwrite is
            // saved from its expression, so that the operands' fill still annihilates the
            // write and a loop over a sparse operand stores one entry per stored entry.
            let single = match single_definition(stmts, n) {
                Some(rhs) if rank == 0 => {
                    let lhs =
                        tape::access(&name, loops.iter().map(|l| tape::index(l)).collect(), *span);
                    tape::overwrite(lhs, rhs, *span)
                }
                _ => tape::copy(&name, loops, n, &[], &qs, *span),
            };
            fwd.push(single);
            // Backward: read it back.
            prologue.push(tape::stmt(
                StmtKind::Declare {
                    tensor: n.clone(),
                    init: init.clone(),
                },
                *span,
            ));
            prologue.push(tape::copy(n, &[], &name, loops, &qs, *span));
        }
        if !recomputed.is_empty() {
            prologue.extend(stmts.iter().filter_map(|s| tape::replay(s, &recomputed)));
        }
        // Zero-initialised gradient accumulators of the active locals, once per iteration:
        // a fresh version's gradient starts from zero.
        let mut grads = vec![];
        for (n, _, span) in &locals {
            if let Some(g) = self.grads.get(n)
                && self.active.contains(n)
                && referenced.contains(g)
            {
                grads.push(tape::stmt(
                    StmtKind::Declare {
                        tensor: g.clone(),
                        init: zero(),
                    },
                    *span,
                ));
            }
        }
        prologue.extend(grads);
        prologue.append(&mut bwd);
        Ok((fwd, prologue))
    }

    fn stmt(&mut self, s: &Stmt, loops: &[String]) -> Result<(Stmt, Vec<Stmt>)> {
        let span = s.span;
        let bwd = match &s.kind {
            StmtKind::Declare { tensor, init } => {
                if reads_active(init, &self.active) {
                    return Err(Error::unsupported(
                        init.span,
                        format!(
                            "`{tensor}` is declared with a value computed from a differentiated input; declare it with a constant and assign the value"
                        ),
                    ));
                }
                vec![]
            }
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => vec![],
            StmtKind::Assign { lhs, op, rhs } => {
                if !self.active.contains(&lhs.tensor) {
                    return Ok((s.clone(), vec![]));
                }
                let dname = self.grad_name(&lhs.tensor);
                let g = tape::read(Access {
                    tensor: dname,
                    indices: lhs.indices.clone(),
                    swizzle: lhs.swizzle.clone(),
                    span,
                });
                // A user reducer that declares the derivative of its result in an element.
                let declared = match op {
                    AssignOp::Reduce(Reducer::Named(n)) => self
                        .reducers
                        .iter()
                        .find(|d| d.name == *n)
                        .filter(|d| d.derivative.is_some())
                        .cloned(),
                    AssignOp::Reduce(Reducer::User(d)) if d.derivative.is_some() => {
                        Some(d.as_ref().clone())
                    }
                    _ => None,
                };
                let g = match op {
                    AssignOp::Overwrite | AssignOp::Reduce(Reducer::Add) => g,
                    AssignOp::Reduce(Reducer::Sub) => neg(g),
                    // The gradient flows through the selected element: every value equal to
                    // the result (ties all receive it).
                    AssignOp::Reduce(Reducer::Min | Reducer::Max) => {
                        let result = tape::read(lhs.clone());
                        select(bin(BinaryOp::Eq, rhs.clone(), result), g)
                    }
                    // The cotangent times the declared derivative at (final result, element).
                    AssignOp::Reduce(_) if let Some(def) = &declared => {
                        let d = def.derivative.as_ref().expect("filtered above");
                        let result = tape::read(lhs.clone());
                        mul(g, reducer_derivative(def, d, &result, rhs))
                    }
                    AssignOp::Reduce(r) => {
                        return Err(Error::unsupported(
                            span,
                            format!(
                                "`{r}=` has no derivative in `grad` (differentiable: `=`, `+=`, `-=`, `<<min>>=`, `<<max>>=`, user reducers that declare `derivative(...)`)"
                            ),
                        ));
                    }
                };
                self.contributions(rhs, g, span)?
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => {
                let mut inner = loops.to_vec();
                inner.push(index.clone());
                let lanes = *parallel == LoopMode::Vector;
                self.lanes += usize::from(lanes);
                let reversed = self.body(body, &inner, false);
                self.lanes -= usize::from(lanes);
                let (f, b) = reversed?;
                let fwd = tape::stmt(
                    StmtKind::Loop {
                        index: index.clone(),
                        extent: extent.clone(),
                        body: f,
                        parallel: *parallel,
                    },
                    span,
                );
                let bwd = if b.is_empty() {
                    vec![]
                } else {
                    vec![tape::stmt(
                        StmtKind::Loop {
                            index: index.clone(),
                            extent: extent.clone(),
                            body: b,
                            parallel: *parallel,
                        },
                        span,
                    )]
                };
                return Ok((fwd, bwd));
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let (ft, bt) = self.body(then, loops, false)?;
                let (fo, bo) = self.body(otherwise, loops, false)?;
                let fwd = tape::stmt(
                    StmtKind::If {
                        cond: cond.clone(),
                        then: ft,
                        otherwise: fo,
                    },
                    span,
                );
                let bwd = if bt.is_empty() && bo.is_empty() {
                    vec![]
                } else {
                    vec![tape::stmt(
                        StmtKind::If {
                            cond: cond.clone(),
                            then: bt,
                            otherwise: bo,
                        },
                        span,
                    )]
                };
                return Ok((fwd, bwd));
            }
            StmtKind::Let { name, value, body } => {
                let (f, mut b) = self.body(body, loops, false)?;
                if self.active.contains(name) && !b.is_empty() {
                    // The variable's gradient is a 0-d local of the let's body: its uses
                    // accumulate into it, then it flows into what the value reads.
                    let dname = self.grad_name(name);
                    let g = tape::read(tape::access(&dname, vec![], span));
                    let tail = self.contributions(value, g, span)?;
                    let guards = self.lanes == 0;
                    let tail = if guards {
                        super::guard::guard(&dname, &b, tail, span)
                    } else {
                        tail
                    };
                    let decl = tape::stmt(
                        StmtKind::Declare {
                            tensor: dname.clone(),
                            init: zero(),
                        },
                        span,
                    );
                    b.insert(0, decl);
                    match guards
                        .then(|| super::guard::kink_guard(&dname, &b, &tail, span))
                        .flatten()
                    {
                        Some(guarded) => b = guarded,
                        None => b.extend(tail),
                    }
                }
                let fwd = tape::stmt(
                    StmtKind::Let {
                        name: name.clone(),
                        value: value.clone(),
                        body: f,
                    },
                    span,
                );
                let bwd = if b.is_empty() {
                    vec![]
                } else {
                    vec![tape::stmt(
                        StmtKind::Let {
                            name: name.clone(),
                            value: value.clone(),
                            body: b,
                        },
                        span,
                    )]
                };
                return Ok((fwd, bwd));
            }
            StmtKind::Block(body) => {
                let (f, b) = self.body(body, loops, false)?;
                let fwd = tape::stmt(StmtKind::Block(f), span);
                let bwd = if b.is_empty() {
                    vec![]
                } else {
                    vec![tape::stmt(StmtKind::Block(b), span)]
                };
                return Ok((fwd, bwd));
            }
        };
        Ok((s.clone(), bwd))
    }
}

/// The rank a tensor is accessed with in `stmts` (0 when only read by name).
pub(crate) fn rank_of(stmts: &[Stmt], n: &str) -> usize {
    let mut rank = None;
    crate::notation::visit::accesses(stmts, &mut |a| {
        if a.tensor == n && rank.is_none() {
            rank = Some(a.indices.len());
        }
    });
    rank.unwrap_or(0)
}

/// The right-hand side of `n[] = rhs` when that is the only statement of the body writing
/// `n` (besides its declaration).
fn single_definition(stmts: &[Stmt], n: &str) -> Option<Expr> {
    let one: HashSet<String> = [n.to_string()].into_iter().collect();
    let mut defs = stmts
        .iter()
        .filter(|s| !matches!(&s.kind, StmtKind::Declare { .. }) && tape::writes_any(s, &one));
    let first = defs.next()?;
    if defs.next().is_some() {
        return None;
    }
    match &first.kind {
        StmtKind::Assign {
            lhs,
            op: AssignOp::Overwrite,
            rhs,
        } if lhs.tensor == n && lhs.indices.is_empty() => Some(rhs.clone()),
        _ => None,
    }
}
