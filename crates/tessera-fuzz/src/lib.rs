//! Fuzz targets for Tessera. Each target is a function from bytes that returns normally on any
//! input (malformed input is refused with an error, which is fine) and panics only when it
//! found a bug: a panic inside the library, an abort, a hang, or a broken promise that the
//! target checks (a printed program or format that does not parse back, file data that does
//! not read back after being written, compiled kernels that disagree with the evaluator).
//!
//! `fuzz/` (cargo-fuzz, nightly) runs them under libFuzzer; `tests/short_run.rs` runs them on
//! stable over the committed corpus and some mutations of it. See `fuzz/README.md`.

pub mod differential;
pub mod einsum;
pub mod format;
pub mod grad;
pub mod program;
pub mod readers;
pub mod schedule;

pub use differential::differential;
pub use einsum::einsum;
pub use format::format;
pub use grad::grad;
pub use program::program;
pub use readers::{mtx, npy, nrrd, png, tns};
pub use schedule::schedule;

use tessera::runtime::Buffer;

/// A fuzz target: bytes in, a panic on a finding.
pub type Target = fn(&[u8]);

/// Every target by name, for drivers that run them all.
pub const TARGETS: &[(&str, Target)] = &[
    ("program", program),
    ("format", format),
    ("mtx", mtx),
    ("npy", npy),
    ("tns", tns),
    ("png", png),
    ("nrrd", nrrd),
    ("einsum", einsum),
    ("differential", differential),
    ("grad", grad),
    ("schedule", schedule),
];

/// Split `TEXT \0 PARAMETERS`; `None` if the text is not UTF-8. Without a NUL, all of `data`
/// is the text.
pub(crate) fn split_text(data: &[u8]) -> Option<(&str, &[u8])> {
    let (text, params) = match data.iter().position(|&b| b == 0) {
        Some(k) => (&data[..k], &data[k + 1..]),
        None => (data, &[][..]),
    };
    std::str::from_utf8(text).ok().map(|t| (t, params))
}

/// Same element type, same length, and equal values (floats bit for bit, except that any NaN
/// equals any NaN: a file's NaN may be written back with another sign or payload).
pub(crate) fn same_values(a: &Buffer, b: &Buffer) -> bool {
    a.elem() == b.elem()
        && a.len() == b.len()
        && (0..a.len()).all(|k| {
            let (x, y) = (a.get(k), b.get(k));
            x == y || (x.is_nan() && y.is_nan())
        })
}
