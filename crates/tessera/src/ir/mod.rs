//! The low-level loop IR that every backend consumes.
//!
//! A [`Kernel`] is one function over an array of buffers. Variables are mutable, typed and
//! function-wide (all start at zero). Arithmetic happens only in the compute types `Bool`, `I64`
//! and `F64`; loads of narrower types widen implicitly to their compute type and stores narrow
//! implicitly from it (see `types.rs`); `Cast` converts between compute types. The lowering is
//! responsible for producing well-typed IR; [`Kernel::check`] verifies it.

pub mod atomic;
pub mod build;
pub mod check;
pub mod cx;
pub mod dead_fill;
pub mod distribute;
mod effects;
pub mod exact_points;
pub mod fill_sink;
pub mod grow_hoist;
pub mod hoist;
pub mod ieee_mul;
pub mod innermost;
pub mod interleave;
pub mod jam;
pub mod lanes;
pub mod locals;
pub mod math;
pub mod merge_stores;
pub mod print;
pub mod promote;
pub mod prune;
pub mod recheck;
pub mod split;
pub mod values;
pub mod vector;
pub mod walk;

use crate::types::{ElemType, Scalar};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    pub name: String,
    /// A compute type: `Bool`, `I64` or `F64`.
    pub ty: ElemType,
    /// Only copied to and from, on a rare path (the state `ieee_mul.rs` saves for a re-run):
    /// a backend may keep it in memory, so that it takes no register from a hot loop it is
    /// live across.
    pub cold: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BufDecl {
    pub name: String,
    pub elem: ElemType,
    /// Whether the kernel may `Grow` it (an output level array).
    pub growable: bool,
    /// The tensor whose storage it is (a fault on it names the tensor); `None` for the
    /// kernel's own buffers.
    pub tensor: Option<String>,
    /// Scratch space of one run (`ir::lanes`' lane arrays): what it holds after the run is
    /// nobody's (the runtime drops it), so a backend may keep it elsewhere than in the buffer
    /// handed in (the C backend: an aligned local array, `backend::c::emit`).
    pub scratch: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub bufs: Vec<BufDecl>,
    pub vars: Vec<VarDecl>,
    pub body: Vec<Stmt>,
    /// The runtime errors the kernel can raise with `Stmt::Fail(k)`.
    pub errors: Vec<cx::KernelError>,
    /// Facts about buffers' contents the caller vouches for: every element of `buf` is in
    /// `0..below` whenever `below` is positive. `below` is a pure expression with the same
    /// value all through a run (a load of the dimensions buffer, which the runtime fills with 0
    /// when it vouches for nothing). Provided the kernel never writes `buf`, a backend may
    /// drop bounds checks behind one test per loop (`backend::versioning`): for coordinates,
    /// that of a load `b[v]` where `v` only ever holds elements of such buffers (`below`
    /// positive and at most `b`'s length); for positions, those of `b[q]` in a loop
    /// `for q = s..e` whose ends only ever hold such elements (`below - 1` at most `b`'s
    /// length).
    pub bounded: Vec<Bounded>,
    /// F64 buffers whose elements the caller vouches are never NaN: the values of the real
    /// coordinates of tensors the kernel only reads (`levels::real`: a valid tensor stores no
    /// NaN coordinate). `ir::exact_points` then compares them as plain floats.
    pub not_nan: Vec<BufId>,
    /// The variables of the `For` loops that run in SIMD lanes where a backend can (the
    /// `vectorize` schedule mark, `ast::LoopMode::Vector`): their iterations carry no
    /// dependence but reductions into one element with `+ * min max & |`, so a backend may
    /// run several at once and combine the reductions' lanes after the loop. Every copy of
    /// such a loop a pass makes keeps its variable, and so the mark.
    pub vectorized: Vec<VarId>,
}

/// One fact of [`Kernel::bounded`]: every element of `buf` is in `0..below` when `below > 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounded {
    pub buf: BufId,
    pub below: Expr,
    pub what: Vouched,
}

/// What a [`Bounded`] buffer's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vouched {
    /// Coordinates of a dimension: `below` is the dimension, and the elements index arrays
    /// of that length (a gather `x[j]`).
    Coordinates,
    /// Positions in a level's entry arrays (`SparseList`'s `ptr`): `below - 1` is the largest,
    /// the end of the last fiber, so entry arrays are indexed by the positions *between* two
    /// of them, never by the largest itself.
    Positions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Arithmetic negation (I64, F64).
    Neg,
    /// Logical not on Bool, bitwise not on I64.
    Not,
    /// Absolute value (I64 wraps on MIN, F64).
    Abs,
    /// Square root (F64).
    Sqrt,
    /// e^x (F64).
    Exp,
    /// Natural logarithm (F64).
    Log,
    /// Round toward -inf (F64).
    Floor,
    /// A called float function (F64 → F64): `sin`, `tanh`, `round`, ... (`math`).
    Math(math::Math1),
    /// The value of a point, dropping its infinitesimal (Limit → F64).
    LimitVal,
    /// The infinitesimal sign of a point, -1, 0 or 1 (Limit → I64).
    LimitEps,
    /// The first point after (Limit → Limit): `v-ε → v`, `v → v+ε`, and `v+ε` stays `v+ε`
    /// (the infinitesimal saturates, as `Limit::next`). On I64, `x + 1` (wrapping).
    After,
    /// The last point before (Limit → Limit): `v+ε → v`, `v → v-ε`, and `v-ε` stays `v-ε`
    /// (as `Limit::prev`). On I64, `x - 1` (wrapping).
    Before,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// Wrapping on I64.
    Add,
    Sub,
    /// Wrapping on I64. On F64 a zero factor gives `+0.0` even against NaN, an infinity or a
    /// negative factor (`semantics::mul_f`), so skipping a sparse operand's zeros, or folding
    /// `x * 0`, never changes a result.
    Mul,
    /// F64 only: plain IEEE 754 multiplication (`0 * NaN` and `0 * Inf` are NaN, `-2 * 0` is
    /// `-0.0`). Never produced by the lowering; `ieee_mul::ieee_products` puts it where a NaN
    /// or zero accumulator re-runs the loop with `Mul`, so results are still the strong zero's.
    IeeeMul,
    /// F64 division; on I64 truncating division with x/0 = 0 (never traps).
    Div,
    /// Remainder truncated toward zero; on I64 x%0 = 0 (never traps). On F64 like C's fmod.
    Rem,
    /// The smaller operand (on Limit, in the points' order). On F64, IEEE 754-2019 `minimum` (`semantics::min_f`): NaN if
    /// either operand is NaN, and -0.0 below 0.0, so it is commutative.
    Min,
    /// The larger operand; on F64 IEEE 754-2019 `maximum` (`semantics::max_f`).
    Max,
    /// Comparisons take two operands of one type and give Bool. F64 comparisons are ordered
    /// (false on NaN) except Ne, which is true on NaN. Limit comparisons are lexicographic on
    /// (value, infinitesimal) and total: the one canonical NaN point is above `+Inf` and
    /// equal to itself (see `Expr::MakeLimit`).
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Bitwise on I64, logical on Bool.
    And,
    Or,
    Xor,
    /// I64 only; the shift amount is taken modulo 64.
    Shl,
    /// Arithmetic shift right, I64 only, amount modulo 64.
    Shr,
    /// A called float function of two operands (F64 × F64 → F64): `pow`, `atan2`, `hypot`,
    /// `copysign`, `logaddexp`, `nextafter`, and `mod`/`fld` of floats.
    Math(math::Math2),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant; its type is the scalar's type (only Bool, I64, F64 and Limit constants
    /// appear). A Limit constant means its canonical point (`Scalar::limit`).
    Const(Scalar),
    Var(VarId),
    /// `buf[index]` (index is I64; loads widen to the compute type of the buffer element).
    Load {
        buf: BufId,
        index: Box<Expr>,
    },
    /// Current length of a buffer (I64).
    Len(BufId),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? a : b` (both branches are evaluated; they have no effects).
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Convert between compute types: I64↔F64 (F64→I64 truncates, saturating, NaN→0),
    /// Bool→I64/F64 (0/1), I64/F64→Bool (`!= 0`).
    Cast(ElemType, Box<Expr>),
    /// The point `value + sign(eps)·ε` (F64, I64 → Limit): a negative `eps` is `-ε`, a positive
    /// one `+ε`. The value is canonicalised as by `Scalar::limit`: `-0.0` becomes `+0.0` (equal
    /// reals are equal points) and any NaN the one canonical NaN, which orders above `+Inf`.
    MakeLimit(Box<Expr>, Box<Expr>),
    /// First position `p` in `[lo, hi)` with `buf[p] >= key` (I64 buffer sorted ascending on that
    /// range), or `hi` if none (I64). Binary search.
    SearchGe {
        buf: BufId,
        lo: Box<Expr>,
        hi: Box<Expr>,
        key: Box<Expr>,
    },
    /// Open-addressing lookup in the I64 hash table `table` (empty slots hold -1, keys are
    /// non-negative, linear probing from `hash_slot(key, len)`): the slot holding `key`, else
    /// the first empty slot of its probe sequence, else -1 (empty or full table, or a negative
    /// key). See `runtime::intrinsics::hash_find`.
    HashFind {
        table: BufId,
        key: Box<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Assign(VarId, Expr),
    /// `buf[index] = value` (value of the buffer's compute type, narrowed on store).
    Store {
        buf: BufId,
        index: Expr,
        value: Expr,
    },
    /// `buf[index] = op(buf[index], value)` as one indivisible update (value of the buffer's
    /// compute type; the element is widened, combined and narrowed as a `Store` of
    /// `Binary(op, Load, value)` would, so every result equals that store's). `op` is `Add`,
    /// `Mul`, `Min`, `Max`, `And` or `Or`. The lowering writes it for a reduction into a
    /// [`Private`] output marked `atomic`, so that the chunks of a parallel range may update
    /// one shared buffer instead of copies (`backend::parallel` chooses); where no chunks
    /// share a buffer, [`deatomize`] turns it back into the plain store.
    Atomic {
        buf: BufId,
        index: Expr,
        op: BinOp,
        value: Expr,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `for var = start; var < stop; var += 1` — `stop` is evaluated once, before the loop.
    /// Afterwards `var` holds the first value not below `stop` (`start` if the loop never
    /// ran), or its value at a `break`.
    For {
        var: VarId,
        start: Expr,
        stop: Expr,
        body: Vec<Stmt>,
    },
    /// `while cond { body }`.
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// Leave the innermost `For`/`While`.
    Break,
    /// Ensure `len(buf) >= len`: grows the buffer (capacity at least doubles, so repeated growth
    /// is amortised O(1)); new elements are zero. Does nothing if already long enough.
    Grow {
        buf: BufId,
        len: Expr,
    },
    /// Set `buf[start..stop]` to `value`.
    Fill {
        buf: BufId,
        start: Expr,
        stop: Expr,
        value: Expr,
    },
    /// Sort the I64 elements `buf[lo..hi]` ascending in place (out-of-bounds range: a fault).
    /// With `flags` (a Bool buffer), the elements are distinct slots of `flags` whose flags
    /// are set, and no other flag between the least and the greatest of them is set (a
    /// `SparseByteMap`'s `srt` and `tbl`): the helper may then list the set flags of that
    /// range instead of comparing (`runtime::intrinsics::sort_slots`); a slot outside
    /// `flags` is a fault on `flags`.
    Sort {
        buf: BufId,
        flags: Option<BufId>,
        lo: Expr,
        hi: Expr,
    },
    /// Stable-sort the I64 elements `perm[lo..hi]` by `keys[perm[k]]` ascending: afterwards
    /// they list the same positions of `keys` in key order, equal keys in their old order, so
    /// repeated sorts by less significant keys first give a lexicographic order. A position
    /// outside `keys` is an out-of-bounds fault on `keys`.
    SortPerm {
        keys: BufId,
        perm: BufId,
        lo: Expr,
        hi: Expr,
    },
    /// A parallel loop's range (see [`Chunked`]).
    Chunked(Box<Chunked>),
    /// Return from the kernel with error `k` (an index into `Kernel::errors`).
    Fail(u32),
    /// A note shown by the printer; no effect.
    Comment(String),
}

/// A parallel loop's range: `body` runs once per chunk of `start..=stop`, with `lo` and `hi`
/// set to the chunk's first and last index. Chunks partition the range and may run in any
/// order or at once on several threads (`backend::parallel`), each with its own copy of the
/// `private` buffers. Run as one chunk (`lo = start; hi = stop; body`) it is the serial loop,
/// and that is what a backend does with it inside a kernel: the runner runs the chunks of a
/// `Chunked` at a kernel's top level on threads by splitting the kernel around it
/// (`ir::split`).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunked {
    pub lo: VarId,
    pub hi: VarId,
    /// The whole range, evaluated once before the chunks (I64).
    pub start: Expr,
    pub stop: Expr,
    pub body: Vec<Stmt>,
    /// Outputs several iterations reduce into: each chunk writes a copy filled with the
    /// reducer's identity, and the copies are folded into the buffer in chunk order.
    pub private: Vec<Private>,
    /// Arrays of workspaces each iteration declares afresh: each chunk works on its own copy
    /// (starting as the buffer is), and the buffer ends as the last chunk's copy, which is
    /// what the serial loop's last iteration leaves.
    pub scratch: Vec<BufId>,
    /// The state variables of those workspaces' levels (a SparseByteMap's entry count): after
    /// the range they hold what the last chunk left, like the arrays.
    pub scratch_state: Vec<VarId>,
    /// Sparse outputs whose fibers under the loop's index (the rows of a `Dense(SparseList)`
    /// output `C[i, j]`) the chunks append separately: each chunk appends into fragments of
    /// its own that start empty, and the fragments are concatenated in chunk order after the
    /// range, which is the serial loop's append order.
    pub rows: Vec<Rows>,
    /// A position array of the level the loop's index drives (`pos[i]..pos[i + 1]` are row
    /// `i`'s entries): chunks then get about equal numbers of entries rather than of indices.
    pub weights: Option<BufId>,
    /// A second fiber the body walks per entry of the weighed level (Gustavson's `B[k, :]`
    /// for each entry `k` of `A[i, :]`): the runner counts those fibers' lengths too when it
    /// decides whether the range's work pays for threads. Only that decision depends on it.
    pub nested: Option<Nested>,
    /// The schedule's choice for the `atomic` privates (`parallelize(i, atomics)`: `Some(true)`,
    /// `parallelize(i, copies)`: `Some(false)`), which overrides the runner's
    /// (`backend::parallel::Atomics`) for this range; `None` leaves it to the runner.
    pub atomics: Option<bool>,
}

impl Chunked {
    /// The range `start..stop` cut into `lo..hi` chunks running `body`, with nothing private,
    /// no workspaces or appended rows, no weights and the runner's choice of atomics.
    pub fn plain(lo: VarId, hi: VarId, start: Expr, stop: Expr, body: Vec<Stmt>) -> Chunked {
        Chunked {
            lo,
            hi,
            start,
            stop,
            body,
            private: vec![],
            scratch: vec![],
            scratch_state: vec![],
            rows: vec![],
            weights: None,
            nested: None,
            atomics: None,
        }
    }
}

/// The fiber a [`Chunked`] range's body walks inside each entry of its weighed level: entry
/// `p` (of `weights`' level) has coordinate `crd[p]`, and the loop nested under it walks
/// `ptr[crd[p]]..ptr[crd[p] + 1]`. Both arrays are integer arrays of a level's width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nested {
    /// The weighed level's coordinates (`A_idx`).
    pub crd: BufId,
    /// The position array of the level those coordinates select a fiber of (`B_ptr`).
    pub ptr: BufId,
}

/// A sparse level a [`Chunked`] range appends to row by row (see `levels::Appends`).
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    /// The number of entries appended so far (I64); the arrays below are written at it.
    pub cursor: VarId,
    /// The last fiber that received an entry, for levels that check fiber order (I64).
    pub last: Option<VarId>,
    /// The arrays indexed by entry, appended at `cursor`: the chunks' fragments of each are
    /// concatenated into it.
    pub arrays: Vec<BufId>,
}

/// A buffer each chunk of a [`Chunked`] gets its own copy of.
#[derive(Clone, Debug, PartialEq)]
pub struct Private {
    pub buf: BufId,
    /// How a copy folds into the buffer, `buf[k] = fold(buf[k], copy[k])`, chunk by chunk in
    /// chunk order.
    pub fold: Fold,
    /// The value copies start from, of the buffer's compute type.
    pub identity: Scalar,
    /// Every update of `buf` in the range's body is a [`Stmt::Atomic`] with the fold's
    /// operator, and nothing else there reads or writes it: the chunks may then update the
    /// buffer itself, at once, instead of copies (no copy to fill, no fold), which the runner
    /// chooses when copies would cost more than the threads save (`backend::parallel`).
    pub atomic: bool,
}

/// How a private copy folds into its buffer after a parallel range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// `buf[k] = op(buf[k], copy[k])` (`Add`, `Mul`, `Min`, `Max`, `And`, `Or`).
    Op(BinOp),
    /// `<<choose(z)>>=`, `z` the private's identity: `buf[k] = copy[k]` where `buf[k] == z`
    /// (numeric equality, as the reducer compares), else `buf[k]` stays. Not commutative, but
    /// associative with identity `z`, and the copies fold in chunk order, which is the serial
    /// order of the iterations: the result is the serial loop's first value other than `z`.
    Choose,
}

impl std::fmt::Display for Fold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fold::Op(op) => write!(f, "{op:?}"),
            Fold::Choose => f.write_str("Choose"),
        }
    }
}

impl Expr {
    /// The direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Const(_) | Expr::Var(_) | Expr::Len(_) => vec![],
            Expr::Load { index: a, .. } | Expr::HashFind { key: a, .. } => vec![a],
            Expr::Unary(_, a) | Expr::Cast(_, a) => vec![a],
            Expr::Binary(_, a, b) | Expr::MakeLimit(a, b) => vec![a, b],
            Expr::Select(c, a, b) => vec![c, a, b],
            Expr::SearchGe { lo, hi, key, .. } => vec![lo, hi, key],
        }
    }

    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Const(_) | Expr::Var(_) | Expr::Len(_) => vec![],
            Expr::Load { index: a, .. } | Expr::HashFind { key: a, .. } => vec![a],
            Expr::Unary(_, a) | Expr::Cast(_, a) => vec![a],
            Expr::Binary(_, a, b) | Expr::MakeLimit(a, b) => vec![a, b],
            Expr::Select(c, a, b) => vec![c, a, b],
            Expr::SearchGe { lo, hi, key, .. } => vec![lo, hi, key],
        }
    }

    /// This expression and every sub-expression, outermost first.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for c in self.children() {
            c.visit(f);
        }
    }
}

impl Kernel {
    /// The number of statements, nested ones included (comments not counted): the measure the
    /// runner's kernel-size budget is checked against, since native compile time grows with it.
    pub fn size(&self) -> usize {
        Kernel::body_size(&self.body)
    }

    /// [`Kernel::size`] of a list of statements.
    pub fn body_size(body: &[Stmt]) -> usize {
        body.iter()
            .map(|s| {
                let own = usize::from(!matches!(s, Stmt::Comment(_)));
                own + s
                    .bodies()
                    .iter()
                    .map(|b| Kernel::body_size(b))
                    .sum::<usize>()
            })
            .sum()
    }
}

impl Stmt {
    /// The expressions the statement evaluates itself (not those of nested statements).
    pub fn own_exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Assign(_, e) | Stmt::Grow { len: e, .. } => vec![e],
            Stmt::Store { index, value, .. } | Stmt::Atomic { index, value, .. } => {
                vec![index, value]
            }
            Stmt::If { cond, .. } | Stmt::While { cond, .. } => vec![cond],
            Stmt::For { start, stop, .. } => vec![start, stop],
            Stmt::Fill {
                start, stop, value, ..
            } => vec![start, stop, value],
            Stmt::Sort { lo, hi, .. } | Stmt::SortPerm { lo, hi, .. } => vec![lo, hi],
            Stmt::Chunked(c) => vec![&c.start, &c.stop],
            Stmt::Break | Stmt::Fail(_) | Stmt::Comment(_) => vec![],
        }
    }

    pub fn own_exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Stmt::Assign(_, e) | Stmt::Grow { len: e, .. } => vec![e],
            Stmt::Store { index, value, .. } | Stmt::Atomic { index, value, .. } => {
                vec![index, value]
            }
            Stmt::If { cond, .. } | Stmt::While { cond, .. } => vec![cond],
            Stmt::For { start, stop, .. } => vec![start, stop],
            Stmt::Fill {
                start, stop, value, ..
            } => vec![start, stop, value],
            Stmt::Sort { lo, hi, .. } | Stmt::SortPerm { lo, hi, .. } => vec![lo, hi],
            Stmt::Chunked(c) => vec![&mut c.start, &mut c.stop],
            Stmt::Break | Stmt::Fail(_) | Stmt::Comment(_) => vec![],
        }
    }

    /// The statement lists nested in this one.
    pub fn bodies(&self) -> Vec<&Vec<Stmt>> {
        match self {
            Stmt::If {
                then, otherwise, ..
            } => vec![then, otherwise],
            Stmt::For { body, .. } | Stmt::While { body, .. } => vec![body],
            Stmt::Chunked(c) => vec![&c.body],
            _ => vec![],
        }
    }

    pub fn bodies_mut(&mut self) -> Vec<&mut Vec<Stmt>> {
        match self {
            Stmt::If {
                then, otherwise, ..
            } => vec![then, otherwise],
            Stmt::For { body, .. } | Stmt::While { body, .. } => vec![body],
            Stmt::Chunked(c) => vec![&mut c.body],
            _ => vec![],
        }
    }
}

impl Kernel {
    /// Per buffer, whether the kernel may change its elements or length (stores, fills,
    /// grows, sorts): the buffers that must be owned memory, not shared, while it runs.
    pub fn modified_bufs(&self) -> Vec<bool> {
        fn walk(body: &[Stmt], out: &mut [bool]) {
            for s in body {
                match s {
                    Stmt::Store { buf, .. }
                    | Stmt::Atomic { buf, .. }
                    | Stmt::Grow { buf, .. }
                    | Stmt::Fill { buf, .. }
                    | Stmt::Sort { buf, .. }
                    | Stmt::SortPerm { perm: buf, .. } => out[buf.0 as usize] = true,
                    Stmt::Chunked(c) => {
                        for p in &c.private {
                            out[p.buf.0 as usize] = true;
                        }
                        for b in c
                            .scratch
                            .iter()
                            .chain(c.rows.iter().flat_map(|r| &r.arrays))
                        {
                            out[b.0 as usize] = true;
                        }
                    }
                    _ => {}
                }
                for b in s.bodies() {
                    walk(b, out);
                }
            }
        }
        let mut out = vec![false; self.bufs.len()];
        walk(&self.body, &mut out);
        out
    }

    pub fn var_ty(&self, v: VarId) -> ElemType {
        self.vars[v.0 as usize].ty
    }
    pub fn buf_elem(&self, b: BufId) -> ElemType {
        self.bufs[b.0 as usize].elem
    }

    /// The compute type of an expression. Panics on malformed IR; run [`Kernel::check`] first
    /// on IR that did not come from the lowering.
    pub fn type_of(&self, e: &Expr) -> ElemType {
        match e {
            Expr::Const(s) => s.ty().compute(),
            Expr::Var(v) => self.var_ty(*v),
            Expr::Load { buf, .. } => self.buf_elem(*buf).compute(),
            Expr::Len(_) | Expr::SearchGe { .. } | Expr::HashFind { .. } => ElemType::I64,
            Expr::Unary(UnOp::LimitVal, _) => ElemType::F64,
            Expr::Unary(UnOp::LimitEps, _) => ElemType::I64,
            Expr::Unary(_, a) => self.type_of(a),
            Expr::MakeLimit(..) => ElemType::Limit,
            Expr::Binary(op, a, _) => match op {
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    ElemType::Bool
                }
                _ => self.type_of(a),
            },
            Expr::Select(_, a, _) => self.type_of(a),
            Expr::Cast(t, _) => *t,
        }
    }
}
