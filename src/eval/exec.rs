//! Execution: statements run in program order, loops visit every coordinate of their extent
//! in increasing order, and `missing` is `None`.

use super::check::size_args;
use super::{DenseTensor, Env, extent};
use crate::error::{Error, Result};
use crate::notation::ast::{Access, AssignOp, Expr, ExprKind, Extent, Span, Stmt, StmtKind};
use crate::semantics::{apply_reducer, convert, eval_binary, eval_call, eval_unary};
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
            } => {
                let (lo, hi) = match extent {
                    Extent::Auto => (0, extent::infer(self.env, body, index, s.span)? as i64 - 1),
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
    fn place(&mut self, a: &Access) -> Result<(Place, Option<Error>)> {
        let mut at = vec![];
        for ix in &a.indices {
            match self.expr(&ix.expr)? {
                None => return Ok((Place::Outside, None)),
                Some(v) => at.push(index_value(v)),
            }
        }
        let t = self.tensor(&a.tensor, a.span)?;
        let mut off = 0usize;
        let mut oob = None;
        for (d, (ix, &k)) in a.indices.iter().zip(&at).enumerate() {
            let n = t.shape[d];
            if k < 0 || k >= n as i64 {
                if ix.permissive {
                    return Ok((Place::Outside, None));
                }
                oob.get_or_insert_with(|| {
                    let what = match &ix.expr.kind {
                        ExprKind::Name(name) => format!("index `{name}`"),
                        _ => format!("index {d}"),
                    };
                    Error::tensor(
                        &a.tensor,
                        format!(
                            "{}: {what} = {k} is out of bounds for dimension {d} of size {n}",
                            ix.expr.span
                        ),
                    )
                });
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
            ExprKind::Call(name, args) if name == "size" => {
                let (t, d) = size_args(self.env, args, span)?;
                Some(Scalar::I64(self.tensor(t, span)?.shape[d] as i64))
            }
            ExprKind::Call(name, args) => {
                let mut vals = vec![];
                for a in args {
                    vals.push(self.expr(a)?);
                }
                match (name.as_str(), vals.as_slice()) {
                    // Like the compiler's `missing` propagation: the surviving argument as is.
                    ("coalesce", [None, b]) => *b,
                    ("coalesce", [a @ Some(_), None]) => *a,
                    _ => match vals.iter().copied().collect::<Option<Vec<Scalar>>>() {
                        None => None,
                        Some(vs) => Some(eval_call(name, &vs).map_err(op_err)?),
                    },
                }
            }
        })
    }
}

/// An index or loop bound as an integer: converted like a store into an `i64`, so a float
/// truncates toward zero.
fn index_value(v: Scalar) -> i64 {
    convert(v, Class::Int).as_i64()
}
