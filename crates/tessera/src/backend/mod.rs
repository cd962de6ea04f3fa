//! Backends: turn a checked loop-IR [`Kernel`] into something that runs on buffers.
//!
//! - [`Jit`] (default): Cranelift, in-process, milliseconds to compile.
//! - [`CBackend`] (`--backend c`): C source compiled by the system compiler into a shared
//!   object cached on disk; slower to compile the first time, faster code.
//! - [`Interpreter`]: walks the IR directly. No compile time at all; used to cross-check the
//!   JIT and where native code generation is unavailable.
//!
//! All report runtime failures the same way (see [`KernelFault`]), so a kernel gives the same
//! error whichever backend ran it.

mod c;
mod interp;
mod jit;

pub use c::CBackend;
pub use interp::Interpreter;
pub use jit::Jit;

use crate::error::{Error, Result};
use crate::ir::{BufId, Kernel};
use crate::runtime::Buffer;

/// Compiles kernels.
pub trait Backend {
    fn name(&self) -> &'static str;
    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>>;
}

/// A kernel ready to run on buffers laid out as its `Kernel::bufs` declare.
pub trait CompiledKernel {
    /// Run on `bufs` (one per declared buffer, of the declared element types). Growable buffers
    /// may be resized; on error the buffers hold whatever the kernel wrote before failing.
    fn run(&self, bufs: &mut [Buffer]) -> Result<()>;
}

pub use crate::ir::cx::DETAIL;
pub(crate) use crate::runtime::buffer::{MAX_GROW, grow};

/// Why a kernel stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFault {
    /// `Stmt::Fail(k)`.
    Fail(u32),
    /// A load or store outside a buffer (or a search range outside it).
    OutOfBounds { buf: BufId, index: i64 },
    /// A `Grow` to a length that cannot be allocated.
    Grow { buf: BufId, len: i64 },
}

impl KernelFault {
    pub fn to_error(self, k: &Kernel, bufs: &[Buffer]) -> Error {
        let name = |b: BufId| {
            k.bufs
                .get(b.0 as usize)
                .map(|d| d.name.as_str())
                .unwrap_or("?")
        };
        let msg = match self {
            KernelFault::Fail(e) => {
                let msg = k
                    .errors
                    .get(e as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("error {e}"));
                // A check that reports a value stores it in the last slot of buffer 0.
                match bufs.first() {
                    Some(Buffer::I64(d)) if msg.contains(DETAIL) => {
                        let v = d.last().map_or("?".to_string(), |v| v.to_string());
                        msg.replace(DETAIL, &v)
                    }
                    _ => msg,
                }
            }
            KernelFault::OutOfBounds { buf, index } => {
                let len = bufs.get(buf.0 as usize).map(|b| b.len()).unwrap_or(0);
                format!(
                    "index {index} is out of bounds of `{}` (length {len}): the tensor's arrays are inconsistent",
                    name(buf)
                )
            }
            KernelFault::Grow { buf, len } => {
                format!(
                    "cannot grow `{}` to {len} elements: over the memory limit or out of memory",
                    name(buf)
                )
            }
        };
        Error::Kernel { msg }
    }
}

/// Status codes a native kernel returns (the fault word carries the index or length): 0 is
/// success, `k + 1` is `Fail(k)`, `-(buf + 1)` an out-of-bounds access of `buf`, and
/// `GROW_BASE - buf` a failed grow of `buf`. Both native backends emit exactly these.
pub(crate) const GROW_BASE: i64 = -(1 << 32);

/// Decode a native kernel's status code and fault word (`None`: it succeeded).
pub(crate) fn native_fault(code: i64, word: i64) -> Option<KernelFault> {
    Some(match code {
        0 => return None,
        c if c > 0 => KernelFault::Fail((c - 1) as u32),
        c if c <= GROW_BASE => KernelFault::Grow {
            buf: BufId((GROW_BASE - c) as u32),
            len: word,
        },
        c => KernelFault::OutOfBounds {
            buf: BufId((-c - 1) as u32),
            index: word,
        },
    })
}

/// Checks shared by all backends before a run: one buffer per declaration, of its type.
fn check_buffers(k: &Kernel, bufs: &[Buffer]) -> Result<()> {
    if bufs.len() != k.bufs.len() {
        return Err(Error::Backend(format!(
            "kernel `{}` takes {} buffers, given {}",
            k.name,
            k.bufs.len(),
            bufs.len()
        )));
    }
    for (d, b) in k.bufs.iter().zip(bufs) {
        if d.elem != b.elem() {
            return Err(Error::Backend(format!(
                "buffer `{}` should hold {}, given {}",
                d.name,
                d.elem,
                b.elem()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
