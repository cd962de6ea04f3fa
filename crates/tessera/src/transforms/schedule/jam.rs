//! `unroll_jam(i, T)`: unroll loop `i` by `T` and jam the copies: the loops its body holds
//! become one loop each, whose body holds the `T` copies of theirs, recursively, so that a
//! row that every iteration of `i` reads or updates inside an inner loop (`dw[f, o] += ...`
//! over `o`) is visited once per `T` iterations, with `T` independent chains in one body.
//!
//! ```text
//! for i = lo:hi            for i.0 = 0:div(n, T) - 1            (n = hi - lo + 1)
//!   A(i)                     A(lo + i.0 * T + 0) ... A(... + T - 1)
//!   for o = _          ->    for o = _
//!     B(i, o)                  B(lo + i.0 * T + 0, o) ... B(... + T - 1, o)
//!   end                      end
//! end                      end
//!                          for i = lo + div(n, T) * T:hi        (the remainder, as it was)
//!                            A(i); for o = _ ... end
//!                          end
//! ```
//!
//! A loop of the body is jammed when the copies can share it: a serial or vectorised loop
//! whose extent reads neither `i` nor a tensor the body writes (every copy runs the same
//! range). Every other statement (a `let`, an `if`, a block, a parallel loop) is copied `T`
//! times in order, at the place it had. Within one copy, instances keep their order; between
//! copies, a statement of a later iteration of `i` may now run before one of an earlier
//! iteration, which the dependence analysis must allow: refused is a dependence from an
//! instance in an earlier iteration of `i` to one in a later iteration that, in the jammed
//! order, runs first (a later iteration of a jammed loop, or a later statement in the same
//! iterations of the jammed loops). Two reductions of one kind commute (FreeTensor's
//! relaxation, as for every command): the per-element order of `dw[f, o] += ...` is unchanged
//! by a jam, since the copies of one statement run in the order of `i`.
//!
//! Tensors the body declares and uses only after the declaration, in its block, and that
//! nothing outside the loop reads after it (the gradient's `ds1 .= 0.0`, the forward's
//! `s1 .= 0.0` in the loop over `f`), are one per iteration of `i`: each copy gets its own
//! (`ds1.0`, `ds1.1`, ...), so the copies' interleaved statements do not share them.

use super::deps::{Acc, Analysis, Dir};
use super::expand::{dead_outside, declarations, fresh_name, rename, uses};
use super::loops::{UNROLL_LIMIT, as_lit, bin, div, lit, name, replace, resolved};
use super::names::{Path, binds, find_loop, get, mentions, walk, within};
use super::reorder::reads_of;
use super::{Located, LoopRef};
use crate::error::Result;
use crate::notation::ast::{BinaryOp, Expr, ExprKind, Extent, LoopMode, Program, Stmt, StmtKind};
use crate::notation::visit;

pub fn unroll_jam(p: &Program, c: &Located, target: &LoopRef, t: i64) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    let StmtKind::Loop { parallel, .. } = &get(&p.body, &path).kind else {
        unreachable!("find_loop finds loops")
    };
    let mode = *parallel;
    if mode == LoopMode::Vector {
        return Err(c.error(format!(
            "loop `{target}` is vectorised; jam the loop around it instead"
        )));
    }
    if t > UNROLL_LIMIT {
        return Err(c.error(format!(
            "`unroll_jam` makes at most {UNROLL_LIMIT} copies, not {t}"
        )));
    }
    let (index, lo, hi, body, span) = resolved(get(&p.body, &path), c)?;
    if binds(&body, &index) {
        return Err(c.error(format!("the body of `{index}` binds `{index}` itself")));
    }
    let outer = format!("{index}.0");
    if super::names::used(&p.body, &outer) {
        return Err(c.error(format!(
            "the derived name `{outer}` is already used in the program"
        )));
    }
    let (_, written) = visit::reads_writes(&body);
    let privates: Vec<String> = declared(&body)
        .into_iter()
        .filter(|x| private(&p.body, &path, x))
        .collect();
    let mut jammed = vec![];
    jammed_loops(&body, &path, &index, &written, &mut jammed);
    check(p, c, &path, &jammed, &privates)?;

    // The copies: `i` as `lo + i.0 * T + k`, each private tensor renamed per copy.
    let mut taken: Vec<String> = vec![];
    let mut names: Vec<Vec<String>> = vec![];
    for x in &privates {
        let per: Vec<String> = (0..t)
            .map(|k| {
                let n = fresh_name(&p.body, &taken, &format!("{x}.{k}"));
                taken.push(n.clone());
                n
            })
            .collect();
        names.push(per);
    }
    let copies: Vec<Vec<Stmt>> = (0..t)
        .map(|k| {
            let at = bin(
                BinaryOp::Add,
                lo.clone(),
                bin(
                    BinaryOp::Add,
                    bin(BinaryOp::Mul, name(&outer, span), lit(t, span)),
                    lit(k, span),
                ),
            );
            let mut b = super::names::subst_stmts(&body, &index, &at);
            for (x, per) in privates.iter().zip(&names) {
                b = rename(&b, x, &per[k as usize], None);
            }
            b
        })
        .collect();
    let count = count(&lo, &hi, span);
    let blocks = div(count.clone(), lit(t, span));
    let main = Stmt::new(
        StmtKind::Loop {
            index: outer,
            extent: Extent::Range(
                lit(0, span),
                bin(BinaryOp::Sub, blocks.clone(), lit(1, span)),
            ),
            body: jam(&copies, &body, &index, &written),
            parallel: mode,
        },
        span,
    );
    let mut out = vec![main];
    if as_lit(&count).is_none_or(|n| n % t != 0) {
        out.push(Stmt::new(
            StmtKind::Loop {
                index,
                extent: Extent::Range(
                    bin(BinaryOp::Add, lo, bin(BinaryOp::Mul, blocks, lit(t, span))),
                    hi,
                ),
                body,
                parallel: mode,
            },
            span,
        ));
    }
    let candidate = replace(p, &path, out);
    // A vectorised loop that now holds several copies must still run in lanes (the copies
    // may touch one element from two lanes).
    let an = Analysis::new(&candidate);
    let mut vector = vec![];
    walk(&candidate.body, &mut |s, at| {
        if within(at, &path)
            && matches!(
                s.kind,
                StmtKind::Loop {
                    parallel: LoopMode::Vector,
                    ..
                }
            )
        {
            vector.push(at.clone());
        }
    });
    for v in vector {
        if let Some(dep) = an.vector_blocker(&v) {
            return Err(c.broken(
                "the jammed copies of a vectorised loop's body conflict between lanes",
                dep,
            ));
        }
    }
    Ok(candidate)
}

/// `hi - lo + 1`, with `X - 1 + 1` (what a `_` extent resolves to) folded to `X`.
fn count(lo: &Expr, hi: &Expr, span: crate::notation::ast::Span) -> Expr {
    if as_lit(lo) == Some(0)
        && let ExprKind::Binary(BinaryOp::Sub, x, one) = &hi.kind
        && as_lit(one) == Some(1)
    {
        return (**x).clone();
    }
    bin(
        BinaryOp::Add,
        bin(BinaryOp::Sub, hi.clone(), lo.clone()),
        lit(1, span),
    )
}

/// Whether the copies of `s` can share one loop: a serial or vectorised loop whose extent
/// is the same for every copy and every iteration of the loop jammed.
fn jammable(s: &Stmt, index: &str, written: &[String]) -> bool {
    let StmtKind::Loop {
        extent, parallel, ..
    } = &s.kind
    else {
        return false;
    };
    if parallel.is_parallel() {
        return false;
    }
    match extent {
        Extent::Auto => true,
        Extent::Range(a, b) => [a, b]
            .iter()
            .all(|e| !mentions(e, index) && reads_of(e).iter().all(|r| !written.contains(r))),
    }
}

/// The paths (in the program) of the loops the jam fuses, for the dependence check.
fn jammed_loops(
    body: &[Stmt],
    at: &[(usize, usize)],
    index: &str,
    written: &[String],
    out: &mut Vec<Path>,
) {
    for (k, s) in body.iter().enumerate() {
        if jammable(s, index, written) {
            let mut p = at.to_vec();
            p.push((0, k));
            out.push(p.clone());
            if let StmtKind::Loop { body, .. } = &s.kind {
                jammed_loops(body, &p, index, written, out);
            }
        }
    }
}

/// The statements of `orig` (the body before the copies were made) with the copies jammed.
fn jam(copies: &[Vec<Stmt>], orig: &[Stmt], index: &str, written: &[String]) -> Vec<Stmt> {
    let mut out = vec![];
    for (k, s) in orig.iter().enumerate() {
        let StmtKind::Loop { body: inner, .. } = &s.kind else {
            out.extend(copies.iter().map(|c| c[k].clone()));
            continue;
        };
        if !jammable(s, index, written) {
            out.extend(copies.iter().map(|c| c[k].clone()));
            continue;
        }
        let StmtKind::Loop {
            index: i,
            extent,
            parallel,
            ..
        } = &copies[0][k].kind
        else {
            unreachable!("a copy of a loop is a loop")
        };
        let bodies: Vec<Vec<Stmt>> = copies
            .iter()
            .map(|c| match &c[k].kind {
                StmtKind::Loop { body, .. } => body.clone(),
                _ => unreachable!("a copy of a loop is a loop"),
            })
            .collect();
        out.push(Stmt::new(
            StmtKind::Loop {
                index: i.clone(),
                extent: extent.clone(),
                body: jam(&bodies, inner, index, written),
                parallel: *parallel,
            },
            copies[0][k].span,
        ));
    }
    out
}

/// The tensors a body declares, in order.
fn declared(body: &[Stmt]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    visit::stmts(body, &mut |s| {
        if let StmtKind::Declare { tensor, .. } = &s.kind
            && !out.contains(tensor)
        {
            out.push(tensor.clone());
        }
    });
    out
}

/// Whether `s` itself (not the statements nested in it) reads, writes or declares `t`.
fn own_use(s: &Stmt, t: &str) -> bool {
    let reads = |e: &Expr| reads_of(e).iter().any(|r| r == t);
    match &s.kind {
        StmtKind::Declare { .. } | StmtKind::Assign { .. } => uses(std::slice::from_ref(s), t),
        StmtKind::Freeze { tensor } | StmtKind::Thaw { tensor } => tensor == t,
        StmtKind::Loop { extent, .. } => match extent {
            Extent::Auto => false,
            Extent::Range(a, b) => reads(a) || reads(b),
        },
        StmtKind::If { cond, .. } => reads(cond),
        StmtKind::Let { value, .. } => reads(value),
        StmtKind::Block(_) => false,
    }
}

/// Whether tensor `t` holds a fresh value in every iteration of the loop at `at`: the body
/// declares it once, every use follows the declaration in its block, and nothing outside the
/// loop reads the value it leaves.
fn private(program: &[Stmt], at: &[(usize, usize)], t: &str) -> bool {
    let StmtKind::Loop { body, .. } = &get(program, at).kind else {
        return false;
    };
    if declarations(body, t) != 1 {
        return false;
    }
    let mut decl: Option<Path> = None;
    let mut ok = true;
    walk(program, &mut |s, p| {
        if p.len() <= at.len() || !within(p, at) {
            return;
        }
        if matches!(&s.kind, StmtKind::Declare { tensor, .. } if tensor == t) {
            decl = Some(p.clone());
        }
        if own_use(s, t) {
            // In program order, a use before the declaration leaves `decl` unset.
            let after = decl.as_ref().is_some_and(|d| {
                let n = d.len();
                p.len() >= n
                    && p[..n - 1] == d[..n - 1]
                    && p[n - 1].0 == d[n - 1].0
                    && p[n - 1].1 >= d[n - 1].1
            });
            ok &= after;
        }
    });
    ok && dead_outside(program, 0, &mut vec![], &at.to_vec(), t)
}

/// The position, in the body of the statement at `parent`, of the step that leads to `x`.
fn step(x: &Acc, parent: &[(usize, usize)]) -> Option<usize> {
    (within(&x.stmt, parent) && x.stmt.len() > parent.len()).then(|| x.stmt[parent.len()].1)
}

/// Refuse the jam when it runs an instance of a later iteration of the loop at `at` before
/// an instance of an earlier one that it depends on (see the module comment).
fn check(
    p: &Program,
    c: &Located,
    at: &[(usize, usize)],
    jammed: &[Path],
    privates: &[String],
) -> Result<()> {
    let an = Analysis::new(p);
    let id = an
        .loops
        .iter()
        .position(|l| l.path == at)
        .expect("the loop is analysed");
    let is_jammed = |l: usize| jammed.contains(&an.loops[l].path);
    let inside = |x: &Acc| Analysis::inside(x, at) && !privates.contains(&x.tensor);
    let bad = |x: &Acc, y: &Acc, common: &[usize], v: &[Dir]| {
        let Some(k) = common.iter().position(|l| *l == id) else {
            return false;
        };
        if !v[..k].iter().all(|d| *d == Dir::Eq) || v[k] != Dir::Lt {
            return false;
        }
        let mut d: &[(usize, usize)] = at;
        for (l, dir) in common[k + 1..].iter().zip(&v[k + 1..]) {
            if !is_jammed(*l) {
                // Both in one statement that is copied whole: the copies run in order.
                return false;
            }
            match dir {
                Dir::Lt => return false,
                Dir::Gt => return true,
                Dir::Eq => d = &an.loops[*l].path,
            }
        }
        matches!((step(x, d), step(y, d)), (Some(a), Some(b)) if a > b)
    };
    match an.find(&inside, &inside, false, &bad) {
        Some(dep) => Err(c.broken(
            "jamming the copies runs a later iteration's instance before an earlier one it depends on",
            dep,
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::schedule;
    use crate::error::Error;
    use crate::notation::parse::parse_program;

    fn p(t: &str) -> crate::notation::ast::Program {
        parse_program(t).unwrap()
    }

    #[test]
    fn jams_inner_loops_renames_locals_and_keeps_a_remainder() {
        let src = "for i = 0:9, f = _\n  s .= 0.0\n  for o = _\n    s[] += y[i, o] * w[f, o]\n    d[f, o] += y[i, o] * x[i, f]\n  end\n  z[i, f] = s[]\nend\n";
        let q = schedule(&p(src), "unroll_jam(i, 4)").unwrap();
        let text = q.to_string();
        assert!(text.contains("for i.0 = 0:1"), "{text}");
        assert!(text.contains("s.0 .= 0.0"), "{text}");
        assert!(
            text.contains("s.3[] += y[i.0 * 4 + 3, o] * w[f, o]"),
            "{text}"
        );
        // One loop over `o` per iteration of `f` in the jammed part, its copies' updates of
        // one row next to each other in the order of `i`.
        let jammed = text.split("for i = 8:9").next().unwrap();
        assert_eq!(jammed.matches("for o").count(), 1, "{text}");
        let a = jammed.find("d[f, o] += y[i.0 * 4, o]").unwrap();
        let b = jammed.find("d[f, o] += y[i.0 * 4 + 1, o]").unwrap();
        assert!(a < b, "{text}");
        assert!(text.contains("for i = 8:9"), "{text}");
        assert_eq!(parse_program(&text).unwrap(), q);
        // A multiple of the factor leaves no remainder.
        let q = schedule(&p(&src.replace("0:9", "0:7")), "unroll_jam(i, 4)").unwrap();
        assert!(!q.to_string().contains("for i ="), "{q}");
    }

    #[test]
    fn a_dependence_the_jam_reverses_is_refused() {
        // Iteration i + 1 reads in its loop over `o` what iteration i wrote after its own.
        let src = "for i = 1:9\n  for o = 0:3\n    a[i, o] = b[i - 1, o]\n  end\n  for o = 0:3\n    b[i, o] = a[i, o] * 2.0\n  end\nend\n";
        let e = schedule(&p(src), "unroll_jam(i, 2)").unwrap_err();
        match &e {
            Error::Schedule { dependence, .. } => assert!(dependence.is_some(), "{e}"),
            _ => panic!("{e}"),
        }
        // A local that the loop's last value escapes through is not private: refused.
        let src =
            "for i = 0:9\n  s .= 0.0\n  for o = 0:3\n    s[] += x[i, o]\n  end\nend\ny[] = s[]\n";
        assert!(schedule(&p(src), "unroll_jam(i, 2)").is_err());
        // An order the jam keeps: every instance of iteration i before iteration i + 1's
        // in each jammed loop.
        let src = "for i = 1:9\n  for o = 0:3\n    a[i, o] = a[i - 1, o] + 1.0\n  end\nend\n";
        assert!(schedule(&p(src), "unroll_jam(i, 2)").is_ok());
        // A later iteration of `o` in an earlier `i` feeding an earlier `o` of a later `i`.
        let src = "for i = 1:9\n  for o = 0:3\n    a[i, o] = a[i - 1, o + 1] + 1.0\n  end\nend\n";
        assert!(schedule(&p(src), "unroll_jam(i, 2)").is_err());
    }
}
