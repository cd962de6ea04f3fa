//! Constructors beyond the COO and dense builders: format strings, identity and diagonal
//! matrices, random tensors with an exact stored count, permuted copies, and the iterator over
//! stored entries.

use super::Tensor;
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::runtime::Buffer;
use crate::types::Scalar;

/// How duplicates are combined when nothing else is said: `+` for numbers (integers wrap),
/// `|` for booleans. Matrix Market files and [`Tensor::from_triplets`] use it.
pub fn add_duplicates(a: Scalar, b: Scalar) -> Scalar {
    match a.widen() {
        Scalar::Bool(x) => Scalar::Bool(x | b.as_bool()),
        Scalar::I64(x) => Scalar::I64(x.wrapping_add(b.as_i64())),
        _ => Scalar::F64(a.as_f64() + b.as_f64()),
    }
}

/// A format from its text (`csr`, `Dense(SparseList(Element(0.0)))`) for a tensor of `rank`
/// dimensions.
pub fn parse_format(text: &str, rank: usize) -> Result<Format> {
    Format::parse(text, Some(rank))
}

/// The stored entries of a tensor, in storage order (see [`Tensor::stored`]).
pub type StoredEntries = std::vec::IntoIter<(Vec<usize>, Scalar)>;

impl Tensor {
    /// An all-fill tensor of the format written as text (`"csr"`, `"Dense(Element(0))"`).
    pub fn with_format(format: &str, shape: &[usize]) -> Result<Tensor> {
        Tensor::empty(&parse_format(format, shape.len())?, shape)
    }

    /// [`Tensor::from_coo`] with the format written as text, duplicates combined by
    /// [`add_duplicates`] (`+`, or `|` for booleans). Explicit fill values stay stored until
    /// [`Tensor::dropfills`].
    pub fn from_triplets(
        format: &str,
        shape: &[usize],
        coords: &[Vec<i64>],
        values: &Buffer,
    ) -> Result<Tensor> {
        let f = parse_format(format, shape.len())?;
        Tensor::from_coo(&f, shape, coords, values, add_duplicates)
    }

    /// [`Tensor::from_dense`] with the format written as text: row-major `values`.
    pub fn from_slice(format: &str, shape: &[usize], values: &Buffer) -> Result<Tensor> {
        Tensor::from_dense(&parse_format(format, shape.len())?, shape, values)
    }

    /// The `n x n` identity matrix (ones of the format's element type on the diagonal).
    pub fn identity(n: usize, format: &Format) -> Result<Tensor> {
        let ones = Buffer::filled(format.elem(), n, Scalar::I64(1));
        Tensor::diagonal(&ones, format)
    }

    /// The square matrix with `values` on its diagonal. Values equal to the fill are stored
    /// like the others (as `from_coo` keeps explicit fills).
    pub fn diagonal(values: &Buffer, format: &Format) -> Result<Tensor> {
        let n = values.len();
        let d: Vec<i64> = (0..n as i64).collect();
        Tensor::from_coo(format, &[n, n], &[d.clone(), d], values, |_, b| b)
    }

    /// Every stored entry as (coordinates, value), in storage order (root level outermost).
    /// Dense levels store every coordinate, so a dense tensor yields all of them.
    pub fn stored(&self) -> StoredEntries {
        let mut out = vec![];
        self.for_each_stored(&mut |c, v| out.push((c.to_vec(), v)));
        out.into_iter()
    }

    /// A copy whose dimension `d` is dimension `perm[d]` of this tensor (`[1, 0]` transposes a
    /// matrix), stored in the same format. Built from the stored entries, so explicit fills
    /// stay stored.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let mut seen = vec![false; self.rank()];
        if perm.len() != self.rank() || perm.iter().any(|&p| p >= seen.len()) {
            return Err(Error::tensor(
                "",
                format!(
                    "{perm:?} is not a permutation of the {} dimensions",
                    self.rank()
                ),
            ));
        }
        for &p in perm {
            if std::mem::replace(&mut seen[p], true) {
                return Err(Error::tensor(
                    "",
                    format!("{perm:?} names dimension {p} twice"),
                ));
            }
        }
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        let mut coords = vec![vec![]; self.rank()];
        let mut values = Buffer::new(self.elem());
        self.for_each_stored(&mut |c, v| {
            for (d, &p) in perm.iter().enumerate() {
                coords[d].push(c[p] as i64);
            }
            values.push(v);
        });
        Tensor::from_coo(&self.format, &shape, &coords, &values, |_, b| b)
    }
}

/// A random tensor with exactly `count` stored entries at distinct coordinates, values uniform
/// integers in 1..=9 (exact in every element type), seeded.
pub fn random_exact(format: &Format, shape: &[usize], count: usize, seed: u64) -> Result<Tensor> {
    use rand::{Rng, SeedableRng};
    let total = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::tensor("", format!("shape {shape:?} has too many entries")))?;
    if count > total {
        return Err(Error::tensor(
            "",
            format!("{count} entries do not fit in shape {shape:?} ({total} coordinates)"),
        ));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let picked = rand::seq::index::sample(&mut rng, total, count);
    let mut coords = vec![vec![]; shape.len()];
    let mut values = Buffer::new(format.elem());
    for mut k in picked.into_iter() {
        for d in (0..shape.len()).rev() {
            coords[d].push((k % shape[d]) as i64);
            k /= shape[d];
        }
        values.push(Scalar::I64(rng.random_range(1..=9)));
    }
    Tensor::from_coo(format, shape, &coords, &values, |_, b| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_exact_stores_exactly_count_entries() {
        let f = Format::parse("Dense(SparseList(Element(0.0)))", None).unwrap();
        for count in [0, 1, 7, 30] {
            let t = random_exact(&f, &[5, 6], count, 3).unwrap();
            assert_eq!(t.countstored(), t.stored().count());
            let nonzero = t.stored().filter(|(_, v)| v.as_f64() != 0.0).count();
            assert_eq!(nonzero, count);
        }
        assert_eq!(
            random_exact(&f, &[2, 2], 9, 0).unwrap_err().to_string(),
            "9 entries do not fit in shape [2, 2] (4 coordinates)"
        );
        assert_eq!(
            random_exact(&f, &[4, 4], 5, 11).unwrap(),
            random_exact(&f, &[4, 4], 5, 11).unwrap()
        );
    }

    #[test]
    fn identity_and_diagonal() {
        let f = Format::parse("csr", None).unwrap();
        let i = Tensor::identity(3, &f).unwrap();
        assert_eq!(
            i.to_dense(),
            Buffer::F64(vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0].into())
        );
        let d = Tensor::diagonal(&Buffer::I64(vec![2, 0].into()), &f).unwrap();
        // The explicit zero stays stored until dropfills.
        assert_eq!(d.countstored(), 2);
        assert_eq!(d.dropfills(None).unwrap().countstored(), 1);
    }

    #[test]
    fn permute_transposes_and_checks_the_permutation() {
        let t = Tensor::from_triplets(
            "csr",
            &[2, 3],
            &[vec![0, 1], vec![2, 0]],
            &Buffer::F64(vec![5.0, 7.0].into()),
        )
        .unwrap();
        let p = t.permute(&[1, 0]).unwrap();
        assert_eq!(p.shape, vec![3, 2]);
        let entries: Vec<_> = p.stored().collect();
        assert_eq!(
            entries,
            vec![
                (vec![0, 1], Scalar::F64(7.0)),
                (vec![2, 0], Scalar::F64(5.0))
            ]
        );
        assert!(t.permute(&[0, 0]).is_err());
        assert!(t.permute(&[0]).is_err());
    }

    #[test]
    fn triplets_combine_duplicates_by_addition_or_or() {
        let t = Tensor::from_triplets(
            "SparseList(Element(false))",
            &[4],
            &[vec![1, 1, 3]],
            &Buffer::Bool(vec![false, true, false].into()),
        )
        .unwrap();
        assert_eq!(t.get(&[1]).unwrap(), Scalar::Bool(true));
        // The explicit `false` at 3 is kept.
        assert_eq!(t.countstored(), 2);
        let e = Tensor::from_triplets("nonsense", &[4], &[vec![]], &Buffer::F64(vec![].into()));
        assert!(matches!(e, Err(Error::Format { .. })));
    }
}
