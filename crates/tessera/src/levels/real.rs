//! Storage of real-valued coordinates (`coord=f64`), shared by the levels that take them.
//!
//! A real level's pieces are closed intervals of [`Limit`] endpoints (the continuous tensor
//! abstraction, §2.2): a pinpoint `a` is `[a, a]`, `[a, b)` is `[a, b-ε]`, `(a, b]` is
//! `[a+ε, b]`. An endpoint is stored as its value (an `f64` array) and, where a level holds
//! intervals, its infinitesimal sign (an `i8` array, -1, 0 or +1). Values are never NaN and
//! never `-0.0` (the builders store `+0.0`, so equal reals are equal bit patterns).

use crate::limit::{Eps, Limit};
use crate::runtime::Buffer;

/// An endpoint from its stored value and sign.
pub fn limit(val: f64, eps: i8) -> Limit<f64> {
    Limit::new(val, Eps::saturate(i32::from(eps)))
}

/// The endpoint at `q` of a value array and its sign array.
pub fn endpoint(vals: &[f64], eps: &[i8], q: usize) -> Limit<f64> {
    limit(vals[q], eps[q])
}

/// `+0.0` for `-0.0`, the value otherwise.
pub fn canonical(v: f64) -> f64 {
    v + 0.0
}

/// Why a piece `[lo, hi]` cannot be stored, if it cannot: a NaN end, `-0.0`, an end past the
/// other, or a piece holding no real number (`[a+ε, a+ε]`).
pub fn check_piece(lo: Limit<f64>, hi: Limit<f64>) -> Result<(), String> {
    if lo.val.is_nan() || hi.val.is_nan() {
        return Err("a real coordinate is NaN".to_string());
    }
    if is_neg_zero(lo.val) || is_neg_zero(hi.val) {
        return Err("a real coordinate is -0.0 (store +0.0)".to_string());
    }
    if !holds_a_real(lo, hi) {
        return Err(format!("the piece [{lo}, {hi}] holds no real number"));
    }
    Ok(())
}

fn is_neg_zero(v: f64) -> bool {
    v == 0.0 && v.is_sign_negative()
}

/// Whether the closed Limit interval `[lo, hi]` contains a real number: `lo <= hi`, and not a
/// single point with an infinitesimal (`[a+ε, a+ε]` is empty; `[a, a+ε]` is `{a}`).
pub fn holds_a_real(lo: Limit<f64>, hi: Limit<f64>) -> bool {
    match lo.partial_cmp(&hi) {
        // Between two values lie reals; at one value `lo.eps < hi.eps` brackets it.
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Equal) => lo.eps == Eps::Zero,
        _ => false,
    }
}

/// Check the pieces of every fiber: each fiber's pieces `ptr[p]..ptr[p+1]` are valid, in
/// increasing order and disjoint. Returns the number of pieces.
pub fn check_fibers(
    ptr: &[i64],
    parent_count: usize,
    len: usize,
    piece: &dyn Fn(usize) -> (Limit<f64>, Limit<f64>),
) -> Result<usize, String> {
    super::shared::check_ptr_shape(ptr, parent_count)?;
    for p in 0..parent_count {
        let (lo, hi) = (ptr[p], ptr[p + 1]);
        if hi < lo || hi as usize > len {
            return Err(format!(
                "ptr[{}] = {hi} is out of order or past the end of the coordinates",
                p + 1
            ));
        }
        for q in lo as usize..hi as usize {
            let (a, b) = piece(q);
            check_piece(a, b).map_err(|m| format!("piece {q}: {m}"))?;
            if q > lo as usize {
                let (_, prev) = piece(q - 1);
                if a.partial_cmp(&prev) != Some(std::cmp::Ordering::Greater) {
                    return Err(format!(
                        "piece {q} starts at {a}, not after the end {prev} of piece {}",
                        q - 1
                    ));
                }
            }
        }
    }
    Ok(ptr[parent_count] as usize)
}

/// Kernels over real-valued levels are not lowered yet: refuse, naming the tensor.
pub fn not_lowered_yet(f: &crate::looplets::Fiber) -> crate::error::Result<()> {
    let kind = &f.tensor.format.levels[f.level];
    match kind.is_real() {
        true => Err(crate::error::Error::tensor(
            &f.tensor.name,
            format!(
                "loops over the real-valued coordinates of {} are not supported yet",
                kind.name()
            ),
        )),
        false => Ok(()),
    }
}

pub fn f64s(b: &Buffer) -> &[f64] {
    b.as_f64().expect("real coordinates are f64")
}

pub fn i8s(b: &Buffer) -> &[i8] {
    match b {
        Buffer::I8(v) => v,
        _ => panic!("infinitesimal signs are i8"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_that_hold_a_real() {
        let (a, b) = (1.0, 2.0);
        assert!(holds_a_real(Limit::exact(a), Limit::exact(a)));
        assert!(holds_a_real(Limit::exact(a), Limit::minus_eps(b)));
        assert!(holds_a_real(Limit::plus_eps(a), Limit::minus_eps(b)));
        assert!(holds_a_real(Limit::exact(a), Limit::plus_eps(a)));
        assert!(holds_a_real(Limit::minus_eps(a), Limit::exact(a)));
        assert!(!holds_a_real(Limit::plus_eps(a), Limit::plus_eps(a)));
        assert!(!holds_a_real(Limit::minus_eps(a), Limit::minus_eps(a)));
        assert!(!holds_a_real(Limit::exact(b), Limit::exact(a)));
        assert!(!holds_a_real(Limit::plus_eps(a), Limit::exact(a)));
        assert!(check_piece(Limit::exact(f64::NAN), Limit::exact(1.0)).is_err());
        assert!(check_piece(Limit::exact(-0.0), Limit::exact(1.0)).is_err());
        assert!(check_piece(Limit::exact(f64::NEG_INFINITY), Limit::exact(1.0)).is_ok());
    }
}
