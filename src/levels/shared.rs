//! Compile-time pieces several level formats share: the fill-only declaration rule of sparse
//! levels and the `ptr` offset array that turns per-fiber counts into offsets at freeze.

use super::LevelRef;
use crate::error::{Error, Result};
use crate::ir::{BufId, Expr, Stmt, build as b};
use crate::lower::ctx::Cx;
use crate::types::{ElemType, Scalar};

/// Sparse levels do not store the coordinates they leave out, so those read as the fill: a
/// declaration to any other value cannot be represented.
pub fn declare_to_fill(l: &LevelRef, init: Scalar) -> Result<()> {
    if init.cast(l.tensor.elem) != l.tensor.fill {
        return Err(Error::tensor(
            &l.tensor.name,
            format!(
                "a sparse tensor can only be declared with its fill value {}, not {init}",
                l.tensor.fill
            ),
        ));
    }
    Ok(())
}

/// `ptr[1..=count] += ptr[0..count]`: per-fiber counts (kept in `ptr[p + 1]` while writing)
/// become offsets.
pub fn prefix_sum(cx: &mut Cx, ptr: BufId, count: Expr) -> Stmt {
    let p = cx.var("p", ElemType::I64);
    Stmt::For {
        var: p,
        start: b::int(1),
        stop: b::add(count, b::int(1)),
        body: vec![b::store(
            ptr,
            b::var(p),
            b::add(
                b::load(ptr, b::var(p)),
                b::load(ptr, b::sub(b::var(p), b::int(1))),
            ),
        )],
    }
}
