//! 0-d locals as variables: a one-element buffer declared inside a loop body (`t .= 0` under
//! `for i`, lowered to `grow(t, 1); fill(t, 0, 1, 0)`, then read and updated at `t[0]`)
//! lives in a variable from its declaration to the end of the statement list holding it.
//!
//! Declared per iteration, such a local costs a length check and a one-element fill each
//! time, and every update `t[0] = t[0] + e` is a load and a store the backends cannot keep
//! in a register (they assume any two buffers may alias). A gradient program has one per
//! `let` variable of its forward program (SoftRas: 30 per pixel). Scalar promotion
//! (`ir::promote`) lifts only elements of buffers that a loop does not declare, and only
//! around innermost loops.
//!
//! Memory is kept exact wherever the buffer is observable: the variable's value goes back
//! into `t[0]` at every exit of its scope (the end of the list, a `break` leaving the loop
//! around it, a `fail`), so every statement outside a scope, the caller after the run (the
//! runtime returns every tensor, workspaces included) and the chunks of a parallel range
//! (each has its own copy of a workspace its iterations declare, `Chunked::scratch`, and
//! the buffer ends as the last chunk's) see what the one-element buffer held. The store is
//! one per scope execution where the declaration and updates were several, and around an
//! innermost loop `promote` then keeps it in a register too. The declarations' `grow`s
//! become one at the kernel's entry, which makes those stores in bounds: a valid 0-d tensor
//! has exactly one element (its root position), so that `grow` changes nothing for one.
//!
//! Only buffers whose every use is one of the declaration's two statements or a load or
//! store of element 0 qualify, of a type stored as it is computed (`f64`, `i64`, `bool`:
//! a narrowing store followed by a reload is not the identity), and not a parallel range's
//! private output or appended array. A range inside a scope that uses the buffer keeps it in
//! memory (its chunks may run on other threads).

use super::effects::new_var;
use super::{BufId, Expr, Kernel, Stmt, VarId};
use crate::types::{ElemType, Scalar};
use std::collections::BTreeSet;

/// Rewrite every qualifying 0-d local of `k` (see the module documentation).
pub fn locals_to_vars(k: &mut Kernel) {
    let candidates = candidates(k);
    let mut entry = vec![];
    for buf in candidates {
        let mut body = k.body.clone();
        let mut var = None;
        let mut ok = true;
        {
            let mut site = Site {
                buf,
                var: &mut var,
                k,
                ok: &mut ok,
            };
            site.outside(&mut body, false);
        }
        if ok && var.is_some() {
            k.body = body;
            entry.push(Stmt::Grow {
                buf,
                len: Expr::Const(Scalar::I64(1)),
            });
        }
        // A variable made for an abandoned rewrite stays unused; `prune` drops it.
    }
    if !entry.is_empty() {
        entry.append(&mut k.body);
        k.body = entry;
    }
}

/// The buffers every use of which is `grow(b, 1)`, `fill(b, 0, 1, constant)`, `b[0]` or
/// `b[0] = e`, of a compute type, and that no parallel range shares out or vouches for.
fn candidates(k: &Kernel) -> BTreeSet<BufId> {
    let mut good: BTreeSet<BufId> = (0..k.bufs.len() as u32)
        .map(BufId)
        .filter(|b| {
            matches!(
                k.buf_elem(*b),
                ElemType::F64 | ElemType::I64 | ElemType::Bool
            )
        })
        .collect();
    for b in &k.bounded {
        good.remove(&b.buf);
    }
    for b in &k.not_nan {
        good.remove(b);
    }
    let mut bad = BTreeSet::new();
    disqualify(&k.body, &mut bad);
    good.retain(|b| !bad.contains(b));
    good
}

fn zero(e: &Expr) -> bool {
    *e == Expr::Const(Scalar::I64(0))
}

fn one(e: &Expr) -> bool {
    *e == Expr::Const(Scalar::I64(1))
}

/// Collect into `bad` the buffers used in any way other than the qualifying ones.
fn disqualify(stmts: &[Stmt], bad: &mut BTreeSet<BufId>) {
    for s in stmts {
        match s {
            Stmt::Store { buf, index, .. } if !zero(index) => {
                bad.insert(*buf);
            }
            Stmt::Grow { buf, len } if !one(len) => {
                bad.insert(*buf);
            }
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } if !(zero(start) && one(stop) && matches!(value, Expr::Const(_))) => {
                bad.insert(*buf);
            }
            Stmt::Atomic { buf, .. } | Stmt::Sort { buf, .. } => {
                bad.insert(*buf);
                if let Stmt::Sort { flags: Some(f), .. } = s {
                    bad.insert(*f);
                }
            }
            Stmt::SortPerm { keys, perm, .. } => {
                bad.extend([*keys, *perm]);
            }
            Stmt::Chunked(c) => {
                bad.extend(c.private.iter().map(|p| p.buf));
                bad.extend(c.rows.iter().flat_map(|r| r.arrays.iter().copied()));
            }
            _ => {}
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| match x {
                Expr::Load { buf, index } if !zero(index) => {
                    bad.insert(*buf);
                }
                Expr::Len(b) | Expr::SearchGe { buf: b, .. } | Expr::HashFind { table: b, .. } => {
                    bad.insert(*b);
                }
                _ => {}
            });
        }
        for body in s.bodies() {
            disqualify(body, bad);
        }
    }
}

/// The rewrite of one buffer's declarations.
struct Site<'a> {
    buf: BufId,
    /// The buffer's variable, made at its first declaration in a loop.
    var: &'a mut Option<VarId>,
    k: &'a mut Kernel,
    /// Cleared when a scope holds a parallel range that uses the buffer.
    ok: &'a mut bool,
}

impl Site<'_> {
    /// Walk statements outside any scope of the buffer; a declaration `grow(b, 1);
    /// fill(b, 0, 1, c)` inside a loop (`in_loop`) opens one that runs to the end of its list.
    fn outside(&mut self, stmts: &mut Vec<Stmt>, in_loop: bool) {
        let mut i = 0;
        while i < stmts.len() {
            if in_loop && let Some(init) = self.declaration(&stmts[i..]) {
                let var = self.var();
                let mut rest: Vec<Stmt> = stmts.drain(i..).skip(2).collect();
                self.inside(&mut rest, 0);
                stmts.push(Stmt::Assign(var, init));
                stmts.append(&mut rest);
                // The scope's last statement may be a `break` or a `fail`, which already
                // wrote the value back; the store after it is then unreachable, and harmless.
                stmts.push(self.write_back());
                return;
            }
            let looping = in_loop || matches!(stmts[i], Stmt::For { .. } | Stmt::While { .. });
            let chunked = matches!(stmts[i], Stmt::Chunked(_));
            for body in stmts[i].bodies_mut() {
                self.outside(body, looping || chunked);
            }
            i += 1;
        }
    }

    /// The initial value if `stmts` starts with a declaration of the buffer.
    fn declaration(&self, stmts: &[Stmt]) -> Option<Expr> {
        match stmts {
            [
                Stmt::Grow { buf: g, len },
                Stmt::Fill {
                    buf: f,
                    start,
                    stop,
                    value,
                },
                ..,
            ] if *g == self.buf && *f == self.buf && one(len) && zero(start) && one(stop) => {
                Some(value.clone())
            }
            _ => None,
        }
    }

    fn var(&mut self) -> VarId {
        if let Some(v) = *self.var {
            return v;
        }
        let name = format!("{}_local", self.k.bufs[self.buf.0 as usize].name);
        let ty = self.k.buf_elem(self.buf);
        let v = new_var(self.k, &name, ty);
        *self.var = Some(v);
        v
    }

    fn write_back(&self) -> Stmt {
        Stmt::Store {
            buf: self.buf,
            index: Expr::Const(Scalar::I64(0)),
            value: Expr::Var(self.var.expect("made at the declaration")),
        }
    }

    /// Rewrite statements inside a scope: the buffer's element is the variable. `loops`
    /// counts the loops entered since the scope began: a `break` outside all of them leaves
    /// the scope's own loop.
    fn inside(&mut self, stmts: &mut Vec<Stmt>, loops: usize) {
        let var = self.var.expect("made at the declaration");
        let mut out = Vec::with_capacity(stmts.len());
        for mut s in stmts.drain(..) {
            match &mut s {
                // A declaration again (a nested loop's): the variable starts over; the
                // entry's `grow` covers the length.
                Stmt::Grow { buf, .. } if *buf == self.buf => continue,
                Stmt::Fill { buf, value, .. } if *buf == self.buf => {
                    out.push(Stmt::Assign(var, value.clone()));
                    continue;
                }
                Stmt::Store { buf, value, .. } if *buf == self.buf => {
                    let mut value = std::mem::replace(value, Expr::Var(var));
                    self.substitute(&mut value);
                    out.push(Stmt::Assign(var, value));
                    continue;
                }
                Stmt::Fail(_) => out.push(self.write_back()),
                Stmt::Break if loops == 0 => out.push(self.write_back()),
                Stmt::Chunked(c) if uses(&c.body, self.buf) => *self.ok = false,
                _ => {}
            }
            for e in s.own_exprs_mut() {
                self.substitute(e);
            }
            let deeper = loops + usize::from(matches!(s, Stmt::For { .. } | Stmt::While { .. }));
            for body in s.bodies_mut() {
                self.inside(body, deeper);
            }
            out.push(s);
        }
        *stmts = out;
    }

    fn substitute(&self, e: &mut Expr) {
        if let Expr::Load { buf, .. } = e
            && *buf == self.buf
        {
            *e = Expr::Var(self.var.expect("made at the declaration"));
            return;
        }
        for c in e.children_mut() {
            self.substitute(c);
        }
    }
}

/// Whether any statement of `stmts` names `buf`.
fn uses(stmts: &[Stmt], buf: BufId) -> bool {
    let mut found = false;
    for s in stmts {
        match s {
            Stmt::Store { buf: b, .. }
            | Stmt::Grow { buf: b, .. }
            | Stmt::Fill { buf: b, .. }
            | Stmt::Atomic { buf: b, .. }
            | Stmt::Sort { buf: b, .. }
                if *b == buf =>
            {
                return true;
            }
            _ => {}
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Load { buf: b, .. } = x
                    && *b == buf
                {
                    found = true;
                }
            });
        }
        if found || s.bodies().iter().any(|b| uses(b, buf)) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::ir::{BufDecl, Chunked, VarDecl};

    const T: BufId = BufId(0);
    const X: BufId = BufId(1);
    const I: VarId = VarId(0);
    const J: VarId = VarId(1);

    /// Buffers `t` (the local) and `x`; variables `i`, `j`.
    fn kernel(body: Vec<Stmt>) -> Kernel {
        let buf = |n: &str| BufDecl {
            name: n.into(),
            elem: ElemType::F64,
            growable: true,
            tensor: None,
            scratch: false,
        };
        let var = |n: &str| VarDecl {
            name: n.into(),
            ty: ElemType::I64,
            cold: false,
        };
        Kernel {
            name: "k".into(),
            bufs: vec![buf("t"), buf("x")],
            vars: vec![var("i"), var("j")],
            body,
            errors: vec![crate::ir::cx::KernelError::new(
                "x",
                crate::ir::cx::KernelErrorKind::OutOfBounds {
                    dim: 0,
                    value: None,
                },
            )],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        }
    }

    fn declare() -> Vec<Stmt> {
        vec![
            Stmt::Grow {
                buf: T,
                len: b::int(1),
            },
            Stmt::Fill {
                buf: T,
                start: b::int(0),
                stop: b::int(1),
                value: Expr::Const(Scalar::F64(0.5)),
            },
        ]
    }

    fn add_x(index: Expr) -> Stmt {
        b::store(
            T,
            b::int(0),
            b::add(b::load(T, b::int(0)), b::load(X, index)),
        )
    }

    fn counted(var: VarId, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var,
            start: b::int(0),
            stop: b::int(4),
            body,
        }
    }

    fn rewritten(body: Vec<Stmt>) -> String {
        let mut k = kernel(body);
        locals_to_vars(&mut k);
        assert!(k.check().is_ok(), "{k}");
        k.to_string()
    }

    #[test]
    fn a_local_of_a_loop_body_is_a_variable_written_back_at_the_end() {
        let mut body = declare();
        body.push(counted(J, vec![add_x(b::var(J))]));
        body.push(b::store(X, b::var(I), b::load(T, b::int(0))));
        let shown = rewritten(vec![counted(I, body)]);
        assert!(shown.contains("  grow(t, 1);\n  for (i"), "{shown}");
        assert!(shown.contains("t_local = 0.5;"), "{shown}");
        assert!(shown.contains("t_local = t_local + x[j];"), "{shown}");
        assert!(
            shown.contains("x[i] = t_local;\n    t[0] = t_local;\n  }"),
            "{shown}"
        );
        assert!(!shown.contains("fill"), "{shown}");
    }

    #[test]
    fn breaks_leaving_the_scope_and_failures_write_back_first() {
        // `for i { t .= 0.5; t += x[i]; if (t > 1) break; for j { if (..) break } ; fail }`
        let mut body = declare();
        body.push(add_x(b::var(I)));
        body.push(Stmt::If {
            cond: b::lt(Expr::Const(Scalar::F64(1.0)), b::load(T, b::int(0))),
            then: vec![Stmt::Break],
            otherwise: vec![],
        });
        body.push(counted(
            J,
            vec![Stmt::If {
                cond: b::lt(b::var(J), b::var(I)),
                then: vec![Stmt::Break],
                otherwise: vec![],
            }],
        ));
        body.push(Stmt::Fail(0));
        let shown = rewritten(vec![counted(I, body)]);
        // The loop's own break and the failure store first; the inner loop's break does not.
        assert_eq!(shown.matches("t[0] = t_local;\n").count(), 3, "{shown}");
        assert!(shown.contains("t[0] = t_local;\n      break;"), "{shown}");
        assert!(shown.contains("t[0] = t_local;\n    fail("), "{shown}");
        assert!(shown.contains("(j < i) {\n        break;"), "{shown}");
    }

    #[test]
    fn buffers_used_otherwise_stay_in_memory() {
        let at_top = {
            let mut body = declare();
            body.push(counted(I, vec![add_x(b::var(I))]));
            body
        };
        let other_index = {
            let mut body = declare();
            body.push(b::store(T, b::var(I), b::int(0)));
            vec![counted(I, body)]
        };
        let length = {
            let mut body = declare();
            body.push(b::store(
                X,
                b::int(0),
                Expr::Cast(ElemType::F64, Box::new(Expr::Len(T))),
            ));
            vec![counted(I, body)]
        };
        // A parallel range inside the scope that reads the local.
        let range = {
            let mut body = declare();
            body.push(Stmt::Chunked(Box::new(Chunked::plain(
                J,
                VarId(2),
                b::int(0),
                b::int(3),
                vec![b::store(X, b::var(J), b::load(T, b::int(0)))],
            ))));
            vec![counted(I, body)]
        };
        for body in [at_top, other_index, length, range] {
            let mut k = kernel(body);
            k.vars.push(VarDecl {
                name: "hi".into(),
                ty: ElemType::I64,
                cold: false,
            });
            let before = k.body.clone();
            locals_to_vars(&mut k);
            assert_eq!(k.body, before, "{k}");
        }
    }
}
