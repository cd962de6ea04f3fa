//! Dimensionalization: every loop index gets an extent and every tensor a shape. An index's
//! extent is the meet of its explicit range and the dimensions of every tensor it indexes
//! directly; a tensor without a shape (an output) takes the extents of the indices that write
//! it. Disagreements are `DimensionMismatch` errors naming both sides.

use crate::error::{Error, Result};
use crate::lower::const_value;
use crate::notation::ast::{Access, ExprKind, Extent, Program, Span, Stmt, StmtKind};
use crate::notation::visit;
use std::collections::HashMap;

/// Shapes of all tensors: `known` ones are checked, unknown ones (`None`) are inferred.
pub fn infer_shapes(
    p: &Program,
    shapes: &HashMap<String, Option<Vec<usize>>>,
) -> Result<HashMap<String, Vec<usize>>> {
    let mut d = Dims {
        shapes: shapes.clone(),
        extents: HashMap::new(),
        partial: HashMap::new(),
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
    let mut out = HashMap::new();
    for (name, shape) in &d.shapes {
        match shape {
            Some(s) => {
                out.insert(name.clone(), s.clone());
            }
            None => {
                return Err(Error::Program {
                    span: Span::default(),
                    msg: format!(
                        "could not infer the shape of `{name}`: give it with --shape {name}=D1xD2..."
                    ),
                });
            }
        }
    }
    Ok(out)
}

struct Dims {
    shapes: HashMap<String, Option<Vec<usize>>>,
    /// Extent (stop + 1, from 0) of each loop index, with where it came from.
    extents: HashMap<String, (usize, String)>,
    /// Dimensions found so far of tensors being inferred.
    partial: HashMap<String, Vec<Option<usize>>>,
}

impl Dims {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        for s in stmts {
            match &s.kind {
                StmtKind::Loop {
                    index,
                    extent,
                    body,
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
            Extent::Range(a, b) => match (const_value(a), const_value(b)) {
                (Some(a), Some(b)) if a.as_i64() == 0 => Some((
                    (b.as_i64() + 1).max(0) as usize,
                    format!("the range 0:{}", b.as_i64()),
                )),
                _ => return Ok(()),
            },
            Extent::Auto => None,
        };
        let mut err = None;
        visit::accesses(body, &mut |a: &Access| {
            for (d, ix) in a.indices.iter().enumerate() {
                if ix.permissive || !matches!(&ix.expr.kind, ExprKind::Name(n) if n == index) {
                    continue;
                }
                let Some(Some(shape)) = self.shapes.get(&a.tensor) else {
                    continue;
                };
                let Some(&n) = shape.get(d) else { continue };
                let here = format!("dimension {d} of `{}` (size {n})", a.tensor);
                match &found {
                    None => found = Some((n, here)),
                    Some((m, there)) if *m != n && err.is_none() => {
                        err = Some(Error::DimensionMismatch {
                            span: a.span,
                            msg: format!(
                                "index `{index}` ranges over {there} but also over {here}"
                            ),
                        });
                    }
                    _ => {}
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        match found {
            Some(f) => {
                self.extents.insert(index.to_string(), f);
                Ok(())
            }
            None if self.extents.contains_key(index) => Ok(()),
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

    /// Unknown-shape tensors written through `index` take its extent.
    fn size_outputs(&mut self, body: &[Stmt], index: &str) {
        let Some((n, _)) = self.extents.get(index).cloned() else {
            return;
        };
        let mut updates = vec![];
        visit::accesses(body, &mut |a: &Access| {
            if let Some(None) = self.shapes.get(&a.tensor) {
                for (d, ix) in a.indices.iter().enumerate() {
                    if matches!(&ix.expr.kind, ExprKind::Name(m) if m == index) && !ix.permissive {
                        updates.push((a.tensor.clone(), d, a.indices.len()));
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
}
