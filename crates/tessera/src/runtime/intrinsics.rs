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
}
