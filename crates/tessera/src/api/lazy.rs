//! Lazy tensor expressions: [`lazy`] wraps a tensor, operators and methods build an
//! expression graph without computing anything, and [`Lazy::compute`] fuses the graph into as
//! few einsum kernels as it can before running them.
//!
//! Fusion works on *terms*: one einsum statement each, `OUT[free] op= body`, where `body` is a
//! pointwise expression of input accesses and `op` an optional reduction over the indices not
//! in `free`. Elementwise operations combine the bodies of their operands (broadcasting
//! renames index variables, so no copy is made), reductions add indices to reduce, and
//! permutations only reorder the free indices (a swizzled view, never a copy). A product with
//! a sum as an operand, `x * sum_k y`, becomes `sum_k x * y`: the reduction is pulled out, so
//! the other factor's sparsity limits where the contraction is computed. That is how SDDMM,
//! `A * (B @ C)` with a sparse `A`, runs only at `A`'s stored entries, in one kernel.
//!
//! A term is *materialized* (computed into a tensor by a kernel of its own, then read as an
//! input) only where one statement cannot express the rest: an operation that does not
//! distribute over the reduction of its operand (`sqrt(sum(x))`), two reduced operands of
//! one operation, or a reduction of a reduction with another operator.

use super::broadcast::{broadcast_shape, squeeze, unsqueeze};
use super::cache::with_runner;
use super::einsum::einsum_with;
use super::elementwise::Op;
use super::reduce::Reduction;
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::ast::Span;
use crate::run::Runner;
use crate::tensor::Tensor;
use crate::types::{Class, ElemType, Scalar};
use std::collections::HashMap;
use std::rc::Rc;

/// A tensor expression, computed only by [`Lazy::compute`]. Cloning is cheap (shared nodes).
///
/// ```
/// use tessera::api::lazy;
/// use tessera::runtime::Buffer;
/// use tessera::tensor::Tensor;
/// let a = Tensor::from_slice("csr", &[2, 2], &Buffer::F64(vec![1.0, 0.0, 0.0, 2.0].into())).unwrap();
/// let b = Tensor::from_slice("dense", &[2, 3], &Buffer::F64(vec![1.0; 6].into())).unwrap();
/// // SDDMM: the product B Bᵀ is computed only where A stores an entry.
/// let (a, b) = (lazy(&a), lazy(&b));
/// let (out, statements) = (&a * &b.matmul(&b.transpose())).compute_explained().unwrap();
/// assert_eq!(out.to_dense(), Buffer::F64(vec![3.0, 0.0, 0.0, 6.0].into()));
/// assert_eq!(statements.len(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Lazy(Rc<Node>);

#[derive(Debug)]
enum Node {
    Input(Rc<Tensor>),
    Map(Op, Vec<Lazy>),
    Reduce(Reduction, Lazy, Vec<usize>),
    /// Dimension `d` of the result is dimension `perm[d]` of the operand.
    Permute(Lazy, Vec<usize>),
    /// A new dimension of extent 1 at this position.
    ExpandDims(Lazy, usize),
    MatMul(Lazy, Lazy),
}

/// Start a lazy expression from a tensor (the tensor is copied once; see [`Lazy::from`] to
/// hand one over without a copy).
pub fn lazy(t: &Tensor) -> Lazy {
    Lazy::from(t.clone())
}

impl From<Tensor> for Lazy {
    fn from(t: Tensor) -> Lazy {
        Lazy(Rc::new(Node::Input(Rc::new(t))))
    }
}

impl Lazy {
    fn node(n: Node) -> Lazy {
        Lazy(Rc::new(n))
    }

    /// Apply an elementwise operation to this and `others` (as many as its arity), with NumPy
    /// broadcasting.
    pub fn map(&self, op: Op, others: &[&Lazy]) -> Lazy {
        let mut args = vec![self.clone()];
        args.extend(others.iter().map(|l| (*l).clone()));
        Lazy::node(Node::Map(op, args))
    }

    /// Reduce over `axes` (all of them when empty), as [`super::reduce`].
    pub fn reduce(&self, how: Reduction, axes: &[usize]) -> Lazy {
        Lazy::node(Node::Reduce(how, self.clone(), axes.to_vec()))
    }

    pub fn sum(&self, axes: &[usize]) -> Lazy {
        self.reduce(Reduction::Sum, axes)
    }

    /// A view whose dimension `d` is dimension `perm[d]` of this one (no copy is made).
    pub fn permute(&self, perm: &[usize]) -> Lazy {
        Lazy::node(Node::Permute(self.clone(), perm.to_vec()))
    }

    /// The view with the dimensions reversed.
    pub fn transpose(&self) -> Lazy {
        Lazy::node(Node::Permute(self.clone(), vec![]))
    }

    /// A view with a new dimension of extent 1 at `axis` (NumPy's `expand_dims`).
    pub fn expand_dims(&self, axis: usize) -> Lazy {
        Lazy::node(Node::ExpandDims(self.clone(), axis))
    }

    /// `self @ other` for 1-d and 2-d operands, NumPy's rules (as [`super::matmul`]).
    pub fn matmul(&self, other: &Lazy) -> Lazy {
        Lazy::node(Node::MatMul(self.clone(), other.clone()))
    }

    /// The shape the expression will have, or the error computing it would give.
    pub fn shape(&self) -> Result<Vec<usize>> {
        let mut f = Fuser::new(None);
        Ok(f.term(self)?.out.iter().map(|v| f.extent[v.0]).collect())
    }

    /// Compute the expression with the thread's kernel cache.
    pub fn compute(&self) -> Result<Tensor> {
        Ok(self.compute_explained()?.0)
    }

    /// Compute, and list the einsum statements that ran, in order (one per kernel).
    pub fn compute_explained(&self) -> Result<(Tensor, Vec<String>)> {
        with_runner(|r| self.compute_with(r, None))
    }

    /// Compute through a kernel cache of your own, optionally choosing the output format.
    pub fn compute_with(
        &self,
        runner: &Runner,
        output: Option<&Format>,
    ) -> Result<(Tensor, Vec<String>)> {
        let mut f = Fuser::new(Some(runner));
        let t = f.term(self)?;
        let out = f.run(&t, output)?;
        Ok((out, f.statements))
    }
}

macro_rules! operators {
    ($($tr:ident $method:ident => $op:ident),*) => {$(
        impl std::ops::$tr<&Lazy> for &Lazy {
            type Output = Lazy;
            fn $method(self, rhs: &Lazy) -> Lazy {
                self.map(Op::$op, &[rhs])
            }
        }
    )*};
}

operators!(Add add => Add, Sub sub => Sub, Mul mul => Mul, Div div => Div);

impl std::ops::Neg for &Lazy {
    type Output = Lazy;
    fn neg(self) -> Lazy {
        self.map(Op::Neg, &[])
    }
}

/// An index variable of a term; its extent is in `Fuser::extent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Var(usize);

/// A pointwise expression over input accesses.
#[derive(Clone, Debug)]
enum Body {
    Read(usize, Vec<Var>),
    Lit(Scalar),
    Apply(Op, Vec<Body>),
}

impl Body {
    fn rename(&mut self, from: Var, to: Var) {
        match self {
            Body::Read(_, vars) => vars
                .iter_mut()
                .filter(|v| **v == from)
                .for_each(|v| *v = to),
            Body::Lit(_) => {}
            Body::Apply(_, args) => args.iter_mut().for_each(|a| a.rename(from, to)),
        }
    }

    fn uses(&self, v: Var) -> bool {
        match self {
            Body::Read(_, vars) => vars.contains(&v),
            Body::Lit(_) => false,
            Body::Apply(_, args) => args.iter().any(|a| a.uses(v)),
        }
    }

    fn reads(&self, out: &mut Vec<usize>) {
        match self {
            Body::Read(k, _) => out.push(*k),
            Body::Lit(_) => {}
            Body::Apply(_, args) => args.iter().for_each(|a| a.reads(out)),
        }
    }
}

/// The variables a body reads with, each once, in order of first use.
fn read_vars(b: &Body, out: &mut Vec<Var>) {
    match b {
        Body::Read(_, vars) => {
            for v in vars {
                if !out.contains(v) {
                    out.push(*v);
                }
            }
        }
        Body::Lit(_) => {}
        Body::Apply(_, args) => args.iter().for_each(|a| read_vars(a, out)),
    }
}

/// One einsum statement: `free` are the output's indices, `reduced` the others.
#[derive(Clone, Debug)]
struct Term {
    out: Vec<Var>,
    reduction: Option<(Reduction, Vec<Var>)>,
    body: Body,
}

struct Fuser<'r> {
    /// `None` when only shapes are wanted: nothing may be computed.
    runner: Option<&'r Runner>,
    extent: Vec<usize>,
    inputs: Vec<Rc<Tensor>>,
    /// Squeezed copies already made, by (input, kept dimensions).
    squeezed: HashMap<(usize, Vec<bool>), usize>,
    statements: Vec<String>,
}

impl<'r> Fuser<'r> {
    fn new(runner: Option<&'r Runner>) -> Fuser<'r> {
        Fuser {
            runner,
            extent: vec![],
            inputs: vec![],
            squeezed: HashMap::new(),
            statements: vec![],
        }
    }

    fn var(&mut self, n: usize) -> Var {
        self.extent.push(n);
        Var(self.extent.len() - 1)
    }

    fn input(&mut self, t: Rc<Tensor>) -> Term {
        let k = match self.inputs.iter().position(|u| Rc::ptr_eq(u, &t)) {
            Some(k) => k,
            None => {
                self.inputs.push(t.clone());
                self.inputs.len() - 1
            }
        };
        let out: Vec<Var> = t.shape.iter().map(|&n| self.var(n)).collect();
        Term {
            body: Body::Read(k, out.clone()),
            out,
            reduction: None,
        }
    }

    fn term(&mut self, l: &Lazy) -> Result<Term> {
        match &*l.0 {
            Node::Input(t) => Ok(self.input(t.clone())),
            Node::Permute(x, perm) => {
                let t = self.term(x)?;
                let r = t.out.len();
                let perm: Vec<usize> = if perm.is_empty() {
                    (0..r).rev().collect()
                } else {
                    perm.clone()
                };
                let mut seen = vec![false; r];
                if perm.len() != r
                    || perm
                        .iter()
                        .any(|&p| p >= r || std::mem::replace(&mut seen[p], true))
                {
                    return Err(Error::Usage(format!(
                        "permutation {perm:?} does not reorder the {r} dimensions of its operand"
                    )));
                }
                let out = perm.iter().map(|&p| t.out[p]).collect();
                Ok(Term { out, ..t })
            }
            Node::ExpandDims(x, axis) => {
                let mut t = self.term(x)?;
                let r = t.out.len();
                if *axis > r {
                    return Err(Error::Usage(format!(
                        "axis {axis} is past the end of a {r}-d operand"
                    )));
                }
                let v = self.var(1);
                t.out.insert(*axis, v);
                Ok(t)
            }
            Node::Map(op, args) => {
                if args.len() != op.arity() {
                    return Err(Error::Usage(format!(
                        "{op:?} takes {} tensor(s), got {}",
                        op.arity(),
                        args.len()
                    )));
                }
                let terms = args
                    .iter()
                    .map(|a| self.term(a))
                    .collect::<Result<Vec<_>>>()?;
                self.combine(*op, terms)
            }
            Node::MatMul(a, b) => {
                let (ta, tb) = (self.term(a)?, self.term(b)?);
                self.matmul(ta, tb)
            }
            Node::Reduce(how, x, axes) => self.reduce(*how, x, axes),
        }
    }

    /// Apply `op` to the operands' terms with broadcasting: one term, unless an operand's
    /// reduction cannot be pulled out of `op`.
    fn combine(&mut self, op: Op, mut terms: Vec<Term>) -> Result<Term> {
        // At most one reduced operand is pulled out, and only through a product of sums.
        let reduced: Vec<usize> = (0..terms.len())
            .filter(|&k| terms[k].reduction.is_some())
            .collect();
        let shapes: Vec<Vec<usize>> = terms
            .iter()
            .map(|t| t.out.iter().map(|v| self.extent[v.0]).collect())
            .collect();
        let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let shape = broadcast_shape(&refs)?;
        // A reduced operand stretched by broadcasting stays a kernel of its own: pulled out,
        // its reduction would run once per coordinate it is stretched over.
        let pull = reduced.last().copied().filter(|&k| {
            let how = terms[k].reduction.as_ref().map(|r| r.0);
            how.is_some_and(|h| distributes(op, h)) && shapes[k] == shape
        });
        for &k in &reduced {
            if Some(k) != pull {
                terms[k] = self.materialize(&terms[k])?;
            }
        }
        let out: Vec<Var> = shape.iter().map(|&n| self.var(n)).collect();
        let mut bodies = vec![];
        let mut reduction = None;
        for (mut t, s) in terms.into_iter().zip(&shapes) {
            let lead = shape.len() - s.len();
            for (d, &v) in t.out.clone().iter().enumerate() {
                let target = out[d + lead];
                if s[d] != shape[d + lead] {
                    self.drop_unit_var(&mut t.body, v)?;
                } else {
                    t.body.rename(v, target);
                }
            }
            if let Some(r) = t.reduction.take() {
                reduction = Some(r);
            }
            bodies.push(t.body);
        }
        let body = Body::Apply(op, constant_operands(bodies, &self.inputs));
        Ok(Term {
            out,
            reduction,
            body,
        })
    }

    /// A broadcast size-1 variable: reads that use it get a copy without that dimension.
    fn drop_unit_var(&mut self, body: &mut Body, v: Var) -> Result<()> {
        match body {
            Body::Read(k, vars) if vars.contains(&v) => {
                let keep: Vec<bool> = vars.iter().map(|u| *u != v).collect();
                let key = (*k, keep.clone());
                let n = match self.squeezed.get(&key) {
                    Some(&n) => n,
                    None => {
                        let t = squeeze(&self.inputs[*k], &keep)?;
                        self.inputs.push(Rc::new(t));
                        let n = self.inputs.len() - 1;
                        self.squeezed.insert(key, n);
                        n
                    }
                };
                *k = n;
                vars.retain(|u| *u != v);
                Ok(())
            }
            Body::Apply(_, args) => args.iter_mut().try_for_each(|a| self.drop_unit_var(a, v)),
            _ => Ok(()),
        }
    }

    fn reduce(&mut self, how: Reduction, x: &Lazy, axes: &[usize]) -> Result<Term> {
        let mut t = self.term(x)?;
        let r = t.out.len();
        let mut reduced = vec![axes.is_empty(); r];
        for &d in axes {
            if d >= r {
                return Err(Error::Usage(format!(
                    "axis {d} is outside the {r} dimensions of the reduced operand"
                )));
            }
            if std::mem::replace(&mut reduced[d], true) {
                return Err(Error::Usage(format!("axis {d} is listed twice")));
            }
        }
        let mut vars = match &t.reduction {
            Some((h, vars)) if *h == how && mergeable(how) => vars.clone(),
            Some(_) => {
                t = self.materialize(&t)?;
                vec![]
            }
            None => vec![],
        };
        let out = t.out.clone();
        vars.extend(
            out.iter()
                .zip(&reduced)
                .filter(|(_, r)| **r)
                .map(|(v, _)| *v),
        );
        Ok(Term {
            out: out
                .iter()
                .zip(&reduced)
                .filter(|(_, r)| !**r)
                .map(|(v, _)| *v)
                .collect(),
            reduction: Some((how, vars)),
            body: t.body,
        })
    }

    /// `a @ b`: the product of the operands expanded to `(m, k, 1)` and `(1, k, n)` (a 1-d
    /// operand has no `m` or `n`), summed over `k`.
    fn matmul(&mut self, mut ta: Term, mut tb: Term) -> Result<Term> {
        let (ra, rb) = (ta.out.len(), tb.out.len());
        if !(1..=2).contains(&ra) || !(1..=2).contains(&rb) {
            return Err(Error::Usage(format!(
                "matmul takes 1-d and 2-d operands, not {ra}-d and {rb}-d"
            )));
        }
        let (ka, kb) = (self.extent[ta.out[ra - 1].0], self.extent[tb.out[0].0]);
        if ka != kb {
            return Err(Error::DimensionMismatch {
                span: Span::default(),
                msg: format!(
                    "matmul: the left operand has {ka} columns but the right one {kb} rows"
                ),
            });
        }
        if ra == 1 {
            ta.out.insert(0, self.var(1));
        }
        ta.out.push(self.var(1));
        if rb == 1 {
            tb.out.push(self.var(1));
        }
        tb.out.insert(0, self.var(1));
        let product = self.combine(Op::Mul, vec![ta, tb])?;
        let mut out = product.out.clone();
        let k = out.remove(1);
        if rb == 1 {
            out.pop();
        }
        if ra == 1 {
            out.remove(0);
        }
        let mut vars = match product.reduction {
            Some((_, vars)) => vars,
            None => vec![],
        };
        vars.push(k);
        Ok(Term {
            out,
            reduction: Some((Reduction::Sum, vars)),
            body: product.body,
        })
    }

    /// Compute a term into a tensor and read it as an input.
    /// `t` with each compound operand of its top operation computed into a tensor of its own
    /// (read with the same variables); `None` when it has none.
    fn split(&mut self, t: &Term) -> Result<Option<Term>> {
        let Body::Apply(op, args) = &t.body else {
            return Ok(None);
        };
        if !args.iter().any(|a| matches!(a, Body::Apply(..))) {
            return Ok(None);
        }
        let mut operands = vec![];
        for a in args {
            if let Body::Apply(..) = a {
                let mut vars = vec![];
                read_vars(a, &mut vars);
                let part = Term {
                    out: vars.clone(),
                    reduction: None,
                    body: a.clone(),
                };
                let value = self.run(&part, None)?;
                self.inputs.push(Rc::new(value));
                operands.push(Body::Read(self.inputs.len() - 1, vars));
            } else {
                operands.push(a.clone());
            }
        }
        Ok(Some(Term {
            body: Body::Apply(*op, operands),
            ..t.clone()
        }))
    }

    fn materialize(&mut self, t: &Term) -> Result<Term> {
        let out = self.run(t, None)?;
        Ok(self.input(Rc::new(out)))
    }

    fn run(&mut self, t: &Term, output: Option<&Format>) -> Result<Tensor> {
        let Some(runner) = self.runner else {
            // Only shapes were asked for: an empty stand-in of the right shape, in a format
            // that allocates nothing per coordinate.
            let shape: Vec<usize> = t.out.iter().map(|v| self.extent[v.0]).collect();
            let mut levels = vec![];
            if !shape.is_empty() {
                levels.push(crate::levels::LevelKind::SparseCOO(shape.len()));
            }
            levels.push(crate::levels::LevelKind::Element(Scalar::F64(0.0)));
            return Tensor::empty(&Format::new(levels)?, &shape);
        };
        // Unit dimensions no read uses (from `expand_dims` or a broadcast) have no extent in
        // einsum's eyes: the statement leaves them out and the result gets them back.
        let keep: Vec<bool> = t.out.iter().map(|v| t.body.uses(*v)).collect();
        let inner = Term {
            out: t.out.iter().copied().filter(|v| t.body.uses(*v)).collect(),
            ..t.clone()
        };
        let (spec, names) = self.render(&inner)?;
        let named: Vec<(&str, &Tensor)> = names
            .iter()
            .map(|(n, k)| (n.as_str(), &*self.inputs[*k]))
            .collect();
        let all_kept = keep.iter().all(|&k| k);
        let out = match einsum_with(runner, &spec, &named, output.filter(|_| all_kept)) {
            Ok(out) => out,
            // A fused statement the compiler refuses (its kernel would be too large) is
            // computed as its compound operands first, then the smaller statement.
            Err(e @ Error::Unsupported { .. }) => {
                return match self.split(t)? {
                    Some(smaller) => self.run(&smaller, output),
                    None => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        self.statements.push(spec);
        if all_kept {
            return Ok(out);
        }
        let out = unsqueeze(&out, &keep)?;
        match output {
            Some(f) => out.to_format(f),
            None => Ok(out),
        }
    }

    /// The einsum statement of a term and the inputs it reads, by name.
    fn render(&self, t: &Term) -> Result<(String, Vec<(String, usize)>)> {
        let name = |v: &Var| format!("i{}", v.0);
        let mut reads = vec![];
        t.body.reads(&mut reads);
        reads.sort_unstable();
        reads.dedup();
        let names: Vec<(String, usize)> = reads.iter().map(|&k| (format!("T{k}"), k)).collect();
        let mut body = show(&t.body);
        let op = match &t.reduction {
            None => "=",
            Some((how, _)) => match how {
                Reduction::Sum => "+=",
                Reduction::Prod => "*=",
                Reduction::Max => "<<max>>=",
                Reduction::Min => "<<min>>=",
                Reduction::Any | Reduction::All => {
                    body = match self.class_of(&t.body)? {
                        Class::Bool => body,
                        Class::Int => format!("({body}) != 0"),
                        Class::Float => format!("({body}) != 0.0"),
                    };
                    if *how == Reduction::Any { "|=" } else { "&=" }
                }
            },
        };
        let out: Vec<String> = t.out.iter().map(name).collect();
        Ok((format!("OUT[{}] {op} {body}", out.join(", ")), names))
    }

    fn class_of(&self, b: &Body) -> Result<Class> {
        let e = crate::notation::parse::parse_expr(&show(b))?;
        let mut reads = vec![];
        b.reads(&mut reads);
        let classes: Vec<Class> = reads
            .iter()
            .map(|&k| self.inputs[k].elem().class())
            .collect();
        super::fills::class_of(&e, &classes)
    }
}

/// Whether `op(x, reduce_k y) == reduce_k op(x, y)` for `x` not depending on `k`.
fn distributes(op: Op, how: Reduction) -> bool {
    matches!((op, how), (Op::Mul, Reduction::Sum))
}

/// Reductions of reductions that are one reduction over both sets of indices.
fn mergeable(how: Reduction) -> bool {
    matches!(
        how,
        Reduction::Sum | Reduction::Prod | Reduction::Max | Reduction::Min
    )
}

/// 0-d operands whose type a literal has become literals, so the fill algebra sees them
/// (as [`super::map`] does).
fn constant_operands(bodies: Vec<Body>, inputs: &[Rc<Tensor>]) -> Vec<Body> {
    let literal = |b: &Body| match b {
        Body::Read(k, vars) if vars.is_empty() => {
            let t = &inputs[*k];
            matches!(t.elem(), ElemType::F64 | ElemType::I64 | ElemType::Bool)
                .then(|| t.to_dense().get(0))
        }
        _ => None,
    };
    bodies
        .into_iter()
        .map(|b| literal(&b).map_or(b, Body::Lit))
        .collect()
}

fn show(b: &Body) -> String {
    match b {
        Body::Read(k, vars) => {
            let v: Vec<String> = vars.iter().map(|v| format!("i{}", v.0)).collect();
            format!("T{k}[{}]", v.join(", "))
        }
        Body::Lit(v) => format!("({v})"),
        Body::Apply(op, args) => {
            let a: Vec<String> = args.iter().map(|x| format!("({})", show(x))).collect();
            op.apply(&a)
        }
    }
}
