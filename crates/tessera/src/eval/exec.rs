//! Execution: statements run in program order, loops visit every coordinate of their extent
//! in increasing order, and `missing` is `None`.

use super::{DenseTensor, Env, extent};
use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AccessIndex, AssignOp, Expr, ExprKind, Extent, Span, Stmt, StmtKind,
};
use crate::semantics::{Builtin, apply_reducer, convert, eval_binary, eval_unary};
use crate::transforms::dimensionalize::{index_outside, window_outside};
use crate::transforms::wrapperize;
use crate::types::{Class, Scalar};

/// A value in its compute class (`Bool`, `I64` or `F64`), or `None` for `missing`.
type Value = Option<Scalar>;

/// Where an access lands.
enum Place {
    /// The row-major offset of an in-bounds entry.
    At(usize),
    /// A permissive index fell outside, or an index was `missing`: reads give `missing`,
    /// writes are dropped.
    Outside,
}

pub struct Machine<'a> {
    env: &'a mut Env,
    /// Loop indices and `let` variables, innermost last (so later bindings shadow).
    scope: Vec<(String, Value)>,
}

impl<'a> Machine<'a> {
    pub fn new(env: &'a mut Env) -> Machine<'a> {
        Machine { env, scope: vec![] }
    }

    fn tensor(&self, name: &str, span: Span) -> Result<&DenseTensor> {
        self.env
            .tensors
            .get(name)
            .ok_or_else(|| Error::program(span, format!("unknown tensor `{name}`")))
    }

    pub fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn scoped(&mut self, name: &str, v: Value, body: &[Stmt]) -> Result<()> {
        self.scope.push((name.to_string(), v));
        let r = self.stmts(body);
        self.scope.pop();
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Declare { tensor, init } => {
                let Some(v) = self.expr(init)? else {
                    return Err(Error::program(
                        init.span,
                        format!("`{tensor} .= ...` needs a value, not `missing`"),
                    ));
                };
                let t = self.tensor(tensor, s.span)?;
                let fresh = DenseTensor::filled(&t.shape.clone(), t.values.elem(), v);
                self.env.tensors.insert(tensor.clone(), fresh);
                Ok(())
            }
            StmtKind::Assign { lhs, op, rhs } => self.assign(lhs, op, rhs, s.span),
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                let (lo, hi) = match extent {
                    Extent::Auto => (0, self.auto_extent(body, index, s.span)? as i64 - 1),
                    Extent::Range(a, b) => {
                        let (lo, hi) = (self.bound(a)?, self.bound(b)?);
                        if lo <= hi {
                            extent::check_range(self.env, body, index, lo, hi, s.span)?;
                        }
                        (lo, hi)
                    }
                };
                for k in lo..=hi {
                    self.scoped(index, Some(Scalar::I64(k)), body)?;
                }
                Ok(())
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let taken = match self.expr(cond)? {
                    None => false,
                    Some(Scalar::Bool(b)) => b,
                    Some(_) => {
                        return Err(Error::program(
                            cond.span,
                            "the condition of `if` must be a boolean",
                        ));
                    }
                };
                self.stmts(if taken { then } else { otherwise })
            }
            StmtKind::Let { name, value, body } => {
                let v = self.expr(value)?;
                self.scoped(name, v, body)
            }
            StmtKind::Block(body) => self.stmts(body),
            // Reading and updating are the same thing on a dense array.
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => Ok(()),
        }
    }

    /// The extent of `for index = _`: the tensors `index` indexes directly and the windows
    /// it indexes whose bounds can be computed now must all agree.
    fn auto_extent(&mut self, body: &[Stmt], index: &str, span: Span) -> Result<usize> {
        let mut all = extent::uses(self.env, body, index);
        for w in wrapperize::window_uses(body, index) {
            if !wrapperize::hoistable(&w) {
                continue;
            }
            let (lo, hi) = (self.bound(w.lo)?, self.bound(w.hi)?);
            let size = hi.saturating_sub(lo).saturating_add(1).max(0) as usize;
            all.push(extent::Use::window(
                &w,
                &lo.to_string(),
                &hi.to_string(),
                size,
            ));
        }
        extent::infer(&all, index, span)
    }

    /// A loop bound `a` of `for i = a:b`, as an integer.
    fn bound(&mut self, e: &Expr) -> Result<i64> {
        match self.expr(e)? {
            None => Err(Error::unsupported(
                e.span,
                "a loop bound cannot be `missing`",
            )),
            Some(v) => Ok(index_value(v)),
        }
    }

    fn assign(&mut self, lhs: &Access, op: &AssignOp, rhs: &Expr, span: Span) -> Result<()> {
        // A write through a permissive index outside the tensor is dropped before its value is
        // computed, as the compiler's bounds-check split does; a plain index outside is an
        // error only once there is a value to store.
        let (place, oob) = self.place(lhs)?;
        let Place::At(off) = place else { return Ok(()) };
        let Some(v) = self.expr(rhs)? else {
            return Ok(());
        };
        if let Some(e) = oob {
            return Err(e);
        }
        let t = self
            .env
            .tensors
            .get_mut(&lhs.tensor)
            .expect("place() found the tensor");
        let new = match op {
            AssignOp::Overwrite => v.cast(t.values.elem()),
            AssignOp::Reduce(r) => apply_reducer(r, t.values.get(off), v, t.values.elem())
                .map_err(|m| Error::program(span, m))?,
        };
        t.values.set(off, new);
        Ok(())
    }

    /// Where `a` lands, and the out-of-bounds error of a plain index if there is one (then the
    /// place is a dummy `At(0)`). A permissive index outside wins over a plain one outside.
    /// A window `(lo:hi)(e)` addresses `lo + e`, and both the window and `e` inside it are
    /// bounds-checked like a plain index; a swizzle sends index `k` to dimension `perm[k]`.
    fn place(&mut self, a: &Access) -> Result<(Place, Option<Error>)> {
        let rank = a.indices.len();
        // Per tensor dimension: the coordinate and the index that gave it.
        let mut at: Vec<Option<(i64, &AccessIndex)>> = vec![None; rank];
        let mut oob = None;
        for (k, ix) in a.indices.iter().enumerate() {
            let Some(v) = self.expr(&ix.expr)? else {
                return Ok((Place::Outside, None));
            };
            let mut c = index_value(v);
            let d = a.dim_of(k);
            if let Some((lo, hi)) = &ix.window {
                let (lo, hi) = (self.bound(lo)?, self.bound(hi)?);
                let n = self
                    .tensor(&a.tensor, a.span)?
                    .shape
                    .get(d)
                    .copied()
                    .unwrap_or(0);
                let size = hi.saturating_sub(lo).saturating_add(1).max(0);
                if size > 0 && (lo < 0 || hi >= n as i64) {
                    oob.get_or_insert_with(|| window_outside(&a.tensor, a.span, lo, hi, d, n));
                } else if c < 0 || c >= size {
                    oob.get_or_insert_with(|| {
                        Error::tensor(
                            &a.tensor,
                            format!(
                                "{}: {} = {c} is outside the window {lo}:{hi} (size {size}) of dimension {d}",
                                ix.expr.span,
                                describe_index(ix, k)
                            ),
                        )
                    });
                }
                c = c.saturating_add(lo);
            }
            if let Some(slot) = at.get_mut(d) {
                *slot = Some((c, ix));
            }
        }
        let t = self.tensor(&a.tensor, a.span)?;
        let mut off = 0usize;
        for (d, slot) in at.iter().enumerate() {
            let Some((k, ix)) = *slot else {
                return Err(Error::program(
                    a.span,
                    format!("internal: no index for dimension {d} of `{}`", a.tensor),
                ));
            };
            let n = t.shape[d];
            if k < 0 || k >= n as i64 {
                if ix.permissive {
                    return Ok((Place::Outside, None));
                }
                oob.get_or_insert_with(|| index_outside(&a.tensor, ix, k, d, n));
                continue;
            }
            off = off * n + k as usize;
        }
        Ok((Place::At(if oob.is_some() { 0 } else { off }), oob))
    }

    fn read(&mut self, a: &Access) -> Result<Value> {
        match self.place(a)? {
            (_, Some(e)) => Err(e),
            (Place::Outside, None) => Ok(None),
            (Place::At(off), None) => Ok(Some(
                self.tensor(&a.tensor, a.span)?.values.get(off).widen(),
            )),
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Value> {
        let span = e.span;
        let op_err = |m: String| Error::program(span, m);
        Ok(match &e.kind {
            ExprKind::Literal(v) => Some(v.widen()),
            ExprKind::Missing => None,
            ExprKind::Name(n) => {
                if let Some((_, v)) = self.scope.iter().rev().find(|(b, _)| b == n) {
                    return Ok(*v);
                }
                let t = self.tensor(n, span)?;
                if !t.shape.is_empty() {
                    return Err(Error::program(
                        span,
                        format!(
                            "`{n}` has {} dimensions: read it with indices",
                            t.shape.len()
                        ),
                    ));
                }
                Some(t.values.get(0).widen())
            }
            ExprKind::Access(a) => self.read(a)?,
            ExprKind::Unary(op, x) => match self.expr(x)? {
                None => None,
                Some(x) => Some(eval_unary(*op, x).map_err(op_err)?),
            },
            ExprKind::Binary(op, x, y) => match (self.expr(x)?, self.expr(y)?) {
                (Some(x), Some(y)) => Some(eval_binary(*op, x, y).map_err(op_err)?),
                _ => None,
            },
            ExprKind::Call(name, args) if name == Builtin::Sample.name() => {
                let Some(ExprKind::Name(t)) = args.first().map(|a| &a.kind) else {
                    return Err(Error::program(span, "`sample` takes a tensor name first"));
                };
                let mut ix = vec![];
                for a in &args[1..] {
                    match self.expr(a)? {
                        Some(Scalar::I64(i)) => ix.push(i),
                        Some(other) => ix.push(other.cast(crate::types::ElemType::I64).as_i64()),
                        None => return Ok(None),
                    }
                }
                let tensor = self.tensor(t, span)?;
                if ix.len() != tensor.shape.len() {
                    return Err(Error::program(
                        span,
                        format!("`sample({t}, ...)` needs one index per dimension"),
                    ));
                }
                let mut flat = 0usize;
                for (&i, &n) in ix.iter().zip(&tensor.shape) {
                    if i < 0 || i as usize >= n {
                        return Err(Error::program(
                            span,
                            format!("`sample({t}, ...)`: index {i} is outside 0..{n}"),
                        ));
                    }
                    flat = flat * n + i as usize;
                }
                Some(tensor.values.get(flat).cast(crate::types::ElemType::F64))
            }
            ExprKind::Call(name, args) if name == Builtin::Size.name() => {
                let rank = |t: &str| self.env.tensors.get(t).map(|t| t.shape.len());
                let (t, d) = crate::transforms::check::size_args(args, span, &rank)?;
                Some(Scalar::I64(self.tensor(t, span)?.shape[d] as i64))
            }
            ExprKind::Call(name, args) => {
                let mut vals = vec![];
                for a in args {
                    vals.push(self.expr(a)?);
                }
                let f = Builtin::named(name).map_err(op_err)?;
                match (f, vals.as_slice()) {
                    // Like the compiler's `missing` propagation: the surviving argument as is.
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

/// ``index `i` `` for a name, else `index k` (its position).
fn describe_index(ix: &AccessIndex, k: usize) -> String {
    match &ix.expr.kind {
        ExprKind::Name(name) => format!("index `{name}`"),
        _ => format!("index {k}"),
    }
}

/// An index or loop bound as an integer (a bool is 0 or 1; floats are rejected before
/// execution by `transforms::check`).
fn index_value(v: Scalar) -> i64 {
    convert(v, Class::Int).as_i64()
}
