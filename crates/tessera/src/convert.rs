//! Format conversion as a compiled copy program (`dst .= fill; for i0 = _, i1 = _ ...
//! dst[i0, i1] = src[i0, i1] end`), run through the kernel cache. The loops follow the natural
//! (row-major) order, which every format reads and most formats write; a destination that
//! cannot record writes in that order is reported as an error naming both formats.
//!
//! It sits above `run` (it compiles) while `tensor` sits below it (the runner binds tensors),
//! so `Tensor::to_format` and `Tensor::dropfills` are implemented here.

use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::ast::{Expr, Program};
use crate::notation::build::*;
use crate::run::Runner;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

impl Tensor {
    /// Convert to another format (same shape and values) by a compiled copy program. The
    /// source's stored entries are kept, explicitly stored fills included, except when the
    /// source is all-Dense: then entries equal to the destination's fill are not stored (like
    /// SciPy's `csr_matrix(dense)`).
    pub fn to_format(&self, format: &Format) -> Result<Tensor> {
        convert(self, format, self.format.is_dense())
    }

    /// A copy into `format` (the tensor's own format if `None`) without the stored entries
    /// equal to the fill value.
    pub fn dropfills(&self, format: Option<&Format>) -> Result<Tensor> {
        convert(self, format.unwrap_or(&self.format), true)
    }
}

const SRC: &str = "src";
const DST: &str = "dst";

thread_local! {
    /// One JIT and kernel cache per thread, so repeated conversions between the same formats
    /// compile once.
    static RUNNER: Runner = Runner::jit();
}

/// The copy program. With `drop_fills`, entries equal to the destination's fill are not
/// written (so a sparse destination does not store them).
pub fn copy_program(src: &Tensor, dst: &Format, drop_fills: bool) -> Program {
    let fill = dst.fill();
    let ix: Vec<String> = (0..src.rank()).map(|d| format!("i{d}")).collect();
    let at = |t: &str| access(t, ix.iter().map(|i| idx(i.as_str())));
    let mut body = overwrite(at(DST), read(at(SRC)));
    // An all-dense destination has a slot for every coordinate anyway: no test needed.
    if drop_fills && !dst.is_dense() {
        // Compare in the source's type: the destination's fill as the source would hold it.
        let f = fill.cast(src.elem()).widen();
        body = if_(binary(BinaryOp::Ne, read(at(SRC)), Expr::lit(f)), [body]);
    }
    for i in ix.iter().rev() {
        body = for_(i, auto(), [body]);
    }
    program([declare(DST, Expr::lit(fill.widen())), body])
}

/// Copy `src` into a new tensor of format `dst` by a compiled program.
pub fn convert(src: &Tensor, dst: &Format, drop_fills: bool) -> Result<Tensor> {
    if dst.rank() != src.rank() {
        return Err(Error::Format {
            format: dst.to_string(),
            msg: format!(
                "format has {} dimensions but the tensor has {}",
                dst.rank(),
                src.rank()
            ),
        });
    }
    let prog = copy_program(src, dst, drop_fills);
    let mut tensors = BTreeMap::new();
    tensors.insert(SRC.to_string(), src.clone());
    tensors.insert(DST.to_string(), Tensor::empty(dst, &src.shape)?);
    let formats: BTreeMap<String, Format> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    RUNNER.with(|r| {
        let c = r.compile(&prog, &formats).map_err(|e| Error::Format {
            format: dst.to_string(),
            msg: format!("cannot convert from {} in row-major order: {e}", src.format),
        })?;
        r.execute(&c, &mut tensors)
    })?;
    let mut out = tensors.remove(DST).expect("inserted above");
    // Conversions make the tensors kernels then read: record their checked coordinates.
    out.mark_coordinates();
    Ok(out)
}
