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
    Tensor::from_dense(
        &fmt(&dense(shape.len())),
        shape,
        &Buffer::F64(values.into()),
    )
    .unwrap()
}

/// The outputs `outs` of `src` on every backend (JIT, C when a compiler is present,
/// evaluator).
fn run_all(
    src: &str,
    inputs: &[(&str, Vec<usize>, Vec<f64>)],
    outs: &[(&str, Vec<usize>)],
) -> Vec<(&'static str, BTreeMap<String, Vec<f64>>)> {
    run_program(&parse(src), inputs, outs)
}

/// [`run_all`] of a parsed program.
fn run_program(
    p: &tessera::notation::ast::Program,
    inputs: &[(&str, Vec<usize>, Vec<f64>)],
    outs: &[(&str, Vec<usize>)],
) -> Vec<(&'static str, BTreeMap<String, Vec<f64>>)> {
    let src = p.to_string();
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
            .compile(p, &formats_of(&ts))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        r.execute(&k, &mut ts).unwrap();
        let got = outs
            .iter()
            .map(|(n, _)| (n.to_string(), take(&ts[*n])))
            .collect();
        results.push((name, got));
    }
    let ev = tessera::tensor::evaluate(p, &tensors).unwrap_or_else(|e| panic!("eval: {e}"));
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
            let img = Image::new(
                shape.clone(),
                Buffer::F64(values.clone().into()),
                None,
                "img",
            )
            .unwrap();
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
        // Two vector fields multiply to a tensor field; shapes must agree in a sum; a
        // vector field's shape goes with its convolution.
        (
            "field V[2] = img (*) bspln3\nfield G = V * V\nout[0] = G(1.0, 2.0)[0]",
            "2:11:",
        ),
        (
            "field V[2] = img (*) bspln3\nfield F = img (*) bspln3\nfield G = V + F\nout[0] = G(1.0, 2.0)[0]",
            "3:11:",
        ),
        (
            "field F = img (*) bspln3\nfield V[2] = 2.0 * F\nout[0] = 1.0",
            "2:9: syntax error",
        ),
        // A field divided by a field.
        (
            "field F = img (*) bspln3\nfield G = F / F\nout[0] = G(1.0, 2.0)",
            "2:15:",
        ),
        // Components: too many for a scalar field, none for a vector field, out of range.
        (
            "field F = img ⊛ bspln3\nout[0] = ∇F(1.0, 2.0)[0, 1]",
            "2:22:",
        ),
        ("field F = img ⊛ bspln3\nout[0] = F(1.0, 2.0)[0]", "2:21:"),
        ("field V[2] = img ⊛ bspln3\nout[0] = V(1.0, 2.0)", "2:10:"),
        (
            "field V[2] = img ⊛ bspln3\nout[0] = V(1.0, 2.0)[2]",
            "2:22:",
        ),
        (
            "field F = img ⊛ bspln3\nout[0] = grad(F, 1.0, 2.0)[2]",
            "2:28:",
        ),
        (
            "field F = img (*) bspln3\nfor i = _\n  out[i] = F(px[i], py[i], 1.0, 2.0)\nend",
            "3:12:",
        ),
        // A frame of the wrong size, of a non-literal, and of another dimension.
        (
            "field F = conv(img, bspln3, frame(1.0, 2.0, 3.0))\nout[0] = F(1.0, 2.0)",
            "1:29:",
        ),
        (
            "field F = conv(img, bspln3, frame(px[0], 0.0, 1.0))\nout[0] = F(1.0)",
            "1:29:",
        ),
        (
            "field F = conv(img, bspln3, frame(2.0, 1.0))\nfor i = _\n  out[i] = F(px[i], py[i])\nend",
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
            "field F = img ⊛ bspln3\nout[0] = ∇F(1.0, 2.0)[0, 1, 2]",
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

/// A NRRD header of a 3-d double image (`sizes` and `directions` in NRRD's order, fastest axis
/// first), raw, little-endian, with its samples in Tessera's row-major order (the same bytes).
fn write_nrrd(
    path: &std::path::Path,
    shape: &[usize],
    directions: &[[f64; 3]; 3],
    origin: [f64; 3],
    values: &[f64],
) {
    let v = |d: &[f64; 3]| format!("({:?},{:?},{:?})", d[0], d[1], d[2]);
    let mut bytes = format!(
        "NRRD0004\ntype: double\ndimension: 3\nsizes: {} {} {}\nendian: little\nencoding: raw\nspace dimension: 3\nspace directions: {} {} {}\nspace origin: {}\n\n",
        shape[2],
        shape[1],
        shape[0],
        v(&directions[0]),
        v(&directions[1]),
        v(&directions[2]),
        v(&origin),
    )
    .into_bytes();
    for x in values {
        bytes.extend(x.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// A rotated, anisotropic, offset frame: NRRD's space directions (fastest axis first) and origin.
fn skewed_frame() -> ([[f64; 3]; 3], [f64; 3]) {
    let (a, b) = (0.5f64, -0.3f64);
    // Rotation about z by a, then about x by b; columns scaled by the spacings.
    let rz = [
        [a.cos(), -a.sin(), 0.0],
        [a.sin(), a.cos(), 0.0],
        [0.0, 0.0, 1.0],
    ];
    let rx = [
        [1.0, 0.0, 0.0],
        [0.0, b.cos(), -b.sin()],
        [0.0, b.sin(), b.cos()],
    ];
    let spacing = [0.7, 1.3, 2.1];
    let mut dirs = [[0.0; 3]; 3];
    for (k, d) in dirs.iter_mut().enumerate() {
        for (i, di) in d.iter_mut().enumerate() {
            let r: f64 = (0..3).map(|m| rx[i][m] * rz[m][k]).sum();
            *di = spacing[k] * r;
        }
    }
    (dirs, [5.0, -3.0, 11.0])
}

#[test]
fn probes_of_an_oriented_nrrd_take_world_positions_as_tessera_probe_does() {
    let dir = common::fresh_dir("frames", "world_probes");
    let mut rng = StdRng::seed_from_u64(1515);
    let shape = vec![9usize, 8, 10];
    let values = random(&mut rng, shape.iter().product());
    let (dirs, origin) = skewed_frame();
    let path = dir.join("skew.nrrd");
    write_nrrd(&path, &shape, &dirs, origin, &values);
    // The loader's orientation (Tessera's axis order) and frame, as `tessera run` gets them.
    let file = path.to_str().unwrap();
    let (t, o) = tessera::tensor::files::load_inputs(&[(file, None)])
        .unwrap()
        .remove(0);
    let o = o.expect("space directions give an orientation");
    assert_eq!(t.shape, shape);
    let frame = o.frame("img").unwrap();
    // World points of index positions over the image and a little beyond it.
    let n = 48;
    let idx = points(&mut rng, &shape, n);
    let world: Vec<Vec<f64>> = (0..3)
        .map(|i| {
            (0..n)
                .map(|k| o.origin[i] + (0..3).map(|a| o.directions[a][i] * idx[a][k]).sum::<f64>())
                .collect()
        })
        .collect();
    let coords = "px[i], py[i], pz[i]";
    let src = format!(
        "field F = img (*) bspln3\nfor i = _\n  v[i] = F({coords})\n  g1[i] = grad(F, {coords})[1]\n  \
         for c = _\n    g[i, c] = grad(F, {coords})[c]\n  end\n  \
         for a = _, b = _\n    h[i, a, b] = hess(F, {coords})[a, b]\n  end\n  \
         inn[i] = ifelse(inside({coords}, F), 1.0, 0.0)\nend\n"
    );
    let frames = BTreeMap::from([("img".to_string(), frame.clone())]);
    let program = tessera::transforms::fields::with_frames(&parse(&src), &frames);
    let mut inputs = vec![("img", shape.clone(), values.clone())];
    for (a, p) in world.iter().enumerate() {
        inputs.push((AXES[a], vec![n], p.clone()));
    }
    let outs = [
        ("v", vec![n]),
        ("g1", vec![n]),
        ("g", vec![n, 3]),
        ("h", vec![n, 3, 3]),
        ("inn", vec![n]),
    ];
    let got = run_program(&program, &inputs, &outs);
    // `tessera probe`'s route on the same file.
    let mut field = Field::new(
        Image::load(&path).unwrap(),
        Kernel::named("bspln3").unwrap(),
        "img",
    )
    .unwrap();
    let all = Wants {
        value: true,
        gradient: true,
        hessian: true,
    };
    let pk = field.compile(&tessera::backend::Jit::new(), all).unwrap();
    let flat: Vec<f64> = (0..n)
        .flat_map(|k| world.iter().map(move |p| p[k]))
        .collect();
    let probed = field.probe(&pk, &flat).unwrap();
    let (pv, pg, ph) = (
        probed.value.unwrap(),
        probed.gradient.unwrap(),
        probed.hessian.unwrap(),
    );
    let mut inside = 0;
    for k in 0..n {
        let p: Vec<f64> = world.iter().map(|w| w[k]).collect();
        let is_in = field.inside(&p);
        inside += usize::from(is_in);
        for (backend, out) in &got {
            let at = |what: &str| format!("{backend} {what} at world {p:?}");
            assert_eq!(
                out["inn"][k],
                f64::from(u8::from(is_in)),
                "{}",
                at("inside")
            );
            assert!(
                same(out["v"][k], pv[k], 1e-12),
                "{}: {} vs {}",
                at("value"),
                out["v"][k],
                pv[k]
            );
            assert!(
                same(out["g1"][k], pg[k * 3 + 1], 1e-12),
                "{}",
                at("gradient[1]")
            );
            for c in 0..3 {
                let (a, b) = (out["g"][k * 3 + c], pg[k * 3 + c]);
                assert!(same(a, b, 1e-12), "{}: {a} vs {b}", at("gradient"));
            }
            for e in 0..9 {
                let (a, b) = (out["h"][k * 9 + e], ph[k * 9 + e]);
                assert!(same(a, b, 1e-12), "{}: {a} vs {b}", at("hessian"));
            }
        }
    }
    assert!(inside >= 10 && inside < n, "{inside} of {n} points inside");
    // The world gradient is not the index one: the frame was applied.
    let plain = run_all(&src, &inputs, &outs);
    assert!(
        (0..n).any(|k| !same(plain[0].1["v"][k], pv[k], 1e-6)),
        "index-space probes at the world points should differ"
    );
}

#[test]
fn unoriented_images_keep_index_space_and_frames_never_share_a_kernel() {
    let mut rng = StdRng::seed_from_u64(1516);
    let shape = vec![7usize, 8];
    let values = random(&mut rng, shape.iter().product());
    let src = "field F = img (*) ctmr\nfor i = _\n  v[i] = F(px[i], py[i])\n  for c = _\n    g[i, c] = grad(F, px[i], py[i])[c]\n  end\nend\n";
    let p = parse(src);
    // No frame, or an identity frame: the program is unchanged.
    let identity = tessera::fields::Frame {
        inverse: vec![vec![1.0, 0.0], vec![0.0, 1.0]],
        origin: vec![0.0, 0.0],
    };
    let with = |f: &tessera::fields::Frame| {
        tessera::transforms::fields::with_frames(
            &p,
            &BTreeMap::from([("img".to_string(), f.clone())]),
        )
    };
    assert_eq!(
        tessera::transforms::fields::with_frames(&p, &BTreeMap::new()),
        p
    );
    assert_eq!(with(&identity).to_string(), p.to_string());
    // Two frames of one image shape and format: two kernels, each its own frame's results.
    let scaled = |s: f64| tessera::fields::Frame {
        inverse: vec![vec![1.0 / s, 0.0], vec![0.0, 1.0 / s]],
        origin: vec![0.0, 0.0],
    };
    let n = 5;
    let pts: Vec<Vec<f64>> = (0..2)
        .map(|_| (0..n).map(|_| rng.random_range(1.0..2.4)).collect())
        .collect();
    let mut tensors = BTreeMap::new();
    tensors.insert("img".to_string(), tensor(&shape, values.clone()));
    tensors.insert("px".to_string(), tensor(&[n], pts[0].clone()));
    tensors.insert("py".to_string(), tensor(&[n], pts[1].clone()));
    tensors.insert("v".to_string(), tensor(&[n], vec![0.0; n]));
    tensors.insert("g".to_string(), tensor(&[n, 2], vec![0.0; 2 * n]));
    let r = Runner::jit();
    let mut results = vec![];
    for s in [1.0, 0.5, 0.5] {
        let program = if s == 1.0 {
            p.clone()
        } else {
            with(&scaled(s))
        };
        let k = r.compile(&program, &formats_of(&tensors)).unwrap();
        r.execute(&k, &mut tensors).unwrap();
        let take = |t: &Tensor| t.to_dense().as_f64().unwrap().to_vec();
        results.push((take(&tensors["v"]), take(&tensors["g"])));
    }
    assert_eq!(r.cache_len(), 2, "one kernel per frame");
    // Index position x = p / 0.5 = 2p; the world gradient is the index one times 2.
    let img = Image::new(shape.clone(), Buffer::F64(values.into()), None, "img").unwrap();
    let mut field = Field::new(img, Kernel::named("ctmr").unwrap(), "img").unwrap();
    let wants = Wants {
        value: true,
        gradient: true,
        hessian: false,
    };
    let pk = field.compile(&tessera::backend::Jit::new(), wants).unwrap();
    for (frame_scale, (v, g)) in [(1.0, &results[0]), (2.0, &results[1])] {
        let flat: Vec<f64> = (0..n)
            .flat_map(|k| [pts[0][k] * frame_scale, pts[1][k] * frame_scale])
            .collect();
        let probed = field.probe(&pk, &flat).unwrap();
        for k in 0..n {
            assert!(
                same(v[k], probed.value.as_ref().unwrap()[k], 1e-12),
                "value, scale {frame_scale}"
            );
            for c in 0..2 {
                let want = probed.gradient.as_ref().unwrap()[k * 2 + c] * frame_scale;
                assert!(
                    same(g[k * 2 + c], want, 1e-12),
                    "gradient, scale {frame_scale}"
                );
            }
        }
    }
    assert_eq!(results[1], results[2]);
}

/// Every derivative of a field `img ⊛ kernel` up to the Hessian at `x`, from the whole-image
/// convolution sum: `(value, gradient, Hessian)`.
fn jet(kernel: &str, shape: &[usize], img: &[f64], x: &[f64]) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
    let k = Kernel::named(kernel).unwrap();
    let d = x.len();
    let at = |axes: &[usize]| {
        let mut o = vec![0; d];
        for &a in axes {
            o[a] += 1;
        }
        naive(&k, shape, img, x, &o)
    };
    let g = (0..d).map(|a| at(&[a])).collect();
    let h = (0..d)
        .map(|a| (0..d).map(|b| at(&[a, b])).collect())
        .collect();
    (at(&[]), g, h)
}

#[test]
fn products_of_fields_follow_the_product_rule() {
    let mut rng = StdRng::seed_from_u64(21);
    let n = 8;
    let (inputs, p) = volumes(&mut rng, n);
    let src = format!(
        "field F = u (*) bspln3\nfield G = v (*) c4hexic\nfield H = 2.0 * F * G - F * F + G\nfor i = _\n  h[i] = H({p})\n  for a = 0:2\n    g[i, a] = grad(H, {p})[a]\n    for b = 0:2\n      hh[i, a, b] = hess(H, {p})[a, b]\n    end\n  end\nend"
    );
    let outs = [("h", vec![n]), ("g", vec![n, 3]), ("hh", vec![n, 3, 3])];
    let shape = &inputs[0].1;
    for (backend, out) in run_all(&src, &inputs, &outs) {
        for k in 0..n {
            let x: Vec<f64> = (0..3).map(|a| inputs[3 + a].2[k]).collect();
            let (f, fg, fh) = jet("bspln3", shape, &inputs[0].2, &x);
            let (g, gg, gh) = jet("c4hexic", shape, &inputs[1].2, &x);
            // H = 2FG - F² + G, by the product rule.
            let h = 2.0 * f * g - f * f + g;
            assert!(
                same(out["h"][k], h, 1e-10),
                "{backend}: H {} vs {h}",
                out["h"][k]
            );
            for a in 0..3 {
                let ha = 2.0 * (fg[a] * g + f * gg[a]) - 2.0 * f * fg[a] + gg[a];
                let got = out["g"][k * 3 + a];
                assert!(same(got, ha, 1e-10), "{backend}: ∂{a}H {got} vs {ha}");
                for b in 0..3 {
                    let hab = 2.0 * (fh[a][b] * g + fg[a] * gg[b] + fg[b] * gg[a] + f * gh[a][b])
                        - 2.0 * (fg[a] * fg[b] + f * fh[a][b])
                        + gh[a][b];
                    let got = out["hh"][k * 9 + a * 3 + b];
                    assert!(same(got, hab, 1e-9), "{backend}: ∂{a}∂{b}H {got} vs {hab}");
                }
            }
        }
    }
    // A product is as smooth as its roughest factor: `tent` has no gradient.
    let e = compile_error(
        "field F = img (*) bspln3\nfield G = F * conv(img, tent)\nfor i = _\n  out[i] = grad(G, px[i], py[i])[1]\nend",
    );
    assert!(matches!(e, Error::Continuity { order: 1, .. }), "{e}");
}

/// `(u, v, w)` of [`volumes`] stacked along a trailing component axis.
fn stacked(inputs: &[Input]) -> Input {
    let voxels = inputs[0].2.len();
    let mut s = vec![0.0; voxels * 3];
    for q in 0..voxels {
        for k in 0..3 {
            s[q * 3 + k] = inputs[k].2[q];
        }
    }
    let mut shape = inputs[0].1.clone();
    shape.push(3);
    ("s", shape, s)
}

#[test]
fn vector_fields_probe_components_jacobians_and_the_curl_identities() {
    let mut rng = StdRng::seed_from_u64(23);
    let n = 8;
    let (mut inputs, p) = volumes(&mut rng, n);
    inputs.push(stacked(&inputs));
    // Components, the Jacobian ∂Vₖ/∂x_c, ∇·(∇×V) = ε_abc ∂_a ∂_b V_c = 0 and
    // ∇×(∇×V) = ∇(∇·V) − ∇²V, written with ε and index notation over one vector field.
    let src = format!(
        "field V[3] = s ⊛ bspln3
for i = _
  for k = 0:2
    v[i, k] = V({p})[k]
    for c = 0:2
      jac[i, k, c] = ∇V({p})[k, c]
    end
  end
  for a = 0:2, b = 0:2, c = 0:2
    dc[i] += eps[a, b, c] * hess(V, {p})[c, a, b]
  end
  for a = 0:2, b = 0:2, c = 0:2, d = 0:2, e = 0:2
    cc[i, a] += eps[a, b, c] * eps[c, d, e] * hess(V, {p})[e, b, d]
  end
  for a = 0:2, e = 0:2
    gl[i, a] += hess(V, {p})[e, a, e] - hess(V, {p})[a, e, e]
  end
  curl1[i] = grad(V, {p})[0, 2] - grad(V, {p})[2, 0]
end"
    );
    let outs = [
        ("v", vec![n, 3]),
        ("jac", vec![n, 3, 3]),
        ("dc", vec![n]),
        ("cc", vec![n, 3]),
        ("gl", vec![n, 3]),
        ("curl1", vec![n]),
    ];
    let shape = &inputs[0].1;
    for (backend, out) in run_all(&src, &inputs, &outs) {
        for i in 0..n {
            let x: Vec<f64> = (0..3).map(|a| inputs[3 + a].2[i]).collect();
            let jets: Vec<_> = (0..3)
                .map(|k| jet("bspln3", shape, &inputs[k].2, &x))
                .collect();
            for k in 0..3 {
                let got = out["v"][i * 3 + k];
                assert!(
                    same(got, jets[k].0, 1e-10),
                    "{backend}: V{k} {got} vs {}",
                    jets[k].0
                );
                for c in 0..3 {
                    let got = out["jac"][i * 9 + k * 3 + c];
                    let want = jets[k].1[c];
                    assert!(
                        same(got, want, 1e-10),
                        "{backend}: ∂{c}V{k} {got} vs {want}"
                    );
                }
            }
            assert!(
                out["dc"][i].abs() < 1e-12,
                "{backend}: ∇·∇×V = {}",
                out["dc"][i]
            );
            for a in 0..3 {
                let (l, r) = (out["cc"][i * 3 + a], out["gl"][i * 3 + a]);
                assert!(
                    same(l, r, 1e-10),
                    "{backend}: ∇×∇×V {l} vs ∇(∇·V) − ∇²V {r}"
                );
            }
            let curl1 = jets[0].1[2] - jets[2].1[0];
            assert!(same(out["curl1"][i], curl1, 1e-10), "{backend}: (∇×V)₁");
        }
    }
}

#[test]
fn vector_fields_share_their_window_and_frame_with_their_components() {
    let mut rng = StdRng::seed_from_u64(29);
    let n = 6;
    let (mut inputs, p) = volumes(&mut rng, n);
    inputs.push(stacked(&inputs));
    // In a frame, the Jacobian of V is the gradient of each component field, world space
    // alike (the component axis is not a space axis); products of a scalar and a vector
    // field scale each component.
    let frame = "frame(1.0, 0.1, 0.0, -0.1, 0.95, 0.05, 0.0, 0.05, 1.05, 0.2, -0.1, 0.1)";
    let src = format!(
        "field V = conv(s, bspln3, 3, {frame})
field U = conv(v, bspln3, {frame})
field F = conv(u, c4hexic, {frame})
field W = F * V
for i = _, c = 0:2
  a[i, c] = grad(V, {p})[1, c]
  b[i, c] = grad(U, {p})[c]
  x[i, c] = grad(W, {p})[2, c]
  y[i, c] = grad(F, {p})[c] * V({p})[2] + F({p}) * grad(V, {p})[2, c]
end"
    );
    let outs = [
        ("a", vec![n, 3]),
        ("b", vec![n, 3]),
        ("x", vec![n, 3]),
        ("y", vec![n, 3]),
    ];
    for (backend, out) in run_all(&src, &inputs, &outs) {
        for (l, r) in [("a", "b"), ("x", "y")] {
            for (g, w) in out[l].iter().zip(&out[r]) {
                assert!(same(*g, *w, 1e-12), "{backend}: {l} {g} vs {r} {w}");
            }
            assert!(out[l].iter().any(|v| !v.is_nan()), "{backend}: all outside");
        }
    }
    // The window of a vector field is gathered once for all its components: 3 × 64 reads.
    let one = format!("field V[3] = s ⊛ bspln3\nfor i = _, k = 0:2\n  v[i, k] = V({p})[k]\nend");
    assert_eq!(samples(&one), 3 * 64, "{one}");
    // An image whose component axis is not the declared size has no value anywhere (NaN),
    // rather than values read from the wrong components.
    let wrong = format!("field V[2] = s ⊛ bspln3\nfor i = _\n  v[i] = V({p})[0]\nend");
    for (backend, out) in run_all(&wrong, &inputs, &[("v", vec![n])]) {
        assert!(
            out["v"].iter().all(|v| v.is_nan()),
            "{backend}: {:?}",
            out["v"]
        );
    }
    // Vector fields print and parse back.
    let printed = parse(&one).to_string();
    assert_eq!(parse(&printed), parse(&one), "{printed}");
}
