//! Compile-time pieces several level formats share: the fill-only declaration rule of sparse
//! levels and the `ptr` offset array that turns per-fiber counts into offsets at freeze.

use super::LevelRef;
use crate::error::{Error, Result};
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{BufId, Expr, Stmt, VarId, build as b};
use crate::looplets::{Jumper, Looplet, Phase, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::borrow::Cow;
use std::rc::Rc;

/// A level's integer array (coordinates or positions) as i64 values, whatever its stored
/// width (`coord=i32` levels store 4 bytes): borrowed when it is i64 already, widened
/// otherwise. For whole-array work (validate, build, remap); a per-fiber visit uses
/// [`int_at`] and [`int_range`] so that it does not copy the whole array.
pub fn ints(b: &Buffer) -> Cow<'_, [i64]> {
    match b {
        Buffer::I64(v) => Cow::Borrowed(v),
        Buffer::I32(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
        _ => panic!("level index arrays are i64 or i32, not {}", b.elem()),
    }
}

/// `b[i]` of a level's integer array, widened.
pub fn int_at(b: &Buffer, i: usize) -> i64 {
    match b {
        Buffer::I64(v) => v[i],
        Buffer::I32(v) => v[i] as i64,
        _ => panic!("level index arrays are i64 or i32, not {}", b.elem()),
    }
}

/// `b[lo..hi]` of a level's integer array, widened.
pub fn int_range(b: &Buffer, lo: usize, hi: usize) -> Cow<'_, [i64]> {
    match b {
        Buffer::I64(v) => Cow::Borrowed(&v[lo..hi]),
        Buffer::I32(v) => Cow::Owned(v[lo..hi].iter().map(|&x| x as i64).collect()),
        _ => panic!("level index arrays are i64 or i32, not {}", b.elem()),
    }
}

/// A level's integer array of element type `ty` (I64 or I32) from i64 values. The callers'
/// values fit: coordinates are below dimensions and counts below stored counts, which the
/// tensor checks against `i32::MAX` for 4-byte levels (`tensor::check_rank`, `check_count`).
pub fn int_buf(ty: ElemType, v: Vec<i64>) -> Buffer {
    match ty {
        ElemType::I32 => Buffer::I32(v.into_iter().map(|x| x as i32).collect()),
        _ => Buffer::I64(v.into()),
    }
}

/// `if value > i32::MAX: fail` for a 4-byte level (`coord=i32`), nothing otherwise: where its
/// code would narrow a dimension's coordinates or a stored count that does not fit (`what`
/// names it in the error), so that it fails rather than wraps.
pub fn fits_i32(cx: &mut Cx, l: &LevelRef, what: &'static str, value: Expr) -> Vec<Stmt> {
    if l.kind().coord() != super::format::Coord::I32 {
        return vec![];
    }
    let e = cx.error(KernelError::new(
        &l.tensor.name,
        KernelErrorKind::IndexOverflow {
            level: l.kind().spec().name,
            what,
        },
    ));
    b::if_(b::lt(b::int(i32::MAX as i64), value), vec![Stmt::Fail(e)])
}

/// Sparse levels do not store the coordinates they leave out, so those read as the fill: a
/// declaration to any other value cannot be represented.
pub fn declare_to_fill(l: &LevelRef, init: Scalar) -> Result<()> {
    if init.cast(l.tensor.elem) != l.tensor.fill {
        return Err(Error::tensor(
            &l.tensor.name,
            format!(
                "a sparse tensor can only be declared with its fill value {}, not {init}",
                l.tensor.fill
            ),
        ));
    }
    Ok(())
}

/// `ptr[1..=count] += ptr[0..count]`: per-fiber counts (kept in `ptr[p + 1]` while writing)
/// become offsets.
pub fn prefix_sum(cx: &mut Cx, ptr: BufId, count: Expr) -> Stmt {
    let p = cx.var("p", ElemType::I64);
    Stmt::For {
        var: p,
        start: b::int(1),
        stop: b::add(count, b::int(1)),
        body: vec![b::store(
            ptr,
            b::var(p),
            b::add(
                b::load(ptr, b::var(p)),
                b::load(ptr, b::sub(b::var(p), b::int(1))),
            ),
        )],
    }
}

/// The read looplets of a level whose fiber is a sorted list of chunks up to coordinate
/// `last`, then fill: the preamble, a stepper over the chunks (a jumper under `gallop`, whose
/// walk is the same stepper), and a fill run after `last`.
pub fn chunks_then_fill(
    preamble: Vec<Stmt>,
    stepper: Stepper,
    protocol: Option<Protocol>,
    last: Expr,
    fill: Target,
) -> Looplet {
    let chunks = match protocol {
        Some(Protocol::Gallop) => Looplet::Jumper(Rc::new(Jumper {
            seek: stepper.seek.clone(),
            stop: stepper.stop.clone(),
            spike: stepper.chunk.clone(),
            next: stepper.next.clone(),
            walk: Looplet::Stepper(Rc::new(stepper)),
        })),
        _ => Looplet::Stepper(Rc::new(stepper)),
    };
    Looplet::Thunk {
        preamble,
        body: Box::new(Target::Looplet(Looplet::Sequence(vec![
            Phase {
                stop: Some(last),
                body: chunks,
            },
            Phase {
                stop: None,
                body: Looplet::Run(Box::new(fill)),
            },
        ]))),
        epilogue: vec![],
    }
}

/// Runtime check of an offset array: one entry per parent position plus one, starting at 0.
pub fn check_ptr_shape(ptr: &[i64], parent_count: usize) -> std::result::Result<(), String> {
    if ptr.len() != parent_count + 1 {
        return Err(format!(
            "ptr has {} entries, expected {}",
            ptr.len(),
            parent_count + 1
        ));
    }
    if ptr[0] != 0 {
        return Err("ptr[0] must be 0".into());
    }
    Ok(())
}

/// `ptr[0..=count] = 0`: no fiber holds anything yet (declaration).
pub fn zero_ptr(ptr: BufId, count: Expr) -> [Stmt; 2] {
    [
        Stmt::Grow {
            buf: ptr,
            len: b::add(count.clone(), b::int(1)),
        },
        Stmt::Fill {
            buf: ptr,
            start: b::int(0),
            stop: b::add(count, b::int(1)),
            value: b::int(0),
        },
    ]
}

/// Writing fiber `pos` of a level that appends entries at `cursor` and keeps each fiber's
/// count in `ptr[pos + 1]` until freeze. `start` is where this fiber's entries begin, counting
/// any it already got earlier in the kernel (or before a thaw). Entries must come in
/// increasing fiber order: `prev` holds the last fiber that received one. The order is checked
/// when an entry is committed, not when the fiber is opened, so a later loop may pass over
/// earlier fibers without writing them (Finch moves `prev_pos` on writes too).
pub struct CountedFiber {
    /// Run when the fiber is opened.
    pub preamble: Vec<Stmt>,
    /// Run when the fiber is closed: records its count.
    pub epilogue: Vec<Stmt>,
    /// Run before each entry is committed: the fiber-order check.
    pub commit: Vec<Stmt>,
}

#[allow(clippy::too_many_arguments)]
pub fn counted_fiber(
    cx: &mut Cx,
    level: &'static str,
    tensor: &str,
    ptr: BufId,
    cursor: VarId,
    prev: VarId,
    start: VarId,
    pos: Expr,
) -> CountedFiber {
    let fiber_order = cx.error(KernelError::new(
        tensor,
        KernelErrorKind::OutOfOrder {
            level,
            order: Order::Fibers,
        },
    ));
    let preamble = vec![b::assign(
        start,
        b::sub(b::var(cursor), b::load(ptr, b::add(pos.clone(), b::int(1)))),
    )];
    let epilogue = vec![b::store(
        ptr,
        b::add(pos.clone(), b::int(1)),
        b::sub(b::var(cursor), b::var(start)),
    )];
    let commit = vec![
        Stmt::If {
            cond: b::lt(pos.clone(), b::var(prev)),
            then: vec![Stmt::Fail(fiber_order)],
            otherwise: vec![],
        },
        b::assign(prev, pos),
    ];
    CountedFiber {
        preamble,
        epilogue,
        commit,
    }
}

/// Reopen a counted level frozen earlier (Finch's thaw): the offsets in `ptr[0..=count]` go
/// back to per-fiber counts, `cursor` moves past the last stored entry and `prev` (for levels
/// that append fibers in order) to the last fiber holding one, so new entries append after the
/// stored ones (a fiber before `prev` cannot take more). Returns the code; the number of stored
/// entries is then `cursor`.
pub fn thaw_counted(
    cx: &mut Cx,
    ptr: BufId,
    cursor: VarId,
    prev: Option<VarId>,
    count: Expr,
) -> Vec<Stmt> {
    let (n, k, p) = (
        cx.var("thaw_count", ElemType::I64),
        cx.var("k", ElemType::I64),
        cx.var("p", ElemType::I64),
    );
    let mut body = vec![
        b::assign(p, b::sub(b::var(n), b::var(k))),
        b::store(
            ptr,
            b::var(p),
            b::sub(
                b::load(ptr, b::var(p)),
                b::load(ptr, b::sub(b::var(p), b::int(1))),
            ),
        ),
    ];
    let mut code = vec![
        b::assign(n, count),
        b::assign(cursor, b::load(ptr, b::var(n))),
    ];
    if let Some(prev) = prev {
        code.push(b::assign(prev, b::int(-1)));
        body.push(Stmt::If {
            cond: b::and(
                b::lt(b::var(prev), b::int(0)),
                b::lt(b::int(0), b::load(ptr, b::var(p))),
            ),
            then: vec![b::assign(prev, b::sub(b::var(p), b::int(1)))],
            otherwise: vec![],
        });
    }
    // From the last fiber down, so each offset is still whole when its successor needs it.
    code.push(Stmt::For {
        var: k,
        start: b::int(0),
        stop: b::var(n),
        body,
    });
    code
}

/// Fibers `lo..hi` of a level counting entries per fiber in `ptr[p + 1]` (until the freeze's
/// prefix sum), all empty.
pub fn empty_fibers(ptr: BufId, lo: Expr, hi: Expr) -> Vec<Stmt> {
    vec![
        Stmt::Grow {
            buf: ptr,
            len: b::add(hi.clone(), b::int(1)),
        },
        Stmt::Fill {
            buf: ptr,
            start: b::add(lo, b::int(1)),
            stop: b::add(hi, b::int(1)),
            value: b::int(0),
        },
    ]
}

/// Make fibers `lo..hi` of a counted level exist, empty. A sparse ancestor retrying positions
/// it did not keep (nothing was recorded under them) reopens fibers from `lo` on, so `prev`
/// moves back: they may be written again.
pub fn assemble_counted(ptr: BufId, prev: VarId, lo: Expr, hi: Expr) -> Vec<Stmt> {
    let mut code = empty_fibers(ptr, lo.clone(), hi);
    code.extend(reopen_from(prev, lo));
    code
}

/// Fibers from `lo` on may be written again: a level that appends fibers in order and keeps
/// the last one written in `prev` moves it back below `lo` (see [`assemble_counted`]).
pub fn reopen_from(prev: VarId, lo: Expr) -> Vec<Stmt> {
    b::if_(
        b::le(lo.clone(), b::var(prev)),
        vec![b::assign(prev, b::sub(lo, b::int(1)))],
    )
}

/// Whether entry `q` (an I64 expression) covers coordinate `i`.
pub type HoldsFn = Rc<dyn Fn(&Expr, &Expr) -> Expr>;
/// What entry `q` holds at coordinate `i`.
pub type EntryFn = Rc<dyn Fn(&Expr, &Expr) -> Target>;

/// The `follow` protocol (random access) on a level whose fiber entries `lo..hi` are sorted by
/// `ends` (coordinates, or the last coordinate of each run or block): coordinate `i` is held by
/// the first entry ending at or after it, found by binary search, if `holds(q, i)` (the entry
/// may start later); `target(q, i)` is what it holds there. Everything is a pure expression
/// in switch conditions, never a per-coordinate preamble, so where the statement turns out not
/// to need the value (another operand is fill there) no search is emitted at all. Past the
/// fiber's last entry everything is fill without a search.
#[allow(clippy::too_many_arguments)]
pub fn follow_by_search(
    cx: &mut Cx,
    name: &str,
    mut preamble: Vec<Stmt>,
    ends: BufId,
    lo: Expr,
    hi: Expr,
    holds: HoldsFn,
    target: EntryFn,
    fill: Target,
) -> Looplet {
    let last = cx.var(&format!("{name}_follow_last"), ElemType::I64);
    preamble.push(b::assign(last, b::int(-1)));
    preamble.extend(b::if_(
        b::lt(lo.clone(), hi.clone()),
        vec![b::assign(
            last,
            b::load(ends, b::sub(hi.clone(), b::int(1))),
        )],
    ));
    let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
        let q = Expr::SearchGe {
            buf: ends,
            lo: Box::new(lo.clone()),
            hi: Box::new(hi.clone()),
            key: Box::new(i.clone()),
        };
        let fill = || Looplet::Run(Box::new(fill.clone()));
        let found = match holds(&q, i) {
            Expr::Const(crate::types::Scalar::Bool(true)) => Looplet::Run(Box::new(target(&q, i))),
            h => Looplet::Switch(vec![
                (h, Looplet::Run(Box::new(target(&q, i)))),
                (b::boolean(true), fill()),
            ]),
        };
        Target::Looplet(Looplet::Switch(vec![
            (b::le(i.clone(), b::var(last)), found),
            (b::boolean(true), fill()),
        ]))
    }));
    Looplet::Thunk {
        preamble,
        body: Box::new(Target::Looplet(lookup)),
        epilogue: vec![],
    }
}
