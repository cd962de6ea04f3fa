//! The tiered backend: every kernel runs Cranelift code from its first call (milliseconds to
//! compile); once its calls have spent [`HOT_AFTER`] on that code, the C backend compiles it in
//! a background thread (a tenth of a second to seconds of one core, on the system compiler)
//! and the calls after that run the optimised object. A kernel whose object is already in the
//! C backend's caches (this process, or the on-disk cache from an earlier one) runs it at once.
//!
//! Why hotness and not "always": most kernels of a session run once on small data, where the
//! JIT's code is already done before `cc` would have started, and compiling every one of them
//! in the background would cost more CPU than it saves. The threshold is the JIT time a kernel
//! has to waste before a compile of about that cost can pay back.
//!
//! Both tiers compute the same results and report the same errors (the differential tests hold
//! the JIT and C backends to the evaluator), so the switch is invisible but for speed. If the
//! optimised tier cannot be built (no C compiler, a compile error), the kernel stays on the JIT.

use super::c::{CBackend, CKernel};
use super::{Backend, CompiledKernel, Jit};
use crate::error::Result;
use crate::ir::Kernel;
use crate::runtime::Buffer;
use std::cell::{Cell, RefCell};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time a kernel's calls spend on the JIT's code before it is compiled with C (overridden by
/// `$TESSERA_HOT_AFTER_MS`).
pub const HOT_AFTER: Duration = Duration::from_millis(50);

/// The JIT now, C for hot kernels.
pub struct Tiered {
    jit: Jit,
    /// `None`: the JIT only (`$TESSERA_TIERS=jit`).
    c: Option<CBackend>,
    hot_after: Duration,
}

impl Default for Tiered {
    fn default() -> Self {
        Tiered::new()
    }
}

impl Tiered {
    /// The JIT and the default C backend (`$CC`, the default cache directory), with the
    /// threshold [`HOT_AFTER`]; `$TESSERA_HOT_AFTER_MS` sets another threshold and
    /// `$TESSERA_TIERS=jit` keeps every kernel on the JIT.
    pub fn new() -> Tiered {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
        let c = match var("TESSERA_TIERS").as_deref() {
            Some("jit") => None,
            _ => Some(CBackend::new()),
        };
        let hot_after = var("TESSERA_HOT_AFTER_MS")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(HOT_AFTER, Duration::from_millis);
        Tiered {
            jit: Jit::new(),
            c,
            hot_after,
        }
    }

    /// Use this C backend for the optimised tier (`None`: none).
    pub fn with_c(mut self, c: Option<CBackend>) -> Tiered {
        self.c = c;
        self
    }

    /// Compile kernels with C once their JIT calls took `d` in all (zero: after the first call).
    pub fn with_hot_after(mut self, d: Duration) -> Tiered {
        self.hot_after = d;
        self
    }
}

impl Backend for Tiered {
    fn name(&self) -> &'static str {
        "tiered"
    }

    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        self.compile_with_lean(kernel, kernel)
    }

    /// The JIT's code from the lean kernel (its compile time is the first call's latency: no
    /// row interleaving), the optimised tier from the full one.
    fn passes(&self) -> super::Passes {
        match (self.jit.passes(), &self.c) {
            (super::Passes::Lean, Some(_)) => super::Passes::Both,
            (passes, _) => passes,
        }
    }

    fn compile_with_lean(&self, lean: &Kernel, full: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        if let Some(c) = &self.c
            && c.is_cached(full)
            && let Ok(k) = c.compile_object(full, false)
        {
            return Ok(Box::new(k));
        }
        Ok(Box::new(TieredKernel {
            fast: self.jit.compile(lean)?,
            kernel: full.clone(),
            c: self.c.clone(),
            hot_after: self.hot_after,
            spent: Cell::new(Duration::ZERO),
            optimised: Arc::new(OnceLock::new()),
            worker: RefCell::new(None),
        }))
    }

    fn is_cached(&self, kernel: &Kernel) -> bool {
        self.c.as_ref().is_some_and(|c| c.is_cached(kernel))
    }
}

/// A kernel on the JIT that moves to C once hot.
struct TieredKernel {
    fast: Box<dyn CompiledKernel>,
    /// What the background compile builds (kept until then).
    kernel: Kernel,
    c: Option<CBackend>,
    hot_after: Duration,
    /// JIT time spent by the calls so far.
    spent: Cell<Duration>,
    /// The optimised object once built, or why it could not be (then the JIT stays).
    optimised: Arc<OnceLock<std::result::Result<CKernel, String>>>,
    /// The background compile, while it may still be running.
    worker: RefCell<Option<JoinHandle<()>>>,
}

impl TieredKernel {
    fn ready(&self) -> Option<&CKernel> {
        self.optimised.get().and_then(|r| r.as_ref().ok())
    }

    /// Start the optimised tier's compile, once.
    fn promote(&self) {
        let Some(c) = &self.c else { return };
        if self.optimised.get().is_some() || self.worker.borrow().is_some() {
            return;
        }
        let (c, kernel, slot) = (c.clone(), self.kernel.clone(), self.optimised.clone());
        let spawned = std::thread::Builder::new()
            .name("tessera-tier2".into())
            .spawn(move || {
                let built = c.compile_object(&kernel, true).map_err(|e| e.to_string());
                let _ = slot.set(built);
            });
        match spawned {
            Ok(h) => *self.worker.borrow_mut() = Some(h),
            // No thread to be had: stay on the JIT.
            Err(e) => {
                let _ = self.optimised.set(Err(e.to_string()));
            }
        }
    }
}

impl CompiledKernel for TieredKernel {
    fn run(&self, bufs: &mut [Buffer]) -> Result<()> {
        if let Some(k) = self.ready() {
            return k.run(bufs);
        }
        let t = Instant::now();
        let result = self.fast.run(bufs);
        self.spent.set(self.spent.get() + t.elapsed());
        if self.spent.get() >= self.hot_after {
            self.promote();
        }
        result
    }

    fn tier(&self) -> &'static str {
        if self.ready().is_some() { "c" } else { "jit" }
    }

    /// The current tier's entry point: parallel loops run their chunks through it, so they
    /// move to C with the rest of the kernel.
    fn native(&self) -> Option<crate::runtime::abi::KernelFn> {
        match self.ready() {
            Some(k) => k.native(),
            None => self.fast.native(),
        }
    }

    /// Chunked calls count towards `HOT_AFTER` like `run`'s: without them a range always
    /// split across threads stayed on the JIT for good (an einsum SpMV from Python ran at the
    /// JIT's speed on two threads, no faster than one C thread).
    fn ran_natively(&self, took: Duration) {
        if self.ready().is_some() {
            return;
        }
        self.spent.set(self.spent.get() + took);
        if self.spent.get() >= self.hot_after {
            self.promote();
        }
    }

    fn settle(&self) {
        self.promote();
        let worker = self.worker.borrow_mut().take();
        if let Some(h) = worker {
            // A panic in the compile leaves the slot empty: the JIT stays.
            let _ = h.join();
        }
    }
}
