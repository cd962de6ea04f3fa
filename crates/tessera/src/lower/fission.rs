//! Loop fission for kernels whose cases multiply: `for i, j: S1; S2; S3` becomes
//! `for i, j: S1; for i, j: S2; for i, j: S3` where that changes no result.
//!
//! Each statement of a loop body splits the loops by its own operands (phases of permissive
//! and shifted reads, the coiteration cases of its sparse fibers), and statements sharing a
//! body multiply those splits: three statements of ~300 IR statements each became ~20,000
//! together. Apart, they cost their sum. The lowering asks for fission only when a kernel is
//! large (`run::Runner::lower`), and keeps the fissioned kernel only when it is smaller, so
//! ordinary kernels are exactly as before.
//!
//! Statements share a loop when one reads a tensor the other writes (the loops would see values
//! of the wrong iteration), or both write a tensor some level of which takes writes only in
//! order (a second pass over a SparseList fiber would append out of order), or both write a
//! tensor at elements that more than one iteration of the nest can reach: `y[i] = a` and
//! `y[i] = b` in `for i, k` interleave per element (`a` of k = 0, `b` of k = 0, `a` of k = 1,
//! ...), and apart the last `a` would come before the first `b`. Only when every write of the
//! tensor in both statements is `T[...]` with the same plain loop indices, all of the nest's,
//! does each element see just one iteration, so its writes keep their order. The groups run in
//! the order of their first statements; statements of different groups may pass each other
//! only when they touch disjoint outputs, so per element every tensor sees its writes in the
//! program's order. Each new nest must still find its extents: every group accesses every `_`
//! index plainly (the shape check runs on the source program, so dimensions stay checked
//! equal). Bodies that declare, freeze or thaw are left alone.

use crate::levels::Format;
use crate::levels::registry::Writes;
use crate::notation::ast::{AccessIndex, Expr, ExprKind, Extent, Program, Stmt, StmtKind};
use crate::notation::visit;
use crate::span::Span;
use std::collections::{BTreeMap, HashSet};

/// `program` with its top-level loop nests split into one nest per independent group of
/// statements, or `None` when no nest can be split.
pub fn distribute(program: &Program, formats: &BTreeMap<String, Format>) -> Option<Program> {
    let mut changed = false;
    let mut body = vec![];
    for s in &program.body {
        match split_nest(s, formats) {
            Some(nests) => {
                changed = true;
                body.extend(nests);
            }
            None => body.push(s.clone()),
        }
    }
    changed.then(|| Program {
        body,
        ..program.clone()
    })
}

/// A loop of a nest: its index, extent and place.
struct Header<'a> {
    index: &'a str,
    extent: &'a Extent,
    span: Span,
    parallel: crate::notation::ast::LoopMode,
}

/// The loops of a perfect nest (`for i: for j: body`), outermost first, and its body.
fn nest(s: &Stmt) -> (Vec<Header<'_>>, &[Stmt]) {
    let mut loops = vec![];
    let mut cur = s;
    while let StmtKind::Loop {
        index,
        extent,
        body,
        parallel,
    } = &cur.kind
    {
        loops.push(Header {
            index,
            extent,
            span: cur.span,
            parallel: *parallel,
        });
        match body.as_slice() {
            [
                inner @ Stmt {
                    kind: StmtKind::Loop { .. },
                    ..
                },
            ] => cur = inner,
            _ => return (loops, body),
        }
    }
    (loops, &[])
}

fn split_nest(s: &Stmt, formats: &BTreeMap<String, Format>) -> Option<Vec<Stmt>> {
    let (loops, body) = nest(s);
    if loops.is_empty() || body.len() < 2 || body.iter().any(has_lifecycle) {
        return None;
    }
    let rw: Vec<(HashSet<String>, HashSet<String>)> = body
        .iter()
        .map(|st| {
            let (r, w) = visit::reads_writes(std::slice::from_ref(st));
            (r.into_iter().collect(), w.into_iter().collect())
        })
        .collect();
    // What the loop headers read must not change inside them.
    let header_reads = header_reads(&loops);
    if rw.iter().any(|(_, w)| !w.is_disjoint(&header_reads)) {
        return None;
    }
    let random = |t: &String| {
        formats
            .get(t)
            .is_some_and(|f| f.levels.iter().all(|l| l.caps().writes == Writes::Random))
    };
    let auto: Vec<&str> = loops
        .iter()
        .filter(|l| matches!(l.extent, Extent::Auto))
        .map(|l| l.index)
        .collect();
    let n = body.len();
    let indices: Vec<&str> = loops.iter().map(|l| l.index).collect();
    // Each write of `t` in statement `s` reaches only elements of one iteration of the nest.
    let private = |s: &Stmt, t: &str| private_writes(s, t, &indices);
    // Statements that must share a loop: one reads what the other writes, or both write a
    // tensor that takes writes only in order, or elements several iterations reach.
    let mut group: Vec<usize> = (0..n).collect();
    for a in 0..n {
        for b in a + 1..n {
            let ((ra, wa), (rb, wb)) = (&rw[a], &rw[b]);
            let shared = |t: &String| {
                !random(t) || {
                    let (pa, pb) = (private(&body[a], t), private(&body[b], t));
                    pa.is_none() || pa != pb
                }
            };
            if !wa.is_disjoint(rb) || !wb.is_disjoint(ra) || wa.intersection(wb).any(shared) {
                join(&mut group, a, b);
            }
        }
    }
    // Groups run in the order of their first statements, each keeping its statements' order.
    // Two statements writing one tensor must stay in order (per element, the later write
    // wins or reduces last), and each group must find its extents; else join more.
    loop {
        let first = |g: usize, group: &[usize]| (0..n).find(|&k| find(group, k) == g);
        let mut joined = false;
        'pairs: for a in 0..n {
            for b in a + 1..n {
                let (ga, gb) = (find(&group, a), find(&group, b));
                if ga != gb
                    && !rw[a].1.is_disjoint(&rw[b].1)
                    && first(ga, &group) > first(gb, &group)
                {
                    join(&mut group, a, b);
                    joined = true;
                    break 'pairs;
                }
            }
        }
        if !joined {
            for k in 0..n {
                let g = find(&group, k);
                let members: Vec<Stmt> = (0..n)
                    .filter(|&m| find(&group, m) == g)
                    .map(|m| body[m].clone())
                    .collect();
                if !finds_extents(&members, &auto) {
                    // Join the statement before or after it (any other group will do).
                    let other = (0..n).find(|&m| find(&group, m) != g);
                    if let Some(m) = other {
                        join(&mut group, k, m);
                        joined = true;
                        break;
                    }
                }
            }
        }
        if !joined {
            break;
        }
    }
    let mut roots: Vec<usize> = vec![];
    for k in 0..n {
        let g = find(&group, k);
        if !roots.contains(&g) {
            roots.push(g);
        }
    }
    if roots.len() < 2 {
        return None;
    }
    Some(
        roots
            .into_iter()
            .map(|g| {
                let members = (0..n)
                    .filter(|&m| find(&group, m) == g)
                    .map(|m| body[m].clone())
                    .collect();
                rebuild(&loops, members)
            })
            .collect(),
    )
}

/// Union-find over statement positions: the representative of `k`'s group.
fn find(group: &[usize], mut k: usize) -> usize {
    while group[k] != k {
        k = group[k];
    }
    k
}

fn join(group: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(group, a), find(group, b));
    // The smaller position represents the group, so roots follow first statements.
    group[ra.max(rb)] = ra.min(rb);
}

/// The plain loop indices every write of `t` in `s` uses, when they are all the same and name
/// every loop of the nest (so an element is written in one iteration only); `None` otherwise.
fn private_writes(s: &Stmt, t: &str, nest: &[&str]) -> Option<Vec<String>> {
    let mut tuple: Option<Option<Vec<String>>> = None;
    visit::writes(std::slice::from_ref(s), &mut |a| {
        if a.tensor != t {
            return;
        }
        let plain: Option<Vec<String>> = a
            .indices
            .iter()
            .map(|ix| match &ix.expr.kind {
                ExprKind::Name(n) if !ix.permissive && ix.window.is_none() => Some(n.clone()),
                _ => None,
            })
            .collect();
        let plain =
            plain.filter(|p| a.swizzle.is_none() && nest.iter().all(|i| p.iter().any(|n| n == i)));
        tuple = Some(match tuple.take() {
            None => plain,
            Some(prev) => prev.filter(|p| Some(p) == plain.as_ref()),
        });
    });
    tuple.flatten()
}

/// Declarations, freezes and thaws order whole passes over a tensor: leave such bodies alone.
fn has_lifecycle(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::Declare { .. } | StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => true,
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            body.iter().any(has_lifecycle)
        }
        StmtKind::If {
            then, otherwise, ..
        } => then.iter().chain(otherwise).any(has_lifecycle),
        StmtKind::Assign { .. } => false,
    }
}

/// Tensors and names read by the extents of the nest's loops.
fn header_reads(loops: &[Header]) -> HashSet<String> {
    let mut out = HashSet::new();
    for l in loops {
        if let Extent::Range(lo, hi) = l.extent {
            for e in [lo, hi] {
                visit::expr(e, &mut |x: &Expr| match &x.kind {
                    ExprKind::Access(a) => {
                        out.insert(a.tensor.clone());
                    }
                    ExprKind::Name(n) => {
                        out.insert(n.clone());
                    }
                    ExprKind::Call(_, args) => {
                        // `size(A, d)` names its tensor as a plain name.
                        for a in args {
                            if let ExprKind::Name(n) = &a.kind {
                                out.insert(n.clone());
                            }
                        }
                    }
                    _ => {}
                });
            }
        }
    }
    out
}

/// Whether `stmts` access every index of `auto` plainly (`A[i]`), so that a nest of their own
/// infers the same extents the shared nest did.
fn finds_extents(stmts: &[Stmt], auto: &[&str]) -> bool {
    auto.iter().all(|i| {
        let mut found = false;
        visit::accesses(stmts, &mut |a| {
            found |= a.indices.iter().any(|ix: &AccessIndex| {
                !ix.permissive
                    && ix.window.is_none()
                    && matches!(&ix.expr.kind, ExprKind::Name(n) if n == i)
            });
        });
        found
    })
}

/// The nest `loops` around `body`.
fn rebuild(loops: &[Header], body: Vec<Stmt>) -> Stmt {
    let mut inner = body;
    for l in loops.iter().rev() {
        inner = vec![Stmt {
            kind: StmtKind::Loop {
                index: l.index.to_string(),
                extent: l.extent.clone(),
                body: inner,
                parallel: l.parallel,
            },
            span: l.span,
        }];
    }
    inner.remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    const BODY: &str = "\
C .= 0
D .= 0
for i = _, j = _
  C[i, j] += A[i, j] * B[i, j]
  D[i, j] += A[i, j] + B[i, j]
  C[i, j] <<max>>= A[~(i - 1), j]
  D[i, j] += B[i, ~(j + 1)]
end
";

    fn formats(out: &str) -> BTreeMap<String, Format> {
        let csr = Format::parse("Dense(SparseList(Element(0.0)))", Some(2)).unwrap();
        let out = Format::parse(out, Some(2)).unwrap();
        [
            ("A".to_string(), csr.clone()),
            ("B".to_string(), csr),
            ("C".to_string(), out.clone()),
            ("D".to_string(), out),
        ]
        .into()
    }

    fn split(text: &str, out: &str) -> Option<String> {
        let p = parse_program(text).unwrap();
        distribute(&p, &formats(out)).map(|p| p.to_string())
    }

    #[test]
    fn outputs_taking_any_order_split_per_statement_in_order() {
        let got = split(BODY, "Dense(Dense(Element(0.0)))").unwrap();
        let loops: Vec<&str> = got.lines().filter(|l| l.starts_with("for")).collect();
        assert_eq!(loops.len(), 4, "{got}");
        // Per element, C sees `+=` before `max=`, as written.
        let (plus, max) = (
            got.find("C[i, j] +=").unwrap(),
            got.find("<<max>>").unwrap(),
        );
        assert!(plus < max, "{got}");
    }

    #[test]
    fn outputs_taking_writes_in_order_keep_their_statements_together() {
        let got = split(BODY, "Dense(SparseList(Element(0.0)))").unwrap();
        let nests: Vec<&str> = got.split("for i").skip(1).collect();
        assert_eq!(nests.len(), 2, "{got}");
        assert!(
            nests[0].contains("C[i, j] +=") && nests[0].contains("<<max>>"),
            "{got}"
        );
        assert!(!nests[0].contains("D["), "{got}");
    }

    #[test]
    fn writes_reaching_one_element_from_several_iterations_keep_their_statements_together() {
        // Per element `y[i]`: `a` of k = 0, `b` of k = 0, `a` of k = 1; apart, `b` would be last.
        let text = "for i = _, k = _\n  D[i, i] = A[i, k]\n  D[i, i] = B[i, k]\n  C[i, k] = A[i, k]\nend\n";
        let got = split(text, "Dense(Dense(Element(0.0)))").unwrap();
        let nests: Vec<&str> = got.split("for i").skip(1).collect();
        assert_eq!(nests.len(), 2, "{got}");
        assert!(
            nests[0].contains("D[i, i] = A") && nests[0].contains("D[i, i] = B"),
            "{got}"
        );
        // Transposed writes reach an element from two different iterations too.
        let text = "for i = _, k = _\n  C[i, k] = A[i, k]\n  C[k, i] = B[i, k]\nend\n";
        assert_eq!(split(text, "Dense(Dense(Element(0.0)))"), None);
    }

    #[test]
    fn a_statement_without_the_indices_joins_another() {
        // `s[] += 1` alone could not infer the extents of `i` and `j`.
        let text =
            "for i = _, j = _\n  s[] += 1\n  C[i, j] += A[i, j]\n  D[i, j] += B[i, j]\nend\n";
        let got = split(text, "Dense(Dense(Element(0.0)))").unwrap();
        let nests: Vec<&str> = got.split("for i").skip(1).collect();
        assert_eq!(nests.len(), 2, "{got}");
        assert!(
            nests[0].contains("s[] += 1") && nests[0].contains("C[i, j]"),
            "{got}"
        );
    }

    #[test]
    fn bodies_that_are_one_statement_or_declare_are_left_alone() {
        let one = "for i = _, j = _\n  C[i, j] += A[i, j] * B[i, j] + B[i, ~(j + 1)]\nend\n";
        assert_eq!(split(one, "Dense(Dense(Element(0.0)))"), None);
        let declares = "for i = _\n  C .= 0\n  for j = _\n    C[i, j] += A[i, j]\n  end\n  D[i, 0] += 1\nend\n";
        assert_eq!(split(declares, "Dense(Dense(Element(0.0)))"), None);
    }
}
