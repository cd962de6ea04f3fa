//! How the backends hold a `Limit` point (`ElemType::Limit`): one signed 128-bit integer
//! whose integer order is the points' order, so comparisons, `min` and `max` are single
//! integer operations in the native backends (Cranelift's `i128`, C's `__int128`), and the
//! interpreter orders its `Scalar::Limit` values through the same key, so the three agree on
//! every input, the canonical NaN included.
//!
//! `key = ordkey(bits(val)) * 4 + (eps + 1)`, where `ordkey` maps the bits of an `f64` to an
//! `i64` of the same order (negative floats have their magnitude bits flipped, so larger
//! magnitudes are smaller keys): lexicographic on (value, infinitesimal). Values are canonical
//! (`types::canonical_limit`), since `-0.0` and `+0.0` would have different keys; the one NaN
//! (positive, quiet) has a key above `+Inf`'s.

use crate::limit::Limit;
use crate::types::canonical_limit;

/// The order-preserving signed image of an `f64`'s bits (an involution on the bits).
pub(crate) fn ordkey(bits: u64) -> i64 {
    (bits ^ (((bits as i64) >> 63) as u64 >> 1)) as i64
}

/// The key of a point (canonicalised first).
pub(crate) fn encode(l: Limit<f64>) -> i128 {
    let l = canonical_limit(l);
    i128::from(ordkey(l.val.to_bits())) * 4 + i128::from(l.eps.sign() + 1)
}

/// The point of a key (the inverse of [`encode`] on canonical points).
#[cfg(test)]
pub(crate) fn decode(key: i128) -> Limit<f64> {
    let bits = ordkey((key >> 2) as i64 as u64) as u64;
    let eps = crate::limit::Eps::saturate((key & 3) as i32 - 1);
    Limit::new(f64::from_bits(bits), eps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Eps;

    #[test]
    fn keys_order_points_and_decode_back() {
        let vals = [
            f64::NEG_INFINITY,
            -f64::MAX,
            -1.0,
            -f64::MIN_POSITIVE,
            -0.0,
            f64::from_bits(1),
            1.0,
            1.0f64.next_up(),
            f64::MAX,
            f64::INFINITY,
        ];
        let mut points = vec![];
        for v in vals {
            for e in [Eps::Minus, Eps::Zero, Eps::Plus] {
                points.push(Limit::new(v, e));
            }
        }
        for w in points.windows(2) {
            assert!(encode(w[0]) < encode(w[1]), "{} < {}", w[0], w[1]);
        }
        for p in &points {
            assert_eq!(decode(encode(*p)), canonical_limit(*p));
        }
        assert_eq!(encode(Limit::exact(-0.0)), encode(Limit::exact(0.0)));
        assert_eq!(encode(Limit::exact(0.0)), 1, "a zeroed variable is 0+0");
        let nan = encode(Limit::minus_eps(-f64::NAN));
        assert!(nan > encode(Limit::plus_eps(f64::INFINITY)));
        assert_eq!(nan, encode(Limit::minus_eps(f64::NAN)));
    }
}
