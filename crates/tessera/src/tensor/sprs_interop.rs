//! Conversions to and from `sprs` matrices (cargo feature `sprs`): CSR or CSC `CsMat<f64>` <->
//! a 2-d `f64` tensor of any format. Stored entries carry over as they are, explicit zeros
//! included.

use super::Tensor;
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::runtime::Buffer;
use sprs::{CsMat, TriMat};

impl Tensor {
    /// A matrix from a `sprs` CSR or CSC matrix, stored in `format` (rank 2).
    pub fn from_sprs(m: &CsMat<f64>, format: &Format) -> Result<Tensor> {
        let mut coords = vec![vec![], vec![]];
        let mut values = vec![];
        for (&v, (r, c)) in m.iter() {
            coords[0].push(r as i64);
            coords[1].push(c as i64);
            values.push(v);
        }
        Tensor::from_coo(
            format,
            &[m.rows(), m.cols()],
            &coords,
            &Buffer::F64(values.into()),
            super::add_duplicates,
        )
    }

    /// The stored entries as a `sprs` CSR matrix (values converted to `f64`).
    pub fn to_sprs_csr(&self) -> Result<CsMat<f64>> {
        Ok(self.triplets()?.to_csr())
    }

    /// The stored entries as a `sprs` CSC matrix (values converted to `f64`).
    pub fn to_sprs_csc(&self) -> Result<CsMat<f64>> {
        Ok(self.triplets()?.to_csc())
    }

    fn triplets(&self) -> Result<TriMat<f64>> {
        if self.rank() != 2 {
            return Err(Error::tensor(
                "",
                format!(
                    "a sprs matrix has 2 dimensions, this tensor {}",
                    self.rank()
                ),
            ));
        }
        let mut t = TriMat::new((self.shape[0], self.shape[1]));
        self.for_each_stored(&mut |c, v| t.add_triplet(c[0], c[1], v.as_f64()));
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_and_csc_round_trip() {
        let m = CsMat::new((2, 3), vec![0, 2, 3], vec![0, 2, 1], vec![1.0, 0.0, 5.0]);
        let f = Format::parse("csr", None).unwrap();
        let t = Tensor::from_sprs(&m, &f).unwrap();
        // The explicit zero stays stored.
        assert_eq!(t.countstored(), 3);
        assert_eq!(
            t.to_dense(),
            Buffer::F64(vec![1.0, 0.0, 0.0, 0.0, 5.0, 0.0].into())
        );
        assert_eq!(t.to_sprs_csr().unwrap(), m);
        let csc = t.to_sprs_csc().unwrap();
        assert!(csc.is_csc());
        assert_eq!(Tensor::from_sprs(&csc, &f).unwrap(), t);
        let v = Tensor::with_format("SparseList(Element(0.0))", &[3]).unwrap();
        assert!(v.to_sprs_csr().is_err());
    }
}
