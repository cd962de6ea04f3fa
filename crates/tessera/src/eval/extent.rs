//! Which tensor dimensions a loop index ranges over: those it indexes directly (a plain,
//! non-permissive name, through a swizzle's permutation) anywhere in the loop body, nested
//! loops included, and the windows `(lo:hi)(index)` whose bounds are known where the loop
//! starts. Computed indices (`A[i + 1]`, `A[I[k]]`) and permissive ones (`A[~i]`) never decide
//! an extent; they are bounds-checked when they run instead, as are windows whose bounds use
//! names bound inside the loop.

use super::Env;
use crate::error::{Error, Result};
use crate::notation::ast::{Access, Span, Stmt};
use crate::notation::visit;
use crate::transforms::wrapperize::{WindowUse, is_direct};

/// One use of an index: a dimension or a window of that size.
pub struct Use {
    pub what: String,
    pub size: usize,
    pub span: Span,
}

impl Use {
    pub fn describe(&self) -> String {
        format!("{} (size {})", self.what, self.size)
    }

    /// The window `lo:hi` (as given) of `w`, of `size` coordinates.
    pub fn window(w: &WindowUse, lo: &str, hi: &str, size: usize) -> Use {
        Use {
            what: format!(
                "the window {lo}:{hi} of dimension {} of `{}`",
                w.dim, w.tensor
            ),
            size,
            span: w.span,
        }
    }
}

/// Every direct use of `index` in `body`, in the order the compiler's passes visit them.
pub fn uses(env: &Env, body: &[Stmt], index: &str) -> Vec<Use> {
    let mut out = vec![];
    visit::accesses(body, &mut |a: &Access| {
        for (k, ix) in a.indices.iter().enumerate() {
            if !is_direct(ix, index) {
                continue;
            }
            let d = a.dim_of(k);
            if let Some(&size) = env.tensors.get(&a.tensor).and_then(|t| t.shape.get(d)) {
                out.push(Use {
                    what: format!("dimension {d} of `{}`", a.tensor),
                    size,
                    span: a.span,
                });
            }
        }
    });
    out
}

/// The extent of `for index = _`: every use (`all`) must agree on it.
pub fn infer(all: &[Use], index: &str, span: Span) -> Result<usize> {
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
