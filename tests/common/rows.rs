//! Row-major test matrices with chosen row lengths and values whose every change of summation
//! order shows in the bits (`tests/interleave.rs`, `tests/fill_sink.rs`).

use super::fmt;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Columns of the test matrices: prime, so `(i * 5 + t * 7) % COLS` are distinct for
/// `t < COLS`.
pub const COLS: usize = 211;

/// A small deterministic generator (no dependence on a crate's stream across versions).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// Values of widely different magnitudes and both signs, so that any change in the
    /// order of a row's sum changes its bits.
    pub fn value(&mut self) -> f64 {
        let m = (self.next() % 1000) as f64 / 7.0 + 0.5;
        let e = (self.next() % 40) as i32 - 20;
        let s = if self.next().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        s * m * 2f64.powi(e)
    }
}

/// A `lengths.len() x COLS` matrix whose row `i` stores `lengths[i]` entries. With
/// `special`, x is 1 at even columns and 0 at odd ones, some rows put `+3`, `-3`, `+3`, ...
/// at their even columns (sums that are often exactly zero) and some start with an infinite
/// entry (a NaN IEEE product where x is 0): both take the re-run with strong-zero products.
pub fn matrix(format: &str, lengths: &[usize], seed: u64, special: bool) -> Tensor {
    let mut rng = Lcg(seed);
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for (i, &len) in lengths.iter().enumerate() {
        let len = len.min(COLS);
        let mut cs: Vec<usize> = (0..len).map(|t| (i * 5 + t * 7) % COLS).collect();
        cs.sort_unstable();
        let mut even = 0;
        for (t, &j) in cs.iter().enumerate() {
            rows.push(i as i64);
            cols.push(j as i64);
            let v = if special && i % 3 == 1 && j % 2 == 0 {
                even += 1;
                if even % 2 == 1 { 3.0 } else { -3.0 }
            } else if special && i % 5 == 2 && t == 0 {
                f64::INFINITY
            } else {
                rng.value()
            };
            vals.push(v);
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[lengths.len(), COLS],
        &[rows, cols],
        &Buffer::from(vals),
        |a, _| a,
    )
    .unwrap()
}

/// x: varied values, or with `special` 1 at even columns and 0 at odd ones.
pub fn vector(seed: u64, special: bool) -> Tensor {
    let mut rng = Lcg(seed ^ 0x9e37);
    let v: Vec<f64> = (0..COLS)
        .map(|j| match (special, j % 2) {
            (true, 0) => 1.0,
            (true, _) => 0.0,
            _ => rng.value(),
        })
        .collect();
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[COLS], &Buffer::from(v)).unwrap()
}
