//! Loop versioning, shared by the native backends: which accesses of an innermost counted
//! loop can have their bounds checks replaced by one range test before the loop.
//!
//! Two kinds of access qualify:
//! - `buf[i + c]` or `buf[w + i + c]` (`i` the loop variable, `w` a variable the loop does not
//!   assign, such as a row's start `y * width`, `c` a small constant) touches, over `i` in
//!   `[s, e)`, exactly the positions `[s + w + c, e + w + c)`: the test is that this range
//!   lies inside the buffer;
//! - `buf[v]` where `v` only ever holds elements of coordinate arrays the caller vouches lie in
//!   `0..below` ([`Kernel::bounded`], [`Gathers`]): a gather such as SpMV's `x[j]`, `j` read
//!   from the matrix's checked column indices. The test is `0 < below <= len(buf)`.
//!
//! Either holds only while the buffer keeps its length during the loop. A backend emits the
//! loop twice: a copy without those checks, taken when the range tests all pass, and the
//! checked copy otherwise, so a corrupt input still fails at the same access with the same
//! writes done.

use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::types::Scalar;
use std::collections::{HashMap, HashSet};

/// The largest constant offset versioning considers (keeps the range tests overflow-free
/// where they are done in 64 bits).
pub const MAX_OFFSET: i64 = 1 << 20;

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
        /// A constant in `-MAX_OFFSET..=MAX_OFFSET`.
        offset: i64,
    },
    /// `buf[index]`, `index` holding only values in `0..below`, `below` being
    /// `Gathers::belows[below]` (tested positive).
    Gathered { index: VarId, below: usize },
}

impl Access {
    /// Whether `buf[index]` is this access.
    pub fn is(&self, buf: BufId, index: &Expr) -> bool {
        self.buf == buf
            && match self.at {
                At::Shifted { var, base, offset } => {
                    loop_offset(index, var) == Some((base, offset))
                }
                At::Gathered { index: v, .. } => matches!(index, Expr::Var(x) if *x == v),
            }
    }
}

/// Where an assignment of a variable takes its value from.
enum Source {
    Load(BufId),
    Copy(VarId),
    Other,
}

/// The variables of a kernel that only ever hold elements of vouched-for coordinate arrays
/// ([`Kernel::bounded`]): every assignment to such a variable, anywhere in the kernel, is a
/// load from an array bounded by the same `below`, which the kernel never writes, or a copy of
/// another such variable with the same bound; it is no loop counter. Its value is then always
/// in `0..below` when `below` is positive (the initial 0 too), whichever load last set it, in
/// bounds or not (an out-of-bounds load fails before the assignment).
#[derive(Default)]
pub struct Gathers {
    vars: HashMap<VarId, usize>,
    /// The distinct bounds, as the kernel states them.
    pub belows: Vec<Expr>,
}

impl Gathers {
    pub fn of(k: &Kernel) -> Gathers {
        if k.bounded.is_empty() {
            return Gathers::default();
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
            Stmt::For { var, .. } => assigned.entry(*var).or_default().push(Source::Other),
            Stmt::Chunked(c) => {
                for v in [c.lo, c.hi] {
                    assigned.entry(v).or_default().push(Source::Other);
                }
                changed.extend(c.private.iter().map(|p| p.buf));
                changed.extend(c.scratch.iter().copied());
            }
            Stmt::Store { buf, .. }
            | Stmt::Grow { buf, .. }
            | Stmt::Fill { buf, .. }
            | Stmt::Sort { buf, .. }
            | Stmt::SortPerm { perm: buf, .. } => {
                changed.insert(*buf);
            }
            _ => {}
        });
        let mut g = Gathers::default();
        let mut bound_of = HashMap::new();
        for (buf, below) in &k.bounded {
            if changed.contains(buf) {
                continue;
            }
            let at = match g.belows.iter().position(|b| b == below) {
                Some(at) => at,
                None => {
                    g.belows.push(below.clone());
                    g.belows.len() - 1
                }
            };
            // A buffer vouched for twice with different bounds keeps neither.
            if *bound_of.entry(*buf).or_insert(at) != at {
                bound_of.insert(*buf, usize::MAX);
            }
        }
        // A copy `v = u` holds what `u` holds. Variables are added until nothing changes, each
        // only once all its sources are known: a copy of a variable not (yet) known to gather
        // keeps `v` out, so a cycle of copies with no load behind it never qualifies.
        loop {
            let before = g.vars.len();
            for (v, froms) in &assigned {
                if g.vars.contains_key(v) {
                    continue;
                }
                let bounds: HashSet<Option<usize>> = froms
                    .iter()
                    .map(|f| match f {
                        Source::Load(b) => bound_of.get(b).copied().filter(|&a| a != usize::MAX),
                        Source::Copy(u) => g.vars.get(u).copied(),
                        Source::Other => None,
                    })
                    .collect();
                if let [Some(at)] = bounds.into_iter().collect::<Vec<_>>()[..] {
                    g.vars.insert(*v, at);
                }
            }
            if g.vars.len() == before {
                return g;
            }
        }
    }

    /// The bound of `v`'s values, if it only ever holds vouched-for coordinates.
    pub fn below(&self, v: VarId) -> Option<usize> {
        self.vars.get(&v).copied()
    }
}

/// The accesses of the body of `for var ...` whose checks can move before the loop: the body
/// has no inner loop (versioning nested loops would multiply the code) and does not assign
/// `var`; the buffer is not grown in the body; the base is not assigned in the body. Empty
/// when the loop cannot be versioned. Sorted, without repeats.
pub fn versionable(var: VarId, body: &[Stmt], gathers: &Gathers) -> Vec<Access> {
    let mut nested = false;
    let mut grown = HashSet::new();
    walk_stmts(body, &mut |s| match s {
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Fill { .. } => nested = true,
        Stmt::Grow { buf, .. } => {
            grown.insert(buf.0);
        }
        _ => {}
    });
    if nested || assigns(body, var) {
        return vec![];
    }
    let mut found = HashSet::new();
    let mut note = |buf: BufId, index: &Expr| {
        if grown.contains(&buf.0) {
            return;
        }
        if let Some((base, offset)) = loop_offset(index, var)
            && !base.is_some_and(|w| assigns(body, w))
        {
            found.insert(Access {
                buf,
                at: At::Shifted { var, base, offset },
            });
        } else if let Expr::Var(v) = index
            && let Some(below) = gathers.below(*v)
        {
            found.insert(Access {
                buf,
                at: At::Gathered { index: *v, below },
            });
        }
    };
    walk_stmts(body, &mut |s| {
        if let Stmt::Store { buf, index, .. } = s {
            note(*buf, index);
        }
    });
    walk_exprs(body, &mut |e| {
        if let Expr::Load { buf, index } = e {
            note(*buf, index);
        }
    });
    let mut v: Vec<Access> = found.into_iter().collect();
    v.sort();
    v
}

/// `index` as `var + w + c`: the loop variable once, at most one other variable `w`, and a
/// small constant `c`, summed in any order (`v - c` too); `None` for any other form.
pub fn loop_offset(index: &Expr, var: VarId) -> Option<(Option<VarId>, i64)> {
    fn terms(e: &Expr, vars: &mut Vec<VarId>, c: &mut i64) -> bool {
        match e {
            Expr::Var(v) => {
                vars.push(*v);
                true
            }
            Expr::Const(Scalar::I64(k)) => {
                *c = c.saturating_add(*k);
                true
            }
            Expr::Binary(BinOp::Add, a, b) => terms(a, vars, c) && terms(b, vars, c),
            Expr::Binary(BinOp::Sub, a, b) => match &**b {
                Expr::Const(Scalar::I64(k)) => {
                    *c = c.saturating_sub(*k);
                    terms(a, vars, c)
                }
                _ => false,
            },
            _ => false,
        }
    }
    let (mut vars, mut c) = (vec![], 0i64);
    if !terms(index, &mut vars, &mut c) || !(-MAX_OFFSET..=MAX_OFFSET).contains(&c) {
        return None;
    }
    let at = vars.iter().position(|v| *v == var)?;
    vars.remove(at);
    match vars[..] {
        [] => Some((None, c)),
        [w] if w != var => Some((Some(w), c)),
        _ => None,
    }
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

/// Every statement, nested ones after the statement that holds them.
pub fn walk_stmts(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk_stmts(then, f);
                walk_stmts(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => walk_stmts(body, f),
            // A range inside a kernel is its serial loop (the C backend's buffers it grows
            // must not be declared constant).
            Stmt::Chunked(c) => walk_stmts(&c.body, f),
            _ => {}
        }
    }
}

/// Every expression (and sub-expression) in the statements.
pub fn walk_exprs(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    walk_stmts(stmts, &mut |s| {
        for e in s.own_exprs() {
            e.visit(f);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

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
        assert_eq!(versionable(i, std::slice::from_ref(&store), &none).len(), 1);
        let moved = vec![store.clone(), Stmt::Assign(w, b::int(3))];
        assert!(versionable(i, &moved, &none).is_empty());
        let grown = vec![
            Stmt::Grow {
                buf: BufId(1),
                len: b::int(8),
            },
            store.clone(),
        ];
        assert!(versionable(i, &grown, &none).is_empty());
        let counted = vec![store, Stmt::Assign(i, b::int(0))];
        assert!(versionable(i, &counted, &none).is_empty());
    }

    /// The innermost `for` loops of the statements, with their variables.
    fn innermost(stmts: &[Stmt], out: &mut Vec<(VarId, Vec<Stmt>)>) {
        walk_stmts(stmts, &mut |s| {
            if let Stmt::For { var, body, .. } = s {
                let mut inner = false;
                walk_stmts(body, &mut |t| inner |= matches!(t, Stmt::For { .. }));
                if !inner {
                    out.push((*var, body.clone()));
                }
            }
        });
    }

    fn gathered_in(program: &str, a: &str) -> Vec<Access> {
        use crate::levels::Format;
        let p = crate::notation::parse::parse_program(program).unwrap();
        let formats = [
            ("A".to_string(), Format::parse(a, Some(2)).unwrap()),
            (
                "x".to_string(),
                Format::parse("Dense(Element(0.0))", Some(1)).unwrap(),
            ),
            (
                "y".to_string(),
                Format::parse("Dense(Element(0.0))", Some(1)).unwrap(),
            ),
        ]
        .into();
        let c = crate::run::Runner::jit().compile(&p, &formats).unwrap();
        let g = Gathers::of(&c.ir);
        let mut loops = vec![];
        innermost(&c.ir.body, &mut loops);
        loops
            .iter()
            .flat_map(|(v, body)| versionable(*v, body, &g))
            .filter(|a| matches!(a.at, At::Gathered { .. }))
            .collect()
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

    #[test]
    fn an_index_assigned_anything_else_is_not_a_gather() {
        let (j, q) = (VarId(0), VarId(1));
        let (coords, x) = (BufId(1), BufId(2));
        let below = b::load(BufId(0), b::int(3));
        let kernel = |extra: Vec<Stmt>, bounded: Vec<(BufId, Expr)>| {
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
            }
        };
        let vouched = vec![(coords, below.clone())];
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
        let twice = vec![(coords, below), (coords, b::int(5))];
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
            bounded: vec![(coords, below.clone())],
            not_nan: vec![],
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
    fn a_root_byte_map_workspace_is_indexed_by_the_gathered_coordinate() {
        // Gustavson's SpGEMM: the workspace row `w` is a root level, so its slot is `B`'s
        // coordinate itself and its table and values need no check per product.
        use crate::levels::Format;
        let p = crate::notation::parse::parse_program(
            "C .= 0\nfor i = _\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  \
             end\n  for j = _\n    C[i, j] = w[j]\n  end\nend\n",
        )
        .unwrap();
        let csr = "Dense(SparseList(Element(0.0), coord=i32))";
        let formats = [
            ("A", csr),
            ("B", csr),
            ("C", "Dense(SparseList(Element(0.0)))"),
            ("w", "SparseByteMap(Element(0.0))"),
        ]
        .map(|(n, f)| (n.to_string(), Format::parse(f, None).unwrap()))
        .into();
        let c = crate::run::Runner::jit().compile(&p, &formats).unwrap();
        let g = Gathers::of(&c.ir);
        let mut loops = vec![];
        innermost(&c.ir.body, &mut loops);
        let w = |name: &str| c.ir.bufs.iter().position(|d| d.name == name).unwrap() as u32;
        let gathered: HashSet<u32> = loops
            .iter()
            .flat_map(|(v, body)| versionable(*v, body, &g))
            .filter(|a| matches!(a.at, At::Gathered { .. }))
            .map(|a| a.buf.0)
            .collect();
        assert!(gathered.contains(&w("w_tbl")), "{gathered:?}");
        assert!(gathered.contains(&w("w_val")), "{gathered:?}");
    }
}
