//! Diderot's example programs (`examples/iso2d.tess`, `curvature.tess`, `vr_lite.tess`,
//! `lic2d.tess`; issue 15) on small synthetic inputs, on the JIT, the C backend and the
//! reference evaluator, against references: the isocontour condition at the points found,
//! the analytic curvature of a sphere, and direct Rust implementations of the renderer and of
//! LIC over the whole-image convolution sum (`fields::probe::naive`). Also the state
//! variables those programs carry their positions in.

mod common;

use common::cases::c_runner;
use common::{formats_of, parse};
use std::collections::BTreeMap;
use tessera::fields::kernel::Kernel;
use tessera::fields::probe::naive;
use tessera::levels::{Format, LevelKind};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const ISO2D: &str = include_str!("../examples/iso2d.tess");
const CURVATURE: &str = include_str!("../examples/curvature.tess");
const VR_LITE: &str = include_str!("../examples/vr_lite.tess");
const LIC2D: &str = include_str!("../examples/lic2d.tess");

fn dense(shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::from_dense(
        &Format::dense(shape.len(), Scalar::F64(0.0)),
        shape,
        &Buffer::F64(values.into()),
    )
    .unwrap()
}

fn scalar(v: Scalar) -> Tensor {
    Tensor::empty(&Format::new(vec![LevelKind::Element(v)]).unwrap(), &[]).unwrap()
}

fn zeros(shape: &[usize]) -> Tensor {
    Tensor::empty(&Format::dense(shape.len(), Scalar::F64(0.0)), shape).unwrap()
}

fn take(t: &Tensor) -> Vec<f64> {
    let v = t.to_dense().converted(tessera::types::ElemType::F64);
    v.as_f64().unwrap().to_vec()
}

/// The outputs `outs` of `src` on the JIT, the C backend (when a compiler is present) and
/// the evaluator.
fn run_all(
    src: &str,
    tensors: &BTreeMap<String, Tensor>,
    outs: &[&str],
) -> Vec<(&'static str, BTreeMap<String, Vec<f64>>)> {
    let p = parse(src);
    let mut results = vec![];
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("diderot_examples") {
        runners.push(("c", c));
    }
    for (name, r) in runners {
        let mut ts = tensors.clone();
        let k = r
            .compile(&p, &formats_of(&ts))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        r.execute(&k, &mut ts).unwrap();
        results.push((
            name,
            outs.iter()
                .map(|n| (n.to_string(), take(&ts[*n])))
                .collect(),
        ));
    }
    let ev = tessera::tensor::evaluate(&p, tensors).unwrap_or_else(|e| panic!("eval: {e}"));
    results.push((
        "eval",
        outs.iter()
            .map(|n| {
                let v = ev[*n].converted(tessera::types::ElemType::F64);
                (n.to_string(), v.as_f64().unwrap().to_vec())
            })
            .collect(),
    ));
    results
}

fn same(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + b.abs())
}

/// The field `values ⊛ kernel` at `x` with derivative orders `o`, NaN outside its domain.
fn field(kernel: &Kernel, shape: &[usize], values: &[f64], x: &[f64], o: &[u32]) -> f64 {
    let s = kernel.support as f64;
    let inside = x
        .iter()
        .zip(shape)
        .all(|(&p, &n)| p >= s - 1.0 && p < n as f64 - s);
    if inside {
        naive(kernel, shape, values, x, o)
    } else {
        f64::NAN
    }
}

fn inside(kernel: &Kernel, shape: &[usize], x: &[f64]) -> bool {
    let s = kernel.support as f64;
    x.iter()
        .zip(shape)
        .all(|(&p, &n)| p >= s - 1.0 && p < n as f64 - s)
}

#[test]
fn state_variables_carry_values_across_iterations() {
    // x ← 2x + y, y ← x − 1, three times: every backend as the evaluator, and the loop over
    // t (whose index nothing reads) runs three times, not once.
    let src = "for i = _\n  x .= 0.0\n  y .= 0.0\n  x[] = a[i]\n  y[] = b[i]\n  for t = 1:3\n    let s = 2.0 * x[] + y[]\n      x[] = s\n      y[] = x[] - 1.0\n    end\n  end\n  qx[i] = x[]\n  qy[i] = y[]\nend";
    let (a, b) = (vec![1.0, -2.0, 0.5], vec![3.0, 1.0, 0.0]);
    let mut ts = BTreeMap::new();
    ts.insert("a".to_string(), dense(&[3], a.clone()));
    ts.insert("b".to_string(), dense(&[3], b.clone()));
    for n in ["x", "y"] {
        ts.insert(n.to_string(), zeros(&[]));
    }
    for n in ["qx", "qy"] {
        ts.insert(n.to_string(), zeros(&[3]));
    }
    for (backend, out) in run_all(src, &ts, &["qx", "qy"]) {
        for i in 0..3 {
            let (mut x, mut y) = (a[i], b[i]);
            for _ in 0..3 {
                x = 2.0 * x + y;
                y = x - 1.0;
            }
            assert_eq!((out["qx"][i], out["qy"][i]), (x, y), "{backend} at {i}");
        }
    }
}

#[test]
fn a_tensor_with_an_index_is_still_refused_when_read_and_written_in_a_loop() {
    let p = parse("for i = _\n  for t = 1:3\n    z[i] = z[i] + 1.0\n  end\nend");
    let mut ts = BTreeMap::new();
    ts.insert("z".to_string(), zeros(&[3]));
    let e = Runner::jit().compile(&p, &formats_of(&ts)).err().unwrap();
    assert!(e.to_string().contains("read and written"), "{e}");
}

#[test]
fn iso2d_finds_points_on_the_isocontour() {
    // A cone: F = distance to the centre, so the isocontours are circles.
    let n = 16;
    let c = 7.3;
    let img: Vec<f64> = (0..n * n)
        .map(|k| ((k / n) as f64 - c).hypot((k % n) as f64 - c))
        .collect();
    let (mut px, mut py) = (vec![], vec![]);
    for a in [2.5, 5.0, 9.0, 12.0] {
        for b in [2.0, 6.5, 11.5] {
            px.push(a);
            py.push(b);
        }
    }
    let m = px.len();
    let iso = 4.0;
    let mut ts = BTreeMap::new();
    ts.insert("img".to_string(), dense(&[n, n], img.clone()));
    ts.insert("px".to_string(), dense(&[m], px));
    ts.insert("py".to_string(), dense(&[m], py));
    ts.insert("iso".to_string(), scalar(Scalar::F64(iso)));
    ts.insert("tol".to_string(), scalar(Scalar::F64(1e-9)));
    ts.insert("steps".to_string(), scalar(Scalar::I64(8)));
    for w in ["x", "y"] {
        ts.insert(w.to_string(), zeros(&[]));
    }
    for o in ["qx", "qy", "ok"] {
        ts.insert(o.to_string(), zeros(&[m]));
    }
    let k = Kernel::named("bspln3").unwrap();
    let results = run_all(ISO2D, &ts, &["qx", "qy", "ok"]);
    let eval = &results.last().unwrap().1;
    for (backend, out) in &results {
        let mut converged = 0;
        for i in 0..m {
            for o in ["qx", "qy", "ok"] {
                assert!(
                    same(out[o][i], eval[o][i], 1e-12),
                    "{backend} {o}[{i}]: {} vs eval {}",
                    out[o][i],
                    eval[o][i]
                );
            }
            let q = [out["qx"][i], out["qy"][i]];
            let v = field(&k, &[n, n], &img, &q, &[0, 0]);
            assert_eq!(out["ok"][i] == 1.0, (v - iso).abs() < 1e-9, "{backend} {i}");
            if out["ok"][i] == 1.0 {
                converged += 1;
                // bspln3 smooths the cone's tip only: away from it the contour is a circle.
                assert!(((q[0] - c).hypot(q[1] - c) - iso).abs() < 0.05, "{q:?}");
            }
        }
        assert!(converged >= m - 2, "{backend}: only {converged} of {m}");
    }
}

#[test]
fn curvature_of_a_sphere_is_one_over_its_radius() {
    let n = 18;
    let c = 8.4;
    let vol: Vec<f64> = (0..n * n * n)
        .map(|k| {
            let (a, b, d) = ((k / (n * n)) as f64, ((k / n) % n) as f64, (k % n) as f64);
            6.0 - ((a - c).powi(2) + (b - c).powi(2) + (d - c).powi(2)).sqrt()
        })
        .collect();
    let r = 5.0;
    let dirs = [
        [1.0, 0.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.6, 0.8, 0.0],
        [0.48, -0.6, 0.64],
        [-0.36, 0.48, -0.8],
    ];
    let m = dirs.len();
    let mut ts = BTreeMap::new();
    ts.insert("vol".to_string(), dense(&[n, n, n], vol));
    for (a, name) in ["px", "py", "pz"].iter().enumerate() {
        ts.insert(
            name.to_string(),
            dense(&[m], dirs.iter().map(|d| c + r * d[a]).collect()),
        );
    }
    ts.insert("G".to_string(), zeros(&[m, 3, 3]));
    ts.insert("f".to_string(), zeros(&[]));
    for o in ["k1", "k2"] {
        ts.insert(o.to_string(), zeros(&[m]));
    }
    let results = run_all(CURVATURE, &ts, &["k1", "k2"]);
    let eval = &results.last().unwrap().1;
    for (backend, out) in &results {
        for i in 0..m {
            for o in ["k1", "k2"] {
                assert!(same(out[o][i], eval[o][i], 1e-12), "{backend} {o}[{i}]");
                // The surface bends towards the inside, where F grows: κ = +1/r.
                let k = out[o][i];
                assert!((k - 1.0 / r).abs() < 0.02 / r, "{backend} {o}[{i}] = {k}");
            }
        }
    }
}

/// The renderer of `vr_lite.tess`, step by step on the convolution sum.
fn render(
    shape: &[usize],
    vol: &[f64],
    (h_, w_, steps): (usize, usize, usize),
    f: &BTreeMap<&str, f64>,
) -> (Vec<f64>, Vec<f64>) {
    let k = Kernel::named("bspln3").unwrap();
    let (mut rgb, mut alpha) = (vec![0.0; h_ * w_], vec![0.0; h_ * w_]);
    for j in 0..h_ {
        for kk in 0..w_ {
            let (mut t_, mut c_) = (1.0, 0.0);
            for t in 0..=steps {
                let p = [
                    f["x0"] + t as f64 * f["h"],
                    f["ylo"] + j as f64 * f["dy"],
                    f["zlo"] + kk as f64 * f["dz"],
                ];
                if !inside(&k, shape, &p) {
                    continue;
                }
                let v = naive(&k, shape, vol, &p, &[0, 0, 0]);
                let a = f["amax"] * ((v - f["lo"]) / (f["hi"] - f["lo"])).clamp(0.0, 1.0);
                if a <= 0.0 {
                    continue;
                }
                let g: Vec<f64> = (0..3)
                    .map(|d| {
                        let mut o = [0; 3];
                        o[d] = 1;
                        naive(&k, shape, vol, &p, &o)
                    })
                    .collect();
                let gn = (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt().max(1e-12);
                let ndl = -(g[0] * f["lx"] + g[1] * f["ly"] + g[2] * f["lz"]) / gn;
                let hx = f["lx"] - 1.0;
                let hn = (hx * hx + f["ly"] * f["ly"] + f["lz"] * f["lz"]).sqrt();
                let ndh = (-(g[0] * hx + g[1] * f["ly"] + g[2] * f["lz"]) / (gn * hn)).max(0.0);
                let shade = f["ka"] + f["kd"] * ndl.max(0.0) + f["ks"] * ndh.powi(8);
                c_ += t_ * a * shade;
                t_ *= 1.0 - a;
            }
            rgb[j * w_ + kk] = c_;
            alpha[j * w_ + kk] = 1.0 - t_;
        }
    }
    (rgb, alpha)
}

#[test]
fn vr_lite_matches_a_direct_renderer() {
    let n = 10;
    let vol: Vec<f64> = (0..n * n * n)
        .map(|k| {
            let (a, b, d) = ((k / (n * n)) as f64, ((k / n) % n) as f64, (k % n) as f64);
            (-((a - 4.5).powi(2) + (b - 4.0).powi(2) + (d - 5.0).powi(2)) / 6.0).exp()
        })
        .collect();
    let (h_, w_, steps) = (3, 4, 14);
    let f: BTreeMap<&str, f64> = [
        ("x0", 0.5),
        ("h", 0.6),
        ("ylo", 1.2),
        ("dy", 2.1),
        ("zlo", 0.8),
        ("dz", 1.9),
        ("lo", 0.2),
        ("hi", 0.8),
        ("amax", 0.3),
        ("lx", 0.0),
        ("ly", 0.6),
        ("lz", 0.8),
        ("ka", 0.2),
        ("kd", 0.7),
        ("ks", 0.3),
    ]
    .into_iter()
    .collect();
    let mut ts = BTreeMap::new();
    ts.insert("vol".to_string(), dense(&[n, n, n], vol.clone()));
    ts.insert("height".to_string(), scalar(Scalar::I64(h_ as i64)));
    ts.insert("width".to_string(), scalar(Scalar::I64(w_ as i64)));
    ts.insert("steps".to_string(), scalar(Scalar::I64(steps as i64)));
    for (k, v) in &f {
        ts.insert(k.to_string(), scalar(Scalar::F64(*v)));
    }
    for w in ["T", "C"] {
        ts.insert(w.to_string(), zeros(&[]));
    }
    for o in ["rgb", "alpha"] {
        ts.insert(o.to_string(), zeros(&[h_, w_]));
    }
    let (rgb, alpha) = render(&[n, n, n], &vol, (h_, w_, steps), &f);
    assert!(alpha.iter().any(|&a| a > 0.1), "the test volume is empty");
    for (backend, out) in run_all(VR_LITE, &ts, &["rgb", "alpha"]) {
        for i in 0..h_ * w_ {
            assert!(same(out["rgb"][i], rgb[i], 1e-10), "{backend} rgb[{i}]");
            assert!(
                same(out["alpha"][i], alpha[i], 1e-10),
                "{backend} alpha[{i}]"
            );
        }
    }
}

#[test]
fn lic_matches_direct_streamline_integration() {
    let n = 12;
    let c = 5.5;
    let (mut u, mut v) = (vec![0.0; n * n], vec![0.0; n * n]);
    for a in 0..n {
        for b in 0..n {
            u[a * n + b] = -(b as f64 - c) + 0.5;
            v[a * n + b] = a as f64 - c;
        }
    }
    let noise: Vec<f64> = (0..n * n)
        .map(|k| ((k * 7919 % 101) as f64) / 101.0)
        .collect();
    let (steps, h) = (4, 0.6);
    let mut ts = BTreeMap::new();
    ts.insert("u".to_string(), dense(&[n, n], u.clone()));
    ts.insert("v".to_string(), dense(&[n, n], v.clone()));
    ts.insert("noise".to_string(), dense(&[n, n], noise.clone()));
    ts.insert("steps".to_string(), scalar(Scalar::I64(steps)));
    ts.insert("h".to_string(), scalar(Scalar::F64(h)));
    for w in ["s", "c", "x", "y"] {
        ts.insert(w.to_string(), zeros(&[]));
    }
    ts.insert("out".to_string(), zeros(&[n, n]));
    // Direct: RK2 (midpoint) along the unit direction, tent samples of the noise.
    let b3 = Kernel::named("bspln3").unwrap();
    let tent = Kernel::named("tent").unwrap();
    let shape = [n, n];
    let mut want = vec![0.0; n * n];
    for j in 0..n {
        for k in 0..n {
            let (mut s, mut cnt) = (noise[j * n + k], 1.0);
            for dir in [1.0, -1.0] {
                let mut p = [j as f64, k as f64];
                for _ in 0..steps {
                    if !inside(&b3, &shape, &p) {
                        continue;
                    }
                    let e = h * dir;
                    let (u0, v0) = (
                        naive(&b3, &shape, &u, &p, &[0, 0]),
                        naive(&b3, &shape, &v, &p, &[0, 0]),
                    );
                    let n0 = u0.hypot(v0).max(1e-12);
                    let m = [p[0] + 0.5 * e * u0 / n0, p[1] + 0.5 * e * v0 / n0];
                    if !inside(&b3, &shape, &m) {
                        continue;
                    }
                    let (u1, v1) = (
                        naive(&b3, &shape, &u, &m, &[0, 0]),
                        naive(&b3, &shape, &v, &m, &[0, 0]),
                    );
                    let n1 = u1.hypot(v1).max(1e-12);
                    p = [p[0] + e * u1 / n1, p[1] + e * v1 / n1];
                    if inside(&tent, &shape, &p) {
                        s += naive(&tent, &shape, &noise, &p, &[0, 0]);
                        cnt += 1.0;
                    }
                }
            }
            want[j * n + k] = s / cnt;
        }
    }
    for (backend, out) in run_all(LIC2D, &ts, &["out"]) {
        for i in 0..n * n {
            assert!(
                same(out["out"][i], want[i], 1e-10),
                "{backend} out[{i}]: {} vs {}",
                out["out"][i],
                want[i]
            );
        }
    }
}

#[test]
fn grad_refuses_a_value_carried_across_iterations() {
    // x ← x·a three times: `grad` reverses loops assuming iterations share only reductions,
    // and refuses an overwrite the loop repeats (its existing check covers state variables).
    let p = parse(
        "L .= 0.0\nfor i = _\n  x .= 1.0\n  for t = 1:3\n    x[] = x[] * a[i]\n  end\n  L[] += x[]\nend",
    );
    let e = tessera::transforms::grad::grad(&p, &["a"], &[])
        .err()
        .unwrap();
    assert!(e.to_string().starts_with("5:5:"), "{e}");
    assert!(
        e.to_string().contains("overwritten on every iteration"),
        "{e}"
    );
}

#[test]
fn a_state_variable_reduced_with_plus_equals_is_still_a_lifecycle_error() {
    // `+=` combines with a value the loop order decides: only overwrites make a 0-d tensor a
    // state variable.
    let p = parse(
        "L .= 0.0\nfor i = _\n  x .= 1.0\n  for t = 1:3\n    x[] += x[] * a[i]\n  end\n  L[] += x[]\nend",
    );
    let mut ts = BTreeMap::new();
    ts.insert("a".to_string(), zeros(&[3]));
    ts.insert("x".to_string(), zeros(&[]));
    ts.insert("L".to_string(), zeros(&[]));
    let e = Runner::jit().compile(&p, &formats_of(&ts)).err().unwrap();
    assert!(e.to_string().contains("read and written"), "{e}");
}
