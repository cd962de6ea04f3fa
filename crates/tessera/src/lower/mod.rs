//! Lowering a normalised program to a loop-IR kernel: conversion of the notation into the
//! engine's form, then the recursive looplet lowering of `engine`.

pub mod continuous;
pub mod emit;
pub mod engine;
pub mod fission;
pub mod flags;
/// The program form the engine rewrites, shared with the looplet rules (which sit below).
pub use crate::looplets::node;
pub mod scalars;
pub mod shapes;
pub mod simplify;

pub mod wrappers;

use crate::error::{Error, Result};
use crate::ir::cx::Cx;
use crate::ir::{self, BufId, Kernel, build as b};
use crate::levels::Format;
use crate::looplets::tensor::TensorInfo;
use crate::looplets::{Fiber, Target};
use crate::notation::ast::{self, Expr, ExprKind, Extent, Program, Stmt, StmtKind};
use crate::semantics::Builtin;
use crate::transforms::affine::Scope;
use crate::transforms::wrapperize::is_direct;
use crate::types::{ElemType, Scalar};
use engine::Engine;
use node::{LAccess, LExpr, LStmt, Mask, Mode};
use std::collections::HashMap;
use std::rc::Rc;

/// Where each tensor's arrays sit in the kernel's buffer list. Buffer 0 holds every dimension.
#[derive(Clone, Debug)]
pub struct Layout {
    pub tensors: Vec<TensorLayout>,
    pub ndims: usize,
    /// The coordinate and position arrays whose checked bound the runtime passes, in order, in the slots of
    /// the dimensions buffer after the dimensions (`ndims + k`; the last slot stays the one a
    /// failing check reports through); see [`Kernel::bounded`].
    pub bounds: Vec<BoundSlot>,
}

/// A coordinate or position array of a tensor (`Level::coordinates`, `Level::positions`)
/// whose checked bound, or 0 when there is none, the runtime writes before each run.
#[derive(Clone, Debug)]
pub struct BoundSlot {
    /// The tensor's place in [`Layout::tensors`].
    pub tensor: usize,
    pub level: usize,
    /// The buffer's place in the level's arrays.
    pub buf: usize,
    /// Coordinates or positions ([`Kernel::bounded`]'s fact for the same buffer).
    pub what: ir::Vouched,
}

impl Layout {
    /// The length of the dimensions buffer: every dimension, the bounds, the detail slot.
    pub fn dims_len(&self) -> usize {
        self.ndims + self.bounds.len() + 1
    }

    /// The slot of the dimensions buffer holding bound `k`.
    pub fn bound_slot(&self, k: usize) -> usize {
        self.ndims + k
    }
}

#[derive(Clone, Debug)]
pub struct TensorLayout {
    pub name: String,
    pub format: Format,
    /// Buffer numbers of each level.
    pub bufs: Vec<Vec<usize>>,
    pub dims_slot: usize,
}

/// Compile a normalised program for tensors of the given formats. Each class of `equal`
/// dimensions (see `shapes::equal_dims`; the caller checks them before every run) is read
/// into one variable.
pub fn lower_program(
    program: &Program,
    formats: &[(String, Format)],
    equal: &[Vec<shapes::Dim>],
    parallel: &[crate::transforms::parallel::Plan],
) -> Result<(Kernel, Layout)> {
    let mut cx = Cx::default();
    let ndims: usize = formats.iter().map(|(_, f)| f.rank()).sum();
    let dims_buf = cx.buf("dims".into(), ElemType::I64, false);
    let mut tensors = HashMap::new();
    let mut layout = Layout {
        tensors: vec![],
        ndims,
        bounds: vec![],
    };
    let mut bounded = vec![];
    // The arrays of real levels: their F64 ones hold coordinate values, never NaN.
    let mut real_arrays = vec![];
    let mut slot = 0;
    let mut entry = vec![];
    let mut first_of_class: HashMap<usize, ir::VarId> = HashMap::new();
    for (name, format) in formats {
        let mut t = TensorInfo::new(&mut cx, name, format, slot);
        for d in 0..t.dims.len() {
            let class = equal
                .iter()
                .position(|c| c.iter().any(|(n, e)| n == name && *e == d));
            match class.and_then(|c| first_of_class.get(&c)) {
                Some(v) => t.dims[d] = *v,
                None => {
                    entry.push(b::assign(
                        t.dims[d],
                        b::load(dims_buf, b::int((slot + d) as i64)),
                    ));
                    if let Some(c) = class {
                        first_of_class.insert(c, t.dims[d]);
                    }
                }
            }
        }
        layout.tensors.push(TensorLayout {
            name: name.clone(),
            format: format.clone(),
            bufs: t
                .level_bufs
                .iter()
                .map(|l| l.iter().map(|b: &BufId| b.0 as usize).collect())
                .collect(),
            dims_slot: slot,
        });
        for (level, kind) in format.levels.iter().enumerate() {
            if kind.is_real() {
                real_arrays.extend(t.level_bufs[level].iter().copied());
            }
            let imp = crate::levels::level_impl(kind);
            let coordinates = imp.coordinates(kind).into_iter().map(|(buf, _)| buf);
            let arrays = coordinates
                .map(|buf| (buf, ir::Vouched::Coordinates))
                .chain(
                    imp.positions(kind)
                        .into_iter()
                        .map(|buf| (buf, ir::Vouched::Positions)),
                );
            for (buf, what) in arrays {
                let at = ndims + layout.bounds.len();
                bounded.push(ir::Bounded {
                    buf: t.level_bufs[level][buf],
                    below: b::load(dims_buf, b::int(at as i64)),
                    what,
                });
                layout.bounds.push(BoundSlot {
                    tensor: layout.tensors.len() - 1,
                    level,
                    buf,
                    what,
                });
            }
        }
        slot += t.rank();
        tensors.insert(name.clone(), Rc::new(t));
    }
    let mut conv = Converter {
        tensors: &tensors,
        scope: vec![],
        bindings: vec![],
        read_at: HashMap::new(),
    };
    let body = conv.stmts(&program.body)?;
    let mut engine = Engine {
        cx,
        tensors,
        declared: HashMap::new(),
        write_once: Default::default(),
        carried: carried(&program.body),
        facts: Default::default(),
        detail: (dims_buf, (ndims + layout.bounds.len()) as i64),
        parallel: parallel_by_place(parallel),
        vector: vector_loops(program),
        vectorized: vec![],
        walks: vec![],
    };
    let mut code = entry;
    code.extend(engine.lower_block(body)?);
    let vectorized = std::mem::take(&mut engine.vectorized);
    let Cx { vars, bufs, errors } = engine.cx;
    let mut kernel = Kernel {
        name: "kernel".into(),
        bufs,
        vars,
        body: code,
        errors,
        bounded,
        not_nan: vec![],
        vectorized,
    };
    // Only arrays the kernel does not write: an output's are being built, from any value.
    let modified = kernel.modified_bufs();
    kernel.not_nan = real_arrays
        .into_iter()
        .filter(|b| kernel.buf_elem(*b) == ElemType::F64 && !modified[b.0 as usize])
        .collect();
    flags::fold_flags(&mut kernel.body);
    // Before `prune`, which drops a variable this made for a rewrite it abandoned.
    crate::ir::locals::locals_to_vars(&mut kernel);
    crate::ir::prune::prune_dead_vars(&mut kernel);
    debug_assert_eq!(kernel.check(), Ok(()), "lowering produced ill-typed IR");
    Ok((kernel, layout))
}

/// Notation → engine form: resolves names, sizes `_` extents from the tensors they index.
struct Converter<'a> {
    tensors: &'a HashMap<String, Rc<TensorInfo>>,
    /// Names bound around the current statement, outermost first; `true` for loop indices.
    scope: Vec<(String, bool)>,
    /// Per entry of `scope`: a loop's extent, or the name a `let` binds to when its value
    /// is a plain name (what concordization binds before `for k = v:v`).
    bindings: Vec<Binding>,
    /// Where each tensor was last frozen for reading (the lifecycle pass puts the first read
    /// access's position on the `@freeze`).
    read_at: HashMap<String, ast::Span>,
}

impl Converter<'_> {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<Vec<LStmt>> {
        let mut out = vec![];
        for s in stmts {
            out.extend(self.stmt(s)?);
        }
        Ok(out)
    }

    fn tensor(&self, name: &str, span: ast::Span) -> Result<&Rc<TensorInfo>> {
        self.tensors
            .get(name)
            .ok_or_else(|| Error::program(span, format!("unknown tensor `{name}`")))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<Vec<LStmt>> {
        let span = s.span;
        Ok(vec![match &s.kind {
            StmtKind::Declare { tensor, init } => {
                let t = self.tensor(tensor, span)?;
                let v = const_value(init).ok_or_else(|| {
                    Error::program(
                        init.span,
                        format!("`{tensor} .= ...` needs a constant value"),
                    )
                })?;
                let _ = t;
                LStmt::Declare {
                    tensor: tensor.clone(),
                    init: v,
                    span,
                }
            }
            StmtKind::Freeze { tensor } => {
                self.tensor(tensor, span)?;
                if span.is_known() {
                    self.read_at.insert(tensor.clone(), span);
                }
                LStmt::Freeze {
                    tensor: tensor.clone(),
                }
            }
            StmtKind::Thaw { tensor } => {
                self.tensor(tensor, span)?;
                LStmt::Thaw {
                    tensor: tensor.clone(),
                    span,
                    read: self.read_at.get(tensor).copied(),
                }
            }
            StmtKind::Assign { lhs, op, rhs } => {
                if let ast::AssignOp::Reduce(ast::Reducer::Named(n)) = op {
                    return Err(Error::program(span, format!("unknown reducer `{n}`")));
                }
                LStmt::Assign {
                    lhs: self.access(lhs, Mode::Update)?,
                    op: op.clone(),
                    rhs: self.expr(rhs)?,
                    span,
                }
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                let mut bounds = vec![];
                let (start, stop) = match extent {
                    Extent::Range(a, z) => {
                        if !is_static(a) || !is_static(z) {
                            bounds = self.direct_dims(body, index)?;
                            if let Some(size) = self.copy_of_sized_index(a, z, span)? {
                                bounds.retain(|bd| bd.size != size);
                            }
                        }
                        (self.expr(a)?, self.expr(z)?)
                    }
                    Extent::Auto => {
                        let (t, d) = crate::transforms::extents::find_dim_source(body, index)
                            .ok_or_else(|| {
                                Error::program(
                                    span,
                                    format!("could not resolve the extent of index `{index}`"),
                                )
                            })?;
                        let t = self.tensor(&t, span)?;
                        let stop = b::sub(t.dim(d), b::int(1));
                        (LExpr::Lit(Scalar::I64(0)), LExpr::Ir(stop, ElemType::I64))
                    }
                };
                self.scope.push((index.clone(), true));
                self.bindings.push(Binding::Loop(extent.clone()));
                let body = self.stmts(body)?;
                self.scope.pop();
                self.bindings.pop();
                LStmt::Loop {
                    index: index.clone(),
                    start,
                    stop,
                    body,
                    span,
                    bounds,
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => LStmt::If {
                cond: self.expr(cond)?,
                then: self.stmts(then)?,
                otherwise: self.stmts(otherwise)?,
                span,
            },
            StmtKind::Let { name, value, body } => {
                let alias = match &value.kind {
                    ExprKind::Name(n) => Some(n.clone()),
                    _ => None,
                };
                let value = self.expr(value)?;
                self.scope.push((name.clone(), false));
                self.bindings.push(Binding::Let(alias));
                let body = self.stmts(body)?;
                self.scope.pop();
                self.bindings.pop();
                LStmt::Let {
                    name: name.clone(),
                    value,
                    body,
                    span,
                }
            }
            StmtKind::Block(stmts) => return self.stmts(stmts),
        }])
    }

    fn access(&mut self, a: &ast::Access, mode: Mode) -> Result<LAccess> {
        let t = self.tensor(&a.tensor, a.span)?.clone();
        if a.indices.len() != t.rank() {
            return Err(Error::DimensionMismatch {
                span: a.span,
                msg: format!(
                    "`{}` has {} dimensions but is accessed with {} indices",
                    a.tensor,
                    t.rank(),
                    a.indices.len()
                ),
            });
        }
        let mut indices = vec![];
        let mut protocols = vec![];
        let mut offsets = vec![];
        for ix in &a.indices {
            let scope = Scope { names: &self.scope };
            let Some((index, offset)) = scope.affine(&ix.expr).filter(|_| !ix.permissive) else {
                return Err(Error::program(
                    ix.expr.span,
                    format!(
                        "internal: access to `{}` was not normalised to loop indices",
                        a.tensor
                    ),
                ));
            };
            indices.push(index);
            protocols.push(ix.protocol);
            offsets.push(offset.map(|o| self.expr(&o)).transpose()?);
        }
        Ok(LAccess {
            tensor: a.tensor.clone(),
            target: Target::Fiber(Fiber::root(t)),
            indices,
            protocols,
            offsets,
            mode,
            span: a.span,
            mask: false,
        })
    }

    fn expr(&mut self, e: &Expr) -> Result<LExpr> {
        let span = e.span;
        Ok(match &e.kind {
            ExprKind::Literal(s) => LExpr::Lit(s.widen()),
            ExprKind::Missing => {
                return Err(Error::program(
                    span,
                    "internal: `missing` survived normalisation",
                ));
            }
            ExprKind::Name(n) => {
                if self.scope.iter().any(|(m, _)| m == n) {
                    LExpr::Index(n.clone())
                } else if let Some(t) = self.tensors.get(n) {
                    if t.rank() != 0 {
                        return Err(Error::program(
                            span,
                            format!(
                                "`{n}` has {} dimensions: read it with indices, `{n}[...]`",
                                t.rank()
                            ),
                        ));
                    }
                    LExpr::Access(Box::new(LAccess {
                        tensor: n.clone(),
                        target: Target::Fiber(Fiber::root(t.clone())),
                        indices: vec![],
                        protocols: vec![],
                        offsets: vec![],
                        mode: Mode::Read,
                        span,
                        mask: false,
                    }))
                } else {
                    return Err(Error::program(span, format!("unknown name `{n}`")));
                }
            }
            ExprKind::Access(a) => LExpr::Access(Box::new(self.access(a, Mode::Read)?)),
            ExprKind::Unary(op, x) => LExpr::Unary(*op, Box::new(self.expr(x)?), span),
            ExprKind::Binary(ast::BinaryOp::AndAnd, x, y) => {
                let (x, y) = (self.expr(x)?, self.expr(y)?);
                match (&x, &y) {
                    // `lo <= i && i <= hi`: one band mask, three phases instead of four.
                    (LExpr::Mask(a), LExpr::Mask(b))
                        if a.inside && b.inside && same_index(a, b) =>
                    {
                        let both = |p: &Option<LExpr>, q: &Option<LExpr>, f: Builtin| match (p, q) {
                            (Some(p), Some(q)) => {
                                Some(LExpr::Call(f, vec![p.clone(), q.clone()], span))
                            }
                            (p, q) => p.clone().or(q.clone()),
                        };
                        LExpr::Mask(Box::new(Mask {
                            index: a.index.clone(),
                            lo: both(&a.lo, &b.lo, Builtin::Max),
                            hi: both(&a.hi, &b.hi, Builtin::Min),
                            inside: true,
                            original: LExpr::Binary(
                                ast::BinaryOp::AndAnd,
                                Box::new(x.clone()),
                                Box::new(y.clone()),
                                span,
                            ),
                            span,
                        }))
                    }
                    _ => LExpr::Binary(ast::BinaryOp::AndAnd, Box::new(x), Box::new(y), span),
                }
            }
            ExprKind::Binary(op, x, y) => {
                let cmp =
                    LExpr::Binary(*op, Box::new(self.expr(x)?), Box::new(self.expr(y)?), span);
                let scope = Scope { names: &self.scope };
                match scope.mask(*op, x, y) {
                    Some(m) => LExpr::Mask(Box::new(Mask {
                        index: LExpr::Index(m.index),
                        lo: m.lo.map(|e| self.expr(&e)).transpose()?,
                        hi: m.hi.map(|e| self.expr(&e)).transpose()?,
                        inside: m.inside,
                        original: cmp,
                        span,
                    })),
                    None => cmp,
                }
            }
            ExprKind::Call(name, args) if name == Builtin::Size.name() => self.size(args, span)?,
            ExprKind::Call(name, args) if name == Builtin::Sample.name() => {
                self.sample(args, span)?
            }
            ExprKind::Call(name, args) => LExpr::Call(
                Builtin::named(name).map_err(|m| Error::program(span, m))?,
                args.iter().map(|a| self.expr(a)).collect::<Result<_>>()?,
                span,
            ),
        })
    }
}

impl Converter<'_> {
    /// The dimensions that `index` addresses directly (bare, not permissive) in `body`.
    /// The extent of the loop whose index `n` is (through `let` copies), looked up among the
    /// first `upto` bindings.
    fn loop_extent(&self, n: &str, upto: usize) -> Option<&Extent> {
        let k = self.scope[..upto].iter().rposition(|(m, _)| m == n)?;
        match &self.bindings[k] {
            Binding::Loop(e) => Some(e),
            Binding::Let(Some(m)) => self.loop_extent(m, k),
            Binding::Let(None) => None,
        }
    }

    /// For `for k = v:v` where `v` is (a copy of) the index of an enclosing loop over
    /// `0:size(T, d) - 1` (or `_`, sized by `T`'s dimension `d`): that dimension's size. `k`
    /// lies inside every dimension of that very size, so checking it against them would
    /// only repeat the loop's own range (concordization makes such copies of an index out
    /// of order, `x[i.0 * 4 + i.1, f]`, and the check sat in the innermost loop, where an
    /// exit keeps it from being vectorised).
    fn copy_of_sized_index(
        &self,
        a: &Expr,
        z: &Expr,
        span: ast::Span,
    ) -> Result<Option<crate::ir::Expr>> {
        let (ExprKind::Name(x), ExprKind::Name(y)) = (&a.kind, &z.kind) else {
            return Ok(None);
        };
        if x != y {
            return Ok(None);
        }
        let (t, d) = match self.loop_extent(x, self.scope.len()) {
            Some(Extent::Range(lo, hi)) if const_value(lo) == Some(Scalar::I64(0)) => {
                match size_minus_one(hi) {
                    Some(td) => td,
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(self.tensor(&t, span).ok().map(|info| info.dim(d)))
    }

    fn direct_dims(&self, body: &[Stmt], index: &str) -> Result<Vec<node::Bound>> {
        let mut found: Vec<(String, usize, ast::Span)> = vec![];
        crate::notation::visit::accesses(body, &mut |a: &ast::Access| {
            for (d, ix) in a.indices.iter().enumerate() {
                if is_direct(ix, index) && !found.iter().any(|(t, e, _)| *t == a.tensor && *e == d)
                {
                    found.push((a.tensor.clone(), d, a.span));
                }
            }
        });
        found
            .into_iter()
            .map(|(t, d, span)| {
                let info = self.tensor(&t, span)?;
                Ok(node::Bound {
                    size: info.dim(d),
                    tensor: t,
                    dim: d,
                })
            })
            .collect()
    }

    /// `size(A, d)`: the extent of dimension `d` of `A`.
    /// `sample(A, i, ...)` of a dense tensor: `sample(len(values), flat)`, the row-major
    /// position computed from the dimensions (see `Builtin::Sample`).
    fn sample(&mut self, args: &[Expr], span: ast::Span) -> Result<LExpr> {
        let Some(ExprKind::Name(t)) = args.first().map(|a| &a.kind) else {
            return Err(Error::program(
                span,
                "`sample` takes a tensor name, then one index per dimension",
            ));
        };
        let info = self.tensor(t, span)?.clone();
        // A dense array: dense levels over a leaf that stores one value per position.
        let leaf = info.level_bufs.len() - 1;
        let dense = info.format.is_dense() && !info.level_bufs[leaf].is_empty();
        if !dense || info.rank() != args.len() - 1 {
            return Err(Error::program(
                span,
                format!(
                    "`sample({t}, ...)` needs a dense array (every level dense, a value per entry) and one index per dimension ({} given, it has {})",
                    args.len() - 1,
                    info.rank()
                ),
            ));
        }
        let mut flat: Option<LExpr> = None;
        for (d, a) in args[1..].iter().enumerate() {
            let i = self.expr(a)?;
            flat = Some(match flat {
                None => i,
                Some(f) => LExpr::Binary(
                    ast::BinaryOp::Add,
                    Box::new(LExpr::Binary(
                        ast::BinaryOp::Mul,
                        Box::new(f),
                        Box::new(LExpr::Ir(info.dim(d), ElemType::I64)),
                        span,
                    )),
                    Box::new(i),
                    span,
                ),
            });
        }
        let vals = crate::ir::Expr::Len(info.level_bufs[leaf][0]);
        Ok(LExpr::Call(
            Builtin::Sample,
            vec![
                LExpr::Ir(vals, info.elem.compute()),
                flat.expect("one index or more"),
            ],
            span,
        ))
    }

    fn size(&self, args: &[Expr], span: ast::Span) -> Result<LExpr> {
        let usage = || {
            Error::program(
                span,
                "`size` takes a tensor name and a dimension number, `size(A, 0)`",
            )
        };
        let [t, d] = args else { return Err(usage()) };
        let (ExprKind::Name(t), Some(Scalar::I64(d))) = (&t.kind, const_value(d)) else {
            return Err(usage());
        };
        let info = self.tensor(t, span)?;
        if d < 0 || d as usize >= info.rank() {
            return Err(Error::program(
                span,
                format!("`{t}` has no dimension {d} (it has {})", info.rank()),
            ));
        }
        Ok(LExpr::Ir(info.dim(d as usize), ElemType::I64))
    }
}

/// Whether two masks compare the same (not yet bound) loop index.
/// The tensors some loop of `body` both reads and writes: the state variables of
/// `transforms::lifecycle` that carry a value from one iteration to the next.
fn carried(body: &[Stmt]) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    crate::notation::visit::stmts(body, &mut |s: &Stmt| {
        if let StmtKind::Loop { body, .. } = &s.kind {
            // A tensor declared inside the loop starts afresh in every iteration.
            let mut declared = std::collections::HashSet::new();
            crate::notation::visit::stmts(body, &mut |s: &Stmt| {
                if let StmtKind::Declare { tensor, .. } = &s.kind {
                    declared.insert(tensor.clone());
                }
            });
            let mut written = std::collections::HashSet::new();
            crate::notation::visit::writes(body, &mut |a| {
                if !declared.contains(&a.tensor) {
                    written.insert(a.tensor.clone());
                }
            });
            crate::notation::visit::exprs(body, &mut |e: &Expr| match &e.kind {
                ExprKind::Access(a) if written.contains(&a.tensor) => {
                    out.insert(a.tensor.clone());
                }
                ExprKind::Name(n) if written.contains(n) => {
                    out.insert(n.clone());
                }
                _ => {}
            });
        }
    });
    out
}

fn same_index(a: &Mask, b: &Mask) -> bool {
    matches!((&a.index, &b.index), (LExpr::Index(x), LExpr::Index(y)) if x == y)
}

/// Whether a loop bound is fixed by the tensors' shapes alone (literals, `size(...)`): the
/// shape check before every run then covers the dimensions its index addresses.
fn is_static(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) => true,
        ExprKind::Name(_) | ExprKind::Access(_) | ExprKind::Missing => false,
        ExprKind::Call(f, _) if f == Builtin::Size.name() => true,
        ExprKind::Unary(_, x) => is_static(x),
        ExprKind::Binary(_, x, y) => is_static(x) && is_static(y),
        ExprKind::Call(_, args) => args.iter().all(is_static),
    }
}

/// A loop's binding in [`Converter::bindings`].
enum Binding {
    Loop(Extent),
    /// A `let`, with the name its value is when that is a plain name.
    Let(Option<String>),
}

/// `size(T, d) - 1` (what `_` resolves to): `(T, d)`.
fn size_minus_one(e: &Expr) -> Option<(String, usize)> {
    let ExprKind::Binary(ast::BinaryOp::Sub, x, one) = &e.kind else {
        return None;
    };
    if const_value(one) != Some(Scalar::I64(1)) {
        return None;
    }
    match &x.kind {
        ExprKind::Call(f, args) if f == Builtin::Size.name() => match args.as_slice() {
            [t, d] => match (&t.kind, const_value(d)) {
                (ExprKind::Name(t), Some(Scalar::I64(d))) if d >= 0 => {
                    Some((t.clone(), d as usize))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// A literal, possibly negated.
pub fn const_value(e: &Expr) -> Option<Scalar> {
    match &e.kind {
        ExprKind::Literal(s) => Some(*s),
        ExprKind::Unary(ast::UnaryOp::Neg, x) => const_value(x)
            .and_then(|v| crate::semantics::eval_unary(ast::UnaryOp::Neg, v.widen()).ok()),
        _ => None,
    }
}

/// The vectorised loops (`for i = vectorize(_)`) by their statement's place and index, for
/// the engine (as [`parallel_by_place`]).
fn vector_loops(program: &Program) -> std::collections::HashSet<(u32, u32, String)> {
    let mut out = std::collections::HashSet::new();
    crate::notation::visit::stmts(&program.body, &mut |s| {
        if let crate::notation::ast::StmtKind::Loop {
            index,
            parallel: crate::notation::ast::LoopMode::Vector,
            ..
        } = &s.kind
        {
            out.insert((s.span.line, s.span.col, index.clone()));
        }
    });
    out
}

/// The parallel loops by their statement's place and index, for the engine. Two loops with
/// the same key (a generated program can give several loops one place) would share one entry
/// and one list of privatised outputs, which is right for neither: both run serially then,
/// which is always correct.
fn parallel_by_place(
    plans: &[crate::transforms::parallel::Plan],
) -> std::collections::HashMap<(u32, u32, String), crate::transforms::parallel::Plan> {
    let key = |p: &crate::transforms::parallel::Plan| (p.span.line, p.span.col, p.index.clone());
    let mut seen = std::collections::HashMap::new();
    for p in plans {
        *seen.entry(key(p)).or_insert(0) += 1;
    }
    plans
        .iter()
        .filter(|p| seen[&key(p)] == 1)
        .map(|p| (key(p), p.clone()))
        .collect()
}
