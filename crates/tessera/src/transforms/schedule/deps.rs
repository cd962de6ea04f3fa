//! Instance-wise dependence analysis on the notation AST (FreeTensor §4.2 without isl).
//!
//! Every access is collected with the loops around it (outermost first), the path of its
//! statement, and its index expressions in affine form over the loop indices. Two accesses
//! of the same tensor conflict when one of them writes, unless both reduce with the same
//! commutative and associative reducer (FreeTensor's reduction relaxation: `y[i] += a`
//! and `y[i] += b` give the same result in either order, up to floating-point rounding for
//! `+=` and `*=` on floats, which schedules accept as FreeTensor does). For a conflicting
//! pair, the analysis finds the feasible *direction vectors* over the loops the two share:
//! for each such loop, whether the first access's iteration is earlier (`<`), the same (`=`)
//! or later (`>`) than the second's. Direction vectors are refined one loop at a time,
//! outermost first, pruning a prefix as soon as it is infeasible.
//!
//! A direction vector is feasible when every index dimension's equation `f(x) = g(y)` has an
//! integer solution by the GCD test and Banerjee's bounds (each loop index ranges over its
//! literal extent; an extent bound that is not a literal is unbounded). Dimensions are tested
//! one at a time, so the answer over-approximates: a dependence may be reported that does not
//! exist, never the reverse. What each kind of index contributes:
//! - loop indices, literals, `+ - *` by a literal: exact affine terms;
//! - `size(A, d)` and names bound outside every loop (global `let`s, 0-d tensors the program
//!   never writes): symbols with the same value in both instances;
//! - `let` names: their value's affine form; a non-affine `let` value is a value that is the
//!   same in two instances of the `let` (all its loops `=`) and unknown otherwise;
//! - any other expression (`A[I[i]]`, `i % 2`, `i * j`): when it reads no tensor the program
//!   writes, equal in two instances that agree on the loops it mentions (FreeTensor's "equal
//!   loop-variant inputs give equal values"); otherwise unknown, so dependent;
//! - `T .= v`, `@freeze(T)`, `@thaw(T)`: a write of every element.
//!
//! What formats contribute: nothing is assumed about how a loop is executed beyond the
//! notation's meaning. A loop over `i` means every `i` of its extent in increasing order; a
//! kernel that visits only the stored coordinates of a sparse level visits a subsequence of
//! those iterations in the same order, because a fiber's coordinates are strictly increasing
//! and unique (the invariant every sparse level keeps and checks on assembly). An order
//! between two iterations that exists in the dense iteration space therefore exists, the same
//! way round, among the stored ones, and a dependence absent from the dense space is absent
//! from every subset: the analysis over indices is sound for every format. In particular a
//! write `y[i]` per iteration of a loop over a sparse level's coordinates is injective with no
//! hint (what FreeTensor needs `no_deps` for, since its CSR loops run over position ranges).
//!
//! Tensors declared (`T .= v`) inside a loop whose accesses all follow the declaration in the
//! same block are *private* to that loop's iterations: every iteration redeclares them before
//! using them, so no value flows between iterations (Fig. 12d). The query says whether to use
//! this: it holds while iterations stay whole (reorder), not when a loop's body is cut
//! (fission, fuse).

use super::names::Path;
use crate::error::Dependence;
use crate::notation::ast::{
    Access, AssignOp, BinaryOp, Expr, ExprKind, Extent, Program, Reducer, ReducerDef, Span, Stmt,
    StmtKind, UnaryOp,
};
use crate::types::Scalar;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How the first access's iteration of a shared loop relates to the second's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Lt,
    Eq,
    Gt,
}

impl Dir {
    pub fn symbol(self) -> char {
        match self {
            Dir::Lt => '<',
            Dir::Eq => '=',
            Dir::Gt => '>',
        }
    }
    fn flip(self) -> Dir {
        match self {
            Dir::Lt => Dir::Gt,
            Dir::Eq => Dir::Eq,
            Dir::Gt => Dir::Lt,
        }
    }
}

/// A loop of the analysed program.
#[derive(Clone, Debug)]
pub struct LoopInfo {
    pub path: Path,
    pub name: String,
    /// Literal bounds of the extent (inclusive); `None` is unbounded on that side.
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Term {
    Loop(usize),
    Sym(String),
    /// A value equal in two instances that agree on these loops.
    Opaque(String, Vec<usize>),
}

/// `Σ coef·term + k`.
#[derive(Clone, Debug, Default)]
pub struct Aff {
    terms: BTreeMap<Term, i64>,
    k: i64,
}

impl Aff {
    fn konst(k: i64) -> Aff {
        Aff {
            terms: BTreeMap::new(),
            k,
        }
    }
    fn term(t: Term) -> Aff {
        Aff {
            terms: BTreeMap::from([(t, 1)]),
            k: 0,
        }
    }
    fn add(mut self, o: &Aff, sign: i64) -> Option<Aff> {
        for (t, c) in &o.terms {
            let e = self.terms.entry(t.clone()).or_insert(0);
            *e = e.checked_add(c.checked_mul(sign)?)?;
        }
        self.terms.retain(|_, c| *c != 0);
        self.k = self.k.checked_add(o.k.checked_mul(sign)?)?;
        Some(self)
    }
    fn scale(mut self, s: i64) -> Option<Aff> {
        for c in self.terms.values_mut() {
            *c = c.checked_mul(s)?;
        }
        self.terms.retain(|_, c| *c != 0);
        self.k = self.k.checked_mul(s)?;
        Some(self)
    }
    fn loops(&self, out: &mut Vec<usize>) {
        for t in self.terms.keys() {
            match t {
                Term::Loop(l) => out.push(*l),
                Term::Opaque(_, ls) => out.extend(ls),
                Term::Sym(_) => {}
            }
        }
    }
}

/// What an access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
    /// A reduction with a commutative and associative reducer (reorderable with its kind).
    Reduce,
}

/// The index of each tensor dimension of an access (`None`: unknown).
type Index = Vec<Option<Aff>>;

/// Whether a direction vector between two accesses breaks a command (see [`Analysis::find`]).
pub type Refuses<'a> = dyn Fn(&Acc, &Acc, &[usize], &[Dir]) -> bool + 'a;

/// One access of the program.
#[derive(Clone, Debug)]
pub struct Acc {
    pub tensor: String,
    /// The index of each tensor dimension (`None`: unknown); `None` for the whole tensor.
    idx: Option<Vec<Option<Aff>>>,
    pub mode: Mode,
    reducer: Option<Reducer>,
    /// The loops around the access, outermost first (indices into `Analysis::loops`).
    pub loops: Vec<usize>,
    /// The statement holding the access.
    pub stmt: Path,
    pub text: String,
    pub span: Span,
}

#[derive(Clone)]
enum Bind {
    Loop(usize),
    Let(Aff),
}

/// The accesses and loops of a program.
pub struct Analysis {
    pub loops: Vec<LoopInfo>,
    pub accs: Vec<Acc>,
    /// Tensors private to the iterations of these loops (see the module comment).
    private: HashMap<String, Vec<usize>>,
}

struct Collect<'a> {
    reducers: &'a [ReducerDef],
    written: HashSet<String>,
    loops: Vec<LoopInfo>,
    accs: Vec<Acc>,
    env: Vec<(String, Bind)>,
    stack: Vec<usize>,
    path: Path,
}

fn literal(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Literal(Scalar::I64(v)) => Some(*v),
        ExprKind::Unary(UnaryOp::Neg, x) => literal(x)?.checked_neg(),
        _ => None,
    }
}

impl Collect<'_> {
    fn lookup(&self, n: &str) -> Option<&Bind> {
        self.env.iter().rev().find(|(m, _)| m == n).map(|(_, b)| b)
    }

    fn comm_assoc(&self, r: &Reducer) -> bool {
        match r {
            Reducer::Add
            | Reducer::Mul
            | Reducer::And
            | Reducer::Or
            | Reducer::Min
            | Reducer::Max => true,
            Reducer::Sub | Reducer::Choose(_) => false,
            Reducer::User(d) => d.commutative && d.associative,
            Reducer::Named(n) => self
                .reducers
                .iter()
                .any(|d| d.name == *n && d.commutative && d.associative),
        }
    }

    /// Whether an expression reads a tensor the program writes.
    fn reads_written(&self, e: &Expr) -> bool {
        let mut hit = false;
        crate::notation::visit::expr(e, &mut |x| match &x.kind {
            ExprKind::Access(a) if self.written.contains(&a.tensor) => hit = true,
            ExprKind::Name(n) if self.lookup(n).is_none() && self.written.contains(n) => hit = true,
            _ => {}
        });
        hit
    }

    /// An opaque value: equal in instances agreeing on the loops it mentions, when it reads
    /// nothing the program writes.
    fn opaque(&self, e: &Expr) -> Option<Aff> {
        if self.reads_written(e) {
            return None;
        }
        let mut ls = vec![];
        crate::notation::visit::expr(e, &mut |x| {
            if let ExprKind::Name(n) = &x.kind {
                match self.lookup(n) {
                    Some(Bind::Loop(l)) => ls.push(*l),
                    Some(Bind::Let(a)) => a.loops(&mut ls),
                    None => {}
                }
            }
        });
        ls.sort_unstable();
        ls.dedup();
        Some(Aff::term(Term::Opaque(e.to_string(), ls)))
    }

    fn aff(&self, e: &Expr) -> Option<Aff> {
        match &e.kind {
            ExprKind::Literal(Scalar::I64(v)) => Some(Aff::konst(*v)),
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Bind::Loop(l)) => Some(Aff::term(Term::Loop(*l))),
                Some(Bind::Let(a)) => Some(a.clone()),
                None if self.written.contains(n) => None,
                None => Some(Aff::term(Term::Sym(n.clone()))),
            },
            ExprKind::Unary(UnaryOp::Neg, x) => self.aff(x)?.scale(-1),
            ExprKind::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), x, y) => {
                let sign = if *op == BinaryOp::Add { 1 } else { -1 };
                self.aff(x)?.add(&self.aff(y)?, sign)
            }
            ExprKind::Binary(BinaryOp::Mul, x, y) => {
                let (a, b) = (self.aff(x), self.aff(y));
                match (a, b) {
                    (Some(a), Some(b)) if b.terms.is_empty() => a.scale(b.k),
                    (Some(a), Some(b)) if a.terms.is_empty() => b.scale(a.k),
                    _ => self.opaque(e),
                }
            }
            ExprKind::Call(f, _) if f == "size" => Some(Aff::term(Term::Sym(e.to_string()))),
            _ => self.opaque(e),
        }
    }

    fn access_index(&self, a: &Access) -> Vec<Option<Aff>> {
        let mut out = vec![None; a.indices.len()];
        for (k, ix) in a.indices.iter().enumerate() {
            let mut v = self.aff(&ix.expr);
            if let Some((lo, _)) = &ix.window {
                v = match (v, self.aff(lo)) {
                    (Some(v), Some(lo)) => v.add(&lo, 1),
                    _ => None,
                };
            }
            if let Some(slot) = out.get_mut(a.dim_of(k)) {
                *slot = v;
            }
        }
        out
    }

    fn push(
        &mut self,
        tensor: &str,
        idx: Option<Vec<Option<Aff>>>,
        mode: Mode,
        reducer: Option<Reducer>,
        text: String,
        span: Span,
    ) {
        self.accs.push(Acc {
            tensor: tensor.to_string(),
            idx,
            mode,
            reducer,
            loops: self.stack.clone(),
            stmt: self.path.clone(),
            text,
            span,
        });
    }

    /// The reads of an expression.
    fn reads(&mut self, e: &Expr) {
        let mut found: Vec<(String, Option<Index>, String, Span)> = vec![];
        crate::notation::visit::expr(e, &mut |x| match &x.kind {
            ExprKind::Access(a) => found.push((
                a.tensor.clone(),
                Some(self.access_index(a)),
                a.to_string(),
                a.span,
            )),
            ExprKind::Name(n) if self.lookup(n).is_none() => {
                found.push((n.clone(), Some(vec![]), n.clone(), x.span))
            }
            _ => {}
        });
        for (t, idx, text, span) in found {
            self.push(&t, idx, Mode::Read, None, text, span);
        }
    }

    fn access_reads(&mut self, a: &Access) {
        for ix in &a.indices {
            if let Some((lo, hi)) = &ix.window {
                self.reads(lo);
                self.reads(hi);
            }
            self.reads(&ix.expr);
        }
    }

    fn body(&mut self, body: &[Stmt], b: usize) {
        for (k, s) in body.iter().enumerate() {
            self.path.push((b, k));
            self.stmt(s);
            self.path.pop();
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Declare { tensor, init } => {
                self.reads(init);
                self.push(
                    tensor,
                    None,
                    Mode::Write,
                    None,
                    s.to_string().trim().to_string(),
                    s.span,
                );
            }
            StmtKind::Freeze { tensor } | StmtKind::Thaw { tensor } => {
                self.push(
                    tensor,
                    None,
                    Mode::Write,
                    None,
                    s.to_string().trim().to_string(),
                    s.span,
                );
            }
            StmtKind::Assign { lhs, op, rhs } => {
                self.access_reads(lhs);
                self.reads(rhs);
                let idx = Some(self.access_index(lhs));
                match op {
                    AssignOp::Reduce(r) if self.comm_assoc(r) => self.push(
                        &lhs.tensor,
                        idx,
                        Mode::Reduce,
                        Some(r.clone()),
                        lhs.to_string(),
                        lhs.span,
                    ),
                    AssignOp::Reduce(_) => {
                        self.push(
                            &lhs.tensor,
                            idx.clone(),
                            Mode::Read,
                            None,
                            lhs.to_string(),
                            lhs.span,
                        );
                        self.push(
                            &lhs.tensor,
                            idx,
                            Mode::Write,
                            None,
                            lhs.to_string(),
                            lhs.span,
                        );
                    }
                    AssignOp::Overwrite => self.push(
                        &lhs.tensor,
                        idx,
                        Mode::Write,
                        None,
                        lhs.to_string(),
                        lhs.span,
                    ),
                }
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                let (lo, hi) = match extent {
                    Extent::Auto => (Some(0), None),
                    Extent::Range(a, b) => {
                        self.reads(a);
                        self.reads(b);
                        (literal(a), literal(b))
                    }
                };
                let id = self.loops.len();
                self.loops.push(LoopInfo {
                    path: self.path.clone(),
                    name: index.clone(),
                    lo,
                    hi,
                });
                self.env.push((index.clone(), Bind::Loop(id)));
                self.stack.push(id);
                self.body(body, 0);
                self.stack.pop();
                self.env.pop();
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.reads(cond);
                self.body(then, 0);
                self.body(otherwise, 1);
            }
            StmtKind::Let { name, value, body } => {
                self.reads(value);
                let v = self.aff(value).unwrap_or_else(|| {
                    let key = format!("{name}@{:?}", self.path);
                    Aff::term(Term::Opaque(key, self.stack.clone()))
                });
                self.env.push((name.clone(), Bind::Let(v)));
                self.body(body, 0);
                self.env.pop();
            }
            StmtKind::Block(b) => self.body(b, 0),
        }
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}

/// Whether `Σ c·v + k = 0` has an integer solution with each `v` in its range.
fn solvable(vars: &[(i64, Option<i64>, Option<i64>)], k: i64) -> bool {
    let vars: Vec<_> = vars.iter().filter(|v| v.0 != 0).collect();
    if vars
        .iter()
        .any(|(_, lo, hi)| matches!((lo, hi), (Some(l), Some(h)) if l > h))
    {
        return false;
    }
    let g = vars.iter().fold(0i128, |g, v| gcd(g, v.0 as i128));
    let k = k as i128;
    if g == 0 {
        return k == 0;
    }
    if k % g != 0 {
        return false;
    }
    // Banerjee: -k must lie between the smallest and the largest value of the sum.
    let (mut min, mut max) = (Some(0i128), Some(0i128));
    for (c, lo, hi) in vars {
        let c = *c as i128;
        let (a, b) = (lo.map(|l| c * l as i128), hi.map(|h| c * h as i128));
        let (vmin, vmax) = if c > 0 { (a, b) } else { (b, a) };
        min = min.zip(vmin).map(|(x, y)| x + y);
        max = max.zip(vmax).map(|(x, y)| x + y);
    }
    min.is_none_or(|m| m <= -k) && max.is_none_or(|m| -k <= m)
}

impl Analysis {
    pub fn new(p: &Program) -> Analysis {
        let (_, w) = crate::notation::visit::reads_writes(&p.body);
        let mut c = Collect {
            reducers: &p.reducers,
            written: w.into_iter().collect(),
            loops: vec![],
            accs: vec![],
            env: vec![],
            stack: vec![],
            path: vec![],
        };
        c.body(&p.body, 0);
        let mut a = Analysis {
            loops: c.loops,
            accs: c.accs,
            private: HashMap::new(),
        };
        a.private = a.find_private(&p.body);
        a
    }

    fn find_private(&self, body: &[Stmt]) -> HashMap<String, Vec<usize>> {
        let mut out = HashMap::new();
        let mut decls: HashMap<&str, Vec<&Acc>> = HashMap::new();
        for x in &self.accs {
            if x.idx.is_none() && x.mode == Mode::Write {
                decls.entry(&x.tensor).or_default().push(x);
            }
        }
        for (t, ds) in decls {
            let [d] = ds[..] else { continue };
            if d.loops.is_empty()
                || !matches!(
                    &super::names::get(body, &d.stmt).kind,
                    StmtKind::Declare { .. }
                )
            {
                continue;
            }
            let (block, at) = d.stmt.split_at(d.stmt.len() - 1);
            let ok = self.accs.iter().filter(|x| x.tensor == t).all(|x| {
                x.stmt.len() >= d.stmt.len()
                    && x.stmt[..block.len()] == *block
                    && x.stmt[block.len()].0 == at[0].0
                    && x.stmt[block.len()].1 >= at[0].1
            });
            if ok {
                out.insert(t.to_string(), d.loops.clone());
            }
        }
        out
    }

    /// The loops two accesses share, outermost first.
    pub fn common(&self, x: &Acc, y: &Acc) -> Vec<usize> {
        x.loops
            .iter()
            .zip(&y.loops)
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| *a)
            .collect()
    }

    fn range(&self, l: usize) -> (Option<i64>, Option<i64>) {
        (self.loops[l].lo, self.loops[l].hi)
    }

    fn feasible(&self, x: &Acc, y: &Acc, common: &[usize], dirs: &[Option<Dir>]) -> bool {
        for (l, d) in common.iter().zip(dirs) {
            if let (Some(Dir::Lt | Dir::Gt), (Some(lo), Some(hi))) = (d, self.range(*l))
                && hi <= lo
            {
                return false;
            }
        }
        let (Some(ix), Some(iy)) = (&x.idx, &y.idx) else {
            return true;
        };
        if ix.len() != iy.len() {
            return true;
        }
        ix.iter().zip(iy).all(|(a, b)| match (a, b) {
            (Some(a), Some(b)) => self.dim_feasible(a, b, common, dirs),
            _ => true,
        })
    }

    fn dim_feasible(&self, a: &Aff, b: &Aff, common: &[usize], dirs: &[Option<Dir>]) -> bool {
        let mut vars = vec![];
        let mut terms: Vec<&Term> = a.terms.keys().chain(b.terms.keys()).collect();
        terms.sort();
        terms.dedup();
        for t in terms {
            let ca = a.terms.get(t).copied().unwrap_or(0);
            let cb = b.terms.get(t).copied().unwrap_or(0);
            match t {
                Term::Loop(l) => {
                    let (lo, hi) = self.range(*l);
                    let span = lo.zip(hi).map(|(l, h)| h - l);
                    match common.iter().position(|c| c == l).and_then(|p| dirs[p]) {
                        Some(Dir::Eq) => vars.push((ca - cb, lo, hi)),
                        Some(Dir::Lt) => {
                            vars.push((ca - cb, lo, hi.map(|h| h - 1)));
                            vars.push((-cb, Some(1), span));
                        }
                        Some(Dir::Gt) => {
                            vars.push((ca - cb, lo, hi.map(|h| h - 1)));
                            vars.push((ca, Some(1), span));
                        }
                        None => {
                            vars.push((ca, lo, hi));
                            vars.push((-cb, lo, hi));
                        }
                    }
                }
                Term::Sym(_) => vars.push((ca - cb, None, None)),
                Term::Opaque(_, ls) => {
                    let same = ls.iter().all(|l| {
                        common
                            .iter()
                            .position(|c| c == l)
                            .is_some_and(|p| dirs[p] == Some(Dir::Eq))
                    });
                    if same {
                        vars.push((ca - cb, None, None));
                    } else {
                        vars.push((ca, None, None));
                        vars.push((-cb, None, None));
                    }
                }
            }
        }
        solvable(&vars, a.k - b.k)
    }

    /// Whether two accesses conflict (the same tensor, a write, not two reorderable
    /// reductions of one kind).
    fn conflict(&self, x: &Acc, y: &Acc) -> bool {
        x.tensor == y.tensor
            && (x.mode != Mode::Read || y.mode != Mode::Read)
            && !(x.mode == Mode::Reduce
                && y.mode == Mode::Reduce
                && reducer_kind(x) == reducer_kind(y))
    }

    /// The feasible direction vectors of instance pairs (x, y) over their common loops.
    pub fn vectors(&self, x: &Acc, y: &Acc, private: bool) -> Vec<Vec<Dir>> {
        let common = self.common(x, y);
        let mut dirs = vec![None; common.len()];
        let mut out = vec![];
        let priv_loops = if private {
            self.private.get(&x.tensor)
        } else {
            None
        };
        self.refine(x, y, &common, &mut dirs, 0, &mut out);
        out.retain(|v| {
            // The same instance of one statement is not a pair of instances.
            if x.stmt == y.stmt && v.iter().all(|d| *d == Dir::Eq) {
                return false;
            }
            // Private tensors: nothing flows between different iterations of their loops.
            !priv_loops.is_some_and(|ls| {
                common
                    .iter()
                    .zip(v)
                    .any(|(c, d)| ls.contains(c) && *d != Dir::Eq)
            })
        });
        out
    }

    fn refine(
        &self,
        x: &Acc,
        y: &Acc,
        common: &[usize],
        dirs: &mut Vec<Option<Dir>>,
        p: usize,
        out: &mut Vec<Vec<Dir>>,
    ) {
        if !self.feasible(x, y, common, dirs) {
            return;
        }
        if p == common.len() {
            out.push(dirs.iter().map(|d| d.expect("refined")).collect());
            return;
        }
        for d in [Dir::Lt, Dir::Eq, Dir::Gt] {
            dirs[p] = Some(d);
            self.refine(x, y, common, dirs, p + 1, out);
        }
        dirs[p] = None;
    }

    /// The first dependence between an access satisfying `a_in` (the first instance) and
    /// one satisfying `b_in` (the second) whose direction vector `bad` refuses. `bad` gets
    /// the common loops and the direction vector of the first instance relative to the
    /// second.
    pub fn find(
        &self,
        a_in: &dyn Fn(&Acc) -> bool,
        b_in: &dyn Fn(&Acc) -> bool,
        private: bool,
        bad: &Refuses<'_>,
    ) -> Option<Dependence> {
        for x in self.accs.iter().filter(|x| a_in(x)) {
            for y in self.accs.iter().filter(|y| b_in(y)) {
                if !self.conflict(x, y) {
                    continue;
                }
                let common = self.common(x, y);
                for v in self.vectors(x, y, private) {
                    if bad(x, y, &common, &v) {
                        return Some(self.describe(x, y, &common, &v));
                    }
                }
            }
        }
        None
    }

    /// The dependence of a refused pair, source first.
    fn describe(&self, x: &Acc, y: &Acc, common: &[usize], v: &[Dir]) -> Dependence {
        let x_first = first_is_x(x, y, v);
        let (src, dst, dirs): (&Acc, &Acc, Vec<Dir>) = if x_first {
            (x, y, v.to_vec())
        } else {
            (y, x, v.iter().map(|d| d.flip()).collect())
        };
        let kind = match (src.mode, dst.mode) {
            (Mode::Read, _) => "write after read",
            (_, Mode::Read) => "read after write",
            _ => "write after write",
        };
        Dependence {
            kind: kind.to_string(),
            source: src.text.clone(),
            source_span: src.span,
            sink: dst.text.clone(),
            sink_span: dst.span,
            direction: common
                .iter()
                .zip(dirs)
                .map(|(l, d)| (self.loops[*l].name.clone(), d.symbol()))
                .collect(),
        }
    }

    /// The first dependence carried by the loop at `path`: two conflicting instances in
    /// different iterations of it and the same iteration of every loop outside it. `None`
    /// means its iterations are independent up to reductions of one kind (what running
    /// them in parallel needs; the reductions then need private accumulators or atomics).
    /// With `private`, tensors declared inside the loop count as one per iteration (an
    /// executor must then give each thread its own).
    pub fn carried_by(&self, path: &[(usize, usize)], private: bool) -> Option<Dependence> {
        let id = self.loops.iter().position(|l| l.path == path)?;
        let inside = |x: &Acc| x.loops.contains(&id);
        let bad = |_: &Acc, _: &Acc, common: &[usize], v: &[Dir]| {
            let at = common.iter().position(|l| *l == id).expect("shared");
            v[..at].iter().all(|d| *d == Dir::Eq) && v[at] != Dir::Eq
        };
        self.find(&inside, &inside, private, &bad)
    }

    /// The first dependence that keeps the loop at `path` from running its iterations in
    /// SIMD lanes: one it carries (as [`Self::carried_by`], no private tensors), or a
    /// reduction inside it that lanes cannot combine. Lanes keep one partial result each
    /// and combine them after the loop, which is exact only for a reduction into one element
    /// per run of the loop (an index that does not involve the loop) with `+ * min max & |`;
    /// a reduction whose elements no two iterations share (`y[o] += ...`) is a plain update
    /// per lane. A reduction into `h[idx[i]]` has lanes that hit one element at once (a
    /// histogram), and a user reducer or `choose` has no lane-wise form in the backends.
    pub fn vector_blocker(&self, path: &[(usize, usize)]) -> Option<Dependence> {
        if let Some(d) = self.carried_by(path, false) {
            return Some(d);
        }
        let id = self.loops.iter().position(|l| l.path == path)?;
        for x in self.accs.iter().filter(|x| x.loops.contains(&id)) {
            if x.mode != Mode::Reduce {
                continue;
            }
            let lane_wise = matches!(
                x.reducer,
                Some(
                    Reducer::Add
                        | Reducer::Mul
                        | Reducer::Min
                        | Reducer::Max
                        | Reducer::And
                        | Reducer::Or
                )
            );
            let one_element = x.idx.as_ref().is_some_and(|idx| {
                idx.iter().all(|a| {
                    a.as_ref().is_some_and(|a| {
                        let mut ls = vec![];
                        a.loops(&mut ls);
                        !ls.contains(&id)
                    })
                })
            });
            // Or one element per iteration: no two iterations of the loop (in one run of it)
            // touch an element this reduction updates, through it or any other access of
            // its tensor (`y[o] += ...`: each lane updates its own element). Reductions of
            // one kind are not conflicts for `carried_by`, so this is their test.
            let own_elements = || {
                self.accs
                    .iter()
                    .filter(|y| y.tensor == x.tensor && y.loops.contains(&id))
                    .all(|y| {
                        let common = self.common(x, y);
                        let Some(at) = common.iter().position(|l| *l == id) else {
                            return false;
                        };
                        self.vectors(x, y, false)
                            .iter()
                            .all(|v| !(v[..at].iter().all(|d| *d == Dir::Eq) && v[at] != Dir::Eq))
                    })
            };
            if lane_wise && (one_element || own_elements()) {
                continue;
            }
            // The reduction's instances in two iterations of the loop (and the same of every
            // loop outside it) are the dependence lanes would break.
            let dirs = x
                .loops
                .iter()
                .take_while(|l| **l != id)
                .map(|l| (self.loops[*l].name.clone(), '='))
                .chain([(self.loops[id].name.clone(), '<')])
                .collect();
            return Some(Dependence {
                kind: "write after write".to_string(),
                source: x.text.clone(),
                source_span: x.span,
                sink: x.text.clone(),
                sink_span: x.span,
                direction: dirs,
            });
        }
        None
    }

    /// Whether an access lies inside (or is part of) the statement at `path`.
    pub fn inside(x: &Acc, path: &[(usize, usize)]) -> bool {
        super::names::within(&x.stmt, path)
    }
}

/// Reducers compare by kind: `Named` and `User` forms of one user reducer are one kind.
fn reducer_kind(x: &Acc) -> Option<String> {
    x.reducer.as_ref().map(|r| match r {
        Reducer::Named(n) => n.clone(),
        Reducer::User(d) => d.name.clone(),
        other => format!("{other:?}"),
    })
}

/// Which of two instances runs first in the unscheduled order: the first non-`=` direction,
/// or, for the same iteration of every shared loop, program order.
pub fn first_is_x(x: &Acc, y: &Acc, v: &[Dir]) -> bool {
    match v.iter().find(|d| **d != Dir::Eq) {
        Some(d) => *d == Dir::Lt,
        None => x.stmt <= y.stmt,
    }
}
