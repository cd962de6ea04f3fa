//! Static checks of a source program, run by every backend before anything else: the compiler
//! runs them before normalisation (whose passes rewrite accesses and drop statements, so a
//! later check would miss or crash on what they changed) and the reference evaluator before
//! executing. Both therefore reject the same programs with the same message, whether or not the
//! faulty code would ever run:
//! - every name is bound (a loop index, a `let` variable or a 0-d tensor) and every tensor is
//!   known, even in a statement whose value is `missing` (which normalisation drops);
//! - every access has one index per dimension of its tensor (`x[i, i]` on a vector);
//! - no `for` or `let` rebinds a name that an enclosing `for` or `let` binds: Finch's loops
//!   have no meaningful shadowing, and the backends used to disagree about it;
//! - indices, window bounds and loop bounds are not floats (no silent truncation);
//! - no built-in reduction (`+=`, `-=`, `*=`, `<<min>>=`, `<<max>>=`, `<<choose>>=`) computes
//!   in floats into an integer or bool tensor: converting at every step would make `+= 0.0`
//!   change a large integer (so no sparse kernel could skip its zeros) and `+= 2.5` three
//!   times depend on whether the loop is summed step by step or folded to `3 * 2.5`. A user
//!   reducer's body decides its result class and the result is stored converted, as a cast
//!   (the kernel applies the body at every step; its declared properties are the user's);
//! - built-in functions get their number of arguments, `size(A, d)` a tensor and a dimension;
//! - a tensor declared inside a loop is not accessed, in that loop, through the index of a loop
//!   around its declaration (`for i: y .= 0; y[i] = ...`): every iteration would start it
//!   afresh while filling it by that index, keeping only the last iteration's entries, and the
//!   compilers, which open the tensor's fibers at the loop that binds the index (outside the
//!   declaration), got such programs wrong for several formats (found by the differential
//!   fuzzer once it declared tensors inside loops).
//!
//! Checks that need the tensors' shapes (a constant index outside its dimension) are in
//! [`crate::transforms::dimensionalize`], which runs whenever the shapes are known.

use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AssignOp, Expr, ExprKind, Extent, Program, Reducer, ReducerDef, Span, Stmt, StmtKind,
};
use crate::semantics;
use crate::semantics::Builtin;
use crate::types::{Class, ElemType, Scalar};
use std::collections::HashMap;

/// What the checks need to know of a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Signature {
    pub rank: usize,
    pub elem: ElemType,
}

/// The tensors a program runs on, by name.
pub type Signatures = HashMap<String, Signature>;

/// Whether dimension `d` of tensor `t` is real (`is_real(t, d)`).
pub type IsRealDim<'a> = dyn Fn(&str, usize) -> bool + 'a;

/// The message of an index, window bound or loop bound of float type.
pub const FLOAT_INDEX: &str = "an index or extent must be an integer, not a float";

/// Check `p` against the tensors it runs on (see the module documentation); the rules of
/// windows and swizzles ([`crate::transforms::wrapperize::check_wrappers`]) come first.
pub fn check(p: &Program, tensors: &Signatures) -> Result<()> {
    crate::transforms::wrapperize::check_wrappers(p)?;
    Checker {
        tensors,
        reducers: &p.reducers,
        bound: vec![],
        float_reductions: None,
        real_dims: None,
    }
    .stmts(&p.body)?;
    declarations_in_their_loops(&p.body, &mut vec![])
}

/// [`check`] for a program over tensors with real dimensions (issue 14; `is_real(t, d)` says
/// whether dimension `d` of `t` is real): a loop with a float bound is a real loop whose index
/// is a float, and a position of a real dimension may be a float. Everything else is checked
/// as by [`check`]; which index may go where is [`crate::transforms::real::check_real`]'s
/// business.
pub fn check_with_real_dims(p: &Program, tensors: &Signatures, is_real: &IsRealDim) -> Result<()> {
    crate::transforms::wrapperize::check_wrappers(p)?;
    Checker {
        tensors,
        reducers: &p.reducers,
        bound: vec![],
        float_reductions: None,
        real_dims: Some(is_real),
    }
    .stmts(&p.body)?;
    declarations_in_their_loops(&p.body, &mut vec![])
}

/// A loop around the statement being checked: its index, place and body.
type OpenLoop<'a> = (&'a str, Span, &'a [Stmt]);

/// Refuse a tensor declared inside a loop and accessed, in the innermost loop around the
/// declaration, through the index of any loop around it (module documentation).
fn declarations_in_their_loops<'a>(stmts: &'a [Stmt], loops: &mut Vec<OpenLoop<'a>>) -> Result<()> {
    for s in stmts {
        match &s.kind {
            StmtKind::Declare { tensor, .. } => {
                let Some(&(_, _, body)) = loops.last() else {
                    continue;
                };
                let mut found = None;
                crate::notation::visit::accesses(body, &mut |a| {
                    if found.is_some() || a.tensor != *tensor {
                        return;
                    }
                    for ix in &a.indices {
                        crate::notation::visit::index(ix, &mut |e| {
                            if let ExprKind::Name(n) = &e.kind
                                && let Some(&(index, at, _)) = loops.iter().find(|l| l.0 == n)
                                && found.is_none()
                            {
                                found = Some((a.span, index, at));
                            }
                        });
                    }
                });
                if let Some((span, index, at)) = found {
                    return Err(Error::program(
                        span,
                        format!(
                            "`{tensor}` is declared at {} inside the loop over `{index}` at {at} \
                             and accessed here through `{index}`: every iteration would start \
                             `{tensor}` afresh while filling it by `{index}`, keeping only the \
                             last iteration's entries; declare `{tensor}` before that loop",
                            s.span
                        ),
                    ));
                }
            }
            StmtKind::Loop { index, body, .. } => {
                loops.push((index, s.span, body));
                let r = declarations_in_their_loops(body, loops);
                loops.pop();
                r?;
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                declarations_in_their_loops(then, loops)?;
                declarations_in_their_loops(otherwise, loops)?;
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                declarations_in_their_loops(body, loops)?
            }
            StmtKind::Assign { .. } | StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
    Ok(())
}

/// The tensors among `tensors` with an integer or bool element type that `p` stores float
/// values into, by a reduction (what [`check`] refuses) or an overwrite (a cast), each once,
/// in program order. A caller that wants such a tensor computed in floats (the command line,
/// which then checks that every value comes out whole) switches its format first. Empty when
/// `p` fails another check.
pub fn float_stores(p: &Program, tensors: &Signatures) -> Vec<String> {
    let mut c = Checker {
        tensors,
        reducers: &p.reducers,
        bound: vec![],
        float_reductions: Some(vec![]),
        real_dims: None,
    };
    match c.stmts(&p.body) {
        Ok(()) => c.float_reductions.unwrap_or_default(),
        Err(_) => vec![],
    }
}

/// The tensor and dimension of a well-formed `size(A, d)`; `rank` gives a tensor's rank.
pub fn size_args<'e>(
    args: &'e [Expr],
    span: Span,
    rank: &dyn Fn(&str) -> Option<usize>,
) -> Result<(&'e str, usize)> {
    let usage = || {
        Error::program(
            span,
            "`size` takes a tensor name and a dimension number, `size(A, 0)`",
        )
    };
    let [t, d] = args else { return Err(usage()) };
    let (ExprKind::Name(t), ExprKind::Literal(Scalar::I64(d))) = (&t.kind, &d.kind) else {
        return Err(usage());
    };
    let r = rank(t).ok_or_else(|| Error::program(span, format!("unknown tensor `{t}`")))?;
    if *d < 0 || *d as usize >= r {
        return Err(Error::program(
            span,
            format!("`{t}` has no dimension {d} (it has {r})"),
        ));
    }
    Ok((t, *d as usize))
}

/// A name bound by a `for` or a `let`.
struct Binder {
    name: String,
    span: Span,
    is_loop: bool,
    /// The class of its values, when known (`None` for a `missing` or ill-typed `let`).
    class: Option<Class>,
}

impl Binder {
    fn describe(&self) -> String {
        if self.is_loop {
            format!("the loop over `{}` at {}", self.name, self.span)
        } else {
            format!("`let {}` at {}", self.name, self.span)
        }
    }
}

struct Checker<'a> {
    tensors: &'a Signatures,
    /// The program's reducer definitions, for the class of a `<<name>>=` reduction.
    reducers: &'a [ReducerDef],
    /// Loop indices and `let` variables in scope, outermost first.
    bound: Vec<Binder>,
    /// `Some`: collect the tensors float values are stored into (by a reduction, then not an
    /// error, or an overwrite) instead of failing on the reductions.
    float_reductions: Option<Vec<String>>,
    /// Which tensor dimensions are real, when the program may have real loops.
    real_dims: Option<&'a IsRealDim<'a>>,
}

fn dimensions(n: usize) -> String {
    if n == 1 {
        "1 dimension".into()
    } else {
        format!("{n} dimensions")
    }
}

impl Checker<'_> {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn tensor(&self, name: &str, span: Span) -> Result<Signature> {
        self.tensors
            .get(name)
            .copied()
            .ok_or_else(|| Error::program(span, format!("unknown tensor `{name}`")))
    }

    /// Run `body` with `b` bound; an enclosing binder of the same name is an error naming both.
    fn scoped(&mut self, b: Binder, body: &[Stmt]) -> Result<()> {
        if let Some(outer) = self.bound.iter().find(|o| o.name == b.name) {
            let msg = format!(
                "{} reuses the name bound by {} that encloses it; rename one of them",
                b.describe(),
                outer.describe()
            );
            return Err(Error::program(b.span, msg));
        }
        self.bound.push(b);
        let r = self.stmts(body);
        self.bound.pop();
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Declare { tensor, init } => {
                self.tensor(tensor, s.span)?;
                self.expr(init).map(|_| ())
            }
            StmtKind::Assign { lhs, op, rhs } => {
                self.access(lhs)?;
                let value = self.expr(rhs)?;
                match (op, value) {
                    (AssignOp::Reduce(r), Some(v)) => self.reduction(lhs, r, v, s.span),
                    (AssignOp::Overwrite, Some(Class::Float)) => {
                        let elem = self.tensor(&lhs.tensor, lhs.span)?.elem;
                        if elem.class() != Class::Float {
                            self.found_float_store(&lhs.tensor);
                        }
                        Ok(())
                    }
                    _ => Ok(()),
                }
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                let mut class = Class::Int;
                if let Extent::Range(a, b) = extent {
                    if self.real_dims.is_some() {
                        // A float bound makes a real loop, whose index is a float.
                        for e in [a, b] {
                            if self.expr(e)? == Some(Class::Float) {
                                class = Class::Float;
                            }
                        }
                    } else {
                        self.index(a)?;
                        self.index(b)?;
                    }
                }
                let binder = Binder {
                    name: index.clone(),
                    span: s.span,
                    is_loop: true,
                    class: Some(class),
                };
                self.scoped(binder, body)
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond)?;
                self.stmts(then)?;
                self.stmts(otherwise)
            }
            StmtKind::Let { name, value, body } => {
                let binder = Binder {
                    name: name.clone(),
                    span: s.span,
                    is_loop: false,
                    class: self.expr(value)?,
                };
                self.scoped(binder, body)
            }
            StmtKind::Block(body) => self.stmts(body),
            StmtKind::Freeze { tensor } | StmtKind::Thaw { tensor } => {
                self.tensor(tensor, s.span).map(|_| ())
            }
        }
    }

    fn access(&mut self, a: &Access) -> Result<()> {
        let t = self.tensor(&a.tensor, a.span)?;
        if a.indices.len() != t.rank {
            return Err(Error::DimensionMismatch {
                span: a.span,
                msg: format!(
                    "`{}` has {} but `{a}` gives {} {}",
                    a.tensor,
                    dimensions(t.rank),
                    a.indices.len(),
                    if a.indices.len() == 1 {
                        "index"
                    } else {
                        "indices"
                    }
                ),
            });
        }
        for (k, ix) in a.indices.iter().enumerate() {
            if let Some((lo, hi)) = &ix.window {
                self.index(lo)?;
                self.index(hi)?;
            }
            if self
                .real_dims
                .is_some_and(|real| real(&a.tensor, a.dim_of(k)))
            {
                self.expr(&ix.expr)?;
            } else {
                self.index(&ix.expr)?;
            }
        }
        Ok(())
    }

    /// A built-in reduction `lhs <r>= value` (the value of class `value`) does not compute in
    /// floats into an integer or bool tensor. An overwrite `=` converts once, as a cast does,
    /// and a user reducer's result likewise (both only noted when collecting); reducer type
    /// errors are left to the backends, as for operators.
    fn reduction(&mut self, lhs: &Access, r: &Reducer, value: Class, span: Span) -> Result<()> {
        let elem = self.tensor(&lhs.tensor, lhs.span)?.elem;
        if elem.class() == Class::Float {
            return Ok(());
        }
        let resolved = match r {
            Reducer::Named(n) => match self.reducers.iter().find(|d| d.name == *n) {
                Some(def) => Reducer::User(std::sync::Arc::new(def.clone())),
                None => return Ok(()),
            },
            r => r.clone(),
        };
        let Ok((compute, result)) = semantics::reducer_classes(&resolved, elem.class(), value)
        else {
            return Ok(());
        };
        if compute != Class::Float && result != Class::Float {
            return Ok(());
        }
        if self.float_reductions.is_some() || matches!(r, Reducer::Named(_) | Reducer::User(_)) {
            self.found_float_store(&lhs.tensor);
            return Ok(());
        }
        let t = &lhs.tensor;
        Err(Error::program(
            span,
            format!(
                "`{lhs} {r}=` reduces float values into `{t}`, which holds {elem}: an integer or \
                 bool tensor takes only integer or bool values under a reducer (give `{t}` a \
                 float format such as Element(0.0))"
            ),
        ))
    }

    /// Note that float values are stored into `tensor` (when collecting them).
    fn found_float_store(&mut self, tensor: &str) {
        if let Some(found) = &mut self.float_reductions
            && !found.iter().any(|t| t == tensor)
        {
            found.push(tensor.to_string());
        }
    }

    /// An expression used as an index or a bound: checked, and not a float.
    fn index(&mut self, e: &Expr) -> Result<()> {
        match self.expr(e)? {
            Some(Class::Float) => Err(Error::program(e.span, FLOAT_INDEX)),
            _ => Ok(()),
        }
    }

    /// Check `e`; its class when it can be typed. Operator type errors are left to the
    /// backends (the evaluator reports them only where they are evaluated).
    fn expr(&mut self, e: &Expr) -> Result<Option<Class>> {
        Ok(match &e.kind {
            ExprKind::Literal(v) => Some(v.widen().ty().class()),
            ExprKind::Missing => None,
            ExprKind::Name(n) => {
                if let Some(b) = self.bound.iter().rev().find(|b| b.name == *n) {
                    return Ok(b.class);
                }
                match self.tensors.get(n) {
                    Some(t) if t.rank == 0 => Some(t.elem.class()),
                    Some(t) => {
                        return Err(Error::program(
                            e.span,
                            format!(
                                "`{n}` has {}: read it with indices, `{n}[...]`",
                                dimensions(t.rank)
                            ),
                        ));
                    }
                    None => return Err(Error::program(e.span, format!("unknown name `{n}`"))),
                }
            }
            ExprKind::Access(a) => {
                self.access(a)?;
                Some(self.tensor(&a.tensor, a.span)?.elem.class())
            }
            ExprKind::Unary(op, x) => self
                .expr(x)?
                .and_then(|c| semantics::unary_class(*op, c).ok())
                .map(|(_, r)| r),
            ExprKind::Binary(op, x, y) => {
                let (cx, cy) = (self.expr(x)?, self.expr(y)?);
                cx.zip(cy)
                    .and_then(|(a, b)| semantics::binary_classes(*op, a, b).ok())
                    .map(|(_, r)| r)
            }
            ExprKind::Call(name, args) if name == Builtin::Size.name() => {
                let rank = |t: &str| self.tensors.get(t).map(|s| s.rank);
                size_args(args, e.span, &rank)?;
                Some(Class::Int)
            }
            ExprKind::Call(name, args) if name == Builtin::Sample.name() => {
                let usage = || {
                    Error::program(
                        e.span,
                        "`sample` takes a tensor name, then one index per dimension",
                    )
                };
                let Some(ExprKind::Name(t)) = args.first().map(|a| &a.kind) else {
                    return Err(usage());
                };
                let rank = self.tensors.get(t).map(|s| s.rank);
                if rank != Some(args.len() - 1) {
                    return Err(usage());
                }
                for a in &args[1..] {
                    if self.expr(a)? == Some(Class::Float) {
                        return Err(Error::program(a.span, "an index must be an integer"));
                    }
                }
                Some(Class::Float)
            }
            ExprKind::Call(name, args) => {
                let f = Builtin::named(name).map_err(|m| Error::program(e.span, m))?;
                f.check_arity(args.len())
                    .map_err(|m| Error::program(e.span, m))?;
                let mut classes = vec![];
                for a in args {
                    classes.push(self.expr(a)?);
                }
                match (f, classes.as_slice()) {
                    // `coalesce(missing, b)` is `b`.
                    (Builtin::Coalesce, [None, b]) => *b,
                    (Builtin::Coalesce, [a, None]) => *a,
                    _ => classes
                        .into_iter()
                        .collect::<Option<Vec<Class>>>()
                        .and_then(|cs| f.classes(&cs).ok())
                        .map(|(_, r)| r),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn sigs(list: &[(&str, usize, ElemType)]) -> Signatures {
        list.iter()
            .map(|&(n, rank, elem)| (n.to_string(), Signature { rank, elem }))
            .collect()
    }

    fn err(text: &str, tensors: &Signatures) -> String {
        check(&parse_program(text).unwrap(), tensors)
            .expect_err(text)
            .to_string()
    }

    #[test]
    fn every_access_has_one_index_per_dimension() {
        let t = sigs(&[("x", 1, ElemType::F64), ("s", 0, ElemType::F64)]);
        assert_eq!(
            err("for i = _\n  s[] += x[i, i]\nend\n", &t),
            "2:10: dimension mismatch: `x` has 1 dimension but `x[i, i]` gives 2 indices"
        );
        // Also where the value is `missing` and normalisation would drop the statement.
        assert_eq!(
            err("s[] = x[]", &t),
            "1:7: dimension mismatch: `x` has 1 dimension but `x[]` gives 0 indices"
        );
    }

    #[test]
    fn nested_binders_cannot_reuse_a_name() {
        let t = sigs(&[("x", 1, ElemType::F64), ("s", 0, ElemType::F64)]);
        assert_eq!(
            err(
                "for i = 2:5\n  for i = _\n    s[] += x[i]\n  end\nend\n",
                &t
            ),
            "2:3: the loop over `i` at 2:3 reuses the name bound by the loop over `i` at 1:1 that encloses it; rename one of them"
        );
        assert_eq!(
            err("for i = _\n  let i = 2\n    s[] += x[i]\n  end\nend\n", &t),
            "2:3: `let i` at 2:3 reuses the name bound by the loop over `i` at 1:1 that encloses it; rename one of them"
        );
        // Siblings may share a name.
        let ok = "for i = _\n  s[] += x[i]\nend\nfor i = _\n  s[] += x[i]\nend\n";
        assert_eq!(check(&parse_program(ok).unwrap(), &t), Ok(()));
    }

    #[test]
    fn a_tensor_declared_in_a_loop_is_not_filled_by_its_index() {
        let t = sigs(&[
            ("x", 1, ElemType::F64),
            ("y", 1, ElemType::F64),
            ("A", 2, ElemType::F64),
            ("s", 0, ElemType::F64),
        ]);
        assert_eq!(
            err("for i = _\n  y .= 0\n  y[i] = x[i]\nend\n", &t),
            "3:3: `y` is declared at 2:3 inside the loop over `i` at 1:1 and accessed here \
             through `i`: every iteration would start `y` afresh while filling it by `i`, \
             keeping only the last iteration's entries; declare `y` before that loop"
        );
        // Also through an outer loop's index, from an inner loop, or in an index expression.
        let inner = "for i = _\n  for j = _\n    y .= 0\n    y[i] += A[i, j]\n  end\nend\n";
        assert!(err(inner, &t).starts_with("4:5: `y` is declared at 3:5"));
        let nested = "for i = _\n  y .= 0\n  for j = _\n    y[i + 0] += A[i, j]\n  end\nend\n";
        assert!(err(nested, &t).starts_with("4:5: `y`"));
        // A workspace filled by an inner index, and a 0-d accumulator, are what loops declare.
        let ok = "for i = _\n  y .= 0\n  s .= 0\n  for j = _\n    y[j] += A[i, j]\n    s[] += A[i, j]\n  end\nend\n";
        assert_eq!(check(&parse_program(ok).unwrap(), &t), Ok(()));
    }

    #[test]
    fn indices_and_bounds_are_not_floats() {
        let t = sigs(&[
            ("x", 1, ElemType::F64),
            ("f", 1, ElemType::F64),
            ("n", 0, ElemType::F32),
            ("s", 0, ElemType::F64),
        ]);
        for (text, at) in [
            ("for i = _\n  s[] += x[f[i]]\nend\n", "2:12"),
            ("s[] += x[1.5]", "1:10"),
            ("for i = 0:n\n  s[] += x[i]\nend\n", "1:11"),
            (
                "for i = _\n  let k = i / 2\n    s[] += x[k]\n  end\nend\n",
                "3:14",
            ),
            ("for i = _\n  s[] += x[(0:2.0)(i)]\nend\n", "2:15"),
        ] {
            assert_eq!(err(text, &t), format!("{at}: {FLOAT_INDEX}"), "{text}");
        }
        // Integer-valued expressions of floats' tensors are fine, as are `missing` indices.
        let ok = "for i = _\n  s[] += x[floor(i)] + x[div(i, 2)] + coalesce(x[~missing], 0)\nend\n";
        assert_eq!(check(&parse_program(ok).unwrap(), &t), Ok(()));
    }

    #[test]
    fn real_dimensions_take_floats_and_float_bounds_make_real_loops() {
        let t = sigs(&[
            ("x", 1, ElemType::F64),
            ("v", 1, ElemType::F64),
            ("s", 0, ElemType::F64),
        ]);
        let real = |t: &str, _: usize| t == "x";
        let text = "for i = 0.5:9.0\n  s[] += x[2 * i + 0.5] * d(i)\nend\n";
        let p = parse_program(text).unwrap();
        assert_eq!(check_with_real_dims(&p, &t, &real), Ok(()));
        assert_eq!(
            check(&p, &t).unwrap_err().to_string(),
            format!("1:9: {FLOAT_INDEX}")
        );
        // An integer dimension still refuses a float, also the index of a real loop.
        let p = parse_program("for i = 0.5:9.0\n  s[] += v[i]\nend\n").unwrap();
        assert_eq!(
            check_with_real_dims(&p, &t, &real).unwrap_err().to_string(),
            format!("2:12: {FLOAT_INDEX}")
        );
    }

    #[test]
    fn float_reductions_into_integer_or_bool_tensors_are_errors() {
        let t = sigs(&[
            ("x", 1, ElemType::F64),
            ("s", 0, ElemType::I64),
            ("b", 0, ElemType::Bool),
            ("f", 0, ElemType::F64),
        ]);
        assert_eq!(
            err("for i = _\n  s[] += x[i]\nend\n", &t),
            "2:3: `s[] +=` reduces float values into `s`, which holds i64: an integer or bool \
             tensor takes only integer or bool values under a reducer (give `s` a float format \
             such as Element(0.0))"
        );
        assert!(err("s[] <<max>>= 0.5", &t).starts_with("1:1: `s[] <<max>>=` reduces float"));
        // A user reducer's result is stored converted, as a cast, but noted as a float store.
        let half = "reducer half(a, b) = a / 2 + b\nfor i = _\n  b[] <<half>>= 1\nend\n";
        let half = parse_program(half).unwrap();
        assert_eq!(check(&half, &t), Ok(()));
        assert_eq!(float_stores(&half, &t), ["b"]);
        let p =
            parse_program("b[] = 1 / 0\ns[] *= 0.5\nb[] += f[]\nf[] += 1.5\ns[] |= 1\n").unwrap();
        assert_eq!(float_stores(&p, &t), ["b", "s"]);
        let ok = "for i = _\n  s[] += i\n  f[] += i\n  s[] = x[i]\nend\n";
        assert_eq!(check(&parse_program(ok).unwrap(), &t), Ok(()));
    }

    #[test]
    fn names_in_statements_that_vanish_are_still_bound() {
        let t = sigs(&[("y", 1, ElemType::F64)]);
        assert_eq!(err("y[j] = missing", &t), "1:3: unknown name `j`");
        assert_eq!(err("y[0] = z[]", &t), "1:8: unknown tensor `z`");
    }
}
