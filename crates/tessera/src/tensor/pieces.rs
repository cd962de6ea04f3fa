//! Tensors with real-valued dimensions (levels with `coord=f64`): built from and read back as
//! *pieces*, each a coordinate per dimension — an integer, or a closed [`Limit`] interval on a
//! real dimension — and a value. A real dimension spans the whole real line; outside its pieces
//! a tensor holds its fill. (Integer-only tensors read back as pieces too, one per entry.)

use super::{Tensor, check_rank};
use crate::error::{Error, Result};
use crate::levels::{Format, level_impl, real};
use crate::limit::Limit;
use crate::types::Scalar;
use std::cmp::Ordering;

/// One coordinate of a piece: the continuous evaluator's (an integer, or a closed Limit
/// interval on a real dimension), so tensors convert to its [`PieceTensor`] directly.
pub use crate::eval::continuous::Coord as PieceCoord;
use crate::eval::continuous::PieceTensor;

fn coord_order(a: &PieceCoord, b: &PieceCoord) -> Ordering {
    let lim = |x: &Limit<f64>, y: &Limit<f64>| x.partial_cmp(y).unwrap_or(Ordering::Equal);
    match (a, b) {
        (PieceCoord::Int(x), PieceCoord::Int(y)) => x.cmp(y),
        (PieceCoord::Real(w, x), PieceCoord::Real(y, z)) => lim(w, y).then(lim(x, z)),
        (PieceCoord::Int(_), PieceCoord::Real(..)) => Ordering::Less,
        (PieceCoord::Real(..), PieceCoord::Int(_)) => Ordering::Greater,
    }
}

/// A piece of a tensor: its coordinates and its value.
pub type Piece = (Vec<PieceCoord>, Scalar);

impl Tensor {
    /// Whether some dimension is real-valued.
    pub fn is_real(&self) -> bool {
        self.format.is_real()
    }

    /// Build from pieces. Integer coordinates must lie inside `shape` (whose entries for real
    /// dimensions are ignored); real ones must be valid pieces (no NaN, not empty, `+0.0` for
    /// zero); the pieces of one fiber of a real level must not overlap. Pieces with equal
    /// coordinates are refused (a tensor holds one value per point).
    pub fn from_pieces(format: &Format, shape: &[usize], pieces: &[Piece]) -> Result<Tensor> {
        check_rank(format, shape)?;
        // `[a-ε, b+ε]` holds the same reals as `[a, b]`, the form levels store.
        let normal: Vec<Piece> = pieces
            .iter()
            .map(|(cs, v)| {
                let cs = cs
                    .iter()
                    .map(|c| match *c {
                        PieceCoord::Real(a, z) => {
                            let (a, z) = real::normal(a, z);
                            PieceCoord::Real(a, z)
                        }
                        c => c,
                    })
                    .collect();
                (cs, *v)
            })
            .collect();
        let pieces = &normal[..];
        let real_dims = format.real_dims();
        let elem = format.elem();
        for (k, (coords, _)) in pieces.iter().enumerate() {
            if coords.len() != shape.len() {
                return Err(Error::tensor(
                    "",
                    format!(
                        "piece {k} has {} coordinates, the tensor {}",
                        coords.len(),
                        shape.len()
                    ),
                ));
            }
            for (d, c) in coords.iter().enumerate() {
                let bad = |m: String| Error::tensor("", format!("piece {k}, dimension {d}: {m}"));
                match (c, real_dims[d]) {
                    (PieceCoord::Int(i), false) if *i < 0 || *i as usize >= shape[d] => {
                        return Err(bad(format!("coordinate {i} is outside 0..{}", shape[d])));
                    }
                    (PieceCoord::Int(_), false) => {}
                    (PieceCoord::Real(lo, hi), true) => real::check_piece(*lo, *hi).map_err(bad)?,
                    (PieceCoord::Int(_), true) => {
                        return Err(bad("the dimension is real: give an interval".to_string()));
                    }
                    (PieceCoord::Real(..), false) => {
                        return Err(bad(
                            "the dimension is integer: give an integer coordinate".to_string()
                        ));
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..pieces.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&pieces[a].0, &pieces[b].0);
            x.iter()
                .zip(y)
                .map(|(p, q)| coord_order(p, q))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        });
        for w in order.windows(2) {
            if pieces[w[0]].0 == pieces[w[1]].0 {
                return Err(Error::tensor(
                    "",
                    format!("pieces {} and {} have the same coordinates", w[0], w[1]),
                ));
            }
        }
        let sorted: Vec<&Piece> = order.iter().map(|&k| &pieces[k]).collect();
        let mut t = Tensor::unbuilt(format, shape);
        let mut groups = vec![(0usize, 0usize, sorted.len())];
        let mut count = 1;
        let mut dim = 0;
        let level_err = |k: usize, m: String| Error::Format {
            format: format.to_string(),
            msg: format!("level {k}: {m}"),
        };
        for (k, kind) in format.levels.iter().enumerate() {
            let dims = t.level_dims(k).to_vec();
            let imp = level_impl(kind);
            let (c, g) = if kind.is_real() {
                let here: Vec<(Limit<f64>, Limit<f64>)> = sorted
                    .iter()
                    .map(|(cs, _)| match cs[dim] {
                        PieceCoord::Real(a, b) => (a, b),
                        PieceCoord::Int(_) => unreachable!("checked above"),
                    })
                    .collect();
                // Within a fiber, distinct pieces must be disjoint (sorted, so each must start
                // after the previous one ends).
                for &(_, lo, hi) in &groups {
                    for q in lo + 1..hi {
                        let (prev, cur) = (here[q - 1], here[q]);
                        if prev != cur && cur.0.partial_cmp(&prev.1) != Some(Ordering::Greater) {
                            return Err(level_err(
                                k,
                                format!(
                                    "the pieces [{}, {}] and [{}, {}] overlap",
                                    prev.0, prev.1, cur.0, cur.1
                                ),
                            ));
                        }
                    }
                }
                imp.build_pieces(kind, &mut t.levels[k], count, &groups, &here)
                    .map_err(|m| level_err(k, m))?
            } else {
                let here: Vec<Vec<i64>> = (dim..dim + kind.rank())
                    .map(|d| {
                        sorted
                            .iter()
                            .map(|(cs, _)| match cs[d] {
                                PieceCoord::Int(i) => i,
                                PieceCoord::Real(..) => unreachable!("checked above"),
                            })
                            .collect()
                    })
                    .collect();
                imp.check_entries(kind, &dims, &groups, &here)
                    .map_err(|m| level_err(k, m))?;
                imp.build(kind, &mut t.levels[k], &dims, count, &groups, &here)
            };
            count = c;
            groups = g;
            dim += kind.rank();
        }
        let leaf = format.levels.len() - 1;
        if let Some(val) = t.levels[leaf].first_mut() {
            // The leaf has been sized; write each group's value.
            for &(pos, lo, hi) in &groups {
                if hi > lo {
                    val.set(pos, sorted[lo].1.cast(elem));
                }
            }
        }
        t.merge_runs();
        Ok(t)
    }

    /// Every stored piece, in storage order: integer levels give their coordinates, real
    /// levels their Limit intervals.
    pub fn pieces(&self) -> Vec<Piece> {
        let mut out = vec![];
        let mut coords = vec![];
        self.walk_pieces(0, 0, &mut coords, &mut out);
        out
    }

    /// The tensor as the continuous reference evaluator takes it.
    pub fn to_piece_tensor(&self) -> PieceTensor {
        PieceTensor {
            real: self.format.real_dims(),
            shape: self.shape.clone(),
            fill: self.fill(),
            elem: self.elem(),
            pieces: self.pieces(),
        }
    }

    fn walk_pieces(
        &self,
        level: usize,
        pos: usize,
        coords: &mut Vec<PieceCoord>,
        out: &mut Vec<Piece>,
    ) {
        let kind = &self.format.levels[level];
        let imp = level_impl(kind);
        if kind.is_leaf() {
            out.push((
                coords.clone(),
                imp.leaf_value(kind, &self.levels[level], pos),
            ));
            return;
        }
        let bufs = &self.levels[level];
        if kind.is_real() {
            imp.for_each_piece(kind, bufs, pos, &mut |lo, hi, child| {
                coords.push(PieceCoord::Real(lo, hi));
                self.walk_pieces(level + 1, child, coords, out);
                coords.pop();
            });
            return;
        }
        let dims = self.level_dims(level).to_vec();
        if kind.rank() == 1 {
            imp.for_each_run(kind, bufs, &dims, pos, &mut |lo, hi, child| {
                for c in lo..=hi {
                    coords.push(PieceCoord::Int(c as i64));
                    self.walk_pieces(level + 1, child, coords, out);
                    coords.pop();
                }
            });
        } else {
            imp.for_each_child(kind, bufs, &dims, pos, &mut |c, child| {
                coords.extend(c.iter().map(|&i| PieceCoord::Int(i as i64)));
                self.walk_pieces(level + 1, child, coords, out);
                coords.truncate(coords.len() - c.len());
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;

    fn fmt(s: &str) -> Format {
        Format::parse(s, None).unwrap()
    }

    #[test]
    fn pinpoints_round_trip() {
        let f = fmt("SparseList(Element(0.0), coord=f64)");
        assert_eq!(f.to_string(), "SparseList(Element(0.0), coord=f64)");
        let pieces: Vec<Piece> = [3.0, 1.0, 5.1, 4.1]
            .iter()
            .map(|&x| (vec![PieceCoord::point(x)], Scalar::F64(x * 2.0)))
            .collect();
        let t = Tensor::from_pieces(&f, &[0], &pieces).unwrap();
        t.validate("x").unwrap();
        let back = t.pieces();
        let xs: Vec<f64> = back
            .iter()
            .map(|(c, _)| match c[0] {
                PieceCoord::Real(a, _) => a.val,
                _ => panic!("real"),
            })
            .collect();
        assert_eq!(xs, vec![1.0, 3.0, 4.1, 5.1]);
        assert_eq!(back[2].1, Scalar::F64(8.2));
        let interval = vec![(vec![PieceCoord::closed(1.0, 2.0)], Scalar::F64(1.0))];
        assert!(Tensor::from_pieces(&f, &[0], &interval).is_err());
    }

    #[test]
    fn runs_merge_touching_equal_pieces_and_refuse_overlaps() {
        let f = fmt("Dense(SparseRunList(Element(0.0), coord=f64))");
        let p = |row: i64, c: PieceCoord, v: f64| (vec![PieceCoord::Int(row), c], Scalar::F64(v));
        let pieces = vec![
            p(0, PieceCoord::right_open(1.0, 2.0), 1.0),
            p(0, PieceCoord::closed(2.0, 3.0), 1.0),
            p(
                0,
                PieceCoord::Real(Limit::plus_eps(3.0), Limit::exact(4.0)),
                2.0,
            ),
            p(1, PieceCoord::point(0.5), 7.0),
        ];
        let t = Tensor::from_pieces(&f, &[2, 0], &pieces).unwrap();
        t.validate("x").unwrap();
        let back = t.pieces();
        assert_eq!(back.len(), 3, "{back:?}");
        assert_eq!(back[0].0[1], PieceCoord::closed(1.0, 3.0));
        assert_eq!(
            back[1].0[1],
            PieceCoord::Real(Limit::plus_eps(3.0), Limit::exact(4.0))
        );
        let overlap = vec![
            p(0, PieceCoord::closed(1.0, 2.0), 1.0),
            p(0, PieceCoord::closed(2.0, 3.0), 2.0),
        ];
        let e = Tensor::from_pieces(&f, &[2, 0], &overlap).unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        let empty = vec![p(
            0,
            PieceCoord::Real(Limit::plus_eps(1.0), Limit::plus_eps(1.0)),
            1.0,
        )];
        assert!(Tensor::from_pieces(&f, &[2, 0], &empty).is_err());
    }
}
