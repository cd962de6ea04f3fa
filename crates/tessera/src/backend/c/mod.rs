//! The C backend (`--backend c`): C source from the loop IR (see `emit`), compiled by the
//! system C compiler into a shared object, cached on disk by a hash of the source, the
//! compiler command and the host processor (see `cache`), and loaded with `libloading`.
//!
//! The shared object exports two functions: `tessera_kernel`, with the native kernel signature
//! of `runtime::abi` (so it runs through `run_native` and reports faults exactly as the JIT),
//! and `tessera_init`, which the loader calls once with the table of runtime helpers
//! ([`Helpers`]) — the object cannot link against the executable's symbols, so it reaches
//! `tessera_grow` and the others through these pointers. Loaded objects stay loaded for the
//! life of the process (a registry keyed by path), so each is initialised exactly once and a
//! second compile of the same kernel in one process neither runs the compiler nor reads the
//! disk.

mod cache;
mod emit;
mod lanes;
mod parts;
mod prefetch;
mod unroll;

use super::{Backend, Checked, CompiledKernel, native_fault};
use crate::error::{Error, Result};
use crate::ir::Kernel;
use crate::ir::math::{Math1, Math2};
use crate::runtime::Buffer;
use crate::runtime::abi::{self, KernelFn, run_native};
use libloading::Library;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Flags after the compiler command and the optimisation level ([`opt_level`]). Beyond
/// `-march=native -shared -fPIC`: `-ffp-contract=off` because fusing `a * b + c` into one
/// rounding would change results against the other backends, `-fno-math-errno` so `sqrt`
/// is one instruction (the IR has no errno to set), and `-frounding-math` because without it
/// GCC folds `0.0 - (double)i` into `-(double)i` (even at `-O0`), which is `-0.0` for `i = 0`
/// where IEEE subtraction gives `+0.0` (`1 / (0.0 - c)` came out `-Inf`; a differential fuzz
/// finding). `-fopenmp-simd` honours the `omp simd` pragmas of vectorised loops (no OpenMP
/// runtime is linked; see `emit::Emitter::vector_pragma`).
const FLAGS: &[&str] = &[
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-frounding-math",
    "-fopenmp-simd",
    "-shared",
    "-fPIC",
];

/// Kernels whose longest function (a large kernel is several: `parts`) has more than this
/// many lines of C are compiled with `-O1` instead of `-O3`.
///
/// GCC's time grows faster than linearly with these single-function kernels (measured with
/// gcc 12: 4,000 lines 1.6 s at -O3; 17,000 lines 26 s at -O3 but 8 s at -O1; 41,000 lines
/// 60 s at -O3, 19 s at -O1). Kernels that large come from deep format nests whose time goes
/// to branching, not arithmetic, so the cheaper level loses little.
const LARGE_KERNEL_LINES: usize = 6000;

/// `-O3`, or `-O1` for very large kernels (see [`LARGE_KERNEL_LINES`]).
fn opt_level(source: &str) -> &'static str {
    if parts::longest_function(source) > LARGE_KERNEL_LINES {
        "-O1"
    } else {
        "-O3"
    }
}

/// The helper table handed to `tessera_init`; its layout must match `tessera_helpers` in the
/// generated C prelude (`emit::PRELUDE`).
#[repr(C)]
struct Helpers {
    grow: *const (),
    sort: *const (),
    sort_perm: *const (),
    sort_slots: *const (),
    hash_find: *const (),
    fmod: *const (),
    math1: [*const (); Math1::ALL.len()],
    math2: [*const (); Math2::ALL.len()],
}

impl Helpers {
    fn new() -> Helpers {
        Helpers {
            grow: abi::tessera_grow as *const (),
            sort: abi::tessera_sort as *const (),
            sort_perm: abi::tessera_sort_perm as *const (),
            sort_slots: abi::tessera_sort_slots as *const (),
            hash_find: abi::tessera_hash_find as *const (),
            fmod: abi::tessera_fmod as *const (),
            math1: Math1::ALL.map(Math1::pointer),
            math2: Math2::ALL.map(Math2::pointer),
        }
    }
}

/// The C backend: a compiler command and a cache directory.
#[derive(Clone, Debug)]
pub struct CBackend {
    /// The compiler program and its leading arguments (`$CC` may be e.g. `ccache gcc`).
    compiler: Vec<String>,
    cache_dir: PathBuf,
    /// How kernels are printed: prefetches, parts, unrolled loops.
    options: emit::Options,
}

impl Default for CBackend {
    fn default() -> Self {
        CBackend::new()
    }
}

impl CBackend {
    /// `$CC` (else `cc`), caching in [`cache::default_dir`].
    pub fn new() -> CBackend {
        let cc = std::env::var("CC")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "cc".into());
        CBackend::with_compiler(&cc)
    }

    /// A given compiler command (split on whitespace), caching in [`cache::default_dir`].
    pub fn with_compiler(cmd: &str) -> CBackend {
        CBackend {
            compiler: cmd.split_whitespace().map(str::to_string).collect(),
            cache_dir: cache::default_dir(),
            options: emit::Options::from_env(),
        }
    }

    /// The same backend cutting kernels whose statements take more than `split_lines` lines
    /// of C into functions of about `part_lines` lines (see `backend::c::parts`; 0 and 1: every
    /// top-level statement a function of its own).
    pub fn with_parts(mut self, split_lines: usize, part_lines: usize) -> CBackend {
        self.options.parts = parts::Config {
            split_lines,
            part_lines,
        };
        self
    }

    /// The same backend prefetching gathers `distance` positions ahead (0: none) in loops
    /// whose gathered buffer is larger than `min_bytes` (see `backend::c::prefetch`).
    pub fn with_prefetch(mut self, distance: i64, min_bytes: i64) -> CBackend {
        self.options.prefetch = prefetch::Config::new(distance, min_bytes);
        self
    }

    /// The same backend unrolling scatter loops by `factor` (0 and 1: not at all; see
    /// `backend::c::unroll`).
    pub fn with_unroll(mut self, factor: u32) -> CBackend {
        self.options.unroll = factor;
        self
    }

    /// The same backend caching its shared objects in `dir` (created when needed).
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> CBackend {
        self.cache_dir = dir.into();
        self
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The C source the backend compiles for a kernel (prefetching, parts and unrolling as
    /// the environment says, `emit::Options::from_env`).
    pub fn source(kernel: &Kernel) -> String {
        emit::emit(kernel, &emit::Options::from_env())
    }

    /// The C source this backend compiles for a kernel.
    pub fn source_of(&self, kernel: &Kernel) -> String {
        emit::emit(kernel, &self.options)
    }

    /// Whether the compiler command can be started at all (for tests that skip without it).
    pub fn compiler_available(&self) -> bool {
        let Some((prog, args)) = self.compiler.split_first() else {
            return false;
        };
        std::process::Command::new(prog)
            .args(args)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The full compiler command line for a source, as hashed and as shown in errors.
    fn command(&self, source: &str) -> Vec<String> {
        let mut cmd = self.compiler.clone();
        cmd.push(opt_level(source).to_string());
        cmd.extend(FLAGS.iter().map(|s| s.to_string()));
        cmd
    }
}

/// Loaded objects by path, held weakly: the kernels compiled from an object hold it, and it is
/// unloaded when the last of them goes. (Kept for the life of the process, a long run that
/// compiles many kernels ran out of memory mappings: the differential fuzzer's `dlopen`
/// failed after about 17,000 objects, at Linux's default `vm.max_map_count`.)
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Loaded>>> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Weak<Loaded>>>> = OnceLock::new();
    LOADED.get_or_init(Default::default)
}

/// A loaded, initialised shared object and its kernel entry point.
struct Loaded {
    _lib: Library,
    f: KernelFn,
}

fn load(path: &Path) -> std::result::Result<Loaded, String> {
    // SAFETY: the object was produced by our compiler invocation from generated source whose
    // initialisers only copy a struct; loading runs no other code.
    let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    let helpers = Helpers::new();
    // SAFETY: `tessera_init` is defined by the prelude with exactly this signature; the table
    // matches `tessera_helpers` field for field and is only read during the call.
    unsafe {
        let init = lib
            .get::<unsafe extern "C" fn(*const Helpers)>(b"tessera_init\0")
            .map_err(|e| e.to_string())?;
        init(&helpers);
    }
    // SAFETY: `tessera_kernel` is generated with `KernelFn`'s signature (three pointers in,
    // an i64 out, the C calling convention); the pointer stays valid while `lib` is loaded.
    let f = unsafe {
        *lib.get::<KernelFn>(b"tessera_kernel\0")
            .map_err(|e| e.to_string())?
    };
    Ok(Loaded { _lib: lib, f })
}

impl Backend for CBackend {
    fn name(&self) -> &'static str {
        "c"
    }

    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        Ok(Box::new(self.compile_object(kernel, false)?))
    }

    fn is_cached(&self, kernel: &Kernel) -> bool {
        let source = emit::emit(kernel, &self.options);
        let command = self.command(&source);
        let path = cache::object_path(&self.cache_dir, &source, &command);
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&path)
            .is_some_and(|w| w.strong_count() > 0)
            || path.is_file()
    }
}

impl CBackend {
    /// Compile (or find in the caches) and load `kernel`: the object as its concrete type,
    /// which can cross threads (the tiered backend builds it in the background).
    /// `detached`: see [`cache::compile`].
    pub(crate) fn compile_object(&self, kernel: &Kernel, detached: bool) -> Result<CKernel> {
        let source = emit::emit(kernel, &self.options);
        let command = self.command(&source);
        let path = cache::object_path(&self.cache_dir, &source, &command);
        let lookup = || {
            registry()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&path)
                .and_then(Weak::upgrade)
        };
        if let Some(l) = lookup() {
            return Ok(CKernel {
                loaded: l,
                k: Checked::new(kernel),
            });
        }
        if !path.is_file() {
            cache::compile(&command, &source, &path, &kernel.name, detached)?;
        }
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        let loaded = match reg.get(&path).and_then(Weak::upgrade) {
            Some(l) => l,
            None => {
                let l = match load(&path) {
                    Ok(l) => l,
                    // A damaged cache entry (e.g. from another machine): build it again.
                    Err(_) => {
                        cache::compile(&command, &source, &path, &kernel.name, detached)?;
                        load(&path).map_err(|e| {
                            Error::Backend(format!(
                                "kernel `{}`: cannot load {}: {e}",
                                kernel.name,
                                path.display()
                            ))
                        })?
                    }
                };
                let l = Arc::new(l);
                // Forget unloaded objects now and then, so the map stays the size of what is
                // loaded.
                if reg.len() >= 256 && reg.len().is_power_of_two() {
                    reg.retain(|_, w| w.strong_count() > 0);
                }
                reg.insert(path.clone(), Arc::downgrade(&l));
                l
            }
        };
        Ok(CKernel {
            loaded,
            k: Checked::new(kernel),
        })
    }
}

/// A kernel in a loaded shared object.
pub(crate) struct CKernel {
    loaded: Arc<Loaded>,
    k: Checked,
}

impl CompiledKernel for CKernel {
    fn tier(&self) -> &'static str {
        "c"
    }

    fn run(&self, bufs: &mut [Buffer]) -> Result<()> {
        self.k.check(bufs)?;
        // SAFETY: `check_buffers` verified the buffer count and element types the code was
        // generated for; every access the code makes is bounds-checked against the views (or
        // its range was checked before a loop), and the object was initialised with the
        // helpers when it was loaded.
        let (code, word) = unsafe { run_native(self.loaded.f, bufs) };
        match native_fault(code, word) {
            None => Ok(()),
            Some(fault) => Err(fault.to_error(&self.k, bufs)),
        }
    }

    fn native(&self) -> Option<crate::runtime::abi::KernelFn> {
        Some(self.loaded.f)
    }
}

#[cfg(test)]
mod tests;
