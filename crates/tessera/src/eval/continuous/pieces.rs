//! Piecewise-constant tensors as the continuous evaluator sees them: a fill value and a list of
//! disjoint boxes with a value each. An integer dimension's side of a box is one coordinate; a
//! real dimension's side is a closed interval of [`Limit`] endpoints (`(a, b]` is
//! `[a + ε, b]`, a pinpoint `a` is `[a, a]`). Simple on purpose: every lookup scans the
//! pieces, every write splits the boxes it overlaps.

use crate::error::{Error, Result};
use crate::limit::{Eps, Limit};
use crate::types::{ElemType, Scalar};
use std::cmp::Ordering;

/// One side of a piece: an integer coordinate, or a closed interval `[lo, hi]` of a real
/// dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Coord {
    Int(i64),
    Real(Limit<f64>, Limit<f64>),
}

impl Coord {
    /// `[a, b]`.
    pub fn closed(a: f64, b: f64) -> Coord {
        Coord::Real(Limit::exact(a), Limit::exact(b))
    }
    /// `(a, b)`.
    pub fn open(a: f64, b: f64) -> Coord {
        Coord::Real(Limit::plus_eps(a), Limit::minus_eps(b))
    }
    /// `(a, b]`.
    pub fn left_open(a: f64, b: f64) -> Coord {
        Coord::Real(Limit::plus_eps(a), Limit::exact(b))
    }
    /// `[a, b)`.
    pub fn right_open(a: f64, b: f64) -> Coord {
        Coord::Real(Limit::exact(a), Limit::minus_eps(b))
    }
    /// The pinpoint `[a, a]`.
    pub fn point(a: f64) -> Coord {
        Coord::closed(a, a)
    }

    fn contains(&self, p: Point) -> bool {
        match (self, p) {
            (Coord::Int(c), Point::Int(i)) => *c == i,
            (Coord::Real(lo, hi), Point::Real(x)) => *lo <= x && *hi >= x,
            _ => false,
        }
    }

    fn meet(&self, o: &Coord) -> Option<Coord> {
        match (self, o) {
            (Coord::Int(a), Coord::Int(b)) => (a == b).then_some(*self),
            (Coord::Real(a, b), Coord::Real(c, d)) => {
                let (lo, hi) = (a.max(*c), b.min(*d));
                (lo <= hi).then_some(Coord::Real(lo, hi))
            }
            _ => None,
        }
    }

    fn order(&self, o: &Coord) -> Ordering {
        let lim = |a: &Limit<f64>, b: &Limit<f64>| a.partial_cmp(b).unwrap_or(Ordering::Equal);
        match (self, o) {
            (Coord::Int(a), Coord::Int(b)) => a.cmp(b),
            (Coord::Real(a, b), Coord::Real(c, d)) => lim(a, c).then(lim(b, d)),
            (Coord::Int(_), Coord::Real(..)) => Ordering::Less,
            (Coord::Real(..), Coord::Int(_)) => Ordering::Greater,
        }
    }
}

/// A point of one dimension: where an access reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Point {
    Int(i64),
    Real(f64),
}

/// A piecewise-constant tensor: `fill` outside its pieces, which are disjoint boxes.
#[derive(Clone, Debug, PartialEq)]
pub struct PieceTensor {
    /// Per dimension, whether it is real (ranging over the whole line).
    pub real: Vec<bool>,
    /// The sizes of the integer dimensions (`0..n`); ignored for real dimensions.
    pub shape: Vec<usize>,
    pub fill: Scalar,
    pub elem: ElemType,
    pub pieces: Vec<(Vec<Coord>, Scalar)>,
}

impl PieceTensor {
    /// A tensor with no pieces: `fill` (converted to `elem`) everywhere.
    pub fn new(real: Vec<bool>, shape: Vec<usize>, elem: ElemType, fill: Scalar) -> PieceTensor {
        PieceTensor {
            real,
            shape,
            fill: fill.cast(elem),
            elem,
            pieces: vec![],
        }
    }

    /// A 0-d tensor holding `v`.
    pub fn scalar(elem: ElemType, v: Scalar) -> PieceTensor {
        PieceTensor::new(vec![], vec![], elem, v)
    }

    /// Add a piece (its value converted to the element type); chains.
    pub fn with(mut self, coords: Vec<Coord>, v: Scalar) -> PieceTensor {
        self.pieces.push((coords, v.cast(self.elem)));
        self
    }

    pub fn rank(&self) -> usize {
        self.real.len()
    }

    /// The value of a 0-d tensor.
    pub fn get(&self) -> Scalar {
        self.value_at(&[])
    }

    /// The value at a point.
    pub fn value_at(&self, at: &[Point]) -> Scalar {
        self.pieces
            .iter()
            .find(|(c, _)| c.iter().zip(at).all(|(c, p)| c.contains(*p)))
            .map_or(self.fill, |(_, v)| *v)
    }

    /// The pieces a box of `bounds` meets (`None` leaves a dimension unconstrained).
    pub fn pieces_meeting<'a>(
        &'a self,
        bounds: &'a [Option<Point>],
    ) -> impl Iterator<Item = &'a (Vec<Coord>, Scalar)> + 'a {
        self.pieces.iter().filter(move |(c, _)| {
            c.iter()
                .zip(bounds)
                .all(|(c, b)| b.is_none_or(|p| c.contains(p)))
        })
    }

    /// The input rules: one side per dimension of the dimension's kind, integer coordinates
    /// inside the shape, real sides `[lo, hi]` with `lo <= hi`, `lo` closed or `+ε` and `hi`
    /// closed or `-ε` (so every piece is one of the four interval kinds), no NaN, and pieces
    /// pairwise disjoint.
    pub fn validate(&self, name: &str) -> Result<()> {
        let bad = |m: String| Err(Error::tensor(name, m));
        if self.shape.len() != self.real.len() {
            return bad(format!(
                "{} dimension kinds but {} sizes",
                self.real.len(),
                self.shape.len()
            ));
        }
        for (k, (c, _)) in self.pieces.iter().enumerate() {
            if c.len() != self.rank() {
                return bad(format!(
                    "piece {k} has {} sides for {} dimensions",
                    c.len(),
                    self.rank()
                ));
            }
            for (d, side) in c.iter().enumerate() {
                match (side, self.real[d]) {
                    (Coord::Int(i), false) => {
                        if *i < 0 || *i >= self.shape[d] as i64 {
                            return bad(format!(
                                "piece {k}: coordinate {i} is outside dimension {d} (size {})",
                                self.shape[d]
                            ));
                        }
                    }
                    (Coord::Real(lo, hi), true) => {
                        let ok = !lo.val.is_nan()
                            && !hi.val.is_nan()
                            && lo.eps != Eps::Minus
                            && hi.eps != Eps::Plus
                            && lo <= hi;
                        if !ok {
                            return bad(format!(
                                "piece {k}: [{lo}, {hi}] is not an interval of dimension {d} \
                                 (closed or open ends, lo <= hi)"
                            ));
                        }
                    }
                    _ => {
                        return bad(format!(
                            "piece {k}: dimension {d} is {} but its side is not",
                            if self.real[d] { "real" } else { "integer" }
                        ));
                    }
                }
            }
        }
        for (k, (a, _)) in self.pieces.iter().enumerate() {
            for (m, (b, _)) in self.pieces.iter().enumerate().skip(k + 1) {
                if meet(a, b).is_some() {
                    return bad(format!("pieces {k} and {m} overlap"));
                }
            }
        }
        Ok(())
    }

    /// Apply `f` to the value of every point of `region`; whether any value changed. Pieces
    /// that `region` cuts are split; pieces equal to the fill are dropped.
    pub fn update(
        &mut self,
        region: &[Coord],
        f: &mut dyn FnMut(Scalar) -> Result<Scalar>,
    ) -> Result<bool> {
        let mut out = vec![];
        let mut rest = vec![region.to_vec()];
        let mut changed = false;
        for (c, v) in std::mem::take(&mut self.pieces) {
            let Some(common) = meet(&c, region) else {
                out.push((c, v));
                continue;
            };
            out.extend(subtract(&c, &common).into_iter().map(|p| (p, v)));
            let new = f(v)?;
            changed |= new != v;
            out.push((common.clone(), new));
            rest = rest.iter().flat_map(|r| subtract(r, &common)).collect();
        }
        for r in rest {
            let new = f(self.fill)?;
            changed |= new != self.fill;
            out.push((r, new));
        }
        let fill = self.fill;
        out.retain(|(_, v)| *v != fill);
        self.pieces = out;
        Ok(changed)
    }

    /// The canonical form for comparisons: values converted to the element type, pieces equal
    /// to the fill dropped, neighbours along a real dimension merged where they touch (the
    /// point after one's `hi` is the other's `lo`) with equal values and equal other sides,
    /// and pieces sorted. Unique for tensors with at most one real dimension; with several, two
    /// boxings of one function can stay apart (compare with [`PieceTensor::same_function`]).
    pub fn canonical(&self) -> PieceTensor {
        let mut ps: Vec<(Vec<Coord>, Scalar)> = self
            .pieces
            .iter()
            .map(|(c, v)| (c.clone(), v.cast(self.elem)))
            .filter(|(_, v)| *v != self.fill.cast(self.elem))
            .collect();
        // Merge along the last dimensions first, to a fixpoint.
        for d in (0..self.rank()).rev().filter(|d| self.real[*d]) {
            loop {
                sort(&mut ps);
                let mut merged = false;
                'scan: for a in 0..ps.len() {
                    for b in 0..ps.len() {
                        if a == b || ps[a].1 != ps[b].1 {
                            continue;
                        }
                        let same_elsewhere = (0..self.rank())
                            .all(|e| e == d || ps[a].0[e].order(&ps[b].0[e]) == Ordering::Equal);
                        if let (true, Coord::Real(alo, ahi), Coord::Real(blo, bhi)) =
                            (same_elsewhere, ps[a].0[d], ps[b].0[d])
                            && ahi.next() == blo
                        {
                            ps[a].0[d] = Coord::Real(alo, bhi);
                            ps.remove(b);
                            merged = true;
                            break 'scan;
                        }
                    }
                }
                if !merged {
                    break;
                }
            }
        }
        sort(&mut ps);
        PieceTensor {
            real: self.real.clone(),
            shape: self.shape.clone(),
            fill: self.fill.cast(self.elem),
            elem: self.elem,
            pieces: ps,
        }
    }

    /// Whether two tensors are the same function (same kinds, sizes, element type, and value
    /// at every point), however their pieces are cut: both are sampled on the grid of all
    /// their endpoints (every pinpoint, a point inside every gap between them, and one
    /// coordinate of each integer dimension that no piece covers).
    pub fn same_function(&self, other: &PieceTensor) -> bool {
        if self.real != other.real || self.shape != other.shape || self.elem != other.elem {
            return false;
        }
        let mut axes: Vec<Vec<Point>> = vec![];
        for d in 0..self.rank() {
            let sides = self.pieces.iter().chain(&other.pieces).map(|(c, _)| c[d]);
            if self.real[d] {
                let mut ends: Vec<f64> = sides
                    .flat_map(|s| match s {
                        Coord::Real(lo, hi) => vec![lo.val, hi.val],
                        Coord::Int(_) => vec![],
                    })
                    .collect();
                ends.sort_by(f64::total_cmp);
                ends.dedup();
                axes.push(samples(&ends));
            } else {
                let mut used: Vec<i64> = sides
                    .filter_map(|s| match s {
                        Coord::Int(i) => Some(i),
                        Coord::Real(..) => None,
                    })
                    .collect();
                used.sort_unstable();
                used.dedup();
                let free = (0..self.shape[d] as i64).find(|i| used.binary_search(i).is_err());
                axes.push(used.into_iter().chain(free).map(Point::Int).collect());
            }
        }
        let mut at = vec![];
        grid_all(&axes, &mut at, &mut |p| {
            self.value_at(p).cast(self.elem) == other.value_at(p).cast(other.elem)
        })
    }
}

/// Points that sample every cell of the cut points `ends` (sorted): the points themselves and
/// one inside each gap, the two unbounded ends included.
pub fn samples(ends: &[f64]) -> Vec<Point> {
    let mut out = vec![];
    match (ends.first(), ends.last()) {
        (Some(&first), Some(&last)) => {
            out.push(Point::Real(first - 1.0f64.max(first.abs())));
            for w in ends.windows(2) {
                out.push(Point::Real(w[0]));
                out.push(Point::Real(w[0] + (w[1] - w[0]) / 2.0));
            }
            out.push(Point::Real(last));
            out.push(Point::Real(last + 1.0f64.max(last.abs())));
        }
        _ => out.push(Point::Real(0.0)),
    }
    out
}

fn grid_all(axes: &[Vec<Point>], at: &mut Vec<Point>, f: &mut dyn FnMut(&[Point]) -> bool) -> bool {
    let Some((first, rest)) = axes.split_first() else {
        return f(at);
    };
    for p in first {
        at.push(*p);
        let ok = grid_all(rest, at, f);
        at.pop();
        if !ok {
            return false;
        }
    }
    true
}

fn sort(ps: &mut [(Vec<Coord>, Scalar)]) {
    ps.sort_by(|(a, _), (b, _)| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.order(y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
}

/// The intersection of two boxes.
pub fn meet(a: &[Coord], b: &[Coord]) -> Option<Vec<Coord>> {
    a.iter().zip(b).map(|(x, y)| x.meet(y)).collect()
}

/// `a` without `b` (which lies inside `a`), as disjoint boxes: along each dimension in turn,
/// the parts of `a` before and after `b`, then `a` narrowed to `b` there.
fn subtract(a: &[Coord], b: &[Coord]) -> Vec<Vec<Coord>> {
    let Some(b) = meet(a, b) else {
        return vec![a.to_vec()];
    };
    let mut out = vec![];
    let mut rest = a.to_vec();
    for d in 0..a.len() {
        if let (Coord::Real(alo, ahi), Coord::Real(blo, bhi)) = (rest[d], b[d]) {
            if alo < blo {
                let mut part = rest.clone();
                part[d] = Coord::Real(alo, blo.prev());
                out.push(part);
            }
            if ahi > bhi {
                let mut part = rest.clone();
                part[d] = Coord::Real(bhi.next(), ahi);
                out.push(part);
            }
        }
        rest[d] = b[d];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pieces: &[(Coord, f64)]) -> PieceTensor {
        pieces.iter().fold(
            PieceTensor::new(vec![true], vec![0], ElemType::F64, Scalar::F64(0.0)),
            |t, (c, v)| t.with(vec![*c], Scalar::F64(*v)),
        )
    }

    #[test]
    fn overlapping_or_malformed_pieces_are_refused() {
        let over = t(&[
            (Coord::closed(1.0, 3.0), 1.0),
            (Coord::closed(3.0, 4.0), 2.0),
        ]);
        assert_eq!(
            over.validate("A").unwrap_err().to_string(),
            Error::tensor("A", "pieces 0 and 1 overlap").to_string()
        );
        // Touching through an open end is disjoint.
        let touch = t(&[
            (Coord::right_open(1.0, 3.0), 1.0),
            (Coord::closed(3.0, 4.0), 2.0),
        ]);
        assert_eq!(touch.validate("A"), Ok(()));
        let bad = t(&[(Coord::open(2.0, 2.0), 1.0)]);
        assert!(bad.validate("A").is_err());
        let int = PieceTensor::new(vec![false], vec![3], ElemType::F64, Scalar::F64(0.0))
            .with(vec![Coord::Int(3)], Scalar::F64(1.0));
        assert!(
            int.validate("B")
                .unwrap_err()
                .to_string()
                .contains("outside dimension 0")
        );
    }

    #[test]
    fn updates_split_the_pieces_they_cut() {
        let mut a = t(&[(Coord::closed(0.0, 10.0), 1.0)]);
        let changed = a
            .update(&[Coord::open(2.0, 4.0)], &mut |v| {
                Ok(Scalar::F64(v.as_f64() + 1.0))
            })
            .unwrap();
        assert!(changed);
        let pt = |x| a.value_at(&[Point::Real(x)]);
        assert_eq!(
            [pt(2.0), pt(2.5), pt(4.0), pt(10.0), pt(10.5)],
            [1.0, 2.0, 1.0, 1.0, 0.0].map(Scalar::F64)
        );
        assert_eq!(
            a.canonical().pieces,
            vec![
                (vec![Coord::closed(0.0, 2.0)], Scalar::F64(1.0)),
                (vec![Coord::open(2.0, 4.0)], Scalar::F64(2.0)),
                (vec![Coord::closed(4.0, 10.0)], Scalar::F64(1.0)),
            ]
        );
        // Writing back the old value merges again; writing the fill outside changes nothing.
        a.update(&[Coord::open(2.0, 4.0)], &mut |_| Ok(Scalar::F64(1.0)))
            .unwrap();
        assert_eq!(
            a.canonical().pieces,
            vec![(vec![Coord::closed(0.0, 10.0)], Scalar::F64(1.0))]
        );
        assert!(
            !a.update(&[Coord::closed(20.0, 30.0)], &mut Ok).unwrap(),
            "an identity update changes nothing"
        );
    }

    #[test]
    fn canonical_forms_merge_touching_equal_neighbours_only() {
        let a = t(&[
            (Coord::closed(3.0, 3.0), 1.0),
            (Coord::right_open(1.0, 3.0), 1.0),
            (Coord::left_open(3.0, 5.0), 1.0),
            (Coord::left_open(5.0, 6.0), 2.0),
            (Coord::closed(7.0, 8.0), 2.0),
            (Coord::closed(9.0, 9.5), 0.0),
        ]);
        assert_eq!(
            a.canonical().pieces,
            vec![
                (vec![Coord::closed(1.0, 5.0)], Scalar::F64(1.0)),
                (vec![Coord::left_open(5.0, 6.0)], Scalar::F64(2.0)),
                (vec![Coord::closed(7.0, 8.0)], Scalar::F64(2.0)),
            ]
        );
        assert!(a.same_function(&a.canonical()));
        assert!(!a.same_function(&t(&[(Coord::closed(1.0, 5.0), 1.0)])));
        // The open end matters: [1, 5] and [1, 5) differ at 5 only.
        assert!(
            !t(&[(Coord::closed(1.0, 5.0), 1.0)])
                .same_function(&t(&[(Coord::right_open(1.0, 5.0), 1.0)]))
        );
    }

    #[test]
    fn two_real_dimensions_compare_as_functions() {
        let two = |ps: &[([Coord; 2], f64)]| {
            ps.iter().fold(
                PieceTensor::new(
                    vec![true, true],
                    vec![0, 0],
                    ElemType::F64,
                    Scalar::F64(0.0),
                ),
                |t, (c, v)| t.with(c.to_vec(), Scalar::F64(*v)),
            )
        };
        // An L shape cut two ways.
        let a = two(&[
            ([Coord::closed(0.0, 1.0), Coord::closed(0.0, 2.0)], 1.0),
            ([Coord::left_open(1.0, 2.0), Coord::closed(0.0, 1.0)], 1.0),
        ]);
        let b = two(&[
            ([Coord::closed(0.0, 2.0), Coord::closed(0.0, 1.0)], 1.0),
            ([Coord::closed(0.0, 1.0), Coord::left_open(1.0, 2.0)], 1.0),
        ]);
        assert!(a.same_function(&b));
        let c = two(&[([Coord::closed(0.0, 2.0), Coord::closed(0.0, 2.0)], 1.0)]);
        assert!(!a.same_function(&c));
    }
}
