//! Loop IR → C source.
//!
//! The generated function has the native kernel signature of `runtime::abi` (`views`, `state`,
//! `fault` → status code), so it runs through the same `run_native` boundary as the JIT and
//! returns the same status codes (`backend::native_fault`). The runtime helpers (grow, sorts,
//! hash lookup, exp/log/fmod) reach it as a table of function pointers that the loader hands
//! to the exported `tessera_init` once, because a shared object cannot link against the
//! executable's symbols.
//!
//! The C avoids undefined behaviour: wrapping integer arithmetic goes through `uint64_t`,
//! division, remainder, shifts and float→int casts through helpers that define every input,
//! and every buffer access is checked against the buffer's length exactly where the JIT checks
//! it. Sub-expressions that can fail (loads, searches) are hoisted into statements in the
//! interpreter's evaluation order, so the first failing access is the same on every backend.
//!
//! For speed, an innermost counted loop whose accesses `buf[i + c]` or `buf[w + i + c]` (`w` a
//! variable the loop does not assign, such as a row's start `y * width`) can be proven in range
//! from the loop bounds alone, or gather through checked coordinates (`x[j]`, `j` from a
//! matrix's vouched-for column indices), is emitted twice (`backend::versioning`): a copy
//! without those checks, taken when one test before the loop shows every access is inside its
//! buffer, and the checked copy otherwise (so a corrupt input still fails at the same access
//! with the same buffers).
//!
//! A `Limit` point is a `__int128` holding its order key (`backend::limit_code`), as in the
//! JIT, so comparisons are C's integer comparisons.

use super::{lanes, parts, prefetch, unroll};
use crate::backend::GROW_BASE;
use crate::backend::limit_code;
use crate::backend::versioning::{self, Access, At, Gathers, walk_exprs, walk_stmts};
use crate::backend::walked;
use crate::ir::walk;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, UnOp, VarId, vector};
use crate::types::{ElemType, Scalar};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

/// The fixed part of every kernel: the view and helper layouts and the arithmetic helpers.
const PRELUDE: &str = r#"#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__SSE2__)
#include <immintrin.h>
#endif

/* Must match runtime::abi::View. */
typedef struct { void *ptr; int64_t len; } tessera_view;
/* Must match backend::c::Helpers. */
typedef struct {
    int64_t (*grow)(void *, int64_t, int64_t);
    int64_t (*sort)(void *, int64_t, int64_t, int64_t);
    int64_t (*sort_perm)(void *, int64_t, int64_t, int64_t, int64_t, int64_t *);
    int64_t (*sort_slots)(void *, int64_t, int64_t, int64_t, int64_t, int64_t *);
    int64_t (*hash_find)(void *, int64_t, int64_t);
    double (*fmod)(double, double);
    double (*math1[19])(double); /* ir::math::Math1::ALL, in order */
    double (*math2[8])(double, double); /* ir::math::Math2::ALL */
} tessera_helpers;

static tessera_helpers H;

__attribute__((visibility("default"))) void tessera_init(const tessera_helpers *h) { H = *h; }

/* A fault exit is taken at most once per call. Plain __builtin_expect counts it as 10%
   likely: after the ~90 checks of a split kernel's prologue GCC judged the loops below cold
   and did not vectorise them (9x slower). */
#define LIKELY(c) __builtin_expect_with_probability(!!(c), 1, 0.9999)
#define UNLIKELY(c) __builtin_expect_with_probability(!!(c), 0, 0.9999)

static inline int64_t t_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t t_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t t_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t t_neg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
static inline int64_t t_abs(int64_t a) { return a < 0 ? t_neg(a) : a; }
static inline int64_t t_div(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? t_neg(a) : a / b; }
static inline int64_t t_rem(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
static inline int64_t t_shl(int64_t a, int64_t b) { return (int64_t)((uint64_t)a << (b & 63)); }
static inline int64_t t_shr(int64_t a, int64_t b) { return a >> (b & 63); }
/* `a + b + c >= 0` and `a + b + c <= n`, false when a sum overflows (loop versioning's
   range tests: a false test only sends the loop to its checked copy). */
static inline int t_sum_ge0(int64_t a, int64_t b, int64_t c) {
    int64_t r;
    return !__builtin_add_overflow(a, b, &r) && !__builtin_add_overflow(r, c, &r) && r >= 0;
}
static inline int t_sum_le(int64_t a, int64_t b, int64_t c, int64_t n) {
    int64_t r;
    return !__builtin_add_overflow(a, b, &r) && !__builtin_add_overflow(r, c, &r) && r <= n;
}
static inline int64_t t_mini(int64_t a, int64_t b) { return b < a ? b : a; }
static inline int64_t t_maxi(int64_t a, int64_t b) { return b > a ? b : a; }
/* IEEE 754-2019 minimum/maximum (the IR's F64 Min/Max): NaN from either side, -0.0 below 0.0
   (equal operands: their sign bits or-ed for min, and-ed for max). */
static inline uint64_t t_f2u(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
static inline double t_u2f(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
static inline double t_minf(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return t_u2f(t_f2u(a) | t_f2u(b));
    return b < a ? b : a;
}
static inline double t_maxf(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return t_u2f(t_f2u(a) & t_f2u(b));
    return b > a ? b : a;
}
/* The IR's F64 Mul: a zero factor gives +0.0 even against NaN, an infinity or a negative
   factor (only a NaN or zero product can differ from IEEE, so that is tested first, with
   one comparison: `p < 0.0 || p > 0.0` compiles to a branch on the product's sign, which
   random data mispredicts half the time). */
static inline double t_mulf(double a, double b) {
    double p = a * b;
    if (UNLIKELY(!(__builtin_fabs(p) > 0.0)) && (a == 0.0 || b == 0.0)) return 0.0;
    return p;
}
/* The same product as a select, for elementwise loops: no branch, so GCC can vectorise
   the loop (a branch in the body stops it); in a chain of dependent updates the extra
   comparisons cost more than the well-predicted branch, so only there. */
static inline double t_mulz(double a, double b) {
    double p = a * b;
    return ((a == 0.0) | (b == 0.0)) ? 0.0 : p;
}
/* The same where `a` (`t_mulza`) or `b` (`t_mulzb`) is the same in every iteration (a
   factor computed before the loop): its zero test becomes a mask, computed once and and-ed
   with the select of the other factor's test. GCC vectorised `t_mulz`'s two tests as a
   compare under a mask built per loop entry from the invariant's test, some thirty scalar
   instructions before each run of a short loop (SubdivNet's rows of 64: its forward took
   4.8 ms, 3.3 with this form). Same values: a zero invariant gives +0.0 (the mask clears
   every bit), a zero other factor +0.0 (the select), IEEE's product otherwise. */
static inline double t_mulza(double a, double b) {
    double p = (b == 0.0) ? 0.0 : a * b;
    return t_u2f(t_f2u(p) & ((uint64_t)0 - (uint64_t)(a != 0.0)));
}
static inline double t_mulzb(double a, double b) {
    double p = (a == 0.0) ? 0.0 : a * b;
    return t_u2f(t_f2u(p) & ((uint64_t)0 - (uint64_t)(b != 0.0)));
}
/* The product in a loop GCC leaves scalar where `a` is the same in every iteration (a row of
   B scaled by one entry of A in a sparse product): `t_mulf`'s branch mispredicts wherever
   zeros are stored among the values (bayer10's explicit zeros: a quarter of them), and the
   mask of `t_mulza` costs two moves between vector and integer registers a product. In SSE
   registers throughout instead: the factors' nonzero tests and-ed into a mask of the
   product (the invariant's test done once). A zero factor gives +0.0 (the mask clears every
   bit), IEEE's product otherwise (NaN != 0 holds), as `t_mulf`. */
#if defined(__SSE2__)
static inline double t_mulzs(double a, double b) {
    __m128d va = _mm_set_sd(a), vb = _mm_set_sd(b), z = _mm_setzero_pd();
    __m128d m = _mm_and_pd(_mm_cmpneq_sd(va, z), _mm_cmpneq_sd(vb, z));
    return _mm_cvtsd_f64(_mm_and_pd(_mm_mul_sd(va, vb), m));
}
#else
static inline double t_mulzs(double a, double b) { return t_mulf(a, b); }
#endif
/* A float select without a branch, for selects between two values at hand
   (`ifelse(x >= 0.0, g, -g)`, the derivative of `abs`): GCC compiles `c ? a : b` of
   doubles to a branch on `c`, which data decide and random data mispredict half the time. */
static inline double t_self(int c, double a, double b) {
    uint64_t ua, ub, m = (uint64_t)0 - (uint64_t)(c != 0);
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    uint64_t r = (ua & m) | (ub & ~m);
    double d;
    memcpy(&d, &r, sizeof d);
    return d;
}
/* Saturating, NaN to 0 (the IR's F64 -> I64 cast). */
static inline int64_t t_f2i(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}
static inline double t_bits(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
/* Points (the IR's Limit): the key ordkey(bits(val)) * 4 + (eps + 1) of backend::limit_code.
   Only defined behaviour: the multiply cannot overflow, unsigned-to-signed conversion and
   right shifts of negative values are GCC's modulo and arithmetic ones. */
typedef __int128 t_limit;
static inline int64_t t_ordkey(uint64_t b) { return (int64_t)(b ^ ((uint64_t)((int64_t)b >> 63) >> 1)); }
static inline t_limit t_lim_key(uint64_t hi, uint64_t lo) {
    return (t_limit)(((unsigned __int128)hi << 64) | lo);
}
static inline t_limit t_make_limit(double v, int64_t e) {
    uint64_t b = t_f2u(v);
    if (v != v) b = UINT64_C(0x7ff8000000000000); /* the canonical NaN */
    else if (b == UINT64_C(0x8000000000000000)) b = 0; /* -0.0 is +0.0 */
    return (t_limit)t_ordkey(b) * 4 + (e < 0 ? 0 : e > 0 ? 2 : 1);
}
static inline double t_lim_val(t_limit k) { return t_u2f((uint64_t)t_ordkey((uint64_t)(int64_t)(k >> 2))); }
static inline int64_t t_lim_eps(t_limit k) { return (int64_t)(k & 3) - 1; }
static inline t_limit t_after(t_limit k) { return k + ((k & 3) != 2); }
static inline t_limit t_before(t_limit k) { return k - ((k & 3) != 0); }
static inline t_limit t_minl(t_limit a, t_limit b) { return b < a ? b : a; }
static inline t_limit t_maxl(t_limit a, t_limit b) { return b > a ? b : a; }
"#;

/// How a kernel is printed, beyond its IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Software prefetches of gathered operands (off unless asked for: see `prefetch`).
    pub prefetch: prefetch::Config,
    /// Large kernels as several functions (`parts`).
    pub parts: parts::Config,
    /// Iterations per unrolled step of a scatter loop (`unroll`; 0 and 1: none).
    pub unroll: u32,
}

impl Options {
    /// Each from its module's defaults or the environment variables they read.
    pub fn from_env() -> Options {
        Options {
            prefetch: prefetch::Config::from_env(),
            parts: parts::Config::from_env(),
            unroll: unroll::factor_from_env(),
        }
    }
}

/// The C source of a kernel.
pub fn emit(k: &Kernel, options: &Options) -> String {
    let local = local_buffers(k);
    let one = emit_with(k, options, &local);
    match one {
        Ok(text) => text,
        // Cut into parts, each re-reads the buffers from the views: none is a local array.
        Err(()) => emit_with(k, options, &BTreeMap::new()).unwrap_or_default(),
    }
}

/// Scratch buffers grown only to constant lengths of at most this many elements are arrays
/// on the C stack instead (see [`local_buffers`]).
const LOCAL_ELEMENTS: i64 = 64;

/// The scratch buffers (`BufDecl::scratch`) that live in local arrays, and each one's
/// length: those only ever grown to constant lengths of at most [`LOCAL_ELEMENTS`] and not
/// sorted or hashed by a helper (`ir::lanes`' lane arrays). Aligned to 64 bytes, a lane
/// array's vector store and the load that follows never cross a cache line (a store split
/// across two lines is not forwarded to the load; the runtime's 8-element allocations are
/// only 16-byte aligned), and a grow is a comparison rather than a call: SpMV on cryg10000's
/// sliced rows 0.024 -> 0.022 ms (BENCHMARKS.md, "Slice lanes, second pass").
fn local_buffers(k: &Kernel) -> BTreeMap<u32, i64> {
    let mut len: BTreeMap<u32, i64> = BTreeMap::new();
    let mut refused: HashSet<u32> = HashSet::new();
    walk_stmts(&k.body, &mut |s| {
        if let Stmt::Grow { buf, len: want } = s {
            match want {
                Expr::Const(Scalar::I64(c)) if (1..=LOCAL_ELEMENTS).contains(c) => {
                    let n = len.entry(buf.0).or_insert(0);
                    *n = (*n).max(*c);
                }
                _ => {
                    refused.insert(buf.0);
                }
            }
        }
    });
    len.retain(|b, _| {
        let d = &k.bufs[*b as usize];
        d.scratch
            && d.tensor.is_none()
            && d.elem != ElemType::Limit
            && !refused.contains(b)
            && !sorted_or_hashed(&k.body, *b)
    });
    len
}

/// Whether a helper sorts or hashes buffer `b` (it reads and writes it through the views).
fn sorted_or_hashed(stmts: &[Stmt], b: u32) -> bool {
    let mut found = false;
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Sort { buf, flags, .. } => {
            found |= buf.0 == b || flags.is_some_and(|f| f.0 == b);
        }
        Stmt::SortPerm { keys, perm, .. } => found |= keys.0 == b || perm.0 == b,
        _ => {}
    });
    walk_exprs(stmts, &mut |e| {
        if let Expr::HashFind { table, .. } = e {
            found |= table.0 == b;
        }
    });
    found
}

/// The C source of a kernel whose buffers `local` are local arrays, or `Err` when it would
/// be cut into parts and `local` is not empty.
fn emit_with(k: &Kernel, options: &Options, local: &BTreeMap<u32, i64>) -> Result<String, ()> {
    let split = &options.parts;
    let mut e = Emitter {
        local: local.clone(),
        k,
        prefetch: options.prefetch,
        unroll: options.unroll,
        out: String::new(),
        depth: 1,
        tmp: 0,
        unchecked: vec![],
        pretested: vec![],
        in_outer: false,
        select_mul: false,
        varying: vec![],
        vector_body: false,
        in_copy: false,
        failed: vec![],
        gathers: Gathers::of(k),
    };
    // The checked bounds, read once: they keep their values through the run, and read at
    // each versioned loop (each row of a SpMV) they cost a reload and a check every time.
    for g in 0..e.gathers.belows.len() {
        let below = e.gathers.belows[g].clone();
        let x = e.expr(&below);
        e.line(&format!("const int64_t g{g} = {x};"));
    }
    let bounds = std::mem::take(&mut e.out);
    let gathers = e.gathers.belows.len();
    // Each top-level statement's text on its own, so a large kernel can be cut between them.
    let texts: Vec<String> = k
        .body
        .iter()
        .map(|s| {
            e.stmt(s);
            std::mem::take(&mut e.out)
        })
        .collect();
    let lines: Vec<usize> = texts.iter().map(|t| t.lines().count()).collect();

    let mut out = String::new();
    let _ = writeln!(out, "/* tessera kernel `{}` */", comment(&k.name));
    out.push_str(PRELUDE);
    let buffers = buffer_decls(k, local);
    if lines.iter().sum::<usize>() <= split.split_lines {
        out.push_str(KERNEL_HEAD);
        out.push_str(&buffers);
        for (n, v) in k.vars.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {} v{n} = {}; /* {} */",
                c_compute(v.ty),
                var_zero(v.ty),
                comment(&v.name)
            );
        }
        out.push_str("    (void)state; (void)fault;\n");
        out.push_str(&bounds);
        texts.iter().for_each(|t| out.push_str(t));
        out.push_str("    return 0;\n}\n");
        return Ok(out);
    }
    if !local.is_empty() {
        return Err(());
    }

    // Parts (`parts`): the variables and the checked bounds in one struct between them.
    out.push_str("\ntypedef struct {\n");
    for (n, v) in k.vars.iter().enumerate() {
        let _ = writeln!(
            out,
            "    {} v{n}; /* {} */",
            c_compute(v.ty),
            comment(&v.name)
        );
    }
    for g in 0..gathers {
        let _ = writeln!(out, "    int64_t g{g};");
    }
    // An empty struct is not C.
    out.push_str("    int64_t unused;\n} tessera_vars;\n");
    let groups = split.group(&lines);
    let texts: Vec<String> = groups.iter().map(|r| texts[r.clone()].concat()).collect();
    let named: Vec<_> = texts.iter().map(|t| parts::named_vars(t)).collect();
    for (p, (range, text)) in groups.iter().zip(&texts).enumerate() {
        let named_later: BTreeSet<usize> = named[p + 1..].iter().flatten().copied().collect();
        // Written back: what the part assigns and a later part names. Storing every variable
        // would keep each live to the end of the part (GAT's gradient: 10% slower, spills).
        let mut assigned = HashSet::new();
        walk::assigned(&k.body[range.clone()], &mut assigned);
        let named = &named[p];
        let _ = writeln!(
            out,
            "\n__attribute__((noinline)) static int64_t tessera_part{p}(tessera_view *views, void *state, int64_t *fault, tessera_vars *restrict V) {{"
        );
        out.push_str(&buffers);
        for &n in named {
            let _ = writeln!(out, "    {} v{n} = V->v{n};", c_compute(k.vars[n].ty));
        }
        for g in 0..gathers {
            let _ = writeln!(out, "    const int64_t g{g} = V->g{g}; (void)g{g};");
        }
        out.push_str("    (void)state; (void)fault;\n");
        out.push_str(text);
        for &n in named {
            if named_later.contains(&n) && assigned.contains(&VarId(n as u32)) {
                let _ = writeln!(out, "    V->v{n} = v{n};");
            }
        }
        out.push_str("    return 0;\n}\n");
    }
    out.push_str(KERNEL_HEAD);
    out.push_str(&buffers);
    out.push_str("    tessera_vars V;\n    memset(&V, 0, sizeof V);\n");
    for (n, v) in k.vars.iter().enumerate() {
        if v.ty == ElemType::Limit {
            let _ = writeln!(out, "    V.v{n} = {};", var_zero(v.ty));
        }
    }
    out.push_str("    (void)state; (void)fault;\n");
    // A bound that reads a variable reads its starting value, as in one function.
    for n in parts::named_vars(&bounds) {
        let ty = k.vars[n].ty;
        let _ = writeln!(out, "    {} v{n} = {};", c_compute(ty), var_zero(ty));
    }
    out.push_str(&bounds);
    for g in 0..gathers {
        let _ = writeln!(out, "    V.g{g} = g{g};");
    }
    for p in 0..groups.len() {
        let _ = writeln!(
            out,
            "    {{ const int64_t r = tessera_part{p}(views, state, fault, &V); if (r != 0) return r; }}"
        );
    }
    out.push_str("    return 0;\n}\n");
    Ok(out)
}

const KERNEL_HEAD: &str = "\n__attribute__((visibility(\"default\")))\n\
     int64_t tessera_kernel(tessera_view *views, void *state, int64_t *fault) {\n";

/// A variable's starting value.
fn var_zero(ty: ElemType) -> String {
    match ty {
        ElemType::F64 => "0.0".into(),
        ElemType::Limit => c_const(Scalar::zero(ElemType::Limit)),
        _ => "0".into(),
    }
}

/// The declarations of the kernel's buffer pointers and lengths, read from the views, or
/// of the local arrays `local` (empty at first).
fn buffer_decls(k: &Kernel, local: &BTreeMap<u32, i64>) -> String {
    let moving = moving_buffers(&k.body);
    let mut out = String::new();
    for (n, d) in k.bufs.iter().enumerate() {
        let t = c_elem(d.elem);
        if let Some(c) = local.get(&(n as u32)) {
            let _ = writeln!(
                out,
                "    {t} l{n}[{c}] __attribute__((aligned(64))) = {{0}}; {t} *const restrict b{n} = l{n}; int64_t n{n} = 0; /* {} */",
                comment(&d.name)
            );
        } else if moving.contains(&(n as u32)) {
            let _ = writeln!(
                out,
                "    {t} *b{n} = ({t} *)views[{n}].ptr; int64_t n{n} = views[{n}].len; /* {} */",
                comment(&d.name)
            );
        } else {
            // Nothing but this pointer touches the buffer while the kernel runs.
            let _ = writeln!(
                out,
                "    {t} *const restrict b{n} = ({t} *)views[{n}].ptr; const int64_t n{n} = views[{n}].len; /* {} */",
                comment(&d.name)
            );
        }
    }
    out
}

/// Buffers whose pointer or contents a helper may change while the kernel runs (grown,
/// sorted or hashed by Rust): they must not be declared `restrict`.
fn moving_buffers(stmts: &[Stmt]) -> HashSet<u32> {
    let mut set = HashSet::new();
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Grow { buf, .. } | Stmt::Sort { buf, .. } => {
            set.insert(buf.0);
            // The helper reads the flags through a pointer of its own.
            if let Stmt::Sort { flags: Some(f), .. } = s {
                set.insert(f.0);
            }
        }
        Stmt::SortPerm { keys, perm, .. } => {
            set.insert(keys.0);
            set.insert(perm.0);
        }
        _ => {}
    });
    let mut hashed = vec![];
    walk_exprs(stmts, &mut |e| {
        if let Expr::HashFind { table, .. } = e {
            hashed.push(table.0);
        }
    });
    set.extend(hashed);
    set
}

/// Whether evaluating the expression can fail or call out (so it is hoisted into statements).
fn effectful(e: &Expr) -> bool {
    let mut found = false;
    walk_exprs(&[Stmt::Assign(VarId(0), e.clone())], &mut |x| {
        found |= matches!(
            x,
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. }
        )
    });
    found
}

/// The C conditions under which `accesses` of `for (v = s; v < e; ...)` stay inside their
/// buffers (`versioning`), sorted, without repeats.
fn range_tests(accesses: &[Access], s: &str, e: &str) -> Vec<String> {
    let mut tests = vec![];
    for a in accesses {
        let b = a.buf.0;
        tests.extend(match a.at {
            // `s + c >= 0` and `e + c <= n` without overflow: |c| is small and n >= 0.
            At::Shifted {
                base: None,
                offset: c,
                ..
            } => vec![
                format!("{s} >= INT64_C({})", -c),
                format!("{e} <= n{b} - INT64_C({c})"),
            ],
            // The base is any value: a sum that overflows fails the test (`t_sum_ge0`), which
            // only sends the loop to its checked copy. (Sums in 128 bits made GCC spill the
            // loop's variables around the test: 5% of a run-length mask's histogram, whose
            // pixel loop starts once per run.)
            At::Shifted {
                base: Some(w),
                offset: c,
                ..
            } => vec![
                format!("t_sum_ge0({s}, v{}, INT64_C({c}))", w.0),
                format!("t_sum_le({e}, v{}, INT64_C({c}), n{b})", w.0),
            ],
            // Every value of the index is in `0..below` once `below` is positive.
            // `0 < g <= n` as one unsigned compare; `g - 1` is the loops' invariant.
            At::Gathered { below, .. } => {
                vec![format!("(uint64_t)g{below} - 1 < (uint64_t)n{b}")]
            }
            // The same past a kept start: `n - base` cannot overflow once `0 <= base <= n`.
            At::InRow { base, below, .. } => vec![
                format!("v{} >= INT64_C(0)", base.0),
                format!("v{} <= n{b}", base.0),
                format!("(uint64_t)g{below} - 1 < (uint64_t)(n{b} - v{})", base.0),
            ],
            // The same for every run of the loop, so an outer loop tests it instead where
            // it can (`versioning::outer_versionable`). `g - 1 + c <= n` without
            // overflow: 0 < g and 0 <= c are small next to 2^63.
            At::Between {
                offset: c, below, ..
            } => vec![
                format!("g{below} > 0"),
                format!("g{below} - 1 <= n{b} - INT64_C({c})"),
            ],
            // The index is in `[lo, hi]`, `0 <= lo`.
            At::Ranged { hi, .. } => vec![format!("n{b} > INT64_C({hi})")],
            At::Under { bound, hi, .. } => vec![format!("v{} > INT64_C({hi})", bound.0)],
            // Tested before the walk, not per iteration (`walked`).
            At::Walked { var, stop } => vec![
                format!("v{} >= INT64_C(0)", var.0),
                format!("v{} <= n{b}", stop.0),
            ],
        });
    }
    tests.sort();
    tests.dedup();
    tests
}

/// Text safe inside a C comment.
fn comment(s: &str) -> String {
    s.replace("*/", "* /").replace(['\n', '\r'], " ")
}

/// The C type of a buffer element.
fn c_elem(t: ElemType) -> &'static str {
    match t {
        ElemType::Bool | ElemType::U8 => "uint8_t",
        ElemType::I8 => "int8_t",
        ElemType::I32 => "int32_t",
        ElemType::I64 => "int64_t",
        ElemType::U64 => "uint64_t",
        ElemType::F32 => "float",
        ElemType::F64 => "double",
        ElemType::Limit => unreachable!("checked IR has no buffer of points"),
    }
}

/// The C type of a compute-type value (`Bool` is a byte holding 0 or 1).
fn c_compute(t: ElemType) -> &'static str {
    match t.compute() {
        ElemType::Bool => "uint8_t",
        ElemType::F64 => "double",
        ElemType::Limit => "t_limit",
        _ => "int64_t",
    }
}

pub(super) fn c_const(s: Scalar) -> String {
    match s {
        Scalar::Bool(b) => (b as u8).to_string(),
        Scalar::F64(x) => c_f64(x),
        Scalar::F32(x) => c_f64(x as f64),
        Scalar::Limit(p) => {
            let key = limit_code::encode(p) as u128;
            format!(
                "t_lim_key(UINT64_C({:#x}), UINT64_C({:#x}))",
                (key >> 64) as u64,
                key as u64
            )
        }
        s if s.as_i64() == i64::MIN => "INT64_MIN".into(),
        s => format!("INT64_C({})", s.as_i64()),
    }
}

fn c_f64(x: f64) -> String {
    if x.is_finite() {
        // Rust's `{:?}` is the shortest text that reads back to the same bits, and C
        // compilers round decimal literals correctly.
        format!("({x:?})")
    } else {
        format!("t_bits(UINT64_C({:#x}))", x.to_bits())
    }
}

struct Emitter<'a> {
    k: &'a Kernel,
    /// Buffers in local arrays ([`local_buffers`]) and their lengths.
    local: BTreeMap<u32, i64>,
    out: String,
    depth: usize,
    tmp: usize,
    /// Accesses whose check a versioned loop made before entering (see the module docs).
    unchecked: Vec<Access>,
    /// Accesses of inner loops that an enclosing loop's test covers: unchecked inside a loop
    /// over their variable, with no test of its own (`At::Between`).
    pretested: Vec<Access>,
    /// Inside either copy of a versioned loop with loops inside (`versioning::outer_versionable`),
    /// where no other such loop is versioned.
    in_outer: bool,
    /// Gathers whose test an enclosing versioned loop found false (its bound is 0: the
    /// coordinates are not vouched for, `At::Gathered`): inner loops keep their checks without
    /// testing again.
    failed: Vec<Access>,
    /// The variables holding only checked coordinates, for versioning gathers.
    gathers: Gathers,
    /// Software prefetches of gathers (`prefetch`).
    prefetch: prefetch::Config,
    /// Iterations per unrolled step of a scatter loop (`unroll`).
    unroll: u32,
    /// Inside the unchecked copy of an elementwise loop ([`elementwise`]): float products
    /// as selects (`t_mulz`).
    select_mul: bool,
    /// There, the variables that change from iteration to iteration: the loop's own and
    /// those its body assigns (an expression reading none of them and no memory is
    /// invariant: `t_mulza`).
    varying: Vec<VarId>,
    /// There, whether GCC can vectorise the body ([`vectorisable`]): only then do products
    /// with an invariant factor take `t_mulza`'s mask.
    vector_body: bool,
    /// Inside a loop's unchecked copy, where `varying` is that loop's: scalar float products
    /// with one invariant factor take `t_mulzs`.
    in_copy: bool,
}

impl Emitter<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn open(&mut self, s: &str) {
        self.line(s);
        self.depth += 1;
    }

    fn close(&mut self, s: &str) {
        self.depth -= 1;
        self.line(s);
    }

    fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("t{}", self.tmp)
    }

    fn oob_code(buf: BufId) -> i64 {
        -(buf.0 as i64) - 1
    }

    /// Return the out-of-bounds fault for `buf` with `index` unless `0 <= index < len`.
    fn check(&mut self, buf: BufId, index: &str) {
        let n = buf.0;
        self.line(&format!(
            "if (UNLIKELY((uint64_t){index} >= (uint64_t)n{n})) {{ *fault = {index}; return {}; }}",
            Self::oob_code(buf)
        ));
    }

    /// Fail unless the range `[lo, hi)` is empty or inside `buf` (reports as the JIT does).
    fn check_range(&mut self, buf: BufId, lo: &str, hi: &str) {
        let n = buf.0;
        self.line(&format!(
            "if (UNLIKELY({lo} < {hi} && ({lo} < 0 || {hi} > n{n}))) {{ *fault = {lo} >= 0 ? {hi} - 1 : {lo}; return {}; }}",
            Self::oob_code(buf)
        ));
    }

    /// Evaluate into a named constant (so later text can use it twice without re-evaluating);
    /// a plain name or constant is used as it is.
    fn bind(&mut self, ty: &str, value: String) -> String {
        let name = value.len() > 1
            && value.starts_with(['v', 't', 'n'])
            && value[1..].chars().all(|c| c.is_ascii_digit());
        if name || value.starts_with("INT64_C(") {
            return value;
        }
        let t = self.fresh();
        self.line(&format!("const {ty} {t} = {value};"));
        t
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    /// Statements that hoist sub-expressions get their own block, so their temporaries stay
    /// local.
    fn scoped(&mut self, exprs: &[&Expr], body: impl FnOnce(&mut Self)) {
        let scope = exprs.iter().any(|e| effectful(e));
        if scope {
            self.open("{");
        }
        body(self);
        if scope {
            self.close("}");
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            // Inside one kernel a parallel range is its serial loop: one chunk, the whole range.
            Stmt::Chunked(c) => {
                self.stmt(&Stmt::Assign(c.lo, c.start.clone()));
                self.stmt(&Stmt::Assign(c.hi, c.stop.clone()));
                for s in &c.body {
                    self.stmt(s);
                }
            }
            Stmt::Assign(v, e) => self.scoped(&[e], |me| {
                let x = me.expr(e);
                me.line(&format!("v{} = {x};", v.0));
            }),
            Stmt::Store { buf, index, value } => self.scoped(&[index, value], |me| {
                // The JIT evaluates the value before checking the index; so do we.
                let i = me.expr(index);
                let i = me.bind("int64_t", i);
                let v = me.expr(value);
                if !me.is_unchecked(*buf, index) {
                    me.check(*buf, &i);
                }
                let t = c_elem(me.k.buf_elem(*buf));
                me.line(&format!("b{}[{i}] = ({t})({v});", buf.0));
            }),
            Stmt::Atomic {
                buf,
                index,
                op,
                value,
            } => self.scoped(&[index, value], |me| {
                // Evaluated and checked as a `Store`.
                let i = me.expr(index);
                let i = me.bind("int64_t", i);
                let v = me.expr(value);
                let ty = me.k.buf_elem(*buf).compute();
                let v = me.bind(c_compute(ty), v);
                if !me.is_unchecked(*buf, index) {
                    me.check(*buf, &i);
                }
                me.atomic_update(*buf, *op, &i, &v);
            }),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.scoped(&[cond], |me| {
                let c = me.expr(cond);
                me.open(&format!("if ({c}) {{"));
                me.stmts(then);
                if otherwise.is_empty() {
                    me.close("}");
                } else {
                    me.close("} else {");
                    me.depth += 1;
                    me.stmts(otherwise);
                    me.close("}");
                }
            }),
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                // The bound lives in a block of its own.
                self.open("{");
                let me = &mut *self;
                let s = me.expr(start);
                let s = me.bind("int64_t", s);
                // `stop` is evaluated once, before the loop, even if the body assigns a
                // variable it reads.
                let e = me.expr(stop);
                let e = if e.starts_with("INT64_C(") {
                    e
                } else {
                    // The empty `asm` hides where the bound came from: when two loops run to
                    // the same bound (the IEEE re-run of a row, `ir::ieee_mul`), GCC otherwise
                    // rewrites the second's exit test against the first's counter and keeps
                    // that counter's previous value alive, one more instruction per entry in
                    // the first loop (SpMV on bcsstk16: +8% instructions).
                    let t = me.fresh();
                    me.line(&format!("int64_t {t} = {e}; __asm__(\"\" : \"+r\"({t}));"));
                    t
                };
                me.steps_or_counted(*var, (start, stop), (&s, &e), body);
                self.close("}");
            }
            Stmt::While { cond, body } => {
                let mut walked = walked::walked_versionable(cond, body);
                walked.retain(|a| !self.unchecked.contains(a) && !self.failed.contains(a));
                if walked.is_empty() {
                    self.while_loop(cond, body);
                } else {
                    // A walk over positions tested once before it (`walked`): the copy
                    // without their checks, and the checked one for bad positions.
                    let tests = range_tests(&walked, "", "").join(" && ");
                    self.open(&format!("if (LIKELY({tests})) {{"));
                    let saved = self.unchecked.len();
                    self.unchecked.extend(walked);
                    self.while_loop(cond, body);
                    self.unchecked.truncate(saved);
                    self.close("} else {");
                    self.depth += 1;
                    self.while_loop(cond, body);
                    self.close("}");
                }
            }
            Stmt::Break => self.line("break;"),
            Stmt::Grow { buf, len } => self.scoped(&[len], |me| {
                let want = me.expr(len);
                let want = me.bind("int64_t", want);
                let (n, t) = (buf.0, c_elem(me.k.buf_elem(*buf)));
                if me.local.contains_key(&n) {
                    // A local array holds the largest length asked for, zeros from the start.
                    me.line(&format!("if ({want} > n{n}) n{n} = {want};"));
                    return;
                }
                // A buffer already long enough needs no call (appends grow geometrically, so
                // the call is rare).
                me.open(&format!("if (UNLIKELY({want} > n{n})) {{"));
                me.line(&format!(
                    "if (UNLIKELY(H.grow(state, {n}, {want}) != 0)) {{ *fault = {want}; return INT64_C({}); }}",
                    GROW_BASE - n as i64
                ));
                me.line(&format!(
                    "b{n} = ({t} *)views[{n}].ptr; n{n} = views[{n}].len;"
                ));
                me.close("}");
            }),
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } => self.scoped(&[start, stop, value], |me| {
                let lo = me.expr(start);
                let lo = me.bind("int64_t", lo);
                let hi = me.expr(stop);
                let hi = me.bind("int64_t", hi);
                let v = me.expr(value);
                let v = me.bind(c_compute(me.k.buf_elem(*buf)), v);
                me.check_range(*buf, &lo, &hi);
                let t = c_elem(me.k.buf_elem(*buf));
                me.line(&format!(
                    "for (int64_t f = {lo}; f < {hi}; f++) b{}[f] = ({t})({v});",
                    buf.0
                ));
            }),
            Stmt::Sort { buf, flags, lo, hi } => self.scoped(&[lo, hi], |me| {
                let l = me.expr(lo);
                let l = me.bind("int64_t", l);
                let h = me.expr(hi);
                let h = me.bind("int64_t", h);
                me.check_range(*buf, &l, &h);
                if let Some(f) = flags {
                    // The helper set the fault word and says which buffer failed: a slot
                    // outside the flags, or the sorted buffer itself.
                    let r = me.bind(
                        "int64_t",
                        format!(
                            "H.sort_slots(state, {}, {}, {l}, {h}, fault)",
                            buf.0, f.0
                        ),
                    );
                    me.line(&format!(
                        "if (UNLIKELY({r} != 0)) return {r} == {} ? {} : {};",
                        f.0 as i64 + 1,
                        Self::oob_code(*f),
                        Self::oob_code(*buf)
                    ));
                    return;
                }
                // The range was checked, so a failure can only be the buffer itself.
                me.line(&format!(
                    "if (UNLIKELY(H.sort(state, {}, {l}, {h}) != 0)) {{ *fault = {l}; return {}; }}",
                    buf.0,
                    Self::oob_code(*buf)
                ));
            }),
            Stmt::SortPerm { keys, perm, lo, hi } => self.scoped(&[lo, hi], |me| {
                let l = me.expr(lo);
                let l = me.bind("int64_t", l);
                let h = me.expr(hi);
                let h = me.bind("int64_t", h);
                me.check_range(*perm, &l, &h);
                // On failure the helper has written the bad position of `keys` to `*fault`.
                me.line(&format!(
                    "if (UNLIKELY(H.sort_perm(state, {}, {}, {l}, {h}, fault) != 0)) return {};",
                    keys.0,
                    perm.0,
                    Self::oob_code(*keys)
                ));
            }),
            Stmt::Fail(k) => self.line(&format!("return {};", *k as i64 + 1)),
            Stmt::Comment(c) => self.line(&format!("/* {} */", comment(c))),
        }
    }

    fn is_unchecked(&self, buf: BufId, index: &Expr) -> bool {
        self.unchecked.iter().any(|a| a.is(buf, index))
    }

    fn while_loop(&mut self, cond: &Expr, body: &[Stmt]) {
        if effectful(cond) {
            self.open("while (1) {");
            let c = self.expr(cond);
            self.line(&format!("if (!({c})) break;"));
        } else {
            let c = self.expr(cond);
            self.open(&format!("while ({c}) {{"));
        }
        self.stmts(body);
        self.close("}");
    }

    /// A loop over a slice group's steps (`lanes::steps`): on a machine with AVX-512, its
    /// text with the lane arrays in vector variables behind one test of every access; else
    /// (and when the test fails) the counted loop.
    fn steps_or_counted(
        &mut self,
        var: VarId,
        (start, stop): (&Expr, &Expr),
        (s, e): (&str, &str),
        body: &[Stmt],
    ) {
        let k = self.k;
        let Some((steps, text)) =
            lanes::steps(k, var, body).and_then(|st| st.text(k, var, (s, e)).map(|t| (st, t)))
        else {
            self.counted_loop(var, (start, stop), (s, e), body);
            return;
        };
        // The facts the gathers rest on, as the checked bounds read at the kernel's start.
        let mut tests = vec![];
        for (crd, x) in &steps.gathers {
            let mut facts = k
                .bounded
                .iter()
                .filter(|f| f.buf == *crd && f.what == crate::ir::Vouched::Coordinates);
            let (Some(f), None) = (facts.next(), facts.next()) else {
                self.counted_loop(var, (start, stop), (s, e), body);
                return;
            };
            let below = f.below.clone();
            let below = self.expr(&below);
            let below = self.bind("int64_t", below);
            tests.push(format!("{below} > 0 && {below} <= n{}", x.0));
        }
        let first = format!("v{}", steps.first.0);
        for (b, c) in &steps.contiguous {
            let room = format!("(n{} - INT64_C({c}) - {first})", b.0);
            tests.push(format!(
                "{room} >= 0 && {e} <= {room} / INT64_C({})",
                lanes::LANES
            ));
        }
        for b in &steps.registers {
            tests.push(format!("n{} >= INT64_C({})", b.0, lanes::LANES));
        }
        tests.sort();
        tests.dedup();
        let test = if tests.is_empty() {
            "1".to_string()
        } else {
            tests.join(" && ")
        };
        self.out.push_str("#if defined(__AVX512F__)\n");
        self.open(&format!("if (LIKELY({test})) {{"));
        for l in text {
            self.line(&l);
        }
        self.close("} else");
        self.out.push_str("#endif\n");
        self.open("{");
        self.counted_loop(var, (start, stop), (s, e), body);
        self.close("}");
    }

    /// `for (v = s; v < e; v++) body`, versioned when the body's accesses allow (module docs);
    /// `s` and `e` are the C text of the IR's `start` and `stop`.
    fn counted_loop(
        &mut self,
        var: VarId,
        (start, stop): (&Expr, &Expr),
        (s, e): (&str, &str),
        body: &[Stmt],
    ) {
        let assigned = versioning::assigns(body, var);
        let step = if assigned {
            format!("v{0} = t_add(v{0}, 1)", var.0)
        } else {
            format!("v{}++", var.0)
        };
        let mut accesses = versioning::versionable(var, start, stop, body, &self.gathers);
        let outer = accesses.is_empty() && !self.in_outer;
        if outer {
            accesses = versioning::outer_versionable(var, start, stop, body, &self.gathers);
        }
        // What an enclosing versioned loop tested needs no second test.
        accesses.retain(|a| !self.unchecked.contains(a) && !self.failed.contains(a));
        let (pretested, accesses): (Vec<Access>, Vec<Access>) = accesses
            .into_iter()
            .partition(|a| self.pretested.contains(a));
        if accesses.is_empty() {
            let saved = self.unchecked.len();
            self.unchecked.extend(pretested);
            self.loop_copies(var, (s, e), &step, body);
            self.unchecked.truncate(saved);
            return;
        }
        // Three copies when gathers are among the accesses: their test alone fails when the
        // caller vouches for no coordinates (a matrix shared from NumPy), and the middle copy
        // then still runs the other accesses, a row's entries between checked positions
        // above all, unchecked.
        let (gathered, others): (Vec<Access>, Vec<Access>) = accesses
            .iter()
            .partition(|a| matches!(a.at, At::Gathered { .. } | At::InRow { .. }));
        let tests = |acc: &[Access]| range_tests(acc, s, e).join(" && ");
        // Without gathers the test fails only for bad input (or an access a condition
        // skips), so the fast copy is the one GCC should lay out and allocate registers
        // for: unmarked, it weighed both copies alike and the run loop of a run-length mask
        // spilled around them (`walked`; BENCHMARKS, session 46). With gathers the middle
        // copy is a common path (coordinates nobody vouches for), so no hint.
        let test = format!("{s} >= {e} || ({})", tests(&accesses));
        if gathered.is_empty() {
            self.open(&format!("if (LIKELY({test})) {{"));
        } else {
            self.open(&format!("if ({test}) {{"));
        }
        self.in_outer |= outer;
        self.unchecked_copy(var, (s, e), &step, body, &accesses, &pretested);
        if !gathered.is_empty() && !others.is_empty() {
            // `s < e` here: an empty range took the first copy.
            self.close(&format!("}} else if ({}) {{", tests(&others)));
            self.depth += 1;
            let saved = self.failed.len();
            self.failed.extend(gathered);
            self.unchecked_copy(var, (s, e), &step, body, &others, &pretested);
            self.failed.truncate(saved);
        }
        self.close("} else {");
        self.depth += 1;
        self.open(&format!("for (v{0} = {s}; v{0} < {e}; {step}) {{", var.0));
        self.stmts(body);
        self.close("}");
        self.close("}");
        if outer {
            self.in_outer = false;
        }
    }

    /// Before a vectorised loop (`Kernel::vectorized`), emitted at `at` (a place in the
    /// output and its depth) once the loop's text is known: tell GCC its iterations carry no
    /// dependence (the `vectorize` command proved it), so it vectorises without testing the
    /// buffers for overlap at run time or giving up on them.
    ///
    /// Reductions follow the `vectorize` command's contract, which the JIT's lanes already
    /// keep: a float sum or product is reassociated, equal to the serial one within rounding.
    /// GCC reassociates only under `-ffast-math` (which the C tier does not use, since it
    /// would reach every loop), so a loop of stores and reductions gets OpenMP's `simd` with
    /// its reductions named instead (`-fopenmp-simd`: the pragma alone, no runtime). That is
    /// allowed only for a copy with no exit in its text (a checked access returns a fault,
    /// which a `simd` loop may not), so checked copies keep `ivdep` and the serial order.
    fn vector_pragma(&mut self, var: VarId, body: &[Stmt], (at, depth): (usize, usize)) {
        if !self.k.vectorized.contains(&var) {
            return;
        }
        let text = &self.out[at..];
        let exits = ["return", "goto", "break"].iter().any(|w| text.contains(w));
        let pragma = match simd_clauses(self.k, var, body) {
            // Lanes of gathers: four, in 256-bit registers. GCC otherwise gathers eight
            // through 512-bit registers, whose setup and final sum a sparse row's few
            // entries do not repay (a walk of 7-60 entries ran 1.3-1.4x slower).
            Some((clauses, true)) if !exits && gathers(body) => {
                format!("#pragma omp simd {clauses} simdlen(4)")
            }
            Some((clauses, _)) if !exits => {
                format!("#pragma omp simd {clauses}").trim_end().to_string()
            }
            _ => "#pragma GCC ivdep".to_string(),
        };
        let line = format!("{}{pragma}\n", "    ".repeat(depth));
        self.out.insert_str(at, &line);
    }

    /// The copy of a versioned loop whose range tests passed: `accesses` unchecked (those of
    /// inner loops inside their own loop), `pretested` too.
    fn unchecked_copy(
        &mut self,
        var: VarId,
        (s, e): (&str, &str),
        step: &str,
        body: &[Stmt],
        accesses: &[Access],
        pretested: &[Access],
    ) {
        let saved = (self.unchecked.clone(), self.pretested.len());
        // An inner loop's access is unchecked only inside its own loop.
        let (inner, own): (Vec<Access>, Vec<Access>) = accesses
            .iter()
            .partition(|a| matches!(a.at, At::Between { var: v, .. } if v != var));
        self.unchecked.extend(own);
        self.unchecked.extend(pretested.iter().copied());
        self.pretested.extend(inner);
        let select = std::mem::replace(&mut self.select_mul, elementwise(body));
        let mut varying = std::collections::HashSet::from([var]);
        walk::assigned(body, &mut varying);
        let varying = std::mem::replace(&mut self.varying, varying.into_iter().collect());
        let vector_body = std::mem::replace(&mut self.vector_body, vectorisable(self.k, body));
        let in_copy = std::mem::replace(&mut self.in_copy, true);
        self.loop_copies(var, (s, e), step, body);
        self.select_mul = select;
        self.varying = varying;
        self.vector_body = vector_body;
        self.in_copy = in_copy;
        self.unchecked = saved.0;
        self.pretested.truncate(saved.1);
    }

    /// `for (v = s; v < e; step) body`, and before it, when the body gathers through
    /// coordinates proven in bounds here (`prefetch`), a copy that also prefetches each gather
    /// `D` positions ahead, taken when a gathered buffer is larger than the L2.
    fn loop_copies(&mut self, var: VarId, (s, e): (&str, &str), step: &str, body: &[Stmt]) {
        // A vectorised loop over 8 lanes (`ir::lanes`): 512-bit vectors where the machine
        // has them (`lanes`), the loop below elsewhere.
        if self.k.vectorized.contains(&var)
            && s == "INT64_C(0)"
            && e == format!("INT64_C({})", lanes::LANES)
            && let Some(text) = lanes::text(self.k, var, body, &|b, i| self.is_unchecked(b, i))
        {
            self.out.push_str("#if defined(__AVX512F__)\n");
            self.open("{");
            for l in text {
                self.line(&l);
            }
            self.close("}");
            self.out.push_str("#else\n");
            self.plain_loop_copies(var, (s, e), step, body);
            self.out.push_str("#endif\n");
            return;
        }
        self.plain_loop_copies(var, (s, e), step, body);
    }

    /// [`Emitter::loop_copies`] in C every compiler takes.
    fn plain_loop_copies(&mut self, var: VarId, (s, e): (&str, &str), step: &str, body: &[Stmt]) {
        // OpenMP's loop form forbids a start that reads the loop's own variable (a walk
        // continues from its position, `for (v3 = v3; ...)`): a vectorised loop starts from
        // a copy.
        if self.k.vectorized.contains(&var) && mentions_var(s, var) {
            self.open("{");
            self.line(&format!("const int64_t vs{0} = {s};", var.0));
            let start = format!("vs{}", var.0);
            self.loop_copies(var, (&start, e), step, body);
            self.close("}");
            return;
        }
        let ranges = self.prefetched_ranges(var, body);
        let ranged = !ranges.is_empty();
        if ranged {
            let ahead = self.prefetch.ranges;
            let streams = ranges.iter().flat_map(|r| &r.streams).copied();
            self.open_size_test(streams, self.prefetch.range_min_bytes);
            self.line("/* ranges streamed from buffers past a quarter of the L2: each range's start requested `D` positions ahead */");
            self.prefetching_copy(var, (s, e), step, body, |me, _| {
                for r in &ranges {
                    let (q, idx, ptr) = (var.0, r.idx.0, r.ptr.0);
                    // Every read tested against its buffer's length; the address is an
                    // integer until `__builtin_prefetch`, which cannot fault.
                    me.open(&format!(
                        "{{ const uint64_t pf_q = (uint64_t)v{q} + UINT64_C({ahead}); if (pf_q < (uint64_t)n{idx}) {{"
                    ));
                    me.open(&format!(
                        "const uint64_t pf_k = (uint64_t)(int64_t)b{idx}[pf_q]; if (pf_k < (uint64_t)n{ptr}) {{"
                    ));
                    me.line(&format!(
                        "const uintptr_t pf_s = (uintptr_t)(int64_t)b{ptr}[pf_k];"
                    ));
                    for y in &r.streams {
                        me.line(&format!(
                            "__builtin_prefetch((const void *)((uintptr_t)b{0} + pf_s * sizeof *b{0}));",
                            y.0
                        ));
                    }
                    me.close("}");
                    me.close("} }");
                }
            });
        }
        let gathers = self.prefetched(var, body);
        let prefetch::Config {
            distance,
            min_bytes,
            mode,
            ..
        } = self.prefetch;
        if !gathers.is_empty() {
            self.open_size_test(gathers.iter().map(|g| g.x), min_bytes);
            self.line("/* gathers from buffers past the L2: each requested `D` positions ahead */");
            let prefetches = |me: &mut Self, p: &str| {
                for g in &gathers {
                    // `index` is proven in bounds for every `p` of the loop, so
                    // `min(index + D, len - 1)` is too.
                    let i = prefetch::index_at(&g.index, var, p);
                    let (x, idx) = (g.x.0, g.idx.0);
                    me.line(&format!(
                        "__builtin_prefetch((const void *)((uintptr_t)b{x} + (uintptr_t)b{idx}[t_mini(t_add({i}, INT64_C({distance})), n{idx} - 1)] * sizeof *b{x}));"
                    ));
                }
            };
            if mode == prefetch::Mode::Ahead {
                // A loop of its own: the main loop stays one GCC may vectorise (it does not
                // vectorise a loop holding a prefetch).
                self.open(&format!("for (int64_t pf = {s}; pf < {e}; pf++) {{"));
                prefetches(self, "pf");
                self.close("}");
                self.close("}");
            } else {
                self.prefetching_copy(var, (s, e), step, body, prefetches);
            }
        }
        let mark = (self.out.len(), self.depth);
        if self.unroll > 1 && !self.k.vectorized.contains(&var) && unroll::scatters(var, body) {
            self.line(&format!("#pragma GCC unroll {}", self.unroll));
        }
        self.open(&format!("for (v{0} = {s}; v{0} < {e}; {step}) {{", var.0));
        self.stmts(body);
        self.close("}");
        self.vector_pragma(var, body, mark);
        if !gathers.is_empty() && mode == prefetch::Mode::Inline {
            self.close("}");
        }
        if ranged {
            self.close("}");
        }
    }

    /// Opens `if (...) {`, true when any of `buffers` holds more than `min_bytes`: the copy
    /// of a loop that prefetches from them pays only where they fall out of the cache.
    fn open_size_test(&mut self, buffers: impl Iterator<Item = BufId>, min_bytes: i64) {
        let mut large: Vec<String> = buffers
            .map(|b| format!("n{0} > INT64_C({min_bytes}) / (int64_t)sizeof *b{0}", b.0))
            .collect();
        large.sort();
        large.dedup();
        self.open(&format!("if ({}) {{", large.join(" || ")));
    }

    /// The loop over `var` whose iterations first print `prefetch` (given the loop variable's
    /// name) and then `body`, followed by `} else {`: the caller prints the plain copy and
    /// closes the test `open_size_test` opened.
    fn prefetching_copy(
        &mut self,
        var: VarId,
        (s, e): (&str, &str),
        step: &str,
        body: &[Stmt],
        prefetch: impl Fn(&mut Self, &str),
    ) {
        let mark = (self.out.len(), self.depth);
        self.open(&format!("for (v{0} = {s}; v{0} < {e}; {step}) {{", var.0));
        prefetch(self, &format!("v{}", var.0));
        self.stmts(body);
        self.close("}");
        self.vector_pragma(var, body, mark);
        self.close("} else {");
        self.depth += 1;
    }

    /// The gathered ranges of a loop over `var` to prefetch (`prefetch::ranges`); none when
    /// range prefetching is off.
    fn prefetched_ranges(&self, var: VarId, body: &[Stmt]) -> Vec<prefetch::Range> {
        if self.prefetch.ranges <= 0 {
            return vec![];
        }
        prefetch::ranges(var, body)
    }

    /// The gathers of a loop over `var` to prefetch (`prefetch::gathers`), those whose
    /// coordinate load is unchecked here (proven in bounds for the whole loop); none when
    /// prefetching is off.
    fn prefetched(&self, var: VarId, body: &[Stmt]) -> Vec<prefetch::Gather> {
        if self.prefetch.distance <= 0 {
            return vec![];
        }
        prefetch::gathers(var, body)
            .into_iter()
            .filter(|g| self.is_unchecked(g.idx, &g.index))
            .collect()
    }

    /// Whether `e` has the same value in every iteration of the elementwise loop being
    /// printed: it reads no memory and none of its varying variables.
    fn invariant(&self, e: &Expr) -> bool {
        let mut fixed = true;
        e.visit(&mut |x| match x {
            Expr::Var(v) => fixed &= !self.varying.contains(v),
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. } => fixed = false,
            _ => {}
        });
        fixed
    }

    /// The C text of a pure expression; loads, searches and lookups are hoisted into
    /// statements first, in evaluation order.
    fn expr(&mut self, e: &Expr) -> String {
        match e {
            Expr::Const(s) => c_const(*s),
            Expr::Var(v) => format!("v{}", v.0),
            Expr::Len(b) => format!("n{}", b.0),
            Expr::Load { buf, index } => {
                let i = self.expr(index);
                let i = self.bind("int64_t", i);
                if !self.is_unchecked(*buf, index) {
                    self.check(*buf, &i);
                }
                let x = self.load(*buf, &i);
                self.bind(c_compute(self.k.buf_elem(*buf)), x)
            }
            Expr::Unary(op, a) => {
                let ty = self.k.type_of(a);
                let x = self.expr(a);
                match (op, ty) {
                    (UnOp::LimitVal, _) => format!("t_lim_val({x})"),
                    (UnOp::LimitEps, _) => format!("t_lim_eps({x})"),
                    (UnOp::After, ElemType::Limit) => format!("t_after({x})"),
                    (UnOp::Before, ElemType::Limit) => format!("t_before({x})"),
                    (UnOp::After, _) => format!("t_add({x}, 1)"),
                    (UnOp::Before, _) => format!("t_sub({x}, 1)"),
                    (UnOp::Neg, ElemType::F64) => format!("(-{x})"),
                    (UnOp::Neg, _) => format!("t_neg({x})"),
                    (UnOp::Not, ElemType::Bool) => format!("({x} ^ 1)"),
                    (UnOp::Not, _) => format!("(~{x})"),
                    (UnOp::Abs, ElemType::F64) => format!("__builtin_fabs({x})"),
                    (UnOp::Abs, _) => format!("t_abs({x})"),
                    (UnOp::Sqrt, _) => format!("__builtin_sqrt({x})"),
                    (UnOp::Floor, _) => format!("__builtin_floor({x})"),
                    // The C library's own `exp` and `log`, which the other backends call
                    // too (Rust's `f64::exp`/`ln`): as builtins, and with `-fno-math-errno`,
                    // GCC knows them pure, so a gradient's second `exp(-z)` of the same `z`
                    // is not computed again; `-frounding-math` keeps it from folding an
                    // inexact constant at compile time.
                    (UnOp::Exp, _) => format!("__builtin_exp({x})"),
                    (UnOp::Log, _) => format!("__builtin_log({x})"),
                    (UnOp::Math(f), _) => format!("H.math1[{}]({x})", f.index()),
                }
            }
            Expr::Binary(op, a, b) => {
                if versioning::known_in_bounds(&self.unchecked, *op, a, b) {
                    return "1".into();
                }
                if let Some(x) =
                    versioning::decided(self.k, &self.gathers, &self.unchecked, *op, a, b)
                {
                    return if x { "1" } else { "0" }.into();
                }
                // `0 <= j & j < len(b)` (a gather's test, `ir::interleave`) as one unsigned
                // comparison: the very test of the bounds check on the load that follows,
                // which GCC then drops.
                if *op == BinOp::And
                    && let Some((j, buf)) = within(a, b)
                {
                    let j = self.expr(j);
                    return format!("((uint64_t){j} < (uint64_t)n{})", buf.0);
                }
                let ty = self.k.type_of(a);
                let x = self.expr(a);
                let y = self.expr(b);
                if *op == BinOp::Mul && ty == ElemType::F64 && self.select_mul {
                    let fixed = |e: &Expr| self.vector_body && self.invariant(e);
                    let f = match (fixed(a), fixed(b)) {
                        (true, false) => "t_mulza",
                        (false, true) => "t_mulzb",
                        _ => "t_mulz",
                    };
                    return format!("{f}({x}, {y})");
                }
                if *op == BinOp::Mul
                    && ty == ElemType::F64
                    && self.in_copy
                    && self.invariant(a) != self.invariant(b)
                {
                    return format!("t_mulzs({x}, {y})");
                }
                binary(*op, ty, &x, &y)
            }
            Expr::MakeLimit(v, e) => {
                let v = self.expr(v);
                let e = self.expr(e);
                format!("t_make_limit({v}, {e})")
            }
            Expr::Select(c, a, b) => {
                let branchless = crate::ir::walk::branchless_select(self.k, c, a, b);
                let c = self.expr(c);
                let x = self.expr(a);
                let y = self.expr(b);
                if branchless {
                    return format!("t_self({c}, {x}, {y})");
                }
                format!("({c} ? {x} : {y})")
            }
            Expr::Cast(to, a) => {
                let from = self.k.type_of(a);
                let x = self.expr(a);
                cast(from, *to, &x)
            }
            Expr::SearchGe { buf, lo, hi, key } => {
                let l = self.expr(lo);
                let l = self.bind("int64_t", l);
                let h = self.expr(hi);
                let h = self.bind("int64_t", h);
                let k = self.expr(key);
                let k = self.bind("int64_t", k);
                self.check_range(*buf, &l, &h);
                let (lv, hv) = (self.fresh(), self.fresh());
                self.line(&format!("int64_t {lv} = {l}, {hv} = {h};"));
                let at = self.load(*buf, "m");
                self.line(&format!(
                    "while ({lv} < {hv}) {{ const int64_t m = {lv} + (({hv} - {lv}) >> 1); if ({at} < {k}) {lv} = m + 1; else {hv} = m; }}"
                ));
                lv
            }
            Expr::HashFind { table, key } => {
                let k = self.expr(key);
                self.bind("int64_t", format!("H.hash_find(state, {}, {k})", table.0))
            }
        }
    }

    /// `Stmt::Atomic` of the checked element `b{buf}[i]` with the bound value `v`: integer
    /// `+` is one `__atomic_fetch_add` (it commutes with the narrowing store); the rest loop
    /// on `__atomic_compare_exchange_n` over the element's bits, computing what the plain
    /// store of `op(b[i], v)` computes (the same `binary`, widening and narrowing), so NaN,
    /// -0.0 and wrapping are the serial code's. An update that leaves the bits as they are
    /// stores nothing (most updates of `min max & |`: no locked instruction for them, as
    /// the JIT). Relaxed ordering is enough: the update only has to be indivisible,
    /// and the join of the chunks (the runner waits for every chunk) is the barrier before
    /// anything reads the buffer.
    fn atomic_update(&mut self, buf: BufId, op: BinOp, i: &str, v: &str) {
        let elem = self.k.buf_elem(buf);
        let b = buf.0;
        let t = c_elem(elem);
        let int = !matches!(elem, ElemType::F32 | ElemType::F64);
        if op == BinOp::Add && int {
            self.line(&format!(
                "__atomic_fetch_add(&b{b}[{i}], ({t})({v}), __ATOMIC_RELAXED);"
            ));
            return;
        }
        let bits = match elem.size() {
            1 => "uint8_t",
            4 => "uint32_t",
            _ => "uint64_t",
        };
        let (p, o, ov, nv, n) = (
            self.fresh(),
            self.fresh(),
            self.fresh(),
            self.fresh(),
            self.fresh(),
        );
        let wide = match elem {
            ElemType::Bool | ElemType::F64 | ElemType::I64 => ov.clone(),
            ElemType::F32 => format!("(double){ov}"),
            _ => format!("(int64_t){ov}"),
        };
        let combined = binary(op, elem.compute(), &wide, v);
        self.line(&format!("{bits} *{p} = ({bits} *)&b{b}[{i}];"));
        self.line(&format!(
            "{bits} {o} = __atomic_load_n({p}, __ATOMIC_RELAXED);"
        ));
        self.open("for (;;) {");
        self.line(&format!(
            "{t} {ov}; __builtin_memcpy(&{ov}, &{o}, sizeof {ov});"
        ));
        self.line(&format!("const {t} {nv} = ({t})({combined});"));
        self.line(&format!(
            "{bits} {n}; __builtin_memcpy(&{n}, &{nv}, sizeof {n});"
        ));
        // On failure the exchange loads the element's current bits into `o`.
        self.line(&format!(
            "if ({n} == {o} || __atomic_compare_exchange_n({p}, &{o}, {n}, 1, \
             __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;"
        ));
        self.close("}");
    }

    /// `buf[index]` widened to its compute type (the index is already checked).
    fn load(&self, buf: BufId, index: &str) -> String {
        let b = buf.0;
        match self.k.buf_elem(buf) {
            ElemType::Bool => format!("b{b}[{index}]"),
            ElemType::F32 => format!("(double)b{b}[{index}]"),
            ElemType::F64 | ElemType::I64 => format!("b{b}[{index}]"),
            _ => format!("(int64_t)b{b}[{index}]"),
        }
    }
}

/// OpenMP clauses (`reduction(+:v3,v5) reduction(*:v7) lastprivate(v9)`) for a vectorised
/// loop whose body is only stores, float sums and products `acc = acc op e` (see
/// `ir::vector::reduction`) with `acc` read nowhere else in the body, and temporaries: a
/// variable assigned once, before anything in the iteration reads it (a walk's coordinate
/// `j = idx[q]`), each lane its own (`lastprivate`: after the loop it holds the last
/// iteration's value, as the serial loop leaves it), with whether it has a reduction. `None`
/// for any other body (another assignment would be a variable the lanes share) or one with
/// neither a reduction nor a store. Integer reductions are exact in any order, so GCC vectorises
/// them without being told (and they wrap through `t_add`, which OpenMP's `+` would not);
/// `min`/`max` stay serial: OpenMP's would not keep the IR's NaN and signed-zero rules.
fn simd_clauses(k: &Kernel, var: VarId, body: &[Stmt]) -> Option<(String, bool)> {
    let mut by_op: Vec<(&str, Vec<String>)> = vec![];
    let mut private: Vec<String> = vec![];
    for (i, s) in body.iter().enumerate() {
        let (acc, e) = match s {
            Stmt::Comment(_) | Stmt::Store { .. } => continue,
            Stmt::Assign(acc, e) if *acc != var => (*acc, e),
            _ => return None,
        };
        let elsewhere = |only_before: bool| {
            body.iter()
                .enumerate()
                .any(|(j, t)| j != i && (!only_before || j < i) && vector::stmt_mentions(t, acc))
        };
        let Some(r) = vector::reduction(k, acc, e) else {
            // A temporary: nothing before it reads it, nothing after assigns it again.
            let reassigned = body[i + 1..]
                .iter()
                .any(|t| matches!(t, Stmt::Assign(v, _) if *v == acc));
            if elsewhere(true) || reassigned || vector::expr_mentions(e, acc) {
                return None;
            }
            private.push(format!("v{}", acc.0));
            continue;
        };
        let Expr::Binary(_, a, b) = e else {
            return None;
        };
        let operand = if **a == Expr::Var(acc) { b } else { a };
        if elsewhere(false) || vector::expr_mentions(operand, acc) {
            return None;
        }
        let op = match (r.ty, r.op) {
            (ElemType::F64, BinOp::Add) => "+",
            (ElemType::F64, BinOp::Mul) => "*",
            _ => return None,
        };
        let name = format!("v{}", acc.0);
        match by_op.iter_mut().find(|(o, _)| *o == op) {
            Some((_, vars)) => vars.push(name),
            None => by_op.push((op, vec![name])),
        }
    }
    if by_op.is_empty() {
        // Stores and temporaries only (`ir::lanes`' loop over a slice's lanes): `simd` keeps
        // GCC from unrolling the loop away before it vectorises it, as it does a short
        // constant count under `ivdep`.
        let stores = body.iter().any(|s| matches!(s, Stmt::Store { .. }));
        return stores.then(|| {
            let clauses = if private.is_empty() {
                String::new()
            } else {
                format!("lastprivate({})", private.join(","))
            };
            (clauses, false)
        });
    }
    let mut clauses: Vec<String> = by_op
        .iter()
        .map(|(op, vars)| format!("reduction({op}:{})", vars.join(",")))
        .collect();
    if !private.is_empty() {
        clauses.push(format!("lastprivate({})", private.join(",")));
    }
    Some((clauses.join(" "), true))
}

/// Whether a loop body gathers: loads at an index read from memory, directly or through a
/// variable the body assigns (a walk's `x[idx[q]]`).
fn gathers(body: &[Stmt]) -> bool {
    let mut assigned = std::collections::HashSet::new();
    walk::assigned(body, &mut assigned);
    let mut found = false;
    walk_exprs(body, &mut |e| {
        if let Expr::Load { index, .. } = e {
            index.visit(&mut |x| match x {
                Expr::Load { .. } => found = true,
                Expr::Var(v) if assigned.contains(v) => found = true,
                _ => {}
            });
        }
    });
    found
}

/// Whether the C text `text` names variable `v` (`v3`, not `v31` or `tv3`).
fn mentions_var(text: &str, v: VarId) -> bool {
    let name = format!("v{}", v.0);
    let bytes = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    text.match_indices(&name).any(|(at, _)| {
        let end = at + name.len();
        (at == 0 || !word(bytes[at - 1])) && (end == bytes.len() || !word(bytes[end]))
    })
}

/// Whether a loop body is elementwise: stores, and assignments of temporaries each assigned
/// before any read in the iteration (no value carried from one iteration to the next), with
/// no loop, branch or other statement. Such a loop is one GCC may vectorise.
fn elementwise(body: &[Stmt]) -> bool {
    let mut assigned: Vec<VarId> = vec![];
    let mut read_before: Vec<VarId> = vec![];
    for s in body {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Var(v) = x
                    && !assigned.contains(v)
                {
                    read_before.push(*v);
                }
            });
        }
        match s {
            Stmt::Store { .. } | Stmt::Comment(_) => {}
            Stmt::Assign(v, _) => assigned.push(*v),
            _ => return false,
        }
    }
    body.iter().any(|s| matches!(s, Stmt::Store { .. }))
        && !assigned.iter().any(|v| read_before.contains(v))
}

/// Whether GCC can vectorise a loop body as this backend prints it: no call into libm
/// (`exp`, `log`, the other math functions, a float remainder), no float `min`/`max`
/// (`t_minf`: branches on NaN and equal operands) and no integer division (`t_div`: branches
/// on the divisor). In a loop GCC leaves scalar, `t_mulza`'s mask (a move to an integer
/// register, an `and`, a move back) lengthens each product's chain where `t_mulz`'s select
/// does not: SoftRas's pixel loop (`exp`, `min`, `max`) took 1.5x as long with it.
fn vectorisable(k: &Kernel, body: &[Stmt]) -> bool {
    let mut ok = true;
    walk_exprs(body, &mut |e| match e {
        Expr::Unary(UnOp::Exp | UnOp::Log | UnOp::Math(_), _) => ok = false,
        Expr::Binary(BinOp::Min | BinOp::Max | BinOp::Rem, a, _)
            if k.type_of(a) == ElemType::F64 =>
        {
            ok = false
        }
        Expr::Binary(BinOp::Div | BinOp::Rem, a, _) if k.type_of(a) == ElemType::I64 => ok = false,
        _ => {}
    });
    ok
}

/// `(j, b)` when `a & c` is `0 <= j & j < len(b)`: `j` in bounds of `b` (`len` is never
/// negative, so one unsigned comparison says the same).
fn within<'e>(a: &'e Expr, c: &'e Expr) -> Option<(&'e Expr, BufId)> {
    let (Expr::Binary(BinOp::Le, zero, j), Expr::Binary(BinOp::Lt, j2, len)) = (a, c) else {
        return None;
    };
    match (&**zero, &**len) {
        (Expr::Const(Scalar::I64(0)), Expr::Len(buf)) if j == j2 => Some((j, *buf)),
        _ => None,
    }
}

pub(super) fn binary(op: BinOp, ty: ElemType, x: &str, y: &str) -> String {
    use BinOp::*;
    let float = ty == ElemType::F64;
    let f = |name: &str| format!("{name}({x}, {y})");
    let infix = |o: &str| format!("({x} {o} {y})");
    match op {
        Add if float => infix("+"),
        Sub if float => infix("-"),
        Mul if float => f("t_mulf"),
        IeeeMul => infix("*"),
        Div if float => infix("/"),
        Rem if float => f("H.fmod"),
        Min if float => f("t_minf"),
        Max if float => f("t_maxf"),
        Min if ty == ElemType::Limit => f("t_minl"),
        Max if ty == ElemType::Limit => f("t_maxl"),
        Add => f("t_add"),
        Sub => f("t_sub"),
        Mul => f("t_mul"),
        Div => f("t_div"),
        Rem => f("t_rem"),
        Min => f("t_mini"),
        Max => f("t_maxi"),
        // C's float comparisons are ordered (false on NaN) except `!=`, as the IR specifies.
        Eq => infix("=="),
        Ne => infix("!="),
        Lt => infix("<"),
        Le => infix("<="),
        Gt => infix(">"),
        Ge => infix(">="),
        And => infix("&"),
        Or => infix("|"),
        Xor => infix("^"),
        Shl => f("t_shl"),
        Shr => f("t_shr"),
        Math(m) => format!("H.math2[{}]({x}, {y})", m.index()),
    }
}

fn cast(from: ElemType, to: ElemType, x: &str) -> String {
    match (from, to) {
        _ if from == to => x.to_string(),
        (ElemType::I64, ElemType::F64) | (ElemType::Bool, ElemType::F64) => {
            format!("((double){x})")
        }
        (ElemType::F64, ElemType::I64) => format!("t_f2i({x})"),
        (ElemType::Bool, _) => format!("((int64_t){x})"),
        (ElemType::I64, ElemType::Bool) => format!("({x} != 0)"),
        (_, ElemType::Bool) => format!("({x} != 0.0)"),
        (f, t) => unreachable!("checked IR has no cast from {f} to {t}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_declares_one_slot_per_called_function() {
        // `backend::c::Helpers` holds `Math1::ALL.len()` and `Math2::ALL.len()` pointers.
        use crate::ir::math::{Math1, Math2};
        let m1 = format!("(*math1[{}])(double)", Math1::ALL.len());
        let m2 = format!("(*math2[{}])(double, double)", Math2::ALL.len());
        assert!(PRELUDE.contains(&m1) && PRELUDE.contains(&m2));
    }

    #[test]
    fn constants_read_back_exactly() {
        assert_eq!(c_const(Scalar::I64(i64::MIN)), "INT64_MIN");
        assert_eq!(c_const(Scalar::I64(-5)), "INT64_C(-5)");
        assert_eq!(c_const(Scalar::F64(-0.0)), "(-0.0)");
        assert_eq!(c_const(Scalar::F64(1e300)), "(1e300)");
        assert!(c_const(Scalar::F64(f64::NAN)).starts_with("t_bits(UINT64_C(0x7ff8"));
        assert_eq!(
            c_const(Scalar::F64(f64::NEG_INFINITY)),
            "t_bits(UINT64_C(0xfff0000000000000))"
        );
    }
}
