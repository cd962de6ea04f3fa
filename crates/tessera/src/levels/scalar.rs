//! The 0-d formats of paper §1.9 beyond a plain `Element`: `SparseScalar(fill)` (a value and a
//! dirty flag), `ShortCircuitScalar(fill)` (reductions into it stop their loops once it holds
//! the reducer's annihilator) and `SparseShortCircuitScalar(fill)` (both). They are whole
//! formats, never levels under another one, so their single position is the root's.

use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::{LeafValue, Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

pub struct ScalarLevel;

/// `Scalar(fill)` is `Element(fill)` used as a whole format: it parses to an `Element` leaf. A
/// `LevelKind::Scalar` with neither flag built in Rust prints as `Scalar(fill)`.
pub const SCALAR: LevelSpec = scalar_spec("Scalar", false, false);
pub const SPARSE_SCALAR: LevelSpec = scalar_spec("SparseScalar", true, false);
pub const SHORT_CIRCUIT_SCALAR: LevelSpec = scalar_spec("ShortCircuitScalar", false, true);
pub const SPARSE_SHORT_CIRCUIT_SCALAR: LevelSpec =
    scalar_spec("SparseShortCircuitScalar", true, true);

/// The four names of `LevelKind::Scalar`, one per combination of its flags. Functions in a
/// const cannot capture the flags, so each combination has its own `is` and `make`.
const fn scalar_spec(name: &'static str, sparse: bool, short_circuit: bool) -> LevelSpec {
    type Is = fn(&LevelKind) -> bool;
    type Make = fn(&Args) -> LevelKind;
    let (is, make): (Is, Make) = match (sparse, short_circuit) {
        (false, false) => (
            |k| {
                matches!(
                    k,
                    LevelKind::Scalar {
                        sparse: false,
                        short_circuit: false,
                        ..
                    }
                )
            },
            |a| LevelKind::Element(a.fill),
        ),
        (true, false) => (
            |k| {
                matches!(
                    k,
                    LevelKind::Scalar {
                        sparse: true,
                        short_circuit: false,
                        ..
                    }
                )
            },
            |a| scalar(a.fill, true, false),
        ),
        (false, true) => (
            |k| {
                matches!(
                    k,
                    LevelKind::Scalar {
                        sparse: false,
                        short_circuit: true,
                        ..
                    }
                )
            },
            |a| scalar(a.fill, false, true),
        ),
        (true, true) => (
            |k| {
                matches!(
                    k,
                    LevelKind::Scalar {
                        sparse: true,
                        short_circuit: true,
                        ..
                    }
                )
            },
            |a| scalar(a.fill, true, true),
        ),
    };
    LevelSpec {
        name,
        role: Role::Whole,
        arity: Arity::Fixed(0),
        params: &[Param::Fill],
        protocols: &[],
        caps: Caps {
            short_circuit,
            ..Caps::LEAF
        },
        is,
        make,
        args: |k| Args {
            fill: parts(k).0,
            ..Args::default()
        },
        check_below: registry::any_below,
        imp: &ScalarLevel,
    }
}

fn scalar(fill: Scalar, sparse: bool, short_circuit: bool) -> LevelKind {
    LevelKind::Scalar {
        fill,
        sparse,
        short_circuit,
    }
}

fn parts(kind: &LevelKind) -> (Scalar, bool, bool) {
    match kind {
        LevelKind::Scalar {
            fill,
            sparse,
            short_circuit,
        } => (*fill, *sparse, *short_circuit),
        _ => unreachable!("scalar level with a non-scalar kind"),
    }
}

fn sparse(f: &Fiber) -> bool {
    parts(&f.tensor.format.levels[f.level]).1
}

impl Level for ScalarLevel {
    fn buffers(&self, kind: &LevelKind, elem: ElemType) -> Vec<(&'static str, ElemType)> {
        let mut v = vec![("val", elem)];
        if parts(kind).1 {
            v.push(("dirty", ElemType::Bool));
        }
        v
    }
    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let (fill, sparse, _) = parts(kind);
        for (k, b) in bufs.iter().enumerate() {
            if b.len() < parent_count {
                let name = if k == 0 { "val" } else { "dirty" };
                return Err(format!(
                    "{name} has {} entries, needs {parent_count}",
                    b.len()
                ));
            }
        }
        // A clean scalar reads as its fill, so its value slot must hold it: the slot is what
        // dense views (`to_dense`, files) show.
        if sparse && parent_count > 0 && !bufs[1].get(0).as_bool() && bufs[0].get(0) != fill {
            return Err(format!(
                "dirty is false but val holds {}, not the fill {fill}",
                bufs[0].get(0)
            ));
        }
        Ok(parent_count)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        for b in bufs.iter_mut() {
            b.truncate(parent_count);
        }
        parent_count
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        let (fill, sparse, _) = parts(kind);
        bufs[0] = Buffer::filled(bufs[0].elem(), parent_count, fill);
        if sparse {
            bufs[1] = Buffer::filled(ElemType::Bool, parent_count, Scalar::Bool(false));
        }
        parent_count
    }
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        _: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        self.empty(kind, bufs, dims, parent_count);
        if parts(kind).1 {
            for &(pos, lo, hi) in groups {
                if hi > lo {
                    bufs[1].set(pos, Scalar::Bool(true));
                }
            }
        }
        (parent_count, groups.to_vec())
    }
    fn leaf_value(&self, _: &LevelKind, bufs: &[Buffer], pos: usize) -> Scalar {
        bufs[0].get(pos)
    }

    fn declare(&self, _: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        let (fill, sparse, _) = parts(l.kind());
        let init = init.cast(l.tensor.elem);
        let mut code = vec![
            Stmt::Grow {
                buf: l.buf(0),
                len: count.clone(),
            },
            Stmt::Fill {
                buf: l.buf(0),
                start: b::int(0),
                stop: count.clone(),
                value: Expr::Const(init.widen()),
            },
        ];
        if sparse {
            // Declared to anything but the fill, the scalar holds a value from the start.
            code.push(Stmt::Grow {
                buf: l.buf(1),
                len: count.clone(),
            });
            code.push(Stmt::Fill {
                buf: l.buf(1),
                start: b::int(0),
                stop: count,
                value: b::boolean(init != fill),
            });
        }
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let (fill, sparse, _) = parts(l.kind());
        let mut code = vec![
            Stmt::Grow {
                buf: l.buf(0),
                len: hi.clone(),
            },
            Stmt::Fill {
                buf: l.buf(0),
                start: lo.clone(),
                stop: hi.clone(),
                value: Expr::Const(fill.widen()),
            },
        ];
        if sparse {
            code.push(Stmt::Grow {
                buf: l.buf(1),
                len: hi.clone(),
            });
            code.push(Stmt::Fill {
                buf: l.buf(1),
                start: lo,
                stop: hi,
                value: b::boolean(false),
            });
        }
        Ok(code)
    }
    fn freeze(&self, _: &mut Cx, _: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Ok((vec![], count))
    }
    fn thaw(&self, _: &mut Cx, _: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Ok((vec![], count))
    }
    fn unfurl_read(&self, _: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        unreachable!("0-d `{}` has no dimension to unfurl", f.tensor.name)
    }
    fn unfurl_update(&self, _: &mut Cx, f: &Fiber) -> Result<Looplet> {
        unreachable!("0-d `{}` has no dimension to unfurl", f.tensor.name)
    }
    /// A sparse scalar reads as `dirty ? val : fill`, as a switch the engine specialises on,
    /// so code reading a clean scalar is simplified with the fill literal.
    fn read_leaf(&self, f: &Fiber) -> Option<LeafValue> {
        let bufs = &f.tensor.level_bufs[f.level];
        let value = LeafValue::Value(b::load(bufs[0], f.pos.clone()), f.tensor.elem.compute());
        if !sparse(f) {
            return Some(value);
        }
        Some(LeafValue::Switch(
            b::load(bufs[1], f.pos.clone()),
            Box::new(value),
            Box::new(LeafValue::Const(f.tensor.fill)),
        ))
    }
    fn update_leaf(&self, _: &mut Cx, f: &Fiber, new: &dyn Fn(Expr) -> Expr) -> Option<Vec<Stmt>> {
        let bufs = &f.tensor.level_bufs[f.level];
        let mut code = vec![b::store(
            bufs[0],
            f.pos.clone(),
            new(b::load(bufs[0], f.pos.clone())),
        )];
        if sparse(f) {
            code.push(b::store(bufs[1], f.pos.clone(), b::boolean(true)));
        }
        if let Some(d) = f.dirty {
            code.push(b::assign(d, b::boolean(true)));
        }
        Some(code)
    }
    fn short_circuit_value(&self, f: &Fiber) -> Option<Expr> {
        let (_, _, short_circuit) = parts(&f.tensor.format.levels[f.level]);
        short_circuit.then(|| b::load(f.tensor.level_bufs[f.level][0], f.pos.clone()))
    }
}
