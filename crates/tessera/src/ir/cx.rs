//! The IR under construction: variables, buffers and the runtime errors its checks raise.

pub use crate::kernel_error::{KernelError, KernelErrorKind, Order};

use crate::ir::{BufDecl, BufId, VarDecl, VarId};
use crate::types::ElemType;

#[derive(Default)]
pub struct Cx {
    pub vars: Vec<VarDecl>,
    pub bufs: Vec<BufDecl>,
    pub errors: Vec<KernelError>,
}

impl Cx {
    /// A fresh variable; `ty` must be a compute type.
    pub fn var(&mut self, name: &str, ty: ElemType) -> VarId {
        debug_assert_eq!(ty, ty.compute());
        self.vars.push(VarDecl {
            name: name.to_string(),
            ty,
            cold: false,
        });
        VarId(self.vars.len() as u32 - 1)
    }
    /// A buffer of the kernel's own (no tensor's storage).
    pub fn buf(&mut self, name: String, elem: ElemType, growable: bool) -> BufId {
        self.push_buf(name, elem, growable, None)
    }
    /// An array of `tensor`'s storage (faults on it name the tensor).
    pub fn tensor_buf(&mut self, tensor: &str, name: String, elem: ElemType) -> BufId {
        self.push_buf(name, elem, true, Some(tensor.to_string()))
    }
    fn push_buf(
        &mut self,
        name: String,
        elem: ElemType,
        growable: bool,
        tensor: Option<String>,
    ) -> BufId {
        self.bufs.push(BufDecl {
            name,
            elem,
            growable,
            tensor,
            scratch: false,
        });
        BufId(self.bufs.len() as u32 - 1)
    }
    /// Register a runtime error; returns its code for `Stmt::Fail`.
    pub fn error(&mut self, err: KernelError) -> u32 {
        if let Some(k) = self.errors.iter().position(|e| e.same(&err)) {
            return k as u32;
        }
        self.errors.push(err);
        self.errors.len() as u32 - 1
    }
}
