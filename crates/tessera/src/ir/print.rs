//! Readable C-like text of a kernel (what `tessera code` shows).

use super::{BinOp, Expr, Kernel, Stmt, UnOp};
use crate::limit::Eps;
use crate::types::Scalar;
use std::collections::HashMap;
use std::fmt::{self, Write};

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = Printer::new(self);
        let params: Vec<String> = self
            .bufs
            .iter()
            .enumerate()
            .map(|(k, b)| format!("{}[] {}", b.elem, p.bufs[k]))
            .collect();
        writeln!(f, "void {}({}) {{", self.name, params.join(", "))?;
        let mut out = String::new();
        // What the caller vouches for (`Kernel::bounded`), which lets loops gather unchecked.
        for f in &self.bounded {
            let below = p.expr(&f.below);
            let what = match f.what {
                crate::ir::Vouched::Coordinates => "coordinates",
                crate::ir::Vouched::Positions => "positions",
            };
            let _ = writeln!(
                out,
                "  // 0 <= {}[*] < {below} when {below} > 0 (checked {what})",
                p.bufs[f.buf.0 as usize]
            );
        }
        for (k, v) in self.vars.iter().enumerate() {
            let _ = writeln!(out, "  {} {};", v.ty, p.vars[k]);
        }
        p.stmts(&mut out, &self.body, 1);
        f.write_str(&out)?;
        writeln!(f, "}}")
    }
}

struct Printer<'a> {
    k: &'a Kernel,
    vars: Vec<String>,
    bufs: Vec<String>,
}

/// Names made unique: the lowering may reuse a readable name (two loops over `i`).
fn unique(names: impl Iterator<Item = String>) -> Vec<String> {
    let names: Vec<String> = names.collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for n in &names {
        *count.entry(n.as_str()).or_default() += 1;
    }
    names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            if count[n.as_str()] > 1 {
                format!("{n}_{k}")
            } else {
                n.clone()
            }
        })
        .collect()
}

impl<'a> Printer<'a> {
    fn new(k: &'a Kernel) -> Printer<'a> {
        Printer {
            k,
            vars: unique(k.vars.iter().map(|v| v.name.clone())),
            bufs: unique(k.bufs.iter().map(|b| b.name.clone())),
        }
    }

    fn stmts(&self, out: &mut String, stmts: &[Stmt], depth: usize) {
        for s in stmts {
            self.stmt(out, s, depth);
        }
    }

    fn stmt(&self, out: &mut String, s: &Stmt, depth: usize) {
        let pad = "  ".repeat(depth);
        match s {
            Stmt::Assign(v, e) => {
                let _ = writeln!(out, "{pad}{} = {};", self.vars[v.0 as usize], self.expr(e));
            }
            Stmt::Store { buf, index, value } => {
                let _ = writeln!(
                    out,
                    "{pad}{}[{}] = {};",
                    self.bufs[buf.0 as usize],
                    self.expr(index),
                    self.expr(value)
                );
            }
            Stmt::Atomic {
                buf,
                index,
                op,
                value,
            } => {
                let _ = writeln!(
                    out,
                    "{pad}atomic {}[{}] {}= {};",
                    self.bufs[buf.0 as usize],
                    self.expr(index),
                    atomic_op(*op),
                    self.expr(value)
                );
            }
            Stmt::Chunked(c) => {
                // An atomic private: copies, or the chunks' indivisible updates of the
                // buffer itself, as the runner chooses per call.
                let private: Vec<String> = c
                    .private
                    .iter()
                    .map(|p| {
                        let or = if p.atomic { " or atomic" } else { "" };
                        format!("{} ({}{or})", self.bufs[p.buf.0 as usize], p.fold)
                    })
                    .collect();
                let scratch: Vec<&str> = c
                    .scratch
                    .iter()
                    .map(|b| self.bufs[b.0 as usize].as_str())
                    .collect();
                let rows: Vec<String> = c
                    .rows
                    .iter()
                    .map(|r| {
                        let arrays: Vec<&str> = r
                            .arrays
                            .iter()
                            .map(|b| self.bufs[b.0 as usize].as_str())
                            .collect();
                        format!("{} at {}", arrays.join(" "), self.vars[r.cursor.0 as usize])
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "{pad}parallel ({}, {}) in chunks of {}..={}{}{}{}{}{} {{",
                    self.vars[c.lo.0 as usize],
                    self.vars[c.hi.0 as usize],
                    self.expr(&c.start),
                    self.expr(&c.stop),
                    c.weights
                        .map(|w| format!(" weighed by {}", self.bufs[w.0 as usize]))
                        .unwrap_or_default()
                        + &c.nested
                            .map(|n| format!(
                                " then {} at {}",
                                self.bufs[n.ptr.0 as usize], self.bufs[n.crd.0 as usize]
                            ))
                            .unwrap_or_default(),
                    if private.is_empty() {
                        String::new()
                    } else {
                        format!(", private {}", private.join(", "))
                    },
                    if scratch.is_empty() {
                        String::new()
                    } else {
                        format!(", own {}", scratch.join(", "))
                    },
                    if rows.is_empty() {
                        String::new()
                    } else {
                        format!(", rows appended to {}", rows.join(", "))
                    },
                    match c.atomics {
                        None => "",
                        Some(true) => ", atomics (the schedule's choice)",
                        Some(false) => ", copies (the schedule's choice)",
                    },
                );
                self.stmts(out, &c.body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let _ = writeln!(out, "{pad}if ({}) {{", self.expr(cond));
                self.stmts(out, then, depth + 1);
                if !otherwise.is_empty() {
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.stmts(out, otherwise, depth + 1);
                }
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                let v = &self.vars[var.0 as usize];
                if self.k.vectorized.contains(var) {
                    let why = crate::ir::vector::verdict(self.k, *var, body);
                    let _ = writeln!(out, "{pad}// {why}");
                }
                let _ = writeln!(
                    out,
                    "{pad}for ({v} = {}; {v} < {}; {v}++) {{",
                    self.expr(start),
                    self.expr(stop)
                );
                self.stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::While { cond, body } => {
                let _ = writeln!(out, "{pad}while ({}) {{", self.expr(cond));
                self.stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::Break => {
                let _ = writeln!(out, "{pad}break;");
            }
            Stmt::Grow { buf, len } => {
                let _ = writeln!(
                    out,
                    "{pad}grow({}, {});",
                    self.bufs[buf.0 as usize],
                    self.expr(len)
                );
            }
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } => {
                let _ = writeln!(
                    out,
                    "{pad}fill({}, {}, {}, {});",
                    self.bufs[buf.0 as usize],
                    self.expr(start),
                    self.expr(stop),
                    self.expr(value)
                );
            }
            Stmt::Sort { buf, flags, lo, hi } => {
                let flags = flags.map_or(String::new(), |f| {
                    format!(", flags: {}", self.bufs[f.0 as usize])
                });
                let _ = writeln!(
                    out,
                    "{pad}sort({}, {}, {}{flags});",
                    self.bufs[buf.0 as usize],
                    self.expr(lo),
                    self.expr(hi)
                );
            }
            Stmt::SortPerm { keys, perm, lo, hi } => {
                let _ = writeln!(
                    out,
                    "{pad}sort_perm({}, {}, {}, {});",
                    self.bufs[keys.0 as usize],
                    self.bufs[perm.0 as usize],
                    self.expr(lo),
                    self.expr(hi)
                );
            }
            Stmt::Fail(k) => {
                let msg = self
                    .k
                    .errors
                    .get(*k as usize)
                    .map_or_else(|| "?".to_string(), |e| e.to_string());
                let _ = writeln!(out, "{pad}fail({msg:?});");
            }
            Stmt::Comment(c) => {
                let _ = writeln!(out, "{pad}// {c}");
            }
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Const(s) => constant(s),
            Expr::Var(v) => self.vars[v.0 as usize].clone(),
            Expr::Load { buf, index } => {
                format!("{}[{}]", self.bufs[buf.0 as usize], self.expr(index))
            }
            Expr::Len(buf) => format!("len({})", self.bufs[buf.0 as usize]),
            Expr::Unary(op, a) => match op {
                UnOp::Neg => format!("-{}", self.operand(a)),
                UnOp::Not => format!("!{}", self.operand(a)),
                UnOp::Abs => format!("abs({})", self.expr(a)),
                UnOp::Sqrt => format!("sqrt({})", self.expr(a)),
                UnOp::Exp => format!("exp({})", self.expr(a)),
                UnOp::Log => format!("log({})", self.expr(a)),
                UnOp::Floor => format!("floor({})", self.expr(a)),
                UnOp::Math(f) => format!("{}({})", f.name(), self.expr(a)),
                UnOp::LimitVal => format!("val({})", self.expr(a)),
                UnOp::LimitEps => format!("eps({})", self.expr(a)),
                UnOp::After => format!("after({})", self.expr(a)),
                UnOp::Before => format!("before({})", self.expr(a)),
            },
            Expr::MakeLimit(v, e) => format!("make_limit({}, {})", self.expr(v), self.expr(e)),
            Expr::Binary(op, a, b) => match op {
                BinOp::Min => format!("min({}, {})", self.expr(a), self.expr(b)),
                BinOp::Max => format!("max({}, {})", self.expr(a), self.expr(b)),
                BinOp::IeeeMul => format!("ieee_mul({}, {})", self.expr(a), self.expr(b)),
                BinOp::Math(f) => format!("{}({}, {})", f.name(), self.expr(a), self.expr(b)),
                _ => format!("{} {} {}", self.operand(a), symbol(*op), self.operand(b)),
            },
            Expr::Select(c, a, b) => {
                format!("({} ? {} : {})", self.expr(c), self.expr(a), self.expr(b))
            }
            Expr::Cast(t, a) => format!("({t})({})", self.expr(a)),
            Expr::SearchGe { buf, lo, hi, key } => format!(
                "search_ge({}, {}, {}, {})",
                self.bufs[buf.0 as usize],
                self.expr(lo),
                self.expr(hi),
                self.expr(key)
            ),
            Expr::HashFind { table, key } => format!(
                "hash_find({}, {})",
                self.bufs[table.0 as usize],
                self.expr(key)
            ),
        }
    }

    /// An operand of an infix or prefix operator: parenthesised unless it is atomic.
    fn operand(&self, e: &Expr) -> String {
        match e {
            Expr::Binary(op, ..) if !matches!(op, BinOp::Min | BinOp::Max | BinOp::IeeeMul) => {
                format!("({})", self.expr(e))
            }
            Expr::Const(Scalar::I64(v)) if *v < 0 => format!("({v})"),
            Expr::Const(Scalar::F64(v)) if v.is_sign_negative() => {
                format!("({})", constant(&Scalar::F64(*v)))
            }
            _ => self.expr(e),
        }
    }
}

fn constant(s: &Scalar) -> String {
    match s {
        Scalar::F64(v) if v.is_nan() => "NAN".into(),
        Scalar::F64(v) if v.is_infinite() => if *v > 0.0 { "INFINITY" } else { "-INFINITY" }.into(),
        Scalar::F64(v) => format!("{v:?}"),
        // `limit(1.0, +ε)`, `limit(1.0, -ε)`, `limit(1.0, 0)`.
        Scalar::Limit(l) => {
            let eps = match l.eps {
                Eps::Minus => "-ε",
                Eps::Zero => "0",
                Eps::Plus => "+ε",
            };
            format!("limit({}, {eps})", constant(&Scalar::F64(l.val)))
        }
        s => s.to_string(),
    }
}

fn symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Min | BinOp::Max | BinOp::IeeeMul | BinOp::Math(_) => {
            unreachable!("printed as calls")
        }
    }
}

/// The operator of a printed `atomic a[i] op= v`.
fn atomic_op(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Mul => "*",
        BinOp::Min => "min",
        BinOp::Max => "max",
        BinOp::And => "&",
        BinOp::Or => "|",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::super::build as b;
    use super::super::{BufDecl, BufId, Kernel, Stmt, VarDecl, VarId};
    use crate::types::ElemType;

    #[test]
    fn prints_c_like_loops() {
        let k = Kernel {
            name: "sum".into(),
            bufs: vec![BufDecl {
                name: "x_val".into(),
                elem: ElemType::F64,
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
            body: vec![Stmt::For {
                var: VarId(0),
                start: b::int(0),
                stop: super::super::Expr::Len(BufId(0)),
                body: vec![b::assign(
                    VarId(1),
                    b::add(b::var(VarId(1)), b::load(BufId(0), b::var(VarId(0)))),
                )],
            }],
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        };
        let text = k.to_string();
        assert!(
            text.contains("for (i = 0; i < len(x_val); i++) {"),
            "{text}"
        );
        assert!(text.contains("s = s + x_val[i];"), "{text}");
    }

    #[test]
    fn prints_limit_points_as_calls() {
        let k = Kernel {
            name: "pts".into(),
            bufs: vec![],
            vars: vec![
                VarDecl {
                    name: "p".into(),
                    ty: ElemType::Limit,
                    cold: false,
                },
                VarDecl {
                    name: "x".into(),
                    ty: ElemType::F64,
                    cold: false,
                },
            ],
            body: vec![
                b::assign(VarId(0), b::limit(-1.5, 1)),
                b::assign(VarId(0), b::limit(f64::INFINITY, -1)),
                b::assign(VarId(0), b::limit(2.0, 0)),
                b::assign(
                    VarId(0),
                    b::after(b::make_limit(
                        b::add(b::limit_val(b::var(VarId(0))), b::var(VarId(1))),
                        b::limit_eps(b::before(b::var(VarId(0)))),
                    )),
                ),
            ],
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        };
        k.check().unwrap();
        let text = k.to_string();
        assert!(text.contains("  limit p;\n"), "{text}");
        assert!(text.contains("p = limit(-1.5, +ε);"), "{text}");
        assert!(text.contains("p = limit(INFINITY, -ε);"), "{text}");
        assert!(text.contains("p = limit(2.0, 0);"), "{text}");
        assert!(
            text.contains("p = after(make_limit(val(p) + x, eps(before(p))));"),
            "{text}"
        );
    }
}
