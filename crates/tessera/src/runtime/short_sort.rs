//! Sorting a short list of slots (fewer than 64): a workspace row's touched columns in
//! Gustavson's SpGEMM on a sparse product (a mesh's square: 10-25 slots a row), one call a row.
//!
//! The standard library's `sort_unstable` runs an insertion sort up to 20 keys and a
//! quicksort with sorting networks above. Both branch on the data: on a row that lists
//! several sorted rows of `B` one after another (its runs interleave, 2-3 inversions per key)
//! they cost about 100 ns for 20 keys, a third of the whole product's time. Here, a list of
//! distinct keys whose span fits 15 or 31 bits is ordered by *rank*: each key's place is the
//! number of keys below it, counted 16 (or 8) at a time by one SIMD comparison and a
//! population count, with no data-dependent branch (2-2.6x less sorting time on those rows).
//! A list that is almost in order (a banded matrix's rows: about one inversion in three
//! keys) costs an insertion sort less than that; which of the two a thread's lists are is
//! learnt as they come (`CREDIT`), since the result does not depend on the way.

use std::cell::Cell;

/// Lists this short go to the standard library's insertion sort: ranking's fixed cost
/// (finding the span, converting the keys, placing them) is about what sorting them costs
/// (cryg10000's rows of 9-15 slots: 0.05 ms by insertion, 0.23 ms ranked, 10,000 rows).
pub const SHORT_MIN: usize = 16;
/// The longest list ranked (the key and output arrays below).
pub const RANK_MAX: usize = 64;
/// Insertion sorts that kept to their budget in a row, at most.
const CREDIT_MAX: i32 = 16;
/// After an insertion sort went over its budget, the lists ranked before the next try.
const RANK_RUN: i32 = 16;

thread_local! {
    /// Whether this thread's recent short lists were almost in order: from 0 up while
    /// insertion sorts keep to their budget, negative (counting back up to 0, one list at a
    /// time) after one did not. A per-thread guess, never a result: either way sorts.
    static CREDIT: Cell<i32> = const { Cell::new(0) };
}

/// Sort `v` (fewer than `RANK_MAX` keys) ascending. Keys need not be distinct: a list with
/// a repeated key (not a workspace's, which lists a slot once) falls back to `sort_unstable`.
pub fn sort(v: &mut [i64]) {
    if v.len() < SHORT_MIN || v.len() > RANK_MAX {
        v.sort_unstable();
        return;
    }
    let credit = CREDIT.get();
    if credit >= 0 {
        // Half a move per key: an almost ordered list needs fewer, a list of interleaved
        // runs several times more, so a failed try wastes little.
        if insertion_within(v, v.len() / 2) {
            CREDIT.set((credit + 1).min(CREDIT_MAX));
            return;
        }
        CREDIT.set(-RANK_RUN);
    } else {
        CREDIT.set(credit + 1);
    }
    // The insertion sort left a permutation of the keys, which ranking takes as it is.
    if !rank(v) {
        v.sort_unstable();
    }
}

/// Insertion sort of `v` that gives up (leaving a permutation of `v`) once it has moved
/// keys more than `budget` places in all; true if `v` is sorted.
fn insertion_within(v: &mut [i64], budget: usize) -> bool {
    let mut moves = 0;
    for i in 1..v.len() {
        let x = v[i];
        // A key in order (most of them, when this pays) costs one comparison.
        if v[i - 1] <= x {
            continue;
        }
        let mut j = i - 1;
        v[i] = v[j];
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
        moves += i - j;
        if moves > budget {
            return false;
        }
    }
    true
}

/// Sorts `v` (at most `RANK_LONG` keys) by rank if the CPU has the instructions and the keys
/// are distinct with a span under 2^31; false (with `v` untouched) otherwise.
pub fn rank(v: &mut [i64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has AVX2 and POPCNT, tested just above.
            return unsafe {
                if v.len() <= RANK_MAX {
                    x86::rank::<RANK_MAX>(v)
                } else {
                    x86::rank::<RANK_LONG>(v)
                }
            };
        }
    }
    let _ = v;
    false
}

/// The longest list `rank` takes (the workspace's longer rows, when the bucket sort declines
/// them): its work grows as the square of the length, a sort's as `k log k`.
pub const RANK_LONG: usize = 128;

/// The keys' least and greatest.
fn min_max(v: &[i64]) -> (i64, i64) {
    v.iter()
        .fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Writes `v[i]` at `out[ranks[i]]` and copies `out` back to `v` if the ranks are a
/// permutation of `0..v.len()` (every key distinct); else leaves `v` as it is.
fn place<const N: usize>(v: &mut [i64], ranks: &[u8; N]) -> bool {
    const { assert!(N.is_power_of_two() && N <= 128) };
    let k = v.len();
    let mut out = [0i64; N];
    let mut seen = 0u128;
    for (&x, &r) in v.iter().zip(ranks.iter()) {
        // Ranks are below k <= N: the mask only spares the bounds check.
        let r = usize::from(r) & (N - 1);
        out[r] = x;
        seen |= 1 << r;
    }
    let all = if k == 128 {
        u128::MAX
    } else {
        (1u128 << k) - 1
    };
    if seen != all {
        return false;
    }
    v.copy_from_slice(&out[..k]);
    true
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{min_max, place};
    use std::arch::x86_64::*;

    /// See `super::rank`; N is 64 or 128, the arrays' length.
    ///
    /// # Safety
    /// The CPU must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    pub unsafe fn rank<const N: usize>(v: &mut [i64]) -> bool {
        const { assert!(N.is_multiple_of(16) && N <= 128) };
        let k = v.len();
        if k > N {
            return false;
        }
        let (lo, hi) = min_max(v);
        let span = hi as i128 - lo as i128;
        let mut ranks = [0u8; N];
        if span < i128::from(i16::MAX) {
            // Keys x - lo in 0..=32766; the padding (i16::MAX) is below none of them.
            let mut keys = [i16::MAX; N];
            for (d, &x) in keys.iter_mut().zip(v.iter()) {
                *d = (x - lo) as i16;
            }
            let p = keys.as_ptr().cast::<__m256i>();
            let mut all = [_mm256_setzero_si256(); 8];
            let used = &mut all[..k.div_ceil(16)];
            for (c, y) in used.iter_mut().enumerate() {
                // SAFETY: c < k / 16 + 1 <= N / 16: `keys` holds N i16, N / 16 vectors.
                *y = unsafe { _mm256_loadu_si256(p.add(c)) };
            }
            for (r, &x) in ranks.iter_mut().zip(keys[..k].iter()) {
                let x = _mm256_set1_epi16(x);
                // Two mask bits per 16-bit lane.
                let below: u32 = used
                    .iter()
                    .map(|&y| (_mm256_movemask_epi8(_mm256_cmpgt_epi16(x, y)) as u32).count_ones())
                    .sum();
                *r = (below / 2) as u8;
            }
        } else if span < i128::from(i32::MAX) {
            let mut keys = [i32::MAX; N];
            for (d, &x) in keys.iter_mut().zip(v.iter()) {
                *d = (x - lo) as i32;
            }
            let p = keys.as_ptr().cast::<__m256i>();
            let n = k.div_ceil(8);
            for (r, &x) in ranks.iter_mut().zip(keys[..k].iter()) {
                let x = _mm256_set1_epi32(x);
                let mut below = 0;
                for c in 0..n {
                    // SAFETY: c < k / 8 + 1 <= N / 8: `keys` holds N i32, N / 8 vectors.
                    let y = unsafe { _mm256_loadu_si256(p.add(c)) };
                    let m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(x, y));
                    below += (_mm256_movemask_ps(m) as u32).count_ones();
                }
                *r = below as u8;
            }
        } else {
            return false;
        }
        place(v, &ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn check(keys: &[i64]) {
        let mut want = keys.to_vec();
        want.sort_unstable();
        let mut got = keys.to_vec();
        sort(&mut got);
        assert_eq!(got, want, "keys {keys:?}");
        // Ranking on its own: sorted, or declined with the list untouched.
        let mut ranked = keys.to_vec();
        if rank(&mut ranked) {
            assert_eq!(ranked, want, "ranked {keys:?}");
        } else {
            assert_eq!(ranked, keys, "declined, so untouched");
        }
    }

    /// Lists of every length up to `RANK_MAX` in the shapes a workspace row takes (sorted
    /// runs one after another, almost sorted, reversed, random), spans of 15, 31 and more
    /// bits, negative keys, and repeated keys (which ranking must decline).
    #[test]
    fn short_lists_sort_whatever_their_shape() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        for k in (0..=RANK_MAX).chain([65, 100, 127, RANK_LONG, RANK_LONG + 1]) {
            for span in [
                k as i64 + 1,
                3000,
                32_766,
                32_767,
                40_000,
                i32::MAX as i64 - 1,
                i32::MAX as i64,
                1 << 40,
            ] {
                for base in [0, -5, 1 << 33] {
                    let mut set = std::collections::BTreeSet::new();
                    while set.len() < k.min(span as usize) {
                        set.insert(base + rng.random_range(0..span));
                    }
                    let sorted: Vec<i64> = set.into_iter().collect();
                    check(&sorted);
                    check(&sorted.iter().rev().copied().collect::<Vec<_>>());
                    let mut shuffled = sorted.clone();
                    for i in (1..shuffled.len()).rev() {
                        shuffled.swap(i, rng.random_range(0..=i));
                    }
                    check(&shuffled);
                    // Sorted runs one after another (a row of C lists rows of B).
                    let mut runs = shuffled.clone();
                    for c in runs.chunks_mut(5) {
                        c.sort_unstable();
                    }
                    check(&runs);
                    // Almost sorted: a few neighbours swapped.
                    let mut near = sorted.clone();
                    for i in (1..near.len()).step_by(4) {
                        near.swap(i - 1, i);
                    }
                    check(&near);
                    if k >= 2 {
                        let mut dup = shuffled.clone();
                        dup[k - 1] = dup[0];
                        check(&dup);
                    }
                }
            }
        }
        // The extremes of i64 (a span that overflows i64 arithmetic).
        check(&[i64::MAX, 0, i64::MIN, 5, 4, 3, 2, 1, -1, -2]);
        check(&[i64::MIN; 9]);
    }

    /// Whatever the thread learnt from earlier lists, each list comes out sorted: runs of
    /// almost sorted lists (insertion keeps its budget) then interleaved ones (it does not),
    /// and back.
    #[test]
    fn the_learnt_guess_never_changes_a_result() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..200 {
            let k = rng.random_range(0..RANK_MAX);
            let mut keys: Vec<i64> = (0..k as i64).map(|x| x * 3).collect();
            if (round / 20) % 2 == 0 {
                for i in (1..k).step_by(7) {
                    keys.swap(i - 1, i);
                }
            } else {
                for i in (1..k).rev() {
                    keys.swap(i, rng.random_range(0..=i));
                }
            }
            check(&keys);
        }
    }
}
