//! `grad`: reverse-mode automatic differentiation as a program transformation (FreeTensor's
//! AD, issue 16).
//!
//! From a program, the inputs to differentiate (`wrt`) and the outputs' cotangents (seed
//! tensors, or a 0-d loss whose cotangent is 1), [`grad`] builds one *gradient program*: the
//! forward program (saving the tapes it needs) followed by the backward pass, an ordinary
//! program that prints (`tessera code`), parses back, and is lowered and compiled like any
//! other. For each differentiated input `A` it writes `dA` (zero-initialised, accumulated with
//! `+=`).
//!
//! - [`derive`]: the derivative table (`+ - * /`, `min max abs sqrt exp log`, `ifelse`,
//!   comparisons as masks).
//! - [`reverse`]: statements in reverse order per body, loops kept, zero-initialised gradient
//!   accumulators per version of each local.
//! - [`tape`]: versions and tapes (tape or recompute each local the backward pass reads).
//! - [`share`]: the subexpressions a statement's contributions repeat, bound to `let`s.
//! - [`partial`]: backward sums over an inner loop with factors that do not change in it,
//!   split into a partial sum per outer iteration and one statement that finishes it.
//!
//! Masked semantics: a differentiated input listed in [`GradOptions::masked`] gets a gradient
//! only at its stored entries. Each contribution to `dA` is guarded by `if A_mask[...]`, where
//! `A_mask` is `A`'s structure with a `Pattern()` leaf (an extra input, see
//! [`GradProgram::masks`]); the mask's structure drives the loop, so `dA`, written in `A`'s
//! format, stores exactly `A`'s pattern, stored zeros included, and the backward pass visits
//! only stored entries. Without the mask the gradient is the dense one.
//!
//! What is refused, with the place: reducers other than `= += -= <<min>>= <<max>>=` on a
//! differentiated value (user reducers declare no derivative), `%` and functions outside the
//! table on one, a differentiated tensor written again after it is read or declared again in
//! the same body (a second version inside one body), and an overwrite `=` that several
//! iterations of a loop repeat on the same element (only the last write would count).

pub mod derive;
pub mod guard;
pub mod partial;
pub mod reverse;
pub mod share;
pub mod tape;

pub use tape::{Tape, Tapes};

use crate::error::{Error, Result};
use crate::notation::ast::{Access, AssignOp, Expr, ExprKind, Program, Span, Stmt, StmtKind};
use crate::notation::visit;
use derive::reads_active;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How to build the gradient program.
#[derive(Clone, Debug, Default)]
pub struct GradOptions {
    pub tapes: Tapes,
    /// Differentiated inputs whose gradient keeps their stored pattern (masked semantics).
    pub masked: Vec<String>,
}

/// A gradient program and the names of what it reads and writes besides the forward
/// program's tensors.
#[derive(Clone, Debug)]
pub struct GradProgram {
    pub program: Program,
    /// `(input, gradient)`: the gradient outputs, `dA` for `A`, in `wrt` order.
    pub gradients: Vec<(String, String)>,
    /// `(output, seed)`: the cotangent inputs of the seeded outputs.
    pub seeds: Vec<(String, String)>,
    /// The 0-d output differentiated when no seed is given.
    pub loss: Option<String>,
    /// `(input, mask)`: the inputs with masked gradients and the name of their pattern input.
    pub masks: Vec<(String, String)>,
    /// The tapes (global workspaces).
    pub tapes: Vec<Tape>,
    /// The partial sums of backward reductions ([`partial`]): workspaces declared where the
    /// backward pass needs them, formatted like tapes (one version per outer loop).
    pub partials: Vec<Tape>,
    /// The forward program's global tensors (outputs and workspaces), which the gradient
    /// program computes again.
    pub forward: Vec<String>,
    /// The accumulators of the forward tensors' gradients (workspaces).
    pub accumulators: Vec<String>,
}

impl GradProgram {
    /// This gradient program with the schedule commands `text` applied to its own loops
    /// (`fission(f#2, after @14); vectorize(o#2)`: names and `@LINE`s as the gradient
    /// program prints), checked like any schedule: a command that does not apply or would
    /// break a dependence of the gradient program is an [`crate::error::Error::Schedule`]
    /// and `self` is unchanged. The tensors a schedule adds (the arrays `fission` expands a
    /// body's scalars into, `cache` workspaces) are created by `api::grad::bind` like the
    /// program's other workspaces.
    pub fn scheduled(&self, text: &str) -> Result<GradProgram> {
        // Printed and parsed back, so that each statement's place is its line in the text
        // `--show-program` prints (the built program's statements have none) and `@LINE`
        // names it.
        let printed = crate::notation::parse::parse_program(&self.program.to_string())?;
        let program = crate::transforms::schedule::schedule(&printed, text)?;
        Ok(GradProgram {
            program,
            ..self.clone()
        })
    }
}

/// [`grad_with`] with the default options (tapes chosen automatically, dense gradients).
pub fn grad(program: &Program, wrt: &[&str], seeds: &[&str]) -> Result<GradProgram> {
    grad_with(program, wrt, seeds, &GradOptions::default())
}

/// The gradient program of `program` with respect to the inputs `wrt`, given the cotangents
/// of the outputs `seeds` (inputs named in [`GradProgram::seeds`]); with no seeds, the loss
/// is the program's one 0-d output that depends on `wrt` and that nothing reads.
pub fn grad_with(
    program: &Program,
    wrt: &[&str],
    seeds: &[&str],
    opts: &GradOptions,
) -> Result<GradProgram> {
    let (reads, writes) = crate::notation::visit::reads_writes(&program.body);
    let mut used: HashSet<String> = HashSet::new();
    tape::names_in(&program.body, &mut used);
    collect_bound(&program.body, &mut used);
    used.extend(program.reducers.iter().map(|r| r.name.clone()));
    if wrt.is_empty() {
        return Err(Error::Usage(
            "grad: name at least one input to differentiate".into(),
        ));
    }
    for w in wrt {
        if writes.iter().any(|t| t == w) {
            return Err(Error::Usage(format!(
                "grad: `{w}` is written by the program; only inputs (tensors it only reads) can be differentiated"
            )));
        }
        if !reads.iter().any(|t| t == w) {
            return Err(Error::Usage(format!("grad: the program never reads `{w}`")));
        }
    }
    for m in &opts.masked {
        if !wrt.contains(&m.as_str()) {
            return Err(Error::Usage(format!(
                "grad: `{m}` is masked but not differentiated"
            )));
        }
    }
    // Tensors the program writes without declaring start from zero (as `tessera run`'s
    // outputs do); the gradient program declares them, so they are global values.
    let mut body = program.body.clone();
    let declared = declared_globally(&body);
    let mut undeclared: Vec<&String> = writes
        .iter()
        .filter(|t| !declared.contains(*t) && !declared_anywhere(&body, t))
        .collect();
    undeclared.sort();
    undeclared.dedup();
    for (k, t) in undeclared.into_iter().enumerate() {
        body.insert(
            k,
            Stmt::new(
                StmtKind::Declare {
                    tensor: t.clone(),
                    init: derive::zero(),
                },
                Span::default(),
            ),
        );
    }
    let globals: Vec<String> = body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Declare { tensor, .. } => Some(tensor.clone()),
            _ => None,
        })
        .fold(vec![], |mut v, t| {
            if !v.contains(&t) {
                v.push(t);
            }
            v
        });
    let active = activity(&body, wrt);
    check_versions(&body, &active)?;
    let loss = if seeds.is_empty() {
        let zero_d: Vec<&String> = globals
            .iter()
            .filter(|t| {
                active.contains(*t) && reverse::rank_of(&body, t) == 0 && !reads.contains(t)
            })
            .collect();
        match zero_d.as_slice() {
            [one] => Some((*one).clone()),
            [] => {
                return Err(Error::Usage(
                    "grad: no 0-d output depends on the differentiated inputs; give the outputs' cotangents as seeds".into(),
                ));
            }
            many => {
                return Err(Error::Usage(format!(
                    "grad: several 0-d outputs could be the loss ({}); name the one to differentiate with a seed",
                    many.iter()
                        .map(|s| format!("`{s}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    } else {
        for s in seeds {
            if !globals.iter().any(|g| g == s) {
                return Err(Error::Usage(format!(
                    "grad: `{s}` is not an output of the program (a tensor it declares or writes at its top level)"
                )));
            }
        }
        None
    };
    let mut cx = reverse::Cx {
        active,
        grads: HashMap::new(),
        masks: BTreeMap::new(),
        mode: opts.tapes,
        tapes: vec![],
        used,
        reducers: program.reducers.clone(),
        lanes: 0,
    };
    let gradients: Vec<(String, String)> = wrt
        .iter()
        .map(|w| (w.to_string(), cx.grad_name(w)))
        .collect();
    for m in &opts.masked {
        let name = cx.fresh(&format!("{m}_mask"));
        cx.masks.insert(m.clone(), name);
    }
    let seed_names: Vec<(String, String)> = seeds
        .iter()
        .map(|s| (s.to_string(), cx.fresh(&format!("seed_{s}"))))
        .collect();
    let (fwd, bwd) = cx.body(&body, &[], true)?;
    // `TESSERA_NO_PARTIAL_SUMS=1` keeps the sums whole, for measuring.
    let (bwd, partials) = if std::env::var("TESSERA_NO_PARTIAL_SUMS").is_ok_and(|v| v == "1") {
        (bwd, vec![])
    } else {
        partial::partial_sums(bwd, &mut |base| cx.fresh(base))
    };
    let (bwd, in_place) = seeds_in_place(bwd, &seed_names, &mut |o| cx.grad_name(o));
    let mut out: Vec<Stmt> = vec![];
    for t in &cx.tapes {
        out.push(decl(&t.name, Expr::lit(t.fill)));
    }
    out.extend(fwd);
    for (_, d) in &gradients {
        out.push(decl(d, derive::zero()));
    }
    let mut accumulators = vec![];
    for g in &globals {
        if cx.active.contains(g) && !in_place.contains(g) {
            let d = cx.grad_name(g);
            out.push(decl(&d, derive::zero()));
            accumulators.push(d);
        }
    }
    for (o, s) in seed_names.iter().filter(|(o, _)| !in_place.contains(o)) {
        let d = cx.grad_name(o);
        let rank = reverse::rank_of(&body, o);
        let qs: Vec<String> = (0..rank).map(|k| cx.fresh(&format!("q{k}"))).collect();
        out.push(tape::copy(&d, &[], s, &[], &qs, Span::default()));
    }
    if let Some(l) = &loss {
        let d = cx.grad_name(l);
        out.push(tape::overwrite(
            tape::access(&d, vec![], Span::default()),
            derive::lit(1.0),
            Span::default(),
        ));
    }
    out.extend(bwd);
    let program = crate::transforms::parallel::serial_where_lanes_blocked(&program.with_body(out));
    Ok(GradProgram {
        program,
        gradients,
        seeds: seed_names,
        loss,
        masks: cx.masks.into_iter().collect(),
        tapes: cx.tapes,
        partials,
        forward: globals,
        accumulators,
    })
}

/// The seeded outputs whose cotangent the backward pass `bwd` only reads, and `bwd` reading
/// their seeds in its place: no accumulator to zero and copy the seed into (three bytes moved
/// per byte of seed before the backward pass starts; SoftRas's seed is 32 MB). A cotangent
/// the backward pass adds to (the forward program reads the output again) keeps its copy.
fn seeds_in_place(
    mut bwd: Vec<Stmt>,
    seeds: &[(String, String)],
    grad_name: &mut dyn FnMut(&str) -> String,
) -> (Vec<Stmt>, Vec<String>) {
    let (_, written) = visit::reads_writes(&bwd);
    let renames: Vec<(String, String, String)> = seeds
        .iter()
        .map(|(o, s)| (o.clone(), grad_name(o), s.clone()))
        .filter(|(_, d, _)| !written.contains(d))
        .collect();
    visit::exprs_mut(&mut bwd, &mut |e: &mut Expr| match &mut e.kind {
        ExprKind::Access(a) => {
            if let Some((_, _, s)) = renames.iter().find(|(_, d, _)| *d == a.tensor) {
                a.tensor = s.clone();
            }
        }
        // `size(dy, 0)` in a loop's extent names the tensor.
        ExprKind::Name(n) => {
            if let Some((_, _, s)) = renames.iter().find(|(_, d, _)| d == n) {
                *n = s.clone();
            }
        }
        _ => {}
    });
    (bwd, renames.into_iter().map(|(o, _, _)| o).collect())
}

fn decl(t: &str, init: Expr) -> Stmt {
    Stmt::new(
        StmtKind::Declare {
            tensor: t.to_string(),
            init,
        },
        Span::default(),
    )
}

fn declared_globally(body: &[Stmt]) -> HashSet<String> {
    body.iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Declare { tensor, .. } => Some(tensor.clone()),
            _ => None,
        })
        .collect()
}

fn declared_anywhere(body: &[Stmt], t: &str) -> bool {
    let mut found = false;
    walk(body, &mut |s| {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            found |= tensor == t;
        }
    });
    found
}

/// Pre-order over every statement.
fn walk(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match &s.kind {
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                walk(body, f)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                walk(then, f);
                walk(otherwise, f);
            }
            _ => {}
        }
    }
}

/// Loop indices and `let` names (they are names in use for fresh names).
fn collect_bound(stmts: &[Stmt], out: &mut HashSet<String>) {
    walk(stmts, &mut |s| match &s.kind {
        StmtKind::Loop { index, .. } => {
            out.insert(index.clone());
        }
        StmtKind::Let { name, .. } => {
            out.insert(name.clone());
        }
        StmtKind::Declare { tensor, .. } => {
            out.insert(tensor.clone());
        }
        _ => {}
    });
}

/// The values that depend on a differentiated input: the inputs, and (to a fixed point) every
/// tensor assigned and every `let` variable bound from an expression reading one as a value.
fn activity(body: &[Stmt], wrt: &[&str]) -> HashSet<String> {
    let mut active: HashSet<String> = wrt.iter().map(|w| w.to_string()).collect();
    loop {
        let before = active.len();
        let mut add = vec![];
        walk(body, &mut |s| match &s.kind {
            StmtKind::Assign { lhs, rhs, .. } if reads_active(rhs, &active) => {
                add.push(lhs.tensor.clone())
            }
            StmtKind::Declare { tensor, init } if reads_active(init, &active) => {
                add.push(tensor.clone())
            }
            StmtKind::Let { name, value, .. } if reads_active(value, &active) => {
                add.push(name.clone())
            }
            _ => {}
        });
        active.extend(add);
        if active.len() == before {
            return active;
        }
    }
}

/// One version per body for every active tensor: no write after a read and no second
/// declaration in the body that declares it, and no overwrite that loop iterations repeat.
fn check_versions(stmts: &[Stmt], active: &HashSet<String>) -> Result<()> {
    let owned: Vec<String> = stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Declare { tensor, .. } if active.contains(tensor) => Some(tensor.clone()),
            _ => None,
        })
        .collect();
    for t in &owned {
        let mut declared = false;
        let mut first_read: Option<Span> = None;
        for s in stmts {
            if let StmtKind::Declare { tensor, .. } = &s.kind
                && tensor == t
            {
                if declared {
                    return Err(Error::unsupported(
                        s.span,
                        format!(
                            "`{t}` is declared again: `grad` keeps one version of a differentiated tensor per body; give the new value its own name"
                        ),
                    ));
                }
                declared = true;
                continue;
            }
            let (r, w) = crate::notation::visit::reads_writes(std::slice::from_ref(s));
            if w.contains(t)
                && let Some(at) = first_read
            {
                return Err(Error::unsupported(
                    s.span,
                    format!(
                        "`{t}` is written again after {}:{} reads it: `grad` keeps one version of a differentiated tensor per body; give the new value its own name",
                        at.line, at.col
                    ),
                ));
            }
            if r.contains(t) && first_read.is_none() {
                first_read = Some(s.span);
            }
        }
        let mut assigns = vec![];
        collect_assigns(stmts, t, &mut vec![], &mut assigns);
        let overwrites: Vec<&(Access, bool, Vec<String>, Span)> =
            assigns.iter().filter(|a| a.1).collect();
        if let Some(first) = overwrites.first()
            && assigns.len() > 1
        {
            let other = assigns.iter().find(|a| a.3 != first.3).unwrap_or(first);
            return Err(Error::unsupported(
                other.3,
                format!(
                    "`{t}` is overwritten at {}:{} and written here too: only the last write would count, which `grad` does not track; give each value its own name",
                    first.3.line, first.3.col
                ),
            ));
        }
        for (lhs, _, loops, span) in overwrites {
            for l in loops {
                let indexed = lhs.indices.iter().any(|ix| {
                    matches!(&ix.expr.kind, ExprKind::Name(n) if n == l) && ix.window.is_none()
                });
                if !indexed {
                    return Err(Error::unsupported(
                        *span,
                        format!(
                            "`{t}` is overwritten on every iteration of `for {l}` without being indexed by `{l}`: only the last write would count, which `grad` does not track; index it by `{l}` or use a reduction"
                        ),
                    ));
                }
            }
        }
    }
    for s in stmts {
        match &s.kind {
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                check_versions(body, active)?
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                check_versions(then, active)?;
                check_versions(otherwise, active)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every assignment to `t` in `stmts`: the access, whether it overwrites, the loops entered
/// since `stmts`' level, and its place. Stops at a redeclaration of `t` in a nested body (a
/// different tensor of the same name).
fn collect_assigns(
    stmts: &[Stmt],
    t: &str,
    loops: &mut Vec<String>,
    out: &mut Vec<(Access, bool, Vec<String>, Span)>,
) {
    for s in stmts {
        match &s.kind {
            StmtKind::Assign { lhs, op, .. } if lhs.tensor == t => out.push((
                lhs.clone(),
                matches!(op, AssignOp::Overwrite),
                loops.clone(),
                s.span,
            )),
            StmtKind::Loop { index, body, .. } if !declared_here(body, t) => {
                loops.push(index.clone());
                collect_assigns(body, t, loops, out);
                loops.pop();
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) if !declared_here(body, t) => {
                collect_assigns(body, t, loops, out)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                if !declared_here(then, t) {
                    collect_assigns(then, t, loops, out);
                }
                if !declared_here(otherwise, t) {
                    collect_assigns(otherwise, t, loops, out);
                }
            }
            _ => {}
        }
    }
}

fn declared_here(stmts: &[Stmt], t: &str) -> bool {
    stmts
        .iter()
        .any(|s| matches!(&s.kind, StmtKind::Declare { tensor, .. } if tensor == t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn backward_text(text: &str, wrt: &[&str], seeds: &[&str]) -> String {
        let gp = grad(&parse_program(text).unwrap(), wrt, seeds).unwrap();
        let printed = gp.program.to_string();
        assert_eq!(parse_program(&printed).unwrap(), gp.program, "{printed}");
        printed
    }

    /// FreeTensor's repository cases (seed-freetensor §5.2 item 11) in this language.
    #[test]
    fn freetensor_cases() {
        let t = backward_text(
            "y .= 0.0\ny[] = (x1[] + x2[]) * x3[]\n",
            &["x1", "x2", "x3"],
            &["y"],
        );
        for want in [
            "dx1[] += seed_y[] * x3[]",
            "dx2[] += seed_y[] * x3[]",
            "dx3[] += seed_y[] * (x1[] + x2[])",
        ] {
            assert!(t.contains(want), "`{want}` missing in\n{t}");
        }
        // `y += x[i]` gives `dx[i] += dy` and never resets `dy`.
        let t = backward_text("y .= 0.0\nfor i = _\n  y[] += x[i]\nend\n", &["x"], &[]);
        assert!(t.contains("for i = _\n  dx[i] += dy[]\nend"), "{t}");
        assert!(!t.contains("dy[] = 0"), "{t}");
    }

    /// Only the values that depend on a differentiated input get gradients, and statements
    /// writing the others have no backward part.
    #[test]
    fn inactive_values_get_no_gradient() {
        let t = backward_text(
            "y .= 0.0\nz .= 0.0\nfor i = _\n  y[i] = a[i] * c[i]\n  z[i] = c[i] * 2.0\nend\n",
            &["a"],
            &["y"],
        );
        assert!(!t.contains("dc") && !t.contains("dz"), "{t}");
        assert!(t.contains("da[i] += seed_y[i] * c[i]"), "{t}");
    }

    /// A seeded output's cotangent that the backward pass only reads is the seed itself (no
    /// accumulator, no copy); one the backward pass adds to (the forward reads the output
    /// again) is an accumulator initialised from the seed.
    #[test]
    fn seeds_are_read_in_place_unless_added_to() {
        let t = backward_text(
            "y .= 0.0\nfor i = _\n  y[i] = a[i] * a[i]\nend\n",
            &["a"],
            &["y"],
        );
        assert!(t.contains("da[i] += seed_y[i] * a[i]"), "{t}");
        assert!(!t.contains("dy"), "{t}");
        let t = backward_text(
            "y .= 0.0\nz .= 0.0\nfor i = _\n  y[i] = a[i] * 3.0\n  z[i] = y[i] * y[i]\nend\n",
            &["a"],
            &["y", "z"],
        );
        assert!(t.contains("dy .= 0.0"), "{t}");
        assert!(t.contains("dy[q0] = seed_y[q0]"), "{t}");
        assert!(t.contains("dy[i] += seed_z[i] * y[i]"), "{t}");
        assert!(!t.contains("dz"), "{t}");
    }

    #[test]
    fn wrong_names_are_usage_errors() {
        let p = parse_program("y .= 0.0\nfor i = _\n  y[] += x[i]\nend\n").unwrap();
        assert!(matches!(grad(&p, &["q"], &[]), Err(Error::Usage(_))));
        assert!(matches!(grad(&p, &["x"], &["w"]), Err(Error::Usage(_))));
        assert!(matches!(grad(&p, &[], &[]), Err(Error::Usage(_))));
    }
}
