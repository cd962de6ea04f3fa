//! The notation AST: what the parser produces, the printer prints, the builder builds, the
//! transforms rewrite and the evaluator executes.
//!
//! Every node carries a [`Span`] (1-based line:column in the program text) for error messages.
//! Spans never take part in equality, so `parse(print(p)) == p` compares structure only.

use crate::types::Scalar;
use std::sync::Arc;

pub use crate::span::Span;

/// A whole program: user reducer definitions and a sequence of statements at global scope.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Program {
    /// `reducer name(a, b) = ...` definitions, in the order written. A program carries its own
    /// reducers, so two programs that differ only in a reducer's body never share a kernel.
    pub reducers: Vec<ReducerDef>,
    pub body: Vec<Stmt>,
}

// Expressions compare literals bit for bit (see `Scalar`), so equality is reflexive.
impl Eq for Program {}

impl Program {
    /// The same reducers around another body (what every AST-to-AST pass returns).
    pub fn with_body(&self, body: Vec<Stmt>) -> Program {
        Program {
            reducers: self.reducers.clone(),
            body,
        }
    }

    /// Register a user reducer (the Rust counterpart of a `reducer` line).
    pub fn add_reducer(&mut self, def: ReducerDef) -> &mut Program {
        self.reducers.push(def);
        self
    }
}

/// `reducer name(a, b) = body [identity v] [annihilator v] [commutative] [associative]
/// [idempotent]`: a user reducer. `x[...] <<name>>= v` stores `body` with `a` bound to the old
/// value and `b` to `v`, both first converted to the class of `old` joined with `v`'s (as for
/// `<<min>>=`); the result is stored back into the element type.
///
/// The properties are the user's promise and are trusted, not verified: the simplifier drops
/// reductions of the `identity` (`f(x, id) == x`), stops short-circuit loops at the
/// `annihilator` (`f(z, x) == z`), and applies an `idempotent` reducer (`f(f(x, v), v) ==
/// f(x, v)`) once for a run of equal values. `commutative` and `associative` are recorded for
/// schedules that reorder reductions; the lowering visits coordinates in the reference
/// evaluator's order and does not rely on them. A false promise gives kernels that disagree with
/// the reference evaluator, which always applies `body`.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct ReducerDef {
    pub name: String,
    /// The names of the old and the new value (`a` and `b` in the examples).
    pub params: [String; 2],
    /// An expression over the two parameters, literals and built-in operators and functions.
    pub body: Expr,
    pub identity: Option<Scalar>,
    pub annihilator: Option<Scalar>,
    pub commutative: bool,
    pub associative: bool,
    pub idempotent: bool,
    /// `derivative(e)`: the derivative of the reduced result with respect to one reduced
    /// element, `e` over the two parameters read as (the final result, the element), for
    /// reverse-mode differentiation (`transforms::grad`). Only commutative, associative
    /// reducers declare one: the result is then a function of the set of elements, and
    /// `sum` has `1`, `max` `ifelse(b == a, 1.0, 0.0)`, a log-sum-exp `exp(b - a)`.
    pub derivative: Option<Expr>,
    /// Where `reducer` is written.
    pub span: Span,
}

// Expressions compare literals bit for bit (see `Scalar`), so equality is reflexive.
impl Eq for ReducerDef {}

impl ReducerDef {
    /// `reducer name(a, b) = body`, without properties.
    pub fn new(name: &str, body: Expr) -> ReducerDef {
        ReducerDef {
            name: name.to_string(),
            params: ["a".to_string(), "b".to_string()],
            body,
            identity: None,
            annihilator: None,
            commutative: false,
            associative: false,
            idempotent: false,
            derivative: None,
            span: Span::default(),
        }
    }
}

/// The reducer names the language defines itself (`<<min>>=` ...); a user reducer may not take
/// one of them.
pub const BUILTIN_REDUCERS: &[&str] = &["min", "max", "and", "or", "choose"];

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

/// How a loop's iterations run (the schedule commands `parallelize` and `vectorize` set it;
/// the text syntax spells it around the extent: `parallel(_)`, `parallel(_, atomics)`,
/// `vectorize(_)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoopMode {
    /// One iteration after the other (a plain `for`).
    #[default]
    Serial,
    /// On several threads; the [`Folds`] choice says how its reductions combine.
    Parallel(Folds),
    /// In SIMD lanes: the `vectorize` schedule command (and the compiler, for a program that
    /// says `vectorize(_)` itself) checked that the iterations carry no dependence but
    /// reductions into one element or into an element of their own; backends that can (C's
    /// `omp simd` or `ivdep`, the JIT's 128-bit lanes, `ir::vector`) run several iterations
    /// per instruction, float sums and products reassociated.
    Vector,
}

impl LoopMode {
    pub fn is_parallel(self) -> bool {
        matches!(self, LoopMode::Parallel(_))
    }
}

/// How a parallel loop's reductions into shared outputs combine across threads: what the
/// runner's heuristic chooses (`Auto`, the default, `parallelize(i)`), or the schedule's
/// explicit choice (`parallelize(i, atomics)`, `parallelize(i, copies)`), which overrides
/// `Runner::set_atomics` for that loop (`backend::parallel::Atomics::Always` / `Never`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Folds {
    #[default]
    Auto,
    Atomics,
    Copies,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub enum StmtKind {
    /// `T .= init`: (re)declare tensor `T`, every entry (its fill) equal to `init`.
    Declare { tensor: String, init: Expr },
    /// `T[idx...] op rhs`.
    Assign {
        lhs: Access,
        op: AssignOp,
        rhs: Expr,
    },
    /// `for i = extent ... end`. `for i = _, j = _` parses as two nested loops.
    /// `for i = parallel(extent)` marks the loop parallel: the iterations may run on several
    /// threads (`transforms::parallel` checks that they do not race); `vectorize(extent)`
    /// marks it for SIMD lanes (see [`LoopMode`]). A field rather than an `Extent` variant,
    /// so that every pass that rebuilds a loop must say what becomes of the mark.
    Loop {
        index: String,
        extent: Extent,
        body: Vec<Stmt>,
        parallel: LoopMode,
    },
    /// `if cond ... [else ...] end` (Finch's sieve; `else` is sugar for a second sieve on `!cond`).
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `let x = value ... end`: binds an immutable variable for the body.
    Let {
        name: String,
        value: Expr,
        body: Vec<Stmt>,
    },
    /// `begin ... end`.
    Block(Vec<Stmt>),
    /// `@freeze(T)`: finish updating `T`, reads may follow (inserted by lifecycle automation).
    Freeze { tensor: String },
    /// `@thaw(T)`: reopen `T` for updates (inserted by lifecycle automation).
    Thaw { tensor: String },
}

/// The range of a loop index.
#[derive(Clone, Debug, PartialEq, Hash)]
pub enum Extent {
    /// `_`: inferred from the tensors the index accesses.
    Auto,
    /// `a:b`, inclusive at both ends, 0-based.
    Range(Expr, Expr),
}

/// The operator of an assignment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AssignOp {
    /// `=`: overwrite. On a freshly declared tensor writing its fill value is a no-op (Finch's
    /// `initwrite`).
    Overwrite,
    /// `+=`, `*=`, `<<min>>=` ...
    Reduce(Reducer),
}

/// A reduction operator. Its algebraic properties live in `symbolic::algebra`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reducer {
    /// `+=`
    Add,
    /// `-=` (`x -= y` is `x = x - y`).
    Sub,
    /// `*=`
    Mul,
    /// `&=` on bool/int (also spelled `<<and>>=`)
    And,
    /// `|=` on bool/int (also spelled `<<or>>=`)
    Or,
    /// `<<min>>=`
    Min,
    /// `<<max>>=`
    Max,
    /// `<<choose(z)>>=`: keeps whichever operand is not `z` (GraphBLAS "any"); the old value wins.
    Choose(Scalar),
    /// `<<name>>=`: a user reducer, by name, as the parser and the builder produce it.
    Named(String),
    /// A user reducer with its definition attached, which normalisation
    /// (`transforms::reducers::resolve_reducers`) substitutes for `Named` so that every later
    /// stage (typing, the simplifier's algebra, the lowering) sees the definition. It prints as
    /// `<<name>>`.
    User(Arc<ReducerDef>),
}

/// The access protocol requested for one index of an access (`A[gallop(i)]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Walk,
    Gallop,
    Follow,
    Extrude,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Walk => "walk",
            Protocol::Gallop => "gallop",
            Protocol::Follow => "follow",
            Protocol::Extrude => "extrude",
        }
    }
    pub fn from_name(s: &str) -> Option<Protocol> {
        Some(match s {
            "walk" => Protocol::Walk,
            "gallop" => Protocol::Gallop,
            "follow" => Protocol::Follow,
            "extrude" => Protocol::Extrude,
            _ => return None,
        })
    }
}

/// `T[idx, ...]` (`T[]` for a 0-d tensor), or `swizzle(T, p0, p1, ...)[idx, ...]`.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Access {
    pub tensor: String,
    pub indices: Vec<AccessIndex>,
    /// A lazy transpose: index `k` of the access addresses dimension `perm[k]` of the tensor
    /// (`swizzle(A, 1, 0)[i, j]` reads `A[j, i]`). Nested swizzles are composed by the parser.
    pub swizzle: Option<Vec<usize>>,
    pub span: Span,
}

impl Access {
    /// The tensor dimension that index position `k` addresses.
    pub fn dim_of(&self, k: usize) -> usize {
        match &self.swizzle {
            Some(p) => p.get(k).copied().unwrap_or(k),
            None => k,
        }
    }
}

/// One index position of an access.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct AccessIndex {
    pub expr: Expr,
    /// `~e`: out-of-bounds reads give `missing`, out-of-bounds writes are dropped.
    pub permissive: bool,
    /// `gallop(e)` etc.; `None` is the default protocol.
    pub protocol: Option<Protocol>,
    /// `(lo:hi)(e)`: `e` indexes the window `lo:hi` of the dimension, so it addresses `lo + e`
    /// and ranges over `0:hi - lo` (Finch's `window(A, lo:hi)`).
    pub window: Option<(Expr, Expr)>,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub enum ExprKind {
    /// A literal: ints parse as i64, floats (and `Inf`, `NaN`) as f64, `true`/`false` as bool,
    /// `0x..` as u8.
    Literal(Scalar),
    /// `missing` (the value of a permissive out-of-bounds read).
    Missing,
    /// A name: a loop index, a `let` variable, or a 0-d tensor read without brackets.
    Name(String),
    Access(Access),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `min max abs sqrt exp log floor div ifelse coalesce` and registered functions.
    Call(String, Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-e`
    Neg,
    /// `!e` (logical not on bool, bitwise not on ints)
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// `/`: float division (integers are converted to f64 first).
    Div,
    /// `%`: remainder, truncated like Rust and C (`div(a, b)` is the matching quotient).
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `&&` (short-circuit semantics are not observable: expressions have no effects)
    AndAnd,
    /// `||`
    OrOr,
    /// `&` bitwise (logical on bool)
    BitAnd,
    /// `|` bitwise (logical on bool)
    BitOr,
    /// `xor`
    Xor,
    /// `<<`
    Shl,
    /// `>>` (arithmetic)
    Shr,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::AndAnd => "&&",
            BinaryOp::OrOr => "||",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
        }
    }

    /// Binding strength, higher binds tighter (used by the parser and the printer).
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::OrOr => 1,
            BinaryOp::AndAnd => 2,
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => 3,
            BinaryOp::BitOr | BinaryOp::Xor => 4,
            BinaryOp::BitAnd => 5,
            BinaryOp::Shl | BinaryOp::Shr => 6,
            BinaryOp::Add | BinaryOp::Sub => 7,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 8,
        }
    }
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }
    pub fn lit(v: Scalar) -> Expr {
        Expr::new(ExprKind::Literal(v), Span::default())
    }
    pub fn name(n: &str) -> Expr {
        Expr::new(ExprKind::Name(n.to_string()), Span::default())
    }
}

impl Stmt {
    pub fn new(kind: StmtKind, span: Span) -> Stmt {
        Stmt { kind, span }
    }
}
