//! Value ranges of integer variables, for loop versioning (`versioning::At::Ranged`,
//! `At::Under`): a variable every assignment of which, anywhere in the kernel, is an
//! expression whose value lies in a constant range whatever the data, such as a bin index
//! `img[y, x] / 16` computed from a byte (`[0, 15]`). An index in `[lo, hi]` with `lo >= 0`
//! stays in a buffer of more than `hi` elements, so its per-element check becomes one test
//! before the loop; a comparison of it with a constant is decided at compile time.
//!
//! Flow-insensitive, like `versioning::Gathers`: a variable's range covers all its
//! assignments and its initial 0, so it holds wherever the variable is read. A variable is
//! given a range only once all the variables its assignments read have one (no cycles, so
//! a counter `v = v + 1` gets none).

use crate::ir::{BinOp, Expr, Kernel, Stmt, VarId};
use crate::types::{ElemType, Scalar};
use std::collections::HashMap;

pub use crate::ir::walk::walk_stmts;

/// A closed range `[lo, hi]` of I64 values.
pub type Range = (i64, i64);

/// The ranges of a kernel's variables that have one ([`Ranges::of`]).
#[derive(Default, Debug)]
pub struct Ranges {
    vars: HashMap<VarId, Range>,
}

impl Ranges {
    pub fn of(k: &Kernel) -> Ranges {
        // Every assignment of every variable; `None` for one that is not a plain expression
        // (a loop counter, a parallel chunk's bounds).
        let mut assigned: HashMap<VarId, Vec<Option<Expr>>> = HashMap::new();
        walk_stmts(&k.body, &mut |s| match s {
            Stmt::Assign(v, e) => assigned.entry(*v).or_default().push(Some(e.clone())),
            Stmt::For { var, .. } => assigned.entry(*var).or_default().push(None),
            Stmt::Chunked(c) => {
                for v in [c.lo, c.hi] {
                    assigned.entry(v).or_default().push(None);
                }
            }
            _ => {}
        });
        let mut r = Ranges::default();
        let mut ruled_out: std::collections::HashSet<VarId> = Default::default();
        loop {
            let mut moved = false;
            for (v, froms) in &assigned {
                if r.vars.contains_key(v) || ruled_out.contains(v) {
                    continue;
                }
                if k.vars
                    .get(v.0 as usize)
                    .is_none_or(|d| d.ty != ElemType::I64)
                {
                    ruled_out.insert(*v);
                    moved = true;
                    continue;
                }
                // The initial 0 is one of the values.
                let mut acc = Some((0, 0));
                let mut waiting = false;
                for f in froms {
                    let Some(e) = f else {
                        acc = None;
                        break;
                    };
                    if reads_open(e, &r, &ruled_out, &assigned) {
                        waiting = true;
                        break;
                    }
                    acc = match (acc, r.range(k, e)) {
                        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                        _ => None,
                    };
                    if acc.is_none() {
                        break;
                    }
                }
                if waiting {
                    continue;
                }
                match acc {
                    Some(x) => r.vars.insert(*v, x),
                    None => {
                        ruled_out.insert(*v);
                        None
                    }
                };
                moved = true;
            }
            if !moved {
                break;
            }
        }
        r
    }

    /// The range of `v`'s values, if it has one.
    pub fn of_var(&self, v: VarId) -> Option<Range> {
        self.vars.get(&v).copied()
    }

    /// The range of an I64 expression's values, if the rules know one: constants, loads
    /// from byte and boolean arrays, variables with a range, and `+ - * / % & >> min max`
    /// and selects of those (`/`, `%`, `>>` with a positive constant on the right, `&` with
    /// a non-negative one on either side), without overflow.
    pub fn range(&self, k: &Kernel, e: &Expr) -> Option<Range> {
        match e {
            Expr::Const(Scalar::I64(c)) => Some((*c, *c)),
            Expr::Var(v) => self.of_var(*v),
            Expr::Load { buf, .. } => match k.bufs.get(buf.0 as usize)?.elem {
                ElemType::U8 => Some((0, 255)),
                ElemType::Bool => Some((0, 1)),
                ElemType::I8 => Some((-128, 127)),
                _ => None,
            },
            Expr::Select(_, a, b) => {
                let (a, b) = (self.range(k, a)?, self.range(k, b)?);
                Some((a.0.min(b.0), a.1.max(b.1)))
            }
            Expr::Binary(op, a, b) => {
                let konst = |x: &Expr| match x {
                    Expr::Const(Scalar::I64(c)) => Some(*c),
                    _ => None,
                };
                match op {
                    // `x & m` with `m >= 0` is in `[0, m]` whatever `x` is.
                    BinOp::And => match (konst(a), konst(b)) {
                        (_, Some(m)) | (Some(m), _) if m >= 0 => Some((0, m)),
                        _ => None,
                    },
                    BinOp::Div | BinOp::Shr | BinOp::Rem => {
                        let c = konst(b).filter(|c| *c > 0)?;
                        let (lo, hi) = self.range(k, a)?;
                        match op {
                            // Truncating division by a positive constant is monotonic.
                            BinOp::Div => Some((lo / c, hi / c)),
                            BinOp::Shr if c < 64 => Some((lo >> c, hi >> c)),
                            // The remainder takes the dividend's sign and is below `c`.
                            BinOp::Rem => Some((
                                if lo < 0 { (1 - c).max(lo) } else { 0 },
                                if hi > 0 { (c - 1).min(hi) } else { 0 },
                            )),
                            _ => None,
                        }
                    }
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max => {
                        let (a, b) = (self.range(k, a)?, self.range(k, b)?);
                        match op {
                            BinOp::Add => Some((a.0.checked_add(b.0)?, a.1.checked_add(b.1)?)),
                            BinOp::Sub => Some((a.0.checked_sub(b.1)?, a.1.checked_sub(b.0)?)),
                            BinOp::Mul => {
                                let p = [
                                    a.0.checked_mul(b.0)?,
                                    a.0.checked_mul(b.1)?,
                                    a.1.checked_mul(b.0)?,
                                    a.1.checked_mul(b.1)?,
                                ];
                                Some((*p.iter().min()?, *p.iter().max()?))
                            }
                            BinOp::Min => Some((a.0.min(b.0), a.1.min(b.1))),
                            _ => Some((a.0.max(b.0), a.1.max(b.1))),
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The value of the I64 comparison `a op b` when the ranges decide it, such as
    /// `v < 0` for `v` in `[0, 15]`, or `v <= v`.
    pub fn decide(&self, k: &Kernel, op: BinOp, a: &Expr, b: &Expr) -> Option<bool> {
        if !matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge) {
            return None;
        }
        if k.type_of(a) != ElemType::I64 {
            return None;
        }
        if let (Expr::Var(x), Expr::Var(y)) = (a, b)
            && x == y
        {
            return Some(matches!(op, BinOp::Le | BinOp::Ge));
        }
        let (x, y) = (self.range(k, a)?, self.range(k, b)?);
        let (lt, ge) = (x.1 < y.0, x.0 >= y.1);
        let (le, gt) = (x.1 <= y.0, x.0 > y.1);
        match op {
            BinOp::Lt if lt => Some(true),
            BinOp::Lt if ge => Some(false),
            BinOp::Le if le => Some(true),
            BinOp::Le if gt => Some(false),
            BinOp::Gt if gt => Some(true),
            BinOp::Gt if le => Some(false),
            BinOp::Ge if ge => Some(true),
            BinOp::Ge if lt => Some(false),
            _ => None,
        }
    }
}

/// Whether `e` reads a variable that has no range yet but may still get one.
fn reads_open(
    e: &Expr,
    r: &Ranges,
    ruled_out: &std::collections::HashSet<VarId>,
    assigned: &HashMap<VarId, Vec<Option<Expr>>>,
) -> bool {
    let mut open = false;
    crate::ir::walk::walk_exprs(&[Stmt::Assign(VarId(0), e.clone())], &mut |x| {
        if let Expr::Var(v) = x {
            open |= assigned.contains_key(v) && !r.vars.contains_key(v) && !ruled_out.contains(v);
        }
    });
    open
}
