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

/// Orientations and frames live with the value rules (`semantics::frame`) so that the
/// program transform expanding probes (`transforms::fields`) can map world positions too.
pub use crate::semantics::frame::{Frame, Orientation};

use crate::error::{Error, Result};
use crate::io::DenseData;
use crate::runtime::Buffer;

/// A sampled scalar image: values in C (row-major) order, the last index fastest.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub shape: Vec<usize>,
    /// One sample per index, any element type (loads widen to f64).
    pub values: Buffer,
    /// `None`: world space is index space.
    pub orientation: Option<Orientation>,
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
        self.orientation.as_ref().map(|o| o.frame(what)).transpose()
    }
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
        let img = Image::new(vec![2, 2], Buffer::F64(vec![0.0; 4].into()), Some(o), "img").unwrap();
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
        assert!(
            Image::new(
                vec![2, 2],
                Buffer::F64(vec![0.0; 4].into()),
                Some(singular),
                "s"
            )
            .is_err()
        );
        assert!(
            Image::new(
                vec![2, 2, 2, 2],
                Buffer::F64(vec![0.0; 16].into()),
                None,
                "4d"
            )
            .is_err()
        );
    }
}
