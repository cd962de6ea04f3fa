//! The execution proper of the continuous evaluator (see the module documentation of
//! `eval::continuous` for the rules).

use super::cells::{Cell, all_names, cells, reads};
use super::pieces::{Coord, PieceTensor, Point};
use crate::error::{Error, Result};
use crate::limit::Limit;
use crate::notation::ast::{
    Access, AssignOp, BinaryOp, Expr, ExprKind, Extent, Reducer, Span, Stmt, StmtKind, UnaryOp,
};
use crate::semantics::{Builtin, apply_reducer, convert, eval_binary, eval_unary};
use crate::transforms::real::{factors, is_measure, top_names};
use crate::transforms::wrapperize::is_direct;
use crate::types::{Class, Scalar};
use std::collections::{BTreeMap, HashSet};

/// A value; `None` is `missing`.
type Value = Option<Scalar>;

struct Binding {
    name: String,
    value: Value,
    /// For a real loop index, the cell being visited.
    cell: Option<Cell>,
}

/// Why the values of the statement being run may vary inside a gap: the place that read the
/// gap's index and how.
#[derive(Clone)]
struct Taint {
    span: Span,
    msg: String,
}

pub struct Machine<'a> {
    env: &'a mut BTreeMap<String, PieceTensor>,
    /// The real loops (by address in the program being run).
    real_loops: HashSet<*const Stmt>,
    scope: Vec<Binding>,
    taint: Option<Taint>,
}

impl<'a> Machine<'a> {
    pub fn new(
        env: &'a mut BTreeMap<String, PieceTensor>,
        real_loops: HashSet<*const Stmt>,
    ) -> Machine<'a> {
        Machine {
            env,
            real_loops,
            scope: vec![],
            taint: None,
        }
    }

    fn tensor(&self, name: &str, span: Span) -> Result<&PieceTensor> {
        self.env
            .get(name)
            .ok_or_else(|| Error::program(span, format!("unknown tensor `{name}`")))
    }

    fn binding(&self, name: &str) -> Option<(usize, &Binding)> {
        self.scope
            .iter()
            .enumerate()
            .rev()
            .find(|(_, b)| b.name == name)
    }

    pub fn stmts(&mut self, body: &[Stmt]) -> Result<()> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    /// Run `f` and put the taint back as it was: what a condition, a `let` value, a loop bound
    /// or a statement reads taints only what runs under it.
    fn tainted_scope<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let saved = self.taint.clone();
        let r = f(self);
        self.taint = saved;
        r
    }

    fn scoped(&mut self, b: Binding, body: &[Stmt]) -> Result<()> {
        self.scope.push(b);
        let r = self.stmts(body);
        self.scope.pop();
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Declare { tensor, init } => self.tainted_scope(|m| {
                let Some(v) = m.expr(init)? else {
                    return Err(Error::program(
                        init.span,
                        format!("`{tensor} .= ...` needs a value, not `missing`"),
                    ));
                };
                let old = m.tensor(tensor, s.span)?;
                let fresh = PieceTensor::new(old.real.clone(), old.shape.clone(), old.elem, v);
                if let Some(t) = &m.taint
                    && (!old.pieces.is_empty() || fresh.fill != old.fill)
                {
                    return Err(taint_error(t, s.span));
                }
                m.env.insert(tensor.clone(), fresh);
                Ok(())
            }),
            StmtKind::Assign { lhs, op, rhs } => {
                self.tainted_scope(|m| m.assign(lhs, op, rhs, s.span))
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => self.tainted_scope(|m| {
                if m.real_loops.contains(&(s as *const Stmt)) {
                    m.real_loop(index, extent, body)
                } else {
                    m.integer_loop(index, extent, body, s.span)
                }
            }),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => self.tainted_scope(|m| {
                let taken = match m.expr(cond)? {
                    None => false,
                    Some(Scalar::Bool(b)) => b,
                    Some(_) => {
                        return Err(Error::program(
                            cond.span,
                            "the condition of `if` must be a boolean",
                        ));
                    }
                };
                m.stmts(if taken { then } else { otherwise })
            }),
            StmtKind::Let { name, value, body } => self.tainted_scope(|m| {
                let v = m.expr(value)?;
                m.scoped(
                    Binding {
                        name: name.clone(),
                        value: v,
                        cell: None,
                    },
                    body,
                )
            }),
            StmtKind::Block(body) => self.stmts(body),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => Ok(()),
        }
    }

    fn integer_loop(
        &mut self,
        index: &str,
        extent: &Extent,
        body: &[Stmt],
        span: Span,
    ) -> Result<()> {
        let (lo, hi) = match extent {
            Extent::Range(a, b) => (self.int_bound(a)?, self.int_bound(b)?),
            Extent::Auto => (0, self.auto_size(index, body, span)? as i64 - 1),
        };
        for k in lo..=hi {
            self.scoped(
                Binding {
                    name: index.to_string(),
                    value: Some(Scalar::I64(k)),
                    cell: None,
                },
                body,
            )?;
        }
        Ok(())
    }

    /// The size of `for index = _` (integer): every integer dimension it indexes directly
    /// must agree.
    fn auto_size(&self, index: &str, body: &[Stmt], span: Span) -> Result<usize> {
        let mut uses: Vec<(usize, String, Span)> = vec![];
        crate::notation::visit::accesses(body, &mut |a: &Access| {
            for (k, ix) in a.indices.iter().enumerate() {
                let d = a.dim_of(k);
                if let Some(t) = self.env.get(&a.tensor)
                    && is_direct(ix, index)
                    && !t.real.get(d).copied().unwrap_or(true)
                {
                    uses.push((
                        t.shape[d],
                        format!("dimension {d} of `{}`", a.tensor),
                        a.span,
                    ));
                }
            }
        });
        let Some((size, what, _)) = uses.first().cloned() else {
            return Err(Error::program(
                span,
                format!("cannot infer the extent of `{index}`: no access indexes it directly"),
            ));
        };
        if let Some((other, w, at)) = uses.iter().find(|u| u.0 != size) {
            return Err(Error::DimensionMismatch {
                span: *at,
                msg: format!(
                    "index `{index}` ranges over {what} (size {size}) but also over {w} (size {other})"
                ),
            });
        }
        Ok(size)
    }

    fn int_bound(&mut self, e: &Expr) -> Result<i64> {
        match self.expr(e)? {
            None => Err(Error::unsupported(
                e.span,
                "a loop bound cannot be `missing`",
            )),
            Some(v) => Ok(convert(v, Class::Int).as_i64()),
        }
    }

    fn real_bound(&mut self, e: &Expr) -> Result<f64> {
        match self.expr(e)? {
            None => Err(Error::unsupported(
                e.span,
                "a loop bound cannot be `missing`",
            )),
            Some(v) => Ok(convert(v, Class::Float).as_f64()),
        }
    }

    fn real_loop(&mut self, index: &str, extent: &Extent, body: &[Stmt]) -> Result<()> {
        let (a, b) = match extent {
            Extent::Range(a, b) => (self.real_bound(a)?, self.real_bound(b)?),
            Extent::Auto => (f64::NEG_INFINITY, f64::INFINITY),
        };
        let starts = self.tainted_scope(|m| m.starts(index, body))?;
        for cell in cells(a, b, &starts) {
            self.scoped(
                Binding {
                    name: index.to_string(),
                    value: Some(Scalar::F64(cell.sample())),
                    cell: Some(cell),
                },
                body,
            )?;
        }
        Ok(())
    }

    /// Whether every name `e` uses but `x` is bound now (or is a tensor).
    fn known_but(&self, e: &Expr, x: Option<&str>) -> bool {
        all_names(e)
            .into_iter()
            .all(|n| Some(n) == x || self.binding(n).is_some() || self.env.contains_key(n))
    }

    /// Where the pieces of the accesses a real loop over `x` drives start, in the loop's
    /// coordinate (see the module documentation); `x` is not bound yet.
    fn starts(&mut self, x: &str, body: &[Stmt]) -> Result<Vec<Limit<f64>>> {
        let mut accesses = vec![];
        reads(body, &mut |a| accesses.push(a));
        let mut out = vec![];
        for a in accesses {
            let Some(t) = self.env.get(&a.tensor) else {
                continue;
            };
            let real = t.real.clone();
            for (k, ix) in a.indices.iter().enumerate() {
                let d = a.dim_of(k);
                let e = &ix.expr;
                let nested = all_names(e).iter().filter(|n| **n == x).count();
                let top = top_names(e).iter().filter(|n| **n == x).count();
                if !real.get(d).copied().unwrap_or(false)
                    || top == 0
                    || nested != top
                    || !self.known_but(e, Some(x))
                {
                    continue;
                }
                let (coef, off) = self.linear(e, x)?;
                let window = match &ix.window {
                    Some((lo, _)) if self.known_but(lo, None) => self.real_bound(lo)?,
                    Some(_) => continue,
                    None => 0.0,
                };
                if coef == 0.0 || !coef.is_finite() {
                    continue;
                }
                // The pieces matching the positions known here.
                let mut bounds = vec![None; real.len()];
                for (m, other) in a.indices.iter().enumerate() {
                    if m != k
                        && !all_names(&other.expr).contains(&x)
                        && self.known_but(&other.expr, None)
                        && other.window.is_none()
                        && let Ok(Some(v)) = self.expr_in(&other.expr, true)
                    {
                        let dm = a.dim_of(m);
                        bounds[dm] = Some(if real[dm] {
                            Point::Real(convert(v, Class::Float).as_f64())
                        } else {
                            Point::Int(convert(v, Class::Int).as_i64())
                        });
                    }
                }
                let t = &self.env[&a.tensor];
                // x = (e - window - off) / coef, the infinitesimal flipped with the sign.
                let back = |e: Limit<f64>| {
                    let eps = if coef < 0.0 { -e.eps } else { e.eps };
                    Limit::new((e.val - window - off) / coef, eps)
                };
                for (c, _) in t.pieces_meeting(&bounds) {
                    if let Coord::Real(lo, hi) = c[d] {
                        let (p, q) = (back(lo), back(hi));
                        let (p, q) = if coef < 0.0 { (q, p) } else { (p, q) };
                        out.extend([p, q.next()]);
                    }
                }
            }
        }
        Ok(out)
    }

    /// `e` as `coef * x + off` (the static check made sure it is affine in `x`), its parts
    /// free of `x` evaluated now.
    fn linear(&mut self, e: &Expr, x: &str) -> Result<(f64, f64)> {
        if !top_names(e).contains(&x) {
            let v = self.expr_in(e, true)?;
            return Ok((
                0.0,
                v.map_or(f64::NAN, |v| convert(v, Class::Float).as_f64()),
            ));
        }
        let not_affine = || {
            Error::program(
                e.span,
                format!("internal: `{e}` is not affine in the real index `{x}`"),
            )
        };
        Ok(match &e.kind {
            ExprKind::Name(n) if n == x => (1.0, 0.0),
            ExprKind::Unary(UnaryOp::Neg, a) => {
                let (c, o) = self.linear(a, x)?;
                (-c, -o)
            }
            ExprKind::Binary(op, a, b) => {
                let ((ca, oa), (cb, ob)) = (self.linear(a, x)?, self.linear(b, x)?);
                match op {
                    BinaryOp::Add => (ca + cb, oa + ob),
                    BinaryOp::Sub => (ca - cb, oa - ob),
                    BinaryOp::Mul if ca == 0.0 => (oa * cb, oa * ob),
                    BinaryOp::Mul if cb == 0.0 => (ca * ob, oa * ob),
                    BinaryOp::Div if cb == 0.0 => (ca / ob, oa / ob),
                    _ => return Err(not_affine()),
                }
            }
            _ => return Err(not_affine()),
        })
    }

    fn assign(&mut self, lhs: &Access, op: &AssignOp, rhs: &Expr, span: Span) -> Result<()> {
        let measured: Vec<&str> = match op {
            AssignOp::Reduce(Reducer::Add | Reducer::Sub) => factors(rhs)
                .into_iter()
                .filter(|f| is_measure(f))
                .flat_map(|f| match &f.kind {
                    ExprKind::Call(_, args) => args.iter().collect::<Vec<_>>(),
                    _ => vec![],
                })
                .filter_map(|a| match &a.kind {
                    ExprKind::Name(n) => Some(n.as_str()),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        };
        let counting = match op {
            AssignOp::Reduce(Reducer::Add | Reducer::Sub | Reducer::Mul) => true,
            AssignOp::Reduce(Reducer::User(def)) => !def.idempotent,
            _ => false,
        };
        let written: Vec<&str> = lhs
            .indices
            .iter()
            .flat_map(|ix| top_names(&ix.expr))
            .collect();
        let mut measure = 1.0;
        for b in &self.scope {
            let Some(cell) = b.cell else { continue };
            if written.contains(&b.name.as_str()) {
                continue;
            }
            if measured.contains(&b.name.as_str()) {
                measure *= cell.measure();
            } else if counting && cell.is_gap() {
                // A counting sum over a positive-length piece: skipped (seed §1.7, impl).
                return Ok(());
            }
        }
        if measure == 0.0 {
            return Ok(());
        }
        let Some(region) = self.region(lhs)? else {
            return Ok(());
        };
        let Some(mut v) = self.expr(rhs)? else {
            return Ok(());
        };
        if !measured.is_empty() {
            v = eval_binary(BinaryOp::Mul, v, Scalar::F64(measure))
                .map_err(|m| Error::program(rhs.span, m))?;
        }
        let t = self
            .env
            .get_mut(&lhs.tensor)
            .ok_or_else(|| Error::program(lhs.span, format!("unknown tensor `{}`", lhs.tensor)))?;
        let elem = t.elem;
        let changed = t.update(&region, &mut |old| match op {
            AssignOp::Overwrite => Ok(v.cast(elem)),
            AssignOp::Reduce(r) => {
                apply_reducer(r, old, v, elem).map_err(|m| Error::program(span, m))
            }
        })?;
        if changed && let Some(t) = &self.taint {
            return Err(taint_error(t, span));
        }
        Ok(())
    }

    /// The box `lhs` writes: a real position naming the index of a real loop on a gap covers
    /// the image of the gap; `None` when a permissive position is outside its dimension.
    fn region(&mut self, lhs: &Access) -> Result<Option<Vec<Coord>>> {
        let t = self.tensor(&lhs.tensor, lhs.span)?;
        let (real, shape) = (t.real.clone(), t.shape.clone());
        if lhs.indices.len() != real.len() {
            return Err(Error::DimensionMismatch {
                span: lhs.span,
                msg: format!(
                    "`{}` has {} dimension(s) but `{lhs}` gives {} index(es)",
                    lhs.tensor,
                    real.len(),
                    lhs.indices.len()
                ),
            });
        }
        let mut out = vec![Coord::Int(0); real.len()];
        for (k, ix) in lhs.indices.iter().enumerate() {
            let d = lhs.dim_of(k);
            let gaps: Vec<(String, Cell)> = top_names(&ix.expr)
                .into_iter()
                .filter_map(|n| match self.binding(n) {
                    Some((_, b)) => b.cell.filter(|c| c.is_gap()).map(|c| (n.to_string(), c)),
                    None => None,
                })
                .collect();
            if real[d] {
                let shift = match &ix.window {
                    Some((lo, _)) => self.real_bound(lo)?,
                    None => 0.0,
                };
                out[d] = match gaps.as_slice() {
                    [] => match self.expr_in(&ix.expr, true)? {
                        None => return Ok(None),
                        Some(v) => Coord::point(convert(v, Class::Float).as_f64() + shift),
                    },
                    [(x, cell)] => {
                        let (c, o) = self.linear(&ix.expr, x)?;
                        let g = |p: Limit<f64>| Limit::exact(c) * p + Limit::exact(o + shift);
                        let (p, q) = (g(cell.lo), g(cell.hi));
                        if c < 0.0 {
                            Coord::Real(q, p)
                        } else {
                            Coord::Real(p, q)
                        }
                    }
                    _ => {
                        return Err(Error::program(
                            lhs.span,
                            format!(
                                "position `{}` of `{lhs}` moves with two real loops on pieces \
                                 of positive length: the write is not one piece",
                                ix.expr
                            ),
                        ));
                    }
                };
            } else {
                match self.int_position(lhs, k, &shape)? {
                    Some(i) => out[d] = Coord::Int(i),
                    None => return Ok(None),
                }
            }
        }
        Ok(Some(out))
    }

    /// The coordinate position `k` of `a` gives on its integer dimension; `None` when it is
    /// `missing` or permissive and outside.
    fn int_position(&mut self, a: &Access, k: usize, shape: &[usize]) -> Result<Option<i64>> {
        let ix = &a.indices[k];
        let d = a.dim_of(k);
        let Some(v) = self.expr_in(&ix.expr, true)? else {
            return Ok(None);
        };
        let mut c = convert(v, Class::Int).as_i64();
        let n = shape[d] as i64;
        if let Some((lo, hi)) = &ix.window {
            let (lo, hi) = (self.int_bound(lo)?, self.int_bound(hi)?);
            let size = hi.saturating_sub(lo).saturating_add(1).max(0);
            if size > 0 && (lo < 0 || hi >= n) || c < 0 || c >= size {
                return Err(Error::tensor(
                    &a.tensor,
                    format!(
                        "{}: position {k} = {c} is outside the window {lo}:{hi} of dimension {d} (size {n})",
                        ix.expr.span
                    ),
                ));
            }
            c += lo;
        }
        if c < 0 || c >= n {
            if ix.permissive {
                return Ok(None);
            }
            return Err(Error::tensor(
                &a.tensor,
                format!(
                    "{}: position {k} = {c} is outside dimension {d} (size {n})",
                    ix.expr.span
                ),
            ));
        }
        Ok(Some(c))
    }

    fn read(&mut self, a: &Access) -> Result<Value> {
        let t = self.tensor(&a.tensor, a.span)?;
        let (real, shape) = (t.real.clone(), t.shape.clone());
        if a.indices.len() != real.len() {
            return Err(Error::DimensionMismatch {
                span: a.span,
                msg: format!(
                    "`{}` has {} dimension(s) but `{a}` gives {} index(es)",
                    a.tensor,
                    real.len(),
                    a.indices.len()
                ),
            });
        }
        let mut at = vec![Point::Int(0); real.len()];
        for (k, ix) in a.indices.iter().enumerate() {
            self.check_piecewise(a, &ix.expr);
            let d = a.dim_of(k);
            if real[d] {
                let shift = match &ix.window {
                    Some((lo, _)) => self.real_bound(lo)?,
                    None => 0.0,
                };
                match self.expr_in(&ix.expr, true)? {
                    None => return Ok(None),
                    Some(v) => at[d] = Point::Real(convert(v, Class::Float).as_f64() + shift),
                }
            } else {
                match self.int_position(a, k, &shape)? {
                    Some(i) => at[d] = Point::Int(i),
                    None => return Ok(None),
                }
            }
        }
        Ok(Some(self.env[&a.tensor].value_at(&at).widen()))
    }

    /// Taint the statement when position `e` of `a` names the index of a real loop on a gap
    /// but is not constant on it: it names (also inside a nested access) a loop or `let`
    /// bound inside that loop, or the index inside a nested access.
    fn check_piecewise(&mut self, a: &Access, e: &Expr) {
        if self.taint.is_some() {
            return;
        }
        let top = top_names(e);
        for x in &top {
            let Some((depth, b)) = self.binding(x) else {
                continue;
            };
            if !b.cell.is_some_and(Cell::is_gap) {
                continue;
            }
            // Nested accesses count: their values move with a name bound inside too.
            let inner = all_names(e)
                .into_iter()
                .find(|n| self.binding(n).is_some_and(|(j, _)| j > depth));
            let nested = all_names(e).iter().filter(|n| *n == x).count()
                != top.iter().filter(|n| *n == x).count();
            if let Some(y) = inner {
                self.taint = Some(Taint {
                    span: a.span,
                    msg: format!(
                        "`{a}` mixes the real index `{x}` with `{y}`, bound inside its loop: \
                         not piecewise constant on a piece of positive length of `{x}`"
                    ),
                });
                return;
            }
            if nested {
                self.taint = Some(Taint {
                    span: a.span,
                    msg: format!(
                        "`{a}` reads the real index `{x}` both directly and through an access: \
                         not piecewise constant on a piece of positive length of `{x}`"
                    ),
                });
                return;
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Value> {
        self.expr_in(e, false)
    }

    /// Evaluate `e`; `index` when it is an access position, where a real loop's index is read
    /// through the access's pieces rather than as a value.
    fn expr_in(&mut self, e: &Expr, index: bool) -> Result<Value> {
        let span = e.span;
        let op_err = |m: String| Error::program(span, m);
        Ok(match &e.kind {
            ExprKind::Literal(v) => Some(v.widen()),
            ExprKind::Missing => None,
            ExprKind::Name(n) => {
                if let Some((_, b)) = self.binding(n) {
                    let v = b.value;
                    if !index && b.cell.is_some_and(Cell::is_gap) && self.taint.is_none() {
                        self.taint = Some(Taint {
                            span,
                            msg: format!(
                                "`{n}` is used as a value on a piece of positive length of its \
                                 real loop"
                            ),
                        });
                    }
                    return Ok(v);
                }
                let t = self.tensor(n, span)?;
                if t.rank() != 0 {
                    return Err(Error::program(
                        span,
                        format!("`{n}` has {} dimensions: read it with indices", t.rank()),
                    ));
                }
                Some(t.get().widen())
            }
            ExprKind::Access(a) => self.read(a)?,
            ExprKind::Unary(op, x) => match self.expr_in(x, index)? {
                None => None,
                Some(x) => Some(eval_unary(*op, x).map_err(op_err)?),
            },
            ExprKind::Binary(op, x, y) => {
                match (self.expr_in(x, index)?, self.expr_in(y, index)?) {
                    (Some(x), Some(y)) => Some(eval_binary(*op, x, y).map_err(op_err)?),
                    _ => None,
                }
            }
            // A measure is applied by the statement (`assign`); as a factor it is 1 here.
            ExprKind::Call(name, _) if name == Builtin::D.name() => Some(Scalar::F64(1.0)),
            ExprKind::Call(name, args) if name == Builtin::Size.name() => {
                let rank = |t: &str| self.env.get(t).map(PieceTensor::rank);
                let (t, d) = crate::transforms::check::size_args(args, span, &rank)?;
                let t = self.tensor(t, span)?;
                if t.real[d] {
                    return Err(Error::program(
                        span,
                        format!("dimension {d} is real: it has no size"),
                    ));
                }
                Some(Scalar::I64(t.shape[d] as i64))
            }
            ExprKind::Call(name, args) => {
                let mut vals = vec![];
                for a in args {
                    vals.push(self.expr_in(a, index)?);
                }
                let f = Builtin::named(name).map_err(op_err)?;
                match (f, vals.as_slice()) {
                    (Builtin::Coalesce, [None, b]) => *b,
                    (Builtin::Coalesce, [a @ Some(_), None]) => *a,
                    _ => match vals.iter().copied().collect::<Option<Vec<Scalar>>>() {
                        None => None,
                        Some(vs) => Some(f.eval(&vs).map_err(op_err)?),
                    },
                }
            }
        })
    }
}

/// The error of a write that changes its output under a taint.
fn taint_error(t: &Taint, write: Span) -> Error {
    Error::program(
        t.span,
        format!(
            "{}; the write at {write} changes its output there (valid only where the loop is \
             driven by pinpoints)",
            t.msg
        ),
    )
}
