//! Partial sums: a backward reduction over an inner loop keeps only the factors that change
//! with that loop inside it.
//!
//! The derivative table writes a contribution where its forward statement was, so a forward
//! `O[i, f] += A[i, j] * (exp(e) / z[i] * H[j, f])` in `for i, j, f` gives backward statements
//! in the same three loops, such as
//! `ds[i] += ifelse(c, dO[i, f] * A[i, j] * H[j, f] * (1.0 / z[i]) * exp(e), 0.0)`: a sum over
//! `f` whose condition and whose factors `1.0 / z[i]` and `exp(e)` do not depend on `f`, yet
//! are evaluated, multiplied and selected once per `f`, by every one of the statements that
//! repeat them (GAT's backward has five). Here such statements become
//!
//! ```text
//! P .= 0.0
//! for i, j, f:  P[i, j] += dO[i, f] * A[i, j] * H[j, f]      (one P per distinct product)
//! for i, j:     ds[i] += ifelse(c, P[i, j] * (1.0 / z[i]) * exp(e), 0.0)
//! ```
//!
//! which is the same sum, associated differently (the gradient program is Tessera's own: every
//! backend and the evaluator run this program, so they still agree bit for bit). The factors
//! left with the inner loop are those that read its index and every plain tensor read (a
//! sparse operand such as `A[i, j]` must stay a factor of what it annihilates: the first loop
//! nest then walks only `A`'s pattern, and `P`, stored like a tape, holds one entry per
//! visited `(i, j)`, so the second nest walks only those). `P` is indexed by the loops around
//! the inner one and is a [`Tape`] of the gradient program in all but name (its format is
//! chosen the same way: `api::grad`).
//!
//! What qualifies: a chain of perfectly nested loops at the top level of the backward pass,
//! whose innermost body is only assignments; a statement `T[...] += rhs` there whose indices do
//! not read the inner index, where `T` is not read in that body and only ever added to there;
//! `rhs` a product (through `ifelse(c, ..., 0.0)` whose `c` does not read the inner index) with
//! at least one factor that reads the inner index and at least one computed factor that does
//! not. Nothing it moves reads what the body writes. Anything else stays as it was.

use super::tape::{Tape, access, index, read, stmt};
use crate::notation::ast::{AssignOp, BinaryOp, Expr, ExprKind, Reducer, Span, Stmt, StmtKind};
use crate::types::Scalar;
use std::collections::HashSet;

/// The name of the hole a moved product leaves in its statement (never a valid name).
const HOLE: &str = "\u{0}partial";

/// Rewrite the top-level loop nests of `bwd` as the module describes. `fresh` names a new
/// tensor; the partial sums made are returned as tapes (declared by the caller, like tapes).
pub fn partial_sums(
    bwd: Vec<Stmt>,
    fresh: &mut dyn FnMut(&str) -> String,
) -> (Vec<Stmt>, Vec<Tape>) {
    let mut out = Vec::with_capacity(bwd.len());
    let mut made = vec![];
    for s in bwd {
        match nest(&s).and_then(|loops| rewrite_nest(loops, fresh, &mut made)) {
            Some(rewritten) => out.extend(rewritten),
            None => out.push(s),
        }
    }
    (out, made)
}

/// The loops of a perfect nest starting at `s` (each body one loop, the innermost only
/// assignments), outermost first.
fn nest(s: &Stmt) -> Option<Vec<&Stmt>> {
    let mut loops = vec![];
    let mut at = s;
    loop {
        let StmtKind::Loop { body, .. } = &at.kind else {
            return None;
        };
        loops.push(at);
        match body.as_slice() {
            [inner] if matches!(inner.kind, StmtKind::Loop { .. }) => at = inner,
            _ => {
                let only_assigns = body
                    .iter()
                    .all(|b| matches!(b.kind, StmtKind::Assign { .. }));
                return (only_assigns && !body.is_empty()).then_some(loops);
            }
        }
    }
}

/// A candidate statement taken apart: its product of inner factors and its rewritten copy
/// (with [`HOLE`] where the product was).
struct Split {
    product: Expr,
    finish: Stmt,
}

/// The statements replacing the nest `loops`, or `None` when no statement qualifies.
fn rewrite_nest(
    loops: Vec<&Stmt>,
    fresh: &mut dyn FnMut(&str) -> String,
    made: &mut Vec<Tape>,
) -> Option<Vec<Stmt>> {
    let headers: Vec<(
        String,
        crate::notation::ast::Extent,
        crate::notation::ast::LoopMode,
        Span,
    )> = loops
        .iter()
        .map(|l| match &l.kind {
            StmtKind::Loop {
                index,
                extent,
                parallel,
                ..
            } => (index.clone(), extent.clone(), *parallel, l.span),
            _ => unreachable!("nest() returns loops only"),
        })
        .collect();
    let inner = headers.last().expect("a nest has a loop").0.clone();
    let StmtKind::Loop { body, .. } = &loops.last().expect("a nest has a loop").kind else {
        return None;
    };
    // What the body writes, and what it reads, by tensor.
    let mut written = HashSet::new();
    let mut read_in_body = HashSet::new();
    let mut added_only = HashSet::new();
    let mut overwritten = HashSet::new();
    for b in body {
        if let StmtKind::Assign { lhs, op, rhs } = &b.kind {
            written.insert(lhs.tensor.clone());
            if matches!(op, AssignOp::Reduce(Reducer::Add)) {
                added_only.insert(lhs.tensor.clone());
            } else {
                overwritten.insert(lhs.tensor.clone());
            }
            crate::notation::visit::expr(rhs, &mut |e| note_read(e, &mut read_in_body));
            for ix in &lhs.indices {
                crate::notation::visit::index(ix, &mut |e| note_read(e, &mut read_in_body));
            }
        }
    }
    // The extents are evaluated around the loops: nothing there may read what the body writes.
    for (_, extent, _, _) in &headers {
        if let crate::notation::ast::Extent::Range(a, b) = extent
            && (reads_any(a, &written) || reads_any(b, &written))
        {
            return None;
        }
    }
    let mut kept = vec![];
    let mut groups: Vec<(String, Expr)> = vec![];
    let mut finishes: Vec<(usize, Stmt)> = vec![];
    for b in body {
        let split = match &b.kind {
            StmtKind::Assign { lhs, op, rhs }
                if matches!(op, AssignOp::Reduce(Reducer::Add))
                    && !overwritten.contains(&lhs.tensor)
                    && !read_in_body.contains(&lhs.tensor)
                    && lhs.swizzle.is_none()
                    && lhs
                        .indices
                        .iter()
                        .all(|ix| !mentions_index(&ix.expr, &inner) && ix.window.is_none()) =>
            {
                split(b, rhs, &inner, &written)
            }
            _ => None,
        };
        let Some(Split { product, finish }) = split else {
            kept.push(b.clone());
            continue;
        };
        let key = product.to_string();
        let k = match groups.iter().position(|(k, _)| *k == key) {
            Some(k) => k,
            None => {
                groups.push((key, product));
                groups.len() - 1
            }
        };
        finishes.push((k, finish));
    }
    if finishes.is_empty() {
        return None;
    }
    let outer: Vec<String> = headers[..headers.len() - 1]
        .iter()
        .map(|h| h.0.clone())
        .collect();
    let names: Vec<String> = groups.iter().map(|_| fresh("p")).collect();
    let at =
        |k: usize, span: Span| access(&names[k], outer.iter().map(|i| index(i)).collect(), span);
    let mut out = vec![];
    let mut inner_body = vec![];
    for (k, (_, product)) in groups.iter().enumerate() {
        out.push(stmt(
            StmtKind::Declare {
                tensor: names[k].clone(),
                init: Expr::lit(Scalar::F64(0.0)),
            },
            Span::default(),
        ));
        inner_body.push(stmt(
            StmtKind::Assign {
                lhs: at(k, product.span),
                op: AssignOp::Reduce(Reducer::Add),
                rhs: product.clone(),
            },
            product.span,
        ));
        made.push(Tape {
            name: names[k].clone(),
            local: names[k].clone(),
            versions: outer.len(),
            rank: outer.len(),
            fill: Scalar::F64(0.0),
        });
    }
    inner_body.extend(kept);
    out.push(wrap(&headers, inner_body));
    let finish_body: Vec<Stmt> = finishes
        .into_iter()
        .map(|(k, mut f)| {
            let span = f.span;
            fill_hole(&mut f, &read(at(k, span)));
            f
        })
        .collect();
    out.push(wrap(&headers[..headers.len() - 1], finish_body));
    Some(out)
}

/// `body` inside the loops `headers`, outermost first (no loops: `body` as a block).
fn wrap(
    headers: &[(
        String,
        crate::notation::ast::Extent,
        crate::notation::ast::LoopMode,
        Span,
    )],
    body: Vec<Stmt>,
) -> Stmt {
    let mut body = body;
    for (index, extent, parallel, span) in headers.iter().rev() {
        body = vec![stmt(
            StmtKind::Loop {
                index: index.clone(),
                extent: extent.clone(),
                body,
                parallel: *parallel,
            },
            *span,
        )];
    }
    match body.len() {
        1 => body.pop().expect("one statement"),
        _ => stmt(StmtKind::Block(body), Span::default()),
    }
}

/// The statement `s` (`T[...] += rhs`) split into the product of its inner factors and the
/// statement that finishes it, if it qualifies.
fn split(s: &Stmt, rhs: &Expr, inner: &str, written: &HashSet<String>) -> Option<Split> {
    let mut cx = Factors {
        inner,
        written,
        moved: vec![],
        varies: false,
        computed: false,
        bad: false,
    };
    let rest = cx.take(rhs)?;
    if cx.bad || !cx.varies || !cx.computed || reads_any(&rest, written) {
        return None;
    }
    let product = cx.moved.into_iter().reduce(|a, b| {
        Expr::new(
            ExprKind::Binary(BinaryOp::Mul, Box::new(a), Box::new(b)),
            rhs.span,
        )
    })?;
    let StmtKind::Assign { lhs, op, .. } = &s.kind else {
        return None;
    };
    Some(Split {
        product,
        finish: stmt(
            StmtKind::Assign {
                lhs: lhs.clone(),
                op: op.clone(),
                rhs: rest,
            },
            s.span,
        ),
    })
}

/// The walk of a product's factors: which move with the inner loop, which stay.
struct Factors<'a> {
    inner: &'a str,
    written: &'a HashSet<String>,
    /// The factors moved into the partial sum, in their order.
    moved: Vec<Expr>,
    /// Whether a moved factor reads the inner index.
    varies: bool,
    /// Whether a factor that stays is computed (not a literal, not a plain read).
    computed: bool,
    /// Something that cannot be rewritten (the statement stays as it is).
    bad: bool,
}

impl Factors<'_> {
    /// `e` without its moved factors (the first moved one replaced by the hole); `None` when
    /// every factor of `e` moved and the hole is elsewhere.
    fn take(&mut self, e: &Expr) -> Option<Expr> {
        match &e.kind {
            ExprKind::Binary(BinaryOp::Mul, a, b) => {
                let ra = self.take(a);
                let rb = self.take(b);
                match (ra, rb) {
                    (Some(x), Some(y)) => Some(Expr::new(
                        ExprKind::Binary(BinaryOp::Mul, Box::new(x), Box::new(y)),
                        e.span,
                    )),
                    (Some(x), None) | (None, Some(x)) => Some(x),
                    (None, None) => None,
                }
            }
            ExprKind::Call(name, args)
                if name == "ifelse"
                    && args.len() == 3
                    && is_zero(&args[2])
                    && !mentions_index(&args[0], self.inner) =>
            {
                // `c` does not change with the inner loop, so the sum of the products it selects
                // is the product of the sum it selects; a branch all of whose factors moved
                // selects 1.
                let x = self
                    .take(&args[1])
                    .unwrap_or_else(|| Expr::lit(Scalar::F64(1.0)));
                if reads_any(&args[0], self.written) {
                    self.bad = true;
                }
                self.computed = true;
                Some(Expr::new(
                    ExprKind::Call(name.clone(), vec![args[0].clone(), x, args[2].clone()]),
                    e.span,
                ))
            }
            _ => {
                let varies = mentions_index(e, self.inner);
                let plain = matches!(e.kind, ExprKind::Access(_));
                if varies || plain {
                    if reads_any(e, self.written) {
                        self.bad = true;
                    }
                    self.varies |= varies;
                    let first = self.moved.is_empty();
                    self.moved.push(e.clone());
                    first.then(|| Expr::new(ExprKind::Name(HOLE.into()), e.span))
                } else {
                    self.computed |= !matches!(e.kind, ExprKind::Literal(_));
                    Some(e.clone())
                }
            }
        }
    }
}

fn is_zero(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Literal(Scalar::F64(v)) if v == 0.0 && v.is_sign_positive())
}

/// Whether `e` reads the loop index `i` (anywhere, access indices included).
fn mentions_index(e: &Expr, i: &str) -> bool {
    let mut found = false;
    crate::notation::visit::expr(e, &mut |x| {
        found |= matches!(&x.kind, ExprKind::Name(n) if n == i);
    });
    found
}

/// Whether `e` reads any of `tensors` (an indexed read, or a 0-d one by name).
fn reads_any(e: &Expr, tensors: &HashSet<String>) -> bool {
    let mut found = HashSet::new();
    crate::notation::visit::expr(e, &mut |x| note_read(x, &mut found));
    found.iter().any(|t| tensors.contains(t))
}

fn note_read(e: &Expr, out: &mut HashSet<String>) {
    match &e.kind {
        ExprKind::Access(a) => {
            out.insert(a.tensor.clone());
        }
        ExprKind::Name(n) => {
            out.insert(n.clone());
        }
        _ => {}
    }
}

/// Replace the hole in `s`'s right-hand side by `with`.
fn fill_hole(s: &mut Stmt, with: &Expr) {
    fn go(e: &mut Expr, with: &Expr) {
        if matches!(&e.kind, ExprKind::Name(n) if n == HOLE) {
            *e = with.clone();
            return;
        }
        match &mut e.kind {
            ExprKind::Unary(_, x) => go(x, with),
            ExprKind::Binary(_, x, y) => {
                go(x, with);
                go(y, with);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(|a| go(a, with)),
            _ => {}
        }
    }
    if let StmtKind::Assign { rhs, .. } = &mut s.kind {
        go(rhs, with);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program as parse;

    /// The body of `text` after the pass, printed, and the partial sums' ranks.
    fn rewritten(text: &str) -> (String, Vec<usize>) {
        let p = parse(text).unwrap();
        let mut k = 0;
        let (body, made) = partial_sums(p.body.clone(), &mut |base| {
            k += 1;
            format!("{base}{k}")
        });
        (
            p.with_body(body).to_string().trim().to_string(),
            made.iter().map(|t| t.rank).collect(),
        )
    }

    fn unchanged(text: &str) {
        let (out, made) = rewritten(text);
        assert!(made.is_empty(), "{out}");
        assert_eq!(out, parse(text).unwrap().to_string().trim());
    }

    /// GAT's shape: five statements over `f` share one product; the conditions and the
    /// computed factors move out of the inner loop, the plain reads stay in the product.
    #[test]
    fn shared_products_are_summed_once_and_finished_outside() {
        let (out, made) = rewritten(
            "for i = _, j = _, f = _
               ds[i] += ifelse(s[i] + t[j] >= 0.0, g[i, f] * A[i, j] * H[j, f] * (1.0 / z[i]) * exp(s[i] + t[j]), 0.0)
               dt[j] += ifelse(s[i] + t[j] < 0.0, g[i, f] * A[i, j] * H[j, f] * (1.0 / z[i]) * exp(s[i] + t[j]), 0.0) * 0.2
               dz[i] += g[i, f] * A[i, j] * H[j, f] * -(exp(s[i]) / (z[i] * z[i]))
               dH[j, f] += g[i, f] * A[i, j] * (exp(s[i] + t[j]) / z[i])
             end",
        );
        assert_eq!(made, [2]);
        let want = "p1 .= 0.0
for i = _, j = _, f = _
  p1[i, j] += g[i, f] * A[i, j] * H[j, f]
  dH[j, f] += g[i, f] * A[i, j] * (exp(s[i] + t[j]) / z[i])
end
for i = _, j = _
  ds[i] += ifelse(s[i] + t[j] >= 0.0, p1[i, j] * (1.0 / z[i]) * exp(s[i] + t[j]), 0.0)
  dt[j] += ifelse(s[i] + t[j] < 0.0, p1[i, j] * (1.0 / z[i]) * exp(s[i] + t[j]), 0.0) * 0.2
  dz[i] += p1[i, j] * -(exp(s[i]) / (z[i] * z[i]))
end";
        assert_eq!(out, want);
    }

    /// Distinct products get distinct sums; a single loop sums into a 0-d tensor.
    #[test]
    fn distinct_products_and_single_loops() {
        let (out, made) = rewritten(
            "for f = _
               a[] += x[f] * exp(c[])
               b[] += y[f] * sqrt(c[])
             end",
        );
        assert_eq!(made, [0, 0], "{out}");
        assert!(out.contains("a[] += p1[] * exp(c[])"), "{out}");
        assert!(out.contains("b[] += p2[] * sqrt(c[])"), "{out}");
    }

    /// A branch all of whose factors moved selects 1.
    #[test]
    fn a_condition_around_moved_factors_only_selects_one() {
        let (out, _) = rewritten(
            "for i = _, f = _
               d[i] += x[i, f] * ifelse(c[i] > 0.0, y[i, f], 0.0) * exp(c[i])
               e[i] += exp(c[i]) * ifelse(c[i] > 0.0, x[i, f], 0.0)
             end",
        );
        assert!(out.contains("p1[i] += x[i, f] * y[i, f]"), "{out}");
        assert!(
            out.contains("d[i] += p1[i] * ifelse(c[i] > 0.0, 1.0, 0.0) * exp(c[i])"),
            "{out}"
        );
        assert!(
            out.contains("e[i] += exp(c[i]) * ifelse(c[i] > 0.0, p2[i], 0.0)"),
            "{out}"
        );
    }

    /// What must stay: the target read in the body, overwritten, indexed by the inner loop;
    /// a condition or a moved factor reading the inner index or what the body writes; an
    /// `ifelse` that selects something else than zero; products of plain reads and literals
    /// only; bodies with more than assignments; statements between the loops.
    #[test]
    fn what_does_not_qualify_stays() {
        unchanged("for i = _, f = _\n d[i] += x[i, f] * exp(d[i])\nend");
        unchanged("for i = _, f = _\n d[i] = x[i, f] * exp(c[i])\nend");
        unchanged("for i = _, f = _\n d[i] += x[i, f] * exp(c[i])\n d[i] = 1.0\nend");
        unchanged("for i = _, f = _\n d[i, f] += x[i, f] * exp(c[i])\nend");
        unchanged(
            "for i = _, f = _\n d[i] += ifelse(x[i, f] > 0.0, exp(c[i]) * x[i, f], 0.0)\nend",
        );
        unchanged("for i = _, f = _\n e[i] += x[i, f]\n d[i] += x[i, f] * exp(e[i])\nend");
        unchanged("for i = _, f = _\n e[f] += x[i, f]\n d[i] += e[f] * exp(c[i])\nend");
        unchanged("for i = _, f = _\n d[i] += ifelse(c[i] > 0.0, x[i, f] * exp(c[i]), 1.0)\nend");
        unchanged("for i = _, f = _\n d[i] += x[i, f] * c[i] * 2.0\nend");
        unchanged("for i = _, f = _\n if c[i] > 0.0\n d[i] += x[i, f] * exp(c[i])\n end\nend");
        unchanged("for i = _\n t .= 0.0\n for f = _\n d[i] += x[i, f] * exp(c[i])\n end\nend");
    }
}
