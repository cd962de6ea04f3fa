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
    Tensor::from_coo(
        &fmt(format),
        shape,
        &coords,
        &Buffer::F64(vals.into()),
        |a, _| a,
    )
    .unwrap_or_else(|e| panic!("{format}: {e}"))
}

fn dense_values(t: &Tensor) -> Vec<f64> {
    match t.to_dense() {
        Buffer::F64(v) => v.into_vec(),
        other => panic!("not f64: {other:?}"),
    }
}

fn as_dense(t: &Tensor, values: Vec<f64>) -> Tensor {
    Tensor::from_dense(
        &Format::dense(t.rank(), tessera::types::Scalar::F64(0.0)),
        &t.shape,
        &Buffer::F64(values.into()),
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

/// A seed in a sparse format or with integer elements is read as the dense f64 cotangent it
/// stands for (the backward pass reads seeds in place of their outputs' cotangents): the
/// gradients equal those of the same values seeded densely, on every backend.
#[test]
fn sparse_and_integer_seeds_give_the_dense_seeds_gradients() {
    let text = "C .= 0.0\nfor i = _, j = _, k = _\n  C[i, j] += S[i, j] * U[i, k] * V[j, k]\nend\n";
    let p = parse(text);
    let mut rng = StdRng::seed_from_u64(21);
    let ts = named(vec![
        (
            "S",
            tensor(&mut rng, "Dense(SparseList(Element(0.0)))", &[4, 5], &some),
        ),
        (
            "U",
            tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[4, 3], &all),
        ),
        (
            "V",
            tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[5, 3], &all),
        ),
    ]);
    // Small integers, some zero: the same values as f64, as i64 and stored sparsely.
    let values: Vec<f64> = (0..20).map(|k| ((k * 7) % 5) as f64 - 1.0).collect();
    let dense = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0.0)))"),
        &[4, 5],
        &Buffer::F64(values.clone().into()),
    )
    .unwrap();
    let ints: Vec<i64> = values.iter().map(|v| *v as i64).collect();
    let as_int = Tensor::from_dense(
        &fmt("Dense(Dense(Element(0)))"),
        &[4, 5],
        &Buffer::I64(ints.into()),
    )
    .unwrap();
    let sparse = Tensor::from_dense(
        &fmt("Dense(SparseList(Element(0.0)))"),
        &[4, 5],
        &Buffer::F64(values.into()),
    )
    .unwrap();
    let wrt = ["S", "U", "V"];
    let opts = BackwardOptions::default();
    for (backend, runner) in backends() {
        let run = |seed: &Tensor| {
            let (gp, out) = backward(
                &p,
                &ts,
                &wrt,
                named(vec![("C", seed.clone())]),
                &opts,
                runner.as_ref(),
            )
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
            gp.gradients
                .iter()
                .map(|(_, d)| dense_values(&out[d]))
                .collect::<Vec<_>>()
        };
        let want = run(&dense);
        assert_eq!(run(&as_int), want, "{backend}: i64 seed");
        assert_eq!(run(&sparse), want, "{backend}: sparse seed");
    }
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
    // Float inputs densely (integer index tensors as they are).
    let dense_inputs: Tensors = inputs
        .iter()
        .map(|(n, t)| match t.to_dense() {
            Buffer::F64(v) => (n.clone(), as_dense(t, v.into_vec())),
            _ => (n.clone(), t.clone()),
        })
        .collect();
    let eps = 1e-6;
    let base_loss = loss(&fd_runner, &p, &dense_inputs, seeds, loss_name);
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
                // rtol 1e-6, plus the differences' rounding error: a few ulps of the loss
                // divided by 2 eps (5.5e-11 |loss|; 1e-9 |loss| leaves a margin).
                let tol = 1e-6 * fd.abs().max(gv[k].abs()).max(1.0) + 1e-9 * base_loss.abs();
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

/// `vectorize(j)` on the SpMV loss over sparse levels: the forward walks each row's stored
/// entries in lanes; the backward loop scatters into `dx[j]` (and `dA`) at the walked
/// coordinate, which lanes cannot do, so it runs serially, and every gradient still matches
/// finite differences on every backend.
#[test]
fn vectorised_sparse_rows_differentiate() {
    let text = tessera::transforms::schedule::schedule(&parse(SPMV_LOSS), "vectorize(j)")
        .unwrap()
        .to_string();
    assert!(text.contains("vectorize("), "{text}");
    let mut rng = StdRng::seed_from_u64(48);
    for (format, keep) in [
        (
            "Dense(SparseList(Element(0.0)))",
            some as fn(&[usize], &mut StdRng) -> bool,
        ),
        ("Dense(SparseList(Element(0.0), coord=i32))", some),
        ("Dense(SparseBand(Element(0.0)))", band),
    ] {
        let a = tensor(&mut rng, format, &[5, 9], &keep);
        let x = tensor(&mut rng, "Dense(Element(0.0))", &[9], &all);
        let ts = named(vec![("A", a), ("x", x)]);
        check(&text, &ts, &["A", "x"], &BTreeMap::new(), "s");
    }
}

/// User reducers that declare the derivative of their result in one element (issue 16's
/// "user reducers where they declare a derivative"): a log-sum-exp (`exp(x - r)`), a
/// product (`r / x`) and a maximum as a select, into 0-d and row outputs, on dense and
/// sparse inputs (masked gradients), against finite differences on every backend. Without
/// `derivative(...)` the reducer is refused with its place.
#[test]
fn user_reducers_with_a_declared_derivative() {
    let text = "reducer lse(r, x) = log(exp(r) + exp(x)) identity -Inf commutative associative derivative(exp(x - r))
reducer prod(r, x) = r * x identity 1.0 commutative associative derivative(r / x)
reducer big(r, x) = max(r, x) identity -Inf commutative associative idempotent derivative(ifelse(x == r, 1.0, 0.0))
m .= -Inf
for i = _, j = _
  m[i] <<lse>>= A[i, j] * x[j]
end
p .= 1.0
for j = _
  p[] <<prod>>= x[j] + 2.0
end
b .= -Inf
for i = _, j = _
  b[] <<big>>= A[i, j] - x[j]
end
s .= 0.0
for i = _
  s[] += m[i] * m[i]
end
s[] += p[] + 3.0 * b[]
";
    let mut rng = StdRng::seed_from_u64(41);
    for format in [
        "Dense(Dense(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
    ] {
        let keep: fn(&[usize], &mut StdRng) -> bool =
            if format.contains("Sparse") { some } else { all };
        let ts = named(vec![
            ("A", small(tensor(&mut rng, format, &[3, 4], &keep))),
            ("x", small(vector(&mut rng, "Dense(Element(0.0))", 4))),
        ]);
        check(text, &ts, &["A", "x"], &BTreeMap::new(), "s");
    }
    let refused = text.replace(" derivative(r / x)", "");
    let e = tessera::transforms::grad::grad(&parse(&refused), &["x"], &[]).unwrap_err();
    assert!(
        e.to_string().contains("`<<prod>>=` has no derivative")
            && e.to_string().starts_with("10:3"),
        "{e}"
    );
}

/// The gradient with respect to a sparse vector read inside a loop it is not indexed by
/// (`x[j]` in `for i, j` of SpMV): the backward pass writes `dx[j]` once per row, an order
/// an in-order level cannot take, so the gradient is accumulated in `SparseDict` levels and
/// converted into `x`'s structure after the run (it failed as an out-of-order write on the
/// compiled backends). Also a matrix read transposed (`A[j, i]` in `for i, j`).
#[test]
fn gradients_written_out_of_their_order_keep_the_inputs_structure() {
    let text = "y .= 0.0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\ns .= 0.0\nfor i = _\n  s[] += y[i] * y[i]\nend\n";
    let mut rng = StdRng::seed_from_u64(31);
    for format in [
        "SparseList(Element(0.0))",
        "SparseBand(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
    ] {
        let ts = named(vec![
            (
                "A",
                tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[3, 5], &all),
            ),
            ("x", vector(&mut rng, format, 5)),
        ]);
        check(text, &ts, &["A", "x"], &BTreeMap::new(), "s");
        for (backend, runner) in backends() {
            let opts = BackwardOptions::default();
            let (gp, got) = backward(
                &parse(text),
                &ts,
                &["x"],
                BTreeMap::new(),
                &opts,
                runner.as_ref(),
            )
            .unwrap();
            let dx = &got[&gp.gradients[0].1];
            assert_eq!(dx.format, fmt(format), "{backend}: {format}");
        }
    }
    let transposed = "y .= 0.0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\ns .= 0.0\nfor i = _\n  s[] += y[i] * y[i]\nend\n";
    let ts = named(vec![
        (
            "A",
            tensor(&mut rng, "Dense(SparseList(Element(0.0)))", &[4, 3], &some),
        ),
        ("x", vector(&mut rng, "Dense(Element(0.0))", 4)),
    ]);
    check(transposed, &ts, &["A", "x"], &BTreeMap::new(), "s");
    // A write by a protocol (`follow(k)`: a lookup) next to an appending one (fuzz-found:
    // `SparseBlockList` refused the pair on the compiled backends).
    let protocols = "s .= 0.0\nfor k = _\n  s[] += z[k]\n  s[] += exp(0.0 - z[follow(k)])\nend\n";
    for format in ["SparseBlockList(Element(0.0))", "SparseList(Element(0.0))"] {
        let ts = named(vec![("z", vector(&mut rng, format, 6))]);
        check(protocols, &ts, &["z"], &BTreeMap::new(), "s");
    }
}

fn vector(rng: &mut StdRng, format: &str, n: usize) -> Tensor {
    let keep: &dyn Fn(&[usize], &mut StdRng) -> bool = if format.starts_with("Dense") {
        &all
    } else {
        &some
    };
    tensor(rng, format, &[n], keep)
}

/// Values divided by 4, so that `exp` of sums of squares stays small and the finite
/// differences' rounding error (relative to the loss) stays below the tolerance.
fn small(t: Tensor) -> Tensor {
    let v = dense_values(&t).iter().map(|x| x / 4.0).collect();
    Tensor::from_dense(&t.format, &t.shape, &Buffer::F64(v)).unwrap()
}

fn seed(rng: &mut StdRng, shape: &[usize]) -> Tensor {
    tensor(
        rng,
        &Format::dense(shape.len(), tessera::types::Scalar::F64(0.0)).to_string(),
        shape,
        &all,
    )
}

#[test]
fn sddmm_with_a_seed() {
    let text = "C .= 0.0
for i = _, j = _, k = _
  C[i, j] += S[i, j] * U[i, k] * V[j, k]
end
";
    let mut rng = StdRng::seed_from_u64(2);
    for format in [
        "Dense(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
    ] {
        let ts = named(vec![
            ("S", tensor(&mut rng, format, &[4, 5], &some)),
            (
                "U",
                tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[4, 3], &all),
            ),
            (
                "V",
                tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[5, 3], &all),
            ),
        ]);
        let seeds = named(vec![("C", seed(&mut rng, &[4, 5]))]);
        check(text, &ts, &["S", "U", "V"], &seeds, "");
    }
}

/// The loss of `text` on vectors `a`, `c` (dense) and `b` (in `format`) of 7 values in
/// `[0.5, 1.5)`, positive everywhere (a run-length or sparse `b` is stored dense), checked
/// against finite differences on every backend.
fn check_pointwise(text: &str, formats: [&str; 2], seed_value: u64) {
    let mut rng = StdRng::seed_from_u64(seed_value);
    for format in formats {
        let ts = named(vec![
            ("a", vector(&mut rng, "Dense(Element(0.0))", 7)),
            ("b", vector(&mut rng, format, 7)),
            ("c", vector(&mut rng, "Dense(Element(0.0))", 7)),
        ]);
        let ts: Tensors = ts
            .into_iter()
            .map(|(n, t)| {
                let v: Vec<f64> = dense_values(&t).iter().map(|x| x + 0.5).collect();
                let f = t.format.clone();
                (
                    n,
                    Tensor::from_dense(&f, &t.shape, &Buffer::F64(v.into())).unwrap(),
                )
            })
            .collect();
        let seeds = named(vec![("y", seed(&mut rng, &[7]))]);
        check(text, &ts, &["a", "b", "c"], &seeds, "");
    }
}

#[test]
fn elementwise_functions_and_masks() {
    // log, / and sqrt see no 0.
    let text = "y .= 0.0
for i = _
  y[i] = min(a[i], b[i]) + max(a[i], 1.0) * abs(b[i] - 1.2) + exp(a[i]) * log(c[i]) + sqrt(c[i]) / b[i] - ifelse(a[i] > b[i], a[i] * b[i], -a[i])
end
";
    check_pointwise(text, ["Dense(Element(0.0))", "RunList(Element(0.0))"], 3);
}

#[test]
fn the_float_functions_have_their_derivatives() {
    // Arguments kept inside each function's domain (|x| < 1 for asin and atanh, > 1 for
    // acosh, > -1 for log1p, > 0 for pow's base and the logarithms); `round`, `ceil` and
    // `trunc` are piecewise constant (derivative 0 where the finite difference does not
    // cross a step, which these values do not).
    let text = "y .= 0.0
for i = _
  y[i] = sin(a[i]) * cos(b[i]) + tan(0.5 * a[i]) + asin(0.5 * tanh(a[i])) + acos(0.25 * b[i] / c[i]) + atan(a[i] * b[i]) + sinh(0.5 * a[i]) - cosh(0.3 * b[i]) + asinh(a[i] - b[i]) + acosh(1.5 + c[i] * c[i]) + atanh(0.5 * sin(b[i])) + expm1(0.5 * a[i]) + log1p(c[i]) * log2(c[i] + 1.0) - log10(b[i] + 2.0) + pow(c[i], b[i]) + atan2(a[i], c[i]) + hypot(a[i], b[i]) + round(10.0 * c[i]) + ceil(3.0 * a[i]) * trunc(7.0 * b[i])
end
";
    check_pointwise(
        text,
        ["Dense(Element(0.0))", "SparseList(Element(0.0))"],
        31,
    );
}

#[test]
fn floored_remainder_copysign_logaddexp_and_nextafter_have_their_derivatives() {
    // `mod(a, b) = a - b * fld(a, b)`: derivatives 1 and `-fld(a, b)` between the steps (the
    // values here stay off them); `fld`, `signbit` and the sign source of `copysign` are
    // piecewise constant; `nextafter` moves `a` by one unit in the last place.
    let text = "y .= 0.0
for i = _
  y[i] = mod(3.0 * a[i], c[i] + 0.25) * b[i] + copysign(a[i] * b[i], b[i] - 0.7) + logaddexp(a[i], 2.0 * b[i]) * c[i] + nextafter(a[i] * c[i], 0.0) + fld(5.0 * a[i], c[i] + 0.25) * b[i] + ifelse(signbit(b[i] - 0.7), a[i], c[i])
end
";
    check_pointwise(
        text,
        ["Dense(Element(0.0))", "SparseList(Element(0.0))"],
        37,
    );
}

#[test]
fn let_variables_and_two_outputs() {
    let text = "y .= 0.0
z .= 0.0
for i = _
  let t = a[i] * b[i] + 1.0
    y[i] = t * t + a[i]
    z[i] = t / b[i]
  end
end
";
    let mut rng = StdRng::seed_from_u64(4);
    let ts = named(vec![
        ("a", vector(&mut rng, "Dense(Element(0.0))", 6)),
        ("b", vector(&mut rng, "Dense(Element(0.0))", 6)),
    ]);
    let seeds = named(vec![
        ("y", seed(&mut rng, &[6])),
        ("z", seed(&mut rng, &[6])),
    ]);
    check(text, &ts, &["a", "b"], &seeds, "");
}

/// FreeTensor's Fig. 15: `t` is recomputed under the default and taped (one entry per `i`)
/// when everything is taped; both give the same gradients.
const FIG15: &str = "y .= 0.0
z .= 0.0
for i = _
  t .= 0.0
  t[] = a[i] * b[i]
  y[i] = t * c[i]
  z[i] = t * d[i]
end
";

#[test]
fn fig15_recomputes_t_by_default_and_tapes_it_under_all() {
    let p = parse(FIG15);
    let auto = grad(&p, &["a", "b", "c", "d"], &["y", "z"]).unwrap();
    assert!(auto.tapes.is_empty(), "{}", auto.program);
    let opts = GradOptions {
        tapes: Tapes::All,
        masked: vec![],
    };
    let all = grad_with(&p, &["a", "b", "c", "d"], &["y", "z"], &opts).unwrap();
    assert_eq!(all.tapes.len(), 1, "{}", all.program);
    assert_eq!((all.tapes[0].local.as_str(), all.tapes[0].rank), ("t", 1));
    let mut rng = StdRng::seed_from_u64(15);
    let ts: Tensors = ["a", "b", "c", "d"]
        .iter()
        .map(|n| (n.to_string(), vector(&mut rng, "Dense(Element(0.0))", 5)))
        .collect();
    let seeds = named(vec![
        ("y", seed(&mut rng, &[5])),
        ("z", seed(&mut rng, &[5])),
    ]);
    for tapes in [Tapes::Auto, Tapes::All, Tapes::None] {
        let opts = BackwardOptions {
            tapes,
            ..Default::default()
        };
        check_with(FIG15, &ts, &["a", "b", "c", "d"], &seeds, "", &opts);
    }
}

/// A local recomputed by a loop (a row's dot product) is taped by default, in a tape sized
/// by the rows; inner-loop locals of a CSR matrix get tapes sized by its stored entries.
#[test]
fn locals_overwritten_on_every_iteration_are_taped_or_recomputed() {
    let text = "y .= 0.0
for i = _
  s .= 0.0
  for j = _
    w .= 0.0
    w[] = A[i, j] * x[j]
    s[] += w * w
  end
  y[i] = exp(s) + s * s
end
l .= 0.0
for i = _
  l[] += y[i]
end
";
    let p = parse(text);
    let gp = grad(&p, &["A", "x"], &[]).unwrap();
    let taped: Vec<(&str, usize)> = gp
        .tapes
        .iter()
        .map(|t| (t.local.as_str(), t.rank))
        .collect();
    assert_eq!(taped, [("s", 1)], "{}", gp.program);
    let mut rng = StdRng::seed_from_u64(5);
    for tapes in [Tapes::Auto, Tapes::All, Tapes::None] {
        let ts = named(vec![
            (
                "A",
                tensor(&mut rng, "Dense(SparseList(Element(0.0)))", &[4, 5], &some),
            ),
            ("x", small(vector(&mut rng, "Dense(Element(0.0))", 5))),
        ]);
        let opts = BackwardOptions {
            tapes,
            ..Default::default()
        };
        check_with(text, &ts, &["A", "x"], &BTreeMap::new(), "l", &opts);
        if tapes == Tapes::All {
            // w's tape holds one entry per stored entry of A, not the dense 4 x 5.
            let (gp, got) = backward(
                &p,
                &ts,
                &["A", "x"],
                BTreeMap::new(),
                &opts,
                Some(&Runner::jit()),
            )
            .unwrap();
            let w = gp.tapes.iter().find(|t| t.local == "w").unwrap();
            assert_eq!(got[&w.name].countstored(), ts["A"].countstored());
        }
    }
}

/// `<<max>>=` and `<<min>>=` pass the cotangent to the selected element (every element equal
/// to the result: with distinct values, exactly one).
#[test]
fn min_and_max_reductions_select_one_element() {
    let text = "m .= -Inf
n .= Inf
for i = _
  m[] <<max>>= a[i] * b[i]
  n[] <<min>>= a[i] + b[i]
end
l .= 0.0
l[] = m * 2.0 + n
";
    let mut rng = StdRng::seed_from_u64(6);
    for format in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
        let ts = named(vec![
            ("a", vector(&mut rng, "Dense(Element(0.0))", 6)),
            ("b", vector(&mut rng, format, 6)),
        ]);
        check(text, &ts, &["a", "b"], &BTreeMap::new(), "l");
    }
}

/// The gradient of SpMV's loss w.r.t. a CSR `A` stores exactly `A`'s pattern, explicitly
/// stored zeros included, where the dense gradient stores every coordinate.
#[test]
fn masked_gradient_keeps_the_pattern_of_a_csr_matrix() {
    let a = Tensor::from_coo(
        &fmt("Dense(SparseList(Element(0.0)))"),
        &[3, 3],
        &[vec![0, 0, 1, 2], vec![0, 2, 1, 0]],
        &Buffer::F64(vec![1.0, 0.0, 2.0, 3.0].into()),
        |a, _| a,
    )
    .unwrap();
    let x = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[3],
        &Buffer::F64(vec![1.0, 0.0, 2.0].into()),
    )
    .unwrap();
    let ts = named(vec![("A", a.clone()), ("x", x)]);
    let p = parse(SPMV_LOSS);
    let (gp, got) = backward(
        &p,
        &ts,
        &["A"],
        BTreeMap::new(),
        &BackwardOptions::default(),
        Some(&Runner::jit()),
    )
    .unwrap();
    let da = &got[&gp.gradients[0].1];
    assert_eq!(da.format, a.format);
    assert_eq!(da.levels[1], a.levels[1], "ptr and idx of dA and A");
    // dA[i, j] = 2 y[i] x[j] at A's entries: y = [1, 0, 3].
    assert_eq!(
        dense_values(da),
        [2.0, 0.0, 4.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0]
    );
    let dense = BackwardOptions {
        dense: true,
        ..Default::default()
    };
    let (gp, got) = backward(
        &p,
        &ts,
        &["A"],
        BTreeMap::new(),
        &dense,
        Some(&Runner::jit()),
    )
    .unwrap();
    let da = &got[&gp.gradients[0].1];
    assert!(da.format.is_dense());
    assert_eq!(
        dense_values(da),
        [2.0, 0.0, 4.0, 0.0, 0.0, 0.0, 6.0, 0.0, 12.0]
    );
}

#[test]
fn gradient_programs_print_and_parse_back() {
    let p = parse(FIG15);
    let gp = grad_with(
        &p,
        &["a", "b", "c", "d"],
        &["y", "z"],
        &GradOptions {
            tapes: Tapes::All,
            masked: vec!["a".into()],
        },
    )
    .unwrap();
    let text = gp.program.to_string();
    assert_eq!(parse(&text), gp.program, "{text}");
    for want in [
        "t_tape[i] = a[i] * b[i]",
        "t[] = t_tape[i]",
        "if a_mask[i]",
        "da[i] += ",
        "da .= 0.0",
        "dc[i] += seed_y[i] * t",
    ] {
        assert!(text.contains(want), "`{want}` missing in\n{text}");
    }
}

/// Constructs without a derivative, and values `grad` would need two versions of in one
/// body, are typed errors naming their line and column.
#[test]
fn refusals_name_their_place() {
    let cases = [
        (
            "p .= 1.0\nfor i = _\n  p[] *= a[i]\nend\n",
            "3:3",
            "no derivative",
        ),
        (
            "reducer sat(u, v) = min(u + v, 9.0)\ns .= 0.0\nfor i = _\n  s[] <<sat>>= a[i]\nend\n",
            "4:3",
            "no derivative",
        ),
        (
            "s .= 0.0\nfor i = _\n  s[] += a[i] % 2.0\nend\n",
            "3:10",
            "no derivative",
        ),
        (
            "s .= 0.0\nfor i = _\n  s[] = a[i]\nend\n",
            "3:3",
            "only the last write",
        ),
        (
            "s .= 0.0\nfor i = _\n  t .= 0.0\n  t[] = a[i]\n  s[] += t\n  t[] = a[i] * 2.0\n  s[] += t\nend\n",
            "6:3",
            "written again",
        ),
    ];
    for (text, place, what) in cases {
        let e = grad(&parse(text), &["a"], &[]).unwrap_err().to_string();
        assert!(e.starts_with(place) && e.contains(what), "{e}\n{text}");
    }
    let e = grad(&parse(SPMV_LOSS), &["y"], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("only inputs"), "{e}");
}

/// `tessera grad`: the loss's gradient w.r.t. a CSR matrix keeps its pattern (the stored
/// zero included), `--dense` gives every coordinate, the printed gradient program compiles
/// with `tessera code` (the mask is the matrix file read with a Pattern leaf), and mistakes
/// are usage errors.
#[test]
fn grad_command() {
    use common::cli::{Dir, ok, tessera};
    let d = Dir::new("grad");
    let a = d.file(
        "A.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.0\n1 3 0.0\n2 2 2.0\n3 1 3.0\n",
    );
    let x = d.file("x.tns", "1 1.0\n2 0.0\n3 2.0\n");
    let p = d.file("loss.tess", SPMV_LOSS);
    let (da, dx) = (d.path("dA.mtx"), d.path("dx.tns"));
    let out = ok(&[
        "grad",
        &p,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("x={x}@Dense(Element(0.0))"),
        "--wrt",
        "A,x",
        "--out",
        &format!("dA={da}"),
        "--out",
        &format!("dx={dx}"),
        "--out",
        "s",
        "--show-program",
    ]);
    assert!(out.ends_with("s = 10.0\n"), "{out}");
    let text: String = out
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains("if A_mask[i, j]"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&da).unwrap(),
        "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n1 3 4\n2 2 0\n3 1 6\n"
    );
    assert_eq!(
        std::fs::read_to_string(&dx).unwrap(),
        "# shape: 3\n1 20.0\n"
    );
    let g = d.file("grad.tess", &text);
    let code = ok(&[
        "code",
        &g,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("A_mask={a}@Dense(SparseList(Pattern()))"),
        "--in",
        &format!("x={x}@Dense(Element(0.0))"),
        "--out",
        "dA@Dense(SparseList(Element(0.0)))",
    ]);
    assert!(code.contains("dA"), "{code}");
    let dense = d.path("dense.mtx");
    ok(&[
        "grad",
        &p,
        "--in",
        &format!("A={a}"),
        "--in",
        &format!("x={x}@Dense(Element(0.0))"),
        "--wrt",
        "A",
        "--dense",
        "--backend",
        "eval",
        "--out",
        &format!("dA={dense}"),
    ]);
    let dense = std::fs::read_to_string(&dense).unwrap();
    assert!(dense.contains("array"), "{dense}");
    let bad = tessera(&["grad", &p, "--in", &format!("A={a}"), "--wrt", "y"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--wrt y"));
}

mod random_programs {
    //! Random smooth programs (a loss over an SpMV-like nest, with a loop-body local or a
    //! `let`), random formats of the matrix and random tape modes, checked as above.
    use super::*;
    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("A[i, j]".to_string()),
            Just("x[j]".to_string()),
            Just("b[i]".to_string()),
            Just("1.5".to_string()),
        ]
    }

    fn expr() -> impl Strategy<Value = String> {
        leaf().prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} + {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} - {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} * {b})")),
                inner.clone().prop_map(|a| format!("exp(0.25 * {a})")),
                inner.clone().prop_map(|a| format!("sqrt({a} * {a} + 1.0)")),
                inner.clone().prop_map(|a| format!("log({a} * {a} + 1.0)")),
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| format!("{a} / ({b} * {b} + 1.0)")),
                (inner.clone(), inner).prop_map(|(a, b)| format!("ifelse(b[i] > 1.0, {a}, {b})")),
            ]
        })
    }

    /// A program whose loss `s` sums the squares of `y`.
    fn program() -> impl Strategy<Value = String> {
        let nest = (expr(), expr(), 0..3usize).prop_map(|(e, f, shape)| match shape {
            0 => format!("for i = _, j = _\n  y[i] += A[i, j] * x[j] + {e}\nend\n"),
            1 => format!(
                "for i = _\n  t .= 0.0\n  for j = _\n    t[] += A[i, j] * {e}\n  end\n  y[i] = t * t + exp(0.1 * t) * b[i]\nend\n"
            ),
            _ => format!(
                "for i = _, j = _\n  let u = A[i, j] + {e}\n    y[i] += u * x[j] * {f}\n  end\nend\n"
            ),
        });
        nest.prop_map(|n| format!("y .= 0.0\n{n}s .= 0.0\nfor i = _\n  s[] += y[i] * y[i]\nend\n"))
    }

    const FORMATS: [&str; 5] = [
        "Dense(Dense(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(RunList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
    ];

    proptest! {
        #![proptest_config(common::cases::config("grad_random_programs", 12))]
        #[test]
        fn gradients_of_random_programs(
            text in program(),
            format in 0..FORMATS.len(),
            tapes in prop_oneof![Just(Tapes::Auto), Just(Tapes::All), Just(Tapes::None)],
            seed in any::<u64>(),
        ) {
            let mut rng = StdRng::seed_from_u64(seed);
            let keep: fn(&[usize], &mut StdRng) -> bool = match format {
                0 => all,
                4 => band,
                _ => some,
            };
            let ts = named(vec![
                ("A", small(tensor(&mut rng, FORMATS[format], &[3, 4], &keep))),
                ("x", small(vector(&mut rng, "Dense(Element(0.0))", 4))),
                ("b", vector(&mut rng, "Dense(Element(0.0))", 3)),
            ]);
            let opts = BackwardOptions { tapes, ..Default::default() };
            // Differentiate the inputs the program reads (`grad` refuses the others).
            let wrt: Vec<&str> = ["A", "x", "b"]
                .into_iter()
                .filter(|n| text.contains(&format!("{n}[")))
                .collect();
            check_with(&text, &ts, &wrt, &BTreeMap::new(), "s", &opts);
        }
    }
}

/// FreeTensor's Longformer workload (examples/longformer.tess): attention over a band, the
/// scores in a `SparseBand` output; gradients with respect to Q, K and V.
#[test]
fn longformer_attention_on_a_band() {
    let text = include_str!("../examples/longformer.tess");
    let mut rng = StdRng::seed_from_u64(16);
    let (n, d) = (7, 3);
    let window = |c: &[usize], _: &mut StdRng| c[0].abs_diff(c[1]) <= 2;
    let band_format = "Dense(SparseBand(Element(0.0)))";
    let mut ts = named(vec![
        ("B", tensor(&mut rng, band_format, &[n, n], &window)),
        ("S", Tensor::empty(&fmt(band_format), &[n, n]).unwrap()),
    ]);
    for name in ["Q", "K", "V"] {
        let t = tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[n, d], &all);
        ts.insert(name.into(), t);
    }
    let seeds = named(vec![("O", seed(&mut rng, &[n, d]))]);
    check(text, &ts, &["Q", "K", "V"], &seeds, "");
}

/// FreeTensor's GAT workload (examples/gat.tess): a graph-attention layer over a CSR graph,
/// gradients with respect to the features, the weights and the attention vectors. The backward
/// loops must visit the graph's edges only: a quotient or an `ifelse` in a derivative must not
/// turn the sparse loop over `j` into a dense one (`0 / z` is not zero; `ifelse(c, 0, 0)` is).
#[test]
fn gat_layer_gradients_visit_only_the_edges() {
    let text = include_str!("../examples/gat.tess");
    let mut rng = StdRng::seed_from_u64(32);
    let (n, f_in, f) = (6, 3, 2);
    let edges = |c: &[usize], rng: &mut StdRng| c[0] == c[1] || rng.random_bool(0.3);
    let mut ts = named(vec![(
        "A",
        tensor(&mut rng, "Dense(SparseList(Element(0.0)))", &[n, n], &edges),
    )]);
    for (name, shape) in [
        ("X", vec![n, f_in]),
        ("W", vec![f_in, f]),
        ("a1", vec![f]),
        ("a2", vec![f]),
    ] {
        let format = if shape.len() == 2 {
            "Dense(Dense(Element(0.0)))"
        } else {
            "Dense(Element(0.0))"
        };
        let t = small(tensor(&mut rng, format, &shape, &all));
        ts.insert(name.into(), t);
    }
    let seeds = named(vec![("O", seed(&mut rng, &[n, f]))]);
    check(text, &ts, &["X", "W", "a1", "a2"], &seeds, "");

    let gp = grad(&parse(text), &["X", "W", "a1", "a2"], &["O"]).unwrap();
    // The backward sums over `f` share one partial sum per edge (`transforms::grad::partial`),
    // stored like A: one entry per visited `(i, j)`.
    assert_eq!(gp.partials.len(), 1, "{}", gp.program);
    let mut all = ts.clone();
    tessera::api::grad::bind(&gp, &mut all, seeds, &BTreeMap::new()).unwrap();
    assert_eq!(
        all[&gp.partials[0].name].format.to_string(),
        "Dense(SparseList(Element(0.0)))"
    );
    let (kernel, _, _) = Runner::lower(&gp.program, &common::formats_of(&all)).unwrap();
    let ir = kernel.to_string();
    assert!(
        !ir.contains("for (j") && !ir.contains("while"),
        "a loop over j that is not a walk over A's entries:\n{ir}"
    );
}

/// A sum over `f` whose factor `exp(c[i])` does not change with `f` is differentiated into a
/// partial sum per `i` (`transforms::grad::partial`), on dense and sparse `x` (whose partial
/// sum is then stored only where a row of `x` has entries), on every backend, equal to the
/// finite differences.
#[test]
fn partial_sums_take_invariant_factors_out_of_inner_sums() {
    let text = "y .= 0.0
z .= 0.0
for i = _, f = _
  y[i] += x[i, f] * exp(c[i])
  z[i] += x[i, f] * sqrt(c[i])
end";
    let mut rng = StdRng::seed_from_u64(17);
    for (format, keep) in [
        (
            "Dense(Dense(Element(0.0)))",
            all as fn(&[usize], &mut StdRng) -> bool,
        ),
        ("Dense(SparseList(Element(0.0)))", some),
        ("SparseList(SparseList(Element(0.0)))", some),
    ] {
        let x = small(tensor(&mut rng, format, &[5, 4], &keep));
        let c = small(tensor(&mut rng, "Dense(Element(0.0))", &[5], &all));
        let ts = named(vec![("x", x), ("c", c)]);
        let seeds = named(vec![
            ("y", seed(&mut rng, &[5])),
            ("z", seed(&mut rng, &[5])),
        ]);
        check(text, &ts, &["x", "c"], &seeds, "");
        let gp = grad(&parse(text), &["x", "c"], &["y", "z"]).unwrap();
        let printed = gp.program.to_string();
        assert_eq!(gp.partials.len(), 2, "{printed}");
        assert!(
            printed.contains("dc[i] += p_1[i] * exp(c[i])")
                && printed.contains("dc[i] += p[i] * (1.0 / (2.0 * sqrt(c[i])))"),
            "{printed}"
        );
    }
}

/// The face adjacency of a torus grid of `a` x `b` quads cut into two triangles each
/// (examples/subdivnet.rs's rule): the faces across each triangle's three edges, in order.
/// The inputs SubdivNet differentiates.
const SUBDIVNET_WRT: [&str; 5] = ["x", "w0", "w1", "w2", "w3"];

/// SubdivNet's inputs on an `a` x `b` torus grid (`2 a b` faces) with `f_in` -> `f` features,
/// from `seed`, and the seed `y` of its output's cotangent.
fn subdivnet_inputs(
    seed_value: u64,
    (a, b): (usize, usize),
    f_in: usize,
    f: usize,
) -> (Tensors, Tensors) {
    let mut rng = StdRng::seed_from_u64(seed_value);
    let n = 2 * a * b;
    let ints = Format::dense(2, tessera::types::Scalar::I64(0));
    let adj =
        Tensor::from_dense(&ints, &[n, 3], &Buffer::I64(torus_adjacency(a, b).into())).unwrap();
    let mut ts = named(vec![("adj", adj)]);
    ts.insert(
        "x".into(),
        tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[n, f_in], &all),
    );
    for w in &SUBDIVNET_WRT[1..] {
        let t = tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[f_in, f], &all);
        ts.insert(w.to_string(), t);
    }
    let seeds = named(vec![("y", seed(&mut rng, &[n, f]))]);
    (ts, seeds)
}

fn torus_adjacency(a: usize, b: usize) -> Vec<i64> {
    let face = |p: usize, q: usize, t: usize| (2 * (((p + a) % a) * b + (q + b) % b) + t) as i64;
    let mut adj = vec![];
    for p in 0..a {
        for q in 0..b {
            adj.extend([face(p, q + b - 1, 1), face(p + 1, q, 1), face(p, q, 1)]);
            adj.extend([face(p, q, 0), face(p, q + 1, 0), face(p + a - 1, q, 0)]);
        }
    }
    adj
}

/// FreeTensor's SubdivNet workload (examples/subdivnet.tess) on an 18-face torus: gathers
/// through an integer adjacency (`x[adj[i, j], f]`, also at `(j + 1) % 3`) whose gradients are
/// scatters into `dx`, `abs`, and taped per-face sums. The loops the tapes are indexed by walk
/// no sparse level, so the tapes are dense: `SparseList` tapes read back in a dense loop
/// multiplied the gradient kernel into 12,500 statements.
#[test]
fn subdivnet_mesh_convolution_scatters_into_the_gathered_faces() {
    let text = include_str!("../examples/subdivnet.tess");
    let (ts, seeds) = subdivnet_inputs(12, (3, 3), 2, 3);
    let wrt = SUBDIVNET_WRT;
    check(text, &ts, &wrt, &seeds, "");

    let opts = BackwardOptions::default();
    let (gp, got) = backward(&parse(text), &ts, &wrt, seeds, &opts, Some(&Runner::jit())).unwrap();
    assert_eq!(gp.tapes.len(), 3, "{}", gp.program);
    for t in &gp.tapes {
        assert!(
            got[&t.name].format.is_dense(),
            "{}: {}",
            t.name,
            got[&t.name].format
        );
    }
    let (kernel, _, _) = Runner::lower(&gp.program, &common::formats_of(&got)).unwrap();
    let lines = kernel.to_string().lines().count();
    assert!(lines < 2000, "the gradient kernel has {lines} lines");
}

/// A schedule on the forward program carries into the gradient: `vectorize(o)` on SubdivNet
/// leaves its backward loop over `o` vectorised too (C then runs its folds as `omp simd`
/// reductions, reassociated), and every gradient still matches finite differences on every
/// backend. A loop whose backward cannot run in lanes loses the mark instead: the adjoint of
/// the gather `x[idx[o]]` is the scatter `dx[idx[o]] += ...`, whose lanes could meet.
#[test]
fn vectorised_loops_keep_their_mark_in_the_gradient_where_lanes_allow() {
    let text = tessera::transforms::schedule::schedule(
        &parse(include_str!("../examples/subdivnet.tess")),
        "vectorize(o)",
    )
    .unwrap()
    .to_string();
    let (ts, seeds) = subdivnet_inputs(13, (3, 4), 3, 5);
    let wrt = SUBDIVNET_WRT;
    let gp = grad(&parse(&text), &wrt, &["y"]).unwrap();
    let printed = gp.program.to_string();
    assert_eq!(
        printed.matches("for o = vectorize(").count(),
        2,
        "{printed}"
    );
    check(&text, &ts, &wrt, &seeds, "");

    let gather = "for o = vectorize(_)\n  y[o] += x[idx[o]] * x[idx[o]]\nend\n";
    let gp = grad(&parse(gather), &["x"], &["y"]).unwrap();
    let printed = gp.program.to_string();
    assert_eq!(printed.matches("vectorize(").count(), 1, "{printed}");
    let idx = Tensor::from_dense(
        &Format::dense(1, tessera::types::Scalar::I64(0)),
        &[7],
        &Buffer::I64(vec![0, 2, 2, 4, 1, 0, 2].into()),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(14);
    let mut ts = named(vec![("idx", idx)]);
    ts.insert(
        "x".into(),
        tensor(&mut rng, "Dense(Element(0.0))", &[5], &all),
    );
    let seeds = named(vec![("y", seed(&mut rng, &[7]))]);
    check(gather, &ts, &["x"], &seeds, "");
}

/// FreeTensor's SoftRas workload (examples/softras.tess) on four triangles and a 6 x 6
/// image: `let` chains, clamps (`min`/`max`), a `min` of three distances, an `ifelse` on the
/// inside test, `exp`, and gathers of the vertices through the face index tensor, whose
/// gradients are scatters into `dV`. The contributions' repeated masks are bound once (`let g`).
#[test]
fn softras_rasteriser_scatters_into_the_vertices() {
    let text = include_str!("../examples/softras.tess");
    let mut rng = StdRng::seed_from_u64(64);
    let size = 6;
    let v: Vec<f64> = (0..12).map(|_| rng.random_range(-0.8..0.8)).collect();
    let faces = vec![0, 1, 2, 2, 3, 4, 1, 4, 5, 0, 5, 3];
    let centres: Vec<f64> = (0..size)
        .map(|w| (w as f64 + 0.5) * 2.0 / size as f64 - 1.0)
        .collect();
    let ints = Format::dense(2, tessera::types::Scalar::I64(0));
    let dense = |shape: &[usize], values: Vec<f64>| {
        let f = Format::dense(shape.len(), tessera::types::Scalar::F64(0.0));
        Tensor::from_dense(&f, shape, &Buffer::F64(values.into())).unwrap()
    };
    let ts = named(vec![
        ("V", dense(&[6, 2], v)),
        (
            "F",
            Tensor::from_dense(&ints, &[4, 3], &Buffer::I64(faces.into())).unwrap(),
        ),
        ("X", dense(&[size], centres.clone())),
        ("Y", dense(&[size], centres)),
        ("sigma", dense(&[], vec![0.02])),
    ]);
    let seeds = named(vec![("P", seed(&mut rng, &[4, size, size]))]);
    check(text, &ts, &["V"], &seeds, "");
    let gp = grad(&parse(text), &["V"], &["P"]).unwrap();
    assert!(
        gp.program.to_string().contains("let g"),
        "no shared cotangent:\n{}",
        gp.program
    );
}

/// Gradients of `text` scheduled by `schedule`, on every backend, against the unscheduled
/// program's gradients on the same backend (bit-identical when `exact`: a schedule that keeps
/// every element's sum in the same order; else to 1e-12 relative) and against central
/// differences of the unscheduled loss (`loss_name`, or the seeded outputs' when empty) along
/// one random direction per input. Returns the scheduled gradient program's text.
fn scheduled_gradients_match(
    text: &str,
    schedule: &str,
    inputs: &Tensors,
    wrt: &[&str],
    seeds: &Tensors,
    (loss_name, exact): (&str, bool),
) -> String {
    let p0 = parse(text);
    let ps = tessera::transforms::schedule::schedule(&p0, schedule)
        .unwrap_or_else(|e| panic!("{schedule}: {e}"));
    let opts = BackwardOptions::default();
    let case = GradientCase {
        inputs,
        wrt,
        seeds,
        loss_name,
        rng_seed: 99,
    };
    gradients_match(schedule, (&p0, &opts), (&ps, &opts), &case, &|_| exact)
}

/// What two gradient runs are compared on: the inputs, the inputs differentiated, the seeds,
/// the loss of the finite differences (the seeded outputs' when empty) and the seed of the
/// random directions.
struct GradientCase<'a> {
    inputs: &'a Tensors,
    wrt: &'a [&'a str],
    seeds: &'a Tensors,
    loss_name: &'a str,
    rng_seed: u64,
}

/// The gradients of the `scheduled` program and backward options, on every backend, against
/// those of `base` on the same backend — bit-identical for the inputs `exact` accepts, else to
/// 1e-12 relative — and against central differences of `base`'s loss along one random
/// direction per input. Returns the scheduled gradient program's text.
fn gradients_match(
    label: &str,
    base: (&Program, &BackwardOptions),
    scheduled: (&Program, &BackwardOptions),
    case: &GradientCase,
    exact: &dyn Fn(&str) -> bool,
) -> String {
    let GradientCase {
        inputs,
        wrt,
        seeds,
        loss_name,
        rng_seed,
    } = *case;
    let fd_runner = Runner::jit();
    let mut rng = StdRng::seed_from_u64(rng_seed);
    let mut printed = String::new();
    for (backend, runner) in backends() {
        let (gp0, got0) = backward(base.0, inputs, wrt, seeds.clone(), base.1, runner.as_ref())
            .unwrap_or_else(|e| panic!("{backend}, unscheduled: {e}"));
        let (gps, gots) = backward(
            scheduled.0,
            inputs,
            wrt,
            seeds.clone(),
            scheduled.1,
            runner.as_ref(),
        )
        .unwrap_or_else(|e| panic!("{backend}, {label}: {e}\n{}", scheduled.0));
        printed = gps.program.to_string();
        assert_eq!(parse(&printed), gps.program, "round trip:\n{printed}");
        for ((input, d0), (_, ds)) in gp0.gradients.iter().zip(&gps.gradients) {
            let (g0, gs) = (dense_values(&got0[d0]), dense_values(&gots[ds]));
            assert_eq!(g0.len(), gs.len());
            for (k, (a, b)) in g0.iter().zip(&gs).enumerate() {
                let ok = if exact(input) {
                    a.to_bits() == b.to_bits()
                } else {
                    (a - b).abs() <= 1e-12 * a.abs().max(1.0)
                };
                assert!(
                    ok,
                    "{backend}, {label}: {ds}[{k}] = {b}, unscheduled {a}\n{printed}"
                );
            }
            let values = dense_values(&inputs[input]);
            let v: Vec<f64> = values.iter().map(|_| rng.random_range(-1.0..1.0)).collect();
            let eps = 1e-6;
            let shifted = |sign: f64| {
                let moved = values
                    .iter()
                    .zip(&v)
                    .map(|(x, d)| x + sign * eps * d)
                    .collect();
                let mut ts = inputs.clone();
                ts.insert(input.clone(), as_dense(&inputs[input], moved));
                loss(&fd_runner, base.0, &ts, seeds, loss_name)
            };
            let fd = (shifted(1.0) - shifted(-1.0)) / (2.0 * eps);
            let ad: f64 = gs.iter().zip(&v).map(|(g, d)| g * d).sum();
            assert!(
                (fd - ad).abs() <= 1e-6 * fd.abs().max(ad.abs()).max(1.0),
                "{backend}, {label}: d{input} . v = {ad}, finite differences {fd}"
            );
        }
    }
    printed
}

/// Schedules on the forward program differentiate (issue 16): the tapes of per-face sums are
/// indexed by the derived loops (`s1_tape[i.0, f, i.1]`) and sized by their extents
/// (`div(size(adj, 0) - 1, 4)`), the output `y`, which the split loop indexes only through
/// `i.0 * 4 + i.1`, takes its seed's shape, and 30 faces split by 4 leave a remainder that
/// the guard skips. The gradient keeps the tiled loop order, so each `dw[f, o]` row is reused
/// by the tile's faces, and every element still adds the faces in order: bit-identical.
#[test]
fn scheduled_subdivnet_differentiates_with_its_tiles() {
    let text = include_str!("../examples/subdivnet.tess");
    let (ts, seeds) = subdivnet_inputs(21, (3, 5), 3, 5);
    let wrt = SUBDIVNET_WRT;
    let tiled = "for i.0 = 0:div(size(adj, 0) - 1, 4), f = _, i.1 = 0:3";
    for schedule in [
        "split(i, 4); reorder(f, i.1)",
        "split(i, 4)",
        "split(i, 7); reorder(f, i.1)",
        "merge(i, f)",
        "split(f, 2); reorder(i, f.0)",
    ] {
        let printed = scheduled_gradients_match(text, schedule, &ts, &wrt, &seeds, ("", true));
        if schedule == "split(i, 4); reorder(f, i.1)" {
            // The taped forward and the backward pass.
            assert_eq!(printed.matches(tiled).count(), 2, "{printed}");
            assert!(printed.contains("s1_tape[i.0, f, i.1] = s1[]"), "{printed}");
        }
    }
    // Vectorised folds reassociate; unrolled copies run backwards in the backward pass, so
    // each `dw` element adds the tile's faces in the other order.
    for schedule in [
        "split(i, 4); reorder(f, i.1); vectorize(o)",
        "split(i, 2); unroll(i.1)",
    ] {
        scheduled_gradients_match(text, schedule, &ts, &wrt, &seeds, ("", false));
    }
}

/// The same on a program with a taped per-row reduction and a 0-d loss: split with a
/// remainder (7 rows by 3), of the reduction loop, split and reorder of the row loop (legal:
/// its iterations only add into `s`, but `s` then adds them in another order), split and
/// unroll.
#[test]
fn scheduled_row_reductions_differentiate() {
    let text = "s .= 0.0
for i = _
  t .= 0.0
  for k = _
    t[] += A[i, k] * x[k]
  end
  for j = _
    s[] += t[] * t[] * B[i, j]
  end
end
";
    let mut rng = StdRng::seed_from_u64(31);
    let dense2 = "Dense(Dense(Element(0.0)))";
    let ts = named(vec![
        ("A", small(tensor(&mut rng, dense2, &[7, 4], &all))),
        ("B", small(tensor(&mut rng, dense2, &[7, 3], &all))),
        (
            "x",
            small(tensor(&mut rng, "Dense(Element(0.0))", &[4], &all)),
        ),
    ]);
    let seeds = Tensors::new();
    for schedule in ["split(i, 3)", "split(k, 3)"] {
        scheduled_gradients_match(text, schedule, &ts, &["A", "x", "B"], &seeds, ("s", true));
    }
    for schedule in [
        "split(i, 3); reorder(i.1, i.0)",
        "split(j, 2); unroll(j.1)",
        "split(i, 3); unroll(i.1)",
    ] {
        scheduled_gradients_match(text, schedule, &ts, &["A", "x", "B"], &seeds, ("s", false));
    }
}

/// The 1-based line of the `nth` (1-based) line of `printed` that starts, after its
/// indentation, with `start`: how a test names a statement of a gradient program by `@LINE`.
fn line_of(printed: &str, start: &str, nth: usize) -> usize {
    printed
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with(start))
        .nth(nth - 1)
        .unwrap_or_else(|| panic!("no {nth}. `{start}` in\n{printed}"))
        .0
        + 1
}

/// Gradients of `text` with a schedule (`gsched` of the unscheduled gradient program's
/// text) applied to the gradient program, on every backend, against the unscheduled gradient
/// program's on the same backend: bit-identical for the inputs in `exact` (every element's
/// sum in the same order), else to 1e-12 relative; and against central differences of the
/// seeded outputs along one random direction per input. Returns the scheduled gradient
/// program's text.
fn gradient_schedule_matches(
    text: &str,
    gsched: &dyn Fn(&str) -> String,
    inputs: &Tensors,
    wrt: &[&str],
    seeds: &Tensors,
    exact: &[&str],
) -> String {
    let p = parse(text);
    let seed_names: Vec<&str> = seeds.keys().map(String::as_str).collect();
    let schedule = gsched(&grad(&p, wrt, &seed_names).unwrap().program.to_string());
    let plain = BackwardOptions::default();
    let opts = BackwardOptions {
        schedule: Some(schedule.clone()),
        ..Default::default()
    };
    let case = GradientCase {
        inputs,
        wrt,
        seeds,
        loss_name: "",
        rng_seed: 5,
    };
    gradients_match(&schedule, (&p, &plain), (&p, &opts), &case, &|input| {
        exact.contains(&input)
    })
}

/// Schedules of SubdivNet's gradient program itself (`BackwardOptions::schedule`, `tessera
/// grad --grad-schedule`): `fission` of the backward loop over (i, f) between its row
/// updates over `o` and its scatter over `j` expands the cotangents `ds1..ds3` that cross
/// the cut into per-(i, f) arrays (`ds1.f.i[i, f]`), declared before the loops; the scatter
/// nest can then be reordered to `i, j, f`. Every `dw` element still adds the faces in order
/// (bit-identical); `dx` adds its own row's contributions before the neighbours' scatters
/// (1e-12), and the folds of `vectorize(o#2)` reassociate.
#[test]
fn gradient_schedules_split_subdivnet_backward() {
    let text = include_str!("../examples/subdivnet.tess");
    let (ts, seeds) = subdivnet_inputs(22, (3, 4), 3, 5);
    let wrt = SUBDIVNET_WRT;
    let cut = |g: &str| format!("fission(f#2, after @{})", line_of(g, "for o = ", 2));
    let ws = ["w0", "w1", "w2", "w3"];
    let printed = gradient_schedule_matches(text, &cut, &ts, &wrt, &seeds, &ws);
    assert!(printed.contains("ds1.f .= 0.0"), "{printed}");
    let both = |g: &str| format!("{}; fission(i#2, after for f#2)", cut(g));
    let printed = gradient_schedule_matches(text, &both, &ts, &wrt, &seeds, &ws);
    assert!(
        printed.contains("ds1.f.i[i, f] += seed_y[i, o] * w1[f, o]"),
        "{printed}"
    );
    assert!(printed.contains("for i = _, f = _, j = _"), "{printed}");
    let rows = |g: &str| format!("{}; reorder(j#2, f#3)", both(g));
    let printed = gradient_schedule_matches(text, &rows, &ts, &wrt, &seeds, &ws);
    assert!(printed.contains("for i = _, j = _, f = _"), "{printed}");
    let lanes = |g: &str| format!("{}; vectorize(o#2)", both(g));
    gradient_schedule_matches(text, &lanes, &ts, &wrt, &seeds, &[]);
}

/// `unroll_jam` of SubdivNet's backward face loop (`i#2`) by 2 and 3 (24 faces: a remainder
/// loop that runs no face; 40 faces by 3: a remainder of one face), and of the
/// taped forward loop (`i#1`): the copies' row updates `dw[f, o]` share one loop over `o`
/// and their locals (`s1`, `ds1`, ...) are one per copy, each `dw` element still adding the
/// faces in order (bit-identical); `dx` adds its own row's and the neighbours' scatters in
/// another order (1e-12). With `vectorize(o#2)` first, the jammed loop stays in lanes.
#[test]
fn gradient_schedules_jam_subdivnet_faces() {
    let text = include_str!("../examples/subdivnet.tess");
    let ws = ["w0", "w1", "w2", "w3"];
    // (By 4, the backward's kernel is over the default size limit: each bounds check's fail
    // path stores the copies' 24 locals back, `ir::locals`.)
    for (torus, t) in [((3, 4), 2), ((3, 4), 3), ((4, 5), 3)] {
        let (ts, seeds) = subdivnet_inputs(24, torus, 3, 5);
        let jam = move |_: &str| format!("unroll_jam(i#2, {t})");
        let printed = gradient_schedule_matches(text, &jam, &ts, &SUBDIVNET_WRT, &seeds, &ws);
        assert!(printed.contains("ds1.1 .= 0.0"), "{printed}");
        assert!(
            printed.contains(&format!("dw0[f, o] += seed_y[i.0 * {t} + 1, o]")),
            "{printed}"
        );
    }
    let (ts, seeds) = subdivnet_inputs(25, (3, 5), 3, 5);
    let forward = |_: &str| "unroll_jam(i#1, 4)".to_string();
    let printed = gradient_schedule_matches(text, &forward, &ts, &SUBDIVNET_WRT, &seeds, &ws);
    assert!(
        printed.contains("s1_tape[i.0 * 4 + 3, f] = s1.3[]"),
        "{printed}"
    );
    let lanes = |_: &str| "vectorize(o#2); unroll_jam(i#2, 2)".to_string();
    let printed = gradient_schedule_matches(text, &lanes, &ts, &SUBDIVNET_WRT, &seeds, &ws);
    assert!(printed.contains("for o = vectorize(_)"), "{printed}");
}

/// The same on a per-row program with a 0-d local carried between two inner loops: its
/// backward keeps `dt` (the local's cotangent) across the two backward inner loops, so
/// fission of the backward row loop expands `dt` per row.
#[test]
fn gradient_schedules_expand_a_row_local() {
    let text = "for i = _\n  t .= 0.0\n  for j = _\n    t[] += A[i, j] * x[j]\n  end\n  for j = _\n    y[i, j] += t[] * t[] * B[i, j]\n  end\nend\n";
    let mut rng = StdRng::seed_from_u64(23);
    let all = |_: &[usize], _: &mut StdRng| true;
    let ts = named(vec![
        (
            "A",
            tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[5, 4], &all),
        ),
        (
            "B",
            tensor(&mut rng, "Dense(Dense(Element(0.0)))", &[5, 4], &all),
        ),
        ("x", tensor(&mut rng, "Dense(Element(0.0))", &[4], &all)),
    ]);
    let seeds = named(vec![("y", seed(&mut rng, &[5, 4]))]);
    let wrt = ["A", "B", "x"];
    // The gradient program: the taped forward row loop `i#1` (inner loops `j#1`, `j#2`),
    // then the backward row loop `i#2`, whose first inner loop `j#3` sums `dt` and whose
    // second `j#4` reads it. Every gradient element adds its terms in the same order.
    let cut = |_: &str| "fission(i#2, after for j#3)".to_string();
    let printed = gradient_schedule_matches(text, &cut, &ts, &wrt, &seeds, &wrt);
    assert!(printed.contains("dt.i .= 0.0"), "{printed}");
    assert!(printed.contains("dx[j] += dt.i[i] * A[i, j]"), "{printed}");
    // The forward row loop's local `t` is declared again by the backward loop, which reads
    // nothing the forward one leaves in it: `t` expands there too.
    let forward = |_: &str| "fission(i#1, after for j#1); fission(i#3, after for j#3)".to_string();
    let printed = gradient_schedule_matches(text, &forward, &ts, &wrt, &seeds, &wrt);
    assert!(printed.contains("t.i[i] += A[i, j] * x[j]"), "{printed}");
}

/// An illegal gradient schedule is refused with the dependence it would break named, and the
/// gradient program is unchanged: swapping the declaration of `dw3` (its zero fill) with the
/// backward loop that adds into `dw3`.
#[test]
fn illegal_gradient_schedules_name_the_dependence() {
    let text = include_str!("../examples/subdivnet.tess");
    let gp = grad(&parse(text), &SUBDIVNET_WRT, &["y"]).unwrap();
    let before = gp.program.clone();
    let g = gp.program.to_string();
    let swap = format!(
        "swap(@{}, @{})",
        line_of(&g, "dw3 .= 0.0", 1),
        line_of(&g, "for i = _", 2)
    );
    let e = gp.scheduled(&swap).unwrap_err();
    match &e {
        tessera::error::Error::Schedule {
            dependence: Some(d),
            ..
        } => assert!(e.to_string().contains("dw3"), "{e}\n{d:?}"),
        _ => panic!("not a refusal for a dependence: {e}"),
    }
    assert_eq!(gp.program, before);
    let e = gp.scheduled("fission(q9, after @1)").unwrap_err();
    assert!(e.to_string().contains("no loop `q9`"), "{e}");
}

/// `tessera grad --grad-schedule`: the commands apply to the gradient program as
/// `--show-program` prints it (`@LINE`, `for LOOP`), give the unscheduled gradients here
/// (every element adds its terms in the same order), and a refused command is an error that
/// names the dependence.
#[test]
fn grad_schedule_flag() {
    use common::cli::{Dir, ok, tessera};
    let d = Dir::new("grad-schedule");
    let p = d.file(
        "row.tess",
        "for i = _\n  t .= 0.0\n  for j = _\n    t[] += A[i, j] * x[j]\n  end\n  for j = _\n    y[i, j] += t[] * B[i, j]\n  end\nend\n",
    );
    let a = d.file(
        "A.tns",
        "# shape: 2x2\n1 1 1.5\n1 2 2.0\n2 1 -1.0\n2 2 0.5\n",
    );
    let b = d.file(
        "B.tns",
        "# shape: 2x2\n1 1 1.0\n1 2 -2.0\n2 1 3.0\n2 2 0.25\n",
    );
    let x = d.file("x.tns", "# shape: 2\n1 1.0\n2 -3.0\n");
    let g = d.file(
        "G.tns",
        "# shape: 2x2\n1 1 1.0\n1 2 2.0\n2 1 -1.0\n2 2 1.0\n",
    );
    let dense = |f: &str, n: &str| format!("{n}={f}@Dense(Dense(Element(0.0)))");
    let base = [
        "grad".to_string(),
        p.clone(),
        "--in".into(),
        dense(&a, "A"),
        "--in".into(),
        dense(&b, "B"),
        "--in".into(),
        format!("x={x}@Dense(Element(0.0))"),
        "--wrt".into(),
        "A,x".into(),
        "--seed".into(),
        dense(&g, "y"),
        "--out".into(),
        "dA".into(),
        "--out".into(),
        "dx".into(),
        "--backend".into(),
        "jit".into(),
    ];
    let run = |extra: &[&str]| {
        let mut v: Vec<&str> = base.iter().map(String::as_str).collect();
        v.extend(extra);
        tessera(&v)
    };
    let plain = ok(&base.iter().map(String::as_str).collect::<Vec<_>>());
    let cut = run(&[
        "--grad-schedule",
        "fission(i#2, after for j#3)",
        "--show-program",
    ]);
    assert!(
        cut.status.success(),
        "{}",
        String::from_utf8_lossy(&cut.stderr)
    );
    let out = String::from_utf8_lossy(&cut.stdout).to_string();
    assert!(out.contains("# dt.i .= 0.0"), "{out}");
    let results: String = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(results, plain);
    let bad = run(&["--grad-schedule", "reorder(j#3, i#2)"]);
    assert!(!bad.status.success());
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("reorder(j#3, i#2)"), "{e}");
}

/// Zero-adjoint guards (`transforms::grad::guard`): the gradient of `a`, zero wherever the
/// clamp is flat, propagates under `if da[] != 0.0`; `z`'s is computed only where its clamp's
/// conditions let it through (`if !(...)`); `t`, read only by a condition, has a
/// gradient nothing adds to, so it is not propagated at all. Gradients equal central
/// differences on every backend, and equal bit for bit (seeds with -0.0, NaN and Inf
/// included) those of the same program with every guard removed.
#[test]
fn zero_gradients_of_lets_skip_their_propagation() {
    let text = "y .= 0.0
for i = _, j = _
  let a = x[i] * w[j], t = x[i] - 2.0 * w[j], s = x[i] + w[j]
    let c = min(max(a, -1.0), 1.0)
      let z = min(max(ifelse(t > 0.0, c, -c) * s * 4.0, -3.0), 3.0)
        y[i, j] = 1.0 / (1.0 + exp(-z))
      end
    end
  end
end";
    let mut rng = StdRng::seed_from_u64(23);
    let x = small(tensor(&mut rng, "Dense(Element(0.0))", &[7], &all));
    let w = small(tensor(&mut rng, "Dense(Element(0.0))", &[5], &all));
    let ts = named(vec![("x", x), ("w", w)]);
    let seeds = named(vec![("y", seed(&mut rng, &[7, 5]))]);
    check(text, &ts, &["x", "w"], &seeds, "");

    let gp = grad(&parse(text), &["x", "w"], &["y"]).unwrap();
    let printed = gp.program.to_string();
    assert!(printed.contains("if da[] != 0.0"), "{printed}");
    // `z`'s gradient (an `exp` and a division) only where the clamp is not flat.
    assert!(
        printed.contains("if !(") && printed.contains("dz .= 0.0"),
        "{printed}"
    );
    assert!(
        !printed.contains("+= dt[]") && !printed.contains("-dt[]"),
        "{printed}"
    );

    // The guards removed: `if d[] != 0.0 ... end` becomes a block.
    fn unguard(stmts: &[tessera::notation::ast::Stmt]) -> Vec<tessera::notation::ast::Stmt> {
        use tessera::notation::ast::StmtKind;
        stmts
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.kind = match s.kind {
                    StmtKind::If {
                        cond,
                        then,
                        otherwise,
                    } if otherwise.is_empty() => {
                        let _ = cond;
                        StmtKind::Block(unguard(&then))
                    }
                    StmtKind::Let { name, value, body } => StmtKind::Let {
                        name,
                        value,
                        body: unguard(&body),
                    },
                    StmtKind::Loop {
                        index,
                        extent,
                        body,
                        parallel,
                    } => StmtKind::Loop {
                        index,
                        extent,
                        body: unguard(&body),
                        parallel,
                    },
                    other => other,
                };
                s
            })
            .collect()
    }
    let plain = gp.program.with_body(unguard(&gp.program.body));
    assert!(!plain.to_string().contains("if "), "{plain}");
    let mut special = dense_values(&seeds["y"]);
    special[0] = -0.0;
    special[3] = f64::NAN;
    special[8] = f64::INFINITY;
    special[9] = -0.0;
    let mut inputs = ts.clone();
    inputs.insert(gp.seeds[0].1.clone(), as_dense(&seeds["y"], special));
    for (backend, runner) in backends() {
        let Some(runner) = runner else { continue };
        let run = |p: &Program| {
            let mut t = inputs.clone();
            create_tensors(p, &mut t, &|_, rank, fill| Format::dense(rank, fill)).unwrap();
            let c = runner.compile(p, &common::formats_of(&t)).unwrap();
            runner.execute(&c, &mut t).unwrap();
            t
        };
        let (a, b) = (run(&gp.program), run(&plain));
        for (_, d) in &gp.gradients {
            let (ga, gb) = (dense_values(&a[d]), dense_values(&b[d]));
            for (k, (u, v)) in ga.iter().zip(&gb).enumerate() {
                assert!(
                    u.to_bits() == v.to_bits() || (u.is_nan() && v.is_nan()),
                    "{backend}: {d}[{k}] = {u} guarded, {v} unguarded\n{printed}"
                );
            }
        }
    }
}
