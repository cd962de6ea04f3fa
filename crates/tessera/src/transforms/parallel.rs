//! The race check of parallel loops (`for i = parallel(_)`), always on: it decides, for each
//! parallel loop, which writes need nothing, which outputs each thread gets a private copy of,
//! and refuses the rest with an error naming the access and the loop.
//!
//! For a write `T[idx...] op= rhs` under a parallel loop over `i`:
//! - a sparse `T` is accepted only row by row: stored as zero or more `Dense` levels, then a
//!   level that appends its fibers in order (`SparseList`, `SparseByteMap`;
//!   `Level::appends_rows`), then the leaf, written with the plain `i` as its first index,
//!   under no other parallel loop. Each iteration then appends only to its own row, and each
//!   chunk of rows appends into fragments of its own that are concatenated in chunk order
//!   after the loop ([`Plan::rows`]; any operator, since no other iteration reaches the row).
//!   With no `Dense` level (a 1-D vector, a BFS frontier `Fnext[i] |= true`) the "row" is the
//!   entry at `i`: each chunk's indices are a contiguous increasing range, so its fragment is a
//!   sorted run of coordinates, and the runs in chunk order are the serial list. Any other
//!   sparse output (a sparse level above the `Dense` one, COO, a row other than `i`'s, a
//!   parallel loop inside another) is an [`Error::Race`]: its appends move positions the
//!   threads share (Finch.jl issue #672: a `Separate` output updated with `+=` raced
//!   silently);
//! - if the plain index `i` addresses one of `T`'s dimensions, distinct iterations write
//!   distinct locations: the write needs nothing;
//! - otherwise, with a reducer that is commutative and associative and has an identity
//!   (`+= *= min max & |`, user reducers that declare all three), `T` is privatised: each chunk
//!   of iterations reduces into its own copy starting at the identity, and the copies are
//!   folded into `T` in chunk order after the loop (float sums then equal the serial result
//!   within rounding; integer, `min`, `max`, `&` and `|` results are exact). `<<choose(z)>>=`
//!   is privatised too although it is not commutative: it is associative with identity `z`,
//!   and chunk order is the iterations' serial order, so the fold keeps the serial loop's
//!   first value other than `z` exactly (a BFS parent `P[k] <<choose(-1)>>= j` from many `j`);
//! - anything else (an overwrite `=`, `-=`, a reducer that declares no such properties) is a
//!   data race and an [`Error::Race`].
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
use crate::notation::ast::{AssignOp, ExprKind, Folds, LoopMode, Program, Reducer, Stmt, StmtKind};
use crate::span::Span;

/// What one parallel loop needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The loop statement's place (the lowering finds the loop by it).
    pub span: Span,
    pub index: String,
    /// The outputs each chunk reduces into a private copy of, with their reducer.
    pub private: Vec<(String, Reducer)>,
    /// The schedule's choice of copies or atomics for those outputs (`parallelize(i,
    /// atomics)`), or `Auto`: the runner's (`Runner::set_atomics`).
    pub folds: Folds,
    /// The tensors each iteration declares afresh (see the module documentation): each
    /// chunk works on its own copy, and the last chunk's is kept.
    pub scratch: Vec<String>,
    /// Sparse outputs whose rows (fibers under `index`, their first index) each chunk appends
    /// into fragments of its own, concatenated in chunk order after the loop.
    pub rows: Vec<String>,
}

/// How a tensor is stored, as far as the race check is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Every level `Dense`, or a 0-d scalar: each location has its own element.
    Dense,
    /// Zero or more `Dense` levels, then one level appending its fibers in order, then the
    /// leaf (`levels::row_appended_level`): rows of the first index (entries, for a vector)
    /// can be appended separately.
    Rows,
    /// Any other sparse format.
    Sparse,
}

/// `program` with every vectorised loop its formats cannot run in lanes made serial again.
/// Lanes load consecutive elements of the tensors the loop's index addresses densely
/// (`Storage::Dense`). A sparse level's loop walks stored positions instead: its lanes are
/// consecutive positions, whose coordinates the walk loads (the stored entries of a row, as
/// MKL's and Eigen's vectorised sparse products run). That serves a loop that only reads
/// through its index and reduces into elements it does not address (SpMV's
/// `y[i] += A[i, j] * x[j]` over `j`, a dot product). A loop that also writes at the walked
/// coordinate (`y[i] = a[i]` with `a` sparse; the backward loop of a gradient,
/// `dx[j] += A[i, j] * dy[i]`) would scatter, and its lanes would meet on a repeated coordinate, which a zero-copy array
/// does not exclude: it runs serially (it is not an error: `grad` keeps the marks of a
/// forward loop it cannot see the formats of, and a serial loop computes the same values).
/// The `vectorize` command checked the dependences; this is the half that needs the formats.
pub fn serial_where_formats_refuse(
    program: &Program,
    storage: &dyn Fn(&str) -> Storage,
) -> Program {
    let mut refused = vec![];
    crate::transforms::schedule::names::walk(&program.body, &mut |s, path| {
        let StmtKind::Loop {
            index,
            body,
            parallel: LoopMode::Vector,
            ..
        } = &s.kind
        else {
            return;
        };
        let by_index = |a: &crate::notation::ast::Access| {
            a.indices
                .iter()
                .any(|ix| crate::transforms::schedule::names::mentions(&ix.expr, index))
        };
        let mut walks = false;
        crate::notation::visit::accesses(body, &mut |a| {
            walks |= by_index(a) && storage(&a.tensor) != Storage::Dense;
        });
        let mut scatters = false;
        crate::notation::visit::writes(body, &mut |a| scatters |= by_index(a));
        if walks && scatters {
            refused.push(path.clone());
        }
    });
    serial_at(program, refused)
}

/// `program` with the loops at `paths` made serial.
fn serial_at(
    program: &Program,
    paths: impl IntoIterator<Item = crate::transforms::schedule::names::Path>,
) -> Program {
    let mut p = program.clone();
    // The paths stay valid: only modes change, no statement moves.
    for path in paths {
        let mut s = crate::transforms::schedule::names::get(&p.body, &path).clone();
        if let StmtKind::Loop { parallel, .. } = &mut s.kind {
            *parallel = LoopMode::Serial;
        }
        p = crate::transforms::schedule::loops::replace(&p, &path, vec![s]);
    }
    p
}

/// Check the dependences of every vectorised loop of `program` (`for i = vectorize(_)`).
pub fn check_vector(program: &Program) -> Result<()> {
    // The dependences: checked here too, not only by the `vectorize` command, since a program
    // may say `vectorize(_)` in its text, and the backends take the mark as a promise (C's
    // `omp simd`, the JIT's lanes).
    match lane_blockers(program).into_iter().next() {
        Some((_, span, index, d)) => Err(Error::unsupported(
            span,
            format!(
                "the vectorised loop `{index}` carries a dependence (or a reduction lanes cannot combine): the {} dependence from `{}` to `{}` (drop `vectorize({index})`)",
                d.kind, d.source, d.sink
            ),
        )),
        None => Ok(()),
    }
}

/// The `vectorize` loops of `program` whose iterations cannot run in lanes, each with its
/// path, place, index and the first dependence in the way (see
/// `deps::Analysis::vector_blocker`).
fn lane_blockers(
    program: &Program,
) -> Vec<(
    crate::transforms::schedule::names::Path,
    Span,
    String,
    crate::error::Dependence,
)> {
    let mut vector = vec![];
    crate::transforms::schedule::names::walk(&program.body, &mut |s, path| {
        if let StmtKind::Loop {
            index,
            parallel: LoopMode::Vector,
            ..
        } = &s.kind
        {
            vector.push((path.clone(), s.span, index.clone()));
        }
    });
    if vector.is_empty() {
        return vec![];
    }
    let analysis = crate::transforms::schedule::deps::Analysis::new(program);
    vector
        .into_iter()
        .filter_map(|(path, span, index)| {
            let d = analysis.vector_blocker(&path)?;
            Some((path, span, index, d))
        })
        .collect()
}

/// `program` with every `vectorize` loop whose iterations cannot run in lanes made serial
/// again. `grad` keeps a loop's mode in its backward copy: the adjoint of a loop that runs in
/// lanes usually can too (its reads become `+=` into gradients, its writes reads of
/// cotangents), but not always (a gather `x[idx[o]]` becomes a scatter), so each backward
/// loop is checked on its own and loses the mark, not the program, where it must.
pub fn serial_where_lanes_blocked(program: &Program) -> Program {
    serial_at(
        program,
        lane_blockers(program).into_iter().map(|(path, ..)| path),
    )
}

/// Check every parallel loop of `program`. `storage(T)` says how tensor `T` is stored;
/// reducers are resolved by name against the program's definitions.
pub fn check_parallel(program: &Program, storage: &dyn Fn(&str) -> Storage) -> Result<Vec<Plan>> {
    let mut c = Checker {
        program,
        storage,
        open: vec![],
        plans: vec![],
    };
    c.stmts(&program.body)?;
    Ok(c.plans)
}

struct Checker<'a> {
    program: &'a Program,
    storage: &'a dyn Fn(&str) -> Storage,
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
                if let LoopMode::Parallel(folds) = parallel {
                    self.plans.push(Plan {
                        span: s.span,
                        index: index.clone(),
                        private: vec![],
                        folds: *folds,
                        scratch: scratch(body),
                        rows: vec![],
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
        let plain = |ix: &crate::notation::ast::AccessIndex| {
            !ix.permissive
                && ix.window.is_none()
                && matches!(&ix.expr.kind, ExprKind::Name(n) if *n == index)
        };
        match (self.storage)(tensor) {
            Storage::Dense => {}
            // The index addressing the tensor's first dimension (a swizzle may move it).
            Storage::Rows
                if self.open.len() == 1
                    && (0..lhs.indices.len())
                        .any(|k| lhs.dim_of(k) == 0 && plain(&lhs.indices[k])) =>
            {
                // Row `i` is this iteration's alone, whatever the operator.
                let rows = &mut self.plans[p].rows;
                if !rows.iter().any(|t| t == tensor) {
                    rows.push(tensor.to_string());
                }
                return Ok(());
            }
            storage => {
                let why = match storage {
                    Storage::Rows if self.open.len() > 1 => format!(
                        "`{tensor}` is sparse and the loop is nested in another parallel loop, \
                         whose chunks would append to the same rows"
                    ),
                    Storage::Rows => format!(
                        "`{tensor}` is sparse and its first index is not the plain `{index}`, so \
                         several iterations append to one row"
                    ),
                    _ => format!(
                        "`{tensor}` has a sparse level that is not a row appended by one \
                         iteration: its appends move shared positions, so threads writing \
                         different fibers would still race"
                    ),
                };
                return Err(Error::Race {
                    span: lhs.span,
                    msg: format!(
                        "`{lhs}` is written under the parallel loop over `{index}` ({at}), but \
                         {why}; store `{tensor}` with Dense levels, or as one SparseList or \
                         SparseByteMap level (under Dense levels, if any) indexed first by \
                         `{index}`, or make the loop serial"
                    ),
                });
            }
        }
        let injective = lhs.indices.iter().any(plain);
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
    // A block's statements are the body's own (einsum wraps its loop body in `begin ... end`).
    fn flat(body: &[Stmt], out: &mut Vec<Stmt>) {
        for s in body {
            match &s.kind {
                StmtKind::Block(inner) => flat(inner, out),
                _ => out.push(s.clone()),
            }
        }
    }
    let mut stmts = vec![];
    flat(body, &mut stmts);
    let body = &stmts[..];
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
/// associative and has an identity to start each copy from, and is commutative or folded in
/// chunk order (`choose`, see the module documentation).
fn privatisable(r: &Reducer) -> bool {
    match r {
        Reducer::Add
        | Reducer::Mul
        | Reducer::Min
        | Reducer::Max
        | Reducer::And
        | Reducer::Or
        | Reducer::Choose(_) => true,
        Reducer::User(d) => d.commutative && d.associative && d.identity.is_some(),
        Reducer::Sub | Reducer::Named(_) => false,
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
        check_rows(src, sparse, &[])
    }

    /// As `check`, with `rows` stored as `Dense` over a row-appending level.
    fn check_rows(src: &str, sparse: &[&str], rows: &[&str]) -> Result<Vec<Plan>> {
        let p = parse_program(src).unwrap();
        check_parallel(&p, &|t| {
            if rows.contains(&t) {
                Storage::Rows
            } else if sparse.contains(&t) {
                Storage::Sparse
            } else {
                Storage::Dense
            }
        })
    }

    #[test]
    fn rows_of_sparse_outputs_indexed_first_by_the_loop() {
        // Row-wise SpGEMM: a workspace, then row `i` of `C` appended.
        let plans = check_rows(
            "C .= 0\nfor i = parallel(_)\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  end\n  for j = _\n    C[i, j] = w[j]\n  end\nend",
            &["A", "B", "w"],
            &["C"],
        )
        .unwrap();
        assert_eq!(plans[0].rows, vec!["C".to_string()]);
        assert_eq!(plans[0].scratch, vec!["w".to_string()]);
        // The same body in a block, as einsum writes it.
        let plans = check_rows(
            "for i = parallel(_)\n  begin\n    w .= 0\n    for j = _\n      w[j] += A[i, j]\n    end\n    for j = _\n      C[i, j] = w[j]\n    end\n  end\nend",
            &["A", "w"],
            &["C"],
        )
        .unwrap();
        assert_eq!(plans[0].scratch, vec!["w".to_string()]);
        assert!(plans[0].private.is_empty());
        // Any operator: the row is the iteration's own. Listed once for two writes.
        let plans = check_rows(
            "for i = parallel(_), j = _\n  C[i, j] += A[i, j]\n  C[i, j] *= A[i, j]\nend",
            &["A"],
            &["C"],
        )
        .unwrap();
        assert_eq!(plans[0].rows, vec!["C".to_string()]);
        // A swizzle that puts `i` first in the tensor's dimensions is a row too.
        let plans = check_rows(
            "for i = parallel(_), j = _\n  swizzle(C, 1, 0)[j, i] = A[i, j]\nend",
            &["A"],
            &["C"],
        )
        .unwrap();
        assert_eq!(plans[0].rows, vec!["C".to_string()]);
    }

    #[test]
    fn other_sparse_writes_stay_refused() {
        for (src, what, at) in [
            // The loop's index second: several iterations append to one row.
            (
                "for i = parallel(_), j = _\n  C[j, i] += A[i, j]\nend",
                "first index is not the plain `i`",
                (2, 3),
            ),
            (
                "for i = parallel(_), j = _\n  swizzle(C, 1, 0)[i, j] = A[i, j]\nend",
                "first index is not the plain `i`",
                (2, 3),
            ),
            // A shifted row.
            (
                "for i = parallel(_), j = _\n  C[i + 0, j] = A[i, j]\nend",
                "first index is not the plain `i`",
                (2, 3),
            ),
            // Nested parallel loops.
            (
                "for i = parallel(_)\n  for j = parallel(_)\n    C[i, j] = A[i, j]\n  end\nend",
                "nested in another parallel loop",
                (3, 5),
            ),
        ] {
            let e = check_rows(src, &["A"], &["C"]).unwrap_err();
            assert!(
                matches!(&e, Error::Race { span, .. } if (span.line, span.col) == at),
                "{src}: {e}"
            );
            assert!(e.to_string().contains(what), "{src}: {e}");
            assert!(e.to_string().contains("at 1:1"), "{src}: {e}");
        }
        // A sparse level above the Dense one, or COO: not rows at all.
        let e = check_rows(
            "for i = parallel(_), j = _\n  C[i, j] = A[i, j]\nend",
            &["A", "C"],
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("sparse level"), "{e}");
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
        // `choose` folds in chunk order, the serial order.
        let plans = check(
            "for j = parallel(_), k = _\n  P[k] <<choose(-1)>>= j\nend",
            &[],
        )
        .unwrap();
        let choose = Reducer::Choose(crate::types::Scalar::I64(-1));
        assert_eq!(plans[0].private, vec![("P".to_string(), choose)]);
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
