//! Atomic updates of a parallel range's reduction outputs ([`Stmt::Atomic`]): which private
//! outputs' updates can be made indivisible ([`atomize_kernel`], the last pass before a
//! backend, after `promote` and `hoist` have kept what they could in variables), and back
//! ([`deatomize`], for the code that shares no buffer between threads).

use super::{BinOp, BufId, Expr, Fold, Private, Stmt};
use crate::types::Scalar;

/// Turn every [`Stmt::Atomic`] of `body` on a buffer not in `keep` back into the plain store
/// `buf[index] = op(buf[index], value)`, and clear the `atomic` mark of the privates it
/// concerns: the code that runs where no other thread shares the buffer (a range run as one
/// chunk, chunks with private copies, a range nested in a chunk) needs no indivisible update,
/// which costs a locked instruction, or a compare-and-swap loop for floats, per update.
pub fn deatomize(body: &mut [Stmt], keep: &[BufId]) {
    for s in body.iter_mut() {
        if let Stmt::Atomic {
            buf,
            index,
            op,
            value,
        } = s
            && !keep.contains(buf)
        {
            let (buf, index, op) = (*buf, index.clone(), *op);
            let value = std::mem::replace(value, Expr::Const(Scalar::I64(0)));
            *s = Stmt::Store {
                buf,
                index: index.clone(),
                value: Expr::Binary(
                    op,
                    Box::new(Expr::Load {
                        buf,
                        index: Box::new(index),
                    }),
                    Box::new(value),
                ),
            };
        }
        if let Stmt::Chunked(c) = s {
            for p in &mut c.private {
                p.atomic &= keep.contains(&p.buf);
            }
        }
        for b in s.bodies_mut() {
            deatomize(b, keep);
        }
    }
}

/// Whether `body` (at any depth) holds a [`Stmt::Atomic`].
pub fn has_atomics(body: &[Stmt]) -> bool {
    body.iter()
        .any(|s| matches!(s, Stmt::Atomic { .. }) || s.bodies().iter().any(|b| has_atomics(b)))
}

/// [`atomize`] every parallel range of `body`, nested ones too.
pub fn atomize_kernel(body: &mut [Stmt]) {
    for s in body.iter_mut() {
        if let Stmt::Chunked(c) = s {
            let c = &mut **c;
            atomize(&mut c.body, &mut c.private);
        }
        for b in s.bodies_mut() {
            atomize_kernel(b);
        }
    }
}

/// Mark the privates of a range whose every use in `body` is a reduction
/// `buf[index] = op(buf[index], value)` with the fold's operator (either operand order, the
/// operators being commutative), and make those stores [`Stmt::Atomic`]. A private used any
/// other way (read elsewhere, filled, grown, a `choose` fold, a buffer of points) keeps its
/// copies only: an indivisible update of one element would not make such code race-free.
pub fn atomize(body: &mut [Stmt], private: &mut [Private]) {
    for p in private.iter_mut() {
        let Fold::Op(op) = p.fold else { continue };
        if !OPS.contains(&op) {
            continue;
        }
        let mut updates = 0;
        if !only_updates(body, p.buf, op, &mut updates) || updates == 0 {
            continue;
        }
        convert(body, p.buf, op);
        p.atomic = true;
    }
}

/// The value `v` of a store `buf[index] = op(buf[index], v)` (or `op(v, buf[index])`) whose
/// index and `v` do not read `buf`.
fn update_value(buf: BufId, op: BinOp, index: &Expr, value: &Expr) -> Option<Expr> {
    // A store of the operator's annihilator is the update by it: the lowering writes
    // `y[j] = false` for `y[j] &= A[i, j]` over `A`'s fill.
    if let Expr::Const(c) = value
        && annihilates(op, *c)
    {
        return (!reads(index, buf)).then(|| value.clone());
    }
    let Expr::Binary(o, a, b) = value else {
        return None;
    };
    if *o != op {
        return None;
    }
    let is_self =
        |e: &Expr| matches!(e, Expr::Load { buf: b2, index: i2 } if *b2 == buf && **i2 == *index);
    let v = if is_self(a) {
        b
    } else if is_self(b) {
        a
    } else {
        return None;
    };
    (!reads(v, buf) && !reads(index, buf)).then(|| (**v).clone())
}

/// Whether `op(x, c) == c` for every `x` of the compute type (integers and booleans only:
/// which NaN a float operator returns is not the constant's).
fn annihilates(op: BinOp, c: Scalar) -> bool {
    matches!(
        (op, c),
        (BinOp::And, Scalar::Bool(false) | Scalar::I64(0))
            | (BinOp::Or, Scalar::Bool(true) | Scalar::I64(-1))
            | (BinOp::Mul, Scalar::I64(0))
            | (BinOp::Min, Scalar::I64(i64::MIN))
            | (BinOp::Max, Scalar::I64(i64::MAX))
    )
}

fn reads(e: &Expr, buf: BufId) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        found |= match x {
            Expr::Load { buf: b, .. } | Expr::Len(b) => *b == buf,
            Expr::SearchGe { buf: b, .. } | Expr::HashFind { table: b, .. } => *b == buf,
            _ => false,
        }
    });
    found
}

/// Whether every use of `buf` in `body` is an update with `op` (counted in `updates`).
fn only_updates(body: &[Stmt], buf: BufId, op: BinOp, updates: &mut usize) -> bool {
    body.iter().all(|s| {
        let own = match s {
            Stmt::Store {
                buf: b,
                index,
                value,
            } if *b == buf => {
                *updates += 1;
                update_value(buf, op, index, value).is_some()
            }
            Stmt::Atomic { buf: b, .. }
            | Stmt::Grow { buf: b, .. }
            | Stmt::Fill { buf: b, .. }
            | Stmt::Sort { buf: b, .. } => *b != buf,
            Stmt::SortPerm { keys, perm, .. } => *keys != buf && *perm != buf,
            // A nested range copying or keeping the buffer moves it between chunks.
            Stmt::Chunked(c) => {
                !c.private.iter().any(|p| p.buf == buf)
                    && !c.scratch.contains(&buf)
                    && !c.rows.iter().any(|r| r.arrays.contains(&buf))
                    && c.weights != Some(buf)
                    && c.nested.is_none_or(|n| n.crd != buf && n.ptr != buf)
            }
            _ => true,
        };
        own && (matches!(s, Stmt::Store { buf: b, .. } if *b == buf)
            || s.own_exprs().iter().all(|e| !reads(e, buf)))
            && s.bodies().iter().all(|b| only_updates(b, buf, op, updates))
    })
}

/// Make every store to `buf` in `body` (each an update with `op`, by [`only_updates`])
/// atomic.
fn convert(body: &mut [Stmt], buf: BufId, op: BinOp) {
    for s in body.iter_mut() {
        if let Stmt::Store {
            buf: b,
            index,
            value,
        } = s
            && *b == buf
        {
            let Some(v) = update_value(buf, op, index, value) else {
                continue;
            };
            *s = Stmt::Atomic {
                buf,
                index: index.clone(),
                op,
                value: v,
            };
        }
        for b in s.bodies_mut() {
            convert(b, buf, op);
        }
    }
}

/// The operators [`Stmt::Atomic`] takes: the built-in folds of commutative reducers.
pub const OPS: [BinOp; 6] = [
    BinOp::Add,
    BinOp::Mul,
    BinOp::Min,
    BinOp::Max,
    BinOp::And,
    BinOp::Or,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Chunked, VarId, build as b};

    const Y: BufId = BufId(1);
    const X: BufId = BufId(2);
    const J: VarId = VarId(0);

    fn private(op: BinOp) -> Private {
        Private {
            buf: Y,
            fold: Fold::Op(op),
            identity: Scalar::F64(0.0),
            atomic: false,
        }
    }

    fn update(op: BinOp, swapped: bool) -> Stmt {
        let (own, v) = (b::load(Y, b::var(J)), b::load(X, b::var(J)));
        let value = match swapped {
            false => Expr::Binary(op, Box::new(own), Box::new(v)),
            true => Expr::Binary(op, Box::new(v), Box::new(own)),
        };
        b::store(Y, b::var(J), value)
    }

    #[test]
    fn reductions_become_atomic_and_back() {
        for op in OPS {
            for swapped in [false, true] {
                let plain = vec![update(op, swapped)];
                let mut body = plain.clone();
                let mut p = [private(op)];
                atomize(&mut body, &mut p);
                assert!(p[0].atomic, "{op:?}");
                assert_eq!(
                    body,
                    vec![Stmt::Atomic {
                        buf: Y,
                        index: b::var(J),
                        op,
                        value: b::load(X, b::var(J)),
                    }]
                );
                // Kept for the buffer named, plain for any other.
                let mut kept = body.clone();
                deatomize(&mut kept, &[Y]);
                assert_eq!(kept, body);
                deatomize(&mut body, &[]);
                assert!(!has_atomics(&body));
                assert!(matches!(&body[0], Stmt::Store { buf: Y, .. }));
            }
        }
    }

    #[test]
    fn stores_of_an_annihilator_are_updates_by_it() {
        for (op, c, ok) in [
            (BinOp::And, Scalar::Bool(false), true),
            (BinOp::Or, Scalar::I64(-1), true),
            (BinOp::Min, Scalar::I64(i64::MIN), true),
            (BinOp::And, Scalar::Bool(true), false),
            (BinOp::Add, Scalar::I64(0), false),
            (BinOp::Min, Scalar::F64(f64::NAN), false),
        ] {
            let mut body = vec![b::store(Y, b::var(J), Expr::Const(c))];
            let mut p = [private(op)];
            atomize(&mut body, &mut p);
            assert_eq!(p[0].atomic, ok, "{op:?} {c:?}");
            assert_eq!(has_atomics(&body), ok);
        }
    }

    #[test]
    fn other_uses_keep_the_copies() {
        let read_elsewhere = vec![
            update(BinOp::Add, false),
            b::store(X, b::var(J), b::load(Y, b::int(0))),
        ];
        let other_index = vec![b::store(
            Y,
            b::var(J),
            b::add(b::load(Y, b::int(3)), b::load(X, b::var(J))),
        )];
        let other_op = vec![update(BinOp::Max, false)];
        let overwrite = vec![b::store(Y, b::var(J), b::load(X, b::var(J)))];
        let filled = vec![
            update(BinOp::Add, false),
            Stmt::Fill {
                buf: Y,
                start: b::int(0),
                stop: b::int(1),
                value: Expr::Const(Scalar::F64(0.0)),
            },
        ];
        let nested = vec![Stmt::Chunked(Box::new(Chunked {
            private: vec![private(BinOp::Add)],
            ..Chunked::plain(J, J, b::int(0), b::int(1), vec![update(BinOp::Add, false)])
        }))];
        for body in [
            read_elsewhere,
            other_index,
            other_op,
            overwrite,
            filled,
            nested,
            vec![],
        ] {
            let mut b2 = body.clone();
            let mut p = [private(BinOp::Add)];
            atomize(&mut b2, &mut p);
            assert!(!p[0].atomic, "{body:?}");
            assert_eq!(b2, body);
        }
        // `choose` folds in chunk order: never shared.
        let mut body = vec![update(BinOp::Add, false)];
        let mut p = [Private {
            fold: Fold::Choose,
            ..private(BinOp::Add)
        }];
        atomize(&mut body, &mut p);
        assert!(!p[0].atomic);
    }
}
