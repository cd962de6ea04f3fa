//! Memory budgets: how many bytes a tensor of a given shape and format takes, the limit runs
//! are held to (the memory the system has available, or a limit the user sets), and the check
//! made *before* anything large is allocated, so a hostile file header or a huge shape is an
//! [`Error::Memory`] naming the tensor instead of an abort in the allocator.
//!
//! The limit is process-wide ([`set_max_memory`], the command line's `--max-memory`), so every
//! allocation path sees it: file readers, tensor construction, kernel outputs and the buffers a
//! kernel grows while it runs. Without a set limit, sizes above [`SMALL`] are compared with
//! `MemAvailable` of `/proc/meminfo`; where that cannot be read there is no limit.

use crate::error::{Error, Result};
use crate::levels::{Format, LevelKind};
use crate::types::ElemType;
use std::sync::atomic::{AtomicU64, Ordering};

/// Sizes up to this many bytes are never refused unless the user set a limit: they cannot
/// exhaust a machine that runs at all, and they spare a `/proc/meminfo` read per tensor.
pub const SMALL: u64 = 64 << 20;

/// The user's limit in bytes; `u64::MAX` means none was set.
static MAX_MEMORY: AtomicU64 = AtomicU64::new(u64::MAX);

/// Hold every allocation to `limit` bytes (`None`: to the memory available, the default).
pub fn set_max_memory(limit: Option<u64>) {
    MAX_MEMORY.store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// The limit set by [`set_max_memory`], if any.
pub fn max_memory() -> Option<u64> {
    match MAX_MEMORY.load(Ordering::Relaxed) {
        u64::MAX => None,
        n => Some(n),
    }
}

/// `MemAvailable` of `/proc/meminfo` in bytes (`None` where there is no such file).
pub fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut it = line.split_whitespace().skip(1);
    let n: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The limit a size of `bytes` is checked against, and whether the user set it (`None`: no
/// limit applies).
fn limit_for(bytes: u64) -> Option<(u64, bool)> {
    match max_memory() {
        Some(l) => Some((l, true)),
        None if bytes <= SMALL => None,
        None => available().map(|a| (a, false)),
    }
}

/// Whether an allocation of `bytes` is within the limit.
pub fn allows(bytes: u64) -> bool {
    limit_for(bytes).is_none_or(|(l, _)| bytes <= l)
}

/// Check that a tensor of `bytes` (`None`: more than fits in 64 bits) is within the limit;
/// the error names the tensor (`""` for the caller to fill in with [`Error::named`]), its
/// shape and its format.
pub fn check(tensor: &str, shape: &[usize], format: &Format, bytes: Option<u64>) -> Result<()> {
    let limit = limit_for(bytes.unwrap_or(u64::MAX));
    match (bytes, limit) {
        (Some(b), Some((l, _))) if b <= l => Ok(()),
        (Some(_), None) => Ok(()),
        (bytes, limit) => Err(Error::Memory {
            tensor: tensor.to_string(),
            shape: shape.to_vec(),
            format: format.to_string(),
            bytes,
            limit: limit.map(|(l, _)| l),
            set_by_user: limit.is_some_and(|(_, user)| user),
        }),
    }
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
    const I: u64 = 8;
    // Levels with a slot for every coordinate cannot have more than 64 bits of them.
    let all = (cells < u64::MAX).then_some(cells);
    // A position array of one i64 per parent, plus one.
    let ptr = parents.checked_add(1)?.checked_mul(I)?;
    let stored = cells.min(entries);
    let per = |n: u64, words: u64| n.checked_mul(words * I);
    Some(match kind {
        LevelKind::Dense => (all?, 0),
        LevelKind::SparseList | LevelKind::SparsePoint => {
            (stored, ptr.checked_add(per(stored, 1)?)?)
        }
        LevelKind::SparseCOO(r) => (stored, ptr.checked_add(per(stored, *r as u64)?)?),
        LevelKind::SparseBlockList | LevelKind::SparseRunList { .. } => {
            (stored, ptr.checked_add(per(stored, 2)?)?)
        }
        // An index and an offset per parent.
        LevelKind::SparseBand => (stored, per(parents, 2)?.checked_add(I)?),
        // A flag per cell and a sorted list; every cell is a child position.
        LevelKind::SparseByteMap => (all?, ptr.checked_add(all?)?.checked_add(per(stored, 1)?)?),
        // Index, value and key arrays plus a hash table of about twice the entries.
        LevelKind::SparseDict => (stored, ptr.checked_add(per(stored, 7)?)?),
        // One run per parent at least; each stored entry can split a run into three.
        LevelKind::RunList { .. } => {
            let runs = cells.min(parents.saturating_add(entries.saturating_mul(2)));
            (runs, ptr.checked_add(per(runs, 1)?)?)
        }
        LevelKind::SparseInterval => (parents, per(parents, 2)?),
        LevelKind::Element(_) => (parents, parents.checked_mul(elem.size() as u64)?),
        LevelKind::Scalar { sparse, .. } => {
            let flag = u64::from(*sparse);
            (parents, parents.checked_mul(elem.size() as u64 + flag)?)
        }
        LevelKind::Pattern => (parents, 0),
    })
}

/// Parse a byte count written as `4G`, `512M`, `1.5G`, `64K`, `100000` (binary units: K is
/// 1024; a trailing `B` or `iB` is allowed).
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (num, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let bad = || format!("`{t}` is not a size (bytes, or with a unit: 512K, 64M, 4G, 1T)");
    let num = num.trim();
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift).ok_or_else(bad);
    }
    let x: f64 = num.parse().map_err(|_| bad())?;
    let bytes = x * (1u64 << shift) as f64;
    if x.is_finite() && x >= 0.0 && bytes < u64::MAX as f64 {
        Ok(bytes as u64)
    } else {
        Err(bad())
    }
}

/// A byte count as a person reads it: `8.0 TiB (8796093022208 bytes)`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{x:.1} {} ({bytes} bytes)", UNITS[u])
    }
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
