//! How rows (and columns) are split among ranks: a 1-D partition into contiguous ranges,
//! balanced by stored entries (so each rank gets about nnz / P of the work of a row-wise
//! kernel), and the 2-D grid of such partitions used by Sparse SUMMA.

use std::ops::Range;

/// Contiguous ranges `bounds[r]..bounds[r + 1]`, one per rank, covering `0..bounds[P]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub bounds: Vec<usize>,
}

impl Partition {
    /// `n` indices in `parts` ranges of equal length (the first `n % parts` one longer).
    pub fn even(n: usize, parts: usize) -> Partition {
        let bounds = (0..=parts).map(|r| r * n / parts.max(1)).collect();
        Partition { bounds }
    }

    /// Rows split where the running count of stored entries crosses `r * nnz / parts`: range
    /// `r` starts at the first row `i` with `entries(rows < i) * parts >= r * nnz`. A matrix
    /// with no entries is split evenly. Tests recompute ghost counts from this rule, so it is
    /// the documented contract of the partition, not an implementation detail.
    pub fn balanced(row_counts: &[usize], parts: usize) -> Partition {
        let n = row_counts.len();
        let nnz: usize = row_counts.iter().sum();
        if nnz == 0 || parts <= 1 {
            return Partition::even(n, parts.max(1));
        }
        let mut bounds = vec![0; parts + 1];
        bounds[parts] = n;
        let (mut row, mut before) = (0usize, 0u128);
        for (r, bound) in bounds.iter_mut().enumerate().take(parts).skip(1) {
            let target = r as u128 * nnz as u128;
            while row < n && before * (parts as u128) < target {
                before += row_counts[row] as u128;
                row += 1;
            }
            *bound = row;
        }
        Partition { bounds }
    }

    pub fn parts(&self) -> usize {
        self.bounds.len() - 1
    }

    pub fn range(&self, r: usize) -> Range<usize> {
        self.bounds[r]..self.bounds[r + 1]
    }

    pub fn len(&self, r: usize) -> usize {
        self.bounds[r + 1] - self.bounds[r]
    }

    /// The rank owning index `i` (the last range whose start is at most `i`; empty ranges
    /// own nothing).
    pub fn owner(&self, i: usize) -> usize {
        self.bounds[1..].partition_point(|&b| b <= i)
    }
}

/// A `rows x cols` grid of ranks (rank `r` at row `r / cols`, column `r % cols`), with the
/// matrix rows split among the grid rows and the columns among the grid columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    pub rows: usize,
    pub cols: usize,
}

impl Grid {
    /// The most square grid for `p` ranks: `√p x √p` when `p` is a square, else `p x 1`
    /// (a 1-D row layout).
    pub fn for_ranks(p: usize) -> Grid {
        let s = (p as f64).sqrt().round() as usize;
        if s * s == p {
            Grid { rows: s, cols: s }
        } else {
            Grid { rows: p, cols: 1 }
        }
    }

    pub fn coords(&self, rank: usize) -> (usize, usize) {
        (rank / self.cols, rank % self.cols)
    }

    pub fn rank(&self, row: usize, col: usize) -> usize {
        row * self.cols + col
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_splits_by_entries_and_owner_inverts_it() {
        // Row 0 holds half the entries: with two parts it is a part of its own.
        let p = Partition::balanced(&[6, 1, 1, 1, 1, 1, 1], 2);
        assert_eq!(p.bounds, vec![0, 1, 7]);
        for r in 0..p.parts() {
            for i in p.range(r) {
                assert_eq!(p.owner(i), r);
            }
        }
        let q = Partition::balanced(&[1; 10], 3);
        assert_eq!(q.bounds, vec![0, 4, 7, 10]);
        // Empty ranges own nothing: owner skips them.
        let e = Partition {
            bounds: vec![0, 0, 3, 3, 5],
        };
        assert_eq!((e.owner(0), e.owner(2), e.owner(3)), (1, 1, 3));
        assert_eq!(Partition::balanced(&[0, 0, 0], 2).bounds, vec![0, 1, 3]);
    }

    #[test]
    fn grids_are_square_when_they_can_be() {
        assert_eq!(Grid::for_ranks(4), Grid { rows: 2, cols: 2 });
        assert_eq!(Grid::for_ranks(3), Grid { rows: 3, cols: 1 });
        assert_eq!(Grid::for_ranks(1), Grid { rows: 1, cols: 1 });
        let g = Grid::for_ranks(9);
        assert_eq!(g.rank(2, 1), 7);
        assert_eq!(g.coords(7), (2, 1));
    }
}
