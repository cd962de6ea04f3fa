//! Test data of named kinds (empty, one entry, every coordinate stored, runs, scattered) that
//! a given format can hold: formats keeping one coordinate or one run per fiber
//! (SparsePoint, SparseInterval) get the first of them.

use super::fmt;
use rand::Rng;
use rand::rngs::StdRng;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// The length of vectors and of matrix rows.
pub const N: usize = 7;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Empty,
    One,
    Full,
    Runs,
    Scattered,
}

pub const KINDS: &[Kind] = &[
    Kind::Empty,
    Kind::One,
    Kind::Full,
    Kind::Runs,
    Kind::Scattered,
];

/// A nonzero small integer.
pub fn value(rng: &mut StdRng) -> f64 {
    [1.0, 2.0, 3.0, -1.0, -2.0][rng.random_range(0..5)]
}

pub fn raw_values(rng: &mut StdRng, kind: Kind, len: usize) -> Vec<f64> {
    let mut v = vec![0.0; len];
    match kind {
        Kind::Empty => {}
        Kind::One => {
            if len > 0 {
                v[rng.random_range(0..len)] = value(rng);
            }
        }
        Kind::Full => v.iter_mut().for_each(|x| *x = value(rng)),
        Kind::Runs => {
            let mut k = 0;
            while k < len {
                let run = rng.random_range(1..4).min(len - k);
                let x = if rng.random_bool(0.35) {
                    0.0
                } else {
                    value(rng)
                };
                v[k..k + run].iter_mut().for_each(|y| *y = x);
                k += run;
            }
        }
        Kind::Scattered => {
            let d = rng.random_range(0.2..0.8);
            v.iter_mut().for_each(|x| {
                if rng.random_bool(d) {
                    *x = value(rng)
                }
            });
        }
    }
    v
}

/// Keep only the first stored coordinate of a fiber (SparsePoint).
fn one_point(row: &mut [f64]) {
    if let Some(k) = row.iter().position(|&x| x != 0.0) {
        row[k + 1..].iter_mut().for_each(|x| *x = 0.0);
    }
}

/// Keep only the first run of equal nonzero values of a fiber (SparseInterval).
fn one_run(row: &mut [f64]) {
    if let Some(a) = row.iter().position(|&x| x != 0.0) {
        let x = row[a];
        let z = a + row[a..].iter().take_while(|&&y| y == x).count();
        row[z..].iter_mut().for_each(|y| *y = 0.0);
    }
}

/// Data of `kind` that `format` can hold: levels that keep one coordinate or one run per fiber
/// get the first of them. `rows == 0` means a vector of N.
pub fn fitted(rng: &mut StdRng, format: &str, rows: usize, kind: Kind) -> Tensor {
    let (shape, row_len) = if rows == 0 {
        (vec![N], N)
    } else {
        (vec![rows, N], N)
    };
    let mut v = raw_values(rng, kind, shape.iter().product());
    // The level a constraint applies to: the inner one (each row) or the outer one (rows).
    let inner = if rows == 0 {
        format
    } else {
        format.split_once('(').map(|x| x.1).unwrap_or("")
    };
    for row in v.chunks_mut(row_len) {
        if inner.starts_with("SparsePoint") {
            one_point(row);
        } else if inner.starts_with("SparseInterval") {
            one_run(row);
        }
    }
    if rows > 0 && format.starts_with("SparsePoint") {
        // One stored row: the first nonzero one.
        let keep = v.chunks(row_len).position(|r| r.iter().any(|&x| x != 0.0));
        for (k, row) in v.chunks_mut(row_len).enumerate() {
            if Some(k) != keep {
                row.iter_mut().for_each(|x| *x = 0.0);
            }
        }
    }
    if rows > 0 && format.starts_with("SparseInterval") {
        // One run of equal rows, starting at the first nonzero one.
        let rows_v: Vec<Vec<f64>> = v.chunks(row_len).map(|r| r.to_vec()).collect();
        let first = rows_v.iter().position(|r| r.iter().any(|&x| x != 0.0));
        for (k, row) in v.chunks_mut(row_len).enumerate() {
            let keep =
                first.is_some_and(|a| k >= a && rows_v[a..=k].iter().all(|r| *r == rows_v[a]));
            if !keep {
                row.iter_mut().for_each(|x| *x = 0.0);
            }
        }
    }
    Tensor::from_dense(&fmt(format), &shape, &Buffer::F64(v.into()))
        .unwrap_or_else(|e| panic!("{format} {kind:?}: {e}"))
}
