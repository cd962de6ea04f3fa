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
//! product `IeeeMul`, ordered comparisons, selects, 64-bit integer `+ - & | ^`), so results
//! are bit for bit the loop's. Anything else (the strong-zero product, `min`/`max`, casts,
//! calls, loads of other element types, a check still inside the loop) gives `None` and the
//! loop stays as it was.

use super::emit::binary;
use crate::backend::versioning::walk_exprs;
use crate::ir::walk::loop_offset;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, UnOp, VarId};
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
    };
    // Every variable the body assigns is a temporary: assigned before the iteration reads
    // it (a variable read before its assignment carries a value from one iteration to the
    // next, a reduction, which lanes would not keep).
    let mut assigned = std::collections::HashSet::new();
    for s in body {
        if let Stmt::Assign(v, _) = s {
            assigned.insert(*v);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for s in body {
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
    for s in body {
        match s {
            Stmt::Comment(_) => {}
            Stmt::Assign(v, e) => {
                if *v == var || !matches!(k.var_ty(*v), ElemType::F64 | ElemType::I64) {
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
            Val::Lanes(_, Kind::Mask) => return None,
        });
    }
    t.lines.extend(last);
    Some(t.lines)
}

impl Text<'_> {
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
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                let ty = self.k.type_of(a);
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
        let x = match elem {
            ElemType::F64 => (
                format!("_mm512_i64gather_pd({i}, (const void *)b{b}, 8)"),
                Kind::F64,
            ),
            ElemType::I64 => (
                format!("_mm512_i64gather_epi64({i}, (const void *)b{b}, 8)"),
                Kind::I64,
            ),
            ElemType::I32 => (
                format!(
                    "_mm512_cvtepi32_epi64(_mm512_i64gather_epi32({i}, (const void *)b{b}, 4))"
                ),
                Kind::I64,
            ),
            _ => return None,
        };
        Some(Val::Lanes(x.0, x.1))
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
            "_mm512_i64gather_pd",
            "_mm512_mask_blend_pd",
            "_mm512_set1_pd(v1)",
        ] {
            assert!(text.contains(part), "{text}");
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
