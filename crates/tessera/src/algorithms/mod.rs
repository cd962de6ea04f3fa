//! Algorithms driven from Rust over compiled kernels, each compiled by the caller's [`Runner`]
//! (`crate::run::Runner`): genomic interval operations and point searches on continuous
//! tensors ([`intervals`], [`points`]); graph algorithms (Finch §6.4), each step a program of
//! `examples/` run until the algorithm converges.

pub mod bellman_ford;
pub mod bfs;
pub mod intervals;
pub mod owners;
pub mod points;

use crate::error::{Error, Result};
use crate::levels::Format;
use crate::runtime::Buffer;
use crate::tensor::Tensor;

/// Check that `a` is a square adjacency matrix and `source` one of its vertices.
fn check_graph(a: &Tensor, source: usize, what: &str) -> Result<usize> {
    let n = a.shape.first().copied().unwrap_or(0);
    if a.rank() != 2 || a.shape[1] != n {
        return Err(Error::tensor(
            "A",
            format!(
                "a graph needs a square {what} matrix, got shape {:?}",
                a.shape
            ),
        ));
    }
    if source >= n {
        return Err(Error::tensor(
            "A",
            format!("source {source} is outside the graph's 0..{n} vertices"),
        ));
    }
    Ok(n)
}

/// A vector of length `n` holding `value` at `source` and the format's fill elsewhere.
fn one_hot(format: &str, n: usize, source: usize, value: Buffer) -> Result<Tensor> {
    Tensor::from_coo(
        &Format::parse(format, None)?,
        &[n],
        &[vec![source as i64]],
        &value,
        |x, _| x,
    )
}

/// Call `f` on each member of a `SparseByteMap(Pattern())` vector, in order, read straight
/// from its sorted list (`srt[ptr[0]..ptr[1]]`): the drivers read a frontier once per step,
/// and the generic [`Tensor::for_each_stored`] walk (a closure and a dynamic element read per
/// entry) was a large share of a thin BFS level's fixed cost. Another layout is walked
/// generically.
pub(crate) fn for_each_member(t: &Tensor, f: &mut dyn FnMut(usize)) {
    if let [Buffer::I64(ptr), Buffer::Bool(_), Buffer::I64(srt)] = &t.levels[0][..]
        && let [lo, hi, ..] = ptr[..]
        && let Some(members) = usize::try_from(lo)
            .ok()
            .zip(usize::try_from(hi).ok())
            .and_then(|(lo, hi)| srt.get(lo..hi))
    {
        members.iter().for_each(|&c| f(c as usize));
        return;
    }
    t.for_each_stored(&mut |c, v| {
        if v.as_bool() {
            f(c[0])
        }
    });
}

/// Empty a `SparseByteMap(Pattern())` vector in O(entries): unset the table slots its sorted
/// list names, then empty the list (the BFS and Bellman-Ford kernels do not declare their
/// output flags, see examples/bfs_push.tess).
pub(crate) fn empty_frontier(t: &mut Tensor) -> Result<()> {
    if let [ptr, Buffer::Bool(tbl), Buffer::I64(srt)] = &mut t.levels[0][..] {
        // One mutable borrow of the table, not one per entry (each is a call that checks
        // whether the store must be copied first).
        let tbl: &mut [bool] = tbl;
        for &q in srt.iter() {
            if let Some(slot) = usize::try_from(q).ok().and_then(|q| tbl.get_mut(q)) {
                *slot = false;
            }
        }
        srt.clear();
        *ptr = Buffer::I64(vec![0, 0].into());
        return Ok(());
    }
    // Another layout: start from a fresh empty vector.
    *t = Tensor::empty(&t.format, &t.shape)?;
    Ok(())
}

/// Move the set flags of a `Dense(Element(false))` vector `t` (named `name` in errors) into
/// `members`, in increasing order, and clear them, so that it is all false again for the next
/// step: how a driver turns the flags a parallel step sets (a Dense vector, which chunks may
/// update at once, unlike a sorted list) into the next frontier. One read pass over the n
/// flags, 64 at a time: a block is first tested whole (an OR of its bytes, which the compiler
/// vectorises), so the blocks with no flag set (most of them under a thin frontier) cost a few
/// instructions; a block with a flag set becomes the bits of a word (branch-free), whose set
/// bits are then walked, so a frontier spread over the vertices costs no mispredicted branch
/// per flag. Then the listed flags alone are cleared: the store is written (and copied first
/// if shared) only when a flag was set. A split BFS push step, which drains n flags after
/// a few thousand edges, spent ~16 us per step in the earlier version (a whole-vector test,
/// then every block turned into bits and the flagged blocks cleared whole).
pub(crate) fn drain_flags(t: &mut Tensor, name: &str, members: &mut Vec<i64>) -> Result<()> {
    members.clear();
    let flags = flag_values(t, name)?;
    list_flags(flags, 0, members);
    if !members.is_empty() {
        let flags: &mut [bool] = flags;
        for &m in members.iter() {
            flags[m as usize] = false;
        }
    }
    Ok(())
}

/// [`drain_flags`] of a Dense flag vector or matrix `t` (its values flat, in order) split into
/// parts of `block` flags, drained at once on up to `threads` threads, each part's flags by the
/// thread that drains it. Each part is a contiguous block listed in order, so the parts' lists
/// joined in part order are exactly [`drain_flags`]'s: the same members on any number of
/// threads. Bellman-Ford's owned rounds drain the flags each thread set in its own block.
pub(crate) fn drain_flags_by_part(
    t: &mut Tensor,
    name: &str,
    members: &mut Vec<i64>,
    block: usize,
    threads: usize,
) -> Result<()> {
    members.clear();
    let flags: &mut [bool] = flag_values(t, name)?;
    let block = block.max(1);
    let mut lists: Vec<Vec<i64>> = vec![vec![]; flags.len().div_ceil(block)];
    let work: Vec<crate::backend::parallel::Task<'_>> = flags
        .chunks_mut(block)
        .zip(&mut lists)
        .enumerate()
        .map(|(p, (part, list))| {
            Box::new(move || {
                list_flags(part, p * block, list);
                let base = (p * block) as i64;
                list.iter().for_each(|&m| part[(m - base) as usize] = false);
            }) as crate::backend::parallel::Task<'_>
        })
        .collect();
    crate::backend::parallel::on_threads(work, threads);
    for list in lists {
        members.extend_from_slice(&list);
    }
    Ok(())
}

/// The flag store of a Dense(..(Element(false))) tensor, an error naming `name` otherwise.
fn flag_values<'t>(
    t: &'t mut Tensor,
    name: &str,
) -> Result<&'t mut crate::runtime::store::Store<bool>> {
    let format = t.format.to_string();
    match t.levels.last_mut().and_then(|l| l.first_mut()) {
        Some(Buffer::Bool(flags)) => Ok(flags),
        _ => Err(Error::tensor(
            name,
            format!("expected a Dense(Element(false)) flag vector, got {format}"),
        )),
    }
}

/// The positions `base + k` of the set flags of `flags` onto `out`, in order (see
/// [`drain_flags`] for how the blocks are read).
fn list_flags(flags: &[bool], base: usize, out: &mut Vec<i64>) {
    const BLOCK: usize = 64;
    for (b, block) in flags.chunks(BLOCK).enumerate() {
        if block.iter().fold(0u8, |any, &f| any | u8::from(f)) == 0 {
            continue;
        }
        let mut bits = flag_bits(block);
        while bits != 0 {
            out.push((base + b * BLOCK) as i64 + i64::from(bits.trailing_zeros()));
            bits &= bits - 1;
        }
    }
}

/// The flags of `block` (at most 64) as the bits of a word, bit k for flag k. Eight flags
/// at a time: as bytes of 0 or 1 they form a word (one load), and the multiplication by
/// `GATHER` adds byte k's bit into bit 56 + k without carries (the partial products' shifts
/// `8 j + 56 - 7 k` are distinct), a shift and a multiply where a byte at a time costs a load,
/// a shift and an or per flag.
fn flag_bits(block: &[bool]) -> u64 {
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let eights = block.chunks_exact(8);
    let tail = eights.remainder();
    let mut bits = 0u64;
    let mut at = 0;
    for eight in eights {
        let word = u64::from_le_bytes(std::array::from_fn(|k| u8::from(eight[k])));
        bits |= (word.wrapping_mul(GATHER) >> 56) << at;
        at += 8;
    }
    for (k, &f) in tail.iter().enumerate() {
        bits |= u64::from(f) << (at + k);
    }
    bits
}

/// Make the `SparseByteMap(Pattern())` vector `t` of length `n` hold exactly `members`
/// (increasing, each below `n`): its previous entries are unset in O(entries) as
/// [`empty_frontier`] does, then the members' slots are set and the sorted list is theirs.
pub(crate) fn set_frontier(t: &mut Tensor, n: usize, members: &[i64]) -> Result<()> {
    empty_frontier(t)?;
    match &mut t.levels[0][..] {
        [Buffer::I64(ptr), Buffer::Bool(tbl), Buffer::I64(srt)] => {
            if tbl.len() < n {
                tbl.resize(n, false);
            }
            let tbl: &mut [bool] = tbl;
            for &q in members {
                match usize::try_from(q).ok().and_then(|q| tbl.get_mut(q)) {
                    Some(slot) => *slot = true,
                    None => {
                        return Err(Error::tensor(
                            "F",
                            format!("frontier member {q} is outside 0..{n}"),
                        ));
                    }
                }
            }
            srt.extend_from_slice(members);
            *ptr = vec![0, members.len() as i64].into();
            Ok(())
        }
        _ => Err(Error::tensor(
            "F",
            format!(
                "expected a SparseByteMap(Pattern()) frontier, got {}",
                t.format
            ),
        )),
    }
}

/// The row pointers of a `Dense(SparseList(..))` matrix with `n` rows (out-degrees are
/// `p[v + 1] - p[v]`), `None` for other formats.
fn row_pointers(a: &Tensor, n: usize) -> Option<Vec<i64>> {
    use crate::levels::LevelKind;
    use crate::levels::format::Coord;
    match (&a.format.levels[..], a.levels.get(1)) {
        (
            [
                LevelKind::Dense,
                LevelKind::SparseList {
                    coord: Coord::I64 | Coord::I32,
                },
                _,
            ],
            Some(bufs),
        ) => match bufs.first() {
            Some(p) if p.len() == n + 1 => Some(crate::levels::shared::ints(p).into_owned()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_bits_are_the_flags_in_order() {
        for len in [0, 1, 7, 8, 9, 63, 64] {
            for seed in 0..20u64 {
                let flags: Vec<bool> = (0..len)
                    .map(|k| (seed.wrapping_mul(0x9e37_79b9) >> (k % 29)) & 1 == 1 || k == seed)
                    .collect();
                let want = flags
                    .iter()
                    .enumerate()
                    .fold(0u64, |m, (k, &f)| m | (u64::from(f) << k));
                assert_eq!(flag_bits(&flags), want, "{len} flags, seed {seed}");
            }
        }
        assert_eq!(flag_bits(&[true; 64]), u64::MAX);
    }

    #[test]
    fn drained_flags_become_the_next_frontier() {
        let n = 200;
        let set: Vec<usize> = vec![0, 3, 63, 64, 65, 127, 128, 150, 199];
        let mut flags = vec![false; n];
        set.iter().for_each(|&k| flags[k] = true);
        let dense = Format::parse("Dense(Element(false))", None).unwrap();
        let mut f = Tensor::from_dense(&dense, &[n], &Buffer::Bool(flags.into())).unwrap();
        let mut members = vec![42];
        drain_flags(&mut f, "F", &mut members).unwrap();
        let want: Vec<i64> = set.iter().map(|&k| k as i64).collect();
        assert_eq!(members, want);
        assert_eq!(f.to_dense(), Buffer::Bool(vec![false; n].into()));
        // Into a frontier that held other members: exactly the new ones.
        let mut frontier = one_hot(
            "SparseByteMap(Pattern())",
            n,
            5,
            Buffer::Bool(vec![true].into()),
        )
        .unwrap();
        set_frontier(&mut frontier, n, &members).unwrap();
        let mut got = vec![];
        for_each_member(&frontier, &mut |c| got.push(c as i64));
        assert_eq!(got, want);
        let mut table = vec![false; n];
        set.iter().for_each(|&k| table[k] = true);
        assert_eq!(frontier.to_dense(), Buffer::Bool(table.into()));
        // Nothing set: no member, and an out-of-range member is an error, not a panic.
        drain_flags(&mut f, "F", &mut members).unwrap();
        assert!(members.is_empty());
        assert!(set_frontier(&mut frontier, n, &[n as i64]).is_err());
        assert!(drain_flags(&mut frontier, "F", &mut members).is_err());
    }

    #[test]
    fn flags_drained_by_part_are_the_flags_in_order() {
        let n = 130;
        let set = [0, 5, 8, 63, 64, 100, 129];
        let mut flags = vec![false; n];
        set.iter().for_each(|&k| flags[k] = true);
        let want: Vec<i64> = set.iter().map(|&k| k as i64).collect();
        // A vector and the same flags as a matrix of parts (how the owned rounds hold them).
        let shapes: [(&str, Vec<usize>); 2] = [
            ("Dense(Element(false))", vec![n]),
            ("Dense(Dense(Element(false)))", vec![2, n / 2]),
        ];
        for (format, shape) in shapes {
            let f = Format::parse(format, None).unwrap();
            // Parts of any size (64-flag words crossing their ends), on 1 and 2 threads.
            for block in [1, 7, 64, 65, 129, 130, 1000] {
                for threads in [1, 2] {
                    let mut t = Tensor::from_dense(&f, &shape, &Buffer::Bool(flags.clone().into()))
                        .unwrap();
                    let mut members = vec![3];
                    drain_flags_by_part(&mut t, "F", &mut members, block, threads).unwrap();
                    assert_eq!(members, want, "{format}, block {block}");
                    assert_eq!(t.to_dense(), Buffer::Bool(vec![false; n].into()));
                    drain_flags_by_part(&mut t, "F", &mut members, block, threads).unwrap();
                    assert!(members.is_empty());
                }
            }
        }
        let d = Format::parse("Dense(Element(0.0))", None).unwrap();
        let mut wrong = Tensor::from_dense(&d, &[3], &Buffer::F64(vec![0.0; 3].into())).unwrap();
        let mut members = vec![];
        assert!(drain_flags_by_part(&mut wrong, "F", &mut members, 64, 1).is_err());
    }
}
