//! The largest element of an index array, read as unsigned, in one vectorised pass: the check
//! behind a coordinate or position array's bound ([`super::Buffer::check_bounded`]).
//!
//! Read as unsigned, a negative element is larger than every non-negative one, so one
//! maximum answers both questions a bound asks (is every element `>= 0`, and below what),
//! where a minimum and a maximum took two. A run over a SciPy matrix's `indptr` checks a
//! private copy of it on every call (`Runner::execute`), so this pass is on the per-call path:
//! the package's baseline x86-64 build has no packed unsigned maximum (SSE4.1), so on a CPU
//! with AVX2 the same loop is compiled for it (measured: BENCHMARKS.md, "## Python package
//! (issue 19)", helper py19).

/// Lanes kept apart so the compiler keeps them in vector registers.
const LANES: usize = 32;

/// The largest of `f(x)` over `v`, `None` when `v` is empty.
#[inline(always)]
fn lanes<T: Copy, U: Copy + Ord + Default>(v: &[T], f: impl Fn(T) -> U) -> Option<U> {
    if v.is_empty() {
        return None;
    }
    let mut acc = [U::default(); LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = (*a).max(f(x));
        }
    }
    let mut m = rest.iter().map(|&x| f(x)).max().unwrap_or_default();
    for a in acc {
        m = m.max(a);
    }
    Some(m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lanes_avx2<T: Copy, U: Copy + Ord + Default>(v: &[T], f: impl Fn(T) -> U) -> Option<U> {
    lanes(v, f)
}

/// [`lanes`], through the AVX2 build where the CPU has it.
fn largest<T: Copy, U: Copy + Ord + Default>(v: &[T], f: impl Fn(T) -> U) -> Option<U> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (tested just above), the one feature the function is
        // compiled for; it reads `v` as the portable version does.
        return unsafe { lanes_avx2(v, f) };
    }
    lanes(v, f)
}

/// What one pass over an integer array found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Largest {
    /// No elements.
    Empty,
    /// Some element is negative.
    Negative,
    /// Every element is in `0..=m`, and one is `m`.
    Max(u64),
}

fn signed(m: Option<u64>, max: u64) -> Largest {
    match m {
        None => Largest::Empty,
        Some(m) if m > max => Largest::Negative,
        Some(m) => Largest::Max(m),
    }
}

pub fn of_i32(v: &[i32]) -> Largest {
    signed(largest(v, |x| x as u32).map(u64::from), i32::MAX as u64)
}

pub fn of_i64(v: &[i64]) -> Largest {
    signed(largest(v, |x| x as u64), i64::MAX as u64)
}

pub fn of_i8(v: &[i8]) -> Largest {
    signed(largest(v, |x| x as u8).map(u64::from), i8::MAX as u64)
}

pub fn of_u8(v: &[u8]) -> Largest {
    signed(largest(v, |x| x).map(u64::from), u64::MAX)
}

pub fn of_u64(v: &[u64]) -> Largest {
    signed(largest(v, |x| x), u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a plain fold says.
    fn fold<T: Copy + Into<i128>>(v: &[T]) -> Largest {
        match v
            .iter()
            .map(|&x| x.into())
            .fold(None, |m: Option<i128>, x| Some(m.map_or(x, |m| m.max(x))))
        {
            None => Largest::Empty,
            Some(_) if v.iter().any(|&x| x.into() < 0) => Largest::Negative,
            Some(m) => Largest::Max(m as u64),
        }
    }

    proptest! {
        /// Every length around the lane count, any values: the answer of a plain fold, on
        /// both builds.
        #[test]
        fn agrees_with_a_fold(
            v in proptest::collection::vec(any::<i32>(), 0..200),
            w in proptest::collection::vec(any::<i64>(), 0..200),
            b in proptest::collection::vec(any::<i8>(), 0..200),
        ) {
            prop_assert_eq!(of_i32(&v), fold(&v));
            prop_assert_eq!(lanes(&v, |x| x as u32), v.iter().map(|&x| x as u32).max());
            prop_assert_eq!(of_i64(&w), fold(&w));
            prop_assert_eq!(of_i8(&b), fold(&b));
        }

        /// Non-negative values with one negative anywhere (a lane, the remainder).
        #[test]
        fn one_negative_is_found(n in 1usize..150, at in any::<prop::sample::Index>(), neg in i32::MIN..0) {
            let mut v: Vec<i32> = (0..n as i32).collect();
            prop_assert_eq!(of_i32(&v), Largest::Max(n as u64 - 1));
            v[at.index(n)] = neg;
            prop_assert_eq!(of_i32(&v), Largest::Negative);
            let w: Vec<i64> = v.iter().map(|&x| x as i64).collect();
            prop_assert_eq!(of_i64(&w), Largest::Negative);
        }
    }

    #[test]
    fn unsigned_and_empty() {
        assert_eq!(of_u8(&[]), Largest::Empty);
        assert_eq!(of_u8(&[3, 255, 7]), Largest::Max(255));
        assert_eq!(of_u64(&[u64::MAX, 1]), Largest::Max(u64::MAX));
        assert_eq!(of_i64(&[]), Largest::Empty);
        assert_eq!(of_i64(&[i64::MAX, 0]), Largest::Max(i64::MAX as u64));
        assert_eq!(of_i32(&[i32::MAX; 70]), Largest::Max(i32::MAX as u64));
    }
}
