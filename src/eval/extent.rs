//! Which tensor dimensions a loop index ranges over: those it indexes directly (a plain,
//! non-permissive name) anywhere in the loop body, nested loops included. Computed indices
//! (`A[i + 1]`, `A[I[k]]`) and permissive ones (`A[~i]`) never decide an extent; they are
//! bounds-checked when they run instead.

use super::Env;
use crate::error::{Error, Result};
use crate::notation::ast::{Access, ExprKind, Span, Stmt};
use crate::notation::visit;

/// One direct use of an index: `tensor`'s dimension `dim` has size `size`.
pub struct Use {
    pub tensor: String,
    pub dim: usize,
    pub size: usize,
    pub span: Span,
}

impl Use {
    pub fn describe(&self) -> String {
        format!(
            "dimension {} of `{}` (size {})",
            self.dim, self.tensor, self.size
        )
    }
}

/// Every direct use of `index` in `body`, in the order the compiler's passes visit them.
pub fn uses(env: &Env, body: &[Stmt], index: &str) -> Vec<Use> {
    let mut out = vec![];
    visit::accesses(body, &mut |a: &Access| {
        for (d, ix) in a.indices.iter().enumerate() {
            if ix.permissive || !matches!(&ix.expr.kind, ExprKind::Name(n) if n == index) {
                continue;
            }
            if let Some(&size) = env.tensors.get(&a.tensor).and_then(|t| t.shape.get(d)) {
                out.push(Use {
                    tensor: a.tensor.clone(),
                    dim: d,
                    size,
                    span: a.span,
                });
            }
        }
    });
    out
}

/// The extent of `for index = _`: every direct use must agree on it.
pub fn infer(env: &Env, body: &[Stmt], index: &str, span: Span) -> Result<usize> {
    let all = uses(env, body, index);
    let Some(first) = all.first() else {
        return Err(Error::program(
            span,
            format!("cannot infer the extent of `{index}`: no access indexes it directly"),
        ));
    };
    if let Some(other) = all.iter().find(|u| u.size != first.size) {
        return Err(Error::DimensionMismatch {
            span: other.span,
            msg: format!(
                "index `{index}` ranges over {} but also over {}",
                first.describe(),
                other.describe()
            ),
        });
    }
    Ok(first.size)
}

/// Check that the non-empty range `lo:hi` of `for index = lo:hi` stays inside every
/// dimension the index addresses directly.
pub fn check_range(
    env: &Env,
    body: &[Stmt],
    index: &str,
    lo: i64,
    hi: i64,
    span: Span,
) -> Result<()> {
    for u in uses(env, body, index) {
        if lo < 0 || hi >= u.size as i64 {
            return Err(Error::DimensionMismatch {
                span: u.span,
                msg: format!(
                    "index `{index}` ranges over {lo}:{hi} (the loop at {span}), outside {}",
                    u.describe()
                ),
            });
        }
    }
    Ok(())
}
