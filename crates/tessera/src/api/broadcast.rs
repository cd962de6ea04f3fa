//! NumPy broadcasting: shapes are aligned from the right and a size-1 (or missing) dimension
//! stretches to the other operands' extent. An einsum index has one extent, so an input that
//! broadcasts along a dimension is read through a lower-rank copy without that dimension
//! (the access simply omits the index); a 0-d input is read as `X[]`.

use crate::error::{Error, Result};
use crate::levels::{Format, LevelKind};
use crate::notation::ast::Span;
use crate::runtime::Buffer;
use crate::tensor::Tensor;

/// The broadcast shape of `shapes`, or a `DimensionMismatch` naming the two that disagree.
pub fn broadcast_shape(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1; rank];
    let mut from: Vec<Option<usize>> = vec![None; rank];
    for (k, s) in shapes.iter().enumerate() {
        for (d, &n) in s.iter().enumerate() {
            let o = d + rank - s.len();
            if n == 1 {
                continue;
            }
            match from[o] {
                Some(j) if out[o] != n => {
                    return Err(Error::DimensionMismatch {
                        span: Span::default(),
                        msg: format!(
                            "shapes {:?} and {:?} do not broadcast: dimension {} of the result is {} in one and {n} in the other",
                            shapes[j], s, o, out[o]
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    out[o] = n;
                    from[o] = Some(k);
                }
            }
        }
    }
    Ok(out)
}

/// Which dimensions of a tensor of `shape` an access keeps under the broadcast shape `out`
/// (`false`: a size-1 dimension stretched to another extent), and the result dimension each
/// kept one is indexed by.
pub fn kept_dims(shape: &[usize], out: &[usize]) -> Vec<Option<usize>> {
    let lead = out.len() - shape.len();
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| (n == out[d + lead]).then_some(d + lead))
        .collect()
}

/// A copy of `t` without the dimensions where `keep` is false (each of extent 1), in the
/// same level kinds minus the dropped ones (a `SparseCOO{N}` level loses one coordinate).
pub fn squeeze(t: &Tensor, keep: &[bool]) -> Result<Tensor> {
    if keep.iter().all(|&k| k) {
        return Ok(t.clone());
    }
    let mut levels = vec![];
    let mut d = 0;
    for kind in &t.format.levels {
        let kept = keep[d..d + kind.rank()].iter().filter(|&&k| k).count();
        d += kind.rank();
        match kind {
            _ if kind.is_leaf() => levels.push(kind.clone()),
            LevelKind::SparseCOO(_) if kept > 0 => levels.push(LevelKind::SparseCOO(kept)),
            _ if kept == 1 => levels.push(kind.clone()),
            _ => {}
        }
    }
    let format = Format::new(levels)?;
    let shape: Vec<usize> = keep
        .iter()
        .zip(&t.shape)
        .filter(|(k, _)| **k)
        .map(|(_, n)| *n)
        .collect();
    let mut coords = vec![vec![]; shape.len()];
    let mut values = Buffer::new(t.elem());
    t.for_each_stored(&mut |c, v| {
        let kept = c.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x);
        for (out, x) in coords.iter_mut().zip(kept) {
            out.push(x as i64);
        }
        values.push(v);
    });
    Tensor::from_coo(&format, &shape, &coords, &values, |_, b| b)
}

/// `t` with a dimension of extent 1 inserted wherever `kept` is false (`kept` has one entry
/// per dimension of the result, true for each of `t`'s in order). A new dimension becomes a
/// dense level, or joins the `SparseCOO` level whose coordinates it falls among.
pub fn unsqueeze(t: &Tensor, kept: &[bool]) -> Result<Tensor> {
    let mut levels = vec![];
    let mut d = 0;
    let mut units = kept.iter().take_while(|k| !**k).count();
    levels.extend(std::iter::repeat_n(LevelKind::Dense, units));
    let mut at = units;
    for kind in &t.format.levels {
        if kind.is_leaf() {
            levels.push(kind.clone());
            break;
        }
        // The result dimensions this level spans, and the unit ones after its last.
        let mut spanned = 0;
        let mut inside = 0;
        while spanned < kind.rank() {
            if kept[at] {
                spanned += 1;
            } else {
                inside += 1;
            }
            at += 1;
        }
        d += kind.rank();
        units = kept[at..].iter().take_while(|k| !**k).count();
        at += units;
        levels.push(match kind {
            LevelKind::SparseCOO(n) => LevelKind::SparseCOO(n + inside),
            _ => kind.clone(),
        });
        levels.extend(std::iter::repeat_n(LevelKind::Dense, units));
    }
    debug_assert_eq!(d, t.rank());
    let format = Format::new(levels)?;
    let mut shape = vec![1; kept.len()];
    let positions: Vec<usize> = (0..kept.len()).filter(|&p| kept[p]).collect();
    for (&p, &n) in positions.iter().zip(&t.shape) {
        shape[p] = n;
    }
    let mut coords = vec![vec![]; kept.len()];
    let mut values = Buffer::new(t.elem());
    t.for_each_stored(&mut |c, v| {
        for (p, out) in coords.iter_mut().enumerate() {
            out.push(
                positions
                    .iter()
                    .position(|&q| q == p)
                    .map_or(0, |j| c[j] as i64),
            );
        }
        values.push(v);
    });
    Tensor::from_coo(&format, &shape, &coords, &values, |_, b| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_align_from_the_right() {
        assert_eq!(broadcast_shape(&[&[3, 1], &[4]]).unwrap(), vec![3, 4]);
        assert_eq!(broadcast_shape(&[&[], &[2, 0]]).unwrap(), vec![2, 0]);
        assert_eq!(broadcast_shape(&[&[1], &[0]]).unwrap(), vec![0]);
        let e = broadcast_shape(&[&[2, 3], &[4, 3]])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[2, 3]") && e.contains("[4, 3]"), "{e}");
    }

    #[test]
    fn squeezing_keeps_the_level_kinds() {
        let t = Tensor::from_triplets(
            "SparseCOO{3}(Element(0.0))",
            &[2, 1, 3],
            &[vec![0, 1], vec![0, 0], vec![2, 1]],
            &Buffer::F64(vec![1.0, 2.0].into()),
        )
        .unwrap();
        let s = squeeze(&t, &[true, false, true]).unwrap();
        assert_eq!(s.format.to_string(), "SparseCOO{2}(Element(0.0))");
        let back = unsqueeze(&s, &[true, false, true]).unwrap();
        assert_eq!(back.format, t.format);
        assert_eq!(back.to_dense(), t.to_dense());
        let csr = Tensor::from_triplets(
            "csr",
            &[2, 3],
            &[vec![1], vec![2]],
            &Buffer::F64(vec![5.0].into()),
        )
        .unwrap();
        let u = unsqueeze(&csr, &[false, true, false, true, false]).unwrap();
        assert_eq!(u.shape, vec![1, 2, 1, 3, 1]);
        assert_eq!(
            u.format.to_string(),
            "Dense(Dense(Dense(SparseList(Dense(Element(0.0))))))"
        );
        assert_eq!(u.get(&[0, 1, 0, 2, 0]).unwrap(), csr.get(&[1, 2]).unwrap());
        assert_eq!(
            s.to_dense(),
            Buffer::F64(vec![0.0, 0.0, 1.0, 0.0, 2.0, 0.0].into())
        );
    }
}
