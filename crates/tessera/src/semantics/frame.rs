//! Where an image sits in world space (issue 15, seed-diderot-ein.md §3): an image's index
//! position `x` and world position `p` are related by `p = M x + origin`, where column `a` of
//! `M` is the world step of index axis `a`. A probe maps `x = M⁻¹ (p - origin)`; derivatives
//! taken in index space go to world space by `P = M⁻ᵀ`, once per derivative index: gradient
//! `P g`, Hessian `P H Pᵀ`.
//!
//! Here, below the program transforms, so that the expansion of probes in programs
//! (`transforms::fields`) applies the same maps as `fields::probe`.

use crate::error::{Error, Result};

/// Where an image sits in world space.
#[derive(Clone, Debug, PartialEq)]
pub struct Orientation {
    /// `directions[a]`: the world-space vector of one step along index axis `a` (column `a`
    /// of `M`); `d` vectors of `d` components.
    pub directions: Vec<Vec<f64>>,
    /// The world position of index `(0, ..., 0)`.
    pub origin: Vec<f64>,
}

impl Orientation {
    /// `M` as rows (`m[i][a]` = component `i` of direction `a`).
    fn matrix(&self) -> Vec<Vec<f64>> {
        let d = self.origin.len();
        (0..d)
            .map(|i| (0..d).map(|a| self.directions[a][i]).collect())
            .collect()
    }

    /// The world↔index maps. A matrix that is singular or not finite is an error naming
    /// `what`.
    pub fn frame(&self, what: &str) -> Result<Frame> {
        let d = self.origin.len();
        if self.directions.len() != d || self.directions.iter().any(|v| v.len() != d) {
            return Err(Error::tensor(
                what,
                format!(
                    "the orientation of a {d}-d image needs {d} directions of {d} components and a {d}-d origin"
                ),
            ));
        }
        let bad = || {
            Error::tensor(
                what,
                "the space directions are not finite and independent (no world→index map)",
            )
        };
        let inverse = invert(&self.matrix()).ok_or_else(bad)?;
        if inverse
            .iter()
            .flatten()
            .chain(&self.origin)
            .any(|v| !v.is_finite())
        {
            return Err(bad());
        }
        Ok(Frame {
            inverse,
            origin: self.origin.clone(),
        })
    }
}

/// The world↔index maps of an orientation: `R = M⁻¹` and the origin.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// `R = M⁻¹` as rows: `x = R (p - origin)`.
    pub inverse: Vec<Vec<f64>>,
    pub origin: Vec<f64>,
}

impl Frame {
    /// Whether world space is index space (`R = I`, origin 0): such a frame costs nothing
    /// and is not attached to a program's fields.
    pub fn is_identity(&self) -> bool {
        self.origin.iter().all(|&o| o == 0.0)
            && self.inverse.iter().enumerate().all(|(i, row)| {
                row.iter()
                    .enumerate()
                    .all(|(j, &v)| v == if i == j { 1.0 } else { 0.0 })
            })
    }

    pub fn dim(&self) -> usize {
        self.origin.len()
    }

    /// Index position of world position `p`.
    pub fn to_index(&self, p: &[f64], x: &mut [f64]) {
        for (i, xi) in x.iter_mut().enumerate() {
            *xi = (0..p.len())
                .map(|j| self.inverse[i][j] * (p[j] - self.origin[j]))
                .sum();
        }
    }

    /// `P t`, `P = M⁻ᵀ = Rᵀ`: a gradient in index space to world space.
    pub fn gradient_to_world(&self, g: &mut [f64]) {
        let d = g.len();
        let t: Vec<f64> = (0..d)
            .map(|i| (0..d).map(|j| self.inverse[j][i] * g[j]).sum())
            .collect();
        g.copy_from_slice(&t);
    }

    /// `P H Pᵀ` on a row-major `d × d` Hessian in index space.
    pub fn hessian_to_world(&self, h: &mut [f64]) {
        let d = self.origin.len();
        let p = |i: usize, k: usize| self.inverse[k][i];
        let mut t = vec![0.0; d * d];
        for i in 0..d {
            for j in 0..d {
                let mut s = 0.0;
                for k in 0..d {
                    for l in 0..d {
                        s += p(i, k) * h[k * d + l] * p(j, l);
                    }
                }
                t[i * d + j] = s;
            }
        }
        h.copy_from_slice(&t);
    }
}

/// The inverse of a small square matrix by Gauss-Jordan elimination with partial pivoting;
/// `None` when it is singular.
fn invert(m: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let d = m.len();
    let mut a: Vec<Vec<f64>> = m
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut r = row.clone();
            r.extend((0..d).map(|j| if i == j { 1.0 } else { 0.0 }));
            r
        })
        .collect();
    let scale = m.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for c in 0..d {
        let p = (c..d).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        // A NaN pivot is singular too.
        if a[p][c].abs().partial_cmp(&(scale * 1e-14)) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        a.swap(c, p);
        let piv = a[c][c];
        for v in &mut a[c] {
            *v /= piv;
        }
        let pivot_row = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c];
                for (x, p) in row.iter_mut().zip(&pivot_row) {
                    *x -= f * p;
                }
            }
        }
    }
    Some(a.into_iter().map(|r| r[d..].to_vec()).collect())
}
