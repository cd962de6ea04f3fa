//! Backends: turn a checked loop-IR [`Kernel`] into something that runs on buffers.
//!
//! - [`Jit`] (default): Cranelift, in-process, milliseconds to compile.
//! - [`CBackend`] (`--backend c`): C source compiled by the system compiler into a shared
//!   object cached on disk; slower to compile the first time, faster code.
//! - [`Tiered`] (`--backend tiered`, the command line's default): the JIT at once, C in a
//!   background thread once the kernel has proved hot, swapped in for later calls.
//! - [`Interpreter`]: walks the IR directly. No compile time at all; used to cross-check the
//!   JIT and where native code generation is unavailable.
//!
//! All report runtime failures the same way (see [`KernelFault`]), so a kernel gives the same
//! error whichever backend ran it.

mod c;
mod interp;
mod jit;
mod limit_code;
pub mod parallel;
pub(crate) mod ranges;
mod tiered;
pub(crate) mod versioning;
pub(crate) mod walked;

pub use c::CBackend;
pub use interp::Interpreter;
pub use jit::Jit;
pub use tiered::Tiered;

use crate::error::{Error, Result};
use crate::ir::cx::{KernelError, KernelErrorKind};
use crate::ir::{BufId, Kernel};
use crate::runtime::Buffer;

/// Compiles kernels.
pub trait Backend {
    fn name(&self) -> &'static str;
    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>>;

    /// Whether `compile` would find this kernel ready (compiled earlier, in this process or
    /// on disk) rather than build it.
    fn is_cached(&self, _kernel: &Kernel) -> bool {
        false
    }

    /// Which kernels this backend compiles: after every pass (the default), or also or only
    /// without the passes that copy loops for speed (`run::late_passes_with`), for a first
    /// tier whose point is its compile time. The runner calls [`Backend::compile_with_lean`]
    /// when both are wanted.
    fn passes(&self) -> Passes {
        Passes::Full
    }

    /// Compile a kernel given twice: `lean` before the loop-copying passes, `full` after them
    /// (the same buffers, results and faults), for a backend whose [`Backend::passes`] are
    /// [`Passes::Both`]: its first code from `lean`.
    fn compile_with_lean(&self, _lean: &Kernel, full: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        self.compile(full)
    }
}

/// The kernels a backend compiles ([`Backend::passes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passes {
    /// After every pass.
    Full,
    /// Without the loop-copying passes (a JIT used as a first tier).
    Lean,
    /// Both: a first tier from the lean kernel, an optimised tier from the full one.
    Both,
}

/// A kernel ready to run on buffers laid out as its `Kernel::bufs` declare.
pub trait CompiledKernel {
    /// Run on `bufs` (one per declared buffer, of the declared element types). Growable buffers
    /// may be resized; on error the buffers hold whatever the kernel wrote before failing.
    fn run(&self, bufs: &mut [Buffer]) -> Result<()>;

    /// Which code runs the next call: `jit`, `c` or `interp` (a tiered kernel answers for
    /// the tier it is on).
    fn tier(&self) -> &'static str;

    /// Finish any compilation still to come, so every later call runs the final code (the
    /// tiered backend's optimised tier; nothing for the others). For benchmarks, which time
    /// the steady state.
    fn settle(&self) {}

    /// The native entry point, for running chunks of a parallel loop on several threads
    /// (`backend::parallel`); `None` for a kernel without native code.
    fn native(&self) -> Option<crate::runtime::abi::KernelFn> {
        None
    }

    /// Time a call spent in this kernel's code through [`CompiledKernel::native`] (the chunks
    /// of a parallel range): the tiered backend counts it towards moving the kernel to C, as
    /// it counts the time of [`CompiledKernel::run`].
    fn ran_natively(&self, _took: std::time::Duration) {}
}

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
    /// The error the fault means, with the data the kernel left: a failing bounds check
    /// stores the index it found in the last slot of buffer 0 (see `Engine::detail`).
    pub fn to_error(self, k: &Kernel, bufs: &[Buffer]) -> Error {
        let decl = |b: BufId| k.bufs.get(b.0 as usize);
        let array =
            |b: BufId| decl(b).map_or_else(|| format!("buffer {}", b.0), |d| d.name.clone());
        let owner = |b: BufId| decl(b).and_then(|d| d.tensor.clone());
        let err = match self {
            KernelFault::Fail(e) => {
                let Some(err) = k.errors.get(e as usize) else {
                    return Error::Backend(format!(
                        "internal error: kernel `{}` failed with code {e}, which names no error",
                        k.name
                    ));
                };
                let mut err = err.clone();
                if let KernelErrorKind::OutOfBounds { value, .. } = &mut err.kind
                    && let Some(Buffer::I64(d)) = bufs.first()
                {
                    *value = d.last().copied();
                }
                err
            }
            KernelFault::OutOfBounds { buf, index } => KernelError::about(
                owner(buf),
                KernelErrorKind::Storage {
                    array: array(buf),
                    index,
                    len: bufs.get(buf.0 as usize).map_or(0, |b| b.len()),
                },
            ),
            KernelFault::Grow { buf, len } => KernelError::about(
                owner(buf),
                KernelErrorKind::Grow {
                    array: array(buf),
                    len,
                },
            ),
        };
        Error::kernel(err)
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

/// A compiled kernel's IR with what its run-time checks need, worked out once at compile
/// time: which buffers it writes ([`Kernel::modified_bufs`]).
pub(crate) struct Checked {
    k: Kernel,
    modified: Vec<bool>,
}

impl Checked {
    pub(crate) fn new(k: &Kernel) -> Checked {
        Checked {
            k: k.clone(),
            modified: k.modified_bufs(),
        }
    }

    /// [`check_buffers`] for this kernel.
    pub(crate) fn check(&self, bufs: &mut [Buffer]) -> Result<()> {
        check_buffers(&self.k, &self.modified, bufs)
    }
}

impl std::ops::Deref for Checked {
    type Target = Kernel;

    fn deref(&self) -> &Kernel {
        &self.k
    }
}

/// Checks shared by all backends before a run: one buffer per declaration, of its type.
/// Besides, every buffer the kernel writes (`modified`, from [`Kernel::modified_bufs`]) is
/// made memory of its own: a buffer sharing NumPy's or another tensor's memory is read in
/// place, but copied before a kernel writes it (the owner's memory is never written).
fn check_buffers(k: &Kernel, modified: &[bool], bufs: &mut [Buffer]) -> Result<()> {
    if bufs.len() != k.bufs.len() {
        return Err(Error::Backend(format!(
            "kernel `{}` takes {} buffers, given {}",
            k.name,
            k.bufs.len(),
            bufs.len()
        )));
    }
    for (d, b) in k.bufs.iter().zip(bufs.iter()) {
        if d.elem != b.elem() {
            return Err(Error::Backend(format!(
                "buffer `{}` should hold {}, given {}",
                d.name,
                d.elem,
                b.elem()
            )));
        }
    }
    for (b, &m) in bufs.iter_mut().zip(modified) {
        if m {
            b.make_owned();
        }
    }
    Ok(())
}

#[cfg(test)]
mod distribute_tests;
#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod tests;
