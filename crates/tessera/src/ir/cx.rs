//! The IR under construction: variables, buffers and runtime error messages.

use crate::ir::{BufDecl, BufId, VarDecl, VarId};
use crate::types::ElemType;

/// In an error message, the place of the value the failing check stored (see
/// `backend::KernelFault`).
pub const DETAIL: &str = "{detail}";

#[derive(Default)]
pub struct Cx {
    pub vars: Vec<VarDecl>,
    pub bufs: Vec<BufDecl>,
    pub errors: Vec<String>,
}

impl Cx {
    /// A fresh variable; `ty` must be a compute type.
    pub fn var(&mut self, name: &str, ty: ElemType) -> VarId {
        debug_assert_eq!(ty, ty.compute());
        self.vars.push(VarDecl {
            name: name.to_string(),
            ty,
        });
        VarId(self.vars.len() as u32 - 1)
    }
    pub fn buf(&mut self, name: String, elem: ElemType, growable: bool) -> BufId {
        self.bufs.push(BufDecl {
            name,
            elem,
            growable,
        });
        BufId(self.bufs.len() as u32 - 1)
    }
    /// Register a runtime error message; returns its code for `Stmt::Fail`.
    pub fn error(&mut self, msg: String) -> u32 {
        if let Some(k) = self.errors.iter().position(|m| *m == msg) {
            return k as u32;
        }
        self.errors.push(msg);
        self.errors.len() as u32 - 1
    }
}
