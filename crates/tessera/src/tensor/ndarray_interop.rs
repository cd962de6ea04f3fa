//! Conversions to and from `ndarray` arrays (cargo feature `ndarray`): an `ArrayD` of `f64`,
//! `i64` or `bool` <-> a tensor of any format and rank.

use super::Tensor;
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::runtime::Buffer;
use crate::types::Scalar;
use ndarray::{ArrayD, IxDyn};

/// Element types that move between arrays and tensors.
pub trait ArrayElement: Copy {
    fn buffer(values: Vec<Self>) -> Buffer;
    fn from_scalar(v: Scalar) -> Self;
}

impl ArrayElement for f64 {
    fn buffer(values: Vec<f64>) -> Buffer {
        Buffer::F64(values.into())
    }
    fn from_scalar(v: Scalar) -> f64 {
        v.as_f64()
    }
}

impl ArrayElement for i64 {
    fn buffer(values: Vec<i64>) -> Buffer {
        Buffer::I64(values.into())
    }
    fn from_scalar(v: Scalar) -> i64 {
        v.as_i64()
    }
}

impl ArrayElement for bool {
    fn buffer(values: Vec<bool>) -> Buffer {
        Buffer::Bool(values.into())
    }
    fn from_scalar(v: Scalar) -> bool {
        v.as_bool()
    }
}

impl Tensor {
    /// A tensor of `format` holding the array's values (entries equal to the fill are not
    /// stored by sparse levels).
    pub fn from_ndarray<T: ArrayElement>(a: &ArrayD<T>, format: &Format) -> Result<Tensor> {
        // `iter` visits the array in logical row-major order whatever its memory layout.
        let values = T::buffer(a.iter().copied().collect());
        Tensor::from_dense(format, a.shape(), &values)
    }

    /// Every entry, fills included, as an array.
    pub fn to_ndarray<T: ArrayElement>(&self) -> Result<ArrayD<T>> {
        let d = self.to_dense();
        let values: Vec<T> = (0..d.len()).map(|k| T::from_scalar(d.get(k))).collect();
        ArrayD::from_shape_vec(IxDyn(&self.shape), values)
            .map_err(|e| Error::tensor("", format!("cannot make an array: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_round_trip_through_sparse_formats() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0.0, 1.5, 0.0, 2.0, 0.0, 0.0]).unwrap();
        let f = Format::parse("csr", None).unwrap();
        let t = Tensor::from_ndarray(&a, &f).unwrap();
        assert_eq!(t.countstored(), 2);
        assert_eq!(t.to_ndarray::<f64>().unwrap(), a);
        // A transposed view is read in its logical order.
        let at = a.t().to_owned().into_dyn();
        let tt = Tensor::from_ndarray(&at, &f).unwrap();
        assert_eq!(tt.get(&[1, 0]).unwrap(), Scalar::F64(1.5));
        let b = ArrayD::from_shape_vec(IxDyn(&[3]), vec![true, false, true]).unwrap();
        let bf = Format::parse("SparseList(Element(false))", None).unwrap();
        let tb = Tensor::from_ndarray(&b, &bf).unwrap();
        assert_eq!(tb.to_ndarray::<bool>().unwrap(), b);
        assert_eq!(
            tb.to_ndarray::<i64>().unwrap().into_raw_vec_and_offset().0,
            vec![1, 0, 1]
        );
    }
}
