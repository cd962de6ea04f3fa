//! The EIN normaliser: Kronecker `delta[i, j]` and Levi-Civita `eps[i, j, k, ...]` (Diderot's
//! EIN, seed 004) as structured tensors that are never stored.
//!
//! `delta` and `eps` are reserved tensor names. `eps` of arity n is the order-n symbol over
//! `0..n-1` (shape n×…×n); `delta` is n×n with n the extent of its indices' loops
//! (dimensionalization). Two entry points, both AST to AST:
//!
//! * [`normalize`] rewrites every `+=`/`-=` statement whose right side holds δ or ε into its EIN
//!   normal form: the right side becomes a sum of products (products distributed over sums),
//!   each product (a *term*) carries its own summation (the statement's loops whose index is not
//!   on the left), and the rules below run on every term to a fixed point. Terms that end with
//!   the same loops and left side are gathered back into one statement, statements with the same
//!   loops into one nest. What `tessera code --show-normal` prints.
//! * [`lower`] is the same with two more rules, used before the lowering: every ε becomes its n!
//!   signed permutations (products of δ against constants) and a δ on a free index is
//!   substituted too, so `c[i] += eps[i, j, k] * a[j] * b[k]` becomes the six products of a cross
//!   product without a loop; a δ or ε that no rule removes (an index that is no loop of its
//!   statement, a `=` statement, a condition) becomes a comparison, `ifelse(x == y, 1, 0)`.
//!   The result names neither `delta` nor `eps`, so no later stage knows about them.
//!
//! The rules, on one term under its summation Σ:
//! * `δ(x, x) → 1`, `δ(c1, c2) → [c1 == c2]` for constants;
//! * δ substitution: `Σ_v δ(v, y) T → T[v := y]` for a summed loop index `v` (in [`lower`] also
//!   for a free one, as `+=` of zero changes nothing), into every factor and the left side —
//!   tensor accesses today; fields and kernels extend [`substitute`] when they exist;
//! * `ε` with a repeated index → 0; with constant indices → its sign;
//! * ε-ε contraction: two ε of order n sharing k summed indices (used nowhere else) →
//!   `k! · det[δ(a_p, b_q)]` over their other indices ((n-k)! signed products of δ; for n = 3,
//!   k = 1 the familiar `δδ − δδ`);
//! * ε against a symmetric pair: a summed pair `(u, w)` of ε's indices such that the rest of
//!   the term is unchanged by swapping `u` and `w` → 0 (`a × a`, `a · (a × b)`, `ε_ijk δ_jk`);
//! * `Σ_v 1 = n`: a summed loop that no factor uses becomes a coefficient, its extent from
//!   a literal range or from an ε it indexed.
//!
//! Every rule removes a δ, an ε or a loop, or replaces an ε pair by fewer ε, so the rules
//! terminate; the terms are then put in a canonical order (factors sorted, equal terms
//! combined), which makes the pass idempotent.

use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AccessIndex, AssignOp, BinaryOp, Expr, ExprKind, Extent, Program, Reducer, Span, Stmt,
    StmtKind, UnaryOp,
};
use crate::types::Scalar;

/// The Kronecker delta's reserved name.
pub const DELTA: &str = "delta";
/// The Levi-Civita symbol's reserved name.
pub const EPS: &str = "eps";
/// The largest ε order: its n! permutations are expanded.
pub const MAX_EPS_ORDER: usize = 6;
/// Products of sums distribute into at most this many terms per statement; past it the
/// statement is left to the comparison fallback.
const MAX_TERMS: usize = 4096;

/// Is `name` one of the reserved structured tensors?
pub fn is_reserved(name: &str) -> bool {
    name == DELTA || name == EPS
}

/// The error for a user tensor with a reserved name (given as an input or output).
pub fn reserved_error(name: &str) -> Error {
    let what = if name == DELTA {
        "the Kronecker delta"
    } else {
        "the Levi-Civita symbol"
    };
    Error::tensor(
        name,
        format!("`{name}` is a reserved name ({what}, never stored): rename the tensor"),
    )
}

/// Does the program use `delta` or `eps` anywhere?
pub fn uses_ein(p: &Program) -> bool {
    let mut found = false;
    crate::notation::visit::accesses(&p.body, &mut |a: &Access| {
        found |= is_reserved(&a.tensor);
    });
    found
}

/// The EIN normal form of a program (see the module documentation). Programs without δ and ε
/// are returned unchanged.
pub fn normalize(p: &Program) -> Result<Program> {
    // Fields come first: their probes become the plain expressions δ and ε act on.
    super::stack::fitting(p, || run(&super::fields::expand(p)?, Mode::Normal))
}

/// The normal form with every δ and ε lowered away: ε expanded to its signed permutations, δ
/// substituted or turned into comparisons. Programs without δ and ε are returned unchanged.
pub fn lower(p: &Program) -> Result<Program> {
    super::stack::fitting(p, || run(&super::fields::expand(p)?, Mode::Lower))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Lower,
}

fn run(p: &Program, mode: Mode) -> Result<Program> {
    if !uses_ein(p) {
        return Ok(p.clone());
    }
    run_with(p, mode, false)
}

/// `every`: normalise every `+=` nest, not only those using δ or ε (for comparing a stated
/// form with the normal form it should equal).
fn run_with(p: &Program, mode: Mode, every: bool) -> Result<Program> {
    check_uses(&p.body)?;
    let body = stmts(&p.body, mode, every)?;
    let body = match mode {
        Mode::Normal => body,
        Mode::Lower => fallback_stmts(&body)?,
    };
    Ok(p.with_body(body))
}

/// δ and ε are read only, with plain indices, δ with two.
fn check_uses(body: &[Stmt]) -> Result<()> {
    let mut err = None;
    crate::notation::visit::writes(body, &mut |a: &Access| {
        if err.is_none() && is_reserved(&a.tensor) {
            err = Some(Error::program(
                a.span,
                format!(
                    "`{}` is reserved and read only: it cannot be written",
                    a.tensor
                ),
            ));
        }
    });
    for s in declared(body) {
        if is_reserved(&s.0) && err.is_none() {
            err = Some(Error::program(
                s.1,
                format!("`{}` is reserved and cannot be declared", s.0),
            ));
        }
    }
    crate::notation::visit::accesses(body, &mut |a: &Access| {
        if err.is_some() || !is_reserved(&a.tensor) {
            return;
        }
        let plain = a.swizzle.is_none()
            && a.indices
                .iter()
                .all(|ix| !ix.permissive && ix.protocol.is_none() && ix.window.is_none());
        if !plain {
            err = Some(Error::program(
                a.span,
                format!(
                    "`{}` takes plain indices (no swizzle, window, `~` or protocol)",
                    a.tensor
                ),
            ));
        } else if a.tensor == DELTA && a.indices.len() != 2 {
            err = Some(Error::program(
                a.span,
                format!("`delta` takes two indices, not {}", a.indices.len()),
            ));
        } else if a.tensor == EPS && (a.indices.is_empty() || a.indices.len() > MAX_EPS_ORDER) {
            err = Some(Error::program(
                a.span,
                format!(
                    "`eps` takes 1 to {MAX_EPS_ORDER} indices, not {}",
                    a.indices.len()
                ),
            ));
        } else if a.tensor == EPS {
            let n = a.indices.len() as i64;
            for ix in &a.indices {
                if let Some(c) = as_const(&ix.expr)
                    && !(0..n).contains(&c)
                {
                    err = Some(Error::program(
                        ix.expr.span,
                        format!("index {c} of `eps` of order {n} is outside 0:{}", n - 1),
                    ));
                }
            }
        }
    });
    err.map_or(Ok(()), Err)
}

fn declared(body: &[Stmt]) -> Vec<(String, Span)> {
    let mut out = vec![];
    for s in body {
        match &s.kind {
            StmtKind::Declare { tensor, .. } => out.push((tensor.clone(), s.span)),
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                out.extend(declared(body))
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                out.extend(declared(then));
                out.extend(declared(otherwise));
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Walking the program: perfect loop nests around one `+=` statement are normalised.

fn stmts(body: &[Stmt], mode: Mode, every: bool) -> Result<Vec<Stmt>> {
    let mut out = vec![];
    for s in body {
        if let Some(nest) = as_nest(s, every) {
            out.extend(normalize_nest(&nest, mode)?);
            continue;
        }
        let kind = match &s.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => StmtKind::Loop {
                index: index.clone(),
                extent: extent.clone(),
                body: stmts(body, mode, every)?,
                parallel: *parallel,
            },
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => StmtKind::If {
                cond: cond.clone(),
                then: stmts(then, mode, every)?,
                otherwise: stmts(otherwise, mode, every)?,
            },
            StmtKind::Let { name, value, body } => StmtKind::Let {
                name: name.clone(),
                value: value.clone(),
                body: stmts(body, mode, every)?,
            },
            StmtKind::Block(b) => StmtKind::Block(stmts(b, mode, every)?),
            k => k.clone(),
        };
        out.push(Stmt::new(kind, s.span));
    }
    Ok(out)
}

/// One loop of a nest (or of a term).
#[derive(Clone, Debug, PartialEq)]
struct Lp {
    index: String,
    extent: Extent,
    span: Span,
    /// The extent an ε indexed by this loop gives it (its order).
    size: Option<i64>,
    /// A δ removed on this index: it sized the loop, and names the error if nothing does now.
    delta_at: Option<Span>,
    parallel: crate::notation::ast::LoopMode,
}

struct Nest {
    loops: Vec<Lp>,
    lhs: Access,
    /// `-1` for `-=`.
    sign: i64,
    rhs: Expr,
    span: Span,
}

/// A chain of single-statement loops around a `+=` or `-=` whose right side uses δ or ε and
/// does not read the tensor it updates (its terms then add up in any order).
fn as_nest(s: &Stmt, every: bool) -> Option<Nest> {
    let mut loops = vec![];
    let mut cur = s;
    loop {
        match &cur.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } if body.len() == 1 => {
                loops.push(Lp {
                    index: index.clone(),
                    extent: extent.clone(),
                    span: cur.span,
                    size: None,
                    delta_at: None,
                    parallel: *parallel,
                });
                cur = &body[0];
            }
            StmtKind::Assign { lhs, op, rhs } => {
                let sign = match op {
                    AssignOp::Reduce(Reducer::Add) => 1,
                    AssignOp::Reduce(Reducer::Sub) => -1,
                    _ => return None,
                };
                let mut uses = false;
                let mut reads_lhs = false;
                crate::notation::visit::expr(rhs, &mut |e: &Expr| {
                    if let ExprKind::Access(a) = &e.kind {
                        uses |= is_reserved(&a.tensor);
                        reads_lhs |= a.tensor == lhs.tensor;
                    }
                    if let ExprKind::Name(n) = &e.kind {
                        reads_lhs |= *n == lhs.tensor;
                    }
                });
                if !(uses || every) || reads_lhs {
                    return None;
                }
                return Some(Nest {
                    loops,
                    lhs: lhs.clone(),
                    sign,
                    rhs: rhs.clone(),
                    span: cur.span,
                });
            }
            _ => return None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Terms.

#[derive(Clone, Debug, PartialEq)]
enum Factor {
    Delta(Expr, Expr, Span),
    Eps(Vec<Expr>, Span),
    Other(Expr),
}

#[derive(Clone, Debug, PartialEq)]
struct Term {
    coeff: i64,
    factors: Vec<Factor>,
    lhs: Access,
    loops: Vec<Lp>,
}

fn as_const(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Literal(Scalar::I64(c)) => Some(*c),
        ExprKind::Unary(UnaryOp::Neg, x) => as_const(x).and_then(|c| c.checked_neg()),
        _ => None,
    }
}

fn as_var(e: &Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(n) => Some(n),
        _ => None,
    }
}

/// The right side as a sum of (coefficient, product of factors); `None` past `MAX_TERMS`.
fn flatten(e: &Expr) -> Option<Vec<(i64, Vec<Factor>)>> {
    let neg = |v: Vec<(i64, Vec<Factor>)>| v.into_iter().map(|(c, f)| (-c, f)).collect();
    Some(match &e.kind {
        ExprKind::Binary(BinaryOp::Add, a, b) => {
            let mut v = flatten(a)?;
            v.extend(flatten(b)?);
            v
        }
        ExprKind::Binary(BinaryOp::Sub, a, b) => {
            let mut v = flatten(a)?;
            v.extend(neg(flatten(b)?));
            v
        }
        ExprKind::Unary(UnaryOp::Neg, a) => neg(flatten(a)?),
        ExprKind::Binary(BinaryOp::Mul, a, b) => {
            let (x, y) = (flatten(a)?, flatten(b)?);
            if x.len() * y.len() > MAX_TERMS {
                return None;
            }
            let mut v = vec![];
            for (c1, f1) in &x {
                for (c2, f2) in &y {
                    let mut f = f1.clone();
                    f.extend(f2.iter().cloned());
                    v.push((c1.checked_mul(*c2)?, f));
                }
            }
            v
        }
        ExprKind::Literal(Scalar::I64(c)) => vec![(*c, vec![])],
        ExprKind::Access(a) if a.tensor == DELTA => vec![(
            1,
            vec![Factor::Delta(
                a.indices[0].expr.clone(),
                a.indices[1].expr.clone(),
                a.span,
            )],
        )],
        ExprKind::Access(a) if a.tensor == EPS => vec![(
            1,
            vec![Factor::Eps(
                a.indices.iter().map(|ix| ix.expr.clone()).collect(),
                a.span,
            )],
        )],
        _ => vec![(1, vec![Factor::Other(e.clone())])],
    })
}

fn mentions(e: &Expr, v: &str) -> bool {
    let mut found = false;
    crate::notation::visit::expr(e, &mut |x: &Expr| {
        found |= as_var(x) == Some(v);
    });
    found
}

fn factor_mentions(f: &Factor, v: &str) -> bool {
    match f {
        Factor::Delta(a, b, _) => mentions(a, v) || mentions(b, v),
        Factor::Eps(ix, _) => ix.iter().any(|e| mentions(e, v)),
        Factor::Other(e) => mentions(e, v),
    }
}

fn access_mentions(a: &Access, v: &str) -> bool {
    a.indices.iter().any(|ix| {
        mentions(&ix.expr, v)
            || ix
                .window
                .as_ref()
                .is_some_and(|(l, h)| mentions(l, v) || mentions(h, v))
    })
}

fn extent_mentions(x: &Extent, v: &str) -> bool {
    match x {
        Extent::Auto => false,
        Extent::Range(a, b) => mentions(a, v) || mentions(b, v),
    }
}

/// `e` with every use of the name `v` replaced by `by` (simultaneously for several pairs).
fn subst(e: &Expr, map: &[(&str, &Expr)]) -> Expr {
    let kind = match &e.kind {
        ExprKind::Name(n) => match map.iter().find(|(v, _)| v == n) {
            Some((_, by)) => return (*by).clone(),
            None => e.kind.clone(),
        },
        ExprKind::Access(a) => ExprKind::Access(subst_access(a, map)),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(subst(x, map))),
        ExprKind::Binary(op, x, y) => {
            ExprKind::Binary(*op, Box::new(subst(x, map)), Box::new(subst(y, map)))
        }
        ExprKind::Call(f, args) => {
            ExprKind::Call(f.clone(), args.iter().map(|a| subst(a, map)).collect())
        }
        k => k.clone(),
    };
    Expr::new(kind, e.span)
}

fn subst_access(a: &Access, map: &[(&str, &Expr)]) -> Access {
    Access {
        tensor: a.tensor.clone(),
        indices: a
            .indices
            .iter()
            .map(|ix| AccessIndex {
                expr: subst(&ix.expr, map),
                permissive: ix.permissive,
                protocol: ix.protocol,
                window: ix
                    .window
                    .as_ref()
                    .map(|(l, h)| (subst(l, map), subst(h, map))),
            })
            .collect(),
        swizzle: a.swizzle.clone(),
        span: a.span,
    }
}

/// δ substitution into one factor. Tensor accesses (and any expression) take it through
/// [`subst`]; a field probe or kernel factor, when fields exist, is the place to add its own
/// case (moving the substitution onto the field's index, its derivatives and kernels).
fn substitute(f: &Factor, map: &[(&str, &Expr)]) -> Factor {
    match f {
        Factor::Delta(a, b, s) => Factor::Delta(subst(a, map), subst(b, map), *s),
        Factor::Eps(ix, s) => Factor::Eps(ix.iter().map(|e| subst(e, map)).collect(), *s),
        Factor::Other(e) => Factor::Other(subst(e, map)),
    }
}

impl Term {
    fn loop_of(&self, v: &str) -> Option<usize> {
        self.loops.iter().position(|l| l.index == v)
    }
    fn is_free(&self, v: &str) -> bool {
        access_mentions(&self.lhs, v)
    }
    fn is_summed(&self, v: &str) -> bool {
        self.loop_of(v).is_some() && !self.is_free(v)
    }
    fn in_extents(&self, v: &str) -> bool {
        self.loops.iter().any(|l| extent_mentions(&l.extent, v))
    }
    /// How many factors mention `v`.
    fn uses(&self, v: &str) -> usize {
        self.factors
            .iter()
            .filter(|f| factor_mentions(f, v))
            .count()
    }
    /// Replace `v` by `by` everywhere and drop `v`'s loop, passing its sizing to `by`'s loop.
    fn eliminate(&mut self, v: &str, by: &Expr, delta_at: Option<Span>) {
        let map = [(v, by)];
        self.factors = self.factors.iter().map(|f| substitute(f, &map)).collect();
        self.lhs = subst_access(&self.lhs, &map);
        let k = self.loop_of(v).expect("eliminating a loop index");
        let gone = self.loops.remove(k);
        if let Some(u) = as_var(by)
            && let Some(j) = self.loop_of(u)
        {
            let keep = &mut self.loops[j];
            if keep.extent == Extent::Auto {
                keep.extent = gone.extent.clone();
            }
            keep.size = keep.size.or(gone.size);
            keep.delta_at = keep.delta_at.or(gone.delta_at).or(delta_at);
        }
    }
    /// Record the order of every ε on the loops of its indices.
    fn mark_sizes(&mut self) {
        for f in &self.factors {
            if let Factor::Eps(ix, _) = f {
                for e in ix {
                    if let Some(v) = as_var(e)
                        && let Some(k) = self.loops.iter().position(|l| l.index == v)
                    {
                        self.loops[k].size.get_or_insert(ix.len() as i64);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The rules.

/// One rewriting step on a term: `None` if no rule applies, else the terms replacing it.
fn step(t: &Term, mode: Mode) -> Result<Option<Vec<Term>>> {
    // δ rules.
    for (k, f) in t.factors.iter().enumerate() {
        let Factor::Delta(a, b, span) = f else {
            continue;
        };
        if a == b {
            let mut n = t.clone();
            n.factors.remove(k);
            if let Some(v) = as_var(a)
                && let Some(j) = n.loop_of(v)
            {
                n.loops[j].delta_at.get_or_insert(*span);
            }
            return Ok(Some(vec![n]));
        }
        if let (Some(x), Some(y)) = (as_const(a), as_const(b)) {
            let mut n = t.clone();
            n.factors.remove(k);
            return Ok(Some(if x == y { vec![n] } else { vec![] }));
        }
        // Which side to substitute away: a summed loop index first, then (lowering) a free
        // one; of two, the inner loop, so terms keep the outer names and gather in one nest.
        let can = |v: &str, other: &Expr| {
            t.loop_of(v).is_some() && !t.in_extents(v) && !mentions(other, v)
        };
        let sides = || {
            [(a, b), (b, a)]
                .into_iter()
                .filter_map(|(x, y)| as_var(x).map(|v| (v, y)))
                .filter(|(v, y)| can(v, y))
        };
        let inner = |(v, _): &(&str, &Expr)| t.loop_of(v);
        let pick = sides()
            .filter(|(v, _)| t.is_summed(v))
            .max_by_key(inner)
            .or_else(|| match mode {
                Mode::Lower => sides().max_by_key(inner),
                Mode::Normal => None,
            });
        if let Some((v, y)) = pick {
            let mut n = t.clone();
            n.factors.remove(k);
            let (v, y) = (v.to_string(), y.clone());
            n.eliminate(&v, &y, Some(*span));
            return Ok(Some(vec![n]));
        }
    }
    // ε with a repeated or constant indices.
    for (k, f) in t.factors.iter().enumerate() {
        let Factor::Eps(ix, _) = f else { continue };
        for p in 0..ix.len() {
            for q in p + 1..ix.len() {
                if ix[p] == ix[q] {
                    return Ok(Some(vec![]));
                }
            }
        }
        let consts: Option<Vec<i64>> = ix.iter().map(as_const).collect();
        if let Some(c) = consts {
            let s = perm_sign(&c.iter().map(|&x| x as usize).collect::<Vec<_>>());
            let mut n = t.clone();
            n.factors.remove(k);
            n.coeff *= s;
            return Ok(Some(if s == 0 { vec![] } else { vec![n] }));
        }
    }
    if let Some(out) = contract(t) {
        return Ok(Some(out));
    }
    if symmetric_pair(t) {
        return Ok(Some(vec![]));
    }
    // Σ_v 1 = n.
    for (k, l) in t.loops.iter().enumerate() {
        let v = &l.index;
        if t.is_free(v) || t.uses(v) > 0 || t.in_extents(v) {
            continue;
        }
        let n = match &l.extent {
            Extent::Range(a, b) => match (as_const(a), as_const(b)) {
                (Some(a), Some(b)) => Some((b - a + 1).max(0)),
                _ => None,
            },
            Extent::Auto => l.size,
        };
        match n {
            Some(n) => {
                let Some(c) = t.coeff.checked_mul(n) else {
                    continue;
                };
                let mut m = t.clone();
                m.loops.remove(k);
                m.coeff = c;
                return Ok(Some(if c == 0 { vec![] } else { vec![m] }));
            }
            None => {
                if let (Extent::Auto, Some(at)) = (&l.extent, l.delta_at) {
                    return Err(Error::program(
                        at,
                        format!(
                            "the size of `delta` cannot be inferred: its index `{v}` indexes no \
                             tensor; give the loop of `{v}` a range"
                        ),
                    ));
                }
            }
        }
    }
    if mode == Mode::Lower
        && let Some(k) = t.factors.iter().position(|f| matches!(f, Factor::Eps(..)))
    {
        let Factor::Eps(ix, span) = &t.factors[k] else {
            unreachable!()
        };
        let n = ix.len();
        let mut out = vec![];
        for (perm, s) in permutations(n) {
            let mut m = t.clone();
            m.coeff *= s;
            m.factors.remove(k);
            for (p, e) in ix.iter().enumerate() {
                let c = Expr::new(ExprKind::Literal(Scalar::I64(perm[p] as i64)), *span);
                m.factors.insert(k, Factor::Delta(e.clone(), c, *span));
            }
            out.push(m);
        }
        return Ok(Some(out));
    }
    Ok(None)
}

/// The sign of a sequence as a permutation of `0..n` (0 if it is not one).
fn perm_sign(p: &[usize]) -> i64 {
    let n = p.len();
    let mut seen = vec![false; n];
    for &x in p {
        if x >= n || seen[x] {
            return 0;
        }
        seen[x] = true;
    }
    let mut s = 1;
    for a in 0..n {
        for b in a + 1..n {
            if p[a] > p[b] {
                s = -s;
            }
        }
    }
    s
}

/// Every permutation of `0..n` with its sign, in lexicographic order.
fn permutations(n: usize) -> Vec<(Vec<usize>, i64)> {
    fn go(prefix: &mut Vec<usize>, n: usize, out: &mut Vec<Vec<usize>>) {
        if prefix.len() == n {
            out.push(prefix.clone());
            return;
        }
        for x in 0..n {
            if !prefix.contains(&x) {
                prefix.push(x);
                go(prefix, n, out);
                prefix.pop();
            }
        }
    }
    let mut out = vec![];
    go(&mut vec![], n, &mut out);
    out.into_iter()
        .map(|p| {
            let s = perm_sign(&p);
            (p, s)
        })
        .collect()
}

/// ε-ε contraction over the summed indices two ε of one order share:
/// `Σ_S ε_{S a} ε_{S b} = k! det[δ(a_p, b_q)]`.
fn contract(t: &Term) -> Option<Vec<Term>> {
    let eps: Vec<(usize, &Vec<Expr>)> = t
        .factors
        .iter()
        .enumerate()
        .filter_map(|(k, f)| match f {
            Factor::Eps(ix, _) => Some((k, ix)),
            _ => None,
        })
        .collect();
    for (x, &(ka, a)) in eps.iter().enumerate() {
        for &(kb, b) in &eps[x + 1..] {
            if a.len() != b.len() {
                continue;
            }
            let n = a.len();
            let shared: Vec<&str> = a
                .iter()
                .filter_map(as_var)
                .filter(|v| {
                    t.is_summed(v)
                        && !t.in_extents(v)
                        && t.uses(v) == 2
                        && a.iter().filter(|e| as_var(e) == Some(v)).count() == 1
                        && b.iter().filter(|e| as_var(e) == Some(v)).count() == 1
                })
                .collect();
            if shared.is_empty() {
                continue;
            }
            let k = shared.len();
            // Move the shared indices to the front of each ε, in one order, with the signs.
            let split = |ix: &Vec<Expr>| {
                let mut order: Vec<usize> = shared
                    .iter()
                    .map(|v| ix.iter().position(|e| as_var(e) == Some(v)).unwrap())
                    .collect();
                let rest: Vec<usize> = (0..n).filter(|p| !order.contains(p)).collect();
                order.extend(rest.iter().copied());
                let sign = perm_sign(&order);
                (
                    sign,
                    rest.iter().map(|&p| ix[p].clone()).collect::<Vec<_>>(),
                )
            };
            let (sa, ra) = split(a);
            let (sb, rb) = split(b);
            let kfact: i64 = (1..=k as i64).product();
            let span = match &t.factors[ka] {
                Factor::Eps(_, s) => *s,
                _ => unreachable!(),
            };
            let mut base = t.clone();
            // `kb` comes after `ka`: remove it first so `ka` still names its factor.
            base.factors.remove(kb);
            base.factors.remove(ka);
            for v in &shared {
                let j = base.loop_of(v).unwrap();
                base.loops.remove(j);
            }
            for e in ra.iter().chain(rb.iter()) {
                if let Some(v) = as_var(e)
                    && let Some(j) = base.loop_of(v)
                {
                    base.loops[j].size.get_or_insert(n as i64);
                }
            }
            let mut out = vec![];
            for (perm, s) in permutations(n - k) {
                let mut m = base.clone();
                m.coeff = m.coeff.checked_mul(sa * sb * s * kfact)?;
                for p in 0..n - k {
                    m.factors
                        .insert(p, Factor::Delta(ra[p].clone(), rb[perm[p]].clone(), span));
                }
                out.push(m);
            }
            return Some(out);
        }
    }
    None
}

/// Is some ε of the term contracted with a pair of summed indices in which the rest of the term
/// is symmetric?
fn symmetric_pair(t: &Term) -> bool {
    for (k, f) in t.factors.iter().enumerate() {
        let Factor::Eps(ix, _) = f else { continue };
        for p in 0..ix.len() {
            for q in p + 1..ix.len() {
                let (Some(u), Some(w)) = (as_var(&ix[p]), as_var(&ix[q])) else {
                    continue;
                };
                if u == w
                    || !t.is_summed(u)
                    || !t.is_summed(w)
                    || t.in_extents(u)
                    || t.in_extents(w)
                    || ix.iter().filter(|e| as_var(e) == Some(u)).count() != 1
                    || ix.iter().filter(|e| as_var(e) == Some(w)).count() != 1
                    || t.loops[t.loop_of(u).unwrap()].extent
                        != t.loops[t.loop_of(w).unwrap()].extent
                {
                    continue;
                }
                let rest: Vec<Factor> = t
                    .factors
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .map(|(_, f)| f.clone())
                    .collect();
                let (ue, we) = (Expr::name(u), Expr::name(w));
                let swapped: Vec<Factor> = rest
                    .iter()
                    .map(|f| substitute(f, &[(u, &we), (w, &ue)]))
                    .collect();
                if canonical(&rest) == canonical(&swapped) {
                    return true;
                }
            }
        }
    }
    false
}

/// A product's factors as a sign and a sorted list of keys (δ's indices sorted, ε's sorted with
/// the sign of the sort), so products equal up to commutation compare equal.
fn canonical(fs: &[Factor]) -> (i64, Vec<String>) {
    let mut sign = 1;
    let mut keys: Vec<String> = fs
        .iter()
        .map(|f| match f {
            Factor::Delta(a, b, _) => {
                let mut v = [a.to_string(), b.to_string()];
                v.sort();
                format!("delta[{}, {}]", v[0], v[1])
            }
            Factor::Eps(ix, _) => {
                let mut v: Vec<String> = ix.iter().map(|e| e.to_string()).collect();
                let mut order: Vec<usize> = (0..v.len()).collect();
                order.sort_by(|&x, &y| v[x].cmp(&v[y]));
                sign *= perm_sign(&order);
                v.sort();
                format!("eps[{}]", v.join(", "))
            }
            Factor::Other(e) => e.to_string(),
        })
        .collect();
    keys.sort();
    (sign, keys)
}

// ---------------------------------------------------------------------------------------------
// A nest: flatten, rewrite to the fixed point, gather back.

fn normalize_nest(nest: &Nest, mode: Mode) -> Result<Vec<Stmt>> {
    let Some(flat) = flatten(&nest.rhs) else {
        return Ok(vec![rebuild_original(nest)]);
    };
    // A stack: the first term on top, each rewrite's results in their order.
    let mut work: Vec<Term> = flat
        .into_iter()
        .rev()
        .map(|(c, factors)| {
            let mut t = Term {
                coeff: c * nest.sign,
                factors,
                lhs: nest.lhs.clone(),
                loops: nest.loops.clone(),
            };
            t.mark_sizes();
            t
        })
        .collect();
    let mut done = vec![];
    let mut budget = 100_000usize;
    while let Some(t) = work.pop() {
        if t.coeff == 0 {
            continue;
        }
        budget = budget.saturating_sub(1);
        match if budget == 0 { None } else { step(&t, mode)? } {
            Some(ts) => {
                // Keep the terms in order: the last pushed is processed first.
                for mut n in ts.into_iter().rev() {
                    n.mark_sizes();
                    work.push(n);
                }
            }
            None => done.push(t),
        }
    }
    let mut terms: Vec<Term> = vec![];
    for mut t in done {
        size_loops(&mut t);
        if !canonical_names(&mut t) {
            continue;
        }
        match terms
            .iter_mut()
            .find(|u| u.factors == t.factors && u.lhs == t.lhs && same_loops(&u.loops, &t.loops))
        {
            Some(u) => u.coeff += t.coeff,
            None => terms.push(t),
        }
    }
    terms.retain(|t| t.coeff != 0);
    // Terms in canonical order, by their printed factors.
    terms.sort_by_cached_key(|t| {
        t.factors
            .iter()
            .map(|f| factor_expr(f).to_string())
            .collect::<Vec<_>>()
    });
    if terms.is_empty() {
        // Everything cancelled: the statement adds zero, over the loops its left side uses.
        let loops: Vec<Lp> = nest
            .loops
            .iter()
            .filter(|l| access_mentions(&nest.lhs, &l.index))
            .cloned()
            .collect();
        let zero = Expr::new(ExprKind::Literal(Scalar::I64(0)), nest.rhs.span);
        return Ok(vec![build_nest(
            &loops,
            vec![assign(&nest.lhs, zero, nest.span)],
        )]);
    }
    // Gather: statements by left side within equal loops, nests by loops.
    let mut groups: Vec<Group> = vec![];
    for t in terms {
        let g = match groups.iter().position(|(l, _)| same_loops(l, &t.loops)) {
            Some(g) => g,
            None => {
                groups.push((t.loops.clone(), vec![]));
                groups.len() - 1
            }
        };
        let stmts = &mut groups[g].1;
        match stmts.iter_mut().find(|(lhs, _)| *lhs == t.lhs) {
            Some((_, ts)) => ts.push(t),
            None => stmts.push((t.lhs.clone(), vec![t])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(loops, mut stmts)| {
            // Statements by their left sides (`c[n, 0]` before `c[n, 1]`: in memory order).
            stmts.sort_by_cached_key(|(lhs, _)| {
                Expr::new(ExprKind::Access(lhs.clone()), lhs.span).to_string()
            });
            let body = stmts
                .into_iter()
                .map(|(lhs, ts)| assign(&lhs, sum(&ts, nest.rhs.span), nest.span))
                .collect();
            build_nest(&loops, body)
        })
        .collect())
}

/// One nest of the result: its loops and its statements (a left side and the terms it adds).
type Group = (Vec<Lp>, Vec<(Access, Vec<Term>)>);

fn same_loops(a: &[Lp], b: &[Lp]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.index == y.index && x.extent == y.extent)
}

/// A `_` loop that only an ε sizes takes the ε's range, `0:n-1`.
fn size_loops(t: &mut Term) {
    for k in 0..t.loops.len() {
        let l = &t.loops[k];
        let Some(n) = l.size else { continue };
        if l.extent != Extent::Auto {
            continue;
        }
        let v = l.index.clone();
        let sourced = access_indexes(&t.lhs, &v)
            || t.factors.iter().any(|f| match f {
                Factor::Other(e) => {
                    let mut found = false;
                    crate::notation::visit::expr(e, &mut |x: &Expr| {
                        if let ExprKind::Access(a) = &x.kind {
                            found |= !is_reserved(&a.tensor) && access_indexes(a, &v);
                        }
                    });
                    found
                }
                _ => false,
            });
        if !sourced {
            let at = |c| Expr::new(ExprKind::Literal(Scalar::I64(c)), t.loops[k].span);
            t.loops[k].extent = Extent::Range(at(0), at(n - 1));
        }
    }
}

fn access_indexes(a: &Access, v: &str) -> bool {
    a.indices
        .iter()
        .any(|ix| ix.window.is_none() && as_var(&ix.expr) == Some(v))
}

/// Put ε's indices in order (the sign of the sort into the coefficient) and sort the factors.
fn sort_term(factors: &mut [Factor]) -> i64 {
    let mut sign = 1;
    for f in factors.iter_mut() {
        if let Factor::Eps(ix, _) = f {
            let keys: Vec<String> = ix.iter().map(|e| e.to_string()).collect();
            let mut order: Vec<usize> = (0..ix.len()).collect();
            order.sort_by(|&x, &y| keys[x].cmp(&keys[y]));
            sign *= perm_sign(&order);
            *ix = order.iter().map(|&p| ix[p].clone()).collect();
        }
    }
    sort_factors(factors);
    sign
}

/// Most renamings of a term's summed indices tried when choosing its canonical names.
const MAX_RENAMINGS: usize = 720;

/// Give the term its canonical form: the renaming of its summed indices (among loops of equal
/// extents, so the loops stay as they are) whose sorted factors print first, so that terms
/// equal up to the names of their bound indices combine. `false` if the term is zero: two
/// renamings give the same product with opposite signs (ε against a symmetric pair, found
/// across terms, as in `ε_ijk (S_jk + S_kj)`).
fn canonical_names(t: &mut Term) -> bool {
    let summed: Vec<usize> = (0..t.loops.len())
        .filter(|&k| !t.is_free(&t.loops[k].index))
        .collect();
    // Classes of summed loops with equal extents; renamings permute names within a class.
    let mut classes: Vec<Vec<usize>> = vec![];
    for &k in &summed {
        match classes
            .iter_mut()
            .find(|c| t.loops[c[0]].extent == t.loops[k].extent)
        {
            Some(c) => c.push(k),
            None => classes.push(vec![k]),
        }
    }
    let count = classes
        .iter()
        .try_fold(1usize, |acc, c| acc.checked_mul((1..=c.len()).product()));
    let mut best: Option<(Vec<String>, i64, Vec<Factor>)> = None;
    let mut zero = false;
    let mut consider = |renamed: Vec<Factor>| {
        let mut fs = renamed;
        let sign = sort_term(&mut fs);
        let key: Vec<String> = fs.iter().map(|f| factor_expr(f).to_string()).collect();
        match &best {
            Some((k, s, _)) if *k == key => zero |= *s != sign,
            Some((k, _, _)) if *k < key => {}
            _ => best = Some((key, sign, fs)),
        }
    };
    match count {
        Some(n) if n <= MAX_RENAMINGS && n > 1 => {
            let names: Vec<String> = t.loops.iter().map(|l| l.index.clone()).collect();
            let mut choices: Vec<Vec<(Vec<usize>, i64)>> = vec![];
            for c in &classes {
                choices.push(permutations(c.len()));
            }
            let mut idx = vec![0usize; classes.len()];
            loop {
                let exprs: Vec<(usize, Expr)> = classes
                    .iter()
                    .enumerate()
                    .flat_map(|(ci, c)| {
                        let perm = &choices[ci][idx[ci]].0;
                        c.iter()
                            .enumerate()
                            .map(|(p, &k)| (k, Expr::name(&names[c[perm[p]]])))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let map: Vec<(&str, &Expr)> =
                    exprs.iter().map(|(k, e)| (names[*k].as_str(), e)).collect();
                consider(t.factors.iter().map(|f| substitute(f, &map)).collect());
                // The next combination of per-class permutations.
                let mut d = 0;
                loop {
                    if d == idx.len() {
                        break;
                    }
                    idx[d] += 1;
                    if idx[d] < choices[d].len() {
                        break;
                    }
                    idx[d] = 0;
                    d += 1;
                }
                if d == idx.len() {
                    break;
                }
            }
        }
        _ => consider(t.factors.clone()),
    }
    if zero {
        return false;
    }
    let (_, sign, fs) = best.expect("a renaming was considered");
    t.factors = fs;
    t.coeff *= sign;
    true
}

fn factor_rank(f: &Factor) -> u8 {
    match f {
        Factor::Eps(..) => 0,
        Factor::Delta(..) => 1,
        Factor::Other(_) => 2,
    }
}

fn sort_factors(fs: &mut [Factor]) {
    fs.sort_by_cached_key(|f| (factor_rank(f), factor_expr(f).to_string()));
}

fn factor_expr(f: &Factor) -> Expr {
    let access = |name: &str, ix: Vec<Expr>, span: Span| {
        Expr::new(
            ExprKind::Access(Access {
                tensor: name.to_string(),
                indices: ix
                    .into_iter()
                    .map(|expr| AccessIndex {
                        expr,
                        permissive: false,
                        protocol: None,
                        window: None,
                    })
                    .collect(),
                swizzle: None,
                span,
            }),
            span,
        )
    };
    match f {
        Factor::Delta(a, b, s) => access(DELTA, vec![a.clone(), b.clone()], *s),
        Factor::Eps(ix, s) => access(EPS, ix.clone(), *s),
        Factor::Other(e) => e.clone(),
    }
}

/// `|coeff| * f1 * f2 ...` (the coefficient left out when it is 1 and there are factors).
fn product(t: &Term, span: Span) -> Expr {
    let lit = |c: i64| Expr::new(ExprKind::Literal(Scalar::I64(c)), span);
    let c = t.coeff.abs();
    let mut parts: Vec<Expr> = vec![];
    if c != 1 || t.factors.is_empty() {
        parts.push(lit(c));
    }
    parts.extend(t.factors.iter().map(factor_expr));
    let mut it = parts.into_iter();
    let first = it.next().expect("a product has a part");
    it.fold(first, |acc, e| {
        Expr::new(
            ExprKind::Binary(BinaryOp::Mul, Box::new(acc), Box::new(e)),
            span,
        )
    })
}

fn sum(ts: &[Term], span: Span) -> Expr {
    let mut acc: Option<Expr> = None;
    for t in ts {
        let p = product(t, span);
        acc = Some(match acc {
            None if t.coeff < 0 => Expr::new(ExprKind::Unary(UnaryOp::Neg, Box::new(p)), span),
            None => p,
            Some(a) => {
                let op = if t.coeff < 0 {
                    BinaryOp::Sub
                } else {
                    BinaryOp::Add
                };
                Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(p)), span)
            }
        });
    }
    acc.expect("a sum has a term")
}

fn assign(lhs: &Access, rhs: Expr, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::Assign {
            lhs: lhs.clone(),
            op: AssignOp::Reduce(Reducer::Add),
            rhs,
        },
        span,
    )
}

fn build_nest(loops: &[Lp], body: Vec<Stmt>) -> Stmt {
    let mut body = body;
    for l in loops.iter().rev() {
        body = vec![Stmt::new(
            StmtKind::Loop {
                index: l.index.clone(),
                extent: l.extent.clone(),
                body,
                parallel: l.parallel,
            },
            l.span,
        )];
    }
    match body.len() {
        1 => body.pop().unwrap(),
        _ => Stmt::new(StmtKind::Block(body), Span::default()),
    }
}

fn rebuild_original(nest: &Nest) -> Stmt {
    let op = if nest.sign < 0 {
        Reducer::Sub
    } else {
        Reducer::Add
    };
    build_nest(
        &nest.loops,
        vec![Stmt::new(
            StmtKind::Assign {
                lhs: nest.lhs.clone(),
                op: AssignOp::Reduce(op),
                rhs: nest.rhs.clone(),
            },
            nest.span,
        )],
    )
}

// ---------------------------------------------------------------------------------------------
// The fallback of the lowering: δ and ε left anywhere become comparisons.

fn fallback_stmts(body: &[Stmt]) -> Result<Vec<Stmt>> {
    body.iter().map(fallback_stmt).collect()
}

fn fallback_stmt(s: &Stmt) -> Result<Stmt> {
    let kind = match &s.kind {
        StmtKind::Declare { tensor, init } => StmtKind::Declare {
            tensor: tensor.clone(),
            init: value(init),
        },
        StmtKind::Assign { lhs, op, rhs } => StmtKind::Assign {
            lhs: value_access(lhs),
            op: op.clone(),
            rhs: value(rhs),
        },
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => {
            let extent = match extent {
                Extent::Auto => auto_extent(index, body, s.span)?,
                Extent::Range(a, b) => Extent::Range(value(a), value(b)),
            };
            StmtKind::Loop {
                index: index.clone(),
                extent,
                body: fallback_stmts(body)?,
                parallel: *parallel,
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: value(cond),
            then: fallback_stmts(then)?,
            otherwise: fallback_stmts(otherwise)?,
        },
        StmtKind::Let {
            name,
            value: v,
            body,
        } => StmtKind::Let {
            name: name.clone(),
            value: value(v),
            body: fallback_stmts(body)?,
        },
        StmtKind::Block(b) => StmtKind::Block(fallback_stmts(b)?),
        k => k.clone(),
    };
    Ok(Stmt::new(kind, s.span))
}

/// A `_` loop whose index only δ or ε index directly: ε gives it `0:n-1`; δ cannot size it.
fn auto_extent(index: &str, body: &[Stmt], span: Span) -> Result<Extent> {
    let mut tensor = false;
    let mut eps = None;
    let mut delta = None;
    crate::notation::visit::accesses(body, &mut |a: &Access| {
        if !access_indexes(a, index) {
            return;
        }
        match a.tensor.as_str() {
            EPS => eps = Some(a.indices.len() as i64),
            DELTA => delta = delta.or(Some(a.span)),
            _ => tensor = true,
        }
    });
    if tensor {
        return Ok(Extent::Auto);
    }
    if let Some(n) = eps {
        let at = |c| Expr::new(ExprKind::Literal(Scalar::I64(c)), span);
        return Ok(Extent::Range(at(0), at(n - 1)));
    }
    if let Some(at) = delta {
        return Err(Error::program(
            at,
            format!(
                "the size of `delta` cannot be inferred: its index `{index}` indexes no tensor; \
                 give the loop of `{index}` a range"
            ),
        ));
    }
    Ok(Extent::Auto)
}

fn value_access(a: &Access) -> Access {
    Access {
        tensor: a.tensor.clone(),
        indices: a
            .indices
            .iter()
            .map(|ix| AccessIndex {
                expr: value(&ix.expr),
                permissive: ix.permissive,
                protocol: ix.protocol,
                window: ix.window.as_ref().map(|(l, h)| (value(l), value(h))),
            })
            .collect(),
        swizzle: a.swizzle.clone(),
        span: a.span,
    }
}

/// `e` with every δ and ε as an integer-valued comparison.
fn value(e: &Expr) -> Expr {
    let sp = e.span;
    let lit = |c: i64| Expr::new(ExprKind::Literal(Scalar::I64(c)), sp);
    let bin = |op, a: Expr, b: Expr| Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), sp);
    let ifelse =
        |c: Expr, v: i64| Expr::new(ExprKind::Call("ifelse".into(), vec![c, lit(v), lit(0)]), sp);
    let kind = match &e.kind {
        ExprKind::Access(a) if a.tensor == DELTA => {
            let (x, y) = (value(&a.indices[0].expr), value(&a.indices[1].expr));
            return ifelse(bin(BinaryOp::Eq, x, y), 1);
        }
        ExprKind::Access(a) if a.tensor == EPS => {
            let ix: Vec<Expr> = a.indices.iter().map(|i| value(&i.expr)).collect();
            let mut acc: Option<Expr> = None;
            for (perm, s) in permutations(ix.len()) {
                let cond = ix
                    .iter()
                    .zip(&perm)
                    .map(|(x, &p)| bin(BinaryOp::Eq, x.clone(), lit(p as i64)))
                    .reduce(|a, b| bin(BinaryOp::AndAnd, a, b))
                    .expect("eps has an index");
                let t = ifelse(cond, s);
                acc = Some(match acc {
                    None => t,
                    Some(a) => bin(BinaryOp::Add, a, t),
                });
            }
            return acc.expect("eps has an index");
        }
        ExprKind::Access(a) => ExprKind::Access(value_access(a)),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(value(x))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(*op, Box::new(value(x)), Box::new(value(y))),
        ExprKind::Call(f, args) => ExprKind::Call(f.clone(), args.iter().map(value).collect()),
        k => k.clone(),
    };
    Expr::new(kind, sp)
}

#[cfg(test)]
mod tests;
