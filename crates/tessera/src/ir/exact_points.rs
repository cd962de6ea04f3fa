//! Points taken apart into a float value and an integer sign, so that the backends compare
//! plain floats where they compared 128-bit keys.
//!
//! The backends hold a `Limit` point as a 128-bit order key (`backend::limit_code`): making
//! one from a coordinate canonicalises the value, maps its bits to an order key and shifts in
//! the sign; taking the value back out undoes all that; and a kernel with a few point
//! variables spends two registers on each, which in a loop nest over two real levels makes
//! the register allocator spill most of the loop's state. Yet the points a kernel makes are
//! nearly all `make_limit(value, sign)` with the sign a constant of the program: a stored
//! pinpoint coordinate is `make_limit(load, 0)`, a closed loop bound `limit(c, 0)`, the step
//! past an entry `after(make_limit(load, 0))`. This pass
//! - replaces each point variable whose every assignment is such a pair by a float variable
//!   (the value) and an integer variable (the sign, in `{-1, 0, 1}`), or by the float alone
//!   when every assigned sign is 0;
//! - then rewrites every operation on pairs into float and integer operations: a comparison
//!   is one float comparison when the signs are constants (they only decide ties, and do so
//!   at compile time), `after`/`before` step the sign, `min`/`max`/`select` select both
//!   halves, and the value of a pair is its float.
//!
//! What cannot be taken apart (a point from a sign that is not saturated, an operand too
//! costly to evaluate twice) keeps its key: `make_limit` rebuilds it where needed.
//!
//! Exactness, including the corners of the keys' order:
//! - `-0.0` and `+0.0` are one point; float comparison already says they are equal.
//! - A NaN value is the one canonical NaN point, above `+Inf` and equal to itself, while
//!   float comparisons are false on NaN. Against a constant that is not NaN one float
//!   comparison still answers (`a <= c` is false for a NaN `a`, and NaN is above `c`);
//!   between two unknowns the NaN cases are spelt out (`a <= b || b != b`), and only for
//!   variables and constants, whose repeated evaluation is free.
//! - The value of a pair is its canonical value: `-0.0 + 0.0` is `+0.0`, as in
//!   `build::limit_val` (a NaN stays a NaN).
//! - Variables start at zero: the zero point is `0 + 0`, a zero float and a zero sign.
//!
//! Runs after the other IR passes, on every backend's input (`run::Runner::compile`).

use super::build as b;
use super::effects::new_var;
use super::{BinOp, BufId, Expr, Kernel, Stmt, UnOp, VarId};
use crate::types::{ElemType, Scalar};
use std::collections::BTreeSet;

/// Rewrite the kernel's points into float values and integer signs where it can.
pub fn exact_points(k: &mut Kernel) {
    let mut cx = Cx {
        not_nan: k.not_nan.iter().copied().collect(),
        ..Cx::default()
    };
    cx.find_finite(k);
    cx.fold_body(&mut k.body);
    // Taking one variable apart can make another's assignments pairs (`x = y` with `y`
    // taken apart), so repeat until nothing changes; each round takes one variable or more.
    while cx.split_vars(k) {
        cx.find_finite(k);
        cx.fold_body(&mut k.body);
    }
    // Squares are what the disc test of a radius search multiplies: `a * a` is IEEE `a * a`
    // (the strong zero only differs when one factor is zero and the other is not finite).
    let vars: Vec<ElemType> = k.vars.iter().map(|v| v.ty).collect();
    squares(&mut k.body, &vars);
}

#[derive(Default)]
struct Cx {
    /// The sign variables this pass made: each holds -1, 0 or 1.
    signs: BTreeSet<VarId>,
    /// The buffers whose elements are never NaN (`Kernel::not_nan`).
    not_nan: BTreeSet<BufId>,
    /// The F64 variables that never hold NaN ([`Cx::find_finite`]).
    finite: BTreeSet<VarId>,
}

/// A sign: a constant or an I64 expression known to be -1, 0 or 1.
#[derive(Clone, Debug)]
enum Sign {
    Const(i8),
    Expr(Expr),
}

impl Sign {
    fn expr(self) -> Expr {
        match self {
            Sign::Const(s) => b::int(i64::from(s)),
            Sign::Expr(e) => e,
        }
    }
    fn cheap(&self) -> bool {
        match self {
            Sign::Const(_) => true,
            Sign::Expr(e) => trivial(e),
        }
    }
}

impl Cx {
    /// Whether the F64 expression is never NaN: then a float comparison with it is exact in
    /// the points' order, where NaN is above everything.
    fn never_nan(&self, e: &Expr) -> bool {
        match e {
            Expr::Const(Scalar::F64(c)) => !c.is_nan(),
            Expr::Load { buf, .. } => self.not_nan.contains(buf),
            Expr::Var(v) => self.finite.contains(v),
            Expr::Select(_, a, b) => self.never_nan(a) && self.never_nan(b),
            // A canonical value (`build::limit_val`).
            Expr::Binary(BinOp::Add, a, z) if **z == Expr::Const(Scalar::F64(0.0)) => {
                self.never_nan(a)
            }
            _ => false,
        }
    }

    /// The F64 variables that never hold NaN: from all of them (they start at 0.0), drop
    /// each with an assignment that may be NaN until none is left to drop. What stays is
    /// consistent: every assignment to one of them is never NaN given the others.
    fn find_finite(&mut self, k: &Kernel) {
        self.finite = (0..k.vars.len())
            .filter(|&i| k.vars[i].ty == ElemType::F64)
            .map(|i| VarId(i as u32))
            .collect();
        fn walk(cx: &Cx, body: &[Stmt], drop: &mut Vec<VarId>) {
            for s in body {
                if let Stmt::Assign(v, e) = s
                    && cx.finite.contains(v)
                    && !cx.never_nan(e)
                {
                    drop.push(*v);
                }
                for inner in s.bodies() {
                    walk(cx, inner, drop);
                }
            }
        }
        loop {
            let mut drop = vec![];
            walk(self, &k.body, &mut drop);
            if drop.is_empty() {
                return;
            }
            for v in drop {
                self.finite.remove(&v);
            }
        }
    }

    /// Whether the I64 expression is -1, 0 or 1 by construction: a sign variable, or what
    /// the rules below build from signs.
    fn saturated(&self, e: &Expr) -> bool {
        match e {
            Expr::Const(Scalar::I64(-1..=1)) => true,
            Expr::Var(v) => self.signs.contains(v),
            Expr::Select(_, x, y) => self.saturated(x) && self.saturated(y),
            // `after`: min(s + 1, 1); `before`: max(s - 1, -1).
            Expr::Binary(BinOp::Min, x, one) if **one == b::int(1) => {
                matches!(&**x, Expr::Binary(BinOp::Add, s, c) if **c == b::int(1) && self.saturated(s))
            }
            Expr::Binary(BinOp::Max, x, m1) if **m1 == b::int(-1) => {
                matches!(&**x, Expr::Binary(BinOp::Sub, s, c) if **c == b::int(1) && self.saturated(s))
            }
            _ => false,
        }
    }

    /// A point as its value (an F64 expression) and sign, when it is built from them.
    fn split(&self, e: &Expr) -> Option<(Expr, Sign)> {
        match e {
            Expr::Const(Scalar::Limit(l)) => {
                Some((Expr::Const(Scalar::F64(l.val)), Sign::Const(l.eps.sign())))
            }
            Expr::MakeLimit(v, s) => match &**s {
                Expr::Const(Scalar::I64(k)) => Some(((**v).clone(), Sign::Const(k.signum() as i8))),
                s if self.saturated(s) => Some(((**v).clone(), Sign::Expr(s.clone()))),
                _ => None,
            },
            _ => None,
        }
    }

    /// The rewrite of one expression whose children are rewritten already.
    fn fold_node(&self, e: &Expr) -> Option<Expr> {
        match e {
            Expr::Unary(UnOp::LimitVal, x) => {
                let (v, _) = self.split(x)?;
                Some(match v {
                    // -0.0 is +0.0 as a point's value.
                    Expr::Const(Scalar::F64(c)) => Expr::Const(Scalar::F64(c + 0.0)),
                    v => b::limit_val(join(v, Sign::Const(0))),
                })
            }
            Expr::Unary(UnOp::LimitEps, x) => self.split(x).map(|(_, s)| s.expr()),
            // `after` and `before` on I64 are ±1; `split` only matches points.
            Expr::Unary(UnOp::After, x) => {
                let (v, s) = self.split(x)?;
                Some(join(
                    v,
                    match s {
                        Sign::Const(s) => Sign::Const((s + 1).min(1)),
                        Sign::Expr(s) => Sign::Expr(b::min(b::add(s, b::int(1)), b::int(1))),
                    },
                ))
            }
            Expr::Unary(UnOp::Before, x) => {
                let (v, s) = self.split(x)?;
                Some(join(
                    v,
                    match s {
                        Sign::Const(s) => Sign::Const((s - 1).max(-1)),
                        Sign::Expr(s) => Sign::Expr(b::max(b::sub(s, b::int(1)), b::int(-1))),
                    },
                ))
            }
            Expr::Binary(
                op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne),
                x,
                y,
            ) => self.compare(*op, self.split(x)?, self.split(y)?),
            // The smaller of two points: select both halves by one comparison.
            Expr::Binary(op @ (BinOp::Min | BinOp::Max), x, y) => {
                let ((a, ea), (bv, eb)) = (self.split(x)?, self.split(y)?);
                if !trivial(&a) || !trivial(&bv) || !ea.cheap() || !eb.cheap() {
                    return None;
                }
                let a_first =
                    self.compare(BinOp::Le, (a.clone(), ea.clone()), (bv.clone(), eb.clone()))?;
                let (lo, hi) = ((a, ea), (bv, eb));
                let ((v1, s1), (v2, s2)) = if *op == BinOp::Min {
                    (lo, hi)
                } else {
                    (hi, lo)
                };
                Some(select_pair(a_first, (v1, s1), (v2, s2)))
            }
            Expr::Select(c, x, y) => {
                let (px, py) = (self.split(x)?, self.split(y)?);
                let one_sign = matches!((&px.1, &py.1), (Sign::Const(a), Sign::Const(b)) if a == b);
                // Otherwise the condition selects the sign too.
                if !one_sign && !trivial(c) {
                    return None;
                }
                Some(select_pair((**c).clone(), px, py))
            }
            _ => None,
        }
    }

    fn fold_expr(&self, e: &mut Expr) {
        for c in e.children_mut() {
            self.fold_expr(c);
        }
        if let Some(new) = self.fold_node(e) {
            *e = new;
        }
    }

    fn fold_body(&self, body: &mut [Stmt]) {
        for s in body {
            for e in s.own_exprs_mut() {
                self.fold_expr(e);
            }
            for inner in s.bodies_mut() {
                self.fold_body(inner);
            }
        }
    }

    /// Take apart the point variables whose every assignment is a pair: the variable becomes
    /// the float value, and a new sign variable holds the sign unless every assigned sign is
    /// 0. A use becomes `make_limit(value, sign)`, which the folding takes apart where it
    /// can. Returns whether it took any.
    fn split_vars(&mut self, k: &mut Kernel) -> bool {
        // Per point variable: None (not a pair everywhere), or whether some sign is not 0.
        let mut plan: Vec<Option<bool>> = k
            .vars
            .iter()
            .map(|v| (v.ty == ElemType::Limit).then_some(false))
            .collect();
        self.scan(&k.body, &mut plan);
        if plan.iter().all(Option::is_none) {
            return false;
        }
        let mut sign_of: Vec<Option<Option<VarId>>> = vec![None; k.vars.len()];
        for (i, p) in plan.iter().enumerate() {
            if let Some(signed) = *p {
                let s = signed.then(|| {
                    let name = format!("{}_sign", k.vars[i].name);
                    new_var(k, &name, ElemType::I64)
                });
                if let Some(s) = s {
                    self.signs.insert(s);
                }
                sign_of[i] = Some(s);
                k.vars[i].ty = ElemType::F64;
            }
        }
        let mut body = std::mem::take(&mut k.body);
        self.rewrite(k, &mut body, &sign_of);
        k.body = body;
        true
    }

    fn scan(&self, body: &[Stmt], plan: &mut [Option<bool>]) {
        for s in body {
            if let Stmt::Assign(v, e) = s
                && let Some(p) = plan[v.0 as usize]
            {
                plan[v.0 as usize] = match self.split(e) {
                    None => None,
                    Some((_, Sign::Const(0))) => Some(p),
                    Some(_) => Some(true),
                };
            }
            for inner in s.bodies() {
                self.scan(inner, plan);
            }
        }
    }

    fn rewrite(&self, k: &mut Kernel, body: &mut Vec<Stmt>, sign_of: &[Option<Option<VarId>>]) {
        let mut out = Vec::with_capacity(body.len());
        for mut s in body.drain(..) {
            for inner in s.bodies_mut() {
                self.rewrite(k, inner, sign_of);
            }
            // Every assignment of a taken variable splits (`scan`); were one not to, it
            // would stay a point assigned to a float, which `Kernel::check` reports.
            let taken = match &s {
                Stmt::Assign(v, e) => sign_of[v.0 as usize]
                    .and_then(|sv| self.split(e).map(|(value, sign)| (*v, sv, value, sign))),
                _ => None,
            };
            let Some((v, sv, mut value, sign)) = taken else {
                for e in s.own_exprs_mut() {
                    use_pairs(e, sign_of);
                }
                out.push(s);
                continue;
            };
            use_pairs(&mut value, sign_of);
            match sv {
                None => out.push(Stmt::Assign(v, value)),
                Some(sv) => {
                    let mut sign = sign.expr();
                    use_pairs(&mut sign, sign_of);
                    // Both halves from the old values: through a temporary when each half
                    // reads the other's variable.
                    if !reads(&value, sv) {
                        out.push(Stmt::Assign(sv, sign));
                        out.push(Stmt::Assign(v, value));
                    } else if !reads(&sign, v) {
                        out.push(Stmt::Assign(v, value));
                        out.push(Stmt::Assign(sv, sign));
                    } else {
                        let t = new_var(k, "sign_next", ElemType::I64);
                        out.push(Stmt::Assign(t, sign));
                        out.push(Stmt::Assign(v, value));
                        out.push(Stmt::Assign(sv, Expr::Var(t)));
                    }
                }
            }
        }
        *body = out;
    }
}

/// Whether `e` reads variable `v`.
fn reads(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= *x == Expr::Var(v));
    found
}

/// Uses of taken variables as points: `make_limit(value, sign)`.
fn use_pairs(e: &mut Expr, sign_of: &[Option<Option<VarId>>]) {
    if let Expr::Var(v) = e
        && let Some(s) = sign_of[v.0 as usize]
    {
        let sign = match s {
            Some(s) => Sign::Expr(Expr::Var(s)),
            None => Sign::Const(0),
        };
        *e = join(Expr::Var(*v), sign);
        return;
    }
    for c in e.children_mut() {
        use_pairs(c, sign_of);
    }
}

/// The point `v + sign·ε` as an expression.
fn join(v: Expr, sign: Sign) -> Expr {
    b::make_limit(v, sign.expr())
}

/// `c ? x : y` on pairs.
fn select_pair(c: Expr, (v1, s1): (Expr, Sign), (v2, s2): (Expr, Sign)) -> Expr {
    let sign = match (s1, s2) {
        (Sign::Const(a), Sign::Const(bs)) if a == bs => Sign::Const(a),
        (s1, s2) => Sign::Expr(b::select(c.clone(), s1.expr(), s2.expr())),
    };
    join(b::select(c, v1, v2), sign)
}

/// Free to evaluate twice.
fn trivial(e: &Expr) -> bool {
    matches!(e, Expr::Const(_) | Expr::Var(_))
}

/// `!a`, without a double negation.
fn not(a: Expr) -> Expr {
    match a {
        Expr::Unary(UnOp::Not, x) => *x,
        a => b::not(a),
    }
}

fn ne(a: Expr, b: Expr) -> Expr {
    b::bin(BinOp::Ne, a, b)
}

impl Cx {
    /// `a < b` in the points' order of values (NaN above everything, equal to itself), or
    /// `None` when that needs `a` or `b` twice and they are not trivial.
    fn lt_t(&self, a: Expr, b: Expr) -> Option<Expr> {
        Some(if self.never_nan(&b) {
            b::lt(a, b)
        } else if self.never_nan(&a) {
            // a < b unless b <= a; a NaN b is above a.
            not(b::le(b, a))
        } else if trivial(&a) && trivial(&b) {
            b::or(
                b::lt(a.clone(), b.clone()),
                b::and(ne(b.clone(), b), b::eq(a.clone(), a)),
            )
        } else {
            return None;
        })
    }

    /// `a <= b` in the points' order of values.
    fn le_t(&self, a: Expr, b: Expr) -> Option<Expr> {
        Some(if self.never_nan(&b) {
            b::le(a, b)
        } else if self.never_nan(&a) {
            not(b::lt(b, a))
        } else if trivial(&a) && trivial(&b) {
            b::or(b::le(a, b.clone()), ne(b.clone(), b))
        } else {
            return None;
        })
    }

    /// `a == b` in the points' order of values.
    fn eq_t(&self, a: Expr, b: Expr) -> Option<Expr> {
        Some(if self.never_nan(&a) || self.never_nan(&b) {
            b::eq(a, b)
        } else if trivial(&a) && trivial(&b) {
            b::or(
                b::eq(a.clone(), b.clone()),
                b::and(ne(a.clone(), a), ne(b.clone(), b)),
            )
        } else {
            return None;
        })
    }

    /// A comparison of two pairs as float (and sign) comparisons: the order is lexicographic
    /// on (value, sign), so with constant signs the tie either counts or does not.
    fn compare(&self, op: BinOp, (a, ea): (Expr, Sign), (bv, eb): (Expr, Sign)) -> Option<Expr> {
        match (ea, eb) {
            (Sign::Const(ea), Sign::Const(eb)) => match op {
                // (a, ea) < (b, eb): below in value, or equal in value with ea < eb.
                BinOp::Lt if ea < eb => self.le_t(a, bv),
                BinOp::Lt => self.lt_t(a, bv),
                // (a, ea) <= (b, eb) is not (b, eb) < (a, ea).
                BinOp::Le if ea <= eb => self.le_t(a, bv),
                BinOp::Le => self.lt_t(a, bv),
                BinOp::Gt => self.compare(op_swap(op), (bv, Sign::Const(eb)), (a, Sign::Const(ea))),
                BinOp::Ge => self.compare(op_swap(op), (bv, Sign::Const(eb)), (a, Sign::Const(ea))),
                // Different signs are never equal; that case is rare and would drop the
                // operands' evaluation (a load's bounds check), so it keeps its keys.
                BinOp::Eq if ea == eb => self.eq_t(a, bv),
                BinOp::Ne if ea == eb => self.eq_t(a, bv).map(b::not),
                _ => None,
            },
            (ea, eb) => {
                // A sign known only at run time: the tie is decided by comparing the signs.
                // Each value is needed twice and each sign once.
                if !trivial(&a) || !trivial(&bv) {
                    return None;
                }
                let (ea, eb) = (ea.expr(), eb.expr());
                let less = |a: Expr, ea: Expr, bv: Expr, eb: Expr| -> Option<Expr> {
                    Some(b::or(
                        self.lt_t(a.clone(), bv.clone())?,
                        b::and(self.eq_t(a, bv)?, b::lt(ea, eb)),
                    ))
                };
                match op {
                    BinOp::Lt => less(a, ea, bv, eb),
                    BinOp::Gt => less(bv, eb, a, ea),
                    BinOp::Le => less(bv, eb, a, ea).map(b::not),
                    BinOp::Ge => less(a, ea, bv, eb).map(b::not),
                    BinOp::Eq => Some(b::and(self.eq_t(a, bv)?, b::eq(ea, eb))),
                    BinOp::Ne => Some(not(b::and(self.eq_t(a, bv)?, b::eq(ea, eb)))),
                    _ => None,
                }
            }
        }
    }
}

/// `Gt` as `Lt` and `Ge` as `Le`, with the operands swapped by the caller.
fn op_swap(op: BinOp) -> BinOp {
    match op {
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        op => op,
    }
}

/// `a * a` on floats as IEEE multiplication, for pure `a`: the strong zero of `Mul` differs
/// from IEEE only when one factor is zero and the other NaN or infinite, which a square
/// cannot be; `(-0) * (-0)` is `+0` either way.
fn squares(body: &mut [Stmt], vars: &[ElemType]) {
    fn expr(e: &mut Expr, vars: &[ElemType]) {
        for c in e.children_mut() {
            expr(c, vars);
        }
        if let Expr::Binary(op @ BinOp::Mul, a, b) = e
            && a == b
            && pure_ty(a, vars) == Some(ElemType::F64)
        {
            *op = BinOp::IeeeMul;
        }
    }
    for s in body {
        for e in s.own_exprs_mut() {
            expr(e, vars);
        }
        for inner in s.bodies_mut() {
            squares(inner, vars);
        }
    }
}

/// The type of an expression of constants, variables and arithmetic, which has the same
/// value both times it is evaluated (no loads, calls or searches); `None` for others.
fn pure_ty(e: &Expr, vars: &[ElemType]) -> Option<ElemType> {
    match e {
        Expr::Const(c) => Some(c.ty().compute()),
        Expr::Var(v) => vars.get(v.0 as usize).copied(),
        Expr::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::IeeeMul, a, b) => {
            let t = pure_ty(a, vars)?;
            (pure_ty(b, vars)? == t).then_some(t)
        }
        Expr::Unary(UnOp::Neg, a) => pure_ty(a, vars),
        Expr::Unary(UnOp::LimitVal, a) => pure_ty(a, vars).map(|_| ElemType::F64),
        Expr::MakeLimit(a, s) => {
            pure_ty(a, vars)?;
            pure_ty(s, vars).map(|_| ElemType::Limit)
        }
        _ => None,
    }
}
