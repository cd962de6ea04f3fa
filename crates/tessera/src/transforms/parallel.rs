//! The race check of parallel loops (`for i = parallel(_)`), always on: it decides, for each
//! parallel loop, which writes need nothing, which outputs each thread gets a private copy of,
//! and refuses the rest with an error naming the access and the loop.
//!
//! For a write `T[idx...] op= rhs` under a parallel loop over `i`:
//! - `T` must be stored densely (every level `Dense`, or a 0-d scalar): a sparse level's
//!   appends (SparseList positions, COO coordinates, hash inserts) move shared counters, so
//!   two threads writing different fibers would still race on them (Finch.jl issue #672: a
//!   `Separate` output updated with `+=` raced silently);
//! - if the plain index `i` addresses one of `T`'s dimensions, distinct iterations write
//!   distinct locations: the write needs nothing;
//! - otherwise, with a reducer that is commutative and associative and has an identity
//!   (`+= *= min max & |`, user reducers that declare all three), `T` is privatised: each chunk
//!   of iterations reduces into its own copy starting at the identity, and the copies are
//!   folded into `T` in chunk order after the loop (float sums then equal the serial result
//!   within rounding; integer, `min`, `max`, `&` and `|` results are exact);
//! - anything else (an overwrite `=`, `-=`, `choose`, a reducer that declares no such
//!   properties) is a data race and an [`Error::Race`].
//!
//! A tensor declared inside a parallel loop is an iteration's own workspace (a row's
//! accumulator `s .= 0`, an image row `tmp .= false`) when the declaration is a statement of the
//! loop's body itself (not under an `if` or an inner loop, which might skip it) and nothing
//! before it in the body touches the tensor: every iteration then starts it afresh, so no
//! value passes between iterations. Each chunk gets its own copy, and after the loop the
//! tensor holds what the last iteration left, as in the serial loop. Its writes need no other
//! check. Any other declaration inside a parallel loop is refused: the threads would share its
//! storage, or an iteration would read what the one before left.

use crate::error::{Error, Result};
use crate::notation::ast::{AssignOp, ExprKind, Program, Reducer, Stmt, StmtKind};
use crate::span::Span;

/// What one parallel loop needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The loop statement's place (the lowering finds the loop by it).
    pub span: Span,
    pub index: String,
    /// The outputs each chunk reduces into a private copy of, with their reducer.
    pub private: Vec<(String, Reducer)>,
    /// The tensors each iteration declares afresh (see the module documentation): each
    /// chunk works on its own copy, and the last chunk's is kept.
    pub scratch: Vec<String>,
}

/// Check every parallel loop of `program`. `dense(T)` says whether tensor `T` is stored
/// densely (all levels `Dense`, or 0-d); reducers are resolved by name against the program's
/// definitions.
pub fn check_parallel(program: &Program, dense: &dyn Fn(&str) -> bool) -> Result<Vec<Plan>> {
    let mut c = Checker {
        program,
        dense,
        open: vec![],
        plans: vec![],
    };
    c.stmts(&program.body)?;
    Ok(c.plans)
}

struct Checker<'a> {
    program: &'a Program,
    dense: &'a dyn Fn(&str) -> bool,
    /// The enclosing parallel loops, outermost first, as indices into `plans`.
    open: Vec<usize>,
    plans: Vec<Plan>,
}

impl Checker<'_> {
    fn stmts(&mut self, body: &[Stmt]) -> Result<()> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Loop {
                index,
                body,
                parallel,
                ..
            } => {
                if *parallel {
                    self.plans.push(Plan {
                        span: s.span,
                        index: index.clone(),
                        private: vec![],
                        scratch: scratch(body),
                    });
                    self.open.push(self.plans.len() - 1);
                    self.stmts(body)?;
                    self.open.pop();
                    Ok(())
                } else {
                    self.stmts(body)
                }
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                self.stmts(then)?;
                self.stmts(otherwise)
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => self.stmts(body),
            StmtKind::Declare { tensor, .. } => {
                match self.open.iter().find(|&&p| !self.is_scratch(p, tensor)) {
                    Some(&p) => Err(Error::Race {
                        span: s.span,
                        msg: format!(
                            "`{tensor}` is declared inside the parallel loop over `{}` ({}), but \
                             not as a statement of that loop's own body before every use of \
                             `{tensor}` there: the threads would share its storage, or an \
                             iteration would read what the one before left; declare it at the \
                             top of the loop's body, or before the loop",
                            self.plans[p].index,
                            place(self.plans[p].span)
                        ),
                    }),
                    None => Ok(()),
                }
            }
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => Ok(()),
            StmtKind::Assign { lhs, op, .. } => {
                for k in 0..self.open.len() {
                    let p = self.open[k];
                    if !self.is_scratch(p, &lhs.tensor) {
                        self.write(p, &lhs.tensor, lhs, op)?;
                    }
                }
                Ok(())
            }
        }
    }

    fn is_scratch(&self, p: usize, tensor: &str) -> bool {
        self.plans[p].scratch.iter().any(|t| t == tensor)
    }

    fn write(
        &mut self,
        p: usize,
        tensor: &str,
        lhs: &crate::notation::ast::Access,
        op: &AssignOp,
    ) -> Result<()> {
        let (index, at) = (self.plans[p].index.clone(), place(self.plans[p].span));
        if !(self.dense)(tensor) {
            return Err(Error::Race {
                span: lhs.span,
                msg: format!(
                    "`{lhs}` is written under the parallel loop over `{index}` ({at}), but `{tensor}` \
                     has a sparse level: its appends move shared positions, so threads writing \
                     different fibers would still race; store `{tensor}` with Dense levels, or \
                     make the loop serial"
                ),
            });
        }
        let injective = lhs.indices.iter().any(|ix| {
            !ix.permissive
                && ix.window.is_none()
                && matches!(&ix.expr.kind, ExprKind::Name(n) if *n == index)
        });
        let reducer = match op {
            AssignOp::Reduce(Reducer::Named(n)) => self
                .program
                .reducers
                .iter()
                .find(|d| d.name == *n)
                .map(|d| Reducer::User(std::sync::Arc::new(d.clone()))),
            AssignOp::Reduce(r) => Some(r.clone()),
            AssignOp::Overwrite => None,
        };
        let plan = &mut self.plans[p];
        if let Some(k) = plan.private.iter().position(|(t, _)| t == tensor) {
            // Once privatised, every write of the tensor in the loop goes to the private copy
            // and must fold with the same reducer.
            return match reducer {
                Some(r) if r == plan.private[k].1 => Ok(()),
                _ => Err(Error::Race {
                    span: lhs.span,
                    msg: format!(
                        "`{tensor}` is reduced with `{}` elsewhere in the parallel loop over \
                         `{index}` ({at}), which gives each thread its own copy; this write \
                         (`{op}`) cannot be folded with it",
                        op_text(&plan.private[k].1)
                    ),
                }),
            };
        }
        if injective {
            return Ok(());
        }
        match reducer {
            Some(r) if privatisable(&r) => {
                plan.private.push((tensor.to_string(), r));
                Ok(())
            }
            Some(r) => Err(Error::Race {
                span: lhs.span,
                msg: format!(
                    "`{lhs} {op}` reaches one location from several iterations of the parallel \
                     loop over `{index}` ({at}), and `{}` is not a commutative and associative \
                     reducer with an identity, so the threads' updates cannot be combined; index \
                     `{tensor}` by the plain `{index}`, or make the loop serial",
                    op_text(&r)
                ),
            }),
            None => Err(Error::Race {
                span: lhs.span,
                msg: format!(
                    "`{lhs} =` overwrites a location several iterations of the parallel loop over \
                     `{index}` ({at}) reach, so the result would depend on the threads' timing; \
                     index `{tensor}` by the plain `{index}`, reduce into it (`+=`, `min`, ...), \
                     or make the loop serial"
                ),
            }),
        }
    }
}

/// The tensors a parallel loop's body declares as statements of its own, before any of its
/// statements touches them (see the module documentation).
fn scratch(body: &[Stmt]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for (k, s) in body.iter().enumerate() {
        if let StmtKind::Declare { tensor, .. } = &s.kind
            && !out.contains(tensor)
        {
            let (reads, writes) = crate::notation::visit::reads_writes(&body[..k]);
            if !reads.contains(tensor) && !writes.contains(tensor) {
                out.push(tensor.clone());
            }
        }
    }
    out
}

/// Whether private copies of an output reduced with `r` can be folded together: `r` is
/// commutative and associative and has an identity to start each copy from.
fn privatisable(r: &Reducer) -> bool {
    match r {
        Reducer::Add | Reducer::Mul | Reducer::Min | Reducer::Max | Reducer::And | Reducer::Or => {
            true
        }
        Reducer::User(d) => d.commutative && d.associative && d.identity.is_some(),
        Reducer::Sub | Reducer::Choose(_) | Reducer::Named(_) => false,
    }
}

fn op_text(r: &Reducer) -> String {
    AssignOp::Reduce(r.clone()).to_string()
}

fn place(span: Span) -> String {
    if span.is_known() {
        format!("at {span}")
    } else {
        "built without a place".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn check(src: &str, sparse: &[&str]) -> Result<Vec<Plan>> {
        let p = parse_program(src).unwrap();
        check_parallel(&p, &|t| !sparse.contains(&t))
    }

    #[test]
    fn injective_writes_need_nothing() {
        let plans = check(
            "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend",
            &["A"],
        )
        .unwrap();
        assert_eq!(plans.len(), 1);
        assert!(plans[0].private.is_empty());
        let plans = check("for i = parallel(_)\n  y[i] = x[i]\nend", &[]).unwrap();
        assert!(plans[0].private.is_empty());
    }

    #[test]
    fn commutative_reductions_are_privatised() {
        let plans = check(
            "y .= 0\nfor i = parallel(_), j = _\n  y[j] += A[i, j] * x[i]\nend",
            &["A"],
        )
        .unwrap();
        assert_eq!(plans[0].private, vec![("y".to_string(), Reducer::Add)]);
        let plans = check("for i = parallel(_)\n  s[] <<max>>= x[i]\nend", &[]).unwrap();
        assert_eq!(plans[0].private, vec![("s".to_string(), Reducer::Max)]);
    }

    #[test]
    fn races_are_refused_with_places() {
        let e = check("for i = parallel(_)\n  s[] = x[i]\nend", &[]).unwrap_err();
        assert!(
            matches!(e, Error::Race { span, .. } if (span.line, span.col) == (2, 3)),
            "{e}"
        );
        assert!(e.to_string().contains("at 1:1"), "{e}");
        let e = check("for i = parallel(_)\n  s[] -= x[i]\nend", &[]).unwrap_err();
        assert!(matches!(e, Error::Race { .. }), "{e}");
        // A sparse output, even indexed by `i` (Finch.jl #672).
        let e = check(
            "for i = parallel(_), j = _\n  B[i, j] += A[i, j]\nend",
            &["A", "B"],
        )
        .unwrap_err();
        assert!(e.to_string().contains("sparse level"), "{e}");
        // A workspace each iteration declares first is its own; one it reads before declaring,
        // declares under an `if` or in an inner loop, carries values between iterations.
        let plans = check(
            "for i = parallel(_)\n  w .= 0\n  w[] += x[i]\n  y[i] = w[]\nend",
            &[],
        )
        .unwrap();
        assert_eq!(plans[0].scratch, vec!["w".to_string()]);
        assert!(plans[0].private.is_empty());
        for p in [
            "for i = parallel(_)\n  y[i] = w[]\n  w .= 0\n  w[] += x[i]\nend",
            "for i = parallel(_)\n  if x[i] > 0\n    w .= 0\n  end\n  w[] += x[i]\n  y[i] = w[]\nend",
            "for i = parallel(_)\n  for j = _\n    w .= 0\n  end\n  w[] += x[i]\nend",
        ] {
            let e = check(p, &[]).unwrap_err();
            assert!(e.to_string().contains("declared inside"), "{p}: {e}");
        }
        // A privatised output written another way too.
        let e = check(
            "for i = parallel(_)\n  s[] += x[i]\n  s[] *= x[i]\nend",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot be folded"), "{e}");
    }

    #[test]
    fn user_reducers_need_declared_properties() {
        let ok = "reducer plus(a, b) = a + b identity 0 commutative associative\n\
                  for i = parallel(_)\n  s[] <<plus>>= x[i]\nend";
        let plans = check(ok, &[]).unwrap();
        assert_eq!(plans[0].private.len(), 1);
        let bad = "reducer first(a, b) = a\nfor i = parallel(_)\n  s[] <<first>>= x[i]\nend";
        let e = check(bad, &[]).unwrap_err();
        assert!(matches!(e, Error::Race { .. }), "{e}");
    }
}
