//! Fields in programs (issue 15): `field F = img ⊛ h` and its probes, on the JIT, the C
//! backend and the reference evaluator, against `tessera probe`'s library route
//! (`fields::probe`) and the whole-image convolution sum; the §11 identities that involve
//! fields, numerically; continuity and parse errors with their places.

mod common;

use common::cases::c_runner;
use common::{fmt, formats_of, parse};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::error::Error;
use tessera::fields::Image;
use tessera::fields::kernel::{Kernel, NAMES};
use tessera::fields::probe::{Field, Wants, naive};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn dense(rank: usize) -> String {
    format!("{}Element(0.0){}", "Dense(".repeat(rank), ")".repeat(rank))
}

fn tensor(shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::from_dense(&fmt(&dense(shape.len())), shape, &Buffer::F64(values)).unwrap()
}

/// The outputs `outs` of `src` on every backend (JIT, C when a compiler is present,
/// evaluator).
fn run_all(
    src: &str,
    inputs: &[(&str, Vec<usize>, Vec<f64>)],
    outs: &[(&str, Vec<usize>)],
) -> Vec<(&'static str, BTreeMap<String, Vec<f64>>)> {
    let p = parse(src);
    let mut tensors = BTreeMap::new();
    for (n, s, v) in inputs {
        tensors.insert(n.to_string(), tensor(s, v.clone()));
    }
    for (n, s) in outs {
        tensors.insert(n.to_string(), tensor(s, vec![0.0; s.iter().product()]));
    }
    let take = |t: &Tensor| -> Vec<f64> {
        let v = t.to_dense().converted(tessera::types::ElemType::F64);
        v.as_f64().unwrap().to_vec()
    };
    let mut results = vec![];
    let mut runners = vec![("jit", Runner::jit())];
    if let Some(c) = c_runner("fields_programs") {
        runners.push(("c", c));
    }
    for (name, r) in runners {
        let mut ts = tensors.clone();
        let k = r
            .compile(&p, &formats_of(&ts))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        r.execute(&k, &mut ts).unwrap();
        let got = outs
            .iter()
            .map(|(n, _)| (n.to_string(), take(&ts[*n])))
            .collect();
        results.push((name, got));
    }
    let ev = tessera::tensor::evaluate(&p, &tensors).unwrap_or_else(|e| panic!("eval: {e}"));
    let got = outs
        .iter()
        .map(|(n, _)| {
            let v = ev[*n].converted(tessera::types::ElemType::F64);
            (n.to_string(), v.as_f64().unwrap().to_vec())
        })
        .collect();
    results.push(("eval", got));
    results
}

/// Equal within `tol` relative to the data's scale, NaN where the other is NaN.
fn same(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + b.abs())
}

fn random(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

const AXES: [&str; 3] = ["px", "py", "pz"];

/// Points spread over the image and a little beyond it (some windows are outside).
fn points(rng: &mut StdRng, shape: &[usize], n: usize) -> Vec<Vec<f64>> {
    shape
        .iter()
        .map(|&s| {
            (0..n)
                .map(|_| rng.random_range(-0.5..s as f64 - 0.5))
                .collect()
        })
        .collect()
}

#[test]
fn probes_equal_tessera_probe_and_the_convolution_sum_on_every_backend() {
    let mut rng = StdRng::seed_from_u64(15);
    let n = 64;
    for name in NAMES {
        let kernel = Kernel::named(name).unwrap();
        let max = kernel.continuity.unwrap().min(2);
        for shape in [vec![10], vec![8, 9], vec![9, 10, 9]] {
            let d = shape.len();
            let values = random(&mut rng, shape.iter().product());
            let pts = points(&mut rng, &shape, n);
            let coords = AXES[..d]
                .iter()
                .map(|a| format!("{a}[i]"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut src = format!("field F = img (*) {name}\nfor i = _\n  v[i] = F({coords})\n");
            if max >= 1 {
                src += &format!("  for c = _\n    g[i, c] = grad(F, {coords})[c]\n  end\n");
            }
            if max >= 2 {
                src += &format!(
                    "  for a = _, b = _\n    h[i, a, b] = hess(F, {coords})[a, b]\n  end\n"
                );
            }
            src += "  inn[i] = ifelse(inside(";
            src += &coords;
            src += ", F), 1.0, 0.0)\nend\n";
            let mut inputs = vec![("img", shape.clone(), values.clone())];
            for (a, p) in pts.iter().enumerate() {
                inputs.push((AXES[a], vec![n], p.clone()));
            }
            let mut outs = vec![("v", vec![n]), ("inn", vec![n])];
            if max >= 1 {
                outs.push(("g", vec![n, d]));
            }
            if max >= 2 {
                outs.push(("h", vec![n, d, d]));
            }
            let got = run_all(&src, &inputs, &outs);
            // `tessera probe`'s route.
            let img = Image::new(shape.clone(), Buffer::F64(values.clone()), None, "img").unwrap();
            let mut field = Field::new(img, kernel.clone(), "img").unwrap();
            let wants = Wants {
                value: true,
                gradient: max >= 1,
                hessian: max >= 2,
            };
            let pk = field.compile(&tessera::backend::Jit::new(), wants).unwrap();
            let flat: Vec<f64> = (0..n).flat_map(|k| pts.iter().map(move |p| p[k])).collect();
            let probed = field.probe(&pk, &flat).unwrap();
            let mut inside = 0;
            for k in 0..n {
                let x: Vec<f64> = pts.iter().map(|p| p[k]).collect();
                let is_in = field.inside(&x);
                inside += usize::from(is_in);
                for (backend, out) in &got {
                    let at = |what: &str| format!("{backend} {name} {shape:?} {what} at {x:?}");
                    assert_eq!(
                        out["inn"][k],
                        f64::from(u8::from(is_in)),
                        "{}",
                        at("inside")
                    );
                    let v = out["v"][k];
                    assert!(
                        same(v, probed.value.as_ref().unwrap()[k], 1e-12),
                        "{}",
                        at("value")
                    );
                    let want = if is_in {
                        naive(&kernel, &shape, &values, &x, &vec![0; d])
                    } else {
                        f64::NAN
                    };
                    assert!(same(v, want, 1e-10), "{}: {v} vs {want}", at("value"));
                    if max >= 1 {
                        for a in 0..d {
                            let g = out["g"][k * d + a];
                            assert!(
                                same(g, probed.gradient.as_ref().unwrap()[k * d + a], 1e-12),
                                "{}",
                                at("gradient")
                            );
                        }
                    }
                    if max >= 2 {
                        for a in 0..d * d {
                            let h = out["h"][k * d * d + a];
                            assert!(
                                same(h, probed.hessian.as_ref().unwrap()[k * d * d + a], 1e-12),
                                "{}",
                                at("hessian")
                            );
                        }
                    }
                }
            }
            assert!(inside >= 3, "{name} {shape:?}: too few points inside");
        }
    }
}

/// An input tensor: name, shape, values.
type Input = (&'static str, Vec<usize>, Vec<f64>);

/// Three 3-d volumes, the points all inside a c4hexic (support 3) window, and the coordinates' source.
fn volumes(rng: &mut StdRng, n: usize) -> (Vec<Input>, String) {
    let shape = vec![8, 9, 7];
    let mut inputs = vec![];
    for img in ["u", "v", "w"] {
        inputs.push((img, shape.clone(), random(rng, shape.iter().product())));
    }
    for (a, &s) in shape.iter().enumerate() {
        let p: Vec<f64> = (0..n)
            .map(|_| rng.random_range(2.0..s as f64 - 3.0))
            .collect();
        inputs.push((AXES[a], vec![n], p));
    }
    (inputs, "px[i], py[i], pz[i]".to_string())
}

#[test]
fn field_identities_hold_numerically() {
    let mut rng = StdRng::seed_from_u64(11);
    let n = 16;
    let (inputs, p) = volumes(&mut rng, n);
    // ∇×∇φ = 0: ε_ajk ∂_j ∂_k φ.
    let curl_grad = format!(
        "field F = u (*) bspln3\nfor i = _, a = 0:2, j = 0:2, k = 0:2\n  r[i, a] += eps[a, j, k] * hess(F, {p})[j, k]\nend"
    );
    for (backend, out) in run_all(&curl_grad, &inputs, &[("r", vec![n, 3])]) {
        assert!(
            out["r"].iter().all(|v| v.abs() < 1e-12),
            "{backend}: ∇×∇φ = {:?}",
            out["r"]
        );
    }
    // ∇·(∇×V) = 0 for V = (u, v, w) ⊛ bspln3: ε_ajk ∂_a ∂_j V_k.
    let div_curl = format!(
        "field V0 = u (*) bspln3\nfield V1 = v (*) bspln3\nfield V2 = w (*) bspln3\nfor i = _, a = 0:2, j = 0:2\n  r[i] += eps[a, j, 0] * hess(V0, {p})[a, j] + eps[a, j, 1] * hess(V1, {p})[a, j] + eps[a, j, 2] * hess(V2, {p})[a, j]\nend"
    );
    for (backend, out) in run_all(&div_curl, &inputs, &[("r", vec![n])]) {
        assert!(
            out["r"].iter().all(|v| v.abs() < 1e-12),
            "{backend}: ∇·∇×V = {:?}",
            out["r"]
        );
    }
    // Hessian symmetry, and trace(∇⊗∇φ) = ∇·∇φ (δ contracts the Hessian; the Laplacian as
    // the sum of second derivatives along each axis, from the convolution sum).
    let hess = format!(
        "field F = u (*) c4hexic\nfor i = _\n  for a = 0:2, b = 0:2\n    h[i, a, b] = hess(F, {p})[a, b]\n    t[i] += delta[a, b] * hess(F, {p})[a, b]\n  end\nend"
    );
    let (shape, values) = (&inputs[0].1, &inputs[0].2);
    let kernel = Kernel::named("c4hexic").unwrap();
    for (backend, out) in run_all(&hess, &inputs, &[("h", vec![n, 3, 3]), ("t", vec![n])]) {
        for k in 0..n {
            let x: Vec<f64> = (0..3).map(|a| inputs[3 + a].2[k]).collect();
            let mut lap = 0.0;
            for a in 0..3 {
                let mut o = vec![0; 3];
                o[a] = 2;
                lap += naive(&kernel, shape, values, &x, &o);
                for b in 0..3 {
                    let (hab, hba) = (out["h"][k * 9 + a * 3 + b], out["h"][k * 9 + b * 3 + a]);
                    assert!(
                        same(hab, hba, 1e-12),
                        "{backend}: H[{a},{b}] {hab} vs {hba}"
                    );
                }
            }
            assert!(
                same(out["t"][k], lap, 1e-10),
                "{backend}: trace {} vs ∇·∇φ {lap}",
                out["t"][k]
            );
        }
    }
    // Probes distribute over + and scaling: (2F - H/4)(p) = 2F(p) - H(p)/4, also for ∇.
    let lifted = format!(
        "field F = u (*) bspln3\nfield H = v (*) ctmr\nfield G = 2.0 * F - H / 4.0\nfor i = _\n  a[i] = G({p})\n  b[i] = 2.0 * F({p}) - 0.25 * H({p})\n  for c = 0:2\n    ga[i, c] = grad(G, {p})[c]\n    gb[i, c] = 2.0 * grad(F, {p})[c] - 0.25 * grad(H, {p})[c]\n  end\nend"
    );
    let outs = [
        ("a", vec![n]),
        ("b", vec![n]),
        ("ga", vec![n, 3]),
        ("gb", vec![n, 3]),
    ];
    for (backend, out) in run_all(&lifted, &inputs, &outs) {
        for (x, y) in out["a"]
            .iter()
            .zip(&out["b"])
            .chain(out["ga"].iter().zip(&out["gb"]))
        {
            assert!(same(*x, *y, 1e-12), "{backend}: lifted {x} vs {y}");
        }
    }
}

#[test]
fn a_two_d_curl_of_a_gradient_is_zero() {
    // The 2-d scalar curl ε_jk ∂_j ∂_k φ.
    let mut rng = StdRng::seed_from_u64(5);
    let n = 12;
    let shape = vec![9, 8];
    let mut inputs = vec![("u", shape.clone(), random(&mut rng, 72))];
    for (a, &s) in shape.iter().enumerate() {
        let p: Vec<f64> = (0..n)
            .map(|_| rng.random_range(2.0..s as f64 - 3.0))
            .collect();
        inputs.push((AXES[a], vec![n], p));
    }
    let src = "field F = u (*) bspln5\nfor i = _, j = 0:1, k = 0:1\n  r[i] += eps[j, k] * hess(F, px[i], py[i])[j, k]\nend";
    for (backend, out) in run_all(src, &inputs, &[("r", vec![n])]) {
        assert!(
            out["r"].iter().all(|v| v.abs() < 1e-12),
            "{backend}: {:?}",
            out["r"]
        );
    }
}

fn compile_error(src: &str) -> Error {
    let p = match tessera::notation::parse::parse_program(src) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut ts = BTreeMap::new();
    ts.insert("img".to_string(), tensor(&[6, 6], vec![0.0; 36]));
    ts.insert("px".to_string(), tensor(&[3], vec![0.0; 3]));
    ts.insert("py".to_string(), tensor(&[3], vec![0.0; 3]));
    ts.insert("out".to_string(), tensor(&[3], vec![0.0; 3]));
    match Runner::jit().compile(&p, &formats_of(&ts)) {
        Ok(_) => panic!("expected an error:\n{src}"),
        Err(e) => e,
    }
}

#[test]
fn derivatives_past_the_kernels_continuity_are_errors_at_their_place() {
    let e = compile_error(
        "field F = img (*) tent\nfor i = _\n  out[i] = grad(F, px[i], py[i])[0]\nend",
    );
    match &e {
        Error::Continuity {
            kernel,
            continuity,
            order,
            place,
        } => {
            assert_eq!((kernel.as_str(), *continuity, *order), ("tent", Some(0), 1));
            assert_eq!(place.map(|s| (s.line, s.col)), Some((3, 12)), "{e}");
        }
        other => panic!("expected a continuity error, got {other:?}"),
    }
    assert!(e.to_string().starts_with("3:12:"), "{e}");
    // A C¹ kernel has no Hessian; a sum with a C⁰ term has no gradient.
    let e = compile_error(
        "field F = conv(img, ctmr)\nfor i = _\n  out[i] = hess(F, px[i], py[i])[0, 1]\nend",
    );
    assert!(matches!(e, Error::Continuity { order: 2, .. }), "{e}");
    let e = compile_error(
        "field F = img ⊛ bspln3\nfield G = F + conv(img, tent)\nfor i = _\n  out[i] = grad(G, px[i], py[i])[1]\nend",
    );
    assert!(matches!(e, Error::Continuity { .. }), "{e}");
}

#[test]
fn field_mistakes_are_errors_with_line_and_column() {
    let cases = [
        // A kernel name is missing after the convolution.
        ("field F = img (*)\nout[0] = 1.0", "1:18: syntax error"),
        (
            "field F = img ⊛ nope\nfor i = _\n  out[i] = F(px[i], py[i])\nend",
            "1:17:",
        ),
        (
            "field F = img (*) bspln3\nfor i = _\n  out[i] = F\nend",
            "3:12:",
        ),
        (
            "field F = img (*) bspln3\nfor i = _\n  out[i] = grad(px, px[i])[0]\nend",
            "3:12:",
        ),
        (
            "field F = img (*) bspln3\nfield G = F * F\nout[0] = G(1.0, 2.0)",
            "2:11:",
        ),
        (
            "field F = img (*) bspln3\nfor i = _\n  out[i] = F(px[i], py[i], 1.0, 2.0)\nend",
            "3:12:",
        ),
    ];
    for (src, want) in cases {
        let e = compile_error(src).to_string();
        assert!(e.starts_with(want), "{src}\n→ {e}\nwanted {want}");
    }
}

#[test]
fn field_programs_print_and_parse_back() {
    let src = "field F = img ⊛ bspln3\nfield G = 2.0 * F - conv(img, ctmr)\nfor i = _\n  out[i] = G(px[i], py[i]) + grad(F, px[i], py[i])[1]\nend";
    let p = parse(src);
    let printed = p.to_string();
    assert_eq!(parse(&printed), p, "{printed}");
}

#[test]
fn nabla_and_curried_derivatives_are_the_same_probes() {
    let pairs = [
        (
            "field F = img ⊛ bspln3\nfor i = _, c = _\n  out[i, c] = ∇F(px[i], py[i])[c]\nend",
            "field F = img ⊛ bspln3\nfor i = _, c = _\n  out[i, c] = grad(F, px[i], py[i])[c]\nend",
        ),
        (
            "field F = img ⊛ bspln3\nfor i = _, c = _\n  out[i, c] = grad(F)(px[i], py[i])[c]\nend",
            "field F = img ⊛ bspln3\nfor i = _, c = _\n  out[i, c] = grad(F, px[i], py[i])[c]\nend",
        ),
        (
            "field F = img ⊛ bspln3\nfor i = _, a = _, b = _\n  out[i, a, b] = ∇⊗∇F(px[i], py[i])[a, b] + hess(F)(px[i], py[i])[b, a]\nend",
            "field F = img ⊛ bspln3\nfor i = _, a = _, b = _\n  out[i, a, b] = hess(F, px[i], py[i])[a, b] + hess(F, px[i], py[i])[b, a]\nend",
        ),
    ];
    for (sugar, plain) in pairs {
        let p = parse(sugar);
        assert_eq!(
            p.to_string(),
            parse(plain).to_string(),
            "{sugar}\nprints as\n{p}"
        );
        // The printed form parses back to the same program.
        assert_eq!(parse(&p.to_string()), p, "{p}");
    }
    // And they run: ∇F(x)[c] equals grad(F, x)[c] on the JIT, C and the evaluator.
    let mut rng = StdRng::seed_from_u64(3);
    let n = 6;
    let inputs = vec![
        ("img", vec![8, 8], random(&mut rng, 64)),
        (
            "px",
            vec![n],
            (0..n).map(|k| 2.0 + 0.5 * k as f64).collect(),
        ),
        (
            "py",
            vec![n],
            (0..n).map(|k| 4.5 - 0.3 * k as f64).collect(),
        ),
    ];
    let src = "field F = img ⊛ bspln3\nfor i = _\n  for c = 0:1\n    a[i, c] = ∇F(px[i], py[i])[c]\n    b[i, c] = grad(F, px[i], py[i])[c]\n  end\n  for j = 0:1, k = 0:1\n    h[i, j, k] = ∇⊗∇F(px[i], py[i])[j, k] - hess(F)(px[i], py[i])[j, k]\n  end\nend";
    for (backend, out) in run_all(
        src,
        &inputs,
        &[("a", vec![n, 2]), ("b", vec![n, 2]), ("h", vec![n, 2, 2])],
    ) {
        assert_eq!(out["a"], out["b"], "{backend}");
        assert!(out["h"].iter().all(|v| *v == 0.0), "{backend}");
    }
}

#[test]
fn nabla_mistakes_are_syntax_errors_with_line_and_column() {
    let cases = [
        // No position: a derivative field must be probed.
        ("field F = img ⊛ bspln3\nout[0] = ∇F[0]", "2:12:"),
        // No component.
        (
            "field F = img ⊛ bspln3\nout[0] = ∇F(1.0, 2.0) + 1.0",
            "2:23:",
        ),
        // The Hessian needs two components, the gradient one.
        (
            "field F = img ⊛ bspln3\nout[0] = ∇⊗∇F(1.0, 2.0)[0]",
            "2:24:",
        ),
        (
            "field F = img ⊛ bspln3\nout[0] = ∇F(1.0, 2.0)[0, 1]",
            "2:22:",
        ),
        // `∇⊗` not followed by `∇`.
        (
            "field F = img ⊛ bspln3\nout[0] = ∇⊗F(1.0, 2.0)[0, 1]",
            "2:12:",
        ),
        // `∇` before something that is not a name.
        ("out[0] = ∇(1.0)", "1:11:"),
    ];
    for (src, want) in cases {
        let e = tessera::notation::parse::parse_program(src)
            .err()
            .unwrap_or_else(|| panic!("expected a syntax error:\n{src}"))
            .to_string();
        assert!(e.starts_with(want), "{src}\n→ {e}\nwanted {want}");
    }
}

/// How many image reads (`sample(`) the expanded program holds.
fn samples(src: &str) -> usize {
    let p = tessera::transforms::fields::expand(&parse(src)).unwrap();
    p.to_string().matches("sample(").count()
}

#[test]
fn probes_of_one_position_share_one_window_gather() {
    // The value, gradient and Hessian at one point, in three statements of the `for i`
    // body: one site, so the 4³ window of `bspln3` is read once per point (64 reads in
    // the program), not once per statement (192).
    let merged = "field F = img ⊛ bspln3
for i = _
  v[i] = F(px[i], py[i], pz[i])
  for c = _
    g[i, c] = grad(F, px[i], py[i], pz[i])[c]
  end
  for a = _, b = _
    h[i, a, b] = hess(F, px[i], py[i], pz[i])[a, b]
  end
end
";
    assert_eq!(samples(merged), 64, "{merged}");
    // The same probes in three loops: three sites, the form before merging.
    let apart = "field F = img ⊛ bspln3
for i = _
  v[i] = F(px[i], py[i], pz[i])
end
for i = _, c = _
  g[i, c] = grad(F, px[i], py[i], pz[i])[c]
end
for i = _, a = _, b = _
  h[i, a, b] = hess(F, px[i], py[i], pz[i])[a, b]
end
";
    assert_eq!(samples(apart), 3 * 64, "{apart}");
    let mut rng = StdRng::seed_from_u64(1515);
    let (n, shape) = (40, vec![7, 8, 9]);
    let mut inputs = vec![("img", shape.clone(), random(&mut rng, 7 * 8 * 9))];
    for (a, p) in points(&mut rng, &shape, n).into_iter().enumerate() {
        inputs.push((AXES[a], vec![n], p));
    }
    let outs = [("v", vec![n]), ("g", vec![n, 3]), ("h", vec![n, 3, 3])];
    let got = run_all(merged, &inputs, &outs);
    let want = run_all(apart, &inputs, &outs);
    for ((backend, got), (_, want)) in got.iter().zip(&want) {
        for (k, _) in &outs {
            for (x, y) in got[*k].iter().zip(&want[*k]) {
                assert!(same(*x, *y, 1e-12), "{backend} {k}: {x} vs {y}");
            }
        }
        assert!(
            got["v"].iter().any(|v| !v.is_nan()),
            "{backend}: no point inside"
        );
        assert!(
            got["v"].iter().any(|v| v.is_nan()),
            "{backend}: no point outside"
        );
    }
}

#[test]
fn probes_around_a_write_to_their_position_are_not_merged() {
    // `x` is a state variable: the probe of `a` reads it before the write, those of `b` and
    // `c` after it, so no site may be bound above the write (each stays at its statement:
    // three gathers of the 4² window, 48 reads).
    let src = "field F = img ⊛ bspln3
for i = _
  x .= 0.0
  x[] = px[i]
  a[i] = F(x[], py[i])
  x[] = x[] + 0.25
  b[i] = F(x[], py[i])
  c[i] = grad(F, x[], py[i])[0]
end
";
    assert_eq!(samples(src), 3 * 16, "{src}");
    let apart = "field F = img ⊛ bspln3
for i = _
  a[i] = F(px[i], py[i])
  b[i] = F(qx[i], py[i])
  c[i] = grad(F, qx[i], py[i])[0]
end
";
    let mut rng = StdRng::seed_from_u64(1516);
    let (n, shape) = (40, vec![9, 8]);
    let img = random(&mut rng, 72);
    let pts = points(&mut rng, &shape, n);
    let qx: Vec<f64> = pts[0].iter().map(|x| x + 0.25).collect();
    let mut inputs = vec![("img", shape.clone(), img), ("x", vec![], vec![0.0])];
    inputs.push(("px", vec![n], pts[0].clone()));
    inputs.push(("py", vec![n], pts[1].clone()));
    let outs = [("a", vec![n]), ("b", vec![n]), ("c", vec![n])];
    let got = run_all(src, &inputs, &outs);
    inputs.push(("qx", vec![n], qx));
    let want = run_all(apart, &inputs, &outs);
    for ((backend, got), (_, want)) in got.iter().zip(&want) {
        for (k, _) in &outs {
            for (x, y) in got[*k].iter().zip(&want[*k]) {
                assert!(same(*x, *y, 1e-12), "{backend} {k}: {x} vs {y}");
            }
        }
        let moved = got["a"].iter().zip(&got["b"]);
        assert!(
            moved.filter(|(a, b)| !a.is_nan() && a != b).count() > n / 4,
            "{backend}: the probe after the write does not see it"
        );
    }
}
