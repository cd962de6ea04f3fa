//! Loop versioning, shared by the native backends: which accesses of a counted loop can have
//! their bounds checks replaced by one range test before the loop.
//!
//! Four kinds of access qualify:
//! - `buf[i + c]` or `buf[w + i + c]` (`i` the loop variable, `w` a variable the loop does not
//!   assign, such as a row's start `y * width`, `c` a small constant) touches, over `i` in
//!   `[s, e)`, exactly the positions `[s + w + c, e + w + c)`: the test is that this range
//!   lies inside the buffer;
//! - `buf[v]` where `v` only ever holds elements of coordinate arrays the caller vouches lie in
//!   `0..below` ([`Kernel::bounded`], [`Gathers`]): a gather such as SpMV's `x[j]`, `j` read
//!   from the matrix's checked column indices. The test is `0 < below <= len(buf)`;
//! - `buf[q + c]` in `for q = s..e` where `s` and `e` only ever hold elements of a position
//!   array the caller vouches lie in `0..below` (a fiber's entries between `ptr[p]` and
//!   `ptr[p + 1]`, [`At::Between`]): the test `below - 1 + c <= len(buf)` is the same for
//!   every fiber;
//! - `buf[v]` where `v` only ever holds values in a constant range `[lo, hi]`, `lo >= 0`
//!   (`backend::ranges`: a bin index `img[y, x] / 16` of a byte image is in `[0, 15]`): the
//!   test is `hi < len(buf)`.
//!
//! Besides accesses, a loop's test may decide a comparison `d <= v` (the lowering's guard
//! that a scatter's index `v` is inside its dimension `d`) for such a `v`: `d > hi`, `d`
//! kept by the loop, makes it false in the fast copy ([`At::Under`]).
//!
//! Each holds only while the buffer keeps its length during the loop. A backend emits the
//! loop twice: a copy without those checks, taken when the range tests all pass, and the
//! checked copy otherwise, so a corrupt input still fails at the same access with the same
//! writes done. When gathers are among the accesses a third copy sits between the two: the
//! gathers checked, the rest not, taken when only a gather's test fails (coordinates nobody
//! vouches for, such as a matrix shared from NumPy, whose positions the runtime still checks
//! on a private copy); inside it, inner loops do not test those gathers again. Innermost loops are versioned ([`versionable`]), and once on any path through
//! a nest a small loop with loops inside ([`outer_versionable`]), whose test also covers its
//! inner loops' `Between` accesses.

use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, VarId, Vouched};
use crate::types::Scalar;
use std::collections::{HashMap, HashSet};

pub use crate::ir::walk::{loop_offset, walk_accesses, walk_exprs, walk_stmts};

/// An access whose range a versioned loop tests before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Access {
    pub buf: BufId,
    pub at: At,
}

/// Where an [`Access`] reaches in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum At {
    /// `buf[var + base + offset]`.
    Shifted {
        /// The loop variable.
        var: VarId,
        /// A variable the loop keeps, or none.
        base: Option<VarId>,
        /// A constant in `-MAX_OFFSET..=MAX_OFFSET` (`ir::walk::MAX_OFFSET`).
        offset: i64,
    },
    /// `buf[index]`, `index` holding only values in `0..below`, `below` being
    /// `Gathers::belows[below]` (tested positive).
    Gathered { index: VarId, below: usize },
    /// `buf[base + index]`, `index` holding only values in `0..below` as for
    /// [`At::Gathered`] and `base` a variable the loop keeps: a gather into one row of a
    /// matrix (`D[t, i]`, `base` = `t * width`, `i` from a checked coordinate level). The
    /// test is `0 <= base <= len(buf)` and `0 < below <= len(buf) - base`.
    InRow {
        base: VarId,
        index: VarId,
        below: usize,
    },
    /// `buf[var + offset]` in `for var = s..e` where `s` and `e` only hold positions in
    /// `0..below` (`Gathers::position_below`): `var + offset` is then in
    /// `offset..below - 1 + offset`, whatever the row, so the test is the same for every run
    /// of the loop: `below > 0` and `below - 1 + offset <= len(buf)`. `offset >= 0`.
    Between {
        var: VarId,
        offset: i64,
        below: usize,
    },
    /// `buf[index]`, `index` holding only values in `[lo, hi]` with `0 <= lo`
    /// ([`Gathers::ranges`]): the test is `hi < len(buf)`.
    Ranged { index: VarId, hi: i64 },
    /// Not an access: the comparison `bound <= index` (or `index >= bound`), `index` in
    /// `[lo, hi]`, `bound` a variable the loop keeps. The test `bound > hi` makes it false;
    /// the access's `buf` is [`NO_BUF`].
    Under { index: VarId, bound: VarId, hi: i64 },
    /// `buf[var]` in `while (... & var < stop) { .. }` before the body moves `var`, which only
    /// grows (`backend::walked`): the test before the loop is `var >= 0` and
    /// `stop <= len(buf)`.
    Walked { var: VarId, stop: VarId },
}

/// The buffer of an [`At::Under`], which names none.
pub const NO_BUF: BufId = BufId(u32::MAX);

impl Access {
    /// Whether `buf[index]` is this access.
    pub fn is(&self, buf: BufId, index: &Expr) -> bool {
        self.buf == buf
            && match self.at {
                At::Shifted { var, base, offset } => {
                    loop_offset(index, var) == Some((base, offset))
                }
                At::Gathered { index: v, .. } => matches!(index, Expr::Var(x) if *x == v),
                At::InRow { base, index: v, .. } => {
                    based_gather(index) == Some((base, v)) || based_gather(index) == Some((v, base))
                }
                At::Between { var, offset, .. } => loop_offset(index, var) == Some((None, offset)),
                At::Ranged { index: v, .. } => matches!(index, Expr::Var(x) if *x == v),
                At::Under { .. } => false,
                At::Walked { var, .. } => matches!(index, Expr::Var(x) if *x == var),
            }
    }
}

/// The two variables of `a + b`.
fn based_gather(index: &Expr) -> Option<(VarId, VarId)> {
    match index {
        Expr::Binary(BinOp::Add, a, b) => match (&**a, &**b) {
            (Expr::Var(a), Expr::Var(b)) => Some((*a, *b)),
            _ => None,
        },
        _ => None,
    }
}

/// Where an assignment of a variable takes its value from.
enum Source {
    Load(BufId),
    Copy(VarId),
    /// The counter of `for v = start..stop`: `start`, then up to `stop` (both evaluated once,
    /// before the loop; the body does not assign the counter, or the loop is not this).
    Counter(Expr, Expr),
    Other,
}

/// What [`Gathers::of`] knows of a variable while it looks for the fixpoint.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Nothing against it yet (only copies of other such variables so far).
    Open,
    Below(usize),
    Not,
}

/// The variables of a kernel that only ever hold elements of vouched-for integer arrays
/// ([`Kernel::bounded`]): every assignment to such a variable, anywhere in the kernel, is a
/// load from an array bounded by the same `below`, which the kernel never writes, a copy of
/// another such variable with the same bound, or the counter of a loop both of whose ends are
/// such variables (it runs from one to the other). Its value is then always in `0..below` when
/// `below` is positive (the initial 0 too), whichever load last set it, in bounds or not (an
/// out-of-bounds load fails before the assignment).
#[derive(Default)]
pub struct Gathers {
    vars: HashMap<VarId, usize>,
    /// The distinct bounds, as the kernel states them.
    pub belows: Vec<Expr>,
    /// Which of [`Gathers::belows`] bound positions rather than coordinates.
    positions: HashSet<usize>,
    /// The value ranges of the kernel's integer variables.
    pub ranges: crate::backend::ranges::Ranges,
}

impl Gathers {
    pub fn of(k: &Kernel) -> Gathers {
        let ranges = crate::backend::ranges::Ranges::of(k);
        if k.bounded.is_empty() {
            return Gathers {
                ranges,
                ..Gathers::default()
            };
        }
        let mut changed = HashSet::new();
        let mut assigned: HashMap<VarId, Vec<Source>> = HashMap::new();
        walk_stmts(&k.body, &mut |s| match s {
            Stmt::Assign(v, e) => {
                let from = match e {
                    Expr::Load { buf, .. } => Source::Load(*buf),
                    Expr::Var(u) => Source::Copy(*u),
                    _ => Source::Other,
                };
                assigned.entry(*v).or_default().push(from);
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                let from = match assigns(body, *var) {
                    false => Source::Counter(start.clone(), stop.clone()),
                    true => Source::Other,
                };
                assigned.entry(*var).or_default().push(from);
            }
            Stmt::Chunked(c) => {
                for v in [c.lo, c.hi] {
                    assigned.entry(v).or_default().push(Source::Other);
                }
                changed.extend(c.private.iter().map(|p| p.buf));
                changed.extend(c.scratch.iter().copied());
            }
            Stmt::Store { buf, .. }
            | Stmt::Atomic { buf, .. }
            | Stmt::Grow { buf, .. }
            | Stmt::Fill { buf, .. }
            | Stmt::Sort { buf, .. }
            | Stmt::SortPerm { perm: buf, .. } => {
                changed.insert(*buf);
            }
            _ => {}
        });
        let mut g = Gathers {
            ranges,
            ..Gathers::default()
        };
        let mut bound_of = HashMap::new();
        for f in &k.bounded {
            if changed.contains(&f.buf) {
                continue;
            }
            // A bound is one of coordinates or of positions, never both: the two are used
            // differently (`At::Gathered`, `At::Between`).
            let at = match g.belows.iter().position(|b| *b == f.below) {
                Some(at) if g.positions.contains(&at) == (f.what == Vouched::Positions) => at,
                Some(_) => usize::MAX,
                None => {
                    g.belows.push(f.below.clone());
                    if f.what == Vouched::Positions {
                        g.positions.insert(g.belows.len() - 1);
                    }
                    g.belows.len() - 1
                }
            };
            // A buffer vouched for twice with different bounds keeps neither.
            if *bound_of.entry(f.buf).or_insert(at) != at {
                bound_of.insert(f.buf, usize::MAX);
            }
        }
        // The largest set of variables consistent with the rules above: every assigned
        // variable starts open and is ruled out, or given its bound, until nothing changes.
        // Each step only moves a variable from open to a bound or to ruled out, or from a
        // bound to ruled out, so this ends. A variable still open at the end is only ever
        // copied from open ones, so it always holds the initial 0; it is left out (no bound
        // to name).
        let mut known: HashMap<VarId, Known> = assigned.keys().map(|v| (*v, Known::Open)).collect();
        let of_var = |known: &HashMap<VarId, Known>, u: &VarId| -> Known {
            known.get(u).copied().unwrap_or(Known::Not)
        };
        loop {
            let mut moved = false;
            for (v, froms) in &assigned {
                if known[v] == Known::Not {
                    continue;
                }
                let mut now = Known::Open;
                let mut meet = |k: Known| {
                    now = match (now, k) {
                        (Known::Not, _) | (_, Known::Not) => Known::Not,
                        (Known::Open, k) | (k, Known::Open) => k,
                        (Known::Below(a), Known::Below(b)) if a == b => Known::Below(a),
                        _ => Known::Not,
                    }
                };
                for f in froms {
                    match f {
                        Source::Load(b) => meet(match bound_of.get(b) {
                            Some(&a) if a != usize::MAX => Known::Below(a),
                            _ => Known::Not,
                        }),
                        Source::Copy(u) => meet(of_var(&known, u)),
                        Source::Counter(start, stop) => {
                            for end in [start, stop] {
                                meet(match end {
                                    Expr::Var(u) => of_var(&known, u),
                                    _ => Known::Not,
                                })
                            }
                        }
                        Source::Other => meet(Known::Not),
                    }
                }
                if now != known[v] {
                    known.insert(*v, now);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        g.vars = known
            .into_iter()
            .filter_map(|(v, k)| match k {
                Known::Below(a) => Some((v, a)),
                _ => None,
            })
            .collect();
        g
    }

    /// The bound of `v`'s values, if it only ever holds vouched-for coordinates.
    pub fn below(&self, v: VarId) -> Option<usize> {
        self.vars
            .get(&v)
            .copied()
            .filter(|a| !self.positions.contains(a))
    }

    /// The bound of `v`'s values, if it only ever holds vouched-for positions.
    pub fn position_below(&self, v: VarId) -> Option<usize> {
        self.vars
            .get(&v)
            .copied()
            .filter(|a| self.positions.contains(a))
    }
}

/// The accesses of the body of `for var = start..stop` whose checks can move before the loop:
/// the body has no inner loop (versioning nested loops would multiply the code) and does not
/// assign `var`; the buffer is not grown in the body; the base is not assigned in the body.
/// Empty when the loop cannot be versioned. Sorted, without repeats.
pub fn versionable(
    var: VarId,
    start: &Expr,
    stop: &Expr,
    body: &[Stmt],
    gathers: &Gathers,
) -> Vec<Access> {
    accesses(var, start, stop, body, gathers, false)
}

/// The largest body, in statements, that [`outer_versionable`] versions: the loop is emitted
/// twice, so this bounds what a kernel grows by.
pub const MAX_OUTER_BODY: usize = 160;

/// [`versionable`] for a loop with loops inside, such as SpMV's row loop with its row pointers
/// `ptr[i]`, `ptr[i + 1]` and the output `y[i]`: the same accesses, anywhere in the body
/// (inner loops included), under the same conditions, and the [`At::Between`] accesses of
/// its innermost loops (their test does not depend on the row). Those hold only inside their
/// own loop: a backend makes them unchecked there, not in the whole body. Empty when the body
/// holds a parallel range or is larger than [`MAX_OUTER_BODY`] statements. A backend
/// versions at most one such loop on any path through a nest, so the code at most doubles.
pub fn outer_versionable(
    var: VarId,
    start: &Expr,
    stop: &Expr,
    body: &[Stmt],
    gathers: &Gathers,
) -> Vec<Access> {
    let mut size = 0;
    let mut parallel = false;
    walk_stmts(body, &mut |s| {
        size += 1;
        parallel |= matches!(s, Stmt::Chunked(_));
    });
    if parallel || size > MAX_OUTER_BODY {
        return vec![];
    }
    accesses(var, start, stop, body, gathers, true)
}

fn accesses(
    var: VarId,
    start: &Expr,
    stop: &Expr,
    body: &[Stmt],
    gathers: &Gathers,
    outer: bool,
) -> Vec<Access> {
    let mut nested = false;
    let mut grown = HashSet::new();
    walk_stmts(body, &mut |s| match s {
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Fill { .. } => nested = true,
        Stmt::Grow { buf, .. } => {
            grown.insert(buf.0);
        }
        _ => {}
    });
    if nested != outer || assigns(body, var) {
        return vec![];
    }
    // A loop over the entries between two positions (`for q = ptr[p]..ptr[p + 1]`).
    let position = |e: &Expr| match e {
        Expr::Var(v) => gathers.position_below(*v),
        _ => None,
    };
    let between = position(start).filter(|b| position(stop) == Some(*b));
    let mut found = HashSet::new();
    let mut note = |buf: BufId, index: &Expr| {
        if grown.contains(&buf.0) {
            return;
        }
        if let Some((base, offset)) = loop_offset(index, var)
            && !base.is_some_and(|w| assigns(body, w))
        {
            let at = match (base, between) {
                (None, Some(below)) if offset >= 0 => At::Between { var, offset, below },
                _ => At::Shifted { var, base, offset },
            };
            found.insert(Access { buf, at });
        } else if let Expr::Var(v) = index
            && let Some((lo, hi)) = gathers.ranges.of_var(*v)
            && lo >= 0
        {
            found.insert(Access {
                buf,
                at: At::Ranged { index: *v, hi },
            });
        } else if let Expr::Var(v) = index
            && let Some(below) = gathers.below(*v)
        {
            found.insert(Access {
                buf,
                at: At::Gathered { index: *v, below },
            });
        } else if let Some((a, b)) = based_gather(index) {
            // Either term may be the gathered one; the other is the row's start.
            let gathered = |g: VarId, base: VarId| {
                (g != var && base != var && !assigns(body, base))
                    .then(|| gathers.below(g))
                    .flatten()
                    .map(|below| At::InRow {
                        base,
                        index: g,
                        below,
                    })
            };
            if let Some(at) = gathered(b, a).or_else(|| gathered(a, b)) {
                found.insert(Access { buf, at });
            }
        }
    };
    walk_accesses(body, &mut note);
    // `d <= v` (`v >= d`) for `v` with a range, `d` kept by the loop.
    walk_exprs(body, &mut |e| {
        if let Some((index, bound)) = under(e)
            && !assigns(body, bound)
            && let Some((lo, hi)) = gathers.ranges.of_var(index)
            && lo >= 0
        {
            found.insert(Access {
                buf: NO_BUF,
                at: At::Under { index, bound, hi },
            });
        }
    });
    if outer {
        // The tests of an inner loop over a fiber's entries are the same for every row: they
        // join the outer loop's, and the inner loop then runs unversioned in its fast copy.
        walk_stmts(body, &mut |s| {
            if let Stmt::For {
                var: v,
                start,
                stop,
                body: b,
            } = s
            {
                let inner = accesses(*v, start, stop, b, gathers, false);
                found.extend(
                    inner.into_iter().filter(|a| {
                        matches!(a.at, At::Between { .. }) && !grown.contains(&a.buf.0)
                    }),
                );
            }
        });
    }
    let mut v: Vec<Access> = found.into_iter().collect();
    v.sort();
    v
}

/// The bounds of position arrays (as the kernel states them, [`Kernel::bounded`]) that some
/// loop's [`At::Between`] accesses rest on: those a caller gains by vouching for. The runtime
/// snapshots and checks a foreign position array only for these (`run::Runner::execute`),
/// so a kernel that reads one row of a large matrix pays no copy of its row pointers.
pub fn between_bounds(k: &Kernel) -> Vec<Expr> {
    let gathers = Gathers::of(k);
    let mut used = std::collections::BTreeSet::new();
    walk_stmts(&k.body, &mut |s| {
        if let Stmt::For {
            var,
            start,
            stop,
            body,
        } = s
        {
            for a in versionable(*var, start, stop, body, &gathers) {
                if let At::Between { below, .. } = a.at {
                    used.insert(below);
                }
            }
        }
    });
    used.into_iter()
        .map(|b| gathers.belows[b].clone())
        .collect()
}

/// Whether `a op b` is `v < len(buf)` or `0 <= v` for the counter `v` of a versioned loop
/// whose test covers it, given the accesses the enclosing versioned loops made unchecked: an
/// unchecked `buf[v + c]` with `c >= 0` (`c <= 0`) has `v < len(buf)` (`0 <= v`) for every
/// value of `v` in the loop. The lowering guards a write to an output's element `y[i]` with
/// such a test, which the compilers do not see through the loop's test to drop.
pub fn known_in_bounds(unchecked: &[Access], op: BinOp, a: &Expr, b: &Expr) -> bool {
    let covered = |v: VarId, buf: Option<BufId>, up: bool| {
        unchecked.iter().any(|x| {
            let (var, offset) = match x.at {
                At::Shifted {
                    var,
                    base: None,
                    offset,
                } => (var, offset),
                // `0 <= s <= v`, and `offset >= 0`.
                At::Between { var, offset, .. } => (var, offset.max(0)),
                _ => return false,
            };
            let side = if up { offset >= 0 } else { offset <= 0 };
            var == v && buf.is_none_or(|b| b == x.buf) && side
        })
    };
    match (op, a, b) {
        (BinOp::Lt, Expr::Var(v), Expr::Len(buf)) => covered(*v, Some(*buf), true),
        (BinOp::Le, Expr::Const(Scalar::I64(0)), Expr::Var(v)) => covered(*v, None, false),
        _ => false,
    }
}

/// `(v, d)` when `e` is `d <= v` or `v >= d`, both variables.
fn under(e: &Expr) -> Option<(VarId, VarId)> {
    match e {
        Expr::Binary(op, a, b) => under_of(*op, a, b),
        _ => None,
    }
}

fn under_of(op: BinOp, a: &Expr, b: &Expr) -> Option<(VarId, VarId)> {
    let (d, v) = match op {
        BinOp::Le => (a, b),
        BinOp::Ge => (b, a),
        _ => return None,
    };
    match (d, v) {
        (Expr::Var(d), Expr::Var(v)) if d != v => Some((*v, *d)),
        _ => None,
    }
}

/// The value of the comparison `a op b` where the ranges of its operands decide it, or an
/// enclosing versioned loop's test did ([`At::Under`] among `unchecked`).
pub fn decided(
    k: &Kernel,
    gathers: &Gathers,
    unchecked: &[Access],
    op: BinOp,
    a: &Expr,
    b: &Expr,
) -> Option<bool> {
    if let Some(x) = gathers.ranges.decide(k, op, a, b) {
        return Some(x);
    }
    let (index, bound) = under_of(op, a, b)?;
    unchecked
        .iter()
        .any(|x| matches!(x.at, At::Under { index: i, bound: d, .. } if i == index && d == bound))
        .then_some(false)
}

/// Whether the statements assign `var` (also as an inner loop's counter).
pub fn assigns(stmts: &[Stmt], var: VarId) -> bool {
    let mut found = false;
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Assign(v, _) | Stmt::For { var: v, .. } => found |= *v == var,
        _ => {}
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Bounded, build as b};

    #[test]
    fn loop_offsets_are_recognised() {
        let (i, w) = (VarId(3), VarId(5));
        let add = |x: Expr, y: Expr| Expr::Binary(BinOp::Add, Box::new(x), Box::new(y));
        let sub = |x: Expr, y: Expr| Expr::Binary(BinOp::Sub, Box::new(x), Box::new(y));
        assert_eq!(loop_offset(&b::var(i), i), Some((None, 0)));
        assert_eq!(loop_offset(&b::var(w), i), None);
        assert_eq!(loop_offset(&sub(b::var(i), b::int(2)), i), Some((None, -2)));
        assert_eq!(loop_offset(&add(b::var(i), b::int(1 << 40)), i), None);
        assert_eq!(
            loop_offset(&add(b::var(w), b::var(i)), i),
            Some((Some(w), 0))
        );
        assert_eq!(
            loop_offset(&add(add(b::var(w), b::var(i)), b::int(-1)), i),
            Some((Some(w), -1))
        );
        // The loop variable twice, a subtracted variable, a second base: not of the form.
        assert_eq!(loop_offset(&add(b::var(i), b::var(i)), i), None);
        assert_eq!(loop_offset(&sub(b::var(i), b::var(w)), i), None);
        assert_eq!(
            loop_offset(&add(add(b::var(w), b::var(VarId(6))), b::var(i)), i),
            None
        );
    }

    #[test]
    fn loops_that_grow_nest_or_move_their_base_are_not_versioned() {
        let (i, w) = (VarId(0), VarId(1));
        let none = Gathers::default();
        let store = b::store(BufId(1), b::add(b::var(w), b::var(i)), b::int(1));
        let (s, e) = (b::int(0), b::int(8));
        let ver = |body: &[Stmt]| versionable(i, &s, &e, body, &none);
        assert_eq!(ver(std::slice::from_ref(&store)).len(), 1);
        let moved = vec![store.clone(), Stmt::Assign(w, b::int(3))];
        assert!(ver(&moved).is_empty());
        let grown = vec![
            Stmt::Grow {
                buf: BufId(1),
                len: b::int(8),
            },
            store.clone(),
        ];
        assert!(ver(&grown).is_empty());
        let counted = vec![store, Stmt::Assign(i, b::int(0))];
        assert!(ver(&counted).is_empty());
    }

    /// An innermost `for` loop: its variable, start, stop and body.
    type Loop = (VarId, Expr, Expr, Vec<Stmt>);

    /// The innermost `for` loops of the statements.
    fn innermost(stmts: &[Stmt], out: &mut Vec<Loop>) {
        walk_stmts(stmts, &mut |s| {
            if let Stmt::For {
                var,
                start,
                stop,
                body,
            } = s
            {
                let mut inner = false;
                walk_stmts(body, &mut |t| inner |= matches!(t, Stmt::For { .. }));
                if !inner {
                    out.push((*var, start.clone(), stop.clone(), body.clone()));
                }
            }
        });
    }

    /// The kernel the JIT runner makes of `program` with the tensors in these formats.
    fn kernel_of(program: &str, formats: &[(&str, &str)]) -> Kernel {
        use crate::levels::Format;
        let p = crate::notation::parse::parse_program(program).unwrap();
        let formats = formats
            .iter()
            .map(|(n, f)| (n.to_string(), Format::parse(f, None).unwrap()))
            .collect();
        crate::run::Runner::jit()
            .compile(&p, &formats)
            .unwrap()
            .ir
            .clone()
    }

    fn gathered_in(program: &str, a: &str) -> Vec<Access> {
        let ir = kernel_of(
            program,
            &[
                ("A", a),
                ("x", "Dense(Element(0.0))"),
                ("y", "Dense(Element(0.0))"),
            ],
        );
        let g = Gathers::of(&ir);
        let mut loops = vec![];
        innermost(&ir.body, &mut loops);
        loops
            .iter()
            .flat_map(|(v, s, e, body)| versionable(*v, s, e, body, &g))
            .filter(|a| matches!(a.at, At::Gathered { .. }))
            .collect()
    }

    /// A masked histogram's bin index `img[y, x] / 16` is in `[0, 15]`: its scatter into
    /// `bins` and the lowering's guard `bins_dim0 <= _v1` are versioned in the pixel loop,
    /// whatever the mask's format.
    #[test]
    fn ranged_indices_and_their_guards_are_versioned() {
        let program = "bins .= 0\nfor y = _, x = _\n  if mask[y, x]\n    bins[div(img[y, x], 16)] += 1\n  end\nend\n";
        for mask in [
            "Dense(SparseRunList(Pattern()))",
            "Dense(Dense(Element(false)))",
            "Dense(SparseList(Pattern()))",
        ] {
            let ir = kernel_of(
                program,
                &[
                    ("img", "Dense(Dense(Element(0x00)))"),
                    ("mask", mask),
                    ("bins", "Dense(Element(0))"),
                ],
            );
            let g = Gathers::of(&ir);
            let mut loops = vec![];
            innermost(&ir.body, &mut loops);
            let found: Vec<At> = loops
                .iter()
                .flat_map(|(v, s, e, body)| versionable(*v, s, e, body, &g))
                .map(|a| a.at)
                .collect();
            assert!(
                found.iter().any(|a| matches!(a, At::Ranged { hi: 15, .. })),
                "{mask}: {found:?}"
            );
            assert!(
                found.iter().any(|a| matches!(a, At::Under { hi: 15, .. })),
                "{mask}: {found:?}"
            );
        }
    }

    #[test]
    fn gathers_through_vouched_coordinates_are_versioned() {
        let spmv = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";
        let spmv_t = "y .= 0\nfor i = _, j = _\n  y[j] += A[i, j] * x[i]\nend\n";
        for a in [
            "Dense(SparseList(Element(0.0)))",
            "Dense(SparseList(Element(0.0), coord=i32))",
        ] {
            assert!(!gathered_in(spmv, a).is_empty(), "x[j] in {a}");
            assert!(!gathered_in(spmv_t, a).is_empty(), "y[j] in {a}");
        }
        // No coordinate arrays, nothing to vouch for: `x[j]` is a counted loop's access.
        assert!(gathered_in(spmv, "Dense(Dense(Element(0.0)))").is_empty());
    }

    /// `Y[t, i]` with `i` from a checked coordinate level is a gather into row `t` of `Y`:
    /// its base `t * width` is kept by the loop over the row's entries, so it is versioned
    /// (`At::InRow`); the stores and loads of `Y` and of `F` alike.
    #[test]
    fn gathers_into_a_matrix_row_are_versioned() {
        let program = "for t = _, j = _, i = _\n  Y[t, i] += A[j, i] * x[t]\n  \
                       F[t, i] |= A[j, i] != 0\nend\n";
        for a in [
            "Dense(SparseList(Element(0.0)))",
            "Dense(SparseList(Element(0.0), coord=i32))",
        ] {
            let ir = kernel_of(
                program,
                &[
                    ("A", a),
                    ("x", "Dense(Element(0.0))"),
                    ("Y", "Dense(Dense(Element(0.0)))"),
                    ("F", "Dense(Dense(Element(false)))"),
                ],
            );
            let g = Gathers::of(&ir);
            let mut loops = vec![];
            innermost(&ir.body, &mut loops);
            let rows: Vec<String> = loops
                .iter()
                .flat_map(|(v, s, e, body)| versionable(*v, s, e, body, &g))
                .filter(|a| matches!(a.at, At::InRow { .. }))
                .map(|a| ir.bufs[a.buf.0 as usize].name.clone())
                .collect();
            assert!(rows.iter().any(|n| n == "Y_val"), "{a}: {rows:?}");
            assert!(rows.iter().any(|n| n == "F_val"), "{a}: {rows:?}");
        }
    }

    fn coordinates(buf: BufId, below: Expr) -> Bounded {
        Bounded {
            buf,
            below,
            what: Vouched::Coordinates,
        }
    }

    #[test]
    fn an_index_assigned_anything_else_is_not_a_gather() {
        let (j, q) = (VarId(0), VarId(1));
        let (coords, x) = (BufId(1), BufId(2));
        let below = b::load(BufId(0), b::int(3));
        let kernel = |extra: Vec<Stmt>, bounded: Vec<Bounded>| {
            let mut body = vec![Stmt::For {
                var: q,
                start: b::int(0),
                stop: b::int(4),
                body: vec![
                    Stmt::Assign(j, b::load(coords, b::var(q))),
                    b::store(x, b::var(j), b::int(1)),
                ],
            }];
            body.extend(extra);
            Kernel {
                name: "k".into(),
                bufs: vec![],
                vars: vec![],
                body,
                errors: vec![],
                bounded,
                not_nan: vec![],
                vectorized: vec![],
            }
        };
        let vouched = vec![coordinates(coords, below.clone())];
        assert_eq!(
            Gathers::of(&kernel(vec![], vouched.clone())).below(j),
            Some(0)
        );
        assert_eq!(Gathers::of(&kernel(vec![], vec![])).below(j), None);
        // Assigned a constant elsewhere, or the coordinates written: no longer bounded.
        let other = vec![Stmt::Assign(j, b::int(7))];
        assert_eq!(Gathers::of(&kernel(other, vouched.clone())).below(j), None);
        let written = vec![b::store(coords, b::int(0), b::int(9))];
        assert_eq!(
            Gathers::of(&kernel(written, vouched.clone())).below(j),
            None
        );
        // Two bounds for one buffer keep neither.
        let twice = vec![coordinates(coords, below), coordinates(coords, b::int(5))];
        assert_eq!(Gathers::of(&kernel(vec![], twice)).below(j), None);
    }

    #[test]
    fn copies_of_gathered_indices_are_gathers_and_nothing_else_is() {
        let (j, s, t, u) = (VarId(0), VarId(2), VarId(3), VarId(4));
        let (coords, below) = (BufId(1), b::load(BufId(0), b::int(3)));
        let kernel = |extra: Vec<Stmt>| Kernel {
            name: "k".into(),
            bufs: vec![],
            vars: vec![],
            body: [
                vec![
                    Stmt::Assign(j, b::load(coords, b::int(0))),
                    Stmt::Assign(s, b::var(j)),
                    Stmt::Assign(t, b::var(s)),
                ],
                extra,
            ]
            .concat(),
            errors: vec![],
            bounded: vec![coordinates(coords, below.clone())],
            not_nan: vec![],
            vectorized: vec![],
        };
        let g = Gathers::of(&kernel(vec![]));
        assert_eq!((g.below(s), g.below(t)), (Some(0), Some(0)));
        // A copy of something that is not a gather, anywhere, spoils the chain after it.
        let g = Gathers::of(&kernel(vec![Stmt::Assign(s, b::var(u))]));
        assert_eq!((g.below(j), g.below(s), g.below(t)), (Some(0), None, None));
        // Copies going round in a cycle with no load behind them prove nothing.
        let g = Gathers::of(&kernel(vec![
            Stmt::Assign(u, b::var(VarId(5))),
            Stmt::Assign(VarId(5), b::var(u)),
        ]));
        assert_eq!((g.below(u), g.below(VarId(5))), (None, None));
    }

    #[test]
    fn counters_of_loops_between_positions_hold_positions() {
        let (q, e, saved, r) = (VarId(0), VarId(1), VarId(2), VarId(3));
        let (ptr, idx) = (BufId(1), BufId(2));
        let kernel = |start: Expr, extra: Vec<Stmt>| Kernel {
            name: "k".into(),
            bufs: vec![],
            vars: vec![],
            body: [
                vec![
                    Stmt::Assign(q, b::load(ptr, b::int(0))),
                    Stmt::Assign(e, b::load(ptr, b::int(1))),
                    // The IEEE re-run of a row: the start saved, the loop run, the start
                    // restored (a cycle through the counter).
                    Stmt::Assign(saved, b::var(q)),
                    Stmt::For {
                        var: q,
                        start,
                        stop: b::var(e),
                        body: vec![Stmt::Assign(r, b::load(idx, b::var(q)))],
                    },
                    Stmt::Assign(q, b::var(saved)),
                ],
                extra,
            ]
            .concat(),
            errors: vec![],
            bounded: vec![
                Bounded {
                    buf: ptr,
                    below: b::load(BufId(0), b::int(3)),
                    what: Vouched::Positions,
                },
                coordinates(idx, b::load(BufId(0), b::int(4))),
            ],
            not_nan: vec![],
            vectorized: vec![],
        };
        let g = Gathers::of(&kernel(b::var(q), vec![]));
        assert_eq!(
            (
                g.position_below(q),
                g.position_below(saved),
                g.position_below(e)
            ),
            (Some(0), Some(0), Some(0))
        );
        // Positions are no coordinates: `x[q]` is not a gather (`q` may be the last one).
        assert_eq!(g.below(q), None);
        assert_eq!(g.below(r), Some(1));
        // The loop reads `idx[q]` between two positions: one test, the same for every row.
        let k = kernel(b::var(q), vec![]);
        let Stmt::For {
            start, stop, body, ..
        } = &k.body[3]
        else {
            panic!("the fourth statement is the loop")
        };
        assert_eq!(
            versionable(q, start, stop, body, &g),
            vec![Access {
                buf: idx,
                at: At::Between {
                    var: q,
                    offset: 0,
                    below: 0
                }
            }]
        );
        // A loop from a constant, or a counter assigned anything else: not positions.
        let g = Gathers::of(&kernel(b::int(0), vec![]));
        assert_eq!(g.position_below(q), None);
        let g = Gathers::of(&kernel(b::var(q), vec![Stmt::Assign(saved, b::int(2))]));
        assert_eq!((g.position_below(q), g.position_below(e)), (None, Some(0)));
    }

    #[test]
    fn spmv_tests_its_rows_and_their_entries_once() {
        let ir = kernel_of(
            "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n",
            &[
                ("A", "Dense(SparseList(Element(0.0), coord=i32))"),
                ("x", "Dense(Element(0.0))"),
                ("y", "Dense(Element(0.0))"),
            ],
        );
        let g = Gathers::of(&ir);
        let buf = |name: &str| BufId(ir.bufs.iter().position(|d| d.name == name).unwrap() as u32);
        // The row loop: the one loop with loops inside.
        let mut rows = vec![];
        walk_stmts(&ir.body, &mut |s| {
            if let Stmt::For {
                var,
                start,
                stop,
                body,
            } = s
                && ir.vars[var.0 as usize].name == "i"
                && body.iter().any(|t| {
                    let mut inner = false;
                    walk_stmts(std::slice::from_ref(t), &mut |u| {
                        inner |= matches!(u, Stmt::For { .. })
                    });
                    inner
                })
            {
                rows.push(outer_versionable(*var, start, stop, body, &g));
            }
        });
        // The row loop, and with row interleaving (`ir::interleave`) also the loops over the
        // rows left after the pairs (vouched and tested pairs) and the original loop it falls
        // back to: each is versioned alike. (The pairs' loops count pairs, not rows: their
        // row accesses stay checked.)
        assert!(!rows.is_empty() && rows.len() <= 3, "row loops: {rows:?}");
        for row in &rows {
            let has =
                |b: &str, f: &dyn Fn(&At) -> bool| row.iter().any(|a| a.buf == buf(b) && f(&a.at));
            // ptr[i] and ptr[i + 1], the output y[i], the gather x[j], and the entries between
            // two row pointers, A_idx[q] and A_val[q].
            assert!(has("A_ptr", &|a| matches!(
                a,
                At::Shifted { offset: 0, .. }
            )));
            assert!(has("A_ptr", &|a| matches!(
                a,
                At::Shifted { offset: 1, .. }
            )));
            assert!(has("y_val", &|a| matches!(
                a,
                At::Shifted { offset: 0, .. }
            )));
            assert!(has("x_val", &|a| matches!(a, At::Gathered { .. })));
            assert!(has("A_idx", &|a| matches!(a, At::Between { .. })));
            assert!(has("A_val", &|a| matches!(a, At::Between { .. })));
        }
    }

    #[test]
    fn a_root_byte_map_workspace_is_indexed_by_the_gathered_coordinate() {
        // Gustavson's SpGEMM: the workspace row `w` is a root level, so its slot is `B`'s
        // coordinate itself and its table and values need no check per product.
        let csr = "Dense(SparseList(Element(0.0), coord=i32))";
        let ir = kernel_of(
            "C .= 0\nfor i = _\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  \
             end\n  for j = _\n    C[i, j] = w[j]\n  end\nend\n",
            &[
                ("A", csr),
                ("B", csr),
                ("C", "Dense(SparseList(Element(0.0)))"),
                ("w", "SparseByteMap(Element(0.0))"),
            ],
        );
        let g = Gathers::of(&ir);
        let mut loops = vec![];
        innermost(&ir.body, &mut loops);
        let w = |name: &str| ir.bufs.iter().position(|d| d.name == name).unwrap() as u32;
        let gathered: HashSet<u32> = loops
            .iter()
            .flat_map(|(v, s, e, body)| versionable(*v, s, e, body, &g))
            .filter(|a| matches!(a.at, At::Gathered { .. }))
            .map(|a| a.buf.0)
            .collect();
        assert!(gathered.contains(&w("w_tbl")), "{gathered:?}");
        assert!(gathered.contains(&w("w_val")), "{gathered:?}");
    }
}
