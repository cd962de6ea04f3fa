//! Type checking of loop IR (catches lowering bugs before they reach a backend).
//!
//! Backends assume well-typed IR (Cranelift would panic on a type mismatch), so every kernel
//! is checked before compilation and a failure is reported as an internal error instead. The
//! check goes on past a faulty statement and reports every one, each with its place in the
//! statement tree, so one run of a broken lowering shows all it got wrong.

use super::{BinOp, BufId, Expr, Kernel, Stmt, UnOp};
use crate::types::{Class, ElemType};
use std::fmt;

/// One step down the statement tree from the kernel body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Statement `k` of the current list.
    Stmt(usize),
    /// Into the body of a `for` over this variable.
    For(String),
    /// Into the body of a `while`.
    While,
    /// Into the body of a parallel range.
    Chunked,
    /// Into the `then` branch of an `if`.
    Then,
    /// Into the `else` branch of an `if`.
    Else,
}

/// A problem in the IR and where it is (an empty path: the kernel's declarations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrError {
    pub path: Vec<Step>,
    pub msg: String,
}

/// Everything [`Kernel::check`] found, in statement order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IllTyped(pub Vec<IrError>);

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Stmt(k) => write!(f, "#{k}"),
            Step::For(v) => write!(f, "for `{v}`"),
            Step::While => f.write_str("while"),
            Step::Chunked => f.write_str("parallel"),
            Step::Then => f.write_str("then"),
            Step::Else => f.write_str("else"),
        }
    }
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            return f.write_str(&self.msg);
        }
        let path: Vec<String> = self.path.iter().map(Step::to_string).collect();
        write!(f, "at {}: {}", path.join(" > "), self.msg)
    }
}

impl fmt::Display for IllTyped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self.0.iter().map(IrError::to_string).collect();
        f.write_str(&all.join("; "))
    }
}

impl std::error::Error for IllTyped {}

impl Kernel {
    /// Verify that every id is declared and every expression and statement is well typed.
    pub fn check(&self) -> Result<(), IllTyped> {
        let mut out = vec![];
        for (k, v) in self.vars.iter().enumerate() {
            if v.ty != v.ty.compute() {
                out.push(IrError {
                    path: vec![],
                    msg: format!("variable {k} `{}` has non-compute type {}", v.name, v.ty),
                });
            }
        }
        for (k, b) in self.bufs.iter().enumerate() {
            if b.elem == ElemType::Limit {
                out.push(IrError {
                    path: vec![],
                    msg: format!("buffer {k} `{}` of limit (points are never stored)", b.name),
                });
            }
        }
        for crate::ir::Bounded { buf, below, .. } in &self.bounded {
            let ok = self
                .buf_ok(buf.0)
                .and_then(|()| self.expr_ty(below))
                .and_then(|t| expect(t, ElemType::I64, || "a vouched bound".into()));
            if let Err(msg) = ok {
                out.push(IrError {
                    path: vec![],
                    msg: format!("bounded buffer {}: {msg}", buf.0),
                });
            }
        }
        self.check_stmts(&self.body, 0, &mut vec![], &mut out);
        if out.is_empty() {
            Ok(())
        } else {
            Err(IllTyped(out))
        }
    }

    fn check_stmts(
        &self,
        stmts: &[Stmt],
        loops: usize,
        path: &mut Vec<Step>,
        out: &mut Vec<IrError>,
    ) {
        for (k, s) in stmts.iter().enumerate() {
            path.push(Step::Stmt(k));
            if let Err(msg) = self.check_own(s, loops) {
                out.push(IrError {
                    path: path.clone(),
                    msg,
                });
            }
            // The bodies are checked even when the statement itself is faulty.
            let nested: Vec<(Step, &Vec<Stmt>, usize)> = match s {
                Stmt::If {
                    then, otherwise, ..
                } => vec![(Step::Then, then, loops), (Step::Else, otherwise, loops)],
                Stmt::For { var, body, .. } => {
                    let name = self
                        .vars
                        .get(var.0 as usize)
                        .map_or_else(|| format!("v{}", var.0), |v| v.name.clone());
                    vec![(Step::For(name), body, loops + 1)]
                }
                Stmt::While { body, .. } => vec![(Step::While, body, loops + 1)],
                // No `break` may leave a chunk: chunks run as separate calls.
                Stmt::Chunked(c) => vec![(Step::Chunked, &c.body, 0)],
                _ => vec![],
            };
            for (step, body, depth) in nested {
                path.push(step);
                self.check_stmts(body, depth, path, out);
                path.pop();
            }
            path.pop();
        }
    }

    /// The statement's own parts (not its nested statements).
    fn check_own(&self, s: &Stmt, loops: usize) -> Result<(), String> {
        match s {
            Stmt::Assign(v, e) => {
                self.var_ok(v.0)?;
                expect(self.expr_ty(e)?, self.var_ty(*v), || {
                    format!("assignment to `{}`", self.vars[v.0 as usize].name)
                })
            }
            Stmt::Store { buf, index, value } => {
                self.storable(*buf)?;
                expect(self.expr_ty(index)?, ElemType::I64, || "store index".into())?;
                expect(self.expr_ty(value)?, self.buf_elem(*buf).compute(), || {
                    format!("store into `{}`", self.bufs[buf.0 as usize].name)
                })
            }
            Stmt::Atomic {
                buf,
                index,
                op,
                value,
            } => {
                self.storable(*buf)?;
                if !crate::ir::atomic::OPS.contains(op) {
                    return Err(format!("atomic update with {op:?}"));
                }
                expect(self.expr_ty(index)?, ElemType::I64, || {
                    "atomic index".into()
                })?;
                expect(self.expr_ty(value)?, self.buf_elem(*buf).compute(), || {
                    format!("atomic update of `{}`", self.bufs[buf.0 as usize].name)
                })
            }
            Stmt::If { cond, .. } => expect(self.expr_ty(cond)?, ElemType::Bool, || {
                "if condition".into()
            }),
            Stmt::For {
                var, start, stop, ..
            } => {
                self.var_ok(var.0)?;
                expect(self.var_ty(*var), ElemType::I64, || "for variable".into())?;
                expect(self.expr_ty(start)?, ElemType::I64, || "for start".into())?;
                expect(self.expr_ty(stop)?, ElemType::I64, || "for stop".into())
            }
            Stmt::While { cond, .. } => expect(self.expr_ty(cond)?, ElemType::Bool, || {
                "while condition".into()
            }),
            Stmt::Chunked(c) => {
                for v in [c.lo, c.hi] {
                    self.var_ok(v.0)?;
                    expect(self.var_ty(v), ElemType::I64, || "chunk bound".into())?;
                }
                expect(self.expr_ty(&c.start)?, ElemType::I64, || {
                    "parallel start".into()
                })?;
                expect(self.expr_ty(&c.stop)?, ElemType::I64, || {
                    "parallel stop".into()
                })?;
                for p in &c.private {
                    self.buf_ok(p.buf.0)?;
                    expect(p.identity.ty(), self.buf_elem(p.buf).compute(), || {
                        "private identity".into()
                    })?;
                }
                for b in &c.scratch {
                    self.buf_ok(b.0)?;
                }
                for v in &c.scratch_state {
                    self.var_ok(v.0)?;
                }
                for r in &c.rows {
                    for v in [Some(r.cursor), r.last].into_iter().flatten() {
                        self.var_ok(v.0)?;
                    }
                    for b in &r.arrays {
                        self.buf_ok(b.0)?;
                    }
                }
                let nested = c.nested.iter().flat_map(|n| [n.crd, n.ptr]);
                for w in c.weights.into_iter().chain(nested) {
                    self.buf_ok(w.0)?;
                    expect(self.buf_elem(w).compute(), ElemType::I64, || {
                        "parallel weights".into()
                    })?;
                }
                Ok(())
            }
            Stmt::Break if loops == 0 => Err("`break` outside a loop".into()),
            Stmt::Break | Stmt::Comment(_) => Ok(()),
            Stmt::Grow { buf, len } => {
                self.buf_ok(buf.0)?;
                if !self.bufs[buf.0 as usize].growable {
                    return Err(format!(
                        "grow of non-growable buffer `{}`",
                        self.bufs[buf.0 as usize].name
                    ));
                }
                expect(self.expr_ty(len)?, ElemType::I64, || "grow length".into())
            }
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } => {
                self.storable(*buf)?;
                expect(self.expr_ty(start)?, ElemType::I64, || "fill start".into())?;
                expect(self.expr_ty(stop)?, ElemType::I64, || "fill stop".into())?;
                expect(self.expr_ty(value)?, self.buf_elem(*buf).compute(), || {
                    "fill value".into()
                })
            }
            Stmt::Sort { buf, flags, lo, hi } => {
                self.i64_buf(*buf, "sort")?;
                if let Some(f) = flags {
                    self.buf_ok(f.0)?;
                    if self.buf_elem(*f) != ElemType::Bool || f == buf {
                        return Err(format!(
                            "sort's flags `{}` are not a bool buffer other than the sorted one",
                            self.bufs[f.0 as usize].name
                        ));
                    }
                }
                expect(self.expr_ty(lo)?, ElemType::I64, || "sort lo".into())?;
                expect(self.expr_ty(hi)?, ElemType::I64, || "sort hi".into())
            }
            Stmt::SortPerm { keys, perm, lo, hi } => {
                self.i64_buf(*keys, "sort_perm keys")?;
                self.i64_buf(*perm, "sort_perm permutation")?;
                if keys == perm {
                    return Err("sort_perm needs distinct key and permutation buffers".into());
                }
                expect(self.expr_ty(lo)?, ElemType::I64, || "sort_perm lo".into())?;
                expect(self.expr_ty(hi)?, ElemType::I64, || "sort_perm hi".into())
            }
            Stmt::Fail(k) if (*k as usize) < self.errors.len() => Ok(()),
            Stmt::Fail(k) => Err(format!("fail({k}) names no error")),
        }
    }

    fn var_ok(&self, v: u32) -> Result<(), String> {
        if (v as usize) < self.vars.len() {
            Ok(())
        } else {
            Err(format!("undeclared variable {v}"))
        }
    }

    /// A buffer that loads and stores may use: declared, and not of `Limit` (which has no
    /// memory representation; the declaration itself is reported too).
    fn storable(&self, b: BufId) -> Result<(), String> {
        self.buf_ok(b.0)?;
        if self.buf_elem(b) == ElemType::Limit {
            return Err(format!(
                "access to buffer `{}` of limit",
                self.bufs[b.0 as usize].name
            ));
        }
        Ok(())
    }

    /// Intrinsics work on I64 buffers only.
    fn i64_buf(&self, b: BufId, what: &str) -> Result<(), String> {
        self.buf_ok(b.0)?;
        if self.buf_elem(b) != ElemType::I64 {
            return Err(format!(
                "{what} on buffer `{}` of {}, not i64",
                self.bufs[b.0 as usize].name,
                self.buf_elem(b)
            ));
        }
        Ok(())
    }

    fn buf_ok(&self, b: u32) -> Result<(), String> {
        if (b as usize) < self.bufs.len() {
            Ok(())
        } else {
            Err(format!("undeclared buffer {b}"))
        }
    }

    /// The type of an expression, or why it is ill-typed.
    pub fn expr_ty(&self, e: &Expr) -> Result<ElemType, String> {
        Ok(match e {
            Expr::Const(s) => {
                let t = s.ty();
                if t != t.compute() {
                    return Err(format!("constant {s} of non-compute type {t}"));
                }
                t
            }
            Expr::Var(v) => {
                self.var_ok(v.0)?;
                self.var_ty(*v)
            }
            Expr::Load { buf, index } => {
                self.storable(*buf)?;
                expect(self.expr_ty(index)?, ElemType::I64, || "load index".into())?;
                self.buf_elem(*buf).compute()
            }
            Expr::Len(buf) => {
                self.buf_ok(buf.0)?;
                ElemType::I64
            }
            Expr::Unary(op, a) => {
                let t = self.expr_ty(a)?;
                let ok = match op {
                    UnOp::Neg | UnOp::Abs => matches!(t, ElemType::I64 | ElemType::F64),
                    UnOp::Not => matches!(t, ElemType::Bool | ElemType::I64),
                    UnOp::Sqrt | UnOp::Exp | UnOp::Log | UnOp::Floor | UnOp::Math(_) => {
                        t == ElemType::F64
                    }
                    UnOp::LimitVal | UnOp::LimitEps => t == ElemType::Limit,
                    UnOp::After | UnOp::Before => matches!(t, ElemType::Limit | ElemType::I64),
                };
                if !ok {
                    return Err(format!("{op:?} on {t}"));
                }
                match op {
                    UnOp::LimitVal => ElemType::F64,
                    UnOp::LimitEps => ElemType::I64,
                    _ => t,
                }
            }
            Expr::Binary(op, a, b) => {
                let (ta, tb) = (self.expr_ty(a)?, self.expr_ty(b)?);
                if ta != tb {
                    return Err(format!("{op:?} on {ta} and {tb}"));
                }
                use BinOp::*;
                // Points only compare and take min/max: shifts are written with `MakeLimit`.
                let ok = match op {
                    Add | Sub | Mul | Div | Rem => matches!(ta, ElemType::I64 | ElemType::F64),
                    Min | Max => ta != ElemType::Bool,
                    IeeeMul | Math(_) => ta == ElemType::F64,
                    Eq | Ne | Lt | Le | Gt | Ge => true,
                    And | Or | Xor => matches!(ta, ElemType::Bool | ElemType::I64),
                    Shl | Shr => ta == ElemType::I64,
                };
                if !ok {
                    return Err(format!("{op:?} on {ta}"));
                }
                match op {
                    Eq | Ne | Lt | Le | Gt | Ge => ElemType::Bool,
                    _ => ta,
                }
            }
            Expr::Select(c, a, b) => {
                expect(self.expr_ty(c)?, ElemType::Bool, || {
                    "select condition".into()
                })?;
                let ta = self.expr_ty(a)?;
                expect(self.expr_ty(b)?, ta, || "select branches".into())?;
                ta
            }
            Expr::Cast(t, a) => {
                let from = self.expr_ty(a)?;
                if *t != t.compute() {
                    return Err(format!("cast to non-compute type {t}"));
                }
                if from == ElemType::Limit || *t == ElemType::Limit {
                    return Err(format!("cast from {from} to {t}"));
                }
                *t
            }
            Expr::MakeLimit(v, e) => {
                expect(self.expr_ty(v)?, ElemType::F64, || {
                    "make_limit value".into()
                })?;
                expect(self.expr_ty(e)?, ElemType::I64, || "make_limit sign".into())?;
                ElemType::Limit
            }
            Expr::SearchGe { buf, lo, hi, key } => {
                self.buf_ok(buf.0)?;
                if self.buf_elem(*buf).class() != Class::Int {
                    return Err(format!(
                        "search in non-integer buffer `{}`",
                        self.bufs[buf.0 as usize].name
                    ));
                }
                for (what, x) in [("lo", lo), ("hi", hi), ("key", key)] {
                    expect(self.expr_ty(x)?, ElemType::I64, || format!("search {what}"))?;
                }
                ElemType::I64
            }
            Expr::HashFind { table, key } => {
                self.i64_buf(*table, "hash_find")?;
                expect(self.expr_ty(key)?, ElemType::I64, || "hash key".into())?;
                ElemType::I64
            }
        })
    }
}

fn expect(got: ElemType, want: ElemType, what: impl FnOnce() -> String) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{}: expected {want}, found {got}", what()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::build as b;
    use super::super::{BufDecl, BufId, Kernel, Stmt, VarDecl, VarId};
    use crate::types::ElemType;

    fn kernel(body: Vec<Stmt>) -> Kernel {
        Kernel {
            name: "k".into(),
            bufs: vec![BufDecl {
                name: "x".into(),
                elem: ElemType::F32,
                growable: false,
                tensor: None,
                scratch: false,
            }],
            vars: vec![
                VarDecl {
                    name: "i".into(),
                    ty: ElemType::I64,
                    cold: false,
                },
                VarDecl {
                    name: "s".into(),
                    ty: ElemType::F64,
                    cold: false,
                },
            ],
            body,
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        }
    }

    #[test]
    fn accepts_well_typed_and_rejects_mismatches() {
        let ok = kernel(vec![Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: Expr::Len(BufId(0)),
            body: vec![b::assign(
                VarId(1),
                b::add(b::var(VarId(1)), b::load(BufId(0), b::var(VarId(0)))),
            )],
        }]);
        assert_eq!(ok.check(), Ok(()));
        assert!(
            kernel(vec![b::assign(VarId(0), b::load(BufId(0), b::int(0)))])
                .check()
                .is_err()
        );
        assert!(kernel(vec![Stmt::Break]).check().is_err());
        assert!(kernel(vec![Stmt::Fail(0)]).check().is_err());
        assert!(
            kernel(vec![Stmt::Grow {
                buf: BufId(0),
                len: b::int(1)
            }])
            .check()
            .is_err()
        );
    }

    #[test]
    fn reports_every_error_with_its_place() {
        use super::{IrError, Step};
        // A bad store inside the loop, a break in the else branch (fine: inside the loop),
        // a bad if condition, and a fail outside the loop naming no message.
        let k = kernel(vec![
            Stmt::For {
                var: VarId(0),
                start: b::int(0),
                stop: b::int(3),
                body: vec![
                    b::store(BufId(0), b::var(VarId(0)), b::var(VarId(0))),
                    Stmt::If {
                        cond: b::int(1),
                        then: vec![],
                        otherwise: vec![Stmt::Break],
                    },
                ],
            },
            Stmt::Fail(0),
        ]);
        let errs = k.check().unwrap_err().0;
        let paths: Vec<&Vec<Step>> = errs.iter().map(|e: &IrError| &e.path).collect();
        let for_i = Step::For("i".into());
        assert_eq!(
            paths,
            [
                &vec![Step::Stmt(0), for_i.clone(), Step::Stmt(0)],
                &vec![Step::Stmt(0), for_i, Step::Stmt(1)],
                &vec![Step::Stmt(1)],
            ],
            "{errs:?}"
        );
        let shown = k.check().unwrap_err().to_string();
        assert!(
            shown.starts_with("at #0 > for `i` > #0: store into `x`: expected f64, found i64; "),
            "{shown}"
        );
        assert!(shown.ends_with("at #1: fail(0) names no error"), "{shown}");
    }
    use super::super::Expr;

    #[test]
    fn points_compare_and_step_but_never_compute_or_touch_memory() {
        use super::super::{BinOp, UnOp};
        let p = VarId(2);
        let limit_kernel = |body: Vec<Stmt>| {
            let mut k = kernel(body);
            k.vars.push(VarDecl {
                name: "p".into(),
                ty: ElemType::Limit,
                cold: false,
            });
            k
        };
        let pt = || b::make_limit(b::var(VarId(1)), b::var(VarId(0)));
        let ok = limit_kernel(vec![
            b::assign(p, pt()),
            b::assign(p, b::after(b::min(b::var(p), b::limit(1.0, -1)))),
            b::assign(
                p,
                b::select(b::lt(b::var(p), pt()), b::before(b::var(p)), pt()),
            ),
            b::assign(VarId(1), b::limit_val(b::var(p))),
            b::assign(VarId(0), b::after(b::limit_eps(b::var(p)))),
            b::store(BufId(0), b::int(0), b::limit_val(b::max(pt(), b::var(p)))),
        ]);
        assert_eq!(ok.check(), Ok(()), "{ok}");
        let un = |op, e| Expr::Unary(op, Box::new(e));
        let bad = [
            b::assign(p, b::add(b::var(p), b::limit(1.0, 0))),
            b::assign(p, un(UnOp::Neg, b::var(p))),
            b::assign(p, b::bin(BinOp::And, b::var(p), b::var(p))),
            b::assign(VarId(1), b::cast(ElemType::F64, b::var(p))),
            b::assign(p, b::cast(ElemType::Limit, b::var(VarId(1)))),
            b::assign(p, b::make_limit(b::var(VarId(0)), b::var(VarId(0)))),
            b::assign(p, b::make_limit(b::var(VarId(1)), b::var(VarId(1)))),
            b::assign(VarId(1), b::limit_val(b::var(VarId(1)))),
            b::assign(VarId(1), b::after(b::var(VarId(1)))),
            b::assign(VarId(0), b::limit_eps(b::var(VarId(1)))),
            b::assign(VarId(1), b::eq(b::var(p), b::var(VarId(1)))),
        ];
        for s in bad {
            let k = limit_kernel(vec![s]);
            assert!(k.check().is_err(), "{k}");
        }
        // No buffer holds points: the declaration and every access are errors.
        let mut k = limit_kernel(vec![
            b::assign(p, b::load(BufId(1), b::int(0))),
            b::store(BufId(1), b::int(0), b::var(p)),
        ]);
        k.bufs.push(super::super::BufDecl {
            name: "pts".into(),
            elem: ElemType::Limit,
            growable: false,
            tensor: None,
            scratch: false,
        });
        let errs = k.check().unwrap_err().0;
        let msgs: Vec<&str> = errs.iter().map(|e| e.msg.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "buffer 1 `pts` of limit (points are never stored)",
                "access to buffer `pts` of limit",
                "access to buffer `pts` of limit",
            ]
        );
    }
}
