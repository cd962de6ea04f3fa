//! The IR's intrinsics (sorting and hashing), shared by both backends so they agree exactly:
//! the interpreter calls these directly, the JIT through the helpers in `abi`.

/// The home slot of `key` in a table of `len > 0` slots (a splitmix64 finaliser, so nearby
/// keys such as `pos * n + i` spread over the table).
pub fn hash_slot(key: i64, len: usize) -> usize {
    let mut x = key as u64;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % len as u64) as usize
}

/// `Expr::HashFind`: the slot holding `key`, else the first empty (-1) slot on its linear
/// probe sequence, else -1 (no slots, a full table without the key, or a negative key, which
/// could be confused with the empty marker).
pub fn hash_find(table: &[i64], key: i64) -> i64 {
    if table.is_empty() || key < 0 {
        return -1;
    }
    let n = table.len();
    let mut s = hash_slot(key, n);
    for _ in 0..n {
        if table[s] == key || table[s] == -1 {
            return s as i64;
        }
        s = if s + 1 == n { 0 } else { s + 1 };
    }
    -1
}

/// `Stmt::SortPerm`: stable-sort `perm` by `keys[perm[k]]`. A position outside `keys` is
/// returned as the error (and `perm` is left unchanged).
pub fn sort_perm(keys: &[i64], perm: &mut [i64]) -> Result<(), i64> {
    if let Some(&bad) = perm.iter().find(|&&p| p < 0 || p as usize >= keys.len()) {
        return Err(bad);
    }
    perm.sort_by_key(|&p| keys[p as usize]);
    Ok(())
}

/// `Stmt::Sort` without flags: sort `v` ascending. Long runs of keys that span a small range
/// (a row's touched columns in Gustavson's SpGEMM: a few hundred keys below ~10⁵) take an LSD
/// radix sort, a handful of linear passes, instead of O(k log k) data-dependent branches.
pub fn sort_i64(v: &mut [i64]) {
    // Lists that arrive in order (a root SparseCOO set sorts at every freeze) cost one pass;
    // an unordered one leaves this test at its first descent.
    if v.is_sorted() {
        return;
    }
    let k = v.len();
    if k < RADIX_MIN {
        v.sort_unstable();
        return;
    }
    let (lo, hi) = min_max(v);
    match radix_passes(lo, hi) {
        Some(passes) if radix_cost(k, passes) < compare_cost(k) => radix_sort(v, lo, passes),
        _ => v.sort_unstable(),
    }
}

/// `Stmt::Sort` with flags: sort `v`, a list of distinct slots whose flags are set in
/// `flags`, where no other slot between the least and the greatest listed one is set (a
/// `SparseByteMap`'s `srt` and `tbl`: the level's validation and its updates keep that
/// invariant). When that range is short against the number of slots, reading the flags over
/// it (`flag_scan`: 32 at a time with AVX2) lists the slots in order without comparing any;
/// otherwise a bucket sort, or, for keys crowded into few buckets, the radix sort or
/// comparisons.
///
/// The scan is only used after counting exactly `v.len()` set flags in the range, so a list
/// that broke the invariant that way is sorted another way instead. Errors (the kernel's
/// fault) if a slot lies outside `flags`, which is only looked at for lists of `RADIX_MIN`
/// slots or more (shorter ones are just sorted).
pub fn sort_slots(v: &mut [i64], flags: &[bool]) -> Result<(), i64> {
    let k = v.len();
    if k < RADIX_MIN {
        // Too few to pay for reading their flags or counting buckets: sorted by rank or an
        // insertion sort (`short_sort`, a few hundred instructions).
        // The shortest (most of a road network's rows) keep the old path's one call.
        if k < super::short_sort::SHORT_MIN {
            v.sort_unstable();
        } else {
            super::short_sort::sort(v);
        }
        return Ok(());
    }
    let (lo, hi) = min_max(v);
    if lo < 0 {
        return Err(lo);
    }
    if hi as usize >= flags.len() {
        return Err(hi);
    }
    let range = &flags[lo as usize..=hi as usize];
    // The bucket sort's cost when its buckets come out small (else it declines, and the
    // radix sort or comparisons run after a wasted counting pass).
    let other = bucket_cost(k);
    if scan_cost(k, range.len()) < other && super::flag_scan::count_set(range) == k {
        // The range holds exactly the listed slots: listing its set flags is sorting them.
        let out = super::flag_scan::list_set(range, lo, v);
        debug_assert_eq!(out, k);
        return Ok(());
    }
    // Keys crowded into few buckets: up to 128 of them are ranked (the bucket sort's
    // declined rows of bayer10's product, 64-128 slots: 11% of its time in `sort_unstable`).
    let ranked = |v: &mut [i64]| k <= super::short_sort::RANK_LONG && super::short_sort::rank(v);
    if !bucket_sort(v, lo, hi) && !ranked(v) {
        match radix_passes(lo, hi) {
            Some(passes) if radix_cost(k, passes) < compare_cost(k) => radix_sort(v, lo, passes),
            _ => v.sort_unstable(),
        }
    }
    Ok(())
}

/// Sorts `v` (every key in `lo..=hi`) by one counting pass on the keys' high bits into about
/// two buckets per key, then one insertion sort over the whole list, which only moves a key
/// past the others of its bucket: about two linear passes, where the radix sort needs a
/// histogram and two or three scatters, and its fixed cost of 256 counts a digit is as large
/// as a row of a few hundred slots (ca-HepPh's rows in Gustavson's SpGEMM: 274 slots over a
/// range 145 times longer, −25% sorting time against the radix sort). Keys that crowd a few
/// buckets would make the insertion quadratic: the sum of the squared bucket sizes (the
/// insertion's work, up to a factor) is checked first, and `false` (with `v` untouched) says
/// to sort another way.
fn bucket_sort(v: &mut [i64], lo: i64, hi: i64) -> bool {
    let k = v.len();
    if k > u32::MAX as usize / 2 {
        // Its counts are 32-bit.
        return false;
    }
    let span = (hi as u64).wrapping_sub(lo as u64);
    // The smallest shift that leaves at most 2^b buckets, 2^b the power of two at or above 2k.
    let nb_bits = usize::BITS - (k.max(2) - 1).leading_zeros() + 1;
    let span_bits = u64::BITS - span.leading_zeros();
    let shift = span_bits.saturating_sub(nb_bits);
    let nb = (span >> shift) as usize + 1;
    let bucket = |x: i64| (x.wrapping_sub(lo) as u64 >> shift) as usize;
    BUCKETS.with(|s| {
        let mut s = s.borrow_mut();
        let (keys, counts) = &mut *s;
        if keys.len() < k {
            keys.resize(k, 0);
        }
        counts.clear();
        counts.resize(nb + 1, 0);
        for &x in v.iter() {
            counts[bucket(x) + 1] += 1;
        }
        let work: u64 = counts.iter().map(|&c| u64::from(c) * u64::from(c)).sum();
        if work > 4 * k as u64 {
            return false;
        }
        // counts[b] becomes the start of bucket b.
        let mut sum = 0u32;
        for c in counts.iter_mut() {
            sum += *c;
            *c = sum;
        }
        let keys = &mut keys[..k];
        for &x in v.iter() {
            let b = bucket(x);
            keys[counts[b] as usize] = x;
            counts[b] += 1;
        }
        for i in 1..k {
            let x = keys[i];
            let mut j = i;
            while j > 0 && keys[j - 1] > x {
                keys[j] = keys[j - 1];
                j -= 1;
            }
            keys[j] = x;
        }
        v.copy_from_slice(keys);
        true
    })
}

/// Below this many keys the standard library's small-sort (sorting networks, insertion sort)
/// beats the radix sort's fixed cost of clearing and summing histograms.
const RADIX_MIN: usize = 64;
const _: () = assert!(RADIX_MIN <= super::short_sort::RANK_MAX + 1);
const RADIX_BITS: u32 = 8;
const RADIX: usize = 1 << RADIX_BITS;
// `radix_sort`'s histogram loop spells out three digits of eight bits.
const _: () = assert!(RADIX_BITS == 8);

/// Rough instruction counts of the three ways to order `k` keys (measured shapes, not exact:
/// they only have to pick the cheaper way when the difference is large).
fn compare_cost(k: usize) -> usize {
    // pdqsort/ipnsort: ~10 instructions per k log2 k under callgrind on SpGEMM rows, plus
    // the mispredicted branches that count does not show.
    10 * k * (usize::BITS - k.leading_zeros()) as usize
}
fn radix_cost(k: usize, passes: u32) -> usize {
    if k > u32::MAX as usize {
        // Its counts are 32-bit.
        return usize::MAX;
    }
    // One histogram pass for all digits, then per digit a prefix sum and a scatter. The
    // fixed part per digit (clearing, summing and scanning 256 counts, a serial chain) is
    // from wall-clock times, not instruction counts: against `sort_unstable` on random keys
    // the radix sort broke even near k = 250 with two digits and k = 300-450 with three
    // (10^7 point ids, the radius search's hits), where a cost of 3 * RADIX a digit had it
    // taking over from k = 64 and run up to 1.4-2.4x slower there.
    k * (10 + 12 * passes as usize) + 16 * RADIX * passes as usize
}
fn bucket_cost(k: usize) -> usize {
    // Counting, summing about 2k counts, scattering, and an insertion pass with few moves.
    24 * k
}
fn scan_cost(k: usize, span: usize) -> usize {
    // Two passes over the span's flags (count, then list), and per slot a bit extraction and
    // a store. With AVX2 a pass tests 32 flags in about four instructions (a load, a compare,
    // a mask move, a popcount or a test); without, eight flags a word in about four.
    let per_flag = if super::flag_scan::wide() { 4 } else { 1 };
    span / per_flag + 5 * k
}

fn min_max(v: &[i64]) -> (i64, i64) {
    v.iter()
        .fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// The number of radix digits the keys `lo..=hi` need after subtracting `lo`, if at most 3
/// (beyond that comparisons are cheaper at any length a row of a workspace reaches).
fn radix_passes(lo: i64, hi: i64) -> Option<u32> {
    let span = (hi as i128 - lo as i128) as u128;
    let bits = 128 - span.leading_zeros();
    let passes = bits.div_ceil(RADIX_BITS).max(1);
    (passes <= 3).then_some(passes)
}

thread_local! {
    /// The bucket sort's second array and its counts, kept between calls.
    static BUCKETS: std::cell::RefCell<(Vec<i64>, Vec<u32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    /// The radix sort's second array, kept between calls (a kernel sorts once per row).
    static SCRATCH: std::cell::RefCell<Vec<i64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// LSD radix sort of `v` by `x - lo` in `passes` digits of `RADIX_BITS` (every key lies in
/// `lo..lo + RADIX^passes`, see `radix_passes`).
fn radix_sort(v: &mut [i64], lo: i64, passes: u32) {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        // Every element is written before it is read: no need to clear it again.
        if s.len() < v.len() {
            s.resize(v.len(), 0);
        }
        let mut counts = [[0u32; RADIX]; 3];
        let digit = |x: i64, p: u32| {
            ((x.wrapping_sub(lo) as u64 >> (p * RADIX_BITS)) as usize) & (RADIX - 1)
        };
        // All three digits whatever `passes` is: the masks keep the indices in range, so the
        // loop has no branch but its own.
        for &x in v.iter() {
            let y = x.wrapping_sub(lo) as u64;
            counts[0][(y & 0xff) as usize] += 1;
            counts[1][((y >> 8) & 0xff) as usize] += 1;
            counts[2][((y >> 16) & 0xff) as usize] += 1;
        }
        let n = v.len();
        let (mut src, mut dst): (&mut [i64], &mut [i64]) = (v, &mut s[..n]);
        let mut in_v = true;
        for p in 0..passes {
            let c = &mut counts[p as usize];
            // A digit every key shares moves nothing.
            if c.contains(&(n as u32)) {
                continue;
            }
            let mut sum = 0;
            for n in c.iter_mut() {
                let here = *n;
                *n = sum;
                sum += here;
            }
            for &x in src.iter() {
                let d = digit(x, p);
                dst[c[d] as usize] = x;
                c[d] += 1;
            }
            std::mem::swap(&mut src, &mut dst);
            in_v = !in_v;
        }
        if !in_v {
            // `src` is the scratch array holding the result, `dst` is `v`.
            dst.copy_from_slice(src);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_find_probes_to_key_or_empty() {
        let mut t = vec![-1i64; 8];
        for k in [3, 11, 19, 0, 1_000_000_007] {
            let s = hash_find(&t, k);
            assert!(s >= 0 && t[s as usize] == -1);
            t[s as usize] = k;
            assert_eq!(hash_find(&t, k), s);
        }
        assert_eq!(hash_find(&[], 1), -1);
        assert_eq!(hash_find(&t, -5), -1);
        let full = vec![1i64, 2, 3];
        assert_eq!(hash_find(&full, 7), -1);
        assert_eq!(hash_find(&full, 2), 1);
    }

    #[test]
    fn sort_perm_is_stable_and_checked() {
        let keys = [5i64, 1, 5, 0];
        let mut p = vec![0i64, 1, 2, 3];
        sort_perm(&keys, &mut p).unwrap();
        assert_eq!(p, [3, 1, 0, 2]);
        let mut bad = vec![0i64, 4];
        assert_eq!(sort_perm(&keys, &mut bad), Err(4));
        assert_eq!(bad, [0, 4]);
    }

    /// Keys of the shapes each path takes: short lists, long lists in a narrow range (radix),
    /// long lists over a wide range (comparisons), negative keys and duplicates.
    fn key_lists() -> Vec<Vec<i64>> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        let mut out = vec![vec![], vec![7], vec![3, -2, 3, 0]];
        for (k, span) in [
            (10, 50),
            (64, 300),
            (300, 12_000),
            (500, 1 << 23),
            (700, 1 << 40),
        ] {
            for offset in [0, -5_000, 1 << 33] {
                out.push((0..k).map(|_| offset + rng.random_range(0..span)).collect());
            }
        }
        out.push((0..1000).map(|x| 1000 - x).collect());
        out.push(vec![i64::MIN, i64::MAX, 0, -1, i64::MAX, i64::MIN]);
        out
    }

    #[test]
    fn sort_i64_sorts_every_shape() {
        for keys in key_lists() {
            let mut want = keys.clone();
            want.sort_unstable();
            let mut got = keys.clone();
            sort_i64(&mut got);
            assert_eq!(got, want, "keys {keys:?}");
        }
    }

    /// Distinct slots and their flags, as a `SparseByteMap` holds them.
    fn slots_and_flags(keys: &[i64], n: usize) -> (Vec<i64>, Vec<bool>) {
        let mut flags = vec![false; n];
        let mut slots = vec![];
        for &q in keys {
            let q = q.rem_euclid(n as i64);
            if !flags[q as usize] {
                flags[q as usize] = true;
                slots.push(q);
            }
        }
        (slots, flags)
    }

    #[test]
    fn sort_slots_sorts_by_scan_radix_or_comparisons() {
        for keys in key_lists() {
            // Dense ranges (the scan), sparse ones (radix or comparisons), odd lengths so the
            // last word of flags is partial.
            for n in [13, 1001, 40_000, 1 << 22] {
                let (slots, flags) = slots_and_flags(&keys, n);
                let mut want = slots.clone();
                want.sort_unstable();
                let mut got = slots.clone();
                assert_eq!(sort_slots(&mut got, &flags), Ok(()));
                assert_eq!(got, want, "n {n} slots {slots:?}");
            }
        }
    }

    #[test]
    fn bucket_sort_sorts_or_declines_untouched() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(19);
        let mut lists = key_lists();
        // Spread keys (small buckets, duplicates among them) and crowded ones: all but one
        // key in a few buckets at one end of a long range, which must be declined.
        lists.push((0..2000).map(|_| rng.random_range(0..1_000_000)).collect());
        lists.push((0..300).map(|_| rng.random_range(0..40)).collect());
        let mut crowded: Vec<i64> = (0..500).map(|x| (x * 7919) % 500).collect();
        crowded.push(1 << 30);
        lists.push(crowded.clone());
        let mut declined = 0;
        for keys in lists {
            let mut want = keys.clone();
            want.sort_unstable();
            let mut got = keys.clone();
            let (lo, hi) = min_max(&keys);
            if keys.is_empty() {
                continue;
            }
            if bucket_sort(&mut got, lo, hi) {
                assert_eq!(got, want, "keys {keys:?}");
            } else {
                assert_eq!(got, keys, "declined, so untouched");
                declined += 1;
            }
        }
        assert!(declined >= 1, "the crowded list is declined");
        let (lo, hi) = min_max(&crowded);
        assert!(!bucket_sort(&mut crowded.clone(), lo, hi));
    }

    #[test]
    fn sort_slots_does_not_trust_flags_that_disagree() {
        // A flag set between the slots that the list does not hold: the scan would list it,
        // so the count refuses the scan and the list is sorted as it is.
        let mut flags = vec![true; 64];
        flags[40] = true;
        let mut v: Vec<i64> = (0..64).rev().filter(|&q| q != 40).collect();
        assert_eq!(sort_slots(&mut v, &flags), Ok(()));
        let want: Vec<i64> = (0..64).filter(|&q| q != 40).collect();
        assert_eq!(v, want);
        // Listed slots whose flags are clear.
        let mut v: Vec<i64> = (0..64).rev().collect();
        assert_eq!(sort_slots(&mut v, &[false; 64]), Ok(()));
        assert_eq!(v, (0..64).collect::<Vec<i64>>());
        // Slots outside the table are the fault, and the list is left alone.
        let mut v: Vec<i64> = (0..70).rev().collect();
        let before = v.clone();
        assert_eq!(sort_slots(&mut v, &[true; 64]), Err(69));
        assert_eq!(v, before);
        let mut v: Vec<i64> = (-1..63).collect();
        assert_eq!(sort_slots(&mut v, &[true; 64]), Err(-1));
    }
}
