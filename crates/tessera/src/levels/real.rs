//! Storage of real-valued coordinates (`coord=f64`), shared by the levels that take them.
//!
//! A real level's pieces are closed intervals of [`Limit`] endpoints (the continuous tensor
//! abstraction, §2.2): a pinpoint `a` is `[a, a]`, `[a, b)` is `[a, b-ε]`, `(a, b]` is
//! `[a+ε, b]`. An endpoint is stored as its value (an `f64` array) and, where a level holds
//! intervals, its infinitesimal sign (an `i8` array, -1, 0 or +1). Values are never NaN and
//! never `-0.0` (the builders store `+0.0`, so equal reals are equal bit patterns).

use crate::ir::cx::Cx;
use crate::ir::{BufId, Expr, Stmt, build as b};
use crate::limit::{Eps, Limit};
use crate::looplets::{Fiber, Looplet, Phase, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

/// An endpoint from its stored value and sign.
pub fn limit(val: f64, eps: i8) -> Limit<f64> {
    Limit::new(val, Eps::saturate(i32::from(eps)))
}

/// The endpoint at `q` of a value array and its sign array.
pub fn endpoint(vals: &[f64], eps: &[i8], q: usize) -> Limit<f64> {
    limit(vals[q], eps[q])
}

/// `+0.0` for `-0.0`, the value otherwise.
pub fn canonical(v: f64) -> f64 {
    v + 0.0
}

/// The same set of reals with the ends a level stores: `[a-ε, ...]` holds the same reals as
/// `[a, ...]`, and `[..., b+ε]` as `[..., b]`. Stored pieces start exactly or just after a
/// value and end exactly or just before one, so the piece after an end `e` starts at
/// `after(e)` without the infinitesimal saturating (which would let a loop stand still).
pub fn normal(lo: Limit<f64>, hi: Limit<f64>) -> (Limit<f64>, Limit<f64>) {
    let lo = match lo.eps {
        Eps::Minus => Limit::exact(lo.val),
        _ => lo,
    };
    let hi = match hi.eps {
        Eps::Plus => Limit::exact(hi.val),
        _ => hi,
    };
    (lo, hi)
}

/// Why a piece `[lo, hi]` cannot be stored, if it cannot: a NaN end, `-0.0`, an end past the
/// other, a piece holding no real number (`[a+ε, a+ε]`), or ends not in [`normal`] form.
pub fn check_piece(lo: Limit<f64>, hi: Limit<f64>) -> Result<(), String> {
    if normal(lo, hi) != (lo, hi) {
        return Err(format!(
            "the piece [{lo}, {hi}] must start at a value or just after one and end at a value or just before one"
        ));
    }
    if lo.val.is_nan() || hi.val.is_nan() {
        return Err("a real coordinate is NaN".to_string());
    }
    if is_neg_zero(lo.val) || is_neg_zero(hi.val) {
        return Err("a real coordinate is -0.0 (store +0.0)".to_string());
    }
    if !holds_a_real(lo, hi) {
        return Err(format!("the piece [{lo}, {hi}] holds no real number"));
    }
    Ok(())
}

fn is_neg_zero(v: f64) -> bool {
    v == 0.0 && v.is_sign_negative()
}

/// Whether the closed Limit interval `[lo, hi]` contains a real number: `lo <= hi`, and not a
/// single point with an infinitesimal (`[a+ε, a+ε]` is empty; `[a, a+ε]` is `{a}`).
pub fn holds_a_real(lo: Limit<f64>, hi: Limit<f64>) -> bool {
    match lo.partial_cmp(&hi) {
        // Between two values lie reals; at one value `lo.eps < hi.eps` brackets it.
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Equal) => lo.eps == Eps::Zero,
        _ => false,
    }
}

/// Check the pieces of every fiber: each fiber's pieces `ptr[p]..ptr[p+1]` are valid, in
/// increasing order and disjoint. Returns the number of pieces.
pub fn check_fibers(
    ptr: &[i64],
    parent_count: usize,
    len: usize,
    piece: &dyn Fn(usize) -> (Limit<f64>, Limit<f64>),
) -> Result<usize, String> {
    super::shared::check_ptr_shape(ptr, parent_count)?;
    for p in 0..parent_count {
        let (lo, hi) = (ptr[p], ptr[p + 1]);
        if hi < lo || hi as usize > len {
            return Err(format!(
                "ptr[{}] = {hi} is out of order or past the end of the coordinates",
                p + 1
            ));
        }
        for q in lo as usize..hi as usize {
            let (a, b) = piece(q);
            check_piece(a, b).map_err(|m| format!("piece {q}: {m}"))?;
            if q > lo as usize {
                let (_, prev) = piece(q - 1);
                if a.partial_cmp(&prev) != Some(std::cmp::Ordering::Greater) {
                    return Err(format!(
                        "piece {q} starts at {a}, not after the end {prev} of piece {}",
                        q - 1
                    ));
                }
            }
        }
    }
    Ok(ptr[parent_count] as usize)
}

/// Writes to real-valued levels are not lowered yet: refuse, naming the tensor.
pub fn no_writes_yet(f: &Fiber) -> crate::error::Result<()> {
    no_writes_to(&f.tensor.name, &f.tensor.format.levels[f.level])
}

/// [`no_writes_yet`] for a level known by its tensor's name and its kind (a level's
/// `declare`, which runs before any fiber of it is unfurled).
pub fn no_writes_to(tensor: &str, kind: &super::LevelKind) -> crate::error::Result<()> {
    match kind.is_real() {
        true => Err(crate::error::Error::tensor(
            tensor,
            format!(
                "writing the real-valued coordinates of {} is not supported yet (outputs of real loops must not be indexed by the real index)",
                kind.name()
            ),
        )),
        false => Ok(()),
    }
}

/// The stored endpoint arrays of a real level's pieces, as IR buffers: values, and signs
/// (`None` for pinpoint levels, whose signs are all 0).
pub struct Ends {
    pub lo: (BufId, Option<BufId>),
    pub hi: (BufId, Option<BufId>),
}

/// The endpoint at position `q` as an IR Limit.
fn end_at((vals, eps): (BufId, Option<BufId>), q: &Expr) -> Expr {
    let sign = match eps {
        Some(e) => b::load(e, q.clone()),
        None => b::int(0),
    };
    b::make_limit(b::load(vals, q.clone()), sign)
}

/// Read looplets of a real level's fiber `f` whose pieces are `ptr[pos]..ptr[pos+1]` with the
/// given ends (Fig. 13 of the paper): a stepper over the pieces, each chunk the fill up to the
/// piece's start (`lo - ε`) and then the piece's child up to its end; after the last piece,
/// fill. A pinpoint piece (`lo == hi`, exact) is the spike of the chunk.
pub fn unfurl_pieces(
    cx: &mut Cx,
    f: &Fiber,
    ptr: BufId,
    ends: Ends,
    protocol: Option<Protocol>,
) -> Looplet {
    let t = &f.tensor;
    let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
    let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
    let last = cx.var(&format!("{}_last", t.name), ElemType::Limit);
    let hi_at = |q: &Expr| end_at(ends.hi, q);
    let preamble = vec![
        b::assign(q, b::load(ptr, f.pos.clone())),
        b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
        // Below every point of any extent when the fiber is empty.
        b::assign(last, b::limit(f64::NEG_INFINITY, -1)),
        Stmt::If {
            cond: b::lt(b::var(q), b::var(q_stop)),
            then: vec![b::assign(last, hi_at(&b::sub(b::var(q_stop), b::int(1))))],
            otherwise: vec![],
        },
    ];
    let fill = Target::Fill(t.fill);
    let child = Target::Fiber(f.child(b::var(q)));
    let stop = hi_at(&b::var(q));
    let chunk = if ends.lo == ends.hi {
        Looplet::Spike {
            at: stop.clone(),
            body: Box::new(fill.clone()),
            tail: Box::new(child),
        }
    } else {
        Looplet::Sequence(vec![
            Phase {
                stop: Some(b::before(end_at(ends.lo, &b::var(q)))),
                body: Looplet::Run(Box::new(fill.clone())),
            },
            Phase {
                stop: None,
                body: Looplet::Run(Box::new(child)),
            },
        ])
    };
    let stepper = Stepper {
        seek: seek_by_end(cx, &t.name, q, q_stop, ends.hi),
        stop,
        chunk,
        next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
        positions: None,
        within: None,
    };
    let protocol = protocol.filter(|p| *p == Protocol::Gallop);
    super::shared::chunks_then_fill(preamble, stepper, protocol, b::var(last), fill)
}

/// The `seek` of a stepper over sorted, disjoint pieces (or runs) `q..q_stop` whose ends are
/// `hi`: move `q` to the first piece that does not end before `start`, by binary search (the
/// ends ascend), so a sub-range of a long fiber (a query window over millions of points)
/// costs a logarithm, not a walk.
///
/// The search also starts from where the last seek of this looplet ended (`hint`, a variable
/// that outlives the fiber's visit): a fiber that does not depend on an outer loop (the
/// coverage `C[c, :]` read once per query `i`) is re-entered at its start for every outer
/// iteration, and when the outer loop visits nondecreasing points the answer lies at or after
/// the previous one. The hint is used only when the runtime check `q < hint <= q_stop` and
/// `hi[hint - 1] < start` holds (every piece before it ends before `start`, as the ends
/// ascend), so unsorted points and other fibers (whose positions lie outside `q..q_stop`)
/// fall back to the whole search; from the hint the search gallops (steps 1, 2, 4, ...),
/// so a nearby answer costs the logarithm of the distance, not of the fiber.
fn seek_by_end(
    cx: &mut Cx,
    name: &str,
    q: crate::ir::VarId,
    q_stop: crate::ir::VarId,
    hi: (BufId, Option<BufId>),
) -> crate::looplets::SeekFn {
    let (lo_v, hi_v, mid) = (
        cx.var(&format!("{name}_search_lo"), ElemType::I64),
        cx.var(&format!("{name}_search_hi"), ElemType::I64),
        cx.var(&format!("{name}_search_mid"), ElemType::I64),
    );
    // Every variable starts at 0 (all backends), which no check accepts (`q < 0` is false).
    let hint = cx.var(&format!("{name}_hint"), ElemType::I64);
    let step = cx.var(&format!("{name}_gallop"), ElemType::I64);
    Rc::new(move |start: &Expr| {
        if matches!(start, Expr::Const(Scalar::Limit(l)) if l.val == f64::NEG_INFINITY) {
            return vec![];
        }
        let before = |at: Expr| b::lt(end_at(hi, &at), start.clone());
        let gallop = vec![
            b::assign(lo_v, b::var(hint)),
            b::assign(mid, b::var(hint)),
            b::assign(step, b::int(1)),
            Stmt::While {
                cond: b::lt(b::var(mid), b::var(hi_v)),
                body: vec![Stmt::If {
                    cond: before(b::var(mid)),
                    then: vec![
                        b::assign(lo_v, b::add(b::var(mid), b::int(1))),
                        b::assign(mid, b::add(b::var(mid), b::var(step))),
                        b::assign(step, b::add(b::var(step), b::var(step))),
                    ],
                    otherwise: vec![b::assign(hi_v, b::var(mid)), Stmt::Break],
                }],
            },
        ];
        vec![
            b::assign(lo_v, b::var(q)),
            b::assign(hi_v, b::var(q_stop)),
            // (Nested: `hi[hint - 1]` is loaded only when the hint is inside the fiber.)
            Stmt::If {
                cond: b::and(
                    b::lt(b::var(q), b::var(hint)),
                    b::le(b::var(hint), b::var(q_stop)),
                ),
                then: b::if_(before(b::sub(b::var(hint), b::int(1))), gallop),
                otherwise: vec![],
            },
            Stmt::While {
                cond: b::lt(b::var(lo_v), b::var(hi_v)),
                body: vec![
                    b::assign(
                        mid,
                        b::add(
                            b::var(lo_v),
                            Expr::Binary(
                                crate::ir::BinOp::Shr,
                                Box::new(b::sub(b::var(hi_v), b::var(lo_v))),
                                Box::new(b::int(1)),
                            ),
                        ),
                    ),
                    Stmt::If {
                        cond: before(b::var(mid)),
                        then: vec![b::assign(lo_v, b::add(b::var(mid), b::int(1)))],
                        otherwise: vec![b::assign(hi_v, b::var(mid))],
                    },
                ],
            },
            b::assign(q, b::var(lo_v)),
            b::assign(hint, b::var(q)),
        ]
    })
}

/// Read looplets of a real run list's fiber `f` (RunList with `coord=f64`): its runs
/// `ptr[pos]..ptr[pos+1]` cover the whole line, run `q` ending at `hi[q]` and starting just
/// after the previous run's end (the first at -Inf). A stepper whose every chunk is the run's
/// child, as in the integer RunList: no fill phase, since fill runs are stored like others.
pub fn unfurl_runs(cx: &mut Cx, f: &Fiber, ptr: BufId, hi: (BufId, Option<BufId>)) -> Looplet {
    let t = &f.tensor;
    let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
    let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
    let preamble = vec![
        b::assign(q, b::load(ptr, f.pos.clone())),
        b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
    ];
    let stepper = Stepper {
        seek: seek_by_end(cx, &t.name, q, q_stop, hi),
        stop: end_at(hi, &b::var(q)),
        chunk: Looplet::Run(Box::new(Target::Fiber(f.child(b::var(q))))),
        next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
        positions: None,
        within: None,
    };
    Looplet::Thunk {
        preamble,
        body: Box::new(Target::Looplet(Looplet::Stepper(Rc::new(stepper)))),
        epilogue: vec![],
    }
}

/// A counted level's `ptr` array and its child groups.
pub type Counted = (Vec<i64>, Vec<(usize, usize, usize)>);

/// `build_pieces` of a level with a `ptr` array (SparseList, SparseRunList): each group's
/// pieces in order, one stored piece for each run of equal ones (entries that differ only in
/// later dimensions share it), handed to `store`. Returns `ptr` and the child groups.
pub fn counted_pieces(
    parent_count: usize,
    groups: &[(usize, usize, usize)],
    pieces: &[(Limit<f64>, Limit<f64>)],
    store: &mut dyn FnMut(Limit<f64>, Limit<f64>) -> Result<(), String>,
) -> Result<Counted, String> {
    let mut ptr = vec![0i64; parent_count + 1];
    let mut out = vec![];
    let mut stored = 0;
    for &(p, lo, hi) in groups {
        let mut k = lo;
        while k < hi {
            let end = (k + 1..hi).find(|&e| pieces[e] != pieces[k]).unwrap_or(hi);
            let (a, z) = pieces[k];
            store(a, z)?;
            out.push((stored, k, end));
            stored += 1;
            ptr[p + 1] += 1;
            k = end;
        }
    }
    for p in 1..=parent_count {
        ptr[p] += ptr[p - 1];
    }
    Ok((ptr, out))
}

/// `build_pieces` of a level holding at most one piece per fiber at the fiber's own position
/// (SparsePoint, SparseInterval): each non-empty group's one piece, handed to `store` with
/// the fiber's position. Returns the child groups (child position = fiber position).
pub fn single_pieces(
    level: &str,
    groups: &[(usize, usize, usize)],
    pieces: &[(Limit<f64>, Limit<f64>)],
    store: &mut dyn FnMut(usize, Limit<f64>, Limit<f64>) -> Result<(), String>,
) -> Result<Vec<(usize, usize, usize)>, String> {
    let mut out = vec![];
    for &(p, lo, hi) in groups {
        if lo == hi {
            continue;
        }
        if let Some(k) = (lo + 1..hi).find(|&k| pieces[k] != pieces[lo]) {
            return Err(format!(
                "{level} holds one piece per fiber, but fiber {p} has [{}, {}] and [{}, {}]",
                pieces[lo].0, pieces[lo].1, pieces[k].0, pieces[k].1
            ));
        }
        let (a, z) = pieces[lo];
        store(p, a, z)?;
        out.push((p, lo, hi));
    }
    Ok(out)
}

/// The value of a pinpoint piece, or why a pinpoint level cannot store the piece.
pub fn pinpoint(level: &str, a: Limit<f64>, z: Limit<f64>) -> Result<f64, String> {
    match a == z && a.eps == Eps::Zero {
        true => Ok(canonical(a.val)),
        false => Err(format!(
            "a {level} holds pinpoints, not the interval [{a}, {z}]: use SparseRunList or SparseInterval"
        )),
    }
}

/// The refusal of `build_pieces` by a level whose kind stores integer coordinates.
pub fn integer_level(name: &str) -> String {
    format!("{name} stores integer coordinates here (use coord=f64)")
}

pub fn f64s(b: &Buffer) -> &[f64] {
    b.as_f64().expect("real coordinates are f64")
}

pub fn i8s(b: &Buffer) -> &[i8] {
    match b {
        Buffer::I8(v) => v,
        _ => panic!("infinitesimal signs are i8"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_that_hold_a_real() {
        let (a, b) = (1.0, 2.0);
        assert!(holds_a_real(Limit::exact(a), Limit::exact(a)));
        assert!(holds_a_real(Limit::exact(a), Limit::minus_eps(b)));
        assert!(holds_a_real(Limit::plus_eps(a), Limit::minus_eps(b)));
        assert!(holds_a_real(Limit::exact(a), Limit::plus_eps(a)));
        assert!(holds_a_real(Limit::minus_eps(a), Limit::exact(a)));
        assert!(!holds_a_real(Limit::plus_eps(a), Limit::plus_eps(a)));
        assert!(!holds_a_real(Limit::minus_eps(a), Limit::minus_eps(a)));
        assert!(!holds_a_real(Limit::exact(b), Limit::exact(a)));
        assert!(!holds_a_real(Limit::plus_eps(a), Limit::exact(a)));
        assert!(check_piece(Limit::exact(f64::NAN), Limit::exact(1.0)).is_err());
        assert!(check_piece(Limit::exact(-0.0), Limit::exact(1.0)).is_err());
        assert!(check_piece(Limit::exact(f64::NEG_INFINITY), Limit::exact(1.0)).is_ok());
    }
}
