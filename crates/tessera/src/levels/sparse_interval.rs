//! `SparseInterval`: each fiber holds at most one run, `left[p]..=right[p]` (empty when
//! `left[p] > right[p]`, written as `0, -1`), fill elsewhere. The child position is the fiber's
//! own position, so no pointer array is needed.
//!
//! Reads are a sequence of three phases (fill, the run, fill) with no loop at all.
//!
//! Writes go through `AcceptRun`. A write to a fiber that already holds a run is an error
//! ("can only hold one run"), including after a one-coordinate run (Finch tests `left < right`
//! and lets that case through). One exception keeps per-coordinate copies of one-run data
//! working: with a leaf child, a write that starts right after the run and stores the run's
//! value extends it. For that the old value is saved and the child reset to fill before the
//! write (so `+=` and friends start from fill, as the coordinate really holds fill), then the
//! two are compared; an unrecorded write puts the old value back. A non-leaf child cannot be
//! saved that way, so there any second write to a fiber is refused (before it reaches the
//! child): such a fiber must be written as one run at once, e.g. copied from a run-length
//! level, not row by row. A leaf written with the
//! fill value records nothing (the coordinate holds fill either way), so copying a dense
//! vector, or a run list with explicit fill runs, stores just the one real run.

use super::format::Coord;
use super::real;
use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind};
use crate::ir::{BinOp, Expr, Stmt, build as b};
use crate::limit::Limit;
use crate::looplets::{Fiber, Kind, Looplet, Phase, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{Class, ElemType, Scalar};
use std::rc::Rc;

pub struct SparseInterval;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseInterval",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[Param::Coord, Param::HalfOpen],
    // Its walk needs no loop: fill, the run, fill.
    protocols: &[],
    // Reopened, a fiber that already holds its run still takes no second one.
    caps: Caps {
        sparse: true,
        reopen: true,
        holds_any: false,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseInterval { .. }),
    make: |a| LevelKind::SparseInterval {
        coord: a.coord,
        half_open: a.half_open,
    },
    args: |k| match k {
        LevelKind::SparseInterval { coord, half_open } => Args {
            coord: *coord,
            half_open: *half_open,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below: registry::any_below,
    imp: &SparseInterval,
};

/// Whether every stored run is `[left, right)` (`halfopen=true`).
fn half_open(kind: &LevelKind) -> bool {
    matches!(
        kind,
        LevelKind::SparseInterval {
            half_open: true,
            ..
        }
    )
}

/// The signs of a half-open run's ends: a closed start, an open end.
const HALF_OPEN_SIGNS: (i8, i8) = (0, -1);

const LEFT: usize = 0;
const RIGHT: usize = 1;
const LEFT_EPS: usize = 2;
const RIGHT_EPS: usize = 3;

impl Level for SparseInterval {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        if kind.is_real() {
            // An empty fiber holds left = +Inf, right = -Inf (see `levels::real`).
            return vec![
                ("left", ElemType::F64),
                ("right", ElemType::F64),
                ("left_eps", ElemType::I8),
                ("right_eps", ElemType::I8),
            ];
        }
        vec![
            ("left", kind.coord().elem()),
            ("right", kind.coord().elem()),
        ]
    }

    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        if kind.is_real() {
            let (left, right) = (real::f64s(&bufs[LEFT]), real::f64s(&bufs[RIGHT]));
            let (le, re) = (real::i8s(&bufs[LEFT_EPS]), real::i8s(&bufs[RIGHT_EPS]));
            if [left.len(), right.len(), le.len(), re.len()] != [parent_count; 4] {
                return Err(format!(
                    "left, right and their signs need {parent_count} entries"
                ));
            }
            for p in 0..parent_count {
                let (a, z) = (real::endpoint(left, le, p), real::endpoint(right, re, p));
                if (a, z) != empty_real() {
                    real::check_piece(a, z).map_err(|m| format!("fiber {p}: {m}"))?;
                    if half_open(kind) && (le[p], re[p]) != HALF_OPEN_SIGNS {
                        return Err(format!(
                            "fiber {p}: the run {a:?}..={z:?} is not [start, end) (halfopen=true)"
                        ));
                    }
                }
            }
            return Ok(parent_count);
        }
        let (left, right) = (ints(&bufs[LEFT]), ints(&bufs[RIGHT]));
        if left.len() != parent_count || right.len() != parent_count {
            return Err(format!(
                "left and right have {} and {} entries, expected {parent_count}",
                left.len(),
                right.len()
            ));
        }
        for p in 0..parent_count {
            if left[p] <= right[p] && (left[p] < 0 || right[p] >= dims[0] as i64) {
                return Err(format!(
                    "the run {}..={} of fiber {p} is outside 0..{}",
                    left[p], right[p], dims[0]
                ));
            }
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
        if kind.is_real() {
            let (a, z) = empty_real();
            bufs[LEFT] = Buffer::F64(vec![a.val; parent_count].into());
            bufs[RIGHT] = Buffer::F64(vec![z.val; parent_count].into());
            bufs[LEFT_EPS] = Buffer::I8(vec![0; parent_count].into());
            bufs[RIGHT_EPS] = Buffer::I8(vec![0; parent_count].into());
            return parent_count;
        }
        bufs[LEFT] = int_buf(kind.coord().elem(), vec![0; parent_count]);
        bufs[RIGHT] = int_buf(kind.coord().elem(), vec![-1; parent_count]);
        parent_count
    }
    fn for_each_piece(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        pos: usize,
        f: &mut dyn FnMut(Limit<f64>, Limit<f64>, usize),
    ) {
        if !kind.is_real() {
            return;
        }
        let (left, right) = (real::f64s(&bufs[LEFT]), real::f64s(&bufs[RIGHT]));
        let (le, re) = (real::i8s(&bufs[LEFT_EPS]), real::i8s(&bufs[RIGHT_EPS]));
        let (a, z) = (
            real::endpoint(left, le, pos),
            real::endpoint(right, re, pos),
        );
        if (a, z) != empty_real() {
            f(a, z, pos);
        }
    }
    fn build_pieces(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        pieces: &[(Limit<f64>, Limit<f64>)],
    ) -> std::result::Result<super::Built, String> {
        if !kind.is_real() {
            return Err(real::integer_level("SparseInterval"));
        }
        self.empty(kind, bufs, &[], parent_count);
        let half = half_open(kind);
        let out = real::single_pieces("SparseInterval", groups, pieces, &mut |p, a, z| {
            if half && (a.eps.sign(), z.eps.sign()) != HALF_OPEN_SIGNS {
                return Err(format!(
                    "the piece {a:?}..={z:?} is not [start, end), as halfopen=true requires"
                ));
            }
            bufs[LEFT].set(p, Scalar::F64(real::canonical(a.val)));
            bufs[RIGHT].set(p, Scalar::F64(real::canonical(z.val)));
            bufs[LEFT_EPS].set(p, Scalar::I8(a.eps.sign()));
            bufs[RIGHT_EPS].set(p, Scalar::I8(z.eps.sign()));
            Ok(())
        })?;
        Ok((parent_count, out))
    }

    fn for_each_child(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        self.for_each_run(kind, bufs, dims, pos, &mut |lo, hi, q| {
            for c in lo..=hi {
                f(&[c], q);
            }
        });
    }
    fn for_each_run(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize, usize, usize),
    ) {
        if kind.is_real() {
            return;
        }
        let (left, right) = (int_at(&bufs[LEFT], pos), int_at(&bufs[RIGHT], pos));
        if left <= right {
            f(left as usize, right as usize, pos);
        }
    }
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        if kind.is_real() {
            return super::remap_pieces(self, kind, bufs, map);
        }
        let (left, right) = (ints(&bufs[LEFT]), ints(&bufs[RIGHT]));
        let pick = |v: &[i64], empty: i64| -> Vec<i64> {
            map.iter().map(|m| m.map_or(empty, |p| v[p])).collect()
        };
        let (new_left, new_right) = (pick(&left, 0), pick(&right, -1));
        bufs[LEFT] = int_buf(kind.coord().elem(), new_left);
        bufs[RIGHT] = int_buf(kind.coord().elem(), new_right);
        map.to_vec()
    }
    /// Only for fibers with at most one coordinate: `Tensor::from_coo` builds SparseInterval
    /// levels as merged SparseRunList levels and converts them (`tensor::runs`), which is where
    /// several coordinates forming one run, or several runs (an error), are handled.
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        let mut left = vec![0i64; parent_count];
        let mut right = vec![-1i64; parent_count];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                debug_assert!(left[p] > right[p], "SparseInterval::build: several runs");
                left[p] = c;
                right[p] = c;
                out.push((p, a, z));
            });
        }
        bufs[LEFT] = int_buf(kind.coord().elem(), left);
        bufs[RIGHT] = int_buf(kind.coord().elem(), right);
        (parent_count, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let mut code = super::shared::fits_i32(cx, l, "a dimension", l.dim(0));
        code.extend(empty_runs(l, b::int(0), count.clone()));
        code.extend(l.child_impl().declare(cx, &l.child(), count, init)?);
        Ok(code)
    }
    fn assemble(&self, cx: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let mut code = empty_runs(l, lo.clone(), hi.clone());
        code.extend(l.child_impl().assemble(cx, &l.child(), lo, hi)?);
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        l.child_impl().freeze(cx, &l.child(), count)
    }
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        l.child_impl().thaw(cx, &l.child(), count)
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let bufs = &t.level_bufs[f.level];
        let (left, right) = (bufs[LEFT], bufs[RIGHT]);
        let kind = Kind::from_real(t.format.levels[f.level].is_real());
        let lo = cx.var(&format!("{}_left", t.name), kind.ty());
        let hi = cx.var(&format!("{}_right", t.name), kind.ty());
        let (lo_at, hi_at) = match kind {
            // The signs are constants of the format: the endpoints are pairs of a load and a
            // constant sign, which `ir::exact_points` turns into plain float comparisons.
            Kind::Real if half_open(&t.format.levels[f.level]) => (
                b::make_limit(
                    b::load(left, f.pos.clone()),
                    b::int(HALF_OPEN_SIGNS.0.into()),
                ),
                b::make_limit(
                    b::load(right, f.pos.clone()),
                    b::int(HALF_OPEN_SIGNS.1.into()),
                ),
            ),
            Kind::Real => (
                b::make_limit(
                    b::load(left, f.pos.clone()),
                    b::load(bufs[LEFT_EPS], f.pos.clone()),
                ),
                b::make_limit(
                    b::load(right, f.pos.clone()),
                    b::load(bufs[RIGHT_EPS], f.pos.clone()),
                ),
            ),
            Kind::Integer => (b::load(left, f.pos.clone()), b::load(right, f.pos.clone())),
        };
        let fill = Target::Fill(t.fill);
        Ok(Looplet::Thunk {
            preamble: vec![b::assign(lo, lo_at), b::assign(hi, hi_at)],
            body: Box::new(Target::Looplet(Looplet::Sequence(vec![
                Phase {
                    stop: Some(kind.before(&b::var(lo))),
                    body: Looplet::Run(Box::new(fill.clone())),
                },
                Phase {
                    stop: Some(b::var(hi)),
                    body: Looplet::Run(Box::new(Target::Fiber(f.child(f.pos.clone())))),
                },
                Phase {
                    stop: None,
                    body: Looplet::Run(Box::new(fill)),
                },
            ]))),
            epilogue: vec![],
        })
    }

    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet> {
        real::no_writes_yet(f)?;
        let t = f.tensor.clone();
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (left, right) = (l.buf(LEFT), l.buf(RIGHT));
        let pos = f.pos.clone();
        let has = cx.var(&format!("{}_has_run", t.name), ElemType::Bool);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let one_run = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::SecondRun {
                level: "SparseInterval",
            },
        ));
        let child_kind = t.format.levels[f.level + 1].clone();
        // With a leaf child: where its value is, so that a write continuing the run with the
        // same value can extend it.
        let leaf = match child_kind {
            LevelKind::Element(_) => {
                let val = t.level_bufs[f.level + 1][0];
                let old = cx.var(&format!("{}_run_value", t.name), t.elem.compute());
                Some(Some((val, old)))
            }
            LevelKind::Pattern => Some(None),
            _ => None,
        };
        let mut pre = vec![b::assign(
            has,
            b::le(b::load(left, pos.clone()), b::load(right, pos.clone())),
        )];
        let mut restore = vec![];
        if let Some(Some((val, old))) = leaf {
            pre.push(b::assign(old, b::load(val, pos.clone())));
            pre.extend(l.child_impl().assemble(
                cx,
                &l.child(),
                pos.clone(),
                b::add(pos.clone(), b::int(1)),
            )?);
            restore = b::if_(b::var(has), vec![b::store(val, pos.clone(), b::var(old))]);
        }
        if leaf.is_none() {
            // A non-leaf child cannot be saved and reset: a second write to the fiber is
            // refused before it reaches the child.
            pre.extend(b::if_(b::var(has), vec![Stmt::Fail(one_run)]));
        }
        pre.push(b::assign(dirty, b::boolean(false)));
        let mut child = f.child(pos.clone());
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let (elem, fill) = (t.elem, t.fill);
        let accept = Looplet::AcceptRun(Rc::new(move |a: &Expr, z: &Expr| {
            let set = vec![
                b::store(left, pos.clone(), a.clone()),
                b::store(right, pos.clone(), z.clone()),
            ];
            let extend = match leaf {
                Some(leaf) => {
                    let mut same = b::eq(a.clone(), b::add(b::load(right, pos.clone()), b::int(1)));
                    if let Some((val, old)) = leaf {
                        same = b::and(
                            same,
                            same_value(b::load(val, pos.clone()), b::var(old), elem.class()),
                        );
                    }
                    b::if_else(
                        same,
                        vec![b::store(right, pos.clone(), z.clone())],
                        vec![Stmt::Fail(one_run)],
                    )
                }
                None => vec![Stmt::Fail(one_run)],
            };
            let mut commit = b::if_else(b::var(has), extend, set);
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            let epilogue = match leaf {
                // A leaf written with the fill value stores nothing (it holds fill already):
                // dense sources and explicit fill runs then write only the real run.
                Some(Some((val, _))) => {
                    let is_fill = same_value(
                        b::load(val, pos.clone()),
                        Expr::Const(fill.widen()),
                        elem.class(),
                    );
                    let mut keep = b::if_(
                        b::and(b::var(dirty), b::le(a.clone(), b::load(right, pos.clone()))),
                        vec![Stmt::Fail(one_run)],
                    );
                    keep.extend(restore.clone());
                    b::if_else(
                        b::and(b::var(dirty), b::not(is_fill)),
                        commit,
                        b::if_(b::var(has), keep),
                    )
                }
                _ => b::if_else(b::var(dirty), commit, restore.clone()),
            };
            Target::Looplet(Looplet::Thunk {
                preamble: pre.clone(),
                body: Box::new(Target::Fiber(child.clone())),
                epilogue,
            })
        }));
        Ok(accept)
    }
}

/// `left[lo..hi] = 0`, `right[lo..hi] = -1` (no run), growing the arrays as needed.
/// The ends a real fiber without a piece holds: `[+Inf, -Inf]`, an end below the start.
fn empty_real() -> (Limit<f64>, Limit<f64>) {
    (Limit::exact(f64::INFINITY), Limit::exact(f64::NEG_INFINITY))
}

fn empty_runs(l: &LevelRef, lo: Expr, hi: Expr) -> Vec<Stmt> {
    let mut code = vec![];
    for (k, v) in [(LEFT, 0), (RIGHT, -1)] {
        code.push(Stmt::Grow {
            buf: l.buf(k),
            len: hi.clone(),
        });
        code.push(Stmt::Fill {
            buf: l.buf(k),
            start: lo.clone(),
            stop: hi.clone(),
            value: b::int(v),
        });
    }
    code
}

/// Finch's `isequal` on two values of one compute class: NaN equals NaN, 0.0 differs from
/// -0.0.
pub fn same_value(x: Expr, y: Expr, class: Class) -> Expr {
    if class != Class::Float {
        return b::eq(x, y);
    }
    let zero = Expr::Const(Scalar::F64(0.0));
    let one = Expr::Const(Scalar::F64(1.0));
    let equal = b::and(
        b::eq(x.clone(), y.clone()),
        b::or(
            b::bin(BinOp::Ne, x.clone(), zero),
            b::eq(
                b::bin(BinOp::Div, one.clone(), x.clone()),
                b::bin(BinOp::Div, one, y.clone()),
            ),
        ),
    );
    let both_nan = b::and(
        b::bin(BinOp::Ne, x.clone(), x),
        b::bin(BinOp::Ne, y.clone(), y),
    );
    b::or(equal, both_nan)
}

/// SparseInterval storage from (merged) SparseRunList storage of the same fibers, and the map
/// of child positions (`Tensor::from_coo` builds SparseInterval levels this way). Fails on a
/// fiber with more than one run.
pub fn from_runs(
    coord: Coord,
    runs: &[Buffer],
    dims: &[usize],
    parent_count: usize,
) -> std::result::Result<(Vec<Buffer>, Vec<Option<usize>>), String> {
    let kind = LevelKind::SparseRunList {
        merge: true,
        coord: Coord::I64,
    };
    let imp = super::level_impl(&kind);
    let mut left = vec![0i64; parent_count];
    let mut right = vec![-1i64; parent_count];
    let mut map = vec![None; parent_count];
    for p in 0..parent_count {
        let mut found = vec![];
        imp.for_each_run(&kind, runs, dims, p, &mut |lo, hi, q| {
            found.push((lo, hi, q))
        });
        match found.as_slice() {
            [] => {}
            [(lo, hi, q)] => {
                left[p] = *lo as i64;
                right[p] = *hi as i64;
                map[p] = Some(*q);
            }
            [(a, b_, _), (c, d, _), ..] => {
                return Err(format!(
                    "a SparseInterval fiber can only hold one run, but fiber {p} has {} ({a}..={b_}, {c}..={d}{})",
                    found.len(),
                    if found.len() > 2 { ", ..." } else { "" }
                ));
            }
        }
    }
    Ok((
        vec![int_buf(coord.elem(), left), int_buf(coord.elem(), right)],
        map,
    ))
}
