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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BufId, build as b};

    /// A kernel over a byte buffer (0), an I64 buffer (1) and a signed byte buffer (2), with
    /// I64 variables 0..6 and a Bool one (6).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        let i = ElemType::I64;
        b::test_kernel(
            &[("img", ElemType::U8), ("dims", i), ("s", ElemType::I8)],
            false,
            &[
                ("a", i),
                ("b", i),
                ("c", i),
                ("d", i),
                ("e", i),
                ("f", i),
                ("g", ElemType::Bool),
            ],
            body,
        )
    }

    fn byte() -> Expr {
        b::load(BufId(0), b::int(0))
    }

    #[test]
    fn each_rule_narrows_a_byte() {
        let k = kernel(vec![]);
        let r = Ranges::default();
        let of = |e: Expr| r.range(&k, &e);
        assert_eq!(of(byte()), Some((0, 255)));
        assert_eq!(of(b::load(BufId(2), b::int(0))), Some((-128, 127)));
        assert_eq!(of(b::load(BufId(1), b::int(0))), None);
        assert_eq!(of(b::bin(BinOp::Div, byte(), b::int(16))), Some((0, 15)));
        assert_eq!(of(b::bin(BinOp::Shr, byte(), b::int(5))), Some((0, 7)));
        assert_eq!(of(b::bin(BinOp::Rem, byte(), b::int(7))), Some((0, 6)));
        assert_eq!(
            of(b::bin(BinOp::Rem, b::load(BufId(2), b::int(0)), b::int(7))),
            Some((-6, 6))
        );
        // `&` with a non-negative constant, whatever the other side.
        let any = b::load(BufId(1), b::int(0));
        assert_eq!(
            of(b::bin(BinOp::And, any.clone(), b::int(12))),
            Some((0, 12))
        );
        assert_eq!(of(b::bin(BinOp::And, any.clone(), b::int(-1))), None);
        assert_eq!(of(b::bin(BinOp::Min, byte(), b::int(9))), Some((0, 9)));
        assert_eq!(of(b::bin(BinOp::Max, byte(), b::int(9))), Some((9, 255)));
        assert_eq!(
            of(b::bin(BinOp::Sub, byte(), b::int(300))),
            Some((-300, -45))
        );
        assert_eq!(of(b::bin(BinOp::Mul, byte(), b::int(-2))), Some((-510, 0)));
        // Division by a non-constant, zero or negative divisor, and overflow: no range.
        assert_eq!(of(b::bin(BinOp::Div, byte(), any.clone())), None);
        assert_eq!(of(b::bin(BinOp::Div, byte(), b::int(0))), None);
        assert_eq!(of(b::bin(BinOp::Div, byte(), b::int(-4))), None);
        assert_eq!(of(b::bin(BinOp::Mul, byte(), b::int(i64::MAX))), None);
        assert_eq!(of(b::bin(BinOp::Add, any, b::int(1))), None);
    }

    #[test]
    fn a_variable_takes_every_assignment_and_its_initial_zero() {
        let (a, c, d, e, f) = (VarId(0), VarId(2), VarId(3), VarId(4), VarId(5));
        let k = kernel(vec![
            b::assign(a, b::bin(BinOp::Div, byte(), b::int(16))),
            b::assign(a, b::int(20)),
            // A copy, in a loop whose counter has no range.
            Stmt::For {
                var: d,
                start: b::int(0),
                stop: b::int(4),
                body: vec![b::assign(c, b::add(b::var(a), b::int(1)))],
            },
            // A counter advanced by hand: its own range is waited for forever.
            b::assign(e, b::add(b::var(e), b::int(1))),
            b::assign(f, b::bin(BinOp::Min, b::var(e), b::int(3))),
        ]);
        let r = Ranges::of(&k);
        assert_eq!(r.of_var(a), Some((0, 20)));
        assert_eq!(r.of_var(c), Some((0, 21)));
        assert_eq!(r.of_var(d), None);
        assert_eq!(r.of_var(e), None);
        assert_eq!(r.of_var(f), None);
        // A variable assigned a value with no range has none, nor do those copying it.
        let k = kernel(vec![
            b::assign(a, byte()),
            b::assign(a, b::load(BufId(1), b::int(0))),
            b::assign(c, b::var(a)),
        ]);
        let r = Ranges::of(&k);
        assert_eq!((r.of_var(a), r.of_var(c)), (None, None));
    }

    #[test]
    fn comparisons_the_ranges_decide() {
        let (a, c) = (VarId(0), VarId(2));
        let k = kernel(vec![
            b::assign(a, b::bin(BinOp::Div, byte(), b::int(16))),
            b::assign(c, b::load(BufId(1), b::int(0))),
        ]);
        let r = Ranges::of(&k);
        let d = |op, x: Expr, y: Expr| r.decide(&k, op, &x, &y);
        assert_eq!(d(BinOp::Lt, b::var(a), b::int(0)), Some(false));
        assert_eq!(d(BinOp::Ge, b::var(a), b::int(0)), Some(true));
        assert_eq!(d(BinOp::Lt, b::var(a), b::int(16)), Some(true));
        assert_eq!(d(BinOp::Le, b::int(16), b::var(a)), Some(false));
        assert_eq!(d(BinOp::Lt, b::var(a), b::int(15)), None);
        assert_eq!(d(BinOp::Le, b::var(c), b::var(c)), Some(true));
        assert_eq!(d(BinOp::Gt, b::var(c), b::var(c)), Some(false));
        assert_eq!(d(BinOp::Le, b::var(c), b::var(a)), None);
        assert_eq!(d(BinOp::Eq, b::var(a), b::int(40)), None);
    }
}
