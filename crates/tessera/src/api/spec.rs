//! The einsum statement: `OUT[i, j] op= expression over T[idx] accesses and literals`, parsed
//! with the language's own parser (so errors carry `line:column`) and then checked against the
//! narrower shape einsum accepts.

use crate::error::{Error, Result};
use crate::notation::ast::{Access, AssignOp, Expr, ExprKind, Reducer, Span, StmtKind};
use crate::notation::parse::parse_program;
use crate::semantics::Builtin;

/// A checked einsum statement.
#[derive(Clone, Debug)]
pub struct Spec {
    pub output: String,
    pub out_indices: Vec<String>,
    pub op: AssignOp,
    pub rhs: Expr,
    /// Every access of the right side, in the order [`accesses`] visits them.
    pub reads: Vec<Access>,
    /// Where the output is written, for errors about it.
    pub span: Span,
    /// The orders of the ε accesses of the right side and their index names: an index only
    /// ε reads (and the output writes) ranges over `0..order`.
    pub eps: Vec<(usize, Vec<String>)>,
    /// The index pairs of the δ accesses: an index only δ reads takes its partner's extent.
    pub delta: Vec<(String, String)>,
}

impl Spec {
    /// The index names of every read, as strings (checked to be plain names).
    pub fn read_indices(&self, k: usize) -> Vec<String> {
        self.reads[k]
            .indices
            .iter()
            .map(|ix| {
                plain_name(&ix.expr)
                    .expect("checked by parse_spec")
                    .to_string()
            })
            .collect()
    }

    /// Every index: the output's in order, then the others in order of first appearance.
    pub fn all_indices(&self) -> Vec<String> {
        let mut out = self.out_indices.clone();
        for k in 0..self.reads.len() {
            for i in self.read_indices(k) {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
        out
    }

    pub fn reducer(&self) -> Option<&Reducer> {
        match &self.op {
            AssignOp::Reduce(r) => Some(r),
            AssignOp::Overwrite => None,
        }
    }
}

/// Visit the accesses of an expression left to right (the order `Spec::reads` holds).
pub fn accesses<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Access)) {
    match &e.kind {
        ExprKind::Access(a) => f(a),
        ExprKind::Unary(_, x) => accesses(x, f),
        ExprKind::Binary(_, a, b) => {
            accesses(a, f);
            accesses(b, f);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|a| accesses(a, f)),
        ExprKind::Literal(_) | ExprKind::Missing | ExprKind::Name(_) => {}
    }
}

fn plain_name(e: &Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(n) => Some(n),
        _ => None,
    }
}

/// Index positions of an access must be distinct plain names without protocols or windows.
fn check_access(a: &Access, what: &str) -> Result<Vec<String>> {
    if a.swizzle.is_some() {
        return Err(Error::unsupported(
            a.span,
            format!(
                "einsum takes plain accesses; write the indices of `{}` in the order you want instead of a swizzle",
                a.tensor
            ),
        ));
    }
    let mut names: Vec<String> = vec![];
    for ix in &a.indices {
        let name = match plain_name(&ix.expr) {
            Some(n) if !ix.permissive && ix.protocol.is_none() && ix.window.is_none() => n,
            _ => {
                return Err(Error::unsupported(
                    ix.expr.span,
                    format!(
                        "einsum indices are plain names; `{}` has another index here",
                        a.tensor
                    ),
                ));
            }
        };
        if names.iter().any(|n| n == name) {
            return Err(Error::unsupported(
                ix.expr.span,
                format!(
                    "index `{name}` appears twice in {what} `{}` (take the diagonal first)",
                    a.tensor
                ),
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Only literals, accesses, operators and built-in functions may make up the right side.
fn check_rhs(e: &Expr) -> Result<()> {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Access(_) => Ok(()),
        ExprKind::Name(n) => Err(Error::unsupported(
            e.span,
            format!(
                "einsum reads tensors as accesses: write `{n}[]` for a 0-d tensor (indices cannot be used as values)"
            ),
        )),
        ExprKind::Missing => Err(Error::unsupported(e.span, "einsum has no `missing` values")),
        ExprKind::Unary(_, x) => check_rhs(x),
        ExprKind::Binary(_, a, b) => {
            check_rhs(a)?;
            check_rhs(b)
        }
        ExprKind::Call(name, args) => {
            if name == Builtin::Size.name() {
                return Err(Error::unsupported(e.span, "einsum cannot use `size`"));
            }
            args.iter().try_for_each(check_rhs)
        }
    }
}

/// Parse and check `OUT[idx] op= rhs`.
pub fn parse_spec(text: &str) -> Result<Spec> {
    let program = parse_program(text)?;
    if let Some(def) = program.reducers.first() {
        return Err(Error::unsupported(
            def.span,
            "einsum takes the built-in reducers only",
        ));
    }
    let stmt = match program.body.as_slice() {
        [s] => s,
        _ => {
            return Err(Error::Usage(format!(
                "einsum expects one statement `OUT[i, ...] op= expression`, got `{}`",
                text.trim()
            )));
        }
    };
    let StmtKind::Assign { lhs, op, rhs } = &stmt.kind else {
        return Err(Error::program(
            stmt.span,
            "einsum expects an assignment `OUT[i, ...] op= expression`",
        ));
    };
    if let AssignOp::Reduce(r @ (Reducer::Named(_) | Reducer::Choose(_) | Reducer::User(_))) = op {
        let shown = match r {
            Reducer::Named(n) => format!("<<{n}>>="),
            _ => "<<choose>>=".to_string(),
        };
        return Err(Error::unsupported(
            stmt.span,
            format!(
                "einsum reduces with `+= -= *= &= |= <<min>>= <<max>>=` or assigns with `=`, not `{shown}`"
            ),
        ));
    }
    let out_indices = check_access(lhs, "the output")?;
    check_rhs(rhs)?;
    let mut reads = vec![];
    let mut eps = vec![];
    let mut delta = vec![];
    let mut bad = None;
    accesses(rhs, &mut |a| {
        if bad.is_none() {
            match check_access(a, "the access of") {
                // δ and ε are structured, never given: the compiler lowers them away
                // (`transforms::ein`); their indices are sized by the other operands.
                Ok(names) if crate::transforms::ein::is_reserved(&a.tensor) => {
                    if a.tensor == crate::transforms::ein::EPS {
                        eps.push((names.len(), names));
                    } else if let [x, y] = names.as_slice() {
                        delta.push((x.clone(), y.clone()));
                    }
                }
                Ok(_) => reads.push(a.clone()),
                Err(e) => bad = Some(e),
            }
        }
    });
    if let Some(e) = bad {
        return Err(e);
    }
    if let Some(a) = reads.iter().find(|a| a.tensor == lhs.tensor) {
        return Err(Error::program(
            a.span,
            format!("`{}` is the output; einsum cannot also read it", a.tensor),
        ));
    }
    let spec = Spec {
        output: lhs.tensor.clone(),
        out_indices,
        op: op.clone(),
        rhs: rhs.clone(),
        reads,
        span: lhs.span,
        eps,
        delta,
    };
    let all = spec.all_indices();
    if matches!(spec.op, AssignOp::Overwrite) && all.len() > spec.out_indices.len() {
        let extra = &all[spec.out_indices.len()];
        return Err(Error::program(
            stmt.span,
            format!(
                "index `{extra}` is not on the left, so it is reduced: use a reducer such as `+=` instead of `=`"
            ),
        ));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_matrix_product() {
        let s = parse_spec("C[i, j] += A[i, k] * B[k, j]").unwrap();
        assert_eq!(s.output, "C");
        assert_eq!(s.out_indices, vec!["i", "j"]);
        assert_eq!(s.all_indices(), vec!["i", "j", "k"]);
        assert_eq!(s.reads.len(), 2);
        assert_eq!(s.read_indices(1), vec!["k", "j"]);
    }

    #[test]
    fn rejects_what_einsum_cannot_express() {
        let msg = |t: &str| parse_spec(t).unwrap_err().to_string();
        assert_eq!(
            msg("C[i] = A[i, k]"),
            "1:1: index `k` is not on the left, so it is reduced: use a reducer such as `+=` instead of `=`"
        );
        assert_eq!(
            msg("C[i] += A[i, i]"),
            "1:14: unsupported: index `i` appears twice in the access of `A` (take the diagonal first)"
        );
        assert_eq!(
            msg("C[i] += A[i + 1]"),
            "1:11: unsupported: einsum indices are plain names; `A` has another index here"
        );
        assert_eq!(
            msg("C[i] += C[i]"),
            "1:9: `C` is the output; einsum cannot also read it"
        );
        assert!(msg("C[i] += A[i] * x").contains("write `x[]`"));
        assert!(msg("C[i] <<choose(0)>>= A[i]").contains("not `<<choose>>=`"));
        assert!(msg("for i = _\nC[i] += A[i]\nend").contains("expects an assignment"));
        assert!(msg("C[i] += A[i]; D[i] += A[i]").contains("one statement"));
    }
}
