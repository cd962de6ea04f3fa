//! Fields in programs (issue 15): `field F = img ⊛ h` and its probes, expanded into plain
//! Tessera before any other pass, so the lowering, every backend and the evaluator see
//! ordinary `let`s, arithmetic and image reads.
//!
//! A field declaration is `let F = conv(img, h)` around the statements after it (the parser
//! turns `field F = img ⊛ h`, `img (*) h` and `conv(img, h)` into that). A field value is a
//! sum of terms `cₖ Π (img ⊛ h)`: `+`, `-`, negation and scaling by a non-field expression
//! lift to fields, and a probe distributes over the sum (the normaliser's rule, seed §6), so
//! `field G = 2 * F - H` probes as `2 F(p) - H(p)`. A product of fields is a term of several
//! factors, probed by the product rule: each derivative component goes to one factor, in
//! every way (`∂(FG) = ∂F G + F ∂G`, four terms for a Hessian).
//!
//! A vector field `field V[n] = img ⊛ h` (`conv(img, h, n)`) has `n` components along the
//! image's last axis. Its probes take the component in brackets after the position, before
//! any derivative component: `V(p)[k]`, `grad(V, p)[k, c]` (∂Vₖ/∂x_c), `hess(V, p)[k, a, b]`.
//! One site serves every component: the weights once, the samples and sums per component.
//! A scalar field scales a vector field; a product of two vector fields is refused.
//!
//! Probes, with one real coordinate per image dimension (index space, or world space for an
//! image with a frame, below):
//! - `F(x, y)`: the value;
//! - `grad(F, x, y)[c]`: component `c` of the gradient (`c` any integer expression, a loop
//!   index for index notation: `eps[i, j, k] * hess(F, x, y, z)[j, k]`);
//! - `hess(F, x, y)[a, b]`: the Hessian's entry;
//! - `inside(x, y, F)`: whether every tap of every term's window lies in its image.
//!
//! The expansion is the probe kernel's (`fields::probe`) window gather written in the
//! language: per probe site `n = ifloor(x)`, `f = x - n` per axis, each tap's weight the
//! kernel's piece as a polynomial in `f` by Horner's rule (`Kernel::tap`, the same
//! polynomials), and the separable sum of the `(2s)ᵈ` samples, last axis innermost. The
//! partial sums are shared by every probe of the site, as in the probe kernel: each row of
//! the window along the last axis is summed once per derivative order of that axis, each
//! plane once per pair of orders of the last two axes, and so on, each in a `let`. Sample
//! indices are clamped into the image so a probe never reads outside it; a point whose
//! window is not inside (or not finite) gets NaN, as `tessera probe` gives.
//!
//! The `let`s of a site are put around the statement holding the probe and float out of
//! the loops and `let`s their coordinates do not depend on (neither the bound name nor a
//! tensor written in the body), so `for j, for k` loops of index notation around a Hessian
//! probe do not recompute it. Sites of one image, kernel and position (syntactically equal
//! coordinates) that reach the same body are merged into one: `v[i] = F(p)`, then loops
//! writing `grad(F, p)[c]` and `hess(F, p)[a, b]` gather the window of `p` once, bound at
//! the top of the `for i` body. A site whose coordinates read a tensor the body writes (a
//! position a state variable carries) is never moved above a write: it stays around its
//! statement and is not merged with a site of another statement.
//!
//! **World frames.** A field of an image with an orientation (a NRRD with space directions)
//! is `conv(img, h, frame(R..., origin...))`, the frame being `R = M⁻¹` and the origin as
//! literals ([`with_frames`] writes them from the image's header; the kernel specialises on
//! them and, being part of the program, they are part of every kernel cache key). Its probes
//! take world positions: the site binds `p` and maps `x = R (p - origin)` before the window
//! gather (`inside` tests the mapped `x`), and the world gradient and Hessian are `Rᵀ g` and
//! `Rᵀ H R` of the site's index-space derivatives, in `fields::Frame`'s order of products
//! and sums, so a program's probe equals `tessera probe`'s. Zero entries of `R` cost nothing
//! and an identity frame is never attached.

use crate::error::{Error, Result};
use crate::notation::ast::{
    BinaryOp, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind, UnaryOp,
};
use crate::notation::parse::split_components;
use crate::notation::visit;
use crate::semantics::frame::Frame;
use crate::semantics::kernel::Kernel;
use crate::types::Scalar;
use std::collections::{BTreeMap, BTreeSet};

/// The call that makes a field from an image and a kernel.
pub const CONV: &str = "conv";
/// The probe forms beside `F(...)`.
pub const GRAD: &str = "grad";
pub const HESS: &str = "hess";
pub const INSIDE: &str = "inside";
/// The optional third argument of `conv`: the image's world frame, `R = M⁻¹` row by row and
/// then the origin, as number literals (`with_frames` writes it from an image's orientation).
pub const FRAME: &str = "frame";

/// One factor `image ⊛ kernel` of a term.
#[derive(Clone, Debug)]
struct Factor {
    image: String,
    kernel: Kernel,
    /// `None`: positions are index positions.
    frame: Option<Frame>,
    /// The components along the image's last axis when the factor is a vector field
    /// (`conv(img, h, 3)`), `None` for a scalar field.
    comps: Option<usize>,
}

/// One term `coef · Π (imageₖ ⊛ kernelₖ)` of a field: a product of fields is a term with
/// several factors, probed by the product rule.
#[derive(Clone, Debug)]
struct Term {
    coef: Option<Expr>,
    factors: Vec<Factor>,
}

impl Term {
    /// The components of the term's vector factor (a term has at most one), if any.
    fn comps(&self) -> Option<usize> {
        self.factors.iter().find_map(|f| f.comps)
    }
}

#[derive(Clone, Debug)]
struct FieldDef {
    name: String,
    terms: Vec<Term>,
    /// The number of components of a vector field, `None` for a scalar field.
    comps: Option<usize>,
}

/// A probe site: one image and kernel at one list of coordinates.
#[derive(Clone, Debug)]
struct Site {
    id: usize,
    image: String,
    kernel: Kernel,
    /// The world frame the coordinates are in (`None`: index space).
    frame: Option<Frame>,
    /// The components along the image's last axis (a vector field), `None` for a scalar.
    comps: Option<usize>,
    coords: Vec<Expr>,
    /// The highest derivative order asked for at the site.
    max: u32,
    /// The component (0 for a scalar field) and per-axis derivative orders probed at the
    /// site, each bound to a variable, so the statement (and the EIN normaliser after this
    /// pass) sees one name per probe. The weights are shared by every component.
    probes: BTreeSet<(usize, Vec<u32>)>,
    /// The names the coordinates read (variables, indices, tensors).
    mentions: BTreeSet<String>,
}

/// Whether the program declares a field (programs without one are returned unchanged).
pub fn has_fields(p: &Program) -> bool {
    let mut found = false;
    visit::exprs(&p.body, &mut |e: &Expr| {
        if matches!(&e.kind, ExprKind::Call(n, _) if n == CONV) {
            found = true;
        }
    });
    found
}

/// Expand every field declaration and probe (see the module documentation).
pub fn expand(p: &Program) -> Result<Program> {
    if !has_fields(p) {
        return Ok(p.clone());
    }
    let mut x = Expander {
        fields: vec![],
        next: 0,
    };
    let (body, sites) = x.body(&p.body, Bind::All)?;
    debug_assert!(sites.is_empty(), "the top level binds every site");
    Ok(p.with_body(body))
}

/// Give the fields of the images in `frames` their world frames: every `conv(img, h)` of such
/// an image becomes `conv(img, h, frame(R..., origin...))`, so its probes take world
/// positions and return world-space derivatives (`fields::probe`'s maps). The frame is part
/// of the program, so a kernel cache keyed by the program never gives one image's kernel to
/// an image with another frame. Identity frames are left out (world space is index space).
pub fn with_frames(p: &Program, frames: &BTreeMap<String, Frame>) -> Program {
    if frames.is_empty() || !has_fields(p) {
        return p.clone();
    }
    let mut p = p.clone();
    visit::exprs_mut(&mut p.body, &mut |e: &mut Expr| {
        if let ExprKind::Call(n, args) = &mut e.kind
            && n == CONV
            && args.len() == 2
            && let ExprKind::Name(img) = &args[0].kind
            && let Some(fr) = frames.get(img)
            && !fr.is_identity()
        {
            let numbers = fr.inverse.iter().flatten().chain(&fr.origin);
            args.push(call(FRAME, numbers.map(|&v| lit_f(v)).collect()));
        }
    });
    p
}

/// The frame written as `conv`'s third argument: `frame(...)` of `d² + d` number literals
/// (`R` row by row, then the origin) for `d` in 1 to 3, with `R` finite and the origin too.
fn frame_arg(e: &Expr) -> Result<Frame> {
    let bad = || {
        Error::program(
            e.span,
            "a field's frame is `frame(r00, r01, ..., o0, o1, ...)`: R = M⁻¹ row by row, then the origin, as numbers",
        )
    };
    let ExprKind::Call(n, args) = &e.kind else {
        return Err(bad());
    };
    if n != FRAME {
        return Err(bad());
    }
    let number = |a: &Expr| -> Option<f64> {
        match &a.kind {
            ExprKind::Literal(v) => Some(v.as_f64()),
            ExprKind::Unary(UnaryOp::Neg, x) => match &x.kind {
                ExprKind::Literal(v) => Some(-v.as_f64()),
                _ => None,
            },
            _ => None,
        }
    };
    let v: Vec<f64> = args
        .iter()
        .map(number)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let d = (1..=3).find(|d| d * d + d == v.len()).ok_or_else(bad)?;
    if v.iter().any(|x| !x.is_finite()) {
        return Err(bad());
    }
    Ok(Frame {
        inverse: v[..d * d].chunks(d).map(|r| r.to_vec()).collect(),
        origin: v[d * d..].to_vec(),
    })
}

/// Which sites a body binds around itself (besides those that stay at their statement).
#[derive(Clone, Copy)]
enum Bind<'a> {
    /// Every site: the program's top level and the branches of an `if` (a probe under a
    /// condition, `if inside(p, F)`, is not computed where the condition fails).
    All,
    /// The sites reading the binder's name (a loop index, a `let`'s variable).
    Reading(&'a str),
    /// None: a block or a field declaration's scope binds nothing, its sites float out.
    None,
}

struct Expander {
    fields: Vec<FieldDef>,
    next: usize,
}

fn lit_f(v: f64) -> Expr {
    Expr::lit(Scalar::F64(v))
}
fn lit_i(v: i64) -> Expr {
    Expr::lit(Scalar::I64(v))
}
fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::new(
        ExprKind::Binary(op, Box::new(a), Box::new(b)),
        Span::default(),
    )
}
fn call(f: &str, args: Vec<Expr>) -> Expr {
    Expr::new(ExprKind::Call(f.into(), args), Span::default())
}
fn name(n: &str) -> Expr {
    Expr::name(n)
}

/// `p(f)` by Horner's rule, trailing zero coefficients dropped.
fn horner(p: &[f64], f: &str) -> Expr {
    let len = p.iter().rposition(|&c| c != 0.0).map_or(0, |k| k + 1);
    let Some((&top, rest)) = p[..len].split_last() else {
        return lit_f(0.0);
    };
    rest.iter().rev().fold(lit_f(top), |acc, &c| {
        bin(BinaryOp::Add, bin(BinaryOp::Mul, acc, name(f)), lit_f(c))
    })
}

impl Site {
    fn x(&self, a: usize) -> String {
        format!("probe{}_x{a}", self.id)
    }
    /// World coordinate `a` (sites with a frame).
    fn p(&self, a: usize) -> String {
        format!("probe{}_p{a}", self.id)
    }
    fn n(&self, a: usize) -> String {
        format!("probe{}_n{a}", self.id)
    }
    fn f(&self, a: usize) -> String {
        format!("probe{}_f{a}", self.id)
    }
    fn inside(&self) -> String {
        format!("probe{}_in", self.id)
    }
    /// The prefix of component `c`'s variables (none for a scalar field).
    fn tag(&self, c: usize) -> String {
        match self.comps {
            None => format!("probe{}_", self.id),
            Some(_) => format!("probe{}_c{c}_", self.id),
        }
    }
    /// The sample index of tap `t` on axis `a`, clamped into the image (a window that is
    /// not inside reads the border and the probe is NaN anyway); left inline, the backends
    /// share the common subexpressions.
    fn idx(&self, a: usize, t: usize) -> Expr {
        let i = self.taps()[t];
        let last = call("size", vec![name(&self.image), lit_i(a as i64)]);
        let last = bin(BinaryOp::Sub, last, lit_i(1));
        let at = bin(BinaryOp::Add, name(&self.n(a)), lit_i(i));
        call("min", vec![call("max", vec![at, lit_i(0)]), last])
    }
    fn w(&self, a: usize, o: u32, t: usize) -> String {
        format!("probe{}_w{a}_{o}_{t}", self.id)
    }
    fn value(&self, c: usize, orders: &[u32]) -> String {
        let o: Vec<String> = orders.iter().map(|o| o.to_string()).collect();
        format!("{}d{}", self.tag(c), o.join(""))
    }
    fn taps(&self) -> Vec<i64> {
        let s = self.kernel.support as i64;
        (1 - s..=s).collect()
    }
    /// The components some probe of the site reads.
    fn components(&self) -> BTreeSet<usize> {
        self.probes.iter().map(|(c, _)| *c).collect()
    }

    /// The `let` bindings of the site, outermost first.
    fn bindings(&self) -> Vec<(String, Expr)> {
        let d = self.coords.len();
        let s = self.kernel.support as i64;
        let mut out = vec![];
        match &self.frame {
            None => {
                for (a, c) in self.coords.iter().enumerate() {
                    out.push((self.x(a), c.clone()));
                }
            }
            Some(fr) => {
                for (a, c) in self.coords.iter().enumerate() {
                    out.push((self.p(a), c.clone()));
                }
                for a in 0..d {
                    out.push((self.x(a), to_index(fr, a, &|j| name(&self.p(j)))));
                }
            }
        }
        for a in 0..d {
            out.push((self.n(a), call("ifloor", vec![name(&self.x(a))])));
            out.push((
                self.f(a),
                bin(BinaryOp::Sub, name(&self.x(a)), name(&self.n(a))),
            ));
        }
        // Inside: s - 1 <= x < size - s on every axis (false on NaN), and a vector image
        // has the declared number of components along its last axis (else every probe of
        // it is NaN rather than a read of the wrong components).
        let mut inside: Option<Expr> = None;
        let mut and = |e: Expr| {
            inside = Some(match inside.take() {
                None => e,
                Some(x) => bin(BinaryOp::AndAnd, x, e),
            });
        };
        for a in 0..d {
            let size = call("size", vec![name(&self.image), lit_i(a as i64)]);
            let lo = bin(BinaryOp::Ge, name(&self.x(a)), lit_f((s - 1) as f64));
            let hi = bin(
                BinaryOp::Lt,
                name(&self.x(a)),
                bin(BinaryOp::Sub, size, lit_i(s)),
            );
            and(bin(BinaryOp::AndAnd, lo, hi));
        }
        if let Some(n) = self.comps {
            let size = call("size", vec![name(&self.image), lit_i(d as i64)]);
            and(bin(BinaryOp::Eq, size, lit_i(n as i64)));
        }
        out.push((
            self.inside(),
            inside.unwrap_or(Expr::lit(Scalar::Bool(true))),
        ));
        for a in 0..d {
            for o in 0..=self.max {
                // Only the weights some probe of the site uses (each binding is a nested
                // `let`, and deep nesting costs every recursive pass stack).
                if !self.probes.iter().any(|(_, p)| p[a] == o) {
                    continue;
                }
                let k = self.kernel.derivative(o);
                for (t, i) in self.taps().into_iter().enumerate() {
                    out.push((self.w(a, o, t), horner(k.tap(i), &self.f(a))));
                }
            }
        }
        for c in self.components() {
            // The samples, each read once where the rows are summed for more than one
            // order of the last axis (a value, gradient and Hessian in 3-d: three orders).
            if self.shared_samples(c) {
                for at in self.tuples(d) {
                    out.push((self.sample(c, &at), self.read(c, &at)));
                }
            }
            // The partial sums over the trailing axes, innermost (rows) first, each for the
            // trailing orders some probe asks for and every tap tuple of the leading axes.
            for a in (1..d).rev() {
                let suffixes: BTreeSet<&[u32]> = self
                    .probes
                    .iter()
                    .filter(|(k, _)| *k == c)
                    .map(|(_, p)| &p[a..])
                    .collect();
                for suffix in suffixes {
                    for prefix in self.tuples(a) {
                        out.push((
                            self.partial(c, suffix, &prefix),
                            self.sum(c, a, suffix, &prefix),
                        ));
                    }
                }
            }
            for (_, orders) in self.probes.iter().filter(|(k, _)| *k == c) {
                out.push((self.value(c, orders), self.probe(c, orders)));
            }
        }
        out
    }

    /// Every tuple of tap numbers of the first `axes` axes (one empty tuple for none).
    fn tuples(&self, axes: usize) -> Vec<Vec<usize>> {
        let ntaps = self.taps().len();
        let mut out: Vec<Vec<usize>> = vec![vec![]];
        for _ in 0..axes {
            out = out
                .into_iter()
                .flat_map(|r| {
                    (0..ntaps).map(move |t| {
                        let mut r = r.clone();
                        r.push(t);
                        r
                    })
                })
                .collect();
        }
        out
    }

    /// The variable of component `c`'s partial sum over the axes from `prefix.len()` on,
    /// with orders `suffix` on those axes, at taps `prefix` of the axes before.
    fn partial(&self, c: usize, suffix: &[u32], prefix: &[usize]) -> String {
        let o: Vec<String> = suffix.iter().map(|o| o.to_string()).collect();
        let t: Vec<String> = prefix.iter().map(|t| t.to_string()).collect();
        format!("{}s{}_{}", self.tag(c), o.join(""), t.join("_"))
    }

    /// Whether component `c`'s samples are bound once in `let`s: when its rows are summed
    /// for several orders of the last axis (one sum reads each sample once, inline).
    fn shared_samples(&self, c: usize) -> bool {
        let Some(last) = self.coords.len().checked_sub(1) else {
            return false;
        };
        let orders: BTreeSet<u32> = self
            .probes
            .iter()
            .filter(|(k, _)| *k == c)
            .map(|(_, p)| p[last])
            .collect();
        orders.len() > 1
    }

    fn sample(&self, c: usize, at: &[usize]) -> String {
        let t: Vec<String> = at.iter().map(|t| t.to_string()).collect();
        format!("{}v{}", self.tag(c), t.join("_"))
    }

    /// Component `c` of the image's sample at taps `at`: a direct read of the dense image
    /// (`sample`), no looplet and no loop per sample, as in the probe kernel.
    fn read(&self, c: usize, at: &[usize]) -> Expr {
        let mut args = vec![name(&self.image)];
        args.extend(at.iter().enumerate().map(|(a, &t)| self.idx(a, t)));
        if self.comps.is_some() {
            args.push(lit_i(c as i64));
        }
        call("sample", args)
    }

    /// `Σ_t w(axis, orders[0], t) · inner(prefix + t)`, where `inner` is the partial sum of
    /// the next axis (bound before) or, on the last axis, the sample.
    fn sum(&self, c: usize, axis: usize, orders: &[u32], prefix: &[usize]) -> Expr {
        let d = self.coords.len();
        let mut acc: Option<Expr> = None;
        for t in 0..self.taps().len() {
            let mut at = prefix.to_vec();
            at.push(t);
            let inner = if axis + 1 != d {
                name(&self.partial(c, &orders[1..], &at))
            } else if self.shared_samples(c) {
                name(&self.sample(c, &at))
            } else {
                self.read(c, &at)
            };
            let term = bin(BinaryOp::Mul, name(&self.w(axis, orders[0], t)), inner);
            acc = Some(match acc {
                None => term,
                Some(e) => bin(BinaryOp::Add, e, term),
            });
        }
        acc.unwrap_or(lit_f(0.0))
    }

    /// The probe of component `c` with derivative orders `orders` (one per axis), NaN
    /// outside: the outermost axis's sum over the partial sums of the others (the same
    /// products and additions, in the same order, as the nested separable sum).
    fn probe(&self, c: usize, orders: &[u32]) -> Expr {
        let total = if orders.is_empty() {
            lit_f(f64::NAN)
        } else {
            self.sum(c, 0, orders, &[])
        };
        call("ifelse", vec![name(&self.inside()), total, lit_f(f64::NAN)])
    }
}

/// The world derivative along `axes` (one or two) from the index-space probes named by
/// `value`: `Σ_j R[j][a] ∂_j` for a gradient component (`Frame::gradient_to_world`'s
/// products) and `Σ_k Σ_l (R[k][a] ∂_k∂_l) R[l][b]` for a Hessian entry
/// (`Frame::hessian_to_world`'s), terms with a zero factor left out.
fn world(
    fr: &Frame,
    axes: &[usize],
    index: &[(Vec<usize>, Vec<u32>)],
    value: impl Fn(&[u32]) -> String,
) -> Expr {
    let mut acc: Option<Expr> = None;
    for (ks, orders) in index {
        let factors: Vec<f64> = ks
            .iter()
            .zip(axes)
            .map(|(&k, &a)| fr.inverse[k][a])
            .collect();
        if factors.contains(&0.0) {
            continue;
        }
        let mut it = factors.iter();
        let first = *it.next().expect("one derivative index or more");
        let mut term = bin(BinaryOp::Mul, lit_f(first), name(&value(orders)));
        for &r in it {
            term = bin(BinaryOp::Mul, term, lit_f(r));
        }
        acc = Some(match acc {
            None => term,
            Some(e) => bin(BinaryOp::Add, e, term),
        });
    }
    acc.expect("an invertible R has a nonzero entry in every column")
}

/// Index coordinate `a` of world position `p`, `Σ_j R[a][j] (p_j - o_j)`, in the order
/// `Frame::to_index` sums it; the terms whose factor is exactly 0 are left out, and so are
/// subtractions of 0 and products by 1 (each changes no value).
fn to_index(fr: &Frame, a: usize, p: &dyn Fn(usize) -> Expr) -> Expr {
    let mut acc: Option<Expr> = None;
    for j in 0..fr.dim() {
        let r = fr.inverse[a][j];
        if r == 0.0 {
            continue;
        }
        let o = fr.origin[j];
        let diff = match o {
            0.0 => p(j),
            _ => bin(BinaryOp::Sub, p(j), lit_f(o)),
        };
        let term = match r {
            1.0 => diff,
            _ => bin(BinaryOp::Mul, lit_f(r), diff),
        };
        acc = Some(match acc {
            None => term,
            Some(e) => bin(BinaryOp::Add, e, term),
        });
    }
    acc.expect("an invertible R has a nonzero entry in every row")
}

/// Wrap `stmt` in the `let`s of `sites` (the first site outermost).
fn wrap(stmt: Stmt, sites: &[Site]) -> Stmt {
    let mut out = stmt;
    for site in sites.iter().rev() {
        for (n, v) in site.bindings().into_iter().rev() {
            let span = out.span;
            out = Stmt::new(
                StmtKind::Let {
                    name: n,
                    value: v,
                    body: vec![out],
                },
                span,
            );
        }
    }
    out
}

fn wrap_all(body: Vec<Stmt>, sites: Vec<Site>) -> Vec<Stmt> {
    if sites.is_empty() {
        return body;
    }
    let span = body.first().map(|s| s.span).unwrap_or_default();
    vec![wrap(Stmt::new(StmtKind::Block(body), span), &sites)]
}

/// The sites of one image, kernel and position merged into the first of them (its probes and
/// highest order the union of theirs), the others' variables renamed to its in `stmts`: the
/// statements probing the value, gradient and Hessian at one point gather its window once.
/// The caller binds the result where every statement of `stmts` sees it.
fn merge(sites: Vec<Site>, stmts: &mut [Stmt]) -> Vec<Site> {
    let mut out: Vec<Site> = vec![];
    let mut rename: Vec<(String, String)> = vec![];
    for s in sites {
        let same = out.iter().position(|o| {
            o.image == s.image
                && o.kernel.name == s.kernel.name
                && o.frame == s.frame
                && o.comps == s.comps
                && o.coords == s.coords
        });
        match same {
            Some(k) => {
                out[k].max = out[k].max.max(s.max);
                out[k].probes.extend(s.probes);
                rename.push((format!("probe{}_", s.id), format!("probe{}_", out[k].id)));
            }
            None => out.push(s),
        }
    }
    if !rename.is_empty() {
        for s in stmts.iter_mut() {
            rename_stmt(s, &rename);
        }
    }
    out
}

/// Rename the site variables (`probe{id}_...`) of `s` by prefix. The variables of a merged
/// site are only ever read (its `let`s are never emitted), so renaming the reads suffices;
/// `probe1_` is not a prefix of `probe12_...`.
fn rename_stmt(s: &mut Stmt, rename: &[(String, String)]) {
    visit::exprs_mut(std::slice::from_mut(s), &mut |e: &mut Expr| {
        if let ExprKind::Name(n) = &mut e.kind
            && let Some((from, to)) = rename.iter().find(|(from, _)| n.starts_with(from.as_str()))
        {
            *n = format!("{to}{}", &n[from.len()..]);
        }
    });
}

/// The names an expression reads: variables, indices and tensors.
fn mentions(e: &Expr) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit::expr(e, &mut |e: &Expr| match &e.kind {
        ExprKind::Name(n) => {
            out.insert(n.clone());
        }
        ExprKind::Access(a) => {
            out.insert(a.tensor.clone());
        }
        _ => {}
    });
    out
}

/// The tensors written in `body`.
fn written(body: &[Stmt]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit::stmts(body, &mut |s: &Stmt| {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            out.insert(tensor.clone());
        }
    });
    visit::writes(body, &mut |a| {
        out.insert(a.tensor.clone());
    });
    out
}

/// The factor `conv(img, kernel[, n][, frame(...)])` of the call `e` with arguments `args`:
/// `n`, an integer literal, makes it a vector field of `n` components along the image's last
/// axis.
fn conv_factor(e: &Expr, args: &[Expr]) -> Result<Factor> {
    let usage = || {
        Error::program(
            e.span,
            "`conv` takes an image and a kernel, then for a vector field its number of components: `conv(img, bspln3)`, `conv(img, bspln3, 3)`",
        )
    };
    let (img, k, rest) = match args {
        [img, k, rest @ ..] if rest.len() <= 2 => (img, k, rest),
        _ => return Err(usage()),
    };
    let (ExprKind::Name(img), ExprKind::Name(k)) = (&img.kind, &k.kind) else {
        return Err(Error::program(
            e.span,
            "`conv(img, kernel)` takes the names of an input tensor and a kernel",
        ));
    };
    let kernel = Kernel::named(k).map_err(|err| Error::program(args[1].span, format!("{err}")))?;
    let mut comps = None;
    let mut frame = None;
    for (i, a) in rest.iter().enumerate() {
        match &a.kind {
            ExprKind::Literal(Scalar::I64(n)) if i == 0 => {
                if !(1..=64).contains(n) {
                    return Err(Error::program(
                        a.span,
                        format!("a vector field has 1 to 64 components, not {n}"),
                    ));
                }
                comps = Some(*n as usize);
            }
            _ if i + 1 == rest.len() => frame = Some(frame_arg(a)?),
            _ => return Err(usage()),
        }
    }
    Ok(Factor {
        image: img.clone(),
        kernel,
        frame,
        comps,
    })
}

/// The shape of a field with `terms`: `None` for a scalar field, `Some(n)` for a vector
/// field of `n` components. Terms of different shapes, or a term with two vector factors,
/// are errors at `span`.
fn shape_of(terms: &[Term], span: Span) -> Result<Option<usize>> {
    let mut shape = None;
    for (k, t) in terms.iter().enumerate() {
        if t.factors.iter().filter(|f| f.comps.is_some()).count() > 1 {
            return Err(Error::program(
                span,
                "the product of two vector fields is a tensor field, which fields do not hold",
            ));
        }
        if k == 0 {
            shape = t.comps();
        } else if t.comps() != shape {
            return Err(Error::program(
                span,
                format!(
                    "a sum of fields of different shapes: {} and {}",
                    shape_name(shape),
                    shape_name(t.comps())
                ),
            ));
        }
    }
    Ok(shape)
}

fn shape_name(shape: Option<usize>) -> String {
    match shape {
        None => "a scalar field".into(),
        Some(n) => format!("a vector field of {n} components"),
    }
}

impl Expander {
    fn field(&self, n: &str) -> Option<&FieldDef> {
        self.fields.iter().rev().find(|f| f.name == n)
    }

    /// Whether `e` is a field value (mentions `conv` or a field outside a probe: `F(p)`,
    /// `grad(F, p)[c]`, `∇F(p)` and `inside(p, F)` are values, so `let g = grad(F, x)[0]`
    /// binds a number, not a field).
    fn is_field(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Call(n, _) if n == CONV => true,
            ExprKind::Call(n, _) if self.field(n).is_some() => false,
            ExprKind::Call(n, _) if n == GRAD || n == HESS || n == INSIDE => false,
            ExprKind::Name(n) => self.field(n).is_some(),
            ExprKind::Call(_, args) => args.iter().any(|a| self.is_field(a)),
            ExprKind::Unary(_, x) => self.is_field(x),
            ExprKind::Binary(_, x, y) => self.is_field(x) || self.is_field(y),
            ExprKind::Access(a) => a.indices.iter().any(|ix| {
                self.is_field(&ix.expr)
                    || ix
                        .window
                        .as_ref()
                        .is_some_and(|(lo, hi)| self.is_field(lo) || self.is_field(hi))
            }),
            ExprKind::Literal(_) | ExprKind::Missing => false,
        }
    }

    /// The terms of a field value, checked to have one shape (every term scalar, or every
    /// term a vector of the same number of components).
    fn terms(&self, e: &Expr) -> Result<Vec<Term>> {
        let terms = self.terms_of(e)?;
        shape_of(&terms, e.span)?;
        Ok(terms)
    }

    fn terms_of(&self, e: &Expr) -> Result<Vec<Term>> {
        let scale = |terms: Vec<Term>, c: Expr| -> Vec<Term> {
            terms
                .into_iter()
                .map(|mut t| {
                    t.coef = Some(match t.coef.take() {
                        None => c.clone(),
                        Some(k) => bin(BinaryOp::Mul, c.clone(), k),
                    });
                    t
                })
                .collect()
        };
        match &e.kind {
            ExprKind::Call(n, args) if n == CONV => Ok(vec![Term {
                coef: None,
                factors: vec![conv_factor(e, args)?],
            }]),
            ExprKind::Name(n) => match self.field(n) {
                Some(f) => Ok(f.terms.clone()),
                None => Err(Error::program(e.span, format!("`{n}` is not a field"))),
            },
            ExprKind::Unary(UnaryOp::Neg, x) => Ok(scale(self.terms_of(x)?, lit_f(-1.0))),
            ExprKind::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), x, y) => {
                let mut out = self.terms(x)?;
                let rhs = self.terms(y)?;
                if shape_of(&out, x.span)? != shape_of(&rhs, y.span)? {
                    return Err(Error::program(
                        e.span,
                        format!(
                            "a sum of fields of different shapes: {} and {}",
                            shape_name(shape_of(&out, x.span)?),
                            shape_name(shape_of(&rhs, y.span)?)
                        ),
                    ));
                }
                out.extend(if *op == BinaryOp::Sub {
                    scale(rhs, lit_f(-1.0))
                } else {
                    rhs
                });
                Ok(out)
            }
            ExprKind::Binary(BinaryOp::Mul, x, y) => match (self.is_field(x), self.is_field(y)) {
                (true, false) => Ok(scale(self.terms_of(x)?, (**y).clone())),
                (false, true) => Ok(scale(self.terms_of(y)?, (**x).clone())),
                // The product of two fields: every pair of terms, their factors together
                // (probed by the product rule). A scalar field scales a vector field; two
                // vector fields make a tensor field, which is not a field value here.
                _ => {
                    let (l, r) = (self.terms(x)?, self.terms(y)?);
                    if shape_of(&l, x.span)?.is_some() && shape_of(&r, y.span)?.is_some() {
                        return Err(Error::program(
                            e.span,
                            "the product of two vector fields is a tensor field, which fields do not hold: multiply their components' probes, `V(p)[i] * W(p)[j]`",
                        ));
                    }
                    let mut out = vec![];
                    for a in &l {
                        for b in &r {
                            let coef = match (&a.coef, &b.coef) {
                                (None, None) => None,
                                (Some(c), None) | (None, Some(c)) => Some(c.clone()),
                                (Some(c), Some(k)) => {
                                    Some(bin(BinaryOp::Mul, c.clone(), k.clone()))
                                }
                            };
                            let mut factors = a.factors.clone();
                            factors.extend(b.factors.iter().cloned());
                            out.push(Term { coef, factors });
                        }
                    }
                    Ok(out)
                }
            },
            ExprKind::Binary(BinaryOp::Div, x, y) if !self.is_field(y) => Ok(scale(
                self.terms_of(x)?,
                bin(BinaryOp::Div, lit_f(1.0), (**y).clone()),
            )),
            ExprKind::Binary(BinaryOp::Div, _, y) => Err(Error::program(
                y.span,
                "a field may be divided by a value, not by a field",
            )),
            _ => Err(Error::program(
                e.span,
                "a field is `conv(img, kernel)`, a field's name, or a sum, difference, scaling or product of fields",
            )),
        }
    }

    /// Expand the statements of a body. A site that reads a tensor written in the body (a
    /// position a state variable carries) stays around its statement, after the writes
    /// before it. The others that `bind` holds here are merged by position and bound once
    /// around the whole body, so `v[i] = F(p)` and the loops writing `grad(F, p)[c]` and
    /// `hess(F, p)[a, b]` share one window gather; the rest float out to the enclosing body.
    fn body(&mut self, list: &[Stmt], bind: Bind) -> Result<(Vec<Stmt>, Vec<Site>)> {
        let writes = written(list);
        let mut out = vec![];
        let mut up = vec![];
        let mut whole = vec![];
        for s in list {
            let (stmts, sites) = self.stmt(s)?;
            let mut stay = vec![];
            for site in sites {
                if site.mentions.iter().any(|m| writes.contains(m)) {
                    stay.push(site);
                } else if match bind {
                    Bind::All => true,
                    Bind::Reading(b) => site.mentions.contains(b),
                    Bind::None => false,
                } {
                    whole.push(site);
                } else {
                    up.push(site);
                }
            }
            if stay.is_empty() {
                out.extend(stmts);
            } else {
                let span = stmts.first().map(|s| s.span).unwrap_or(s.span);
                out.push(wrap(Stmt::new(StmtKind::Block(stmts), span), &stay));
            }
        }
        if whole.is_empty() {
            return Ok((out, up));
        }
        let whole = merge(whole, &mut out);
        Ok((wrap_all(out, whole), up))
    }

    /// One statement, expanded, and the sites still to be bound around it.
    fn stmt(&mut self, s: &Stmt) -> Result<(Vec<Stmt>, Vec<Site>)> {
        let span = s.span;
        let mut sites = vec![];
        let kind = match &s.kind {
            StmtKind::Let { name, value, body } if self.is_field(value) => {
                if self.field(name).is_some() {
                    return Err(Error::program(
                        span,
                        format!("field `{name}` is declared twice"),
                    ));
                }
                let terms = self.terms(value)?;
                let comps = shape_of(&terms, value.span)?;
                self.fields.push(FieldDef {
                    name: name.clone(),
                    terms,
                    comps,
                });
                let r = self.body(body, Bind::None);
                self.fields.pop();
                return r;
            }
            StmtKind::Declare { tensor, init } => StmtKind::Declare {
                tensor: tensor.clone(),
                init: self.expr(init, &mut sites)?,
            },
            StmtKind::Assign { lhs, op, rhs } => {
                let mut lhs = lhs.clone();
                for ix in &mut lhs.indices {
                    ix.expr = self.expr(&ix.expr, &mut sites)?;
                }
                StmtKind::Assign {
                    lhs,
                    op: op.clone(),
                    rhs: self.expr(rhs, &mut sites)?,
                }
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => {
                let extent = match extent {
                    Extent::Auto => Extent::Auto,
                    Extent::Range(a, b) => {
                        Extent::Range(self.expr(a, &mut sites)?, self.expr(b, &mut sites)?)
                    }
                };
                let (body, up) = self.body(body, Bind::Reading(index))?;
                sites.extend(up);
                StmtKind::Loop {
                    index: index.clone(),
                    extent,
                    body,
                    parallel: *parallel,
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let cond = self.expr(cond, &mut sites)?;
                let (then, a) = self.body(then, Bind::All)?;
                let (otherwise, b) = self.body(otherwise, Bind::All)?;
                debug_assert!(a.is_empty() && b.is_empty());
                StmtKind::If {
                    cond,
                    then,
                    otherwise,
                }
            }
            StmtKind::Let { name, value, body } => {
                let value = self.expr(value, &mut sites)?;
                let (body, up) = self.body(body, Bind::Reading(name))?;
                sites.extend(up);
                StmtKind::Let {
                    name: name.clone(),
                    value,
                    body,
                }
            }
            StmtKind::Block(b) => {
                let (b, up) = self.body(b, Bind::None)?;
                sites.extend(up);
                StmtKind::Block(b)
            }
            k @ (StmtKind::Freeze { .. } | StmtKind::Thaw { .. }) => k.clone(),
        };
        Ok((vec![Stmt::new(kind, span)], sites))
    }

    /// The site of `factor` at `coords` among `sites` (one statement's), made if new.
    fn site(
        &mut self,
        factor: &Factor,
        coords: &[Expr],
        order: u32,
        sites: &mut Vec<Site>,
    ) -> usize {
        if let Some(k) = sites.iter().position(|s| {
            s.image == factor.image
                && s.kernel.name == factor.kernel.name
                && s.frame == factor.frame
                && s.comps == factor.comps
                && s.coords == coords
        }) {
            sites[k].max = sites[k].max.max(order);
            return k;
        }
        let mut m = BTreeSet::new();
        for c in coords {
            m.extend(mentions(c));
        }
        sites.push(Site {
            id: self.next,
            image: factor.image.clone(),
            kernel: factor.kernel.clone(),
            frame: factor.frame.clone(),
            comps: factor.comps,
            coords: coords.to_vec(),
            max: order,
            probes: BTreeSet::new(),
            mentions: m,
        });
        self.next += 1;
        sites.len() - 1
    }

    /// Rewrite the probes in `e`, adding their sites.
    fn expr(&mut self, e: &Expr, sites: &mut Vec<Site>) -> Result<Expr> {
        let span = e.span;
        let kind = match &e.kind {
            ExprKind::Name(n) if self.field(n).is_some() => {
                return Err(Error::program(
                    span,
                    format!("field `{n}` is used as a value: probe it, `{n}(x, ...)`"),
                ));
            }
            ExprKind::Call(n, args) if n == CONV => {
                let _ = args;
                return Err(Error::program(
                    span,
                    "`conv(img, kernel)` makes a field: declare it, `field F = conv(img, kernel)`",
                ));
            }
            ExprKind::Call(f, args) if self.field(f).is_some() => {
                return self.probe(f, args, 0, span, sites);
            }
            ExprKind::Call(f, args) if f == GRAD || f == HESS => {
                let comps = if f == GRAD { 1 } else { 2 };
                let field = match args.first().map(|a| &a.kind) {
                    Some(ExprKind::Name(n)) if self.field(n).is_some() => n.clone(),
                    _ => {
                        return Err(Error::program(
                            span,
                            format!(
                                "`{f}` takes a field first: `{f}(F, x, ...){}`",
                                if comps == 1 { "[c]" } else { "[a, b]" }
                            ),
                        ));
                    }
                };
                return self.probe(&field, &args[1..], comps, span, sites);
            }
            ExprKind::Call(f, args) if f == INSIDE => {
                let field = match args.last().map(|a| &a.kind) {
                    Some(ExprKind::Name(n)) if self.field(n).is_some() => n.clone(),
                    _ => {
                        return Err(Error::program(
                            span,
                            "`inside` takes the coordinates then a field: `inside(x, y, F)`",
                        ));
                    }
                };
                let coords = self.exprs(&args[..args.len() - 1], sites)?;
                let terms = self.field(&field).expect("checked").terms.clone();
                let mut all: Option<Expr> = None;
                for f in terms.iter().flat_map(|t| &t.factors) {
                    let k = self.site(f, &coords, 0, sites);
                    let e = name(&sites[k].inside());
                    all = Some(match all {
                        None => e,
                        Some(a) => bin(BinaryOp::AndAnd, a, e),
                    });
                }
                return Ok(all.unwrap_or(Expr::lit(Scalar::Bool(true))));
            }
            ExprKind::Access(a) => {
                let mut a = a.clone();
                for ix in &mut a.indices {
                    ix.expr = self.expr(&ix.expr, sites)?;
                    if let Some((lo, hi)) = &ix.window {
                        ix.window = Some((self.expr(lo, sites)?, self.expr(hi, sites)?));
                    }
                }
                ExprKind::Access(a)
            }
            ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(self.expr(x, sites)?)),
            ExprKind::Binary(op, x, y) => ExprKind::Binary(
                *op,
                Box::new(self.expr(x, sites)?),
                Box::new(self.expr(y, sites)?),
            ),
            ExprKind::Call(f, args) => ExprKind::Call(f.clone(), self.exprs(args, sites)?),
            k => k.clone(),
        };
        Ok(Expr::new(kind, span))
    }

    fn exprs(&mut self, es: &[Expr], sites: &mut Vec<Site>) -> Result<Vec<Expr>> {
        es.iter().map(|e| self.expr(e, sites)).collect()
    }

    /// The probe of field `f` with arguments `args`: its coordinates, then for a vector field
    /// the component, then `order` derivative components (none: the value; one: a gradient
    /// component, or a Jacobian entry `[k, c]` of a vector field; two: a Hessian entry).
    /// Each term is the product rule's sum over its factors.
    fn probe(
        &mut self,
        f: &str,
        args: &[Expr],
        order: usize,
        span: Span,
        sites: &mut Vec<Site>,
    ) -> Result<Expr> {
        let def = self.field(f).expect("the caller checked the field").clone();
        let vector = def.comps.is_some();
        let form = match (vector, order) {
            (false, 0) => format!("`{f}(x, y)`"),
            (true, 0) => format!("`{f}(x, y)[k]` (component `k`)"),
            (false, 1) => format!("`grad({f}, x, y)[c]`"),
            (true, 1) => format!("`grad({f}, x, y)[k, c]` (∂{f}ₖ/∂xc)"),
            (false, _) => format!("`hess({f}, x, y)[a, b]`"),
            (true, _) => format!("`hess({f}, x, y)[k, a, b]`"),
        };
        // Components in brackets, `[k, c]`, are apart from the position; the flat form
        // `grad(F, x, y, c)` is split by the field's shape.
        let (args, written) = split_components(args);
        let mut args = self.exprs(args, sites)?;
        if let Some(w) = written {
            let ExprKind::Call(_, ixs) = &w.kind else {
                unreachable!("split_components returns a call")
            };
            let want = usize::from(vector) + order;
            if ixs.len() != want {
                return Err(Error::program(
                    w.span,
                    format!(
                        "{} `{f}` takes {want} component{} in brackets, not {}: {form}",
                        if vector {
                            "a probe of the vector field"
                        } else {
                            "a probe of the scalar field"
                        },
                        if want == 1 { "" } else { "s" },
                        ixs.len()
                    ),
                ));
            }
            args.extend(self.exprs(ixs, sites)?);
        }
        if vector && written.is_none() {
            return Err(Error::program(
                span,
                format!(
                    "a probe of the vector field `{f}` takes its components in brackets: {form}"
                ),
            ));
        }
        let args = args.as_slice();
        let d = match args.len().checked_sub(usize::from(vector) + order) {
            Some(d @ 1..=3) => d,
            Some(d) if d > 3 => {
                return Err(Error::program(
                    span,
                    format!(
                        "a probe of `{f}` takes one coordinate per image dimension (1 to 3), got {d}: {form}"
                    ),
                ));
            }
            _ => {
                return Err(Error::program(
                    span,
                    format!("a probe of `{f}` needs its coordinates and components: {form}"),
                ));
            }
        };
        let (coords, rest) = args.split_at(d);
        let (vcomp, comps) = match vector {
            true => (rest.first(), &rest[1..]),
            false => (None, rest),
        };
        if let (Some(n), Some(c)) = (def.comps, vcomp)
            && let ExprKind::Literal(Scalar::I64(v)) = c.kind
            && !(0..n as i64).contains(&v)
        {
            return Err(Error::program(
                c.span,
                format!("`{f}` has {n} components (0 to {}), not {v}", n - 1),
            ));
        }
        for c in comps {
            if let ExprKind::Literal(Scalar::I64(v)) = c.kind
                && !(0..d as i64).contains(&v)
            {
                return Err(Error::program(
                    c.span,
                    format!(
                        "a derivative of a {d}-d field has components 0 to {}, not {v}",
                        d - 1
                    ),
                ));
            }
        }
        let mut total: Option<Expr> = None;
        for t in &def.terms {
            for fac in &t.factors {
                fac.kernel
                    .checked_derivative(order as u32)
                    .map_err(|e| match e {
                        Error::Continuity {
                            kernel,
                            continuity,
                            order,
                            ..
                        } => Error::Continuity {
                            kernel,
                            continuity,
                            order,
                            place: Some(span),
                        },
                        e => e,
                    })?;
                if let Some(fr) = &fac.frame
                    && fr.dim() != d
                {
                    return Err(Error::program(
                        span,
                        format!(
                            "a probe of `{f}` takes one coordinate per image dimension: its image's frame is {}-d, got {d} coordinates",
                            fr.dim()
                        ),
                    ));
                }
            }
            // The product rule: every way of giving each derivative component to a factor
            // (one way for a single factor, the probe itself).
            let nf = t.factors.len();
            let mut value: Option<Expr> = None;
            for way in 0..nf.pow(order as u32) {
                let owner: Vec<usize> = (0..order).map(|j| way / nf.pow(j as u32) % nf).collect();
                let mut product: Option<Expr> = None;
                for (i, fac) in t.factors.iter().enumerate() {
                    let mine: Vec<Expr> = comps
                        .iter()
                        .zip(&owner)
                        .filter(|(_, o)| **o == i)
                        .map(|(c, _)| c.clone())
                        .collect();
                    let vc = vcomp.filter(|_| fac.comps.is_some());
                    let p = self.factor_probe(fac, coords, &mine, vc, sites);
                    product = Some(match product {
                        None => p,
                        Some(x) => bin(BinaryOp::Mul, x, p),
                    });
                }
                let product = product.expect("a term has a factor");
                value = Some(match value {
                    None => product,
                    Some(x) => bin(BinaryOp::Add, x, product),
                });
            }
            let mut value = value.expect("one way or more");
            if let Some(c) = &t.coef {
                value = bin(BinaryOp::Mul, c.clone(), value);
            }
            total = Some(match total {
                None => value,
                Some(s) => bin(BinaryOp::Add, s, value),
            });
        }
        let mut out = total.unwrap_or(lit_f(0.0));
        out.span = span;
        Ok(out)
    }

    /// The probe of one factor at `coords`, differentiated along `comps` (component `vcomp`
    /// of a vector factor). Literal components pick their axis and component at once (one
    /// out of range was refused before); index expressions select among them,
    /// `ifelse(c == 0, ∂₀, ifelse(c == 1, ∂₁, ∂₂))`, the last case unconditionally: a range
    /// check there costs 5–9% of a value + gradient + Hessian probe.
    fn factor_probe(
        &mut self,
        fac: &Factor,
        coords: &[Expr],
        comps: &[Expr],
        vcomp: Option<&Expr>,
        sites: &mut Vec<Site>,
    ) -> Expr {
        let d = coords.len();
        let k = self.site(fac, coords, comps.len() as u32, sites);
        let mut combos: Vec<(Vec<usize>, Vec<u32>)> = vec![(vec![], vec![0; d])];
        for _ in comps {
            combos = combos
                .into_iter()
                .flat_map(|(axes, orders)| {
                    (0..d).map(move |a| {
                        let mut axes = axes.clone();
                        let mut orders = orders.clone();
                        axes.push(a);
                        orders[a] += 1;
                        (axes, orders)
                    })
                })
                .collect();
        }
        // Every axis tuple, for the world derivatives of a frame.
        let index_combos = combos.clone();
        let literal = |c: &Expr| match c.kind {
            ExprKind::Literal(Scalar::I64(v)) if v >= 0 => Some(v as usize),
            _ => None,
        };
        let fixed: Option<Vec<usize>> = comps.iter().map(literal).collect();
        if let Some(want) = &fixed {
            combos.retain(|(axes, _)| axes == want);
        }
        let components: Vec<usize> = match (fac.comps, vcomp.and_then(literal)) {
            (None, _) => vec![0],
            (Some(_), Some(c)) => vec![c],
            (Some(n), None) => (0..n).collect(),
        };
        let select_component = fac.comps.is_some() && vcomp.and_then(literal).is_none();
        // With a frame, a world derivative along axes `a…` is `Σ_k R[k₁][a₁]… ∂_k…` over the
        // index-space derivatives of every axis tuple `k…` (gradient `Rᵀ g`, Hessian
        // `Rᵀ H R`), summed in the order `Frame` sums them, zero factors left out.
        if fac.frame.is_some() {
            for &c in &components {
                for (_, orders) in &index_combos {
                    sites[k].probes.insert((c, orders.clone()));
                }
            }
        }
        let mut options: Vec<(Option<Expr>, Expr)> = vec![];
        for &c in &components {
            for (axes, orders) in &combos {
                let p = match &fac.frame {
                    Some(fr) if !axes.is_empty() => {
                        world(fr, axes, &index_combos, |o| sites[k].value(c, o))
                    }
                    _ => {
                        sites[k].probes.insert((c, orders.clone()));
                        name(&sites[k].value(c, orders))
                    }
                };
                let mut cond: Option<Expr> = None;
                let mut and = |e: Expr| {
                    cond = Some(match cond.take() {
                        None => e,
                        Some(x) => bin(BinaryOp::AndAnd, x, e),
                    });
                };
                if select_component {
                    let v = vcomp.expect("a vector factor's probe has a component");
                    and(bin(BinaryOp::Eq, v.clone(), lit_i(c as i64)));
                }
                if fixed.is_none() {
                    for (e, &a) in comps.iter().zip(axes) {
                        and(bin(BinaryOp::Eq, e.clone(), lit_i(a as i64)));
                    }
                }
                options.push((cond, p));
            }
        }
        let mut out: Option<Expr> = None;
        for (cond, p) in options.into_iter().rev() {
            out = Some(match cond {
                None => p,
                Some(c) => match out {
                    None => p,
                    Some(other) => call("ifelse", vec![c, p, other]),
                },
            });
        }
        out.expect("one option or more")
    }
}
