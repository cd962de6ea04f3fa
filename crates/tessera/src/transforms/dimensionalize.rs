//! Dimensionalization: every loop index gets an extent and every tensor a shape. An index's
//! extent is the meet of its explicit range and the dimensions of every tensor it indexes
//! directly; a tensor without a shape (an output) takes the extents of the indices that write
//! it. Disagreements are `DimensionMismatch` errors naming both sides.
//!
//! A window `A[(lo:hi)(i)]` is a dimension of size `hi - lo + 1` for `i`; it takes part when
//! that size is the same for every value of the names in `lo` and `hi` (`(2:4)`, `(j:j+2)`,
//! `(0:size(A, 0) - 2)`), and a window whose bounds are constants must lie inside `A`. A
//! swizzled access `swizzle(A, p...)[...]` indexes dimension `p[k]` of `A` with index `k`.

use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AccessIndex, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind,
};
use crate::notation::visit;
use crate::semantics::Builtin;
use crate::transforms::linear;
use crate::transforms::wrapperize::{is_direct, window_uses};
use crate::types::Scalar;
use std::collections::HashMap;

/// Shapes of all tensors: `known` ones are checked, unknown ones (`None`) are inferred.
pub fn infer_shapes(
    p: &Program,
    shapes: &HashMap<String, Option<Vec<usize>>>,
) -> Result<HashMap<String, Vec<usize>>> {
    infer_shapes_with(p, shapes, &HashMap::new())
}

/// [`infer_shapes`] knowing the `values` of integer scalars the program only reads (`--scalar
/// m=3`): loop bounds that use them are constants, so `for i = 0:m - 1` sizes what `i` indexes
/// and must agree with it, as a literal range does.
pub fn infer_shapes_with(
    p: &Program,
    shapes: &HashMap<String, Option<Vec<usize>>>,
    values: &HashMap<String, i64>,
) -> Result<HashMap<String, Vec<usize>>> {
    let mut d = Dims {
        shapes: shapes.clone(),
        extents: HashMap::new(),
        partial: HashMap::new(),
        values: values.clone(),
    };
    // A tensor without a shape accessed with no indices is 0-d.
    visit::accesses(&p.body, &mut |a: &Access| {
        if a.indices.is_empty()
            && let Some(s @ None) = d.shapes.get_mut(&a.tensor)
        {
            *s = Some(vec![]);
        }
    });
    // Two rounds: output shapes found in the first can size loops of the second.
    for _ in 0..2 {
        d.stmts(&p.body)?;
    }
    d.windows_inside(&p.body)?;
    constant_indices_inside(&p.body, &|t: &str, k: usize| d.size(t, k))?;
    let mut out = HashMap::new();
    let mut unknown: Vec<&String> = vec![];
    for (name, shape) in &d.shapes {
        match shape {
            Some(s) => {
                out.insert(name.clone(), s.clone());
            }
            None => unknown.push(name),
        }
    }
    // Report the first such tensor in name order, at its first access in the program.
    if let Some(name) = unknown.into_iter().min() {
        let mut span = None;
        visit::accesses(&p.body, &mut |a: &Access| {
            if span.is_none() && a.tensor == *name {
                span = Some(a.span);
            }
        });
        return Err(Error::Program {
            span: span.unwrap_or_default(),
            msg: format!(
                "could not infer the shape of `{name}`: give it with --shape {name}=D1xD2..."
            ),
        });
    }
    Ok(out)
}

struct Dims {
    shapes: HashMap<String, Option<Vec<usize>>>,
    /// Extent (stop + 1, from 0) of each loop index, with where it came from.
    extents: HashMap<String, (usize, String)>,
    /// Dimensions found so far of tensors being inferred.
    partial: HashMap<String, Vec<Option<usize>>>,
    /// Values of the scalars the program only reads.
    values: HashMap<String, i64>,
}

impl Dims {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        for s in stmts {
            match &s.kind {
                StmtKind::Loop {
                    index,
                    extent,
                    body,
                    ..
                } => {
                    self.loop_extent(index, extent, body, s.span)?;
                    self.stmts(body)?;
                    self.size_outputs(body, index);
                }
                StmtKind::If {
                    then, otherwise, ..
                } => {
                    self.stmts(then)?;
                    self.stmts(otherwise)?;
                }
                StmtKind::Let { body, .. } | StmtKind::Block(body) => self.stmts(body)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn loop_extent(
        &mut self,
        index: &str,
        extent: &Extent,
        body: &[Stmt],
        span: Span,
    ) -> Result<()> {
        let mut found: Option<(usize, String)> = match extent {
            Extent::Range(a, stop) => match (self.constant(a), self.constant(stop)) {
                (Some(0), Some(b)) => {
                    // Name the bound as written when it is not a literal (`0:m - 1 = 0:2`).
                    let written = stop.to_string();
                    let range = if written == b.to_string() {
                        format!("the range 0:{b}")
                    } else {
                        format!("the range 0:{written} = 0:{b}")
                    };
                    Some(((b + 1).max(0) as usize, range))
                }
                (Some(a), Some(b)) => return self.inside(index, a, b, body),
                _ => return Ok(()),
            },
            Extent::Auto => None,
        };
        let mut err = None;
        let mut meet = |n: usize, here: String, span: Span| match &found {
            None => found = Some((n, here)),
            Some((m, there)) if *m != n && err.is_none() => {
                err = Some(Error::DimensionMismatch {
                    span,
                    msg: format!("index `{index}` ranges over {there} but also over {here}"),
                });
            }
            _ => {}
        };
        visit::accesses(body, &mut |a: &Access| {
            for (k, ix) in a.indices.iter().enumerate() {
                if !is_direct(ix, index) {
                    continue;
                }
                let Some(Some(shape)) = self.shapes.get(&a.tensor) else {
                    continue;
                };
                let d = a.dim_of(k);
                let Some(&n) = shape.get(d) else { continue };
                meet(
                    n,
                    format!("dimension {d} of `{}` (size {n})", a.tensor),
                    a.span,
                );
            }
        });
        let windows = window_uses(body, index);
        for w in &windows {
            let Some(n) = linear::window_size(w.lo, w.hi, &|t, d| self.size(t, d)) else {
                continue;
            };
            let here = format!(
                "the window {}:{} of dimension {} of `{}` (size {n})",
                w.lo, w.hi, w.dim, w.tensor
            );
            meet(n as usize, here, w.span);
        }
        if let Some(e) = err {
            return Err(e);
        }
        match found {
            Some(f) => {
                self.extents.insert(index.to_string(), f);
                Ok(())
            }
            None if self.extents.contains_key(index) => Ok(()),
            // A window whose size depends on other indices: the loop is sized when it runs.
            None if !windows.is_empty() => Ok(()),
            None => {
                // Maybe an output shape found later sizes it; the second round decides.
                if self.shapes.values().all(|s| s.is_some()) {
                    return Err(Error::Program {
                        span,
                        msg: format!("could not resolve the extent of index `{index}`"),
                    });
                }
                Ok(())
            }
        }
    }

    /// A loop over `a:b` (not from 0) must stay inside every dimension its index addresses.
    fn inside(&self, index: &str, a: i64, b: i64, body: &[Stmt]) -> Result<()> {
        let mut err = None;
        visit::accesses(body, &mut |acc: &Access| {
            for (k, ix) in acc.indices.iter().enumerate() {
                let d = acc.dim_of(k);
                if err.is_some() || !is_direct(ix, index) {
                    continue;
                }
                if let Some(n) = self.size(&acc.tensor, d)
                    && a <= b
                    && (a < 0 || b >= n as i64)
                {
                    err = Some(Error::DimensionMismatch {
                        span: acc.span,
                        msg: format!(
                            "index `{index}` ranges over {a}:{b}, outside dimension {d} of `{}` (size {n})",
                            acc.tensor
                        ),
                    });
                }
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// Unknown-shape tensors written through `index` take its extent.
    fn size_outputs(&mut self, body: &[Stmt], index: &str) {
        let Some((n, _)) = self.extents.get(index).cloned() else {
            return;
        };
        let mut updates = vec![];
        visit::accesses(body, &mut |a: &Access| {
            if let Some(None) = self.shapes.get(&a.tensor) {
                for (k, ix) in a.indices.iter().enumerate() {
                    if is_direct(ix, index) {
                        updates.push((a.tensor.clone(), a.dim_of(k), a.indices.len()));
                    }
                }
            }
        });
        for (t, d, rank) in updates {
            let partial = self
                .partial
                .entry(t.clone())
                .or_insert_with(|| vec![None; rank]);
            if d < partial.len() {
                partial[d] = Some(n);
            }
            if partial.iter().all(|x| x.is_some()) {
                let shape = partial.iter().map(|x| x.unwrap_or(0)).collect();
                self.shapes.insert(t, Some(shape));
            }
        }
    }

    /// The value of `e` if it is the same on every run: literals, known sizes and scalars.
    fn constant(&self, e: &Expr) -> Option<i64> {
        let e = with_values(e, &self.values);
        linear::constant(&e, &|t, d| self.size(t, d))
    }

    /// The extent of dimension `d` of `t`, if known.
    fn size(&self, t: &str, d: usize) -> Option<usize> {
        self.shapes.get(t)?.as_ref()?.get(d).copied()
    }

    /// Windows with constant bounds must lie inside their tensor (an empty one anywhere).
    fn windows_inside(&self, body: &[Stmt]) -> Result<()> {
        let mut err = None;
        visit::accesses(body, &mut |a: &Access| {
            for (k, ix) in a.indices.iter().enumerate() {
                let Some((lo, hi)) = &ix.window else { continue };
                let d = a.dim_of(k);
                let (Some(l), Some(h), Some(n)) = (
                    self.constant(lo),
                    self.constant(hi),
                    self.size(&a.tensor, d),
                ) else {
                    continue;
                };
                if err.is_none() && l <= h && (l < 0 || h >= n as i64) {
                    err = Some(window_outside(&a.tensor, a.span, l, h, d, n));
                }
            }
        });
        err.map_or(Ok(()), Err)
    }
}

/// `e` with the known scalars replaced by their values.
fn with_values(e: &Expr, values: &HashMap<String, i64>) -> Expr {
    if values.is_empty() {
        return e.clone();
    }
    let kind = match &e.kind {
        ExprKind::Name(n) => match values.get(n) {
            Some(v) => ExprKind::Literal(Scalar::I64(*v)),
            None => return e.clone(),
        },
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(with_values(x, values))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(
            *op,
            Box::new(with_values(x, values)),
            Box::new(with_values(y, values)),
        ),
        // `size(A, d)` names a tensor, not a value.
        ExprKind::Call(f, args) if f != Builtin::Size.name() => ExprKind::Call(
            f.clone(),
            args.iter().map(|a| with_values(a, values)).collect(),
        ),
        _ => return e.clone(),
    };
    Expr::new(kind, e.span)
}

/// Every constant index (`A[99]`, `A[size(A, 0)]`: the same whatever the names in it are)
/// must lie inside its dimension. This runs before a kernel runs and before the evaluator
/// starts, so a read whose value the compiler folds away (`x[j] * 0 * A[j, 99]`) or that sits
/// in code that never runs is an error in every backend alike. Permissive indices (`A[~99]`
/// reads `missing`) and positions inside windows (checked as windows) are exempt.
pub fn constant_indices_inside(body: &[Stmt], sizes: linear::Sizes) -> Result<()> {
    let mut err = None;
    visit::accesses(body, &mut |a: &Access| {
        for (k, ix) in a.indices.iter().enumerate() {
            if err.is_some() || ix.permissive || ix.window.is_some() {
                continue;
            }
            let d = a.dim_of(k);
            let (Some(v), Some(n)) = (linear::constant(&ix.expr, sizes), sizes(&a.tensor, d))
            else {
                continue;
            };
            if v < 0 || v >= n as i64 {
                err = Some(index_outside(&a.tensor, ix, v, d, n));
            }
        }
    });
    err.map_or(Ok(()), Err)
}

/// The error for an index of value `v` outside dimension `dim` (of size `n`) of `tensor`; the
/// reference evaluator reports the same when it reaches such an access.
pub fn index_outside(tensor: &str, ix: &AccessIndex, v: i64, dim: usize, n: usize) -> Error {
    let what = match &ix.expr.kind {
        ExprKind::Name(name) => format!("index `{name}`"),
        _ => format!("index {dim}"),
    };
    Error::tensor(
        tensor,
        format!(
            "{}: {what} = {v} is out of bounds for dimension {dim} of size {n}",
            ix.expr.span
        ),
    )
}

/// The error for a non-empty window `lo:hi` that leaves dimension `dim` (of size `n`) of
/// `tensor`; the reference evaluator reports the same when it reaches the access.
pub fn window_outside(tensor: &str, span: Span, lo: i64, hi: i64, dim: usize, n: usize) -> Error {
    Error::tensor(
        tensor,
        format!("{span}: the window {lo}:{hi} leaves dimension {dim} (size {n})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn infer(
        text: &str,
        known: &[(&str, &[usize])],
        unknown: &[&str],
    ) -> Result<HashMap<String, Vec<usize>>> {
        let mut shapes: HashMap<String, Option<Vec<usize>>> = known
            .iter()
            .map(|(n, s)| (n.to_string(), Some(s.to_vec())))
            .collect();
        for n in unknown {
            shapes.insert(n.to_string(), None);
        }
        infer_shapes(&parse_program(text).unwrap(), &shapes)
    }

    #[test]
    fn windows_size_outputs_and_swizzles_permute_dimensions() {
        let s = infer(
            "for i = _\n  y[i] = x[(2:4)(i)]\nend",
            &[("x", &[9])],
            &["y"],
        )
        .unwrap();
        assert_eq!(s["y"], vec![3]);
        let s = infer(
            "for i = _, j = _\n  swizzle(B, 1, 0)[i, j] = A[i, (1:2)(j)]\nend",
            &[("A", &[4, 6])],
            &["B"],
        )
        .unwrap();
        assert_eq!(s["B"], vec![2, 4]);
        let s = infer(
            "for j = _, i = _\n  y[j] += x[(j:j + 2)(i)] * w[i]\nend",
            &[("x", &[9]), ("w", &[3])],
            &["y"],
        );
        // `j` is sized by nothing but the output, which nothing sizes.
        assert!(s.is_err());
    }

    #[test]
    fn windows_meet_other_extents() {
        let e = infer(
            "for j = _, i = _\n  y[j] += x[(j:j + 3)(i)] * w[i]\nend",
            &[("x", &[9]), ("w", &[3]), ("y", &[6])],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "2:11: dimension mismatch: index `i` ranges over dimension 0 of `w` (size 3) but also over the window j:j + 3 of dimension 0 of `x` (size 4)"
        );
        let e = infer(
            "for i = 0:3\n  s[] += swizzle(A, 1, 0)[(0:size(A, 0) - 1)(i), 0]\nend",
            &[("A", &[2, 5]), ("s", &[])],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "2:10: dimension mismatch: index `i` ranges over the range 0:3 but also over the window 0:size(A, 0) - 1 of dimension 1 of `A` (size 2)"
        );
        let e = infer(
            "for i = _\n  s[] += x[(0:size(x, 0))(i)]\nend",
            &[("x", &[4]), ("s", &[])],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor `x`: 2:10: the window 0:4 leaves dimension 0 (size 4)"
        );
        // Empty windows may sit anywhere; sizes that depend on values are left to run time.
        infer(
            "for i = _\n  s[] += x[(9:8)(i)]\nend",
            &[("x", &[4]), ("s", &[])],
            &[],
        )
        .unwrap();
        infer(
            "for j = 0:1, i = _\n  s[] += x[(0:j)(i)]\nend",
            &[("x", &[4]), ("s", &[])],
            &[],
        )
        .unwrap();
    }
}
