//! placeholder replaced below
use super::{Located, LoopRef};
use crate::error::Result;
use crate::notation::ast::Program;
pub fn cache(_p: &Program, c: &Located, _t: &LoopRef, _x: &str, _r: bool) -> Result<Program> {
    Err(c.error("x"))
}
