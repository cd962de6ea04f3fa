//! Probes of a field `img ⊛ h` compiled to a dense window gather (issue 15, seed §6).
//!
//! The generated loop-IR kernel runs once over all points. For point `p` it reads the index
//! position `x`, tests that the whole window lies in the image (`inside`), splits each axis
//! into `n = ⌊x⌋` and `f = x - n`, evaluates every tap's weight `h⁽ᵒ⁾(f - i)` as one fixed
//! polynomial in `f` by Horner's rule (`kernel` module docs), and sums the `(2s)^d` samples of
//! the window separably: the last (contiguous) axis first, one partial sum per derivative
//! order, then the outer axes. Every load is `base + constant`, fully unrolled: no loop over
//! the image and no loop in the window. Values, gradients and Hessians (index space) come out
//! of one pass; any subset of them can be asked for.
//!
//! **Out of the image**: a point whose window is not entirely inside the image (Diderot's
//! `inside(p, F)` is false), or which is not finite, gets NaN in every output, so a batch
//! never fails half-way and the caller can tell exactly which points were outside. This is
//! Diderot's rule (probing outside is undefined and guarded by `inside`) made observable.

use super::kernel::Kernel;
use super::{Frame, Image};
use crate::backend::{Backend, CompiledKernel};
use crate::error::{Error, Result};
use crate::ir::build as b;
use crate::ir::cx::Cx;
use crate::ir::{BinOp, BufId, Expr, Stmt, UnOp, VarId};
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::collections::BTreeMap;

/// What a probe computes: the derivative orders wanted, each a subset of `{0, 1, 2}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wants {
    pub value: bool,
    pub gradient: bool,
    pub hessian: bool,
}

impl Wants {
    /// Only derivative order `k` (0 value, 1 gradient, 2 Hessian).
    pub fn order(k: u32) -> Result<Wants> {
        match k {
            0..=2 => Ok(Wants {
                value: k == 0,
                gradient: k == 1,
                hessian: k == 2,
            }),
            _ => Err(Error::Usage(format!(
                "derivative order {k}: 0 (value), 1 (gradient) or 2 (Hessian)"
            ))),
        }
    }

    fn max_order(&self) -> u32 {
        if self.hessian {
            2
        } else if self.gradient {
            1
        } else {
            0
        }
    }
}

/// The outputs of a probe of `n` points in `d` dimensions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Probed {
    /// `n` values.
    pub value: Option<Vec<f64>>,
    /// `n × d`, row-major.
    pub gradient: Option<Vec<f64>>,
    /// `n × d × d`, row-major.
    pub hessian: Option<Vec<f64>>,
}

/// A field `image ⊛ kernel`.
pub struct Field {
    pub image: Image,
    pub kernel: Kernel,
    frame: Option<Frame>,
}

/// A compiled probe of one field shape, kernel and set of outputs.
pub struct ProbeKernel {
    pub ir: crate::ir::Kernel,
    compiled: Box<dyn CompiledKernel>,
    wants: Wants,
    shape: Vec<usize>,
    elem: ElemType,
}

impl Field {
    pub fn new(image: Image, kernel: Kernel, what: &str) -> Result<Field> {
        let frame = image.frame(what)?;
        Ok(Field {
            image,
            kernel,
            frame,
        })
    }

    /// Whether the whole window of index position `x` lies in the image (the kernel's test).
    pub fn inside_index(&self, x: &[f64]) -> bool {
        let s = self.kernel.support as f64;
        x.iter()
            .zip(&self.image.shape)
            .all(|(&x, &n)| x >= s - 1.0 && x < n as f64 - s)
    }

    /// `inside(p, F)` at world position `p` (index position when the image has no
    /// orientation).
    pub fn inside(&self, p: &[f64]) -> bool {
        let mut x = p.to_vec();
        if let Some(f) = &self.frame {
            f.to_index(p, &mut x);
        }
        self.inside_index(&x)
    }

    /// Generate and compile the probe kernel. Derivatives need a kernel of enough continuity
    /// ([`Error::Continuity`]).
    pub fn compile(&self, backend: &dyn Backend, wants: Wants) -> Result<ProbeKernel> {
        self.kernel.checked_derivative(wants.max_order())?;
        let ir = probe_ir(
            &self.kernel,
            &self.image.shape,
            self.image.values.elem(),
            wants,
        );
        if let Err(e) = ir.check() {
            return Err(Error::Backend(format!(
                "internal error: the probe kernel is ill-typed: {e:?}"
            )));
        }
        let compiled = backend.compile(&ir)?;
        Ok(ProbeKernel {
            ir,
            compiled,
            wants,
            shape: self.image.shape.clone(),
            elem: self.image.values.elem(),
        })
    }

    /// Probe at `points` (`n × d`, row-major; world positions if the image has an
    /// orientation, else index positions). Gradients and Hessians come back in world space.
    pub fn probe(&mut self, k: &ProbeKernel, points: &[f64]) -> Result<Probed> {
        let d = self.image.dim();
        if k.shape != self.image.shape || k.elem != self.image.values.elem() {
            return Err(Error::Usage(
                "the probe kernel was compiled for another image shape or type".into(),
            ));
        }
        if !points.len().is_multiple_of(d) {
            return Err(Error::Usage(format!(
                "{} coordinates are not a whole number of {d}-d points",
                points.len()
            )));
        }
        let n = points.len() / d;
        let index: Vec<f64> = match &self.frame {
            None => points.to_vec(),
            Some(f) => {
                let mut x = vec![0.0; points.len()];
                for (p, x) in points.chunks_exact(d).zip(x.chunks_exact_mut(d)) {
                    f.to_index(p, x);
                }
                x
            }
        };
        let sizes = [
            (k.wants.value, n),
            (k.wants.gradient, n * d),
            (k.wants.hessian, n * d * d),
        ];
        let bytes: usize = sizes.iter().filter(|w| w.0).map(|w| w.1 * 8).sum();
        crate::runtime::memory::check(
            "probe output",
            &[n],
            "Dense(Element(0.0))",
            Some(bytes as u64),
        )?;
        let mut bufs = vec![
            std::mem::replace(&mut self.image.values, Buffer::F64(vec![].into())),
            Buffer::F64(index.into()),
        ];
        for (want, len) in sizes {
            if want {
                bufs.push(Buffer::F64(vec![0.0; len].into()));
            }
        }
        let ran = k.compiled.run(&mut bufs);
        let mut it = bufs.into_iter();
        self.image.values = it.next().expect("the image buffer comes back");
        ran?;
        it.next();
        let mut take = |want: bool| {
            want.then(|| match it.next() {
                Some(Buffer::F64(v)) => v.into_vec(),
                _ => unreachable!("outputs are f64 buffers in order"),
            })
        };
        let mut out = Probed {
            value: take(k.wants.value),
            gradient: take(k.wants.gradient),
            hessian: take(k.wants.hessian),
        };
        if let Some(f) = &self.frame {
            if let Some(g) = &mut out.gradient {
                g.chunks_exact_mut(d).for_each(|g| f.gradient_to_world(g));
            }
            if let Some(h) = &mut out.hessian {
                h.chunks_exact_mut(d * d)
                    .for_each(|h| f.hessian_to_world(h));
            }
        }
        Ok(out)
    }
}

fn f64c(v: f64) -> Expr {
    Expr::Const(Scalar::F64(v))
}

fn fmul(a: Expr, b: Expr) -> Expr {
    // Plain IEEE products: weights are finite, and a NaN or infinite sample should spread
    // into the result as in any convolution (the strong zero would hide it).
    Expr::Binary(BinOp::IeeeMul, Box::new(a), Box::new(b))
}

fn fadd(a: Expr, b: Expr) -> Expr {
    Expr::Binary(BinOp::Add, Box::new(a), Box::new(b))
}

/// `Σ terms` as a left-leaning sum.
fn sum(terms: Vec<Expr>) -> Expr {
    terms.into_iter().reduce(fadd).unwrap_or(f64c(0.0))
}

/// `p(f)` by Horner's rule, dropping trailing zero coefficients.
fn horner_ir(p: &[f64], f: VarId) -> Expr {
    let len = p.iter().rposition(|&c| c != 0.0).map_or(0, |k| k + 1);
    let p = &p[..len];
    let Some((&top, rest)) = p.split_last() else {
        return f64c(0.0);
    };
    rest.iter()
        .rev()
        .fold(f64c(top), |acc, &c| fadd(fmul(acc, b::var(f)), f64c(c)))
}

/// Derivative orders per axis: every `orders` vector of `len` entries with sum at most `max`.
fn combos(len: usize, max: u32) -> Vec<Vec<u32>> {
    if len == 0 {
        return vec![vec![]];
    }
    let mut out = vec![];
    for o in 0..=max {
        for mut rest in combos(len - 1, max - o) {
            rest.insert(0, o);
            out.push(rest);
        }
    }
    out
}

struct Gen<'a> {
    cx: Cx,
    body: Vec<Stmt>,
    kernel: &'a Kernel,
    strides: Vec<i64>,
    img: BufId,
    elem: ElemType,
    base: VarId,
    /// `weights[axis][order][tap]`.
    weights: Vec<Vec<Vec<VarId>>>,
    max: u32,
}

impl Gen<'_> {
    /// Emit the partial sums over axes `axis..d` of the window at constant offset `offset`
    /// from the base; the result maps each per-axis order vector (sum ≤ max) to its value.
    fn partial(&mut self, axis: usize, offset: i64) -> BTreeMap<Vec<u32>, Expr> {
        let d = self.strides.len();
        let s = self.kernel.support as i64;
        let taps: Vec<i64> = (1 - s..=s).collect();
        let inner: Vec<BTreeMap<Vec<u32>, Expr>> = taps
            .iter()
            .map(|&i| {
                let off = offset + i * self.strides[axis];
                if axis + 1 == d {
                    let v = self.cx.var("v", ElemType::F64);
                    let idx = b::add(b::var(self.base), b::int(off));
                    let load = b::load(self.img, idx);
                    let load = if self.elem.compute() == ElemType::F64 {
                        load
                    } else {
                        b::cast(ElemType::F64, load)
                    };
                    self.body.push(b::assign(v, load));
                    BTreeMap::from([(vec![], b::var(v))])
                } else {
                    self.partial(axis + 1, off)
                }
            })
            .collect();
        let mut out = BTreeMap::new();
        for combo in combos(d - axis, self.max) {
            let (o, rest) = (combo[0], &combo[1..]);
            let terms = (0..taps.len())
                .map(|t| {
                    fmul(
                        b::var(self.weights[axis][o as usize][t]),
                        inner[t][rest].clone(),
                    )
                })
                .collect();
            let e = sum(terms);
            // Only the whole sums are used once; inner partials are named so each is
            // computed once and shared by the orders above it.
            let e = if axis == 0 {
                e
            } else {
                let v = self.cx.var("s", ElemType::F64);
                self.body.push(b::assign(v, e));
                b::var(v)
            };
            out.insert(combo, e);
        }
        out
    }
}

/// The loop-IR probe kernel. Buffers: `img` (the samples, of type `elem`), `pts` (`n × d`
/// index positions), then one f64 output per wanted order (value `n`, gradient `n × d`,
/// Hessian `n × d × d`).
pub fn probe_ir(
    kernel: &Kernel,
    shape: &[usize],
    elem: ElemType,
    wants: Wants,
) -> crate::ir::Kernel {
    let d = shape.len();
    let max = wants.max_order();
    let mut cx = Cx::default();
    let img = cx.buf("img".into(), elem, false);
    let pts = cx.buf("pts".into(), ElemType::F64, false);
    let out_value = wants
        .value
        .then(|| cx.buf("value".into(), ElemType::F64, false));
    let out_grad = wants
        .gradient
        .then(|| cx.buf("gradient".into(), ElemType::F64, false));
    let out_hess = wants
        .hessian
        .then(|| cx.buf("hessian".into(), ElemType::F64, false));
    let p = cx.var("p", ElemType::I64);
    let xs: Vec<VarId> = (0..d).map(|_| cx.var("x", ElemType::F64)).collect();
    let fs: Vec<VarId> = (0..d).map(|_| cx.var("f", ElemType::F64)).collect();
    let ns: Vec<VarId> = (0..d).map(|_| cx.var("n", ElemType::I64)).collect();
    let base = cx.var("base", ElemType::I64);
    let s = kernel.support as i64;
    let derivs: Vec<Kernel> = (0..=max).map(|o| kernel.derivative(o)).collect();
    let weights: Vec<Vec<Vec<VarId>>> = (0..d)
        .map(|_| {
            (0..=max)
                .map(|_| (0..2 * s).map(|_| cx.var("w", ElemType::F64)).collect())
                .collect()
        })
        .collect();
    let mut strides = vec![1i64; d];
    for a in (0..d.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1] as i64;
    }

    let mut body = vec![];
    // Read the position; `inside`: s - 1 <= x < size - s on every axis (false on NaN).
    let mut inside = b::boolean(true);
    for a in 0..d {
        body.push(b::assign(
            xs[a],
            b::load(
                pts,
                b::add(b::mul(b::var(p), b::int(d as i64)), b::int(a as i64)),
            ),
        ));
        let lo = b::bin(BinOp::Ge, b::var(xs[a]), f64c((s - 1) as f64));
        let hi = b::lt(b::var(xs[a]), f64c(shape[a] as f64 - s as f64));
        inside = b::and(inside, b::and(lo, hi));
    }
    let mut g = Gen {
        cx,
        body: vec![],
        kernel,
        strides: strides.clone(),
        img,
        elem,
        base,
        weights,
        max,
    };
    let mut base_expr = b::int(0);
    for a in 0..d {
        let fl = Expr::Unary(UnOp::Floor, Box::new(b::var(xs[a])));
        g.body
            .push(b::assign(ns[a], b::cast(ElemType::I64, fl.clone())));
        g.body.push(b::assign(
            fs[a],
            Expr::Binary(BinOp::Sub, Box::new(b::var(xs[a])), Box::new(fl)),
        ));
        base_expr = b::add(base_expr, b::mul(b::var(ns[a]), b::int(strides[a])));
        for (o, k) in derivs.iter().enumerate() {
            for (t, i) in (1 - s..=s).enumerate() {
                let w = g.weights[a][o][t];
                g.body.push(b::assign(w, horner_ir(k.tap(i), fs[a])));
            }
        }
    }
    g.body.push(b::assign(base, base_expr));
    let sums = g.partial(0, 0);
    let unit = |axes: &[usize]| -> Vec<u32> {
        let mut v = vec![0u32; d];
        for &a in axes {
            v[a] += 1;
        }
        v
    };
    let mut stores = vec![];
    let mut nan_stores = vec![];
    let at = |per: usize, k: usize| b::add(b::mul(b::var(p), b::int(per as i64)), b::int(k as i64));
    if let Some(o) = out_value {
        stores.push(b::store(o, b::var(p), sums[&unit(&[])].clone()));
        nan_stores.push(b::store(o, b::var(p), f64c(f64::NAN)));
    }
    if let Some(o) = out_grad {
        for a in 0..d {
            stores.push(b::store(o, at(d, a), sums[&unit(&[a])].clone()));
            nan_stores.push(b::store(o, at(d, a), f64c(f64::NAN)));
        }
    }
    if let Some(o) = out_hess {
        for a in 0..d {
            for c in 0..d {
                // Mixed partials commute: the (c, a) entry is the same sum as (a, c).
                stores.push(b::store(
                    o,
                    at(d * d, a * d + c),
                    sums[&unit(&[a, c])].clone(),
                ));
                nan_stores.push(b::store(o, at(d * d, a * d + c), f64c(f64::NAN)));
            }
        }
    }
    let mut inner = std::mem::take(&mut g.body);
    inner.extend(stores);
    body.extend(b::if_else(inside, inner, nan_stores));
    let cx = g.cx;
    let n_points = Expr::Binary(
        BinOp::Div,
        Box::new(Expr::Len(pts)),
        Box::new(b::int(d as i64)),
    );
    crate::ir::Kernel {
        name: format!("probe_{}_{}d", kernel.name, d),
        bufs: cx.bufs,
        vars: cx.vars,
        body: vec![Stmt::For {
            var: p,
            start: b::int(0),
            stop: n_points,
            body,
        }],
        errors: cx.errors,
        bounded: vec![],
        not_nan: vec![],
        vectorized: vec![],
    }
}

/// The probe's value by its definition, for tests: the convolution sum over the *whole*
/// image, `Σ_idx V[idx] Π_a h⁽ᵒᵃ⁾(x_a - idx_a)`, with no window (an independent oracle).
pub fn naive(kernel: &Kernel, shape: &[usize], values: &[f64], x: &[f64], orders: &[u32]) -> f64 {
    let ks: Vec<Kernel> = orders.iter().map(|&o| kernel.derivative(o)).collect();
    let mut total = 0.0;
    for (flat, v) in values.iter().enumerate() {
        let mut rem = flat;
        let mut w = 1.0;
        for a in (0..shape.len()).rev() {
            let idx = rem % shape[a];
            rem /= shape[a];
            w *= ks[a].eval(x[a] - idx as f64);
        }
        total += v * w;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Interpreter, Jit};
    use crate::fields::Orientation;
    use crate::fields::kernel::NAMES;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn backends() -> Vec<Box<dyn Backend>> {
        let mut v: Vec<Box<dyn Backend>> = vec![Box::new(Jit::new()), Box::new(Interpreter)];
        // The C backend takes part when a C compiler is installed.
        let c = crate::backend::CBackend::new()
            .with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
        if c.compiler_available() {
            v.push(Box::new(c));
        }
        v
    }

    fn random_image(rng: &mut StdRng, shape: &[usize]) -> Vec<f64> {
        (0..shape.iter().product::<usize>())
            .map(|_| rng.random_range(-1.0..1.0))
            .collect()
    }

    /// Points mostly inside (support `s`), some near or past the edges, one NaN.
    fn random_points(rng: &mut StdRng, shape: &[usize], s: usize, n: usize) -> Vec<f64> {
        let mut pts = vec![];
        for k in 0..n {
            for &size in shape {
                pts.push(if k % 4 == 0 {
                    rng.random_range(-0.5..size as f64 + 0.5)
                } else {
                    rng.random_range(s as f64 - 1.0..size as f64 - s as f64)
                });
            }
        }
        pts[0] = f64::NAN;
        pts
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-10 * (1.0 + b.abs())
    }

    #[test]
    fn probes_equal_the_whole_image_convolution_sum() {
        let mut rng = StdRng::seed_from_u64(15);
        for backend in backends() {
            for name in NAMES {
                let kernel = Kernel::named(name).unwrap();
                let max = kernel.continuity.unwrap().min(2);
                let wants = Wants {
                    value: true,
                    gradient: max >= 1,
                    hessian: max >= 2,
                };
                for shape in [vec![9], vec![8, 7], vec![7, 8, 9]] {
                    let d = shape.len();
                    let values = random_image(&mut rng, &shape);
                    let img = Image::new(
                        shape.clone(),
                        Buffer::F64(values.clone().into()),
                        None,
                        "img",
                    )
                    .unwrap();
                    let mut field = Field::new(img, kernel.clone(), "img").unwrap();
                    let pk = field.compile(backend.as_ref(), wants).unwrap();
                    let pts = random_points(&mut rng, &shape, kernel.support, 40);
                    let out = field.probe(&pk, &pts).unwrap();
                    let mut inside_count = 0;
                    for (k, x) in pts.chunks_exact(d).enumerate() {
                        let inside = field.inside(x);
                        inside_count += usize::from(inside);
                        let value = out.value.as_ref().unwrap()[k];
                        if !inside {
                            assert!(value.is_nan(), "{name} {shape:?} outside at {x:?}");
                            continue;
                        }
                        let want = naive(&kernel, &shape, &values, x, &vec![0; d]);
                        assert!(
                            close(value, want),
                            "{} {name} {x:?}: {value} vs {want}",
                            backend.name()
                        );
                        if let Some(g) = &out.gradient {
                            for a in 0..d {
                                let mut o = vec![0; d];
                                o[a] = 1;
                                let want = naive(&kernel, &shape, &values, x, &o);
                                assert!(close(g[k * d + a], want), "{name} gradient {a} at {x:?}");
                            }
                        }
                        if let Some(h) = &out.hessian {
                            for a in 0..d {
                                for c in 0..d {
                                    let mut o = vec![0; d];
                                    o[a] += 1;
                                    o[c] += 1;
                                    let want = naive(&kernel, &shape, &values, x, &o);
                                    assert!(
                                        close(h[k * d * d + a * d + c], want),
                                        "{name} hessian at {x:?}"
                                    );
                                }
                            }
                        }
                    }
                    assert!(inside_count > 5, "{name} {shape:?}: too few points inside");
                }
            }
        }
    }

    #[test]
    fn derivatives_agree_with_finite_differences_of_values() {
        let mut rng = StdRng::seed_from_u64(7);
        let jit = Jit::new();
        let shape = vec![9, 10, 8];
        let values = random_image(&mut rng, &shape);
        for name in ["ctmr", "bspln3", "bspln5", "c4hexic"] {
            let kernel = Kernel::named(name).unwrap();
            let img = Image::new(
                shape.clone(),
                Buffer::F64(values.clone().into()),
                None,
                "img",
            )
            .unwrap();
            let mut field = Field::new(img, kernel, "img").unwrap();
            let vk = field.compile(&jit, Wants::order(0).unwrap()).unwrap();
            let gk = field.compile(&jit, Wants::order(1).unwrap()).unwrap();
            let x = [4.3, 4.61, 3.77];
            let g = field.probe(&gk, &x).unwrap().gradient.unwrap();
            let e = 1e-6;
            for a in 0..3 {
                let (mut lo, mut hi) = (x, x);
                lo[a] -= e;
                hi[a] += e;
                let v = field.probe(&vk, &[lo, hi].concat()).unwrap().value.unwrap();
                let fd = (v[1] - v[0]) / (2.0 * e);
                assert!(
                    (fd - g[a]).abs() < 1e-6,
                    "{name} axis {a}: {fd} vs {}",
                    g[a]
                );
            }
        }
    }

    #[test]
    fn interpolating_kernels_reproduce_samples_and_linear_fields_their_slope() {
        let jit = Jit::new();
        let shape = vec![6, 7];
        // V[i, j] = 2 i - 3 j + 1: every kernel reproduces linear functions.
        let values: Vec<f64> = (0..42)
            .map(|k| 2.0 * (k / 7) as f64 - 3.0 * (k % 7) as f64 + 1.0)
            .collect();
        for name in NAMES {
            let kernel = Kernel::named(name).unwrap();
            let img = Image::new(
                shape.clone(),
                Buffer::F64(values.clone().into()),
                None,
                "img",
            )
            .unwrap();
            let mut field = Field::new(img, kernel.clone(), "img").unwrap();
            let vk = field.compile(&jit, Wants::order(0).unwrap()).unwrap();
            let x = [2.5, 2.25];
            let v = field.probe(&vk, &x).unwrap().value.unwrap()[0];
            assert!(
                (v - (2.0 * 2.5 - 3.0 * 2.25 + 1.0)).abs() < 1e-12,
                "{name}: {v}"
            );
            if kernel.continuity.unwrap() >= 1 {
                let gk = field.compile(&jit, Wants::order(1).unwrap()).unwrap();
                let g = field.probe(&gk, &x).unwrap().gradient.unwrap();
                assert!(
                    (g[0] - 2.0).abs() < 1e-12 && (g[1] + 3.0).abs() < 1e-12,
                    "{name}: {g:?}"
                );
            }
        }
        let mut rng = StdRng::seed_from_u64(3);
        let values = random_image(&mut rng, &shape);
        for name in ["tent", "ctmr"] {
            let img = Image::new(
                shape.clone(),
                Buffer::F64(values.clone().into()),
                None,
                "img",
            )
            .unwrap();
            let mut field = Field::new(img, Kernel::named(name).unwrap(), "img").unwrap();
            let vk = field.compile(&jit, Wants::order(0).unwrap()).unwrap();
            let v = field.probe(&vk, &[2.0, 3.0]).unwrap().value.unwrap()[0];
            assert_eq!(v, values[2 * 7 + 3], "{name}");
        }
    }

    #[test]
    fn world_space_gradients_and_hessians_follow_p() {
        let jit = Jit::new();
        let shape = vec![8, 9];
        // A quadratic in index space, φ(x) = x0² + x0 x1 - 2 x1, reproduced by ctmr.
        let q = |x0: f64, x1: f64| x0 * x0 + x0 * x1 - 2.0 * x1;
        let values: Vec<f64> = (0..72).map(|k| q((k / 9) as f64, (k % 9) as f64)).collect();
        let o = Orientation {
            directions: vec![vec![0.5, 0.5], vec![-1.0, 2.0]],
            origin: vec![3.0, -2.0],
        };
        let img = Image::new(
            shape.clone(),
            Buffer::F64(values.into()),
            Some(o.clone()),
            "img",
        )
        .unwrap();
        let mut field = Field::new(img, Kernel::named("ctmr").unwrap(), "img").unwrap();
        let k = field
            .compile(
                &jit,
                Wants {
                    value: true,
                    gradient: true,
                    hessian: false,
                },
            )
            .unwrap();
        let x = [3.3, 4.6];
        let p = [
            o.origin[0] + x[0] * o.directions[0][0] + x[1] * o.directions[1][0],
            o.origin[1] + x[0] * o.directions[0][1] + x[1] * o.directions[1][1],
        ];
        let out = field.probe(&k, &p).unwrap();
        assert!((out.value.unwrap()[0] - q(x[0], x[1])).abs() < 1e-10);
        // Index gradient (2 x0 + x1, x0 - 2); world gradient = Rᵀ g (chain rule), i.e.
        // M ᵀ g_world = g_index.
        let gi = [2.0 * x[0] + x[1], x[0] - 2.0];
        let gw = out.gradient.unwrap();
        for (dir, want) in o.directions.iter().zip(gi) {
            let back: f64 = (0..2).map(|i| dir[i] * gw[i]).sum();
            assert!((back - want).abs() < 1e-9, "{back} vs {want}");
        }
        assert!(field.inside(&p));
        // c4hexic is C⁴ and exact on cubics: the probed world Hessian mapped back by M
        // (Mᵀ H_world M) is the index-space Hessian [[2, 1], [1, 0]].
        let image = field.image.clone();
        let mut c4 = Field::new(image, Kernel::named("c4hexic").unwrap(), "img").unwrap();
        let hk = c4.compile(&jit, Wants::order(2).unwrap()).unwrap();
        let h = c4.probe(&hk, &p).unwrap().hessian.unwrap();
        // Mᵀ H_world M = H_index.
        for a in 0..2 {
            for c in 0..2 {
                let mut s = 0.0;
                for i in 0..2 {
                    for j in 0..2 {
                        s += o.directions[a][i] * h[i * 2 + j] * o.directions[c][j];
                    }
                }
                assert!(
                    (s - [2.0, 1.0, 1.0, 0.0][a * 2 + c]).abs() < 1e-9,
                    "{a} {c}: {s}"
                );
            }
        }
    }

    #[test]
    fn continuity_and_narrow_images() {
        let jit = Jit::new();
        let img = Image::new(vec![5, 5], Buffer::U8((0..25).collect()), None, "img").unwrap();
        let mut field = Field::new(img, Kernel::named("tent").unwrap(), "img").unwrap();
        assert!(matches!(
            field.compile(&jit, Wants::order(1).unwrap()),
            Err(Error::Continuity { .. })
        ));
        let k = field.compile(&jit, Wants::order(0).unwrap()).unwrap();
        let v = field
            .probe(&k, &[1.5, 2.0, 4.0, 0.0])
            .unwrap()
            .value
            .unwrap();
        assert_eq!(v[0], 9.5);
        // The tent's window at x = 4 reaches index 5: outside.
        assert!(v[1].is_nan());
    }
}
