//! What the gradient workloads (issue 16: Longformer, GAT, SubdivNet, SoftRas) share: timing a
//! forward program and its gradient program on one runner, checking the gradients against
//! finite differences, and writing tensors for the peers' scripts.

use std::collections::BTreeMap;
use std::time::Instant;
use tessera::api::grad::{bind, create_tensors};
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::grad::grad;

/// Medians and compile times of a forward program and of its gradient program (forward and
/// backward in one kernel), with the tensors of their last runs.
pub struct Study {
    pub forward_ms: f64,
    pub grad_ms: f64,
    pub forward_compile_ms: f64,
    pub grad_compile_ms: f64,
    /// Every tensor after the forward program's last run.
    pub forward: BTreeMap<String, Tensor>,
    /// The gradient of each `wrt` input, by the input's name.
    pub gradients: BTreeMap<String, Tensor>,
}

/// Run `program` (text, with the schedule commands `schedule` applied) on `inputs` `repeats`
/// times, then its gradient with respect to `wrt` with the cotangents `seeds` (by output
/// name), with the commands `grad_schedule` applied to the gradient program, as many times;
/// fresh tensors each run.
pub fn run(
    runner: &Runner,
    (program, schedule, grad_schedule): (&str, Option<&str>, Option<&str>),
    inputs: &BTreeMap<String, Tensor>,
    wrt: &[&str],
    seeds: BTreeMap<String, Tensor>,
    repeats: usize,
) -> Result<Study> {
    let mut program = parse_program(program)?;
    if let Some(text) = schedule {
        program = tessera::transforms::schedule::schedule(&program, text)?;
    }
    let timed = |p: &tessera::notation::ast::Program, tensors: &BTreeMap<String, Tensor>| {
        let t0 = Instant::now();
        let kernel = runner.compile(p, &tessera::api::formats_of(tensors))?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (mut times, mut last) = (vec![], tensors.clone());
        for _ in 0..repeats.max(1) {
            last = tensors.clone();
            let t = Instant::now();
            runner.execute(&kernel, &mut last)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        Ok::<_, Error>((compile_ms, super::median(times), last))
    };
    // Workspaces the program declares (loop-body locals) and that `inputs` lack: dense.
    let mut inputs = inputs.clone();
    create_tensors(&program, &mut inputs, &|_, rank, fill| {
        Format::dense(rank, fill)
    })?;
    let inputs = &inputs;
    let (forward_compile_ms, forward_ms, forward) = timed(&program, inputs)?;
    let gp = grad(
        &program,
        wrt,
        &seeds.keys().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let gp = match grad_schedule {
        Some(text) => gp.scheduled(text)?,
        None => gp,
    };
    let mut all = inputs.clone();
    bind(&gp, &mut all, seeds, &BTreeMap::new())?;
    let (grad_compile_ms, grad_ms, done) = timed(&gp.program, &all)?;
    let gradients = gp
        .gradients
        .iter()
        .map(|(input, g)| (input.clone(), done[g].clone()))
        .collect();
    Ok(Study {
        forward_ms,
        grad_ms,
        forward_compile_ms,
        grad_compile_ms,
        forward,
        gradients,
    })
}

/// `--check`: the gradients of a study against central finite differences along one random
/// direction per input. For each `wrt` input A (dense), with v uniform in [-1, 1) of A's shape,
/// compares `(L(A + eps v) - L(A - eps v)) / (2 eps)` with `sum(dA .* v)`, where L is the sum
/// of each seeded output times its seed, computed by the forward program on `runner`. Fails
/// when they differ by more than `rtol` relative to the larger; returns one JSON field with
/// the relative errors by input.
pub fn check(
    runner: &Runner,
    program: &str,
    inputs: &BTreeMap<String, Tensor>,
    seeds: &BTreeMap<String, Tensor>,
    study: &Study,
    rtol: f64,
) -> Result<String> {
    let program = parse_program(program)?;
    let mut inputs = inputs.clone();
    create_tensors(&program, &mut inputs, &|_, rank, fill| {
        Format::dense(rank, fill)
    })?;
    let inputs = &inputs;
    let kernel = runner.compile(&program, &tessera::api::formats_of(inputs))?;
    let loss = |tensors: &BTreeMap<String, Tensor>| -> Result<f64> {
        let mut run = tensors.clone();
        runner.execute(&kernel, &mut run)?;
        Ok(seeds
            .iter()
            .map(|(o, s)| dot(&values(&run[o]), &values(s)))
            .sum())
    };
    let eps = 1e-6;
    let mut rng = super::Uniform(7);
    let mut errors = vec![];
    for (input, g) in &study.gradients {
        let a = &inputs[input];
        if !a.format.is_dense() {
            return Err(Error::Usage(format!(
                "--check: `{input}` is not dense (only dense inputs are perturbed)"
            )));
        }
        let base = values(a);
        let v: Vec<f64> = base.iter().map(|_| 2.0 * rng.next() - 1.0).collect();
        let shifted = |sign: f64| -> Result<f64> {
            let mut ts = inputs.clone();
            let moved = base
                .iter()
                .zip(&v)
                .map(|(x, d)| x + sign * eps * d)
                .collect();
            ts.insert(input.clone(), dense(&a.shape, moved)?);
            loss(&ts)
        };
        let fd = (shifted(1.0)? - shifted(-1.0)?) / (2.0 * eps);
        let ad = dot(&values(g), &v);
        let err = (fd - ad).abs() / fd.abs().max(ad.abs()).max(1e-300);
        if err > rtol {
            return Err(Error::Usage(format!(
                "--check: d{input} along a random direction is {ad:.12e}, finite differences give {fd:.12e} (relative error {err:.2e} > {rtol:e})"
            )));
        }
        errors.push(format!("\"{input}\": {err:.2e}"));
    }
    Ok(format!("\"check_rel_err\": {{{}}}", errors.join(", ")))
}

fn values(t: &Tensor) -> Vec<f64> {
    match t.to_dense() {
        Buffer::F64(v) => v.into_vec(),
        _ => vec![],
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn format(text: &str) -> Result<Format> {
    Format::parse(text, None)
}

/// A row-major dense tensor of f64 values.
pub fn dense(shape: &[usize], values: Vec<f64>) -> Result<Tensor> {
    Tensor::from_dense(
        &Format::dense(shape.len(), tessera::Scalar::F64(0.0)),
        shape,
        &Buffer::F64(values.into()),
    )
}

/// Write `t` densely as `DIR/NAME.npy`.
pub fn npy(dir: &str, name: &str, t: &Tensor) -> Result<()> {
    let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut f = std::fs::File::create(format!("{dir}/{name}.npy")).map_err(io)?;
    let data = DenseData {
        shape: t.shape.clone(),
        values: t.try_to_dense()?,
    };
    tessera::io::npy::write_npy(&mut f, &data)
}

/// Write each `wrt` input as `DIR/NAME.npy` and its gradient as `DIR/dNAME.npy`.
pub fn dump_gradients(
    dir: &str,
    wrt: &[&str],
    inputs: &BTreeMap<String, Tensor>,
    study: &Study,
) -> Result<()> {
    for name in wrt {
        npy(dir, name, &inputs[*name])?;
        npy(dir, &format!("d{name}"), &study.gradients[*name])?;
    }
    Ok(())
}

/// The sum of a float tensor's values (a checksum for the report).
pub fn checksum(t: &Tensor) -> f64 {
    match t.to_dense() {
        Buffer::F64(v) => v.iter().sum(),
        _ => f64::NAN,
    }
}

impl Study {
    /// The report's JSON fields: times, compile times and checksums of `output` and of every
    /// gradient (`sum_dQ` for input `Q`).
    pub fn json(&self, output: &str) -> String {
        let mut sums = vec![format!(
            "\"sum_{output}\": {:.10e}",
            checksum(&self.forward[output])
        )];
        for (input, g) in &self.gradients {
            sums.push(format!("\"sum_d{input}\": {:.10e}", checksum(g)));
        }
        format!(
            "\"forward_ms\": {:.3}, \"grad_ms\": {:.3}, \"forward_compile_ms\": {:.1}, \
             \"grad_compile_ms\": {:.1}, {}",
            self.forward_ms,
            self.grad_ms,
            self.forward_compile_ms,
            self.grad_compile_ms,
            sums.join(", ")
        )
    }
}
