//! How many bytes a tensor of a given shape and format takes, checked against the memory
//! limit of [`crate::runtime::memory`] (re-exported here) before anything is allocated.

pub use crate::runtime::memory::*;

use crate::error::Result;
use crate::levels::{Format, LevelKind};
use crate::types::ElemType;

/// [`crate::runtime::memory::check`] for a tensor of this format.
pub fn check(tensor: &str, shape: &[usize], format: &Format, bytes: Option<u64>) -> Result<()> {
    crate::runtime::memory::check(tensor, shape, format, bytes)
}

/// [`check`] of a tensor of this format and shape holding `entries` stored entries.
pub fn check_tensor(format: &Format, shape: &[usize], entries: usize) -> Result<()> {
    check("", shape, format, tensor_bytes(format, shape, entries))
}

/// Bytes of the arrays of a tensor of this format and shape holding at most `entries` stored
/// entries (0 for an empty tensor), or `None` if the size does not fit in 64 bits. Dense
/// levels multiply the positions below them; sparse levels store a position array per parent
/// and at most `entries` children.
pub fn tensor_bytes(format: &Format, shape: &[usize], entries: usize) -> Option<u64> {
    let elem = format.elem();
    let entries = entries as u64;
    let mut parents: u64 = 1;
    let mut bytes: u64 = 0;
    let mut dim = 0;
    for kind in &format.levels {
        let rank = kind.rank();
        // Saturating: a sparse level under a huge dense one stores at most `entries`.
        let cells = shape
            .get(dim..dim + rank)?
            .iter()
            .fold(parents, |acc, &n| acc.saturating_mul(n as u64));
        dim += rank;
        let (children, level) = level_bytes(kind, elem, parents, cells, entries)?;
        bytes = bytes.checked_add(level)?;
        parents = children;
    }
    Some(bytes)
}

/// Child positions and bytes of one level with `parents` positions above it and `cells`
/// coordinates under them (`parents` times the level's dimensions).
fn level_bytes(
    kind: &LevelKind,
    elem: ElemType,
    parents: u64,
    cells: u64,
    entries: u64,
) -> Option<(u64, u64)> {
    // Index words are 4 bytes in a `coord=i32` level (its positions follow its coordinates).
    let word = kind.coord().pos_elem().size() as u64;
    // Levels with a slot for every coordinate cannot have more than 64 bits of them.
    let all = (cells < u64::MAX).then_some(cells);
    // A position array of one i64 per parent, plus one.
    let ptr = parents.checked_add(1)?.checked_mul(word)?;
    let stored = cells.min(entries);
    let per = |n: u64, words: u64| n.checked_mul(words * word);
    Some(match kind {
        LevelKind::Dense => (all?, 0),
        LevelKind::SparseList { .. } | LevelKind::SparsePoint { .. } => {
            (stored, ptr.checked_add(per(stored, 1)?)?)
        }
        // Slices of 8 fibers padded to their longest: at most 8 slots an entry, and at most
        // every coordinate of the fibers rounded up to whole slices; a length per parent.
        LevelKind::SparseSliceList { .. } => {
            let dim = cells.checked_div(parents).unwrap_or(0);
            let padded = parents.div_ceil(8).saturating_mul(8).saturating_mul(dim);
            let slots = entries.saturating_mul(8).min(padded);
            (
                slots,
                ptr.checked_add(per(parents, 1)?)?
                    .checked_add(per(slots, 1)?)?,
            )
        }
        LevelKind::SparseCOO(r) => (stored, ptr.checked_add(per(stored, *r as u64)?)?),
        LevelKind::SparseBlockList | LevelKind::SparseRunList { .. } => {
            (stored, ptr.checked_add(per(stored, 2)?)?)
        }
        // An index and an offset per parent.
        LevelKind::SparseBand => (stored, per(parents, 2)?.checked_add(word)?),
        // A flag per cell and a sorted list; every cell is a child position.
        LevelKind::SparseByteMap => (all?, ptr.checked_add(all?)?.checked_add(per(stored, 1)?)?),
        // Index, value and key arrays plus a hash table of about twice the entries.
        LevelKind::SparseDict => (stored, ptr.checked_add(per(stored, 7)?)?),
        // One run per parent at least; each stored entry can split a run into three.
        LevelKind::RunList { .. } => {
            let runs = cells.min(parents.saturating_add(entries.saturating_mul(2)));
            (runs, ptr.checked_add(per(runs, 1)?)?)
        }
        LevelKind::SparseInterval { .. } => (parents, per(parents, 2)?),
        LevelKind::Element(_) => (parents, parents.checked_mul(elem.size() as u64)?),
        LevelKind::Scalar { sparse, .. } => {
            let flag = u64::from(*sparse);
            (parents, parents.checked_mul(elem.size() as u64 + flag)?)
        }
        LevelKind::Pattern => (parents, 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Scalar;

    fn fmt(s: &str, rank: usize) -> Format {
        Format::parse(s, Some(rank)).unwrap()
    }

    #[test]
    fn bytes_follow_the_structure() {
        let dense = fmt("Dense(Dense(Element(0.0)))", 2);
        assert_eq!(tensor_bytes(&dense, &[3, 4], 0), Some(96));
        let csr = fmt("csr", 2);
        // ptr of 4, idx and val of 5 entries.
        assert_eq!(tensor_bytes(&csr, &[3, 4], 5), Some(4 * 8 + 5 * 8 + 5 * 8));
        // A sparse vector of length 10^12 is small; a CSR matrix with 10^12 rows is not.
        let sv = fmt("SparseList(Element(0))", 1);
        assert_eq!(tensor_bytes(&sv, &[1_000_000_000_000], 1), Some(16 + 8 + 8));
        assert_eq!(
            tensor_bytes(&csr, &[1_000_000_000_000, 5], 1),
            Some(8_000_000_000_008 + 16)
        );
        let bytemap = fmt("Dense(SparseByteMap(Element(0x00)))", 2);
        assert_eq!(
            tensor_bytes(&bytemap, &[2, 10], 3),
            Some(3 * 8 + 20 + 3 * 8 + 20)
        );
        let u8s = Format::dense(1, Scalar::U8(0));
        assert_eq!(tensor_bytes(&u8s, &[7], 0), Some(7));
    }

    #[test]
    fn overflow_is_none() {
        let dense = fmt("Dense(Dense(Element(0.0)))", 2);
        let huge = 1usize << 40;
        assert_eq!(tensor_bytes(&dense, &[huge, huge], 0), None);
        let csr = fmt("csr", 2);
        assert_eq!(tensor_bytes(&csr, &[usize::MAX, 1], 0), None);
        // Rows times columns overflow, but only the stored entries count below the rows.
        let n = 1usize << 40;
        assert_eq!(
            tensor_bytes(&csr, &[n, n], 1),
            Some((n as u64 + 1) * 8 + 16)
        );
        // A shape of the wrong rank is not a size either.
        assert_eq!(tensor_bytes(&csr, &[3], 0), None);
    }

    #[test]
    fn check_names_the_tensor_and_refuses_overflow() {
        let dense = fmt("Dense(Dense(Element(0.0)))", 2);
        let e = check("C", &[1 << 40, 1 << 40], &dense, None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("`C`") && msg.contains("1099511627776x"),
            "{msg}"
        );
        assert!(check("C", &[2, 2], &dense, Some(32)).is_ok());
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("10B"), Ok(10));
        for bad in ["", "G", "-1", "1X", "99999999999T", "nanG"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn available_memory_is_read_on_linux() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(10), "10 bytes");
        assert_eq!(human(3 << 30), "3.0 GiB (3221225472 bytes)");
    }
}
