//! Lookup: random access, the target at each coordinate (a dense level, a hash lookup). The
//! rule loops over the extent and asks each lookup for the coordinate's target; on a point
//! extent it asks once, without a loop.

use super::lowerer::Lowerer;
use super::node::LStmt;
use super::rewrite::replace_head;
use super::{Ext, IndexKind, Integer, Kind, Looplet, Target};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};
use crate::types::ElemType;
use std::rc::Rc;

/// The target at a coordinate.
pub type LookupFn = Rc<dyn Fn(&Expr) -> Target>;

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    if ext.is_point() {
        let at = ext.start.clone();
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Lookup(f) => Some(f(&at)),
            _ => None,
        });
        return lw.lower_loop(index, ext, body);
    }
    if Kind::of_ext(lw.cx(), &ext) == Kind::Real {
        // A real extent of positive length has uncountably many points.
        return Err(crate::error::Error::unsupported(
            crate::span::Span::default(),
            format!(
                "the real index `{index}` would be visited point by point here (an access or mask that is not piecewise constant in it); real loops run over the pieces of real-valued levels"
            ),
        ));
    }
    let v = lw.cx().var(index, ElemType::I64);
    let at = b::var(v);
    let unspecialised = body.clone();
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::Lookup(f) => Some(f(&at)),
        _ => None,
    });
    let mut inner = lw.lower_loop(
        index,
        Ext {
            start: at.clone(),
            stop: at.clone(),
        },
        body,
    )?;
    if inner.is_empty() {
        return Ok(vec![]);
    }
    inner.extend(lw.short_circuit_exit(index, Integer::after(&at), &ext.stop, &unspecialised)?);
    Ok(vec![Stmt::For {
        var: v,
        stop: ext.end_after(),
        start: ext.start,
        body: inner,
    }])
}
