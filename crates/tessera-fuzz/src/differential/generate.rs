//! Random cases decoded from bytes: a small program from a grammar (one or two loop nests over
//! the indices `i`, `j`, `k`, with `if`, `let`, blocks, several outputs and reducers, masks,
//! protocols, permissive offsets and transposed reads), the formats of its tensors, and small
//! data. Every choice takes a few bytes of an [`Unstructured`]; when the bytes run out every
//! choice is its first (plainest) option, so any input decodes to a case. The data comes from
//! a generator seeded by the first eight bytes.
//!
//! The generator keeps to programs both sides should accept: every name is bound, every
//! operator gets operands of classes it takes, plain indices stay in bounds (a tensor's
//! dimensions are named by the indices, and each index has one extent). The shapes whose
//! semantics are still being agreed on are behind [`Shapes`].

use super::Shapes;
use arbitrary::Unstructured;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::notation::ast::{AccessIndex, Expr, ExprKind, Extent, Program, Stmt};
use tessera::notation::build::*;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::{Class, Scalar};

/// The loop indices; dimension `d` of a tensor is indexed by `INDICES[dims[d]]` and has that
/// index's extent.
const INDICES: [&str; 3] = ["i", "j", "k"];
/// Extents stay below this, so the evaluator's dense loops are cheap.
const MAX_EXTENT: usize = 4;

/// Inputs by name and the index of each dimension (`T` is `A`'s shape transposed).
const INPUTS: &[(&str, &[usize])] = &[
    ("A", &[0, 1]),
    ("B", &[0, 1]),
    ("T", &[1, 0]),
    ("M", &[1, 2]),
    ("u", &[0]),
    ("v", &[1]),
    ("z", &[2]),
    ("c", &[]),
];
const OUTPUTS: &[(&str, &[usize])] = &[
    ("s", &[]),
    ("y", &[0]),
    ("w", &[1]),
    ("C", &[0, 1]),
    ("D", &[0, 2]),
];

/// Levels of input formats; a `SparseCOO{2}` level stands for two dimensions.
const INPUT_LEVELS: &[&str] = &[
    "Dense",
    "SparseList",
    "SparseSliceList",
    "SparseBand",
    "SparseBlockList",
    "SparsePoint",
    "SparseByteMap",
    "SparseDict",
    "RunList",
    "SparseRunList",
    "SparseInterval",
    "SparseCOO{1}",
];
const LEAVES: &[&str] = &[
    "Element(0.0)",
    "Element(0.0)",
    "Element(0)",
    "Element(1.0)",
    "Element(2)",
    "Pattern()",
    "Element(false)",
    "Element(0x00)",
];
/// Output levels that take writes in any order, and those that need them in order.
const ANY_ORDER_LEVELS: &[&str] = &["Dense", "SparseByteMap", "SparseDict"];
const IN_ORDER_LEVELS: &[&str] = &[
    "SparseList",
    "SparseSliceList",
    "RunList",
    "SparseRunList",
    "SparseBand",
    "SparseBlockList",
    "SparseCOO{1}",
];
const OUTPUT_LEAVES: &[&str] = &[
    "Element(0.0)",
    "Element(0)",
    "Element(1.0)",
    "Element(false)",
];
const SCALAR_OUTPUTS: &[&str] = &[
    "Element(0.0)",
    "Element(0)",
    "Element(false)",
    "SparseScalar(0.0)",
    "ShortCircuitScalar(0.0)",
    "SparseShortCircuitScalar(0)",
];
/// User reducers (with honest properties) that stand in for `+`, `max` and `min`.
const USER_REDUCERS: [&str; 3] = ["plus", "mx", "mn"];
/// Stored values (before conversion to the element type); zeros are common so that sparse
/// formats have gaps.
const VALUES: &[f64] = &[0.0, 0.0, 0.0, 1.0, 2.0, 3.0, -1.0, -2.0];

/// A program and the tensors it runs on (inputs with data, outputs empty).
pub struct Case {
    pub program: Program,
    pub tensors: BTreeMap<String, Tensor>,
}

/// What an expression may evaluate to, for the operators that must not see it yet.
#[derive(Clone, Copy, Debug)]
struct Props {
    class: Class,
    /// May be NaN or infinite (`/`, `log`, `sqrt`, `exp`, `%` on floats).
    nan: bool,
    /// May be `missing` (a permissive read outside the tensor).
    missing: bool,
}

impl Props {
    fn of(class: Class) -> Props {
        Props {
            class,
            nan: false,
            missing: false,
        }
    }
    fn join(self, other: Props, class: Class) -> Props {
        Props {
            class,
            nan: self.nan || other.nan,
            missing: self.missing || other.missing,
        }
    }
}

/// What the expression being generated must avoid.
#[derive(Clone, Copy, Default)]
struct Avoid {
    nan: bool,
    missing: bool,
}

#[derive(Clone)]
struct Readable {
    name: String,
    dims: Vec<usize>,
    class: Class,
}

#[derive(Clone)]
struct Output {
    name: &'static str,
    dims: &'static [usize],
    class: Class,
    op: AssignOp,
}

/// Names in scope where an expression is generated.
#[derive(Clone, Default)]
struct Scope {
    bound: Vec<usize>,
    lets: Vec<(String, Props)>,
}

struct Gen<'a, 'b> {
    u: &'b mut Unstructured<'a>,
    /// The data comes from a generator seeded by the input, not from its bytes: values need
    /// no guidance, and short inputs still get varied data.
    data_rng: StdRng,
    shapes: Shapes,
    extents: [usize; 3],
    /// Statements still allowed, so every program stays small.
    budget: usize,
    lets: usize,
}

impl Gen<'_, '_> {
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.u.int_in_range(0..=n - 1).unwrap_or(0)
    }

    /// `num` in `den`; never once the bytes have run out (so that every choice then is
    /// the plainest).
    fn chance(&mut self, num: u8, den: u8) -> bool {
        !self.u.is_empty() && self.u.ratio(num, den).unwrap_or(false)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    /// A format of `dims` dimensions from these levels (and `SparseCOO{2}` for two
    /// dimensions at once when `coo`) over one of these leaves.
    fn format(&mut self, dims: usize, levels: &[&str], leaves: &[&str], coo: bool) -> String {
        let mut text = String::new();
        let mut d = 0;
        while d < dims {
            if coo && dims - d >= 2 && self.chance(1, 8) {
                text.push_str("SparseCOO{2}(");
                d += 2;
            } else {
                text.push_str(self.pick(levels));
                text.push('(');
                d += 1;
            }
        }
        let closes = text.matches('(').count();
        text.push_str(self.pick(leaves));
        text.push_str(&")".repeat(closes));
        text
    }

    fn shape(&self, dims: &[usize]) -> Vec<usize> {
        dims.iter().map(|&d| self.extents[d]).collect()
    }

    fn literal(&mut self, class: Class) -> Expr {
        match class {
            Class::Bool => lit(self.chance(1, 2)),
            Class::Int => lit(self.pick(&[0i64, 1, 2, 3, -1])),
            Class::Float => lit(self.pick(&[0.5, 1.0, 2.0, -1.5, 0.0])),
        }
    }

    fn input_format(&mut self, dims: &[usize]) -> Format {
        let text = if dims.is_empty() {
            self.pick(&["Element(0.0)", "Element(0)", "Element(false)"])
                .to_string()
        } else {
            self.format(dims.len(), INPUT_LEVELS, LEAVES, true)
        };
        Format::parse(&text, Some(dims.len()))
            .unwrap_or_else(|_| Format::dense(dims.len(), Scalar::F64(0.0)))
    }

    /// Random data in `format` (all fill if the format cannot hold the data drawn, as
    /// SparsePoint and SparseInterval hold one entry or run per fiber).
    fn data(&mut self, format: &Format, shape: &[usize]) -> Tensor {
        let count: usize = shape.iter().product();
        let rng = &mut self.data_rng;
        let density = rng.random_range(0..4);
        let values: Vec<f64> = (0..count)
            .map(|_| {
                let nonzero = rng.random_range(0..4) < density;
                let from = if nonzero { &VALUES[3..] } else { VALUES };
                from[rng.random_range(0..from.len())]
            })
            .collect();
        let values = Buffer::F64(values.into());
        Tensor::from_dense(format, shape, &values)
            .or_else(|_| Tensor::empty(format, shape))
            .or_else(|_| Tensor::empty(&Format::dense(shape.len(), Scalar::F64(0.0)), shape))
            .expect("an all-dense tensor of a small shape")
    }

    fn output_format(&mut self, dims: &[usize], in_order: bool) -> Format {
        let text = if dims.is_empty() {
            self.pick(SCALAR_OUTPUTS).to_string()
        } else if in_order && self.chance(1, 2) {
            let levels = [ANY_ORDER_LEVELS, IN_ORDER_LEVELS].concat();
            self.format(dims.len(), &levels, OUTPUT_LEAVES, true)
        } else {
            self.format(dims.len(), ANY_ORDER_LEVELS, OUTPUT_LEAVES, false)
        };
        Format::parse(&text, Some(dims.len()))
            .unwrap_or_else(|_| Format::dense(dims.len(), Scalar::F64(0.0)))
    }

    fn op(&mut self, class: Class) -> AssignOp {
        let mut ops = vec![AssignOp::Overwrite];
        match class {
            Class::Bool => ops.extend([Reducer::And, Reducer::Or].map(AssignOp::Reduce)),
            _ => {
                ops.extend(
                    [
                        Reducer::Add,
                        Reducer::Add,
                        Reducer::Sub,
                        Reducer::Mul,
                        Reducer::Min,
                        Reducer::Max,
                    ]
                    .map(AssignOp::Reduce),
                );
                if class == Class::Int {
                    ops.extend([Reducer::And, Reducer::Or].map(AssignOp::Reduce));
                }
                ops.extend(USER_REDUCERS.map(|n| AssignOp::Reduce(user(n))));
            }
        }
        if self.shapes.choose_after_negative_zero {
            let zero = match class {
                Class::Float => Scalar::F64(0.0),
                Class::Int => Scalar::I64(0),
                Class::Bool => Scalar::Bool(false),
            };
            ops.push(AssignOp::Reduce(Reducer::Choose(zero)));
        }
        let k = self.below(ops.len());
        ops.swap_remove(k)
    }

    /// What the right side of a write with `op` must avoid.
    fn avoid_for(&self, op: &AssignOp) -> Avoid {
        let user_min_max = |n: &str| n == "mx" || n == "mn";
        match op {
            AssignOp::Reduce(Reducer::Mul) => Avoid {
                nan: !self.shapes.nan_into_times,
                missing: false,
            },
            AssignOp::Reduce(Reducer::Min | Reducer::Max) => Avoid {
                nan: !self.shapes.nan_into_min_max,
                missing: false,
            },
            AssignOp::Reduce(Reducer::Named(n)) if user_min_max(n) => Avoid {
                nan: !self.shapes.nan_into_min_max,
                missing: false,
            },
            _ => Avoid::default(),
        }
    }

    // ---- expressions ----

    /// An index expression for dimension index `d` (bound in `scope`): the index itself,
    /// sometimes with a protocol or a permissive offset.
    fn index(&mut self, d: usize, avoid: Avoid) -> (AccessIndex, bool) {
        let name = INDICES[d];
        if !avoid.missing && self.chance(1, 8) {
            let off = self.pick(&[-1i64, 1, 2]);
            return (idx(add(name, lit(off))).with_tilde(), true);
        }
        if self.shapes.float_indices && self.chance(1, 64) {
            return (idx(mul(name, lit(1.0))), false);
        }
        if self.shapes.times_zero_out_of_range && self.chance(1, 16) {
            return (idx(lit(self.pick(&[0i64, 1, 5]))), false);
        }
        let ix = idx(name);
        let ix = match self.below(16) {
            13 => ix.with_protocol(Protocol::Gallop),
            14 => ix.with_protocol(Protocol::Follow),
            15 => ix.with_protocol(Protocol::Walk),
            _ => ix,
        };
        (ix, false)
    }

    fn read(&mut self, r: &Readable, avoid: Avoid) -> (Expr, Props) {
        let mut missing = false;
        let mut indices = vec![];
        for &d in &r.dims {
            let (ix, m) = self.index(d, avoid);
            missing |= m;
            indices.push(ix);
        }
        let mut a = access(&r.name, indices);
        // A double transpose reads the same entries through a swizzle.
        if r.dims.len() == 2 && self.chance(1, 12) {
            a = a.swizzled(&[1, 0]).swizzled(&[1, 0]);
        }
        (
            read(a),
            Props {
                class: r.class,
                nan: false,
                missing,
            },
        )
    }

    fn leaf(&mut self, scope: &Scope, reads: &[Readable], avoid: Avoid) -> (Expr, Props) {
        let visible: Vec<&Readable> = reads
            .iter()
            .filter(|r| r.dims.iter().all(|d| scope.bound.contains(d)))
            .collect();
        let lets: Vec<&(String, Props)> = scope
            .lets
            .iter()
            .filter(|(_, p)| !(avoid.nan && p.nan || avoid.missing && p.missing))
            .collect();
        match self.below(8) {
            0..=3 if !visible.is_empty() => {
                let r = visible[self.below(visible.len())].clone();
                self.read(&r, avoid)
            }
            4 if !scope.bound.is_empty() => {
                let d = scope.bound[self.below(scope.bound.len())];
                (name(INDICES[d]), Props::of(Class::Int))
            }
            5 if !lets.is_empty() => {
                let (n, p) = lets[self.below(lets.len())].clone();
                (name(&n), p)
            }
            _ => {
                let class = self.pick(&[Class::Int, Class::Float, Class::Float, Class::Bool]);
                (self.literal(class), Props::of(class))
            }
        }
    }

    fn expr(
        &mut self,
        scope: &Scope,
        reads: &[Readable],
        depth: u32,
        avoid: Avoid,
    ) -> (Expr, Props) {
        if depth == 0 || self.u.is_empty() || self.chance(1, 3) {
            return self.leaf(scope, reads, avoid);
        }
        let d = depth - 1;
        match self.below(14) {
            0 | 1 => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                let c = arith(pa.class, pb.class);
                (add(a, b), pa.join(pb, c))
            }
            2 => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                let c = arith(pa.class, pb.class);
                (sub(a, b), pa.join(pb, c))
            }
            3 | 4 => {
                // `x * 0` is simplified to 0: its operands must not be NaN or missing while
                // those semantics are open.
                let inner = Avoid {
                    nan: avoid.nan || !self.shapes.nan_into_times,
                    missing: avoid.missing || !self.shapes.times_zero_out_of_range,
                };
                let (a, pa) = self.expr(scope, reads, d, inner);
                let (b, pb) = self.expr(scope, reads, d, inner);
                let c = arith(pa.class, pb.class);
                (mul(a, b), pa.join(pb, c))
            }
            5 => {
                let f = self.pick(&["min", "max"]);
                let inner = Avoid {
                    nan: avoid.nan || !self.shapes.nan_into_min_max,
                    missing: avoid.missing,
                };
                let (a, pa) = self.expr(scope, reads, d, inner);
                let (b, pb) = self.expr(scope, reads, d, inner);
                let c = tessera::semantics::join(pa.class, pb.class);
                (call(f, [a, b]), pa.join(pb, c))
            }
            6 => {
                let (c, pc) = self.cond(scope, reads, d, avoid);
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                let class = tessera::semantics::join(pa.class, pb.class);
                (
                    call("ifelse", [c, a, b]),
                    pa.join(pb, class).join(pc, class),
                )
            }
            7 => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                // Only the fallback can still be missing.
                let class = tessera::semantics::join(pa.class, pb.class);
                let p = Props {
                    class,
                    nan: pa.nan || pb.nan,
                    missing: pb.missing,
                };
                (call("coalesce", [a, b]), p)
            }
            8 => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (e, class) = match self.below(3) {
                    0 => (neg(a), arith(pa.class, Class::Int)),
                    1 => (call("abs", [a]), arith(pa.class, Class::Int)),
                    _ => (call("floor", [a]), arith(pa.class, Class::Int)),
                };
                (e, Props { class, ..pa })
            }
            9 if !avoid.nan => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let f = self.pick(&["sqrt", "log", "exp"]);
                (
                    call(f, [a]),
                    Props {
                        class: Class::Float,
                        nan: true,
                        missing: pa.missing,
                    },
                )
            }
            10 if !avoid.nan => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                let mut p = pa.join(pb, Class::Float);
                p.nan = true;
                (div(a, b), p)
            }
            11 => {
                // Integer-only operators, on integer operands.
                let (a, pa) = self.int_expr(scope, reads, d, avoid);
                let (b, pb) = self.int_expr(scope, reads, d, avoid);
                let e = match self.below(6) {
                    0 => binary(BinaryOp::Rem, a, b),
                    1 => call("div", [a, b]),
                    2 => binary(BinaryOp::BitAnd, a, b),
                    3 => binary(BinaryOp::BitOr, a, b),
                    4 => binary(BinaryOp::Xor, a, b),
                    _ => binary(BinaryOp::Shr, a, b),
                };
                (e, pa.join(pb, Class::Int))
            }
            _ => {
                let (c, pc) = self.cond(scope, reads, d, avoid);
                (c, pc)
            }
        }
    }

    /// An expression of class Int (the operands of `%`, `div` and the bitwise operators): bools
    /// are turned into integers, floats replaced by an integer literal.
    fn int_expr(
        &mut self,
        scope: &Scope,
        reads: &[Readable],
        depth: u32,
        avoid: Avoid,
    ) -> (Expr, Props) {
        let (e, p) = self.expr(scope, reads, depth, avoid);
        match p.class {
            Class::Int => (e, p),
            // Bools take part in integer arithmetic as 0 and 1; `+ 0` makes that an Int.
            Class::Bool => (
                add(e, lit(0i64)),
                Props {
                    class: Class::Int,
                    ..p
                },
            ),
            Class::Float => (self.literal(Class::Int), Props::of(Class::Int)),
        }
    }

    /// A condition: a comparison, an index mask, a bool read, or a combination of those.
    fn cond(
        &mut self,
        scope: &Scope,
        reads: &[Readable],
        depth: u32,
        avoid: Avoid,
    ) -> (Expr, Props) {
        let d = depth.saturating_sub(1);
        match self.below(6) {
            0 | 1 if scope.bound.len() >= 2 => {
                let a = scope.bound[self.below(scope.bound.len())];
                let b = scope.bound[self.below(scope.bound.len())];
                let op = self.pick(&[
                    BinaryOp::Le,
                    BinaryOp::Lt,
                    BinaryOp::Eq,
                    BinaryOp::Ne,
                    BinaryOp::Ge,
                ]);
                let rhs = if self.chance(1, 3) {
                    add(INDICES[b], lit(self.pick(&[-1i64, 1, 2])))
                } else {
                    name(INDICES[b])
                };
                (binary(op, INDICES[a], rhs), Props::of(Class::Bool))
            }
            2 if depth > 0 => {
                let (a, pa) = self.cond(scope, reads, d, avoid);
                let (b, pb) = self.cond(scope, reads, d, avoid);
                let op = self.pick(&[BinaryOp::AndAnd, BinaryOp::OrOr]);
                (binary(op, a, b), pa.join(pb, Class::Bool))
            }
            3 if depth > 0 => {
                let (a, pa) = self.cond(scope, reads, d, avoid);
                (not(a), pa)
            }
            _ => {
                let (a, pa) = self.expr(scope, reads, d, avoid);
                let (b, pb) = self.expr(scope, reads, d, avoid);
                let op = self.pick(&[
                    BinaryOp::Lt,
                    BinaryOp::Le,
                    BinaryOp::Eq,
                    BinaryOp::Ne,
                    BinaryOp::Gt,
                    BinaryOp::Ge,
                ]);
                (binary(op, a, b), pa.join(pb, Class::Bool))
            }
        }
    }

    // ---- statements ----

    fn write(&mut self, o: &Output, scope: &Scope, reads: &[Readable]) -> Stmt {
        if self.shapes.missing_unbound_index && !o.dims.is_empty() && self.chance(1, 64) {
            // `q` is bound nowhere; the value written is `missing`.
            let mut indices: Vec<AccessIndex> = o.dims.iter().map(|&d| idx(INDICES[d])).collect();
            indices[0] = idx("q");
            return assign(access(o.name, indices), o.op.clone(), missing());
        }
        let lhs = access(o.name, o.dims.iter().map(|&d| idx(INDICES[d])));
        let avoid = self.avoid_for(&o.op);
        // A built-in reduction of floats into an integer or bool output is a static error on
        // every backend: generated now and then, not in most programs.
        let sum = match &o.op {
            AssignOp::Reduce(
                Reducer::Add
                | Reducer::Sub
                | Reducer::Mul
                | Reducer::Min
                | Reducer::Max
                | Reducer::Choose(_),
            ) => true,
            AssignOp::Reduce(Reducer::Named(n)) => n == "plus",
            _ => false,
        };
        let floats_into_integers = self.shapes.float_into_integer_sums && self.chance(1, 8);
        let (mut rhs, p) = if sum && o.class != Class::Float && !floats_into_integers {
            self.int_expr(scope, reads, 2, avoid)
        } else {
            self.expr(scope, reads, 2, avoid)
        };
        // `&=` and `|=` take no floats (a type error the compilers report even where the
        // statement never runs, the evaluator only where it does).
        if matches!(o.op, AssignOp::Reduce(Reducer::And | Reducer::Or)) && p.class == Class::Float {
            rhs = self.cond(scope, reads, 2, avoid).0;
        }
        assign(lhs, o.op.clone(), rhs)
    }

    /// Statements in a scope where the indices `scope.bound` are bound and `rest` are still
    /// to be looped over (in that order).
    fn body(
        &mut self,
        scope: &Scope,
        rest: &[usize],
        writes: &[Output],
        reads: &[Readable],
        depth: u32,
    ) -> Vec<Stmt> {
        let mut out = vec![];
        let n = 1 + self.below(3);
        let mut looped = false;
        for _ in 0..n {
            if self.budget == 0 {
                break;
            }
            self.budget -= 1;
            let writable: Vec<&Output> = writes
                .iter()
                .filter(|o| o.dims.iter().all(|d| scope.bound.contains(d)))
                .collect();
            // The next loop comes first when nothing can be written yet.
            let kind = if !rest.is_empty() && !looped && (writable.is_empty() || self.chance(1, 2))
            {
                0
            } else {
                1 + self.below(6)
            };
            match kind {
                0 => {
                    looped = true;
                    out.push(self.nest(scope, rest, writes, reads, depth));
                }
                1..=3 if !writable.is_empty() => {
                    let o = writable[self.below(writable.len())].clone();
                    out.push(self.write(&o, scope, reads));
                }
                4 if depth < 4 => {
                    let (c, _) = self.cond(scope, reads, 1, Avoid::default());
                    let then = self.body(scope, &[], writes, reads, depth + 1);
                    let otherwise = if self.chance(1, 3) {
                        self.body(scope, &[], writes, reads, depth + 1)
                    } else {
                        vec![]
                    };
                    out.push(if_else(c, then, otherwise));
                }
                5 if depth < 4 => {
                    // A `let` value may not be `missing` (the compilers refuse it).
                    let no_missing = Avoid {
                        nan: false,
                        missing: true,
                    };
                    let (v, p) = self.expr(scope, reads, 1, no_missing);
                    self.lets += 1;
                    let t = format!("t{}", self.lets);
                    let mut inner = scope.clone();
                    inner.lets.push((t.clone(), p));
                    let body = self.body(&inner, &[], writes, reads, depth + 1);
                    out.push(let_(&t, v, body));
                }
                6 if depth < 4
                    && self.shapes.reused_loop_names
                    && !scope.bound.is_empty()
                    && self.chance(1, 8) =>
                {
                    let d = scope.bound[self.below(scope.bound.len())];
                    let body = self.body(scope, &[], writes, reads, depth + 1);
                    out.push(for_(INDICES[d], auto(), body));
                }
                6 if depth < 4 => {
                    let body = self.body(scope, &[], writes, reads, depth + 1);
                    out.push(block(body));
                }
                _ => {}
            }
        }
        if !rest.is_empty() && !looped {
            out.push(self.nest(scope, rest, writes, reads, depth));
        }
        out
    }

    /// `for rest[0] = extent` around a body that loops over the remaining indices.
    fn nest(
        &mut self,
        scope: &Scope,
        rest: &[usize],
        writes: &[Output],
        reads: &[Readable],
        depth: u32,
    ) -> Stmt {
        let d = rest[0];
        let mut inner = scope.clone();
        inner.bound.push(d);
        let body = self.body(&inner, &rest[1..], writes, reads, depth + 1);
        // `_` takes the extent from the accesses indexed by the loop's index; where there are
        // none, the extent is written out.
        let extent = if !indexes(&body, INDICES[d]) || self.chance(1, 6) {
            Extent::Range(lit(0i64), lit(self.extents[d] as i64 - 1))
        } else {
            auto()
        };
        for_(INDICES[d], extent, body)
    }
}

/// Move the declarations of `writes` from `declared` to the start of the first top-level loop
/// of `stmts` (if there is one): every iteration then starts those outputs afresh. Outputs
/// indexed by that loop's index stay where they are (the language refuses such a
/// declaration: `transforms::check`).
fn declare_in_first_loop(stmts: &mut [Stmt], declared: &mut Vec<Stmt>, writes: &[Output]) {
    use tessera::notation::ast::StmtKind;
    let Some((index, body)) = stmts.iter_mut().find_map(|s| match &mut s.kind {
        StmtKind::Loop { index, body, .. } => Some((index.clone(), body)),
        _ => None,
    }) else {
        return;
    };
    for o in writes {
        if o.dims.iter().any(|&d| INDICES[d] == index) {
            continue;
        }
        let at = declared.iter().position(
            |d| matches!(&d.kind, StmtKind::Declare { tensor, .. } if tensor.as_str() == o.name),
        );
        if let Some(at) = at {
            body.insert(0, declared.remove(at));
        }
    }
}

/// Whether some access in `body` is indexed by the name `index` itself.
fn indexes(body: &[Stmt], index: &str) -> bool {
    let mut found = false;
    tessera::notation::visit::accesses(body, &mut |a| {
        found |= a
            .indices
            .iter()
            .any(|ix| matches!(&ix.expr.kind, ExprKind::Name(n) if n == index));
    });
    found
}

fn arith(a: Class, b: Class) -> Class {
    tessera::semantics::join(tessera::semantics::join(a, b), Class::Int)
}

fn class_of(f: &Format) -> Class {
    f.elem().class()
}

fn literal_of(v: Scalar) -> Expr {
    lit(v.widen())
}

/// Decode a case. Two loop nests at most; the second may read what the first wrote.
pub fn case(u: &mut Unstructured<'_>, shapes: &Shapes) -> Case {
    let seed = u.arbitrary::<u64>().unwrap_or(0);
    let mut g = Gen {
        u,
        data_rng: StdRng::seed_from_u64(seed),
        shapes: *shapes,
        extents: [0; 3],
        budget: 8,
        lets: 0,
    };
    for d in 0..3 {
        // Empty dimensions now and then.
        g.extents[d] = if g.chance(1, 10) {
            0
        } else {
            1 + g.below(MAX_EXTENT)
        };
    }
    // Formats first, data last: the program takes the bytes before the data does.
    let mut tensors = BTreeMap::new();
    let mut input_formats = vec![];
    let mut reads = vec![];
    for &(n, dims) in INPUTS {
        let f = g.input_format(dims);
        reads.push(Readable {
            name: n.to_string(),
            dims: dims.to_vec(),
            class: class_of(&f),
        });
        input_formats.push((n, dims, f));
    }
    // Which outputs each nest writes: one or two outputs, one or two nests.
    let first = g.below(OUTPUTS.len());
    let mut chosen = vec![OUTPUTS[first]];
    if g.chance(1, 2) {
        let second = OUTPUTS[g.below(OUTPUTS.len())];
        if second.0 != chosen[0].0 {
            chosen.push(second);
        }
    }
    let nests: Vec<Vec<(&str, &[usize])>> = if chosen.len() == 2 && g.chance(1, 2) {
        vec![vec![chosen[0]], vec![chosen[1]]]
    } else {
        vec![chosen]
    };
    let mut body = vec![];
    let mut declared = vec![];
    let mut nest_stmts = vec![];
    let mut used_ops = vec![];
    for outs in &nests {
        // The loop order: the outputs' indices and maybe others, shuffled.
        let mut order: Vec<usize> = vec![];
        for (_, dims) in outs {
            for &d in *dims {
                if !order.contains(&d) {
                    order.push(d);
                }
            }
        }
        for d in 0..3 {
            if !order.contains(&d) && g.chance(1, 3) {
                order.push(d);
            }
        }
        for k in (1..order.len()).rev() {
            let m = g.below(k + 1);
            order.swap(k, m);
        }
        let mut writes = vec![];
        for &(n, dims) in outs {
            // A format that takes writes only in order gets them in order: its indices are
            // the outermost loops, in its dimension order.
            let in_order = order.len() >= dims.len() && order[..dims.len()] == *dims;
            let f = g.output_format(dims, in_order);
            let class = class_of(&f);
            declared.push(declare(n, literal_of(f.fill())));
            let op = g.op(class);
            let shape = g.shape(dims);
            let t = Tensor::empty(&f, &shape)
                .or_else(|_| Tensor::empty(&Format::dense(dims.len(), Scalar::F64(0.0)), &shape))
                .expect("an empty dense tensor of a small shape");
            tensors.insert(n.to_string(), t);
            used_ops.push(op.clone());
            writes.push(Output {
                name: n,
                dims,
                class,
                op,
            });
        }
        let mut stmts = g.body(&Scope::default(), &order, &writes, &reads, 0);
        if g.shapes.declarations_in_loops && g.chance(1, 4) {
            declare_in_first_loop(&mut stmts, &mut declared, &writes);
        }
        nest_stmts.extend(stmts);
        // Later nests may read what this one wrote.
        for o in &writes {
            reads.push(Readable {
                name: o.name.to_string(),
                dims: o.dims.to_vec(),
                class: o.class,
            });
        }
    }
    body.extend(declared);
    body.extend(nest_stmts);
    let mut program = tessera::notation::build::program(body);
    // The user reducers the writes use, with the properties they have.
    for n in USER_REDUCERS {
        if used_ops.iter().any(|op| *op == AssignOp::Reduce(user(n))) {
            let (a, b) = (name("a"), name("b"));
            program.add_reducer(match n {
                "plus" => reducer(n, add(a, b))
                    .identity(0)
                    .commutative()
                    .associative(),
                "mx" => reducer(n, call("max", [a, b]))
                    .identity(f64::NEG_INFINITY)
                    .commutative()
                    .associative()
                    .idempotent(),
                _ => reducer(n, call("min", [a, b]))
                    .identity(f64::INFINITY)
                    .commutative()
                    .associative()
                    .idempotent(),
            });
        }
    }
    // Only the tensors the program mentions take part.
    let mut used = vec![];
    tessera::notation::visit::accesses(&program.body, &mut |a| used.push(a.tensor.clone()));
    for s in &program.body {
        if let tessera::notation::ast::StmtKind::Declare { tensor, .. } = &s.kind {
            used.push(tensor.clone());
        }
    }
    for (n, dims, f) in input_formats {
        if used.iter().any(|u| u == n) {
            let shape = g.shape(dims);
            tensors.insert(n.to_string(), g.data(&f, &shape));
        }
    }
    tensors.retain(|n, _| used.contains(n));
    Case { program, tensors }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::notation::ast::StmtKind;

    fn programs(shapes: &Shapes, count: u64) -> Vec<Program> {
        let mut rng = StdRng::seed_from_u64(17);
        (0..count)
            .map(|_| {
                let len = rng.random_range(16..400);
                let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                case(&mut Unstructured::new(&data), shapes).program
            })
            .collect()
    }

    /// Whether a loop reuses the name of a loop around it.
    fn reuses_loop_name(body: &[Stmt], bound: &mut Vec<String>) -> bool {
        body.iter().any(|s| match &s.kind {
            StmtKind::Loop { index, body, .. } => {
                if bound.contains(index) {
                    return true;
                }
                bound.push(index.clone());
                let found = reuses_loop_name(body, bound);
                bound.pop();
                found
            }
            StmtKind::If {
                then, otherwise, ..
            } => reuses_loop_name(then, bound) || reuses_loop_name(otherwise, bound),
            StmtKind::Let { body, .. } | StmtKind::Block(body) => reuses_loop_name(body, bound),
            _ => false,
        })
    }

    /// The open shapes a program shows: choose, float index, unbound index, reused loop name.
    fn open_shapes(p: &Program) -> [bool; 4] {
        let (mut float_index, mut unbound) = (false, false);
        tessera::notation::visit::accesses(&p.body, &mut |a| {
            for ix in &a.indices {
                float_index |= matches!(&ix.expr.kind,
                    ExprKind::Binary(BinaryOp::Mul, _, x) if matches!(x.kind, ExprKind::Literal(Scalar::F64(_))));
                unbound |= matches!(&ix.expr.kind, ExprKind::Name(n) if n == "q");
            }
        });
        [
            p.to_string().contains("<<choose("),
            float_index,
            unbound,
            reuses_loop_name(&p.body, &mut vec![]),
        ]
    }

    #[test]
    fn the_flags_leave_their_shapes_out_and_the_agreed_shapes_have_them_all() {
        for p in programs(&Shapes::default(), 400) {
            assert_eq!(open_shapes(&p), [false; 4], "{p}");
        }
        let mut seen = [false; 4];
        for p in programs(&Shapes::AGREED, 400) {
            for (s, now) in seen.iter_mut().zip(open_shapes(&p)) {
                *s |= now;
            }
        }
        assert_eq!(seen, [true; 4]);
    }

    #[test]
    fn programs_print_back_and_use_their_tensors() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..300 {
            let data: Vec<u8> = (0..rng.random_range(0..300))
                .map(|_| rng.random())
                .collect();
            let c = case(&mut Unstructured::new(&data), &Shapes::AGREED);
            let text = c.program.to_string();
            assert_eq!(
                tessera::notation::parse::parse_program(&text).as_ref(),
                Ok(&c.program)
            );
            for n in c.tensors.keys() {
                let mentioned = [format!("{n}["), format!("{n} .="), format!("swizzle({n},")];
                assert!(mentioned.iter().any(|m| text.contains(m)), "{n} in\n{text}");
            }
        }
    }
}
