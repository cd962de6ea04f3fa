//! AVX-512 text for a loop over 8 lanes (`ir::lanes`' step of a slice's 8 rows): one
//! iteration of 512-bit vectors instead of a loop GCC vectorises itself.
//!
//! GCC 12 vectorises such a loop (`#pragma omp simd`), but builds each gather of `x[j]` from
//! 8 scalar loads (its tuning turns the gather instruction off) and splits the 8 lanes into
//! two 256-bit halves; the hand-written kernel with one masked gather a step ran SpMV on
//! sliced rows 1.5-2x faster (BENCHMARKS.md, "Sliced ELLPACK measured by hand"). The text
//! is emitted under `#if defined(__AVX512F__)`, the portable loop under `#else`, so a machine
//! without AVX-512 compiles the same kernel.
//!
//! Every operation is the IEEE one the scalar loop does, lane by lane (`+ - /`, the plain
//! product `IeeeMul`, ordered comparisons, selects, 64-bit integer `+ - & | ^ min max`,
//! products and truncating quotients by a power of two, `Bool -> I64`), so results are bit
//! for bit the loop's. A fold `v = min(v, e)` / `max` (I64) or `v = v | e` / `&` (Bool),
//! whose variable nothing else in the loop mentions, combines the 8 lanes' `e` into `v` at
//! once: those operations are associative and commutative, so the lanes' order does not
//! matter. Anything else (the strong-zero product, float `min`/`max`, other casts, calls,
//! loads of other element types, a check still inside the loop) gives `None` and the loop
//! stays as it was.

use super::emit::binary;
use crate::backend::versioning::walk_exprs;
use crate::ir::walk::loop_offset;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, UnOp, VarId, vector};
use crate::types::{ElemType, Scalar};
use std::collections::HashMap;

/// The lanes of the loop: its count is this many.
pub const LANES: i64 = 8;

/// A value in the vector code.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One per lane: `__m512d`.
    F64,
    /// One per lane: `__m512i`.
    I64,
    /// One bit per lane: `__mmask8`.
    Mask,
}

#[derive(Clone)]
enum Val {
    /// The same scalar C value in every lane, of this IR type.
    Uniform(String, ElemType),
    Lanes(String, Kind),
}

struct Text<'a> {
    k: &'a Kernel,
    var: VarId,
    temps: HashMap<VarId, Val>,
    /// Buffers read and written only at the lane (`b[var]`) kept in vector variables.
    registers: &'a HashMap<BufId, (String, Kind)>,
    lines: Vec<String>,
    n: usize,
    /// The lanes whose values the expression being translated can matter for (inside a
    /// select's branch: the lanes that select it), when not all.
    live: Option<String>,
    /// Lane values `u + lane` (their text) and their uniform `u`: `(u + lane) - lane` is `u`
    /// in every lane, which the folds over lanes then take as one scalar.
    offsets: HashMap<String, String>,
}

/// The vector text of `for (var = 0; var < 8; var++) body` (its lines, without indentation),
/// when every access of `body` is unchecked (`unchecked(buf, index)`) and every operation is
/// one this module translates; the loop's variable and temporaries end as the scalar loop
/// leaves them (its last iteration's values).
pub fn text(
    k: &Kernel,
    var: VarId,
    body: &[Stmt],
    unchecked: &dyn Fn(BufId, &Expr) -> bool,
) -> Option<Vec<String>> {
    text_with(k, var, body, unchecked, &HashMap::new())
}

/// [`text`], with the buffers of `registers` read and written in their vector variables.
fn text_with(
    k: &Kernel,
    var: VarId,
    body: &[Stmt],
    unchecked: &dyn Fn(BufId, &Expr) -> bool,
    registers: &HashMap<BufId, (String, Kind)>,
) -> Option<Vec<String>> {
    let mut checked = false;
    walk_exprs(body, &mut |e| {
        if let Expr::Load { buf, index } = e {
            checked |= !unchecked(*buf, index);
        }
    });
    for s in body {
        if let Stmt::Store { buf, index, .. } = s {
            checked |= !unchecked(*buf, index);
        }
    }
    if checked {
        return None;
    }
    let mut t = Text {
        k,
        var,
        temps: HashMap::new(),
        registers,
        lines: vec!["const __m512i lane_iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);".into()],
        n: 0,
        live: None,
        offsets: HashMap::from([("lane_iota".to_string(), "INT64_C(0)".to_string())]),
    };
    // Every variable the body assigns is a temporary: assigned before the iteration reads
    // it (a variable read before its assignment carries a value from one iteration to the
    // next, a reduction, which lanes would not keep), or a fold's.
    let folds: Vec<Option<(BinOp, &Expr)>> = body.iter().map(|s| fold(k, body, s)).collect();
    let mut assigned = std::collections::HashSet::new();
    for (s, f) in body.iter().zip(&folds) {
        if let (Stmt::Assign(v, _), None) = (s, f) {
            assigned.insert(*v);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (s, f) in body.iter().zip(&folds) {
        if f.is_some() {
            continue;
        }
        let mut carried = false;
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Var(w) = x {
                    carried |= assigned.contains(w) && !seen.contains(w);
                }
            });
        }
        if carried {
            return None;
        }
        if let Stmt::Assign(v, _) = s {
            seen.insert(*v);
        }
    }
    for (s, f) in body.iter().zip(&folds) {
        match s {
            Stmt::Assign(v, _) if let Some((op, e)) = f => {
                // The least (greatest) of 8 flags as integers: all (any) of them.
                let x = match e {
                    Expr::Cast(ElemType::I64, a) if k.type_of(a) == ElemType::Bool => {
                        match (t.expr(a)?, op) {
                            (Val::Lanes(m, Kind::Mask), BinOp::Min) => {
                                Val::Uniform(format!("((int64_t)({m} == 0xFF))"), ElemType::I64)
                            }
                            (Val::Lanes(m, Kind::Mask), BinOp::Max) => {
                                Val::Uniform(format!("((int64_t)({m} != 0))"), ElemType::I64)
                            }
                            _ => t.expr(e)?,
                        }
                    }
                    _ => t.expr(e)?,
                };
                let line = t.fold(*v, *op, x)?;
                t.lines.push(line);
            }
            Stmt::Comment(_) => {}
            Stmt::Assign(v, e) => {
                if *v == var
                    || !matches!(k.var_ty(*v), ElemType::F64 | ElemType::I64 | ElemType::Bool)
                {
                    return None;
                }
                let x = t.expr(e)?;
                let x = t.bind(x);
                t.temps.insert(*v, x);
            }
            Stmt::Store { buf, index, value } => t.store(*buf, index, value)?,
            _ => return None,
        }
    }
    // The scalar loop's last iteration's values.
    let mut last = vec![format!("v{} = INT64_C({LANES});", var.0)];
    let mut temps: Vec<(&VarId, &Val)> = t.temps.iter().collect();
    temps.sort_by_key(|(v, _)| **v);
    for (v, x) in temps {
        last.push(match x {
            Val::Uniform(s, _) => format!("v{} = {s};", v.0),
            Val::Lanes(s, Kind::F64) => format!(
                "v{} = _mm512_cvtsd_f64(_mm512_permutexvar_pd(_mm512_set1_epi64(7), {s}));",
                v.0
            ),
            Val::Lanes(s, Kind::I64) => format!(
                "v{} = _mm_extract_epi64(_mm512_extracti32x4_epi32({s}, 3), 1);",
                v.0
            ),
            Val::Lanes(s, Kind::Mask) => format!("v{} = (uint8_t)(({s} >> 7) & 1);", v.0),
        });
    }
    t.lines.extend(last);
    Some(t.lines)
}

/// `s` as a fold of the loop `body`: `v = op(v, e)` with `op` min or max on I64, `|` or `&`
/// on Bool, `e` not mentioning `v`, and no other statement of `body` mentioning `v`.
fn fold<'s>(k: &Kernel, body: &[Stmt], s: &'s Stmt) -> Option<(BinOp, &'s Expr)> {
    let Stmt::Assign(v, Expr::Binary(op, a, b)) = s else {
        return None;
    };
    let fits = matches!(
        (k.var_ty(*v), op),
        (ElemType::I64, BinOp::Min | BinOp::Max) | (ElemType::Bool, BinOp::Or | BinOp::And)
    );
    let e = match (&**a, &**b) {
        (Expr::Var(w), e) | (e, Expr::Var(w)) if w == v => e,
        _ => return None,
    };
    let alone = body
        .iter()
        .all(|t| std::ptr::eq(t, s) || !vector::stmt_mentions(t, *v));
    (fits && alone && !vector::expr_mentions(e, *v)).then_some((*op, e))
}

impl Text<'_> {
    /// The line of the fold `v = op(v, x)` over the lanes of `x`.
    fn fold(&self, v: VarId, op: BinOp, x: Val) -> Option<String> {
        let ty = self.k.var_ty(v);
        let me = format!("v{}", v.0);
        let all = match (x, ty, op) {
            (Val::Uniform(s, _), ..) => s,
            (Val::Lanes(s, Kind::I64), ElemType::I64, BinOp::Min) => {
                format!("_mm512_reduce_min_epi64({s})")
            }
            (Val::Lanes(s, Kind::I64), ElemType::I64, BinOp::Max) => {
                format!("_mm512_reduce_max_epi64({s})")
            }
            (Val::Lanes(s, Kind::Mask), ElemType::Bool, BinOp::Or) => format!("({s} != 0)"),
            (Val::Lanes(s, Kind::Mask), ElemType::Bool, BinOp::And) => {
                format!("({s} == 0xFF)")
            }
            _ => return None,
        };
        Some(format!("{me} = {};", binary(op, ty, &me, &all)))
    }

    /// `x op y` (I64) kept as, or reduced from, a lane value `u + lane` ([`Text::offsets`]).
    fn offset(&mut self, op: BinOp, x: &Val, y: &Val) -> Option<Val> {
        let of = |v: &Val| match v {
            Val::Lanes(s, Kind::I64) => self.offsets.get(s).cloned(),
            _ => None,
        };
        let (s, c) = match (op, x, y) {
            (BinOp::Sub, _, Val::Lanes(l, _)) if l == "lane_iota" => {
                return Some(Val::Uniform(of(x)?, ElemType::I64));
            }
            (BinOp::Add, Val::Lanes(s, _), Val::Uniform(c, _))
            | (BinOp::Add, Val::Uniform(c, _), Val::Lanes(s, _)) => (s, c),
            _ => return None,
        };
        let u = format!("t_add({}, {c})", of(&Val::Lanes(s.clone(), Kind::I64))?);
        let text = format!("_mm512_add_epi64({s}, _mm512_set1_epi64({c}))");
        self.offsets.insert(text.clone(), u);
        Some(Val::Lanes(text, Kind::I64))
    }

    /// `c ? x : y` of IR type `ty`.
    fn blend(&self, c: Val, x: Val, y: Val, ty: ElemType) -> Option<Val> {
        let kind = match ty {
            ElemType::F64 => Kind::F64,
            ElemType::I64 => Kind::I64,
            _ => return None,
        };
        let (x, y) = (lanes(x, kind)?, lanes(y, kind)?);
        let c = lanes(c, Kind::Mask)?;
        let f = if kind == Kind::F64 {
            "_mm512_mask_blend_pd"
        } else {
            "_mm512_mask_blend_epi64"
        };
        Some(Val::Lanes(format!("{f}({c}, {y}, {x})"), kind))
    }

    fn fresh(&mut self) -> String {
        self.n += 1;
        format!("lv{}", self.n)
    }

    /// A lane value in a `const` of its own (a temporary's, used more than once).
    fn bind(&mut self, x: Val) -> Val {
        match x {
            Val::Lanes(s, kind) => {
                let ty = match kind {
                    Kind::F64 => "__m512d",
                    Kind::I64 => "__m512i",
                    Kind::Mask => "__mmask8",
                };
                let name = self.fresh();
                self.lines.push(format!("const {ty} {name} = {s};"));
                if let Some(u) = self.offsets.get(&s).cloned() {
                    self.offsets.insert(name.clone(), u);
                }
                Val::Lanes(name, kind)
            }
            u => u,
        }
    }

    /// `buf + base` where `index` is `var + base`, `base` uniform.
    fn contiguous(&mut self, buf: BufId, index: &Expr) -> Option<String> {
        let (rest, c) = loop_offset(index, self.var)?;
        let base = match rest {
            None => format!("INT64_C({c})"),
            Some(w) if !self.temps.contains_key(&w) && w != self.var => {
                format!("(v{} + INT64_C({c}))", w.0)
            }
            Some(_) => return None,
        };
        Some(format!("(b{} + {base})", buf.0))
    }

    fn store(&mut self, buf: BufId, index: &Expr, value: &Expr) -> Option<()> {
        if let Some((r, kind)) = self.registers.get(&buf) {
            if *index != Expr::Var(self.var) {
                return None;
            }
            let v = self.expr(value)?;
            let line = format!("{r} = {};", lanes(v, *kind)?);
            self.lines.push(line);
            return Some(());
        }
        let at = self.contiguous(buf, index)?;
        let v = self.expr(value)?;
        let line = match self.k.buf_elem(buf) {
            ElemType::F64 => format!("_mm512_storeu_pd({at}, {});", lanes(v, Kind::F64)?),
            ElemType::I64 => format!(
                "_mm512_storeu_si512((void *){at}, {});",
                lanes(v, Kind::I64)?
            ),
            _ => return None,
        };
        self.lines.push(line);
        Some(())
    }

    fn expr(&mut self, e: &Expr) -> Option<Val> {
        match e {
            Expr::Const(s @ (Scalar::F64(_) | Scalar::I64(_) | Scalar::Bool(_))) => {
                Some(Val::Uniform(super::emit::c_const(*s), s.ty()))
            }
            Expr::Var(v) if *v == self.var => Some(Val::Lanes("lane_iota".into(), Kind::I64)),
            Expr::Var(v) => match self.temps.get(v) {
                Some(x) => Some(x.clone()),
                None => Some(Val::Uniform(format!("v{}", v.0), self.k.var_ty(*v))),
            },
            Expr::Len(b) => Some(Val::Uniform(format!("n{}", b.0), ElemType::I64)),
            Expr::Load { buf, index } => self.load(*buf, index),
            Expr::Binary(op, a, b) => {
                let ty = self.k.type_of(a);
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                if ty == ElemType::I64
                    && let Some(v) = by_power_of_two(*op, (&x, b), (&y, a))
                {
                    return Some(v);
                }
                if ty == ElemType::I64
                    && let Some(v) = self.offset(*op, &x, &y)
                {
                    return Some(v);
                }
                if let (Val::Uniform(x, _), Val::Uniform(y, _)) = (&x, &y) {
                    let out = if op_is_comparison(*op) {
                        ElemType::Bool
                    } else {
                        ty
                    };
                    return Some(Val::Uniform(binary(*op, ty, x, y), out));
                }
                vector_binary(*op, ty, x, y)
            }
            Expr::Select(c, a, b) => {
                let c = self.expr(c)?;
                // Each branch matters only in the lanes that take it: its gathers load those
                // lanes only. Besides skipping loads, a masked gather into zeros starts a new
                // value each step, where a full gather merges into its destination register
                // (the previous step's product there) and so waits for it.
                match c {
                    Val::Lanes(m, Kind::Mask) => {
                        let Val::Lanes(m, _) = self.bind(Val::Lanes(m, Kind::Mask)) else {
                            return None;
                        };
                        let outer = self.live.clone();
                        let within = |m: String| match &outer {
                            Some(o) => format!("((__mmask8)({o} & {m}))"),
                            None => m,
                        };
                        self.live = Some(within(m.clone()));
                        let x = self.expr(a);
                        self.live = Some(within(format!("((__mmask8)~{m})")));
                        let y = self.expr(b);
                        self.live = outer;
                        let c = Val::Lanes(m, Kind::Mask);
                        self.blend(c, x?, y?, self.k.type_of(a))
                    }
                    c => {
                        let (x, y) = (self.expr(a)?, self.expr(b)?);
                        self.blend(c, x, y, self.k.type_of(a))
                    }
                }
            }
            Expr::Cast(ElemType::I64, a) if self.k.type_of(a) == ElemType::I64 => self.expr(a),
            Expr::Cast(ElemType::I64, a) if self.k.type_of(a) == ElemType::Bool => {
                match self.expr(a)? {
                    Val::Uniform(x, _) => {
                        Some(Val::Uniform(format!("((int64_t)({x}))"), ElemType::I64))
                    }
                    x => Some(Val::Lanes(
                        format!("_mm512_maskz_set1_epi64({}, 1)", lanes(x, Kind::Mask)?),
                        Kind::I64,
                    )),
                }
            }
            Expr::Unary(UnOp::Not, a) if self.k.type_of(a) == ElemType::Bool => {
                match self.expr(a)? {
                    Val::Uniform(x, t) => Some(Val::Uniform(format!("({x} ^ 1)"), t)),
                    x => Some(Val::Lanes(
                        format!("((__mmask8)~{})", lanes(x, Kind::Mask)?),
                        Kind::Mask,
                    )),
                }
            }
            _ => None,
        }
    }

    fn load(&mut self, buf: BufId, index: &Expr) -> Option<Val> {
        if let Some((r, kind)) = self.registers.get(&buf) {
            return (*index == Expr::Var(self.var)).then(|| Val::Lanes(r.clone(), *kind));
        }
        let elem = self.k.buf_elem(buf);
        if let Some(at) = self.contiguous(buf, index) {
            let x = match elem {
                ElemType::F64 => (format!("_mm512_loadu_pd({at})"), Kind::F64),
                ElemType::I64 => (format!("_mm512_loadu_si512((const void *){at})"), Kind::I64),
                ElemType::I32 => (
                    format!("_mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *){at}))"),
                    Kind::I64,
                ),
                _ => return None,
            };
            return Some(Val::Lanes(x.0, x.1));
        }
        let i = self.expr(index)?;
        let Val::Lanes(i, Kind::I64) = i else {
            return None;
        };
        let b = buf.0;
        // i32 elements come as 8 of 32 bits, widened to the lanes' 64.
        let (suffix, zero, scale) = match elem {
            ElemType::F64 => ("pd", "_mm512_setzero_pd()", 8),
            ElemType::I64 => ("epi64", "_mm512_setzero_si512()", 8),
            ElemType::I32 => ("epi32", "_mm256_setzero_si256()", 4),
            _ => return None,
        };
        let gather = match &self.live {
            None => format!("_mm512_i64gather_{suffix}({i}, (const void *)b{b}, {scale})"),
            Some(m) => format!(
                "_mm512_mask_i64gather_{suffix}({zero}, {m}, {i}, (const void *)b{b}, {scale})"
            ),
        };
        let x = match elem {
            ElemType::F64 => (gather, Kind::F64),
            ElemType::I32 => (format!("_mm512_cvtepi32_epi64({gather})"), Kind::I64),
            _ => (gather, Kind::I64),
        };
        Some(Val::Lanes(x.0, x.1))
    }
}

/// `x * 2^s` or `x / 2^s` (`x` in lanes, `b` the constant; `y * a` the same the other way
/// round) as shifts: the wrapping product is the left shift; the quotient truncated toward
/// zero is the arithmetic right shift of `x` plus `2^s - 1` when `x` is negative.
fn by_power_of_two(op: BinOp, (x, b): (&Val, &Expr), (y, a): (&Val, &Expr)) -> Option<Val> {
    let shift = |e: &Expr| match e {
        Expr::Const(Scalar::I64(c)) if *c > 0 && (*c as u64).is_power_of_two() => {
            Some(c.trailing_zeros())
        }
        _ => None,
    };
    match (op, x, shift(b), y, shift(a)) {
        (BinOp::Mul, Val::Lanes(x, Kind::I64), Some(s), ..)
        | (BinOp::Mul, _, _, Val::Lanes(x, Kind::I64), Some(s)) => Some(Val::Lanes(
            format!("_mm512_slli_epi64({x}, {s})"),
            Kind::I64,
        )),
        (BinOp::Div, Val::Lanes(x, Kind::I64), Some(0), ..) => {
            Some(Val::Lanes(x.clone(), Kind::I64))
        }
        (BinOp::Div, Val::Lanes(x, Kind::I64), Some(s), ..) => Some(Val::Lanes(
            format!(
                "_mm512_srai_epi64(_mm512_add_epi64({x}, _mm512_srli_epi64(_mm512_srai_epi64({x}, 63), {})), {s})",
                64 - s
            ),
            Kind::I64,
        )),
        _ => None,
    }
}

fn op_is_comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
}

/// `x` as lanes of `kind` (a uniform value broadcast).
fn lanes(x: Val, kind: Kind) -> Option<String> {
    match (x, kind) {
        (Val::Lanes(s, k), _) if k == kind => Some(s),
        (Val::Lanes(..), _) => None,
        (Val::Uniform(s, ElemType::F64), Kind::F64) => Some(format!("_mm512_set1_pd({s})")),
        (Val::Uniform(s, ElemType::I64), Kind::I64) => Some(format!("_mm512_set1_epi64({s})")),
        (Val::Uniform(s, ElemType::Bool), Kind::Mask) => {
            Some(format!("((__mmask8)({s} ? 0xFF : 0))"))
        }
        _ => None,
    }
}

/// A binary operation with at least one operand in lanes, operands of IR type `ty`.
fn vector_binary(op: BinOp, ty: ElemType, x: Val, y: Val) -> Option<Val> {
    use BinOp::*;
    match ty {
        ElemType::F64 => {
            let (a, b) = (lanes(x, Kind::F64)?, lanes(y, Kind::F64)?);
            let arith = |f: &str| Some(Val::Lanes(format!("{f}({a}, {b})"), Kind::F64));
            let cmp = |p: &str| {
                Some(Val::Lanes(
                    format!("_mm512_cmp_pd_mask({a}, {b}, {p})"),
                    Kind::Mask,
                ))
            };
            match op {
                Add => arith("_mm512_add_pd"),
                Sub => arith("_mm512_sub_pd"),
                IeeeMul => arith("_mm512_mul_pd"),
                Div => arith("_mm512_div_pd"),
                // Ordered, as C's comparisons; `!=` is true on NaN.
                Lt => cmp("_CMP_LT_OQ"),
                Le => cmp("_CMP_LE_OQ"),
                Gt => cmp("_CMP_GT_OQ"),
                Ge => cmp("_CMP_GE_OQ"),
                Eq => cmp("_CMP_EQ_OQ"),
                Ne => cmp("_CMP_NEQ_UQ"),
                _ => None,
            }
        }
        ElemType::I64 => {
            let (a, b) = (lanes(x, Kind::I64)?, lanes(y, Kind::I64)?);
            let arith = |f: &str| Some(Val::Lanes(format!("{f}({a}, {b})"), Kind::I64));
            let cmp = |p: &str| {
                Some(Val::Lanes(
                    format!("_mm512_cmp_epi64_mask({a}, {b}, {p})"),
                    Kind::Mask,
                ))
            };
            match op {
                Add => arith("_mm512_add_epi64"),
                Sub => arith("_mm512_sub_epi64"),
                And => arith("_mm512_and_si512"),
                Or => arith("_mm512_or_si512"),
                Xor => arith("_mm512_xor_si512"),
                Min => arith("_mm512_min_epi64"),
                Max => arith("_mm512_max_epi64"),
                Lt => cmp("_MM_CMPINT_LT"),
                Le => cmp("_MM_CMPINT_LE"),
                Gt => cmp("_MM_CMPINT_NLE"),
                Ge => cmp("_MM_CMPINT_NLT"),
                Eq => cmp("_MM_CMPINT_EQ"),
                Ne => cmp("_MM_CMPINT_NE"),
                _ => None,
            }
        }
        ElemType::Bool => {
            let (a, b) = (lanes(x, Kind::Mask)?, lanes(y, Kind::Mask)?);
            let o = match op {
                And => "&",
                Or => "|",
                Xor => "^",
                _ => return None,
            };
            Some(Val::Lanes(format!("((__mmask8)({a} {o} {b}))"), Kind::Mask))
        }
        _ => None,
    }
}

/// A loop over a group's steps (`ir::lanes`): `for k { at = first + 8 * k; for lane in 0..8
/// { body } }`, `lane` vectorised. Its text keeps the lane arrays (the kernel's own buffers,
/// accessed only at `lane`) in vector variables through all steps, where the lane loop
/// alone would load and store them each step (a store-to-load round trip in the chain of
/// every row's sum).
pub struct Steps<'a> {
    pub at: VarId,
    pub first: VarId,
    pub lane: VarId,
    pub body: &'a [Stmt],
    /// `(buffer, c)` of every load `buffer[at + lane + c]`: the test before the loop is
    /// that every step's 8 elements lie inside.
    pub contiguous: Vec<(BufId, i64)>,
    /// The lane arrays.
    pub registers: Vec<BufId>,
    /// `(coordinates, gathered)`: gathers `gathered[j]` of coordinates `j` loaded from a
    /// buffer the caller vouches for (the test: the bound is positive and at most the
    /// gathered buffer's length).
    pub gathers: Vec<(BufId, BufId)>,
}

/// The loop `for var { body }` as [`Steps`], when it is of that shape.
pub fn steps<'b>(k: &Kernel, var: VarId, body: &'b [Stmt]) -> Option<Steps<'b>> {
    let real: Vec<&Stmt> = body
        .iter()
        .filter(|s| !matches!(s, Stmt::Comment(_)))
        .collect();
    let [
        Stmt::Assign(at, step),
        Stmt::For {
            var: lane,
            start,
            stop,
            body: inner,
        },
    ] = real[..]
    else {
        return None;
    };
    let first = match step {
        Expr::Binary(BinOp::Add, f, m) => match (&**f, &**m) {
            (Expr::Var(first), Expr::Binary(BinOp::Mul, eight, kv))
                if **eight == Expr::Const(Scalar::I64(LANES)) && **kv == Expr::Var(var) =>
            {
                *first
            }
            _ => return None,
        },
        _ => return None,
    };
    if !k.vectorized.contains(lane)
        || *start != Expr::Const(Scalar::I64(0))
        || *stop != Expr::Const(Scalar::I64(LANES))
        || [*at, var].contains(&first)
    {
        return None;
    }
    let modified = k.modified_bufs();
    let mut contiguous = vec![];
    let mut registers = vec![];
    let mut other = vec![];
    let mut coords: HashMap<VarId, BufId> = HashMap::new();
    let mut gathers = vec![];
    let mut fine = true;
    let mut note = |buf: BufId, index: &Expr, coords: &HashMap<VarId, BufId>| {
        if *index == Expr::Var(*lane) && k.bufs[buf.0 as usize].tensor.is_none() {
            if !registers.contains(&buf) {
                registers.push(buf);
            }
        } else if let Some((Some(w), c)) = loop_offset(index, *lane)
            && w == *at
            && c >= 0
        {
            contiguous.push((buf, c));
            other.push(buf);
        } else if let Expr::Var(j) = index
            && let Some(crd) = coords.get(j)
        {
            gathers.push((*crd, buf));
            other.push(buf);
        } else {
            fine = false;
        }
    };
    for s in inner {
        match s {
            Stmt::Comment(_) => {}
            Stmt::Assign(v, e) => {
                e.visit(&mut |x| {
                    if let Expr::Load { buf, index } = x {
                        note(*buf, index, &coords);
                    }
                });
                coords.remove(v);
                if let Expr::Load { buf, index } = e
                    && matches!(loop_offset(index, *lane), Some((Some(w), _)) if w == *at)
                    && !modified[buf.0 as usize]
                {
                    coords.insert(*v, *buf);
                }
            }
            Stmt::Store { buf, index, value } => {
                value.visit(&mut |x| {
                    if let Expr::Load { buf, index } = x {
                        note(*buf, index, &coords);
                    }
                });
                let mut loads = false;
                index.visit(&mut |x| loads |= matches!(x, Expr::Load { .. }));
                if loads {
                    return None;
                }
                note(*buf, index, &coords);
            }
            _ => return None,
        }
    }
    // A lane array must be nothing else the loop reads (it is the kernel's own, so no tensor
    // shares it; this keeps two lane arrays from being one).
    if !fine || registers.iter().any(|r| other.contains(r)) {
        return None;
    }
    Some(Steps {
        at: *at,
        first,
        lane: *lane,
        body: inner,
        contiguous,
        registers,
        gathers,
    })
}

impl Steps<'_> {
    /// The lines of the loop `for (v{k} = s; v{k} < e; ...)` with the lane arrays in vector
    /// variables, to run where [`Steps`]' tests hold; `None` when the body has an operation
    /// [`text`] does not translate.
    pub fn text(&self, k: &Kernel, var: VarId, (s, e): (&str, &str)) -> Option<Vec<String>> {
        let mut registers = HashMap::new();
        let mut before = vec![];
        let mut after = vec![];
        for b in &self.registers {
            let name = format!("lr{}", b.0);
            let kind = match k.buf_elem(*b) {
                ElemType::F64 => {
                    before.push(format!("__m512d {name} = _mm512_loadu_pd(b{});", b.0));
                    after.push(format!("_mm512_storeu_pd(b{}, {name});", b.0));
                    Kind::F64
                }
                ElemType::I64 => {
                    before.push(format!(
                        "__m512i {name} = _mm512_loadu_si512((const void *)b{});",
                        b.0
                    ));
                    after.push(format!("_mm512_storeu_si512((void *)b{}, {name});", b.0));
                    Kind::I64
                }
                _ => return None,
            };
            registers.insert(*b, (name, kind));
        }
        let body = text_with(k, self.lane, self.body, &|_, _| true, &registers)?;
        let mut out = before;
        out.push(format!("for (v{0} = {s}; v{0} < {e}; v{0}++) {{", var.0));
        out.push(format!(
            "    v{} = t_add(v{}, t_mul(INT64_C({LANES}), v{}));",
            self.at.0, self.first.0, var.0
        ));
        out.push("    {".into());
        out.extend(body.into_iter().map(|l| format!("        {l}")));
        out.push("    }".into());
        out.push("}".into());
        out.extend(after);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::ir::{BufDecl, VarDecl};

    /// Buffers `x` (f64) and `idx` (i64); variables `l` (the lane), `s` (f64), `j` (i64).
    fn kernel() -> Kernel {
        let buf = |n: &str, elem| BufDecl {
            name: n.into(),
            elem,
            growable: false,
            tensor: None,
            scratch: false,
        };
        let var = |n: &str, ty| VarDecl {
            name: n.into(),
            ty,
            cold: false,
        };
        Kernel {
            name: "k".into(),
            bufs: vec![buf("x", ElemType::F64), buf("idx", ElemType::I64)],
            vars: vec![
                var("l", ElemType::I64),
                var("s", ElemType::F64),
                var("j", ElemType::I64),
            ],
            body: vec![],
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![VarId(0)],
        }
    }

    const X: BufId = BufId(0);
    const IDX: BufId = BufId(1);
    const L: VarId = VarId(0);
    const S: VarId = VarId(1);
    const J: VarId = VarId(2);

    #[test]
    fn a_gather_and_a_masked_update_become_vector_text() {
        let k = kernel();
        let body = vec![
            b::assign(J, b::load(IDX, b::var(L))),
            b::store(
                X,
                b::var(L),
                b::select(
                    b::lt(b::var(J), b::int(3)),
                    b::bin(BinOp::IeeeMul, b::load(X, b::var(J)), b::var(S)),
                    b::load(X, b::var(L)),
                ),
            ),
        ];
        let text = text(&k, L, &body, &|_, _| true)
            .expect("translated")
            .join("\n");
        for part in [
            // Under the select's condition: only the lanes taking the product load.
            "_mm512_mask_i64gather_pd(_mm512_setzero_pd(), lv2, lv1, ",
            "_mm512_mask_blend_pd(lv2, ",
            "_mm512_set1_pd(v1)",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }

    #[test]
    fn folds_become_one_reduction_and_lane_offsets_one_scalar() {
        let mut k = kernel();
        let var = |k: &mut Kernel, n: &str, ty| {
            k.vars.push(VarDecl {
                name: n.into(),
                ty,
                cold: false,
            });
            VarId(k.vars.len() as u32 - 1)
        };
        let (most, low, any, q, ok) = (
            var(&mut k, "most", ElemType::I64),
            var(&mut k, "low", ElemType::I64),
            var(&mut k, "any", ElemType::Bool),
            var(&mut k, "q", ElemType::I64),
            var(&mut k, "ok", ElemType::Bool),
        );
        let body = vec![
            // `q = j + l`, so `q - l` is `j` in every lane.
            b::assign(q, b::add(b::var(J), b::var(L))),
            b::assign(
                ok,
                b::lt(
                    b::int(0),
                    b::bin(BinOp::Div, b::load(IDX, b::var(L)), b::int(8)),
                ),
            ),
            b::assign(
                most,
                b::max(b::var(most), b::mul(b::int(4), b::load(IDX, b::var(L)))),
            ),
            b::assign(low, b::min(b::var(low), b::sub(b::var(q), b::var(L)))),
            b::assign(any, b::or(b::var(any), b::var(ok))),
            b::assign(
                most,
                b::max(b::var(most), b::cast(ElemType::I64, b::var(ok))),
            ),
        ];
        // `most` is assigned twice: not a fold, so a value carried between lanes.
        assert!(text(&k, L, &body, &|_, _| true).is_none());
        let body = body[..5].to_vec();
        let text = text(&k, L, &body, &|_, _| true)
            .expect("translated")
            .join("\n");
        for part in [
            "v3 = t_maxi(v3, _mm512_reduce_max_epi64(_mm512_slli_epi64(",
            // The scalar `q - l`, not a reduction.
            "v4 = t_mini(v4, t_add(INT64_C(0), v2));",
            "v5 = (v5 | (lv2 != 0));",
            // Truncating division by 8: negative quotients rounded toward zero.
            "_mm512_srai_epi64(_mm512_add_epi64(",
            // A flag's last lane.
            "v7 = (uint8_t)((lv2 >> 7) & 1);",
        ] {
            assert!(text.contains(part), "no `{part}` in\n{text}");
        }
    }

    #[test]
    fn a_reduction_a_checked_access_or_a_strong_product_stays_a_loop() {
        let k = kernel();
        // `s` carried from one iteration to the next.
        let sum = vec![b::assign(S, b::add(b::var(S), b::load(X, b::var(L))))];
        assert!(text(&k, L, &sum, &|_, _| true).is_none());
        // A read before the assignment in the same iteration is the same.
        let before = vec![
            b::store(X, b::var(L), b::var(S)),
            b::assign(S, b::load(X, b::var(L))),
        ];
        assert!(text(&k, L, &before, &|_, _| true).is_none());
        // An access still checked here.
        let store = vec![b::store(X, b::var(L), b::var(S))];
        assert!(text(&k, L, &store, &|_, _| false).is_none());
        assert!(text(&k, L, &store, &|_, _| true).is_some());
        // The strong-zero product has no one-instruction lane form.
        let strong = vec![b::store(
            X,
            b::var(L),
            b::mul(b::load(X, b::var(L)), b::var(S)),
        )];
        assert!(text(&k, L, &strong, &|_, _| true).is_none());
    }
}
