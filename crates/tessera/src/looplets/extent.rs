//! The extent of the loop being lowered.

use crate::ir::Expr;

/// An inclusive range of coordinates as IR values.
#[derive(Clone)]
pub struct Ext {
    pub start: Expr,
    pub stop: Expr,
}

impl Ext {
    pub fn is_point(&self) -> bool {
        self.start == self.stop
    }
}
