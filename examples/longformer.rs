//! Longformer's sliding-window attention (one head), forward and forward + backward, with the
//! band of the window stored as a `SparseBand` level: FreeTensor's Longformer workload (issue
//! 16), differentiated by Tessera's `grad` with respect to Q, K and V.
//!
//! ```text
//! cargo run --release --example longformer -- [N] [D] [W] [REPEATS] [--dump DIR] [--backend jit|c] [--check]
//! #   defaults 4096 64 32 5
//! ```
//!
//! N tokens, D features, a window of 2W + 1 (W = 32: Longformer's 65). Q, K, V and the
//! cotangent G of the output are uniform in [-1, 1) from a fixed seed. The forward program is
//! `examples/longformer.tess` (scores on the band, softmax over each window, the weighted sum of
//! V); the backward program is what `transforms::grad` makes of it with the seed `O = G`, run
//! after the forward part in one kernel. Prints one JSON line: the median times of the forward
//! kernel and of the gradient kernel (forward + backward), compile times, and checksums;
//! `--check` compares the gradients with central finite differences along a random direction
//! (relative 1e-6).
//! `--dump DIR` writes Q, K, V, G and the results O, dQ, dK, dV as `.npy`, for
//! `bench/longformer.py`, which runs PyTorch on the same data and compares.

mod common;

use common::grad_study::{self, dense, format, npy};
use common::{Args, Uniform};
use std::collections::BTreeMap;
use tessera::error::Result;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const PROGRAM: &str = include_str!("longformer.tess");

fn uniform(rng: &mut Uniform, n: usize) -> Vec<f64> {
    (0..n).map(|_| 2.0 * rng.next() - 1.0).collect()
}

/// The band |i - j| <= w of an n × n matrix, ones stored.
fn band(n: usize, w: usize) -> Result<Tensor> {
    let (mut rows, mut cols) = (vec![], vec![]);
    for i in 0..n {
        for j in i.saturating_sub(w)..(i + w + 1).min(n) {
            rows.push(i as i64);
            cols.push(j as i64);
        }
    }
    let ones = Buffer::F64(vec![1.0; rows.len()].into());
    Tensor::from_coo(
        &format("Dense(SparseBand(Element(0.0)))")?,
        &[n, n],
        &[rows, cols],
        &ones,
        |a, _| a,
    )
}

fn main() -> Result<()> {
    let args = Args::from_env();
    let n: usize = args.num(0, 4096)?;
    let d: usize = args.num(1, 64)?;
    let w: usize = args.num(2, 32)?;
    let repeats: usize = args.num(3, 5)?.max(1);
    let runner = args.runner()?;

    let mut rng = Uniform(16);
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for name in ["Q", "K", "V"] {
        inputs.insert(name.into(), dense(&[n, d], uniform(&mut rng, n * d))?);
    }
    let seed = dense(&[n, d], uniform(&mut rng, n * d))?;
    inputs.insert("B".into(), band(n, w)?);
    let scores = format("Dense(SparseBand(Element(0.0)))")?;
    inputs.insert("S".into(), Tensor::empty(&scores, &[n, n])?);
    inputs.insert("z".into(), dense(&[n], vec![0.0; n])?);
    inputs.insert("O".into(), dense(&[n, d], vec![0.0; n * d])?);

    let seeds = BTreeMap::from([("O".to_string(), seed.clone())]);
    let study = grad_study::run(
        &runner,
        (
            PROGRAM,
            args.schedule.as_deref(),
            args.grad_schedule.as_deref(),
        ),
        &inputs,
        &["Q", "K", "V"],
        seeds.clone(),
        repeats,
    )?;
    let check = if args.check {
        let fields = grad_study::check(&runner, PROGRAM, &inputs, &seeds, &study, 1e-6)?;
        format!(", {fields}")
    } else {
        String::new()
    };
    if let Some(dir) = &args.dump {
        grad_study::dump_gradients(dir, &["Q", "K", "V"], &inputs, &study)?;
        npy(dir, "G", &seed)?;
        npy(dir, "O", &study.forward["O"])?;
    }
    println!(
        "{{\"n\": {n}, \"d\": {d}, \"w\": {w}, \"backend\": \"{}\", {}{check}}}",
        args.backend.as_deref().unwrap_or("jit"),
        study.json("O")
    );
    Ok(())
}
