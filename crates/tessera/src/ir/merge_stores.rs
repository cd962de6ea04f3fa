//! Adjacent updates of one element as one store: in the body of an innermost loop,
//!
//! ```text
//! buf[e] = buf[e] + a;            buf[e] = (buf[e] + a) + b;
//! buf[e] = buf[e] + b;      ->
//! ```
//!
//! what `unroll_jam` leaves of a row every copy updates (`dw0[f, o] += dy[i.0 * 4 + t, o] *
//! x[...]` for each `t`, next to each other in the loop over `o`). The backends must store
//! and reload the element between the two statements (as far as they know, the first store
//! may change what the second reads elsewhere), a store-to-load chain per copy; merged, the
//! row is loaded and stored once per iteration, and the element still adds `a`, then `b`.
//!
//! Exact, values and faults: the second statement's value is rewritten with the first's in
//! place of its load of `buf[e]`, which is the first load it evaluates (everything before it
//! in evaluation order reads no buffer, so cannot fail), so the loads run in the same order
//! and the first value is computed at the same point; the only thing removed is the store in
//! between, whose index is the one the load of `buf[e]` just checked (`e` reads no buffer
//! and nothing assigns a variable between). The second value must read `buf` nowhere else: a
//! load of another element of `buf` (perhaps `e` at run time) would have seen the first
//! store. Distinct buffers are distinct memory in the IR (what `promote` relies on too).

use super::{Expr, Kernel, Stmt};

pub fn merge_stores(k: &mut Kernel) {
    super::innermost::rewrite_innermost_loops(k, &mut merge_loop);
}

fn merge_loop(k: &mut Kernel, l: &Stmt) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var,
        start,
        stop,
        body,
    } = l
    else {
        return None;
    };
    let mut out: Vec<Stmt> = Vec::with_capacity(body.len());
    let mut changed = false;
    for s in body {
        if let (
            Some(Stmt::Store {
                buf: b1,
                index: e1,
                value: v1,
            }),
            Stmt::Store {
                buf: b2,
                index: e2,
                value: v2,
            },
        ) = (out.last(), s)
            && b1 == b2
            && e1 == e2
            // A store narrows its value to the element type (`i32`, `u8`, `f32`): the
            // merged sum would skip the first rounding or wrap.
            && k.buf_elem(*b2) == k.buf_elem(*b2).compute()
            && let Some(v) = substituted(v2, *b2, e2, v1)
        {
            let merged = Stmt::Store {
                buf: *b2,
                index: e2.clone(),
                value: v,
            };
            *out.last_mut().expect("a store") = merged;
            changed = true;
            continue;
        }
        out.push(s.clone());
    }
    changed.then(|| {
        vec![Stmt::For {
            var: *var,
            start: start.clone(),
            stop: stop.clone(),
            body: out,
        }]
    })
}

/// `value` with its one load of `buf[index]`, which must be the first load it evaluates,
/// replaced by `with`; `None` when `value` does not have that shape or `index` reads a buffer.
fn substituted(value: &Expr, buf: super::BufId, index: &Expr, with: &Expr) -> Option<Expr> {
    if reads_memory(index) {
        return None;
    }
    let target = Expr::Load {
        buf,
        index: Box::new(index.clone()),
    };
    // In evaluation order (operands left to right, a load after its index), the first
    // expression that reads memory must be the load of the element.
    if first_read(value)? != &target {
        return None;
    }
    let mut count = 0;
    value.visit(&mut |x| {
        if matches!(x, Expr::Load { buf: b, .. } if *b == buf)
            || matches!(x, Expr::Len(b) if *b == buf)
        {
            count += 1;
        }
    });
    if count != 1 {
        return None;
    }
    let mut out = value.clone();
    super::hoist::replace_expr(&mut out, &target, with);
    Some(out)
}

/// The first expression in evaluation order that reads a buffer (a load, a search, a hash
/// lookup, a length), if any.
fn first_read(e: &Expr) -> Option<&Expr> {
    for c in e.children() {
        if let Some(r) = first_read(c) {
            return Some(r);
        }
    }
    matches!(
        e,
        Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. } | Expr::Len(_)
    )
    .then_some(e)
}

fn reads_memory(e: &Expr) -> bool {
    let mut hit = false;
    e.visit(&mut |x| {
        hit |= matches!(
            x,
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. } | Expr::Len(_)
        );
    });
    hit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::ir::{BufId, VarId};
    use crate::types::ElemType;

    fn kernel(body: Vec<Stmt>) -> Kernel {
        let f = ElemType::F64;
        b::test_kernel(
            &[("y", f), ("x", f), ("s", f)],
            false,
            &[("j", ElemType::I64)],
            body,
        )
    }

    fn load(buf: u32, index: Expr) -> Expr {
        Expr::Load {
            buf: BufId(buf),
            index: Box::new(index),
        }
    }

    #[test]
    fn adjacent_updates_of_one_element_store_once() {
        let j = || b::var(VarId(0));
        let upd = |k: i64| {
            b::store(
                BufId(0),
                j(),
                b::add(
                    load(0, j()),
                    b::mul(load(1, b::add(j(), b::int(k))), load(2, j())),
                ),
            )
        };
        let lp = |body| Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: b::int(4),
            body,
        };
        let mut k = kernel(vec![lp(vec![upd(0), upd(1), upd(2)])]);
        merge_stores(&mut k);
        let shown = k.to_string();
        assert!(
            shown.contains(
                "y[j] = ((y[j] + (x[j] * s[j])) + (x[j + 1] * s[j])) + (x[j + 2] * s[j]);"
            ),
            "{shown}"
        );
        assert_eq!(shown.matches("y[j] =").count(), 1, "{shown}");
        // A second value that reads another element of the row first, or reads the row
        // twice, keeps both stores.
        let other = b::store(BufId(0), j(), b::add(load(1, j()), load(0, j())));
        let twice = b::store(BufId(0), j(), b::add(load(0, j()), load(0, b::int(0))));
        for second in [other, twice] {
            let mut k = kernel(vec![lp(vec![upd(0), second])]);
            merge_stores(&mut k);
            assert_eq!(k.to_string().matches("y[j] =").count(), 2, "{k}");
        }
    }

    #[test]
    fn narrowing_stores_are_kept() {
        // `y` of `f32`: each store rounds, so `(y + a) + b` in `f64` could differ.
        let j = || b::var(VarId(0));
        let mut k = b::test_kernel(
            &[("y", ElemType::F32), ("x", ElemType::F64)],
            false,
            &[("j", ElemType::I64)],
            vec![Stmt::For {
                var: VarId(0),
                start: b::int(0),
                stop: b::int(4),
                body: (0..2)
                    .map(|t| {
                        b::store(
                            BufId(0),
                            j(),
                            b::add(load(0, j()), load(1, b::add(j(), b::int(t)))),
                        )
                    })
                    .collect(),
            }],
        );
        merge_stores(&mut k);
        assert_eq!(k.to_string().matches("y[j] =").count(), 2, "{k}");
    }
}
