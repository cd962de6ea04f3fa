//! The IR interpreter backend: executes a kernel by walking its statements.

use super::limit_code;
use super::{Backend, Checked, CompiledKernel, KernelFault, MAX_GROW, grow};
use crate::error::Result;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, UnOp};
use crate::limit::{Eps, Limit};
use crate::runtime::{Buffer, intrinsics};
use crate::types::{Scalar, canonical_limit};

/// Runs kernels without compiling them.
#[derive(Default)]
pub struct Interpreter;

impl Interpreter {
    pub fn new() -> Interpreter {
        Interpreter
    }
}

impl Backend for Interpreter {
    fn name(&self) -> &'static str {
        "interp"
    }
    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        Ok(Box::new(Interpreted {
            k: Checked::new(kernel),
        }))
    }
}

struct Interpreted {
    k: Checked,
}

impl CompiledKernel for Interpreted {
    fn tier(&self) -> &'static str {
        "interp"
    }

    fn run(&self, bufs: &mut [Buffer]) -> Result<()> {
        self.k.check(bufs)?;
        let mut m = Machine {
            vars: self.k.vars.iter().map(|v| Scalar::zero(v.ty)).collect(),
            bufs,
        };
        let body = &self.k.body;
        match m.stmts(body) {
            Ok(_) => Ok(()),
            Err(f) => Err(f.to_error(&self.k, m.bufs)),
        }
    }
}

enum Flow {
    Next,
    Break,
}

type Step<T> = std::result::Result<T, KernelFault>;

struct Machine<'b> {
    vars: Vec<Scalar>,
    bufs: &'b mut [Buffer],
}

impl Machine<'_> {
    fn stmts(&mut self, stmts: &[Stmt]) -> Step<Flow> {
        for s in stmts {
            if let Flow::Break = self.stmt(s)? {
                return Ok(Flow::Break);
            }
        }
        Ok(Flow::Next)
    }

    fn stmt(&mut self, s: &Stmt) -> Step<Flow> {
        match s {
            // Inside one kernel a parallel range is its serial loop: one chunk, the whole range.
            Stmt::Chunked(c) => {
                self.vars[c.lo.0 as usize] = self.expr(&c.start)?;
                self.vars[c.hi.0 as usize] = self.expr(&c.stop)?;
                for s in &c.body {
                    if let Flow::Break = self.stmt(s)? {
                        return Ok(Flow::Break);
                    }
                }
            }
            Stmt::Assign(v, e) => {
                self.vars[v.0 as usize] = self.expr(e)?;
            }
            Stmt::Store { buf, index, value } => {
                // The index is checked after the value is computed, as the JIT does: when
                // both fail, the value's fault is the one reported.
                let i = self.expr(index)?.as_i64();
                let v = self.expr(value)?;
                let i = self.in_bounds(*buf, i)?;
                self.bufs[buf.0 as usize].set(i, v);
            }
            // The interpreter runs chunks one after another: no other thread shares the
            // element, so the update is the plain read, combine, narrowing store.
            Stmt::Atomic {
                buf,
                index,
                op,
                value,
            } => {
                let i = self.expr(index)?.as_i64();
                let v = self.expr(value)?;
                let i = self.in_bounds(*buf, i)?;
                let old = self.bufs[buf.0 as usize].get(i).widen();
                self.bufs[buf.0 as usize].set(i, binary(*op, old, v));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if self.expr(cond)?.as_bool() {
                    then
                } else {
                    otherwise
                };
                return self.stmts(branch);
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                let start = self.expr(start)?.as_i64();
                let stop = self.expr(stop)?.as_i64();
                // As the native backends: the variable holds every value tested, so a loop
                // that ends normally leaves it at the first value not below `stop`.
                let mut i = start;
                loop {
                    self.vars[var.0 as usize] = Scalar::I64(i);
                    if i >= stop {
                        break;
                    }
                    if let Flow::Break = self.stmts(body)? {
                        break;
                    }
                    // The body may assign the loop variable; the loop continues from its value.
                    i = self.vars[var.0 as usize].as_i64() + 1;
                }
            }
            Stmt::While { cond, body } => {
                while self.expr(cond)?.as_bool() {
                    if let Flow::Break = self.stmts(body)? {
                        break;
                    }
                }
            }
            Stmt::Break => return Ok(Flow::Break),
            Stmt::Grow { buf, len } => {
                let want = self.expr(len)?.as_i64();
                let b = &mut self.bufs[buf.0 as usize];
                if want > b.len() as i64 {
                    if want > MAX_GROW {
                        return Err(KernelFault::Grow {
                            buf: *buf,
                            len: want,
                        });
                    }
                    if !grow(b, want as usize) {
                        return Err(KernelFault::Grow {
                            buf: *buf,
                            len: want,
                        });
                    }
                }
            }
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } => {
                let (start, stop) = (self.expr(start)?.as_i64(), self.expr(stop)?.as_i64());
                let v = self.expr(value)?;
                if start < stop {
                    let len = self.bufs[buf.0 as usize].len() as i64;
                    if start < 0 || stop > len {
                        let index = if start < 0 { start } else { stop - 1 };
                        return Err(KernelFault::OutOfBounds { buf: *buf, index });
                    }
                    let b = &mut self.bufs[buf.0 as usize];
                    for i in start..stop {
                        b.set(i as usize, v);
                    }
                }
            }
            Stmt::Sort {
                buf,
                flags: None,
                lo,
                hi,
            } => {
                let (lo, hi) = self.range(*buf, lo, hi)?;
                let v = self.bufs[buf.0 as usize]
                    .as_i64_mut()
                    .expect("checked IR sorts i64 buffers");
                crate::runtime::intrinsics::sort_i64(&mut v[lo..hi]);
            }
            Stmt::Sort {
                buf,
                flags: Some(flags),
                lo,
                hi,
            } => {
                let (lo, hi) = self.range(*buf, lo, hi)?;
                // Checked IR names two distinct buffers; take the slots out to borrow both.
                let mut s =
                    std::mem::replace(&mut self.bufs[buf.0 as usize], Buffer::I64(vec![].into()));
                let r = match &self.bufs[flags.0 as usize] {
                    Buffer::Bool(f) => crate::runtime::intrinsics::sort_slots(
                        &mut s.as_i64_mut().expect("checked IR sorts i64 buffers")[lo..hi],
                        f,
                    ),
                    _ => unreachable!("checked IR sorts with bool flags"),
                };
                self.bufs[buf.0 as usize] = s;
                if let Err(index) = r {
                    return Err(KernelFault::OutOfBounds { buf: *flags, index });
                }
            }
            Stmt::SortPerm { keys, perm, lo, hi } => {
                let (lo, hi) = self.range(*perm, lo, hi)?;
                // Checked IR names two distinct buffers; take the permutation out to borrow both.
                let mut p =
                    std::mem::replace(&mut self.bufs[perm.0 as usize], Buffer::I64(vec![].into()));
                let k = self.bufs[keys.0 as usize]
                    .as_i64()
                    .expect("checked IR sorts by i64 keys");
                let r =
                    intrinsics::sort_perm(k, &mut p.as_i64_mut().expect("i64 permutation")[lo..hi]);
                self.bufs[perm.0 as usize] = p;
                if let Err(index) = r {
                    return Err(KernelFault::OutOfBounds { buf: *keys, index });
                }
            }
            Stmt::Fail(k) => return Err(KernelFault::Fail(*k)),
            Stmt::Comment(_) => {}
        }
        Ok(Flow::Next)
    }

    /// A non-empty range `[lo, hi)` must lie inside the buffer; an empty one is `0..0`.
    fn range(&mut self, buf: BufId, lo: &Expr, hi: &Expr) -> Step<(usize, usize)> {
        let (lo, hi) = (self.expr(lo)?.as_i64(), self.expr(hi)?.as_i64());
        if lo >= hi {
            return Ok((0, 0));
        }
        if lo < 0 || hi > self.bufs[buf.0 as usize].len() as i64 {
            let index = if lo < 0 { lo } else { hi - 1 };
            return Err(KernelFault::OutOfBounds { buf, index });
        }
        Ok((lo as usize, hi as usize))
    }

    fn index(&mut self, buf: BufId, e: &Expr) -> Step<usize> {
        let i = self.expr(e)?.as_i64();
        self.in_bounds(buf, i)
    }

    fn in_bounds(&self, buf: BufId, i: i64) -> Step<usize> {
        if i < 0 || i >= self.bufs[buf.0 as usize].len() as i64 {
            return Err(KernelFault::OutOfBounds { buf, index: i });
        }
        Ok(i as usize)
    }

    fn expr(&mut self, e: &Expr) -> Step<Scalar> {
        Ok(match e {
            // A constant point means its canonical form (as in the native backends).
            Expr::Const(Scalar::Limit(p)) => Scalar::Limit(canonical_limit(*p)),
            Expr::Const(s) => *s,
            Expr::Var(v) => self.vars[v.0 as usize],
            Expr::Load { buf, index } => {
                let i = self.index(*buf, index)?;
                self.bufs[buf.0 as usize].get(i).widen()
            }
            Expr::Len(buf) => Scalar::I64(self.bufs[buf.0 as usize].len() as i64),
            Expr::Unary(op, a) => unary(*op, self.expr(a)?),
            Expr::Binary(op, a, b) => binary(*op, self.expr(a)?, self.expr(b)?),
            Expr::MakeLimit(v, e) => {
                let (v, e) = (self.expr(v)?.as_f64(), self.expr(e)?.as_i64());
                Scalar::limit(v, e)
            }
            Expr::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c)?, self.expr(a)?, self.expr(b)?);
                if c.as_bool() { a } else { b }
            }
            Expr::Cast(t, a) => self.expr(a)?.cast(*t),
            Expr::SearchGe { buf, lo, hi, key } => {
                let (mut lo, mut hi, key) = (
                    self.expr(lo)?.as_i64(),
                    self.expr(hi)?.as_i64(),
                    self.expr(key)?.as_i64(),
                );
                let b = &self.bufs[buf.0 as usize];
                if lo < hi && (lo < 0 || hi > b.len() as i64) {
                    let index = if lo < 0 { lo } else { hi - 1 };
                    return Err(KernelFault::OutOfBounds { buf: *buf, index });
                }
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if b.get(mid as usize).as_i64() < key {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                Scalar::I64(lo)
            }
            Expr::HashFind { table, key } => {
                let key = self.expr(key)?.as_i64();
                let t = self.bufs[table.0 as usize]
                    .as_i64()
                    .expect("checked IR hashes into i64 buffers");
                Scalar::I64(intrinsics::hash_find(t, key))
            }
        })
    }
}

fn unary(op: UnOp, a: Scalar) -> Scalar {
    match (op, a) {
        (UnOp::Neg, Scalar::I64(x)) => Scalar::I64(x.wrapping_neg()),
        (UnOp::Neg, Scalar::F64(x)) => Scalar::F64(-x),
        (UnOp::Not, Scalar::Bool(x)) => Scalar::Bool(!x),
        (UnOp::Not, Scalar::I64(x)) => Scalar::I64(!x),
        (UnOp::Abs, Scalar::I64(x)) => Scalar::I64(x.wrapping_abs()),
        (UnOp::Abs, Scalar::F64(x)) => Scalar::F64(x.abs()),
        (UnOp::Sqrt, Scalar::F64(x)) => Scalar::F64(x.sqrt()),
        (UnOp::Exp, Scalar::F64(x)) => Scalar::F64(x.exp()),
        (UnOp::Log, Scalar::F64(x)) => Scalar::F64(x.ln()),
        (UnOp::Floor, Scalar::F64(x)) => Scalar::F64(x.floor()),
        (UnOp::Math(f), Scalar::F64(x)) => Scalar::F64(f.eval(x)),
        (UnOp::LimitVal, Scalar::Limit(p)) => Scalar::F64(p.val),
        (UnOp::LimitEps, Scalar::Limit(p)) => Scalar::I64(i64::from(p.eps.sign())),
        // `Limit::next`/`prev` would add `±0.0 + ε`, which can only change the sign of a
        // zero value; the points here are canonical, so stepping the sign is the same.
        (UnOp::After, Scalar::Limit(p)) => Scalar::Limit(Limit::new(
            p.val,
            Eps::saturate(i32::from(p.eps.sign()) + 1),
        )),
        (UnOp::Before, Scalar::Limit(p)) => Scalar::Limit(Limit::new(
            p.val,
            Eps::saturate(i32::from(p.eps.sign()) - 1),
        )),
        (UnOp::After, Scalar::I64(x)) => Scalar::I64(x.wrapping_add(1)),
        (UnOp::Before, Scalar::I64(x)) => Scalar::I64(x.wrapping_sub(1)),
        (op, a) => unreachable!("checked IR has no {op:?} on {}", a.ty()),
    }
}

/// The IR's binary operators on compute-type values (see `ir::BinOp` for the rules).
pub(crate) fn binary(op: BinOp, a: Scalar, b: Scalar) -> Scalar {
    use BinOp::*;
    use Scalar::{Bool as B, F64 as F, I64 as I, Limit as L};
    match (op, a, b) {
        (Add, I(x), I(y)) => I(x.wrapping_add(y)),
        (Sub, I(x), I(y)) => I(x.wrapping_sub(y)),
        (Mul, I(x), I(y)) => I(x.wrapping_mul(y)),
        (Div, I(x), I(y)) => I(if y == 0 { 0 } else { x.wrapping_div(y) }),
        (Rem, I(x), I(y)) => I(if y == 0 { 0 } else { x.wrapping_rem(y) }),
        (Add, F(x), F(y)) => F(x + y),
        (Sub, F(x), F(y)) => F(x - y),
        (Mul, F(x), F(y)) => F(crate::semantics::mul_f(x, y)),
        (IeeeMul, F(x), F(y)) => F(x * y),
        (Div, F(x), F(y)) => F(x / y),
        (Rem, F(x), F(y)) => F(x % y),
        (Math(f), F(x), F(y)) => F(f.eval(x, y)),
        (Min, I(x), I(y)) => I(if y < x { y } else { x }),
        (Max, I(x), I(y)) => I(if y > x { y } else { x }),
        (Min, F(x), F(y)) => F(crate::semantics::min_f(x, y)),
        (Max, F(x), F(y)) => F(crate::semantics::max_f(x, y)),
        // Equal keys are the same canonical point, so which operand wins a tie is moot.
        (Min, L(x), L(y)) => L(if limit_code::encode(y) < limit_code::encode(x) {
            y
        } else {
            x
        }),
        (Max, L(x), L(y)) => L(if limit_code::encode(y) > limit_code::encode(x) {
            y
        } else {
            x
        }),
        (Eq, x, y) => B(cmp(x, y) == Some(std::cmp::Ordering::Equal)),
        (Ne, x, y) => B(cmp(x, y) != Some(std::cmp::Ordering::Equal)),
        (Lt, x, y) => B(cmp(x, y) == Some(std::cmp::Ordering::Less)),
        (Le, x, y) => B(matches!(
            cmp(x, y),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        )),
        (Gt, x, y) => B(cmp(x, y) == Some(std::cmp::Ordering::Greater)),
        (Ge, x, y) => B(matches!(
            cmp(x, y),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        )),
        (And, B(x), B(y)) => B(x & y),
        (Or, B(x), B(y)) => B(x | y),
        (Xor, B(x), B(y)) => B(x ^ y),
        (And, I(x), I(y)) => I(x & y),
        (Or, I(x), I(y)) => I(x | y),
        (Xor, I(x), I(y)) => I(x ^ y),
        (Shl, I(x), I(y)) => I(x.wrapping_shl((y & 63) as u32)),
        (Shr, I(x), I(y)) => I(x.wrapping_shr((y & 63) as u32)),
        (op, a, b) => unreachable!("checked IR has no {op:?} on {} and {}", a.ty(), b.ty()),
    }
}

/// Ordering of two values of one compute type (`None` when a NaN is involved).
fn cmp(a: Scalar, b: Scalar) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(&y)),
        (Scalar::I64(x), Scalar::I64(y)) => Some(x.cmp(&y)),
        (Scalar::F64(x), Scalar::F64(y)) => x.partial_cmp(&y),
        // Through the native backends' key: a total order, NaN above +Inf and equal to itself.
        (Scalar::Limit(x), Scalar::Limit(y)) => {
            Some(limit_code::encode(x).cmp(&limit_code::encode(y)))
        }
        (a, b) => unreachable!(
            "checked IR compares one type, not {} and {}",
            a.ty(),
            b.ty()
        ),
    }
}
