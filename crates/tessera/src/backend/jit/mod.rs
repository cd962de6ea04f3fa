//! The Cranelift JIT backend: one native function per kernel, compiled in process.

mod emit;

use super::{Backend, Checked, CompiledKernel, native_fault};
use crate::error::{Error, Result};
use crate::ir::Kernel;
use crate::runtime::Buffer;
use crate::runtime::abi::{KernelFn, run_native};
use cranelift_codegen::ir::{AbiParam, types};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

/// The Cranelift backend. Building the target description once makes each compile cheaper.
pub struct Jit {
    isa: std::result::Result<OwnedTargetIsa, String>,
    /// Compile kernels without row interleaving ([`Backend::passes`]): the default, as the JIT
    /// is the first tier; `$TESSERA_JIT_FULL=1` or [`Jit::with_full_passes`] give it every
    /// pass (for measuring, and for the tests of the interleaved code).
    lean: bool,
}

impl Default for Jit {
    fn default() -> Self {
        Jit::new()
    }
}

impl Jit {
    pub fn new() -> Jit {
        Jit {
            isa: host_isa(),
            lean: std::env::var("TESSERA_JIT_FULL").map_or(true, |v| v != "1"),
        }
    }

    /// This JIT compiling kernels after every pass, row interleaving included.
    pub fn with_full_passes(mut self) -> Jit {
        self.lean = false;
        self
    }
}

fn host_isa() -> std::result::Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    // Cranelift checks every function it is given by default; that is a debugging aid
    // (our IR is type-checked before lowering, `ir::Kernel::check`), which costs a first-tier
    // compile 5-15% in release builds. Debug builds, the tests', keep it.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    flags
        .set("enable_verifier", verify)
        .map_err(|e| e.to_string())?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by Cranelift: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())?;
    if isa.pointer_type() != types::I64 {
        return Err("the JIT needs a 64-bit target".into());
    }
    Ok(isa)
}

impl Backend for Jit {
    fn name(&self) -> &'static str {
        "jit"
    }

    fn passes(&self) -> super::Passes {
        if self.lean {
            super::Passes::Lean
        } else {
            super::Passes::Full
        }
    }

    fn compile(&self, kernel: &Kernel) -> Result<Box<dyn CompiledKernel>> {
        let isa = self.isa.as_ref().map_err(|e| Error::Backend(e.clone()))?;
        let backend_err =
            |e: &dyn std::fmt::Display| Error::Backend(format!("kernel `{}`: {e}", kernel.name));
        let mut module = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
        let ptr = module.target_config().pointer_type();
        let mut ctx = module.make_context();
        ctx.func.signature.params.extend([
            AbiParam::new(ptr),
            AbiParam::new(ptr),
            AbiParam::new(ptr),
        ]);
        ctx.func.signature.returns.push(AbiParam::new(types::I64));
        let mut fctx = FunctionBuilderContext::new();
        emit::emit(
            kernel,
            &mut ctx.func,
            &mut fctx,
            module.target_config(),
            isa.default_call_conv(),
        );
        let id = module
            .declare_function("tessera_kernel", Linkage::Export, &ctx.func.signature)
            .map_err(|e| backend_err(&e))?;
        let dump = std::env::var_os("TESSERA_DUMP_ASM").is_some();
        ctx.set_disasm(dump);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| backend_err(&format!("{e:?}")))?;
        // `TESSERA_DUMP_ASM=1` prints each kernel's machine code, for reading what Cranelift
        // made of the loop IR.
        if dump && let Some(text) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
            eprintln!("{text}");
        }
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(|e| backend_err(&e))?;
        let code = module.get_finalized_function(id);
        // SAFETY: the function was generated with exactly `KernelFn`'s signature (three pointer
        // parameters, an i64 result, the platform's default calling convention).
        let f = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
        Ok(Box::new(Native {
            module: Some(module),
            f,
            k: Checked::new(kernel),
        }))
    }
}

/// A compiled kernel; owns the module that holds its machine code.
struct Native {
    module: Option<JITModule>,
    f: KernelFn,
    k: Checked,
}

impl CompiledKernel for Native {
    fn tier(&self) -> &'static str {
        "jit"
    }

    fn run(&self, bufs: &mut [Buffer]) -> Result<()> {
        self.k.check(bufs)?;
        // SAFETY: `check_buffers` verified the buffer count and element types the code was
        // generated for; every access the code makes is bounds-checked against the views.
        let (code, word) = unsafe { run_native(self.f, bufs) };
        match native_fault(code, word) {
            None => Ok(()),
            Some(fault) => Err(fault.to_error(&self.k, bufs)),
        }
    }

    fn native(&self) -> Option<crate::runtime::abi::KernelFn> {
        Some(self.f)
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: `f` points into this module's memory and is dropped with `self`; no call
            // can be running because `run` borrows `self`.
            unsafe { m.free_memory() };
        }
    }
}
