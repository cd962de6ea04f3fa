//! Reading a `SparseByteMap`'s flags in bulk: how many are set in a range, and which, in
//! order. `intrinsics::sort_slots` lists a workspace row's slots this way instead of sorting
//! them when the row's range of slots is short enough against their number.
//!
//! With AVX2, 32 flags are tested per instruction (a compare and a mask move), so a range
//! costs about a quarter instruction a flag; without it, eight flags per 64-bit word.

/// The number of set flags.
pub fn count_set(flags: &[bool]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has AVX2 and POPCNT, tested just above.
            return unsafe { x86::count_set(as_bytes(flags)) };
        }
    }
    count_words(as_bytes(flags))
}

/// Writes `base + j` for each set flag `j`, in order, to the front of `out`, and returns how
/// many flags are set (the entries of `out` after those may be overwritten too). Stops
/// writing (and counting) once `out` is full: a return value of `out.len()` says nothing
/// about the flags after the last one written.
pub fn list_set(flags: &[bool], base: i64, out: &mut [i64]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has AVX2 and POPCNT, tested just above.
            return unsafe { x86::list_set(as_bytes(flags), base, out) };
        }
    }
    list_words(as_bytes(flags), base, out)
}

/// Whether the bulk reads above take 32 flags an instruction on this machine (their cost
/// model in `intrinsics::sort_slots` depends on it).
pub fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn count_words(bytes: &[u8]) -> usize {
    let mut chunks = bytes.chunks_exact(8);
    let mut n = 0usize;
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        // The top byte of the product is the sum of the eight bytes (at most 8, so no byte
        // carries into the next): one multiply, where `count_ones` without POPCNT in the
        // baseline x86-64 target is a dozen instructions.
        n += (w.wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize;
    }
    n + chunks
        .remainder()
        .iter()
        .map(|&b| b as usize)
        .sum::<usize>()
}

fn list_words(bytes: &[u8], base: i64, out: &mut [i64]) -> usize {
    let mut n = 0;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = base;
    for c in &mut chunks {
        let mut w = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        while w != 0 {
            if n == out.len() {
                return n;
            }
            out[n] = at + i64::from(w.trailing_zeros() / 8);
            n += 1;
            // A bool's byte is 0 or 1: each set flag is one bit.
            w &= w - 1;
        }
        at += 8;
    }
    for &b in chunks.remainder() {
        if b != 0 {
            if n == out.len() {
                return n;
            }
            out[n] = at;
            n += 1;
        }
        at += 1;
    }
    n
}

fn as_bytes(flags: &[bool]) -> &[u8] {
    // SAFETY: `bool` has the size and alignment of `u8` and its bytes are always 0 or 1, so
    // every byte of the slice is an initialised `u8`; the borrow keeps the memory alive.
    unsafe { std::slice::from_raw_parts(flags.as_ptr().cast::<u8>(), flags.len()) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The set bytes of 32 bytes at `p`, one bit each.
    ///
    /// # Safety
    /// The CPU must have AVX2; `p` must point at 32 readable bytes.
    #[target_feature(enable = "avx2")]
    unsafe fn set_mask(p: *const u8) -> u32 {
        // SAFETY: the caller's: 32 readable bytes at `p` (an unaligned load).
        let y = unsafe { _mm256_loadu_si256(p.cast::<__m256i>()) };
        !(_mm256_movemask_epi8(_mm256_cmpeq_epi8(y, _mm256_setzero_si256())) as u32)
    }

    /// See `super::count_set`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    pub unsafe fn count_set(bytes: &[u8]) -> usize {
        let mut chunks = bytes.chunks_exact(32);
        let mut n = 0usize;
        for c in &mut chunks {
            // SAFETY: AVX2 is the caller's; `c` is 32 bytes of the slice.
            n += unsafe { set_mask(c.as_ptr()) }.count_ones() as usize;
        }
        n + super::count_words(chunks.remainder())
    }

    /// See `super::list_set`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    pub unsafe fn list_set(bytes: &[u8], base: i64, out: &mut [i64]) -> usize {
        // A loop per set flag mispredicts its entry or exit about once a chunk of 64 where
        // chunks hold a few flags each; writing the first `W` positions of every chunk
        // unconditionally (a clear mask's trailing zeros give 64, written past the count and
        // overwritten later) and looping only for the rest takes those branches out. `W`
        // follows the density (`out`'s length is the count asked for): four writes at 2,000 flags of 20,000
        // were 2.5x faster than the loop; at one flag in 16-128 (Gustavson's rows of the
        // Fashion-MNIST graph's square, 138 slots over ~9,800; ca-HepPh's, 274 over 12,008)
        // three writes took 13% off the whole product (against 9% with two, 5% with one,
        // and 7% for the bucket sort instead); sparser than one in 128, most chunks are
        // empty and the loop's branch predicts well.
        // Set flags per 1,024.
        let per_kilo = out.len().saturating_mul(1024) / bytes.len().max(1);
        // SAFETY: the caller's (AVX2 and POPCNT).
        unsafe {
            match per_kilo {
                64.. => list_chunks::<4>(bytes, base, out),
                8.. => list_chunks::<3>(bytes, base, out),
                _ => list_chunks::<0>(bytes, base, out),
            }
        }
    }

    /// `list_set` with `W` unconditional writes a chunk of 64 flags.
    ///
    /// # Safety
    /// The CPU must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn list_chunks<const W: usize>(bytes: &[u8], base: i64, out: &mut [i64]) -> usize {
        let mut chunks = bytes.chunks_exact(64);
        let mut n = 0;
        let mut at = base;
        for c in &mut chunks {
            // SAFETY: AVX2 is the caller's; `c` is 64 bytes of the slice.
            let (lo, hi) = unsafe { (set_mask(c.as_ptr()), set_mask(c.as_ptr().add(32))) };
            let mut m = u64::from(lo) | (u64::from(hi) << 32);
            if W > 0 && n + W <= out.len() {
                let count = m.count_ones() as usize;
                for k in 0..W {
                    out[n + k] = at + i64::from(m.trailing_zeros());
                    m &= m.wrapping_sub(1);
                }
                if count > W {
                    let mut j = n + W;
                    while m != 0 && j < out.len() {
                        out[j] = at + i64::from(m.trailing_zeros());
                        j += 1;
                        m &= m - 1;
                    }
                }
                n = (n + count).min(out.len());
            } else {
                while m != 0 {
                    if n == out.len() {
                        return n;
                    }
                    out[n] = at + i64::from(m.trailing_zeros());
                    n += 1;
                    m &= m - 1;
                }
            }
            at += 64;
        }
        n + super::list_words(chunks.remainder(), at, &mut out[n..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the 8- and 32-flag chunks, sparse and dense patterns, against a
    /// plain loop (the AVX2 path where the machine has it, the words elsewhere).
    #[test]
    fn counts_and_lists_agree_with_a_plain_loop() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for len in (0..80).chain([255, 256, 257, 1000, 12_008]) {
            for density in [0.0, 0.005, 0.02, 0.3, 1.0] {
                let flags: Vec<bool> = (0..len).map(|_| rng.random_bool(density)).collect();
                let want: Vec<i64> = (0..len as i64)
                    .filter(|&j| flags[j as usize])
                    .map(|j| j - 3)
                    .collect();
                assert_eq!(count_set(&flags), want.len(), "len {len}");
                assert_eq!(count_words(as_bytes(&flags)), want.len(), "len {len}");
                let mut out = vec![0; len + 1];
                let n = list_set(&flags, -3, &mut out);
                assert_eq!(&out[..n], &want[..], "len {len}");
                let n = list_words(as_bytes(&flags), -3, &mut out);
                assert_eq!(&out[..n], &want[..], "len {len}");
                // Exactly as long as the count (as `sort_slots` asks): the sparsest flags take
                // the loop per set flag, denser ones three or four writes a chunk.
                let mut exact = vec![0; want.len()];
                assert_eq!(list_set(&flags, -3, &mut exact), want.len());
                assert_eq!(exact, want, "len {len}");
                // A short `out` takes the first flags and stops.
                let cap = want.len() / 2;
                let mut short = vec![0; cap];
                assert_eq!(list_set(&flags, -3, &mut short), cap);
                assert_eq!(&short[..], &want[..cap]);
            }
        }
    }
}
