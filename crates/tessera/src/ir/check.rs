//! Type checking of loop IR (catches lowering bugs before they reach a backend).
//!
//! Backends assume well-typed IR (Cranelift would panic on a type mismatch), so every kernel
//! is checked before compilation and a failure is reported as an internal error instead.

use super::{BinOp, BufId, Expr, Kernel, Stmt, UnOp};
use crate::types::{Class, ElemType};

impl Kernel {
    /// Verify that every id is declared and every expression and statement is well typed.
    pub fn check(&self) -> Result<(), String> {
        for (k, v) in self.vars.iter().enumerate() {
            if v.ty != v.ty.compute() {
                return Err(format!(
                    "variable {k} `{}` has non-compute type {}",
                    v.name, v.ty
                ));
            }
        }
        self.check_stmts(&self.body, 0)
    }

    fn check_stmts(&self, stmts: &[Stmt], loops: usize) -> Result<(), String> {
        for s in stmts {
            self.check_stmt(s, loops)?;
        }
        Ok(())
    }

    fn check_stmt(&self, s: &Stmt, loops: usize) -> Result<(), String> {
        match s {
            Stmt::Assign(v, e) => {
                self.var_ok(v.0)?;
                expect(self.expr_ty(e)?, self.var_ty(*v), || {
                    format!("assignment to `{}`", self.vars[v.0 as usize].name)
                })
            }
            Stmt::Store { buf, index, value } => {
                self.buf_ok(buf.0)?;
                expect(self.expr_ty(index)?, ElemType::I64, || "store index".into())?;
                expect(self.expr_ty(value)?, self.buf_elem(*buf).compute(), || {
                    format!("store into `{}`", self.bufs[buf.0 as usize].name)
                })
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                expect(self.expr_ty(cond)?, ElemType::Bool, || {
                    "if condition".into()
                })?;
                self.check_stmts(then, loops)?;
                self.check_stmts(otherwise, loops)
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                self.var_ok(var.0)?;
                expect(self.var_ty(*var), ElemType::I64, || "for variable".into())?;
                expect(self.expr_ty(start)?, ElemType::I64, || "for start".into())?;
                expect(self.expr_ty(stop)?, ElemType::I64, || "for stop".into())?;
                self.check_stmts(body, loops + 1)
            }
            Stmt::While { cond, body } => {
                expect(self.expr_ty(cond)?, ElemType::Bool, || {
                    "while condition".into()
                })?;
                self.check_stmts(body, loops + 1)
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
                self.buf_ok(buf.0)?;
                expect(self.expr_ty(start)?, ElemType::I64, || "fill start".into())?;
                expect(self.expr_ty(stop)?, ElemType::I64, || "fill stop".into())?;
                expect(self.expr_ty(value)?, self.buf_elem(*buf).compute(), || {
                    "fill value".into()
                })
            }
            Stmt::Sort { buf, lo, hi } => {
                self.i64_buf(*buf, "sort")?;
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
            Stmt::Fail(k) => Err(format!("fail({k}) names no error message")),
        }
    }

    fn var_ok(&self, v: u32) -> Result<(), String> {
        if (v as usize) < self.vars.len() {
            Ok(())
        } else {
            Err(format!("undeclared variable {v}"))
        }
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
                self.buf_ok(buf.0)?;
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
                    UnOp::Neg | UnOp::Abs => t != ElemType::Bool,
                    UnOp::Not => t != ElemType::F64,
                    UnOp::Sqrt | UnOp::Exp | UnOp::Log | UnOp::Floor => t == ElemType::F64,
                };
                if !ok {
                    return Err(format!("{op:?} on {t}"));
                }
                t
            }
            Expr::Binary(op, a, b) => {
                let (ta, tb) = (self.expr_ty(a)?, self.expr_ty(b)?);
                if ta != tb {
                    return Err(format!("{op:?} on {ta} and {tb}"));
                }
                use BinOp::*;
                let ok = match op {
                    Add | Sub | Mul | Div | Rem | Min | Max => ta != ElemType::Bool,
                    Eq | Ne | Lt | Le | Gt | Ge => true,
                    And | Or | Xor => ta != ElemType::F64,
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
                self.expr_ty(a)?;
                if *t != t.compute() {
                    return Err(format!("cast to non-compute type {t}"));
                }
                *t
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
            }],
            vars: vec![
                VarDecl {
                    name: "i".into(),
                    ty: ElemType::I64,
                },
                VarDecl {
                    name: "s".into(),
                    ty: ElemType::F64,
                },
            ],
            body,
            errors: vec![],
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
    use super::super::Expr;
}
