//! Runtime passes for run-length levels: merging neighbouring runs whose sub-fibers are equal
//! (after building from coordinates and after a kernel wrote the tensor), and the conversion
//! that builds SparseInterval levels.
//!
//! Merging happens here, in the runtime, rather than in the compiled `freeze`: comparing two
//! sub-fibers of any format and dropping the merged ones (with everything below them) is plain
//! Rust over the stored arrays, and a kernel that reads a level after freezing it sees runs
//! that denote the same values, merged or not.

use super::Tensor;
use crate::error::{Error, Result};
use crate::levels::{Format, LevelKind, level_impl, sparse_interval};
use crate::limit::Limit;
use crate::runtime::Buffer;

/// Read-only view of the levels from some level down, for comparing sub-fibers.
struct View<'a> {
    kinds: &'a [LevelKind],
    bufs: &'a [Vec<Buffer>],
    dims: Vec<Vec<usize>>,
}

impl View<'_> {
    /// The children of fiber `pos` of level `k`: `(coordinates of the first, of the last,
    /// child)`; a run spans the range from the first to the last (rank-1 levels), other levels
    /// give one child per coordinate tuple.
    fn children(&self, k: usize, pos: usize) -> Vec<(Vec<usize>, Vec<usize>, usize)> {
        let (kind, imp) = (&self.kinds[k], level_impl(&self.kinds[k]));
        let mut out = vec![];
        if kind.rank() == 1 {
            imp.for_each_run(kind, &self.bufs[k], &self.dims[k], pos, &mut |lo, hi, q| {
                out.push((vec![lo], vec![hi], q))
            });
        } else {
            imp.for_each_child(kind, &self.bufs[k], &self.dims[k], pos, &mut |c, q| {
                out.push((c.to_vec(), c.to_vec(), q))
            });
        }
        out
    }

    /// The pieces of fiber `pos` of a real-valued level `k`: `(start, stop, child)` in order.
    fn pieces(&self, k: usize, pos: usize) -> Vec<(Limit<f64>, Limit<f64>, usize)> {
        let mut out = vec![];
        level_impl(&self.kinds[k]).for_each_piece(
            &self.kinds[k],
            &self.bufs[k],
            pos,
            &mut |a, z, q| out.push((a, z, q)),
        );
        out
    }

    /// Whether sub-fiber `pos` of level `k` holds only the fill value.
    fn is_fill(&self, k: usize, pos: usize) -> bool {
        match &self.kinds[k] {
            LevelKind::Element(fill) => {
                self.bufs[k][0].get(pos) == fill.cast(self.bufs[k][0].elem())
            }
            LevelKind::Pattern => false,
            kind if kind.is_real() => self
                .pieces(k, pos)
                .into_iter()
                .all(|(_, _, q)| self.is_fill(k + 1, q)),
            _ => self
                .children(k, pos)
                .into_iter()
                .all(|(_, _, q)| self.is_fill(k + 1, q)),
        }
    }

    /// Whether sub-fibers `a` and `b` of level `k` hold the same values (Finch's `isequal`:
    /// floats compare bitwise, so NaN equals NaN and 0.0 differs from -0.0).
    fn equal(&self, k: usize, a: usize, b: usize) -> bool {
        if a == b {
            return true;
        }
        match &self.kinds[k] {
            LevelKind::Element(_) => return self.bufs[k][0].get(a) == self.bufs[k][0].get(b),
            LevelKind::Pattern => return true,
            kind if kind.is_real() => return self.equal_real(k, a, b),
            _ => {}
        }
        let (xs, ys) = (self.children(k, a), self.children(k, b));
        if self.kinds[k].rank() != 1 {
            // One child per coordinate tuple, in increasing order: a merge join.
            let (mut i, mut j) = (0, 0);
            while i < xs.len() || j < ys.len() {
                let ord = match (xs.get(i), ys.get(j)) {
                    (Some(x), Some(y)) => x.0.cmp(&y.0),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    _ => std::cmp::Ordering::Greater,
                };
                let same = match ord {
                    std::cmp::Ordering::Equal => {
                        i += 1;
                        j += 1;
                        self.equal(k + 1, xs[i - 1].2, ys[j - 1].2)
                    }
                    std::cmp::Ordering::Less => {
                        i += 1;
                        self.is_fill(k + 1, xs[i - 1].2)
                    }
                    std::cmp::Ordering::Greater => {
                        j += 1;
                        self.is_fill(k + 1, ys[j - 1].2)
                    }
                };
                if !same {
                    return false;
                }
            }
            return true;
        }
        // Ranges: walk the coordinates in pieces on which each side is one child or fill.
        let runs = |v: Vec<(Vec<usize>, Vec<usize>, usize)>| -> Vec<(usize, usize, usize)> {
            v.into_iter().map(|(lo, hi, q)| (lo[0], hi[0], q)).collect()
        };
        let line = Line {
            first: 0,
            last: usize::MAX,
            prev: |x| x - 1,
            next: |x| x + 1,
        };
        line.same_pieces(&runs(xs), &runs(ys), &mut |a, b| self.same_child(k, a, b))
    }

    /// Whether the children `a` and `b` (either may be absent: fill) of a level-`k` fiber hold
    /// the same values.
    fn same_child(&self, k: usize, a: Option<usize>, b: Option<usize>) -> bool {
        match (a, b) {
            (Some(p), Some(q)) => self.equal(k + 1, p, q),
            (Some(p), None) | (None, Some(p)) => self.is_fill(k + 1, p),
            (None, None) => true,
        }
    }
}

/// The points of a level's line: its first and last (a sentinel past every piece's start)
/// and its neighbours. Integers step by one; real points by ε.
struct Line<P> {
    first: P,
    last: P,
    prev: fn(P) -> P,
    next: fn(P) -> P,
}

impl<P: Copy + PartialOrd> Line<P> {
    /// Whether two fibers given as sorted disjoint pieces `(start, stop, child)` denote the
    /// same values: walk the line in stretches on which each side is one child or fill.
    fn same_pieces(
        &self,
        xs: &[(P, P, usize)],
        ys: &[(P, P, usize)],
        same: &mut dyn FnMut(Option<usize>, Option<usize>) -> bool,
    ) -> bool {
        let (mut i, mut j, mut x) = (0, 0, self.first);
        loop {
            while i < xs.len() && xs[i].1 < x {
                i += 1;
            }
            while j < ys.len() && ys[j].1 < x {
                j += 1;
            }
            if i == xs.len() && j == ys.len() {
                return true;
            }
            let start = |v: &[(P, P, usize)], k: usize| v.get(k).map_or(self.last, |p| p.0);
            let (sa, sb) = (start(xs, i), start(ys, j));
            if x < sa && x < sb {
                x = if sa < sb { sa } else { sb };
                continue;
            }
            let ca = (x >= sa).then(|| xs[i].2);
            let cb = (x >= sb).then(|| ys[j].2);
            let end_a = if ca.is_some() {
                xs[i].1
            } else {
                (self.prev)(sa)
            };
            let end_b = if cb.is_some() {
                ys[j].1
            } else {
                (self.prev)(sb)
            };
            if !same(ca, cb) {
                return false;
            }
            let end = if end_a < end_b { end_a } else { end_b };
            if end >= self.last {
                return true;
            }
            x = (self.next)(end);
        }
    }
}

impl View<'_> {
    /// `equal` for a real-valued level: walk the line in pieces on which each side is one
    /// child or fill, as the integer walk above does with `Limit` endpoints (a pinpoint is the
    /// piece `[a, a]`).
    fn equal_real(&self, k: usize, a: usize, b: usize) -> bool {
        let line = Line {
            first: Limit::exact(f64::NEG_INFINITY),
            last: Limit::exact(f64::INFINITY),
            prev: Limit::prev,
            next: Limit::next,
        };
        let (xs, ys) = (self.pieces(k, a), self.pieces(k, b));
        line.same_pieces(&xs, &ys, &mut |a, b| self.same_child(k, a, b))
    }
}

impl Tensor {
    /// The number of positions of each level (1 for the root), cutting arrays to their
    /// logical length on the way.
    fn position_counts(&mut self) -> Vec<usize> {
        let mut counts = vec![1];
        for k in 0..self.format.levels.len() {
            let kind = self.format.levels[k].clone();
            let dims = self.level_dims(k).to_vec();
            let c = level_impl(&kind).finish(&kind, &mut self.levels[k], &dims, counts[k]);
            counts.push(c);
        }
        counts
    }

    /// Rebuild levels `from..` after level `from - 1` kept the child positions in `map`.
    fn remap_from(&mut self, from: usize, mut map: Vec<Option<usize>>) {
        for k in from..self.format.levels.len() {
            let kind = self.format.levels[k].clone();
            let dims = self.level_dims(k).to_vec();
            map = level_impl(&kind).remap(&kind, &mut self.levels[k], &dims, &map);
        }
    }

    /// Merge neighbouring runs with equal sub-fibers in every run-length level that merges
    /// (`RunList`, `SparseRunList` without `merge=false`), innermost level first.
    pub fn merge_runs(&mut self) {
        for k in (0..self.format.levels.len()).rev() {
            if !self.format.levels[k].merges() {
                continue;
            }
            let counts = self.position_counts();
            let dims: Vec<Vec<usize>> = (0..self.format.levels.len())
                .map(|j| self.level_dims(j).to_vec())
                .collect();
            let kind = self.format.levels[k].clone();
            let (upper, lower) = self.levels.split_at_mut(k + 1);
            let view = View {
                kinds: &self.format.levels[k + 1..],
                bufs: lower,
                dims: dims[k + 1..].to_vec(),
            };
            let map = level_impl(&kind).merge_runs(
                &kind,
                &mut upper[k],
                &dims[k],
                counts[k],
                &mut |a, b| view.equal(0, a, b),
            );
            if let Some(map) = map {
                self.remap_from(k + 1, map);
            }
        }
    }

    /// Build from coordinates into `format`, whose SparseInterval levels are built as merging
    /// SparseRunList levels and then converted (an error if a fiber has several runs).
    pub(super) fn build_intervals(
        format: &Format,
        build: impl Fn(&Format) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let runs = Format {
            levels: format
                .levels
                .iter()
                .map(|l| match l {
                    LevelKind::SparseInterval { coord, .. } => LevelKind::SparseRunList {
                        merge: true,
                        coord: *coord,
                    },
                    l => l.clone(),
                })
                .collect(),
        };
        let mut t = build(&runs)?;
        for k in 0..format.levels.len() {
            let LevelKind::SparseInterval { coord, half_open } = format.levels[k] else {
                continue;
            };
            let counts = t.position_counts();
            let dims = t.level_dims(k).to_vec();
            let (bufs, map) = sparse_interval::from_runs(coord, &t.levels[k], &dims, counts[k])
                .map_err(|m| Error::tensor("", m))?;
            t.levels[k] = bufs;
            t.format.levels[k] = LevelKind::SparseInterval { coord, half_open };
            t.remap_from(k + 1, map);
        }
        Ok(t)
    }
}
