//! Dimensions that the shape check before every run (`transforms::infer_shapes`) makes equal:
//! every dimension a `for i = _` loop's index addresses directly is the loop's extent, or the
//! run stops with a dimension mismatch. The kernel reads each class of equal dimensions into
//! one variable, so bounds built from different tensors' sizes (`size(A, 0) - 2` from a
//! permissive access, the loop's `size(C, 0) - 1`) compare symbolically.

use crate::notation::ast::{Access, Extent, Program, Stmt, StmtKind};
use crate::notation::visit;
use crate::transforms::wrapperize::is_direct;

/// A tensor's dimension: (tensor name, dimension number).
pub type Dim = (String, usize);

/// Classes (of two or more) of dimensions that are equal whenever the program runs.
pub fn equal_dims(p: &Program) -> Vec<Vec<Dim>> {
    let mut classes: Vec<Vec<Dim>> = vec![];
    loops(&p.body, &mut classes);
    classes.retain(|c| c.len() > 1);
    classes
}

fn loops(stmts: &[Stmt], classes: &mut Vec<Vec<Dim>>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                if matches!(extent, Extent::Auto) {
                    let mut dims: Vec<Dim> = vec![];
                    visit::accesses(body, &mut |a: &Access| {
                        for (k, ix) in a.indices.iter().enumerate() {
                            let d = (a.tensor.clone(), a.dim_of(k));
                            if is_direct(ix, index) && !dims.contains(&d) {
                                dims.push(d);
                            }
                        }
                    });
                    join(classes, dims);
                }
                loops(body, classes);
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                loops(then, classes);
                loops(otherwise, classes);
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => loops(body, classes),
            _ => {}
        }
    }
}

/// Merge `dims` and every class it meets into one class.
fn join(classes: &mut Vec<Vec<Dim>>, dims: Vec<Dim>) {
    let mut merged = dims;
    let mut k = 0;
    while k < classes.len() {
        if classes[k].iter().any(|d| merged.contains(d)) {
            for d in classes.remove(k) {
                if !merged.contains(&d) {
                    merged.push(d);
                }
            }
        } else {
            k += 1;
        }
    }
    classes.push(merged);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn classes(text: &str) -> Vec<Vec<Dim>> {
        let mut c = equal_dims(&parse_program(text).unwrap());
        for x in &mut c {
            x.sort();
        }
        c.sort();
        c
    }

    fn dim(t: &str, d: usize) -> Dim {
        (t.to_string(), d)
    }

    #[test]
    fn auto_loops_join_their_direct_dimensions() {
        let c = classes(
            "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j] + coalesce(z[~(j - 1)], 0)\nend\n",
        );
        assert_eq!(
            c,
            vec![
                vec![dim("A", 0), dim("y", 0)],
                vec![dim("A", 1), dim("x", 0)]
            ]
        );
        // Swizzles address the permuted dimension; loops sharing a dimension merge.
        let c = classes(
            "for i = _, j = _\n  C[i, j] = swizzle(A, 1, 0)[i, j]\nend\nfor k = _\n  v[k] = C[0, k] + w[k]\nend\n",
        );
        assert_eq!(
            c,
            vec![
                vec![dim("A", 0), dim("C", 1), dim("v", 0), dim("w", 0)],
                vec![dim("A", 1), dim("C", 0)]
            ]
        );
        // Explicit ranges are not checked against the dimensions they index.
        assert!(classes("for i = 0:n\n  y[i] = x[i]\nend\n").is_empty());
    }
}
