//! Continuous fields reconstructed from images by convolution (issue 15, Diderot's
//! `field#k(d)[] F = img ⊛ h`): reconstruction kernels as piecewise polynomials
//! ([`kernel`]), images with their index↔world orientation ([`Image`]), and probes compiled
//! to a dense gather over each point's kernel window ([`probe`]).
//!
//! Conventions (seed-diderot-ein.md §3): an image's index position `x` and world position
//! `p` are related by `p = M x + origin`, where column `a` of `M` is the world step of index
//! axis `a`. A probe maps `x = M⁻¹ (p - origin)`, splits `x = n + f` per axis (`n = ⌊x⌋`) and
//! sums `V[n + i] h(f - i)` over taps `i = 1 - s ..= s` of each axis. Derivatives are taken
//! in index space and brought to world space with `P = M⁻ᵀ`, once per derivative index:
//! gradient `P g`, Hessian `P H Pᵀ`.

/// The kernels live with the value rules (`semantics::kernel`) so that the program
/// transform expanding probes (`transforms::fields`) can reach them; this is their old path.
pub use crate::semantics::kernel;
pub mod probe;

use crate::error::{Error, Result};
use crate::io::DenseData;
use crate::runtime::Buffer;

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
}

/// A sampled scalar image: values in C (row-major) order, the last index fastest.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub shape: Vec<usize>,
    /// One sample per index, any element type (loads widen to f64).
    pub values: Buffer,
    /// `None`: world space is index space.
    pub orientation: Option<Orientation>,
}

/// The world↔index maps of an orientation: `R = M⁻¹` and the origin.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// `R = M⁻¹` as rows: `x = R (p - origin)`.
    pub inverse: Vec<Vec<f64>>,
    pub origin: Vec<f64>,
}

impl Frame {
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

impl Image {
    /// An image of a dense array (1-, 2- or 3-d) in index space.
    pub fn from_dense(d: DenseData, path: &str) -> Result<Image> {
        Image::new(d.shape, d.values, None, path)
    }

    /// Check the dimension (1 to 3), the value count and the orientation's shape;
    /// `what` names the image in errors.
    pub fn new(
        shape: Vec<usize>,
        values: Buffer,
        orientation: Option<Orientation>,
        what: &str,
    ) -> Result<Image> {
        let d = shape.len();
        if !(1..=3).contains(&d) {
            return Err(Error::tensor(
                what,
                format!("a field needs a 1-, 2- or 3-d image, this one has {d} dimensions"),
            ));
        }
        if shape.iter().product::<usize>() != values.len() {
            return Err(Error::tensor(
                what,
                format!("{} values for an image of shape {shape:?}", values.len()),
            ));
        }
        if let Some(o) = &orientation
            && (o.origin.len() != d
                || o.directions.len() != d
                || o.directions.iter().any(|v| v.len() != d))
        {
            return Err(Error::tensor(
                what,
                format!(
                    "the orientation of a {d}-d image needs {d} directions of {d} components and a {d}-d origin"
                ),
            ));
        }
        let img = Image {
            shape,
            values,
            orientation,
        };
        img.frame(what)?;
        Ok(img)
    }

    /// Read an image file by its extension: NRRD (`.nrrd`, `.nhdr`, with its orientation),
    /// PNG (`.png`, gray, rows first) or NumPy (`.npy`).
    pub fn load(path: &std::path::Path) -> Result<Image> {
        let name = path.display().to_string();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "nrrd" | "nhdr" => {
                let n = crate::io::nrrd::read_nrrd_file(path)?;
                let orientation = match (n.directions, n.origin) {
                    (Some(directions), Some(origin)) => Some(Orientation { directions, origin }),
                    _ => None,
                };
                Image::new(n.data.shape, n.data.values, orientation, &name)
            }
            "png" | "npy" => match crate::io::read_file(path)? {
                crate::io::FileData::Dense(d) => Image::from_dense(d, &name),
                crate::io::FileData::Coo(_) => unreachable!("PNG and .npy files are dense"),
            },
            _ => Err(Error::Usage(format!(
                "{name}: unknown image file type `.{ext}` (use .nrrd, .nhdr, .png or .npy)"
            ))),
        }
    }

    pub fn dim(&self) -> usize {
        self.shape.len()
    }

    /// The world↔index maps; `None` in index space. An orientation whose matrix is singular
    /// or not finite is an error naming the image.
    pub fn frame(&self, what: &str) -> Result<Option<Frame>> {
        let Some(o) = &self.orientation else {
            return Ok(None);
        };
        let bad = || {
            Error::tensor(
                what,
                "the space directions are not finite and independent (no world→index map)",
            )
        };
        let inverse = invert(&o.matrix()).ok_or_else(bad)?;
        if inverse
            .iter()
            .flatten()
            .chain(&o.origin)
            .any(|v| !v.is_finite())
        {
            return Err(bad());
        }
        Ok(Some(Frame {
            inverse,
            origin: o.origin.clone(),
        }))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_invert_and_transform_by_the_seed_convention() {
        // M = [[2, 1], [0, 3]] (columns are the directions), origin (1, -1).
        let o = Orientation {
            directions: vec![vec![2.0, 0.0], vec![1.0, 3.0]],
            origin: vec![1.0, -1.0],
        };
        let img = Image::new(vec![2, 2], Buffer::F64(vec![0.0; 4]), Some(o), "img").unwrap();
        let f = img.frame("img").unwrap().unwrap();
        // p = M x + origin for x = (0.5, 2): p = (1 + 1 + 2, -1 + 6) = (4, 5).
        let mut x = [0.0; 2];
        f.to_index(&[4.0, 5.0], &mut x);
        assert!((x[0] - 0.5).abs() < 1e-14 && (x[1] - 2.0).abs() < 1e-14);
        // φ(p) = c · x(p) has world gradient Rᵀ c.
        let mut g = [1.0, 1.0];
        f.gradient_to_world(&mut g);
        // R = M⁻¹ = [[1/2, -1/6], [0, 1/3]]; Rᵀ (1, 1) = (1/2, -1/6 + 1/3).
        assert!((g[0] - 0.5).abs() < 1e-14 && (g[1] - 1.0 / 6.0).abs() < 1e-14);
        let singular = Orientation {
            directions: vec![vec![1.0, 2.0], vec![2.0, 4.0]],
            origin: vec![0.0, 0.0],
        };
        assert!(Image::new(vec![2, 2], Buffer::F64(vec![0.0; 4]), Some(singular), "s").is_err());
        assert!(Image::new(vec![2, 2, 2, 2], Buffer::F64(vec![0.0; 16]), None, "4d").is_err());
    }
}
