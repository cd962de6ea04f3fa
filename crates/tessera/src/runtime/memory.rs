//! Memory budgets: the limit runs are held to (the memory the system has available, or a limit the user sets), and the check
//! made *before* anything large is allocated, so a hostile file header or a huge shape is an
//! [`Error::Memory`] naming the tensor instead of an abort in the allocator.
//!
//! The limit is process-wide ([`set_max_memory`], the command line's `--max-memory`), so every
//! allocation path sees it: file readers, tensor construction, kernel outputs and the buffers a
//! kernel grows while it runs. Without a set limit, sizes above [`SMALL`] are compared with
//! `MemAvailable` of `/proc/meminfo`; where that cannot be read there is no limit.

//!
//! How many bytes a tensor of a format takes is `crate::memory` (it needs the level formats,
//! which sit above this layer); readers that know their sizes directly check them here.

use crate::error::{Error, Result};
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
/// shape and its format. The format is printed only into an error: a kernel call checks its
/// outputs' sizes every time, and printing a format costs more than a tiny kernel.
pub fn check(
    tensor: &str,
    shape: &[usize],
    format: impl std::fmt::Display,
    bytes: Option<u64>,
) -> Result<()> {
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

pub use crate::error::human;
