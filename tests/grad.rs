//! Reverse-mode AD (`transforms::grad`, issue 16): gradients against central finite
//! differences on hand-written programs, several formats, and the JIT, C and the reference
//! evaluator; the structure of masked gradients; tapes; refusals with their place.

mod common;

use common::{fmt, parse};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::api::grad::{BackwardOptions, backward, create_tensors};
use tessera::backend::CBackend;
use tessera::levels::Format;
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::grad::{GradOptions, Tapes, grad, grad_with};

type Tensors = BTreeMap<String, Tensor>;

/// Values in [0.5, 2) at the coordinates `keep` selects, zero elsewhere, in `format`.
fn tensor(
    rng: &mut StdRng,
    format: &str,
    shape: &[usize],
    keep: &dyn Fn(&[usize], &mut StdRng) -> bool,
) -> Tensor {
    let total: usize = shape.iter().product();
    let mut coords = vec![vec![]; shape.len()];
    let mut vals = vec![];
    for k in 0..total {
        let mut c = vec![0; shape.len()];
        let mut r = k;
        for d in (0..shape.len()).rev() {
            c[d] = r % shape[d];
            r /= shape[d];
        }
        if keep(&c, rng) {
            for (d, x) in c.iter().enumerate() {
                coords[d].push(*x as i64);
            }
            vals.push(rng.random_range(0.5..2.0));
        }
    }
    Tensor::from_coo(&fmt(format), shape, &coords, &Buffer::F64(vals), |a, _| a)
        .unwrap_or_else(|e| panic!("{format}: {e}"))
}

fn dense_values(t: &Tensor) -> Vec<f64> {
    match t.to_dense() {
        Buffer::F64(v) => v,
        other => panic!("not f64: {other:?}"),
    }
}

fn as_dense(t: &Tensor, values: Vec<f64>) -> Tensor {
    Tensor::from_dense(
        &Format::dense(t.rank(), tessera::types::Scalar::F64(0.0)),
        &t.shape,
        &Buffer::F64(values),
    )
    .unwrap()
}

/// The loss the gradient is of: the 0-d output, or the sum of each seeded output times its
/// seed, after running the forward program with the JIT on dense copies.
fn loss(runner: &Runner, p: &Program, inputs: &Tensors, seeds: &Tensors, out: &str) -> f64 {
    let mut ts = inputs.clone();
    create_tensors(p, &mut ts, &|_, rank, fill| Format::dense(rank, fill)).unwrap();
    let c = runner.compile(p, &common::formats_of(&ts)).unwrap();
    runner.execute(&c, &mut ts).unwrap();
    if seeds.is_empty() {
        return dense_values(&ts[out])[0];
    }
    seeds
        .iter()
        .map(|(o, s)| {
            let y = dense_values(&ts[o]);
            dense_values(s)
                .iter()
                .zip(&y)
                .map(|(a, b)| a * b)
                .sum::<f64>()
        })
        .sum()
}

/// The backends: the JIT, C when a compiler is here, and the evaluator (`None`).
fn backends() -> Vec<(&'static str, Option<Runner>)> {
    let mut out = vec![("jit", Some(Runner::jit()))];
    let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
    if c.compiler_available() {
        out.push(("c", Some(Runner::new(Box::new(c)))));
    } else {
        eprintln!("grad: no C compiler (cc or $CC), the C backend is skipped");
    }
    out.push(("eval", None));
    out
}

/// Check every gradient of `text` w.r.t. `wrt` against central differences (eps 1e-6,
/// rtol 1e-6) at every coordinate (dense gradients) or at the stored coordinates of each
/// input (masked, where the gradient must also be absent elsewhere), on every backend.
fn check(text: &str, inputs: &Tensors, wrt: &[&str], seeds: &Tensors, loss_name: &str) {
    check_with(
        text,
        inputs,
        wrt,
        seeds,
        loss_name,
        &BackwardOptions::default(),
    );
}

fn check_with(
    text: &str,
    inputs: &Tensors,
    wrt: &[&str],
    seeds: &Tensors,
    loss_name: &str,
    opts: &BackwardOptions,
) {
    let p = parse(text);
    let fd_runner = Runner::jit();
    let dense_inputs: Tensors = inputs
        .iter()
        .map(|(n, t)| (n.clone(), as_dense(t, dense_values(t))))
        .collect();
    let eps = 1e-6;
    for (backend, runner) in backends() {
        let (gp, got) = backward(&p, inputs, wrt, seeds.clone(), opts, runner.as_ref())
            .unwrap_or_else(|e| panic!("{backend}: {e}\n{text}"));
        let printed = gp.program.to_string();
        assert_eq!(parse(&printed), gp.program, "round trip:\n{printed}");
        for (input, dname) in &gp.gradients {
            let a = &inputs[input];
            let g = &got[dname];
            let masked = gp.masks.iter().any(|(i, _)| i == input);
            let gv = dense_values(g);
            let base = dense_values(a);
            let mut stored = vec![false; base.len()];
            let strides = strides(&a.shape);
            let at = |c: &[usize]| c.iter().zip(&strides).map(|(x, s)| x * s).sum::<usize>();
            if masked {
                a.for_each_stored(&mut |c, _| stored[at(c)] = true);
                if backend != "eval" {
                    // Exactly the input's pattern, stored zeros included.
                    let mut has = vec![false; base.len()];
                    g.for_each_stored(&mut |c, _| has[at(c)] = true);
                    assert_eq!(
                        has, stored,
                        "{backend}: {dname} is not {input}'s pattern\n{printed}"
                    );
                }
            }
            for k in 0..base.len() {
                if masked && !stored[k] {
                    assert_eq!(gv[k], 0.0, "{backend}: {dname}[{k}] outside the pattern");
                    continue;
                }
                let mut plus = dense_inputs.clone();
                let mut v = base.clone();
                v[k] += eps;
                plus.insert(input.clone(), as_dense(a, v.clone()));
                let mut minus = dense_inputs.clone();
                v[k] -= 2.0 * eps;
                minus.insert(input.clone(), as_dense(a, v));
                let fd = (loss(&fd_runner, &p, &plus, seeds, loss_name)
                    - loss(&fd_runner, &p, &minus, seeds, loss_name))
                    / (2.0 * eps);
                let tol = 1e-6 * fd.abs().max(gv[k].abs()).max(1.0);
                assert!(
                    (fd - gv[k]).abs() <= tol,
                    "{backend}: {dname}[{k}] = {} but finite differences give {fd}\n{printed}",
                    gv[k]
                );
            }
        }
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn all(_: &[usize], _: &mut StdRng) -> bool {
    true
}

fn some(_: &[usize], rng: &mut StdRng) -> bool {
    rng.random_bool(0.4)
}

fn band(c: &[usize], _: &mut StdRng) -> bool {
    c[0].abs_diff(c[1]) <= 1
}

fn named(list: Vec<(&str, Tensor)>) -> Tensors {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

const SPMV_LOSS: &str = "y .= 0.0
for i = _, j = _
  y[i] += A[i, j] * x[j]
end
s .= 0.0
for i = _
  s[] += y[i] * y[i]
end
";

#[test]
fn spmv_loss_on_every_matrix_format() {
    let mut rng = StdRng::seed_from_u64(16);
    for (format, keep) in [
        (
            "Dense(Dense(Element(0.0)))",
            all as fn(&[usize], &mut StdRng) -> bool,
        ),
        ("Dense(SparseList(Element(0.0)))", some),
        ("SparseCOO{2}(Element(0.0))", some),
        ("Dense(RunList(Element(0.0)))", some),
        ("Dense(SparseBand(Element(0.0)))", band),
    ] {
        let a = tensor(&mut rng, format, &[5, 6], &keep);
        let x = tensor(&mut rng, "Dense(Element(0.0))", &[6], &all);
        let ts = named(vec![("A", a), ("x", x)]);
        check(SPMV_LOSS, &ts, &["A", "x"], &BTreeMap::new(), "s");
    }
}
